#include "engine/config/log_policy_matcher.h"

namespace cairn {
namespace {

// Lines are searched, not matched whole, so the `.*` that Determined's patterns usually
// begin and end with says nothing; taken off, they no longer make every line a quadratic
// search. (?i) is RE2's flag for ignoring case, which std::regex takes as an option.
std::regex compile(std::string pattern) {
  auto flags = std::regex::ECMAScript | std::regex::optimize;
  if (pattern.starts_with("(?i)")) {
    pattern.erase(0, 4);
    flags |= std::regex::icase;
  }
  while (pattern.starts_with(".*")) pattern.erase(0, 2);
  while (pattern.size() >= 2 && pattern.ends_with(".*") &&
         (pattern.size() == 2 || pattern[pattern.size() - 3] != '\\'))
    pattern.erase(pattern.size() - 2);
  return std::regex(pattern, flags);
}

// A line longer than this is searched in its first kMaxLine bytes: a progress bar redrawn
// without newlines must not cost the coordinator's loop seconds.
constexpr size_t kMaxLine = 64 * 1024;

}  // namespace

LogPolicyMatcher::LogPolicyMatcher(const std::vector<LogPolicy>& policies) {
  for (const LogPolicy& p : policies) {
    if (p.action != LogPolicy::Action::kCancelRetries || p.pattern.empty()) continue;
    try {
      rules_.push_back({p, compile(p.pattern)});
    } catch (const std::regex_error&) {
      // pattern_error() refused it when the config was read; a stored config read by a
      // later cairn with another regex library is the only way here: it matches nothing.
    }
  }
}

const LogPolicy* LogPolicyMatcher::cancels_retries(std::string_view line) const {
  if (line.size() > kMaxLine) line = line.substr(0, kMaxLine);
  for (const Rule& rule : rules_)
    if (std::regex_search(line.begin(), line.end(), rule.regex)) return &rule.policy;
  return nullptr;
}

std::optional<std::string> LogPolicyMatcher::pattern_error(const std::string& pattern) {
  try {
    compile(pattern);
    return std::nullopt;
  } catch (const std::regex_error& e) {
    return std::string(e.what());
  }
}

}  // namespace cairn
