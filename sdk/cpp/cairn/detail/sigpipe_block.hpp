// Blocks SIGPIPE in the calling thread for the object's lifetime.
//
// Gloo's TCP transport writes to sockets without MSG_NOSIGNAL, so a peer rank that died
// would kill this process with SIGPIPE instead of letting the write fail. Threads started
// while the block is in place (Gloo's event loop) inherit it for good. A SIGPIPE raised
// meanwhile is consumed before the mask is restored, so it cannot fire later.
#pragma once

#include <csignal>
#include <ctime>

#include <pthread.h>

namespace cairn::sdk_detail {

class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlock() {
    if (sigismember(&old_, SIGPIPE)) return;  // was blocked already: leave it as it was
    sigset_t pending;
    sigemptyset(&pending);
    if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
      const timespec zero{};
      sigtimedwait(&pipe_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
};

}  // namespace cairn::sdk_detail
