// Determined's log_policies at run time (docs/determined.md): which cancel_retries policy,
// if any, a line of a trial's output matches. The config module checks every pattern with
// pattern_error() when it reads the config, so a matcher never meets a bad one.
#pragma once

#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "engine/config/config.h"

namespace cairn {

// Immutable after construction; safe to share between threads that only call matches().
class LogPolicyMatcher {
 public:
  // Keeps the cancel_retries policies of `policies`; the others change nothing here.
  explicit LogPolicyMatcher(const std::vector<LogPolicy>& policies);

  bool empty() const { return rules_.empty(); }
  // The first cancel_retries policy whose pattern occurs in `line`, or nullptr.
  const LogPolicy* cancels_retries(std::string_view line) const;

  // Why `pattern` is not a usable regular expression, or nullopt. The syntax is ECMAScript's
  // (std::regex), which Determined's RE2 patterns of the usual kind are; a leading (?i)
  // makes the match ignore case.
  static std::optional<std::string> pattern_error(const std::string& pattern);

 private:
  struct Rule {
    LogPolicy policy;
    std::regex regex;
  };
  std::vector<Rule> rules_;
};

}  // namespace cairn
