#include "peer/link_watch.h"

#include <fcntl.h>
#include <unistd.h>

namespace cairn {

LinkWatch::Registration::~Registration() {
  std::lock_guard lock(watch_->mutex_);
  watch_->registered_.erase(this);
}

std::unique_ptr<LinkWatch::Registration> LinkWatch::ahead(const std::shared_ptr<LinkWatch>& watch) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return nullptr;
  std::unique_ptr<Registration> r(new Registration(watch));
  r->wake_read_.reset(fds[0]);
  r->wake_write_.reset(fds[1]);
  std::lock_guard lock(watch->mutex_);
  watch->registered_.insert(r.get());
  return r;
}

std::unique_ptr<LinkWatch::Registration> LinkWatch::watch(const std::shared_ptr<LinkWatch>& watch,
                                                          PeerConnection& peer) {
  auto r = ahead(watch);
  if (r) peer.set_release(r->wake_read_.get(), &r->released_, watch->reason_);
  return r;
}

void LinkWatch::release_all() {
  std::lock_guard lock(mutex_);
  for (Registration* r : registered_) {
    // The flag before the byte: a wait that sees the byte sees the flag (peer_connection.h).
    r->released_.store(true);
    const char byte = 1;
    (void)!::write(r->wake_write_.get(), &byte, 1);
  }
}

}  // namespace cairn
