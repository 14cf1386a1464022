#include "peer/control_frames.h"

#include <array>

namespace cairn {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> decode_table() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
  return t;
}
constexpr auto kDecode = decode_table();

Result<int64_t> positive(const Json& message, const char* field, int64_t max) {
  auto it = message.find(field);
  if (it == message.end() || !it->is_number_integer())
    return Status::BadInput(std::string("no integer \"") + field + "\"");
  const int64_t v = it->get<int64_t>();
  if (v < 1 || v > max)
    return Status::BadInput(std::string("\"") + field + "\" " + std::to_string(v) +
                            " is out of range (1.." + std::to_string(max) + ")");
  return v;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = (uint32_t{static_cast<unsigned char>(bytes[i])} << 16) |
                       (uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8) |
                       uint32_t{static_cast<unsigned char>(bytes[i + 2])};
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  const size_t left = bytes.size() - i;
  if (left > 0) {
    uint32_t v = uint32_t{static_cast<unsigned char>(bytes[i])} << 16;
    if (left == 2) v |= uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += left == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return Status::BadInput("base64 of a length that is not 4k");
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int v[4];
    int pad = 0;
    for (int j = 0; j < 4; ++j) {
      const char c = text[i + j];
      if (c == '=' && last && j >= 2) {
        v[j] = 0;
        ++pad;
        continue;
      }
      if (pad > 0) return Status::BadInput("base64 with data after its padding");
      v[j] = kDecode[static_cast<unsigned char>(c)];
      if (v[j] < 0) return Status::BadInput("not base64");
    }
    const uint32_t n =
        (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) | (uint32_t(v[2]) << 6) | uint32_t(v[3]);
    // Canonical only: the bits a padded group leaves over are zero, so one text means one
    // byte string.
    if ((pad == 1 && (n & 0xff) != 0) || (pad == 2 && (n & 0xffff) != 0))
      return Status::BadInput("not canonical base64");
    out += static_cast<char>((n >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((n >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(n & 0xff);
  }
  return out;
}

bool is_control_frame_type(std::string_view type) {
  return type == "control_open" || type == "control_data" || type == "control_ack" ||
         type == "control_close";
}

Result<ControlFrame> parse_control_frame(const Json& message) {
  auto bad = [](const std::string& why) { return Status::BadInput("bad control frame: " + why); };
  if (!message.is_object() || !message.contains("type") || !message["type"].is_string())
    return bad("no type");
  const std::string type = message["type"].get<std::string>();
  ControlFrame frame;
  if (type == "control_open") {
    frame.kind = ControlFrame::Kind::kOpen;
  } else if (type == "control_data") {
    frame.kind = ControlFrame::Kind::kData;
  } else if (type == "control_ack") {
    frame.kind = ControlFrame::Kind::kAck;
  } else if (type == "control_close") {
    frame.kind = ControlFrame::Kind::kClose;
  } else {
    return bad("not a control frame type");  // the peer's text is not echoed into a log
  }
  auto stream = positive(message, "stream", INT64_MAX);
  if (!stream.ok()) return bad(stream.status().message());
  frame.stream = *stream;
  switch (frame.kind) {
    case ControlFrame::Kind::kOpen: {
      auto rank = message.find("rank");
      if (rank == message.end() || !rank->is_number_integer() || rank->get<int64_t>() < 0)
        return bad("no rank (a non-negative integer)");
      frame.rank = rank->get<int64_t>();
      break;
    }
    case ControlFrame::Kind::kData: {
      auto data = message.find("data");
      if (data == message.end() || !data->is_string()) return bad("no string \"data\"");
      const std::string& text = data->get_ref<const std::string&>();
      if (text.empty() || text.size() > (kControlChunkBytes + 2) / 3 * 4)
        return bad("data of " + std::to_string(text.size()) + " base64 characters (1 to " +
                   std::to_string(kControlChunkBytes) + " bytes are sent)");
      auto bytes = base64_decode(text);
      if (!bytes.ok()) return bad(bytes.status().message());
      if (bytes->size() > kControlChunkBytes)
        return bad("data of " + std::to_string(bytes->size()) + " bytes (at most " +
                   std::to_string(kControlChunkBytes) + " are sent)");
      frame.data = std::move(*bytes);
      break;
    }
    case ControlFrame::Kind::kAck: {
      auto bytes = positive(message, "bytes", static_cast<int64_t>(kControlWindowBytes));
      if (!bytes.ok()) return bad(bytes.status().message());
      frame.bytes = *bytes;
      break;
    }
    case ControlFrame::Kind::kClose:
      break;
  }
  return frame;
}

Json control_open_message(int64_t stream, int64_t rank) {
  return Json{{"type", "control_open"}, {"stream", stream}, {"rank", rank}};
}
Json control_data_message(int64_t stream, std::string_view data) {
  return Json{{"type", "control_data"}, {"stream", stream}, {"data", base64_encode(data)}};
}
Json control_ack_message(int64_t stream, int64_t bytes) {
  return Json{{"type", "control_ack"}, {"stream", stream}, {"bytes", bytes}};
}
Json control_close_message(int64_t stream) {
  return Json{{"type", "control_close"}, {"stream", stream}};
}

}  // namespace cairn
