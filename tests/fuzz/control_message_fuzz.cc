// libFuzzer target: one control-channel line, as the coordinator takes it in
// (engine/coordinator/coordinator_messages.cc, Coordinator::handle_line) up to the point
// where a message is dispatched or a training batch stored: the untrusted-JSON bounds, the
// training-batch fast path and the slow path that drops non-numeric metrics and serializes
// what is stored. Any crash, sanitizer report or broken invariant (abort) is a finding.
//
// Built with clang's -fsanitize=fuzzer,address where Debian's clang and libclang-rt are
// installed (CMakeLists.txt); ctest runs it over tests/fuzz/corpus/control_message for a
// bounded number of runs. To fuzz longer:
//   build/fuzz/control_message_fuzz -max_total_time=600 tests/fuzz/corpus/control_message
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/untrusted_json.h"
#include "engine/coordinator/metric_values.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using cairn::Json;
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  // A batch the fast path stores as sent must be one every reader can parse and use.
  if (cairn::training_batch_is_numeric(line)) {
    auto parsed = cairn::parse_untrusted_json(line);
    check(parsed.ok());
    check(parsed->is_object() && parsed->contains("reports") && (*parsed)["reports"].is_array());
    Json copy = *parsed;
    check(cairn::drop_non_numeric_metrics(copy).empty());
    return 0;
  }
  auto msg = cairn::parse_untrusted_json(line);
  if (!msg.ok()) {
    check(!msg.status().message().empty());
    return 0;
  }
  // What the slow path stores and what a reply quotes: serialized, so never too deep.
  Json batch = *msg;
  cairn::drop_non_numeric_metrics(batch);
  const std::string stored = batch.dump(-1, ' ', false, Json::error_handler_t::replace);
  check(cairn::json_depth_within(stored));
  if (msg->is_object() && msg->contains("metrics") && (*msg)["metrics"].is_object())
    (void)cairn::non_numeric_metrics((*msg)["metrics"]);
  return 0;
}
