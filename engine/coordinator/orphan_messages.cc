#include "engine/coordinator/orphan_messages.h"

#include <set>

#include "peer/checkpoint_manifest.h"

namespace cairn {

namespace {

constexpr int64_t kMaxStep = int64_t{1} << 53;

}  // namespace

Status parse_orphan_request(const Json& request, bool needs_step, std::string* trial,
                            int64_t* step) {
  if (!request.is_object()) return Status::BadInput("a request that is not an object");
  const Json t = request.value("trial", Json());
  if (!t.is_string()) return Status::BadInput("no trial id");
  if (Status st = check_trial_name(t.get<std::string>()); !st.ok()) return st;
  *trial = t.get<std::string>();
  if (!needs_step) return Status::Ok();
  const Json s = request.value("step", Json());
  if (!s.is_number_integer() || s.get<int64_t>() < 0 || s.get<int64_t>() >= kMaxStep)
    return Status::BadInput("no step (a whole number >= 0)");
  *step = s.get<int64_t>();
  return Status::Ok();
}

Result<OrphanListing> parse_orphan_listing(const Json& answer, const std::string& trial) {
  if (!answer.is_object()) return Status::BadInput("an orphan listing that is not an object");
  const Json type = answer.value("type", Json());
  if (type == "error") {
    const Json reason = answer.value("reason", Json("no reason given"));
    return Status::Failed("refused: " +
                          (reason.is_string() ? reason.get<std::string>().substr(0, 500) : "?"));
  }
  if (type != "orphan_list") return Status::BadInput("expected orphan_list");
  if (answer.value("trial", Json()) != trial)
    return Status::BadInput("an orphan listing for another trial");
  const Json running = answer.value("running", Json());
  if (!running.is_boolean()) return Status::BadInput("an orphan listing without \"running\"");
  const Json steps = answer.value("steps", Json());
  if (!steps.is_array()) return Status::BadInput("an orphan listing without \"steps\"");
  if (steps.size() > kMaxOrphanSteps)
    return Status::BadInput("an orphan listing of more than " + std::to_string(kMaxOrphanSteps) +
                            " steps");
  OrphanListing out;
  out.running = running.get<bool>();
  std::set<int64_t> seen;
  for (const Json& s : steps) {
    if (!s.is_number_integer() || s.get<int64_t>() < 0 || s.get<int64_t>() >= kMaxStep)
      return Status::BadInput("an orphan step that is not a whole number >= 0");
    if (!seen.insert(s.get<int64_t>()).second)
      return Status::BadInput("orphan step " + std::to_string(s.get<int64_t>()) + " listed twice");
  }
  out.steps.assign(seen.begin(), seen.end());
  return out;
}

}  // namespace cairn
