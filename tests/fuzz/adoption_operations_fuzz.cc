// libFuzzer target: what an agent says, in its session_adopted answer, of the operations each
// kept rank was given (engine/coordinator/gang_operations.h, docs/peers.md "A gang's
// operations"): bytes an authenticated peer may send, parsed as untrusted JSON, each rank's
// "operations" checked as parse_kept_operations checks it, and the gang's sequence rebuilt
// from them as `cairn resume` does. Any crash, sanitizer report or broken invariant (abort) is
// a finding.
//
// ctest runs it over tests/fuzz/corpus/adoption_operations for a bounded number of runs. To
// fuzz longer:
//   build/fuzz/adoption_operations_fuzz -max_total_time=600 tests/fuzz/corpus/adoption_operations
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/untrusted_json.h"
#include "engine/coordinator/gang_operations.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void one_line(const cairn::Status& st) {
  check(!st.message().empty() && st.message().find('\n') == std::string::npos &&
        st.message().size() < 700);
}

bool is_operation(const cairn::Json& op) {
  if (!op.is_object() || op.size() != 1) return false;
  if (op.contains("done")) return op["done"] == cairn::Json(true);
  return op.contains("length") && op["length"].is_number_integer() &&
         op["length"].get<int64_t>() >= 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using cairn::Json;
  auto json =
      cairn::parse_untrusted_json(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!json.ok() || !json->is_object()) return 0;
  const Json ranks = json->value("ranks", Json());
  if (!ranks.is_array() || ranks.size() > 64) return 0;
  std::vector<std::optional<cairn::KeptOperations>> told;
  for (const Json& rank : ranks) {
    auto kept = cairn::parse_kept_operations(rank);
    if (!kept.ok()) {
      one_line(kept.status());
      return 0;
    }
    if (*kept) {
      const cairn::KeptOperations& k = **kept;
      check(k.count >= 0 && k.latest.size() <= cairn::KeptOperations::kMaxLatest);
      check(static_cast<int64_t>(k.latest.size()) <= k.count);
      for (const Json& op : k.latest) check(is_operation(op));
    }
    told.push_back(std::move(*kept));
  }
  auto rebuilt = cairn::rebuild_gang_operations(told);
  if (!rebuilt.ok()) {
    one_line(rebuilt.status());
    return 0;
  }
  if (!*rebuilt) return 0;
  // Every rank's next request is inside the sequence or just past it, the furthest behind at
  // its start; each operation is one some rank was told as that number.
  const cairn::GangOperations& gang = **rebuilt;
  check(gang.asked.size() == told.size());
  check(*std::min_element(gang.asked.begin(), gang.asked.end()) == 0);
  check(*std::max_element(gang.asked.begin(), gang.asked.end()) == gang.operations.size());
  for (const Json& op : gang.operations) check(is_operation(op));
  for (size_t r = 0; r < told.size(); ++r) {
    const cairn::KeptOperations& k = *told[r];
    const int64_t lo = k.count - static_cast<int64_t>(gang.asked[r]);
    for (size_t i = 0; i < k.latest.size(); ++i) {
      const int64_t n = k.count - static_cast<int64_t>(k.latest.size() - i) - lo;
      if (n >= 0) check(gang.operations[static_cast<size_t>(n)] == k.latest[i]);
    }
  }
  return 0;
}
