// `cairn resume` of an experiment whose coordinator was killed while agents ran its ranks
// (docs/peers.md "Adoption"; remote_adoption.h): a trial whose whole gang still runs on the
// agents, at the attempt its record names, goes on with the same processes. It stays
// RUNNING at that attempt, takes its recorded slots, and its ranks become the agents'
// launchers' ranks without any start; the agents then replay each rank's hello and the
// requests the old coordinator left unanswered, which are served as any rank's. No restart is
// counted and no step is run again. A trial that cannot be adopted (a rank ended or missing,
// another attempt, an agent not reached) is recovered as before: the agents end what they
// kept of it and it restarts from its latest checkpoint. Ended, not orphaned: such a gang
// misses a rank (or the attempt is stale), so its other ranks' orphan could never be adopted,
// and ranks blocked in a collective with a dead peer would not even checkpoint (docs/peers.md
// "Why the ranks a resume does not adopt are ended, not orphaned").
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/remote_launcher.h"
#include "engine/coordinator/remote_session.h"
#include "engine/coordinator/trial_state.h"

namespace cairn {

namespace fs = std::filesystem;
using schema::TrialState;

bool Coordinator::adopt_remote_trial(Trial& trial) {
  if (trial.state != TrialState::kRunning || trial.closed) return false;
  const Json placement = trial.record.value("placement", Json());
  if (!placement.is_array() || placement.size() != trial.ranks.size()) return false;
  const std::string id = trial_id(trial.index);
  const int64_t attempt = trial.attempt();
  struct Found {
    int machine = 0;
    RemoteLauncher* launcher = nullptr;
    KeptRank kept;
    SlotRef slot;
  };
  std::vector<Found> found;
  for (size_t r = 0; r < trial.ranks.size(); ++r) {
    const Json& place = placement[r];
    if (!place.is_object() || !place.value("machine", Json()).is_string() ||
        !place.value("slot", Json()).is_number_integer())
      return false;
    const std::string name = place["machine"].get<std::string>();
    int machine = -1;
    for (size_t m = 1; m < machines_.size(); ++m)
      if (machines_[m].name() == name) machine = static_cast<int>(m);
    if (machine < 0 || launcher_->lost(machine)) return false;
    auto* remote = dynamic_cast<RemoteLauncher*>(&launcher_->at(machine));
    if (!remote) return false;
    const std::vector<KeptRank>& kept = remote->kept();
    auto it = std::find_if(kept.begin(), kept.end(), [&](const KeptRank& k) {
      return k.trial == id && k.attempt == attempt && k.rank == static_cast<int64_t>(r);
    });
    if (it == kept.end()) return false;
    if (!it->running) {
      terminal_.note("trial " + id + ": rank " + std::to_string(r) + " on " + name +
                     " ended while cairn was away; the trial restarts from its latest checkpoint");
      return false;
    }
    found.push_back({machine, remote, *it, SlotRef{machine, place["slot"].get<int>()}});
  }
  // The operations its ranks were given: a rank the killed coordinator had not answered yet
  // gets what the others got (gang_operations.h).
  std::optional<GangOperations> operations;
  if (trial.world_size() > 1) {
    std::vector<std::optional<KeptOperations>> told;
    for (const Found& f : found) told.push_back(f.kept.operations);
    auto rebuilt = rebuild_gang_operations(told);
    if (!rebuilt.ok()) {
      terminal_.note("trial " + id + ": " + rebuilt.status().message() +
                     "; the trial restarts from its latest checkpoint");
      return false;
    }
    operations = std::move(*rebuilt);
  }
  std::vector<SlotRef> slots;
  for (const Found& f : found) slots.push_back(f.slot);
  if (!slots_->take(trial.index, slots)) return false;
  trial.reset_attempt();
  if (operations) {
    trial.operations = operations->operations;
    for (size_t r = 0; r < trial.ranks.size(); ++r)
      trial.ranks[r].operations_asked = operations->asked[r];
  }
  for (size_t r = 0; r < found.size(); ++r) {
    Rank& rank = trial.ranks[r];
    auto inner = found[r].launcher->adopt(found[r].kept.id, listener_->address(), rank.output_file);
    if (!inner.ok()) {
      // Not expected (the launcher listed it): what was taken is given back, and the trial is
      // recovered; the agent ends the ranks nobody took.
      for (Rank& taken : trial.ranks) taken.process.reset();
      slots_->release(trial.index);
      terminal_.warn("warning: trial " + id + ": " + inner.status().message());
      return false;
    }
    rank.machine = found[r].machine;
    rank.process = launcher_->adopted(found[r].machine, *inner);
    machines_used_.insert(found[r].machine);
    // Its log goes on from what the old coordinator committed: output it wrote to the file
    // after that is read again, once.
    std::error_code ec;
    const Json offset = trial.record.value(output_offset_field(rank.rank), Json());
    const uint64_t size = fs::file_size(rank.output_file, ec);
    const uint64_t from = offset.is_number_integer() ? offset.get<uint64_t>()
                          : rank.rank == 0           ? 0
                                                     : (ec ? 0 : size);
    Status followed = output_->follow(rank_output_key(trial.index, rank.rank), rank.output_file,
                                      std::min(from, ec ? uint64_t{0} : size));
    if (!followed.ok()) terminal_.warn("warning: " + followed.message());
  }
  trial.attempt_running = true;
  trial.last_heard = Clock::now();
  // Told "done" by the killed coordinator: the gang's clean exit releases its slots, as it
  // would have there (a pause, or a promotion's requeue), not a failure.
  trial.released = operations && !operations->operations.empty() &&
                   operations->operations.back().value("done", false) && !trial.closed;
  trial.stop_requested = pausing_;
  // The record names these ranks from now on (a later resume reads them).
  trial.record["pid"] = trial.chief().process->pid;
  if (trial.world_size() > 1) {
    Json pids = Json::array(), starts = Json::array();
    for (const Rank& r : trial.ranks) {
      pids.push_back(r.process->pid);
      starts.push_back(0);
    }
    trial.record["rank_pids"] = pids;
    trial.record["rank_start_times"] = starts;
  }
  trial.record["adopted_attempt"] = attempt;
  mark_dirty(trial);
  record_event(schema::EventType::kTrialAdopted, {{"trial", trial.index}, {"attempt", attempt}});
  for (const Found& f : found)
    terminal_.note("trial " + id +
                   (trial.world_size() > 1 ? ":" + std::to_string(f.kept.rank) : "") +
                   ": adopted its rank on " + machines_[static_cast<size_t>(f.machine)].name() +
                   " (pid " + std::to_string(f.kept.pid) + "), left running while cairn was away");
  return true;
}

bool Coordinator::adopted_attempt(const Trial& trial) const {
  const Json adopted = trial.record.value("adopted_attempt", Json());
  return adopted.is_number_integer() && adopted.get<int64_t>() == trial.attempt();
}

void Coordinator::finish_remote_adoption() {
  for (int m = 1; m < launcher_->size(); ++m) {
    auto* remote = dynamic_cast<RemoteLauncher*>(&launcher_->at(m));
    if (!remote) continue;
    size_t left = 0;
    for (const KeptRank& k : remote->kept()) {
      const bool taken = std::any_of(live_.begin(), live_.end(), [&](int64_t index) {
        const Trial* t = trials_.at(index).get();
        if (trial_id(index) != k.trial || t->attempt() != k.attempt || !t->running()) return false;
        const Rank& rank =
            t->ranks[static_cast<size_t>(std::clamp<int64_t>(k.rank, 0, t->world_size() - 1))];
        return rank.machine == m;
      });
      if (!taken) ++left;
    }
    if (left > 0)
      terminal_.note("agent " + machines_[static_cast<size_t>(m)].name() + ": " +
                     std::to_string(left) + " rank" + (left > 1 ? "s" : "") +
                     " it kept could not be adopted; it ends them (a gang's ranks are a checkpoint "
                     "only together: their trials restart from their latest registered "
                     "checkpoints)");
    remote->end_adoption();
  }
  // A lost agent connected again later opens a session as usual: adopting is only for now.
  RemoteSessionOptions options = remote_session_options();
  options.adopt = false;
  set_remote_session_options(options);
}

}  // namespace cairn
