#include "cli/placement_history.h"

#include <set>

#include "store/schema.h"

namespace cairn::cli {

Result<Json> placement_history(const ExperimentReader& reader, int64_t trial) {
  auto events = reader.db().scan_json(schema::kEventPrefix);
  if (!events.ok()) return events.status();
  Json history = Json::array();
  for (const Json& e : *events) {
    if (!e.is_object() || e.value("type", "") != "trial_started" ||
        e.value("trial", Json()) != Json(trial))
      continue;
    const Json placement = e.value("placement", Json());
    if (!placement.is_array() || placement.empty()) continue;  // from before placements
    history.push_back(
        {{"attempt", static_cast<int64_t>(history.size()) + 1}, {"placement", placement}});
  }
  return history;
}

std::string placement_text(const Json& placement) {
  std::set<std::string> machines;
  for (const Json& p : placement)
    machines.insert(p.is_object() ? p.value("machine", "?") : std::string("?"));
  if (machines.size() == 1 && placement.size() == 1) return *machines.begin();
  std::string where;
  for (const Json& p : placement) {
    const Json rank = p.is_object() ? p.value("rank", Json(0)) : Json("?");
    where += (where.empty() ? "" : ", ") + rank.dump() + ": " +
             (p.is_object() ? p.value("machine", "?") : std::string("?"));
  }
  return where;
}

}  // namespace cairn::cli
