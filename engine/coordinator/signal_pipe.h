// Turns SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR2 (`cairn kill`) and SIGWINCH (a resized
// terminal) into bytes on a pipe that the coordinator polls, so signals are handled in the
// loop, not inside a handler. One may exist at a time.
#pragma once

#include <signal.h>

#include "common/file_util.h"

namespace cairn {

class SignalPipe {
 public:
  SignalPipe();   // installs the handlers (and ignores SIGPIPE)
  ~SignalPipe();  // restores the previous handlers
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;
  int fd() const { return read_.get(); }

 private:
  UniqueFd read_, write_;
  struct sigaction old_[NSIG] {};
};

}  // namespace cairn
