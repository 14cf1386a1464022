// The coordinator's side of multi-rank trials (docs/protocol.md, "Multi-rank trials"): the
// ranks' agreement on stopping (sync), checkpoints that the ranks which enter them take part
// in, and what each rank waits in, so that a gang that can no longer move fails at once
// instead of hanging (engine/coordinator/rank_waits.h).
#include <signal.h>

#include <algorithm>

#include "cairn/detail/hex.hpp"
#include "common/file_util.h"
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/one_answer_hook.h"
#include "engine/coordinator/trial_state.h"
#include "store/checkpoint_files.h"
#include "store/stored_records.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

int64_t step_of(const Json& msg) {
  return msg.is_object() && msg.contains("step") && msg["step"].is_number_integer()
             ? msg["step"].get<int64_t>()
             : 0;
}

// The only files cairn writes into a checkpoint for a rank: that rank's generator state, under
// the name its SDK reads back (docs/protocol.md, "Files in a checkpoint that belong to the SDK").
bool is_rng_file_of(const std::string& name, int rank) {
  const std::string stem =
      rank == 0 ? "cairn_rng_state." : "cairn_rng_state.rank" + std::to_string(rank) + ".";
  return name == stem + "pkl" || name == stem + "txt";
}

// A generator state is a few kilobytes; the bound keeps a confused client from filling memory.
constexpr size_t kMaxRngBytes = 1 << 20;

}  // namespace

void Coordinator::note_rank_call(Trial& trial, int rank, const std::string& type, const Json& msg) {
  if (rank < 0 || rank >= trial.world_size()) return;
  RankWait& w = trial.ranks[static_cast<size_t>(rank)].wait;
  const auto now = Clock::now();
  const int64_t step = step_of(msg);
  if (type == "sync") {
    w.reached(step);
    w.enter(RankCall::kSync, step, "", now);
  } else if (type == "checkpoint_begin" || type == "checkpoint_abort") {
    w.reached(step);
  } else if (type == "checkpoint_end") {
    w.reached(step);
    w.enter(RankCall::kCheckpoint, step, "", now);
  } else if (type == "checkpoint_skip") {
    w.reached(step);
    w.left_through = std::max(w.left_through, step);
    w.enter(RankCall::kCheckpointSkip, step, msg.value("call", ""), now);
  } else if (type == "kv_get") {
    const Json key = msg.value("key", Json(""));
    w.enter(RankCall::kKvGet, 0, key.is_string() ? key.get<std::string>() : "", now);
  } else if (type == "kv_set" || type == "hello") {
    // The rendezvous happens before training: it says nothing about checkpoints.
  } else if (type == "next_operation") {
    w.moved_on();
    w.enter(RankCall::kNextOperation, 0, "", now);
  } else {
    w.moved_on();  // a report, or anything else: the rank's next call for its step
  }
  // A checkpoint message's own handler settles the rounds once it has recorded what the
  // message brings (a skipping rank's generator state must be in the round before it is whole).
  if (!type.starts_with("checkpoint_")) settle_checkpoint_rounds(trial);
}

void Coordinator::rank_answered(int fd) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  Trial* trial = trial_by_index(it->second->trial);
  const int rank = it->second->rank;
  if (!trial || trial->world_size() < 2 || rank < 0 || rank >= trial->world_size()) return;
  RankWait& w = trial->ranks[static_cast<size_t>(rank)].wait;
  if (w.call != RankCall::kExited) w.call = RankCall::kOutside;
}

void Coordinator::handle_sync(Trial& trial, ControlConnection& conn, const Json& msg) {
  const int64_t step = msg.value("step", int64_t{0});
  RankRound& round = trial.syncs[step];
  round.ranks.insert(conn.rank);
  round.waiting.push_back({conn.fd(), msg.value("seq", Json(0)), conn.rank});
  if (msg.contains("stop") && msg["stop"].is_string() && round.stop_reason.empty())
    round.stop_reason = msg["stop"].get<std::string>();
  decide_sync(trial, step);
}

void Coordinator::decide_sync(Trial& trial, int64_t step) {
  auto it = trial.syncs.find(step);
  if (it == trial.syncs.end()) return;
  RankRound& round = it->second;
  if (static_cast<int>(round.ranks.size()) < trial.world_size()) return;
  bool stop = false;
  std::string reason;
  if (round.decided) {
    // A killed coordinator answered some rank already (adoption): the others get the same.
    stop = round.decided->value("stop", false);
    reason = round.decided->value("reason", std::string("stop"));
    if (stop && reason == "rung")
      trial.rung_stop = true;
    else if (stop)
      trial.stop_requested = true;
  } else {
    // Every rank has reached this step: one decision for all of them.
    if (!round.stop_reason.empty() && !trial.stop_requested) trial.stop_requested = true;
    // A rung's stop (time_metric) is agreed like any other, but leaves stop_requested alone:
    // the ranks' clean exit then releases the slots instead of pausing the trial.
    stop = trial.stop_requested || trial.rung_stop;
    reason = !round.stop_reason.empty() ? round.stop_reason
             : trial.stop_requested     ? "pause"
                                        : "rung";
  }
  const bool hold = stop_after_one_answer_if_testing("sync", step);
  for (const RoundWaiter& w : round.waiting) {
    Json answer{{"type", "sync"}, {"re", w.seq}, {"stop", stop}};
    if (stop) answer["reason"] = reason;
    reply_to(w.fd, std::move(answer));
    if (hold) break;  // the test kills cairn before the others get theirs
  }
  trial.syncs.erase(step);
}

void Coordinator::handle_rank_checkpoint_begin(Trial& trial, ControlConnection& conn,
                                               const Json& msg) {
  const int64_t step = msg.value("step", int64_t{0});
  RankRound& round = trial.checkpoint_rounds[step];
  if (round.staging_dir.empty()) {
    auto dir = make_unique_dir(store_.staging(), trial_id(trial.index) + "-");
    if (!dir.ok()) {
      if (round.waiting.empty() && round.begun.empty()) trial.checkpoint_rounds.erase(step);
      reply(conn, Json{{"type", "error"},
                       {"re", msg.value("seq", 0)},
                       {"message", dir.status().message()}});
      return;
    }
    round.staging_dir = dir->string();
    trial.staging_dirs.insert(round.staging_dir);
  }
  if (remote_round_begin(trial, round, step, conn, msg)) return;  // its machine's own directory
  round.begun.insert(conn.rank);
  reply(conn,
        Json{{"type", "checkpoint_dir"}, {"re", msg.value("seq", 0)}, {"path", round.staging_dir}});
}

void Coordinator::handle_rank_checkpoint_end(Trial& trial, ControlConnection& conn,
                                             const Json& msg) {
  const int64_t step = msg.value("step", int64_t{0});
  auto it = trial.checkpoint_rounds.find(step);
  if (it == trial.checkpoint_rounds.end() ||
      round_dir_of(trial, it->second, conn.rank) != msg.value("path", "") ||
      !it->second.begun.count(conn.rank)) {
    reply(conn, Json{{"type", "error"},
                     {"re", msg.value("seq", 0)},
                     {"message", "checkpoint_end for a directory cairn did not hand out"}});
    if (adopted_attempt(trial) && msg.value("path", Json()).is_string()) {
      // A part the killed coordinator handed out, which the rank's agent did not replay (an
      // agent that predates it, or more than it keeps): the others' parts are no checkpoint
      // without it, so the round fails rather than registering a checkpoint that lacks it.
      RankRound& round = trial.checkpoint_rounds[step];
      if (round.refused.empty())
        round.refused = "rank " + std::to_string(conn.rank) +
                        "'s part was begun before cairn was killed, and its agent did not say "
                        "where (an agent that predates rebuilding rounds on adoption)";
      settle_checkpoint_rounds(trial);
    }
    return;
  }
  RankRound& round = it->second;
  round.ranks.insert(conn.rank);
  round.waiting.push_back({conn.fd(), msg.value("seq", Json(0)), conn.rank});
  if (conn.rank == 0) round.metadata = msg.value("metadata", Json::object());
  settle_checkpoint_rounds(trial);
}

void Coordinator::handle_rank_checkpoint_abort(Trial& trial, ControlConnection& conn,
                                               const Json& msg) {
  auto it = trial.checkpoint_rounds.find(step_of(msg));
  if (it == trial.checkpoint_rounds.end() ||
      round_dir_of(trial, it->second, conn.rank) != msg.value("path", "") ||
      !it->second.begun.count(conn.rank))
    return;
  // The other ranks' parts are no checkpoint without this one's: the round fails, once every
  // rank is accounted for (they are told so in the answer to their checkpoint_end).
  if (!it->second.aborted_by) it->second.aborted_by = conn.rank;
  it->second.ranks.insert(conn.rank);
  settle_checkpoint_rounds(trial);
}

void Coordinator::handle_checkpoint_skip(Trial& trial, ControlConnection& conn, const Json& msg) {
  const Json seq = msg.value("seq", Json(0));
  if (!msg.contains("step") || !msg["step"].is_number_integer()) {
    reply(conn, Json{{"type", "error"}, {"re", seq}, {"message", "checkpoint_skip needs a step"}});
    return;
  }
  if (trial.world_size() < 2) {  // nothing to agree on
    reply(conn, Json{{"type", "ack"}, {"re", seq}});
    return;
  }
  const int64_t step = msg["step"].get<int64_t>();
  RankRound& round = trial.checkpoint_rounds[step];
  if (const Json rng = msg.value("rng", Json()); rng.is_object()) {
    const std::string name = rng.value("name", "");
    const std::string hex = rng.value("hex", "");
    std::vector<char> bytes;
    if (is_rng_file_of(name, conn.rank) && hex.size() <= 2 * kMaxRngBytes &&
        sdk_detail::from_hex(hex, bytes))
      round.rng[name] = std::string(bytes.begin(), bytes.end());
    else
      log_output(trial, "cairn: warning: rank " + std::to_string(conn.rank) +
                            " sent a random-generator state cairn cannot store (file '" +
                            name.substr(0, 64) + "'); it is not kept with checkpoint " +
                            std::to_string(step) + "\n");
  }
  round.waiting.push_back({conn.fd(), seq, conn.rank});
  settle_checkpoint_rounds(trial);
}

void Coordinator::settle_checkpoint_rounds(Trial& trial) {
  // A gang that failed (a rank died, cairn killed it) commits nothing more: a rank that died
  // before saying whether it takes part has not left the checkpoint, it is missing from it.
  if (trial.outcome.failed() || trial.gang_fault) return;
  std::vector<int64_t> whole;
  for (const auto& [step, round] : trial.checkpoint_rounds) {
    bool accounted = true;
    for (int rank = 0; rank < trial.world_size() && accounted; ++rank) {
      const RankWait& w = trial.ranks[static_cast<size_t>(rank)].wait;
      if (round.ranks.count(rank)) continue;  // ended (or aborted) its part
      // A rank that began must end its part, unless it has exited.
      accounted = round.begun.count(rank) ? w.call == RankCall::kExited : left_checkpoint(w, step);
    }
    if (accounted) whole.push_back(step);
  }
  for (int64_t step : whole) finish_checkpoint_round(trial, step);
}

void Coordinator::finish_checkpoint_round(Trial& trial, int64_t step) {
  auto it = trial.checkpoint_rounds.find(step);
  if (it == trial.checkpoint_rounds.end()) return;
  RankRound done = std::move(it->second);
  trial.checkpoint_rounds.erase(it);
  if (done.staging_dir.empty()) {
    // No rank entered checkpoint(step): there is no checkpoint at this step. (But for one
    // whose part a killed coordinator handed out, which is lost: said, as for any round.)
    if (!done.refused.empty())
      log_output(trial, "cairn: error: checkpoint at step " + std::to_string(step) +
                            " was not saved: " + done.refused + "\n");
    for (const RoundWaiter& w : done.waiting) reply_to(w.fd, Json{{"type", "ack"}, {"re", w.seq}});
    return;
  }
  trial.staging_dirs.erase(done.staging_dir);
  if (done.rebuilt && trial.latest_checkpoint_step == step &&
      trial.record.value("latest_checkpoint", Json()).is_string()) {
    // Begun under a killed coordinator, which registered it and died before every rank
    // heard (adoption; an attempt checkpoints each step once): registered once, and now
    // acknowledged. The agents dropped their parts once they were stored.
    std::error_code ec;
    fs::remove_all(done.staging_dir, ec);
    const std::string id = trial.record["latest_checkpoint"].get<std::string>();
    for (const RoundWaiter& w : done.waiting)
      reply_to(w.fd, Json{{"type", "ack"}, {"re", w.seq}, {"checkpoint", id}});
    return;
  }
  std::string failure;
  if (!done.refused.empty())
    failure = done.refused;
  else if (done.aborted_by)
    failure = "rank " + std::to_string(*done.aborted_by) + " abandoned its part of it";
  else if (done.ranks.empty())
    failure = "no rank that began it finished it";
  // Ranks that did not take part still resume with the random numbers they would have drawn.
  for (const auto& [name, bytes] : done.rng) {
    if (!failure.empty()) break;
    if (fs::exists(fs::path(done.staging_dir) / name)) continue;  // the rank wrote it itself
    if (Status st = write_file_atomic(fs::path(done.staging_dir) / name, bytes); !st.ok())
      failure = st.message();
  }
  // Parts written on agents travel first (coordinator_remote_rounds.cc).
  if (failure.empty() && start_remote_round(trial, step, done, &failure)) return;
  Result<CheckpointManifest> manifest = Status::Failed(failure);
  uint64_t new_bytes = 0;
  if (failure.empty())
    manifest = ingest_checkpoint_dir(objects_, done.staging_dir, {trial_id(trial.index), step},
                                     &new_bytes, /*remove_staging=*/false);
  if (!manifest.ok()) {
    std::error_code ec;
    fs::remove_all(done.staging_dir, ec);
    log_output(trial, "cairn: error: checkpoint at step " + std::to_string(step) +
                          " was not saved: " + manifest.status().message() + "\n");
    record_event(schema::EventType::kCheckpointFailed,
                 {{"trial", trial.index}, {"step", step}, {"error", manifest.status().message()}});
    for (const RoundWaiter& w : done.waiting)
      reply_to(w.fd,
               Json{{"type", "error"}, {"re", w.seq}, {"message", manifest.status().message()}});
    return;
  }
  staging_to_remove_.push_back(done.staging_dir);
  register_checkpoint(trial, *manifest, step, new_bytes, done.metadata);
  for (const RoundWaiter& w : done.waiting)
    reply_to(w.fd, Json{{"type", "ack"}, {"re", w.seq}, {"checkpoint", manifest->id}});
}

void Coordinator::check_rank_waits() {
  const auto now = Clock::now();
  for (Trial* trial : live_trials()) {
    const int64_t index = trial->index;
    if (!trial->running() || trial->world_size() < 2 || trial->outcome.failed() ||
        trial->gang_fault)
      continue;
    const std::vector<RankWait> waits = trial->waits();
    std::optional<std::string> line = gang_deadlock(waits);
    if (!line)
      line = rank_wait_expired(waits, std::chrono::seconds(config_.rank_wait_timeout), now);
    if (!line) continue;
    terminal_.warn("trial " + trial_id(index) + ": " + *line);
    log_output(*trial, "cairn: error: " + *line + "; the ranks were killed\n");
    trial->gang_fault = *line;
    signal_ranks(*trial, SIGKILL);
  }
}

}  // namespace cairn
