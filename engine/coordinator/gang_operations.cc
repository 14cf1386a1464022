#include "engine/coordinator/gang_operations.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <string>

namespace cairn {

namespace {

// Far above any trial's operations, far below overflow.
constexpr int64_t kMaxCount = int64_t{1} << 40;

// {"length": L} or {"done": true}, as the coordinator keeps operations; nullopt otherwise.
std::optional<Json> operation_of(const Json& op) {
  if (!op.is_object()) return std::nullopt;
  const Json done = op.value("done", Json()), length = op.value("length", Json());
  if (done == Json(true)) return Json{{"done", true}};
  if (length.is_number_integer() && length.get<int64_t>() >= 0 && length.get<int64_t>() < kMaxCount)
    return Json{{"length", length.get<int64_t>()}};
  return std::nullopt;
}

std::string said(const Json& op) {
  return op.contains("done") ? std::string("done") : "length " + op["length"].dump();
}

}  // namespace

Result<std::optional<KeptOperations>> parse_kept_operations(const Json& kept_rank) {
  if (!kept_rank.is_object() || !kept_rank.contains("operations"))
    return std::optional<KeptOperations>();
  const Json& ops = kept_rank["operations"];
  const Json count = ops.is_object() ? ops.value("count", Json()) : Json();
  const Json latest = ops.is_object() ? ops.value("latest", Json()) : Json();
  if (!count.is_number_integer() || count.get<int64_t>() < 0 || count.get<int64_t>() >= kMaxCount ||
      !latest.is_array() || latest.size() > KeptOperations::kMaxLatest ||
      static_cast<int64_t>(latest.size()) > count.get<int64_t>())
    return Status::Failed("\"operations\" is not {\"count\": N >= 0, \"latest\": [at most " +
                          std::to_string(KeptOperations::kMaxLatest) +
                          " operations, no more than N]}");
  KeptOperations out;
  out.count = count.get<int64_t>();
  for (const Json& op : latest) {
    std::optional<Json> operation = operation_of(op);
    if (!operation)
      return Status::Failed(
          "an operation of \"operations\" is neither {\"length\": L >= 0} "
          "nor {\"done\": true}");
    out.latest.push_back(std::move(*operation));
  }
  return std::optional<KeptOperations>(std::move(out));
}

Result<std::optional<GangOperations>> rebuild_gang_operations(
    const std::vector<std::optional<KeptOperations>>& ranks) {
  if (ranks.empty()) return std::optional<GangOperations>();
  int64_t lo = kMaxCount, hi = 0;
  for (const auto& r : ranks) {
    if (!r) return std::optional<GangOperations>();  // numbered from 0, as before
    lo = std::min(lo, r->count);
    hi = std::max(hi, r->count);
  }
  if (hi == 0) return std::optional<GangOperations>();  // nothing answered yet
  // Each operation some rank still has, by its number in the attempt (0: the first).
  std::map<int64_t, std::pair<Json, size_t>> known;  // number -> (operation, a rank told it)
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    const KeptOperations& r = *ranks[rank];
    const int64_t first = r.count - static_cast<int64_t>(r.latest.size());
    for (size_t i = 0; i < r.latest.size(); ++i) {
      // Every rank is past those below `lo`, but no two ranks were told different ones.
      const int64_t n = first + static_cast<int64_t>(i);
      auto [it, fresh] = known.try_emplace(n, r.latest[i], rank);
      if (!fresh && it->second.first != r.latest[i])
        return Status::Failed("rank " + std::to_string(it->second.second) + " and rank " +
                              std::to_string(rank) + " were told different operations as their " +
                              "operation " + std::to_string(n + 1) + " (" + said(it->second.first) +
                              ", " + said(r.latest[i]) + ")");
    }
  }
  if (hi - lo > static_cast<int64_t>(std::distance(known.lower_bound(lo), known.end())))
    return Status::Failed("a rank was " + std::to_string(hi - lo) +
                          " operations behind another, more than its agent keeps");
  GangOperations out;
  for (int64_t n = lo; n < hi; ++n) {
    auto it = known.find(n);
    if (it == known.end())
      return Status::Failed("operation " + std::to_string(n + 1) +
                            " of a rank that had not had it is no longer kept by any agent");
    out.operations.push_back(it->second.first);
  }
  for (const auto& r : ranks) out.asked.push_back(static_cast<size_t>(r->count - lo));
  return std::optional<GangOperations>(std::move(out));
}

}  // namespace cairn
