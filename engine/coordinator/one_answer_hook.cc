#include "engine/coordinator/one_answer_hook.h"

#include <poll.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace cairn {

namespace {

bool used = false;
std::string armed;  // what the hold line says, once armed

std::string what(std::string_view kind, int64_t step) {
  if (kind == "next_operation") return "next_operation " + std::to_string(step);
  return std::string(kind) + " at step " + std::to_string(step);
}

}  // namespace

bool stop_after_one_answer_if_testing(std::string_view kind, int64_t step) {
  if (used) return false;
  const char* asked = std::getenv("CAIRN_TEST_ONE_ANSWER");
  if (!asked || std::string(asked) != std::string(kind) + ":" + std::to_string(step)) return false;
  used = true;
  armed = what(kind, step);
  return true;
}

bool holding_answers_if_testing(std::string_view kind, int64_t step) {
  return used && armed == what(kind, step);
}

bool withhold_operation_if_testing(bool decided_now, size_t n) {
  const int64_t number = static_cast<int64_t>(n) + 1;
  if (decided_now) {
    (void)stop_after_one_answer_if_testing("next_operation", number);
    return false;
  }
  return holding_answers_if_testing("next_operation", number);
}

void hold_if_testing() {
  if (armed.empty()) return;
  std::fprintf(stderr, "cairn: test hook: answered one rank's %s; waiting to be killed\n",
               armed.c_str());
  std::fflush(stderr);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < give_up) ::poll(nullptr, 0, 50);
  ::raise(SIGKILL);
}

}  // namespace cairn
