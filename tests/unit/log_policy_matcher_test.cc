// Determined's log_policies at run time: which lines cancel a failed trial's restarts.
#include "engine/config/log_policy_matcher.h"

#include <doctest/doctest.h>

#include <string>

namespace cairn {

TEST_CASE("log policies: cancel_retries patterns are searched in each line") {
  using Action = LogPolicy::Action;
  LogPolicyMatcher matcher({
      {"CUDA OOM", ".*CUDA out of memory.*", Action::kCancelRetries, ""},
      {"", "^Fatal: [0-9]+$", Action::kCancelRetries, ""},
      {"ECC", ".*ECC error.*", Action::kExcludeNode, ""},  // no effect here
      {"label", "", Action::kNone, ""},
      {"Case", "(?i)disk quota", Action::kCancelRetries, ""},
  });
  CHECK_FALSE(matcher.empty());
  const LogPolicy* oom =
      matcher.cancels_retries("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate");
  REQUIRE(oom != nullptr);
  CHECK(oom->name == "CUDA OOM");
  REQUIRE(matcher.cancels_retries("Fatal: 12") != nullptr);
  CHECK(matcher.cancels_retries("Fatal: 12")->pattern == "^Fatal: [0-9]+$");
  CHECK(matcher.cancels_retries("not Fatal: 12") == nullptr);  // anchors still anchor
  CHECK(matcher.cancels_retries("uncorrectable ECC error encountered") == nullptr);
  CHECK(matcher.cancels_retries("") == nullptr);
  CHECK(matcher.cancels_retries("OSError: Disk Quota exceeded") != nullptr);
  // A very long line is searched in its beginning, and not without end.
  CHECK(matcher.cancels_retries(std::string(1 << 20, 'x') + "CUDA out of memory") == nullptr);
  CHECK(LogPolicyMatcher({{"x", "", Action::kCancelRetries, ""}}).empty());
}

TEST_CASE("log policies: a pattern std::regex cannot compile is named when the config is read") {
  CHECK_FALSE(LogPolicyMatcher::pattern_error(".*CUDA out of memory.*").has_value());
  CHECK_FALSE(LogPolicyMatcher::pattern_error("\\.*$").has_value());
  CHECK(LogPolicyMatcher::pattern_error("a(").has_value());
  CHECK(LogPolicyMatcher::pattern_error("[z-a]").has_value());
}

}  // namespace cairn
