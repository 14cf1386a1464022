// libFuzzer target: bytes as an authenticated peer's TLS stream delivers them to the frame
// decoder (peer/frame.h), split into reads at points the input chooses, and each message
// decoded checked as a hello (peer/peer_protocol.h), as a launch (peer/rank_messages.h) and
// as a relayed control frame (peer/control_frames.h) and as rank output, as the agent and
// the coordinator do.
// Any crash, sanitizer report or broken invariant (abort) is a finding.
//
// Built like control_message_fuzz (CMakeLists.txt); ctest runs it over
// tests/fuzz/corpus/peer_frame for a bounded number of runs. To fuzz longer:
//   build/fuzz/peer_frame_fuzz -max_total_time=600 tests/fuzz/corpus/peer_frame
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/file_util.h"
#include "common/untrusted_json.h"
#include "peer/control_frames.h"
#include "peer/frame.h"
#include "peer/peer_protocol.h"
#include "peer/rank_messages.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using cairn::Json;
  if (size == 0) return 0;
  // The first byte picks the read size, so frames straddle reads in every way.
  const size_t chunk = 1 + data[0] % 64;
  const std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
  cairn::FrameDecoder decoder;
  bool failed = false;
  for (size_t at = 0; at < stream.size() && !failed; at += chunk) {
    decoder.feed(stream.substr(at, chunk));
    for (;;) {
      auto message = decoder.next();
      if (!message.ok()) {
        check(!message.status().message().empty());
        check(message.status().message().find('\n') == std::string::npos);
        check(!decoder.next().ok());  // an error is final
        failed = true;
        break;
      }
      if (!message->has_value()) {
        check(decoder.wanted() > 0);
        break;
      }
      const Json& value = **message;
      check(value.is_object() && value.contains("type") && value["type"].is_string());
      // What was accepted can be sent back as it is, and reads back the same.
      auto frame = cairn::encode_frame(value);
      if (frame.ok()) {
        cairn::FrameDecoder again;
        again.feed(*frame);
        auto copy = again.next();
        check(copy.ok() && copy->has_value() && **copy == value);
        check(cairn::json_depth_within(frame->substr(cairn::kFrameHeaderBytes)));
      }
      (void)cairn::check_hello(value);
      // A launch the agent accepts never names a directory outside its own.
      auto launch = cairn::parse_launch(value);
      if (launch.ok()) {
        check(!launch->argv.empty() && cairn::stays_below(launch->cwd));
        // Path kinds are only the known ones (rank_messages.h).
        for (const auto& [name, kind] : launch->paths) {
          bool known = false;
          for (const char* k : cairn::kLaunchPathKinds) known = known || kind == k;
          check(known && !name.empty());
        }
      }
      // A relayed control frame (control_frames.h): what is accepted is within its bounds
      // and encodes back to the same frame.
      auto control = cairn::parse_control_frame(value);
      if (control.ok()) {
        check(control->stream >= 1);
        if (control->kind == cairn::ControlFrame::Kind::kData) {
          check(!control->data.empty() && control->data.size() <= cairn::kControlChunkBytes);
          check(cairn::control_data_message(control->stream, control->data)["data"] ==
                value["data"]);
        }
        if (control->kind == cairn::ControlFrame::Kind::kAck)
          check(control->bytes >= 1 &&
                control->bytes <= static_cast<int64_t>(cairn::kControlWindowBytes));
      } else {
        check(control.status().message().find('\n') == std::string::npos);
      }
      // Output frames (rank_messages.h): what decodes is sent back the same way.
      if (auto output = cairn::output_bytes(value); output.ok()) {
        auto again = cairn::output_bytes(cairn::output_message(1, *output));
        check(again.ok() && *again == *output);
      }
      // Base64 text round-trips when it decodes (canonical only).
      if (value.contains("data") && value["data"].is_string()) {
        auto bytes = cairn::base64_decode(value["data"].get<std::string>());
        if (bytes.ok()) check(cairn::base64_encode(*bytes) == value["data"].get<std::string>());
      }
    }
  }
  return 0;
}
