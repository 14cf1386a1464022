#include "store/checkpoint_lookup.h"

#include <optional>

#include "store/experiment_ids.h"
#include "store/experiment_reader.h"
#include "store/retention.h"
#include "store/schema.h"

namespace cairn {

namespace {

Result<FoundCheckpoint> by_trial(const StoreLayout& store, const std::string& trial_text,
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
  if (which == "latest") return FoundCheckpoint{id->experiment, usable[latest]};
  // Retention's "best" order (store/retention.h), so that TRIAL@best is the checkpoint
  // keep_trial_best keeps, ties included.
  std::vector<const CheckpointSummary*> pointers;
  for (const CheckpointSummary& c : summaries) pointers.push_back(&c);
  const auto ranked = by_best(pointers, RetentionPolicy::from_config((*exp)["config"]));
  std::optional<size_t> best;
  if (!ranked.empty()) best = static_cast<size_t>(ranked.front() - summaries.data());
  // No checkpoint was validated: the latest is the best we know of.
  return FoundCheckpoint{id->experiment, usable[best.value_or(latest)]};
}

// A Determined storage id: 8-4-4-4-12 hex digits (a UUID as Python prints it).
bool is_storage_id(const std::string& ref) {
  if (ref.size() != 36) return false;
  for (size_t i = 0; i < ref.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash != (ref[i] == '-')) return false;
    if (!dash && !std::isxdigit(static_cast<unsigned char>(ref[i]))) return false;
  }
  return true;
}

// What the record says a usable checkpoint is not, or "" when it is usable.
std::string unusable(const Json& record) {
  const std::string name = "checkpoint " + record.value("id", std::string("?")).substr(0, 12) +
                           " of trial " + record.value("trial", std::string("?"));
  if (!schema::checkpoint_is_kept(record))
    return name + " was deleted by the retention policy (checkpoint.keep_*)";
  if (record.value("corrupt", false)) return name + " is corrupt (its content failed its hash)";
  return "";
}

Result<FoundCheckpoint> by_storage_id(const StoreLayout& store, const std::string& ref) {
  std::optional<FoundCheckpoint> found;
  for (int64_t exp : list_experiment_ids(store)) {
    auto reader = ExperimentReader::open(store, exp);
    if (!reader.ok()) continue;
    auto records = (*reader)->checkpoints();
    if (!records.ok()) continue;
    for (Json& j : *records) {
      const Json meta = j.value("metadata", Json::object());
      if (!meta.is_object() || meta.value("determined_storage_id", Json()) != ref) continue;
      // One checkpoint at most: the package writes the storage id into the checkpoint's
      // own files (determined_checkpoint.json), so no two ids share a content id.
      found = FoundCheckpoint{exp, std::move(j)};
      break;
    }
    if (found) break;
  }
  if (!found) return Status::NotFound("no checkpoint with storage id " + ref + " in this store");
  if (std::string why = unusable(found->record); !why.empty()) return Status::NotFound(why);
  return *found;
}

}  // namespace

Result<FoundCheckpoint> latest_checkpoint_of_number(const StoreLayout& store, int64_t number) {
  for (int64_t exp : list_experiment_ids(store)) {
    auto reader = ExperimentReader::open(store, exp);
    if (!reader.ok()) continue;
    auto trials = (*reader)->trials();
    if (!trials.ok()) continue;
    for (const Json& t : *trials)
      if (t.value("number", Json()) == Json(number) && t.contains("index"))
        return by_trial(
            store, std::to_string(exp) + "." + std::to_string(t["index"].get<int64_t>()), "latest");
  }
  return Status::NotFound("no trial numbered " + std::to_string(number) + " in this store");
}

Result<FoundCheckpoint> find_checkpoint(const StoreLayout& store, const std::string& ref) {
  if (auto at = ref.find('@'); at != std::string::npos)
    return by_trial(store, ref.substr(0, at), ref.substr(at + 1));
  if (is_storage_id(ref)) return by_storage_id(store, ref);
  if (ref.size() < 4 || ref.find_first_not_of("0123456789abcdef") != std::string::npos)
    return Status::BadInput("'" + ref +
                            "' is not a checkpoint: give at least 4 hex digits of its id, or "
                            "TRIAL@latest / TRIAL@best, or a Determined storage id");
  std::vector<FoundCheckpoint> matches;
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
  if (std::string why = unusable(matches.front().record); !why.empty())
    return Status::NotFound(why);
  return matches.front();
}

}  // namespace cairn
