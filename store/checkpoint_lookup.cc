#include "cli/checkpoint_ref.h"

#include <optional>

#include "store/retention.h"
#include "store/schema.h"

namespace cairn::cli {

namespace {

Result<ResolvedCheckpoint> by_trial(const StoreLayout& store, const std::string& trial_text,
                                    const std::string& which) {
  auto id = parse_id(trial_text);
  if (!id.ok()) return id.status();
  if (!id->trial)
    return Status::BadInput("'" + trial_text + "@" + which + "': expected a trial id before '@'");
  // A misspelt @latest/@best is bad input whatever the trial holds.
  if (which != "latest" && which != "best")
    return Status::BadInput("'" + trial_text + "@" + which + "': expected @latest or @best");
  auto reader = ExperimentReader::open(store, id->experiment);
  if (!reader.ok()) return reader.status();
  auto exp = (*reader)->experiment();
  if (!exp.ok()) return exp.status();
  auto ckpts = (*reader)->checkpoints(id->trial);
  if (!ckpts.ok()) return ckpts.status();
  std::vector<Json> usable;
  for (auto& c : *ckpts)
    if (!c.value("corrupt", false) && schema::checkpoint_is_kept(c)) usable.push_back(std::move(c));
  if (usable.empty()) return Status::NotFound("trial " + trial_text + " has no checkpoints");
  // The latest is what a restart of the trial resumes from: of two saves of its last step,
  // the one it registered last (store/retention.h, newer_checkpoint).
  auto trial = (*reader)->trial(id->trial);
  if (!trial.ok()) return trial.status();
  const Json named = trial->value("latest_checkpoint", Json());
  std::vector<CheckpointSummary> summaries;
  for (const Json& c : usable) {
    CheckpointSummary& summary = summaries.emplace_back(CheckpointSummary::from_record(c));
    summary.registered_last = named.is_string() && summary.id == named.get<std::string>();
  }
  size_t latest = 0;
  for (size_t i = 1; i < summaries.size(); ++i)
    if (newer_checkpoint(summaries[i], summaries[latest])) latest = i;
  if (which == "latest") return ResolvedCheckpoint{id->experiment, usable[latest]};
  // Retention's "best" order (store/retention.h), so that TRIAL@best is the checkpoint
  // keep_trial_best keeps, ties included.
  std::vector<const CheckpointSummary*> pointers;
  for (const CheckpointSummary& c : summaries) pointers.push_back(&c);
  const auto ranked = by_best(pointers, RetentionPolicy::from_config((*exp)["config"]));
  std::optional<size_t> best;
  if (!ranked.empty()) best = static_cast<size_t>(ranked.front() - summaries.data());
  // No checkpoint was validated: the latest is the best we know of.
  return ResolvedCheckpoint{id->experiment, usable[best.value_or(latest)]};
}

}  // namespace

Result<ResolvedCheckpoint> resolve_checkpoint(const StoreLayout& store, const std::string& ref) {
  if (auto at = ref.find('@'); at != std::string::npos)
    return by_trial(store, ref.substr(0, at), ref.substr(at + 1));
  if (ref.size() < 4 || ref.find_first_not_of("0123456789abcdef") != std::string::npos)
    return Status::BadInput("'" + ref +
                            "' is not a checkpoint: give at least 4 hex digits of its id, or "
                            "TRIAL@latest / TRIAL@best");
  std::vector<ResolvedCheckpoint> matches;
  for (int64_t exp : list_experiment_ids(store)) {
    auto reader = ExperimentReader::open(store, exp);
    if (!reader.ok()) continue;
    (*reader)->db().scan(schema::checkpoint_key(ref),
                         [&](std::string_view, std::string_view value) {
                           Json j = Json::parse(value, nullptr, false);
                           if (!j.is_discarded()) matches.push_back({exp, std::move(j)});
                           return true;
                         });
  }
  if (matches.empty()) return Status::NotFound("no checkpoint " + ref);
  for (const auto& m : matches)
    if (m.record["id"] != matches.front().record["id"])
      return Status::BadInput("checkpoint prefix " + ref + " is ambiguous: give more digits");
  const Json& found = matches.front().record;
  const std::string name = "checkpoint " + found.value("id", ref).substr(0, 12) + " of trial " +
                           found.value("trial", std::string("?"));
  if (!schema::checkpoint_is_kept(found))
    return Status::NotFound(name + " was deleted by the retention policy (checkpoint.keep_*)");
  return matches.front();
}

}  // namespace cairn::cli
