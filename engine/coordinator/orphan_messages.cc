#include "engine/coordinator/orphan_messages.h"

#include <set>

#include "common/sha256.h"
#include "peer/checkpoint_manifest.h"

namespace cairn {

namespace {

constexpr int64_t kMaxStep = int64_t{1} << 53;

}  // namespace

std::string orphan_owner_dir(const std::string& owner) {
  return "o" + sha256_hex(owner).substr(0, 16);
}

std::string orphan_trial_key(const std::string& owner, const std::string& trial) {
  return orphan_owner_dir(owner) + "/" + trial;
}

std::string orphan_attempt_dir(int64_t attempt) {
  return "attempt-" + std::to_string(attempt);
}

Status parse_orphan_request(const Json& request, bool needs_step, OrphanRequest* out) {
  if (!request.is_object()) return Status::BadInput("a request that is not an object");
  const Json o = request.value("owner", Json());
  if (!o.is_string() || o.get_ref<const std::string&>().empty() ||
      o.get_ref<const std::string&>().size() > 4096)
    return Status::BadInput("no owner (a string of 1 to 4096 bytes)");
  const Json t = request.value("trial", Json());
  if (!t.is_string()) return Status::BadInput("no trial id");
  if (Status st = check_trial_name(t.get<std::string>()); !st.ok()) return st;
  out->owner = o.get<std::string>();
  out->trial = t.get<std::string>();
  if (!needs_step) return Status::Ok();
  const Json s = request.value("step", Json());
  if (!s.is_number_integer() || s.get<int64_t>() < 0 || s.get<int64_t>() >= kMaxStep)
    return Status::BadInput("no step (a whole number >= 0)");
  out->step = s.get<int64_t>();
  const Json a = request.value("attempt", Json());
  if (!a.is_number_integer() || a.get<int64_t>() < 0 || a.get<int64_t>() >= kMaxStep)
    return Status::BadInput("no attempt (a whole number >= 0)");
  out->attempt = a.get<int64_t>();
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
  const Json orphans = answer.value("orphans", Json());
  if (!orphans.is_array()) return Status::BadInput("an orphan listing without \"orphans\"");
  if (orphans.size() > kMaxOrphanSteps)
    return Status::BadInput("an orphan listing of more than " + std::to_string(kMaxOrphanSteps) +
                            " orphans");
  OrphanListing out;
  out.running = running.get<bool>();
  std::set<OrphanStep> seen;
  auto whole = [](const Json& o, const char* name) {
    const Json v = o.value(name, Json());
    return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < kMaxStep;
  };
  for (const Json& o : orphans) {
    if (!o.is_object() || !whole(o, "attempt") || !whole(o, "step"))
      return Status::BadInput("an orphan that is not {\"attempt\", \"step\"} (whole numbers >= 0)");
    const OrphanStep one{o["attempt"].get<int64_t>(), o["step"].get<int64_t>()};
    if (!seen.insert(one).second)
      return Status::BadInput("orphan step " + std::to_string(one.step) + " of attempt " +
                              std::to_string(one.attempt) + " listed twice");
  }
  out.orphans.assign(seen.begin(), seen.end());
  return out;
}

}  // namespace cairn
