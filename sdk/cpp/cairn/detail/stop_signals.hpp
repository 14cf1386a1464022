// The first SIGINT/SIGTERM asks the trial to checkpoint and stop; the second acts as
// usual. Installed only where the program has no handler of its own.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <optional>
#include <string>

namespace cairn::sdk_detail {

// Process-wide because a signal handler can reach nothing else.
inline std::atomic<int> g_stop_signal{0};

inline void on_stop_signal(int signum) {
  if (g_stop_signal.exchange(signum) != 0) {
    ::signal(signum, SIG_DFL);
    ::raise(signum);
    return;
  }
  static constexpr char kMessage[] = "\ncairn: stopping at the next checkpoint (again to abort)\n";
  [[maybe_unused]] auto written = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
}

inline void install_stop_signals() {
  for (int signum : {SIGINT, SIGTERM}) {
    struct sigaction current {};
    if (::sigaction(signum, nullptr, &current) != 0) continue;
    if ((current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler != SIG_DFL) continue;
    struct sigaction handler {};
    handler.sa_handler = on_stop_signal;
    sigemptyset(&handler.sa_mask);
    ::sigaction(signum, &handler, nullptr);
  }
}

inline std::optional<std::string> stop_signal_reason() {
  switch (g_stop_signal.load()) {
    case 0:
      return std::nullopt;
    case SIGINT:
      return "interrupt";
    default:
      return "terminate";
  }
}

}  // namespace cairn::sdk_detail
