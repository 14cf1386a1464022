// The unit-test runner: every tests/unit/*_test.cc links into this one doctest binary.
// Its exit status tells ctest about skips (tests/unit/cairn_skip.h): 77 when every case
// that ran skipped for a reason tests/skip_allowlist.txt allows, a failure for any other
// skip.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "tests/unit/cairn_skip.h"

namespace cairn::testing {
namespace {

struct Skip {
  std::string test_case;
  std::string reason;
};

std::mutex skips_mutex;
std::vector<Skip> skips;
int cases_started = 0;

// Counts the cases that start, so the runner knows whether all of them skipped.
struct CaseCounter : doctest::IReporter {
  explicit CaseCounter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override { ++cases_started; }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("cairn_case_counter", 1, CaseCounter);

// The reason patterns of tests/skip_allowlist.txt: one ECMAScript regex a line, then
// "  # capability: why" (comments and blank lines ignored).
std::vector<std::regex> allowed_patterns() {
  std::vector<std::regex> patterns;
  // CAIRN_SOURCE_DIR in the environment wins: a bundled binary (tests/gpu/) runs elsewhere.
  const char* source = std::getenv("CAIRN_SOURCE_DIR");
  std::ifstream in(std::string(source ? source : CAIRN_SOURCE_DIR) + "/tests/skip_allowlist.txt");
  for (std::string line; std::getline(in, line);) {
    if (const size_t comment = line.find(" #"); comment != std::string::npos) line.resize(comment);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    patterns.emplace_back(line);
  }
  return patterns;
}

int skip_verdict(int status) {
  if (skips.empty()) return status;
  const bool no_skips = std::getenv("CAIRN_TEST_NO_SKIPS") != nullptr;
  const auto patterns = allowed_patterns();
  bool refused = false;
  for (const Skip& s : skips) {
    bool allowed = !no_skips;
    if (allowed) {
      allowed = false;
      for (const auto& p : patterns) allowed = allowed || std::regex_search(s.reason, p);
    }
    std::fprintf(stderr, "%s: \"%s\": %s\n", allowed ? "skipped" : "SKIP NOT ALLOWED",
                 s.test_case.c_str(), s.reason.c_str());
    refused = refused || !allowed;
  }
  if (no_skips)
    std::fprintf(stderr, "CAIRN_TEST_NO_SKIPS is set: this entry must run every case\n");
  else if (refused)
    std::fprintf(stderr,
                 "a skip whose reason tests/skip_allowlist.txt does not allow fails the run\n");
  if (refused || status != 0) return 1;
  if (static_cast<int>(skips.size()) < cases_started) {
    std::fprintf(stderr,
                 "%d of %d cases skipped beside cases that ran: give each case that may skip a "
                 "\"[needs CAPABILITY]\" name and an entry of its own (tests/README.md)\n",
                 static_cast<int>(skips.size()), cases_started);
    return 1;
  }
  std::fprintf(stderr, "every case skipped: exit 77 (ctest: Skipped)\n");
  return 77;
}

}  // namespace

void record_skip(const std::string& reason) {
  std::lock_guard<std::mutex> lock(skips_mutex);
  const doctest::TestCaseData* current = doctest::getContextOptions()->currentTest;
  skips.push_back({current ? current->m_name : "?", reason});
}

}  // namespace cairn::testing

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int status = context.run();
  if (context.shouldExit()) return status;
  return cairn::testing::skip_verdict(status);
}
