// Running a helper program and reading what it prints: ld.so --list for the dependency
// fingerprint, Python for its version and distributions (`cairn doctor` too).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace cairn {

// Runs argv[0] (an absolute path; no shell, nothing expanded) with `env`, stdin and stderr
// on /dev/null, and returns what it printed on stdout; "" when it cannot be run, fails,
// or runs longer than `timeout_s` (it is then killed).
std::string run_capture(const std::vector<std::string>& argv,
                        const std::map<std::string, std::string>& env, int timeout_s);

// This process's environment as a map.
std::map<std::string, std::string> process_environment();

}  // namespace cairn
