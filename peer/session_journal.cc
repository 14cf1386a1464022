#include "peer/session_journal.h"

#include <array>

namespace cairn {

bool is_session_frame_type(std::string_view type) {
  static constexpr std::array<std::string_view, 6> kTypes = {
      "session_open", "session", "session_resume", "session_resumed", "session_end", "goodbye"};
  for (std::string_view t : kTypes)
    if (t == type) return true;
  return false;
}

void SessionJournal::sent(const Json& message, std::string frame) {
  ++sent_;
  (void)message;
  kept_bytes_ += frame.size();
  kept_.push_back(std::move(frame));
  // Over the bound the oldest go: a resume that needs them is refused (replay_after).
  while (kept_bytes_ > max_bytes_ && !kept_.empty()) {
    kept_bytes_ -= kept_.front().size();
    kept_.pop_front();
    ++first_kept_;
  }
}

void SessionJournal::received(const Json& message) {
  ++received_;
  if (message.value("type", Json()) != "heartbeat") return;
  const Json count = message.value("received", Json());
  if (count.is_number_integer()) acknowledge(count.get<int64_t>());
}

void SessionJournal::acknowledge(int64_t count) {
  if (count > sent_) count = sent_;  // a peer cannot have more than was sent
  if (count > acknowledged_) acknowledged_ = count;
  while (first_kept_ <= count && !kept_.empty()) {
    kept_bytes_ -= kept_.front().size();
    kept_.pop_front();
    ++first_kept_;
  }
  if (kept_.empty() && first_kept_ <= count) first_kept_ = count + 1;
}

Result<std::vector<std::string>> SessionJournal::replay_after(int64_t count) const {
  if (count < 0 || count > sent_)
    return Status::BadInput("the peer says it received " + std::to_string(count) + " frames, but " +
                            std::to_string(sent_) + " were sent");
  if (count + 1 < first_kept_)
    return Status::Failed("frames " + std::to_string(count + 1) + " to " +
                          std::to_string(first_kept_ - 1) + " are no longer kept (more than " +
                          std::to_string(max_bytes_ >> 20) + " MiB went unacknowledged)");
  std::vector<std::string> out;
  for (int64_t n = count + 1; n <= sent_; ++n)
    out.push_back(kept_[static_cast<size_t>(n - first_kept_)]);
  return out;
}

}  // namespace cairn
