#include "engine/coordinator/signal_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace cairn {

namespace {

// The write end of the pipe. A signal handler can reach nothing else, so this one
// file-scope variable is the exception to "no global mutable state".
int g_signal_pipe_write = -1;

void on_signal(int sig) {
  const int saved = errno;
  const char byte = static_cast<char>(sig);
  if (g_signal_pipe_write >= 0) (void)!::write(g_signal_pipe_write, &byte, 1);
  errno = saved;
}

constexpr int kSignals[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR2, SIGWINCH};

}  // namespace

SignalPipe::SignalPipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
    read_.reset(fds[0]);
    write_.reset(fds[1]);
    g_signal_pipe_write = write_.get();
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : kSignals) ::sigaction(sig, &sa, &old_[sig]);
  ::signal(SIGPIPE, SIG_IGN);
}

SignalPipe::~SignalPipe() {
  for (int sig : kSignals) ::sigaction(sig, &old_[sig], nullptr);
  g_signal_pipe_write = -1;
}

}  // namespace cairn
