#include "peer/frame.h"

#include <algorithm>
#include <cstring>

#include "common/untrusted_json.h"

namespace cairn {

namespace {

Status check_message(const Json& message) {
  if (!message.is_object()) return Status::BadInput("frame is not a JSON object");
  auto type = message.find("type");
  if (type == message.end() || !type->is_string())
    return Status::BadInput("frame has no string \"type\"");
  return Status::Ok();
}

uint32_t read_length(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | uint32_t{u[3]};
}

}  // namespace

Result<std::string> encode_frame(const Json& message) {
  Status valid = check_message(message);
  if (!valid.ok()) return valid;
  const std::string body = message.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (body.size() > kMaxFrameBytes)
    return Status::BadInput("message of " + std::to_string(body.size()) +
                            " bytes is over the frame bound of " + std::to_string(kMaxFrameBytes));
  std::string frame;
  frame.reserve(kFrameHeaderBytes + body.size());
  const auto n = static_cast<uint32_t>(body.size());
  frame.push_back(static_cast<char>(n >> 24));
  frame.push_back(static_cast<char>(n >> 16));
  frame.push_back(static_cast<char>(n >> 8));
  frame.push_back(static_cast<char>(n));
  frame += body;
  return frame;
}

void FrameDecoder::feed(std::string_view bytes) {
  if (error_) return;
  // Drop the consumed prefix before growing, so the buffer stays near one frame.
  if (start_ > 0 && start_ >= buffer_.size() / 2) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
  buffer_.append(bytes);
}

size_t FrameDecoder::wanted() const {
  const size_t have = buffered();
  if (error_) return 0;
  if (have < kFrameHeaderBytes) return kFrameHeaderBytes - have;
  const uint32_t length = read_length(buffer_.data() + start_);
  if (length > kMaxFrameBytes) return 0;
  const size_t total = kFrameHeaderBytes + length;
  return have >= total ? 0 : total - have;
}

Result<std::optional<Json>> FrameDecoder::next() {
  if (error_) return *error_;
  const size_t have = buffered();
  if (have < kFrameHeaderBytes) return std::optional<Json>();
  const uint32_t length = read_length(buffer_.data() + start_);
  if (length > kMaxFrameBytes) {
    error_ = Status::BadInput("frame of " + std::to_string(length) +
                              " bytes is over the bound of " + std::to_string(kMaxFrameBytes));
    return *error_;
  }
  if (have < kFrameHeaderBytes + length) return std::optional<Json>();
  const std::string_view body(buffer_.data() + start_ + kFrameHeaderBytes, length);
  start_ += kFrameHeaderBytes + length;
  auto parsed = parse_untrusted_json(body);
  if (!parsed.ok()) {
    error_ = Status::BadInput("malformed frame: " + parsed.status().message());
    return *error_;
  }
  Status valid = check_message(*parsed);
  if (!valid.ok()) {
    error_ = Status::BadInput("malformed frame: " + valid.message());
    return *error_;
  }
  return std::optional<Json>(std::move(*parsed));
}

size_t FrameDecoder::take_raw(char* out, size_t n) {
  const size_t take = std::min(n, buffered());
  std::memcpy(out, buffer_.data() + start_, take);
  start_ += take;
  return take;
}

}  // namespace cairn
