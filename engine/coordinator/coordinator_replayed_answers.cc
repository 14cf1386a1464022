// Adoption's replay of the requests a killed coordinator had answered (docs/peers.md
// "Adoption"; peer/session_adoption.h StreamLines): {"type":"answered","request":R,
// "answer":A}. A gang agrees on two kinds of requests — a sync's stop, and a checkpoint
// round's staging directories — and the killed coordinator may have answered them to some of
// its ranks only (the kill fell between the answers' writes). The ranks that got theirs never
// send those requests again, so the coordinator that adopts the gang rebuilds each round from
// what every rank got:
// - a sync round counts the rank as in it, with the decision it was given: once the others'
//   syncs (replayed, unanswered) arrive, they get the same answer (decide_sync);
// - a checkpoint round knows the rank began it, and the directory its agent staged for it,
//   which its checkpoint_end names and which is fetched as the rank's machine's part when the
//   round settles (coordinator_remote_rounds.cc); the ranks that had no directory yet get one
//   now. One whose killed coordinator had already registered it is acknowledged, not stored
//   twice (finish_checkpoint_round).
// Nothing answers the line. It is taken only from the ranks of an attempt this coordinator
// adopted: elsewhere no killed coordinator decided anything the gang still depends on. The
// agent checks, as for any fetch, that a directory is one it staged for that trial and
// attempt; a stale attempt's part is refused there, and its round's registration here.
#include "common/file_util.h"
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/trial_state.h"

namespace cairn {

namespace {

std::string string_of(const Json& m, const char* name) {
  const Json v = m.is_object() ? m.value(name, Json()) : Json();
  return v.is_string() ? v.get<std::string>().substr(0, 4096) : std::string();
}

}  // namespace

void Coordinator::handle_answered(Trial& trial, ControlConnection& conn, const Json& msg) {
  const Json request = msg.value("request", Json());
  const Json answer = msg.value("answer", Json());
  if (trial.world_size() < 2 || !adopted_attempt(trial) || conn.rank < 0 ||
      conn.rank >= trial.world_size() || !request.is_object() || !answer.is_object() ||
      !request.value("step", Json()).is_number_integer())
    return;
  const std::string type = string_of(request, "type");
  const std::string said = string_of(answer, "type");
  const int64_t step = request["step"].get<int64_t>();
  Rank& rank = trial.ranks[static_cast<size_t>(conn.rank)];
  if (type == "sync" && said == "sync") {
    rank.wait.reached(step);  // past its sync of `step`, waiting in nothing
    RankRound& round = trial.syncs[step];
    round.ranks.insert(conn.rank);
    if (!round.decided) {
      const bool stop = answer.value("stop", Json(false)) == Json(true);
      Json decided{{"stop", stop}};
      if (stop)
        decided["reason"] =
            string_of(answer, "reason").empty() ? std::string("stop") : string_of(answer, "reason");
      round.decided = std::move(decided);
    }
    decide_sync(trial, step);
  } else if (type == "checkpoint_begin" &&
             (said == "error" ||
              (said == "checkpoint_dir" && !string_of(answer, "path").empty()))) {
    rank.wait.reached(step);
    const AgentEndpoint* agent = rank.process ? launcher_->agent_of(*rank.process) : nullptr;
    if (!agent) return;  // an adopted rank runs on an agent
    RankRound& round = trial.checkpoint_rounds[step];
    if (round.staging_dir.empty()) {
      // This machine's directory of the round: the generator states of ranks that skip it.
      auto dir = make_unique_dir(store_.staging(), trial_id(trial.index) + "-");
      if (!dir.ok()) {
        if (round.waiting.empty() && round.begun.empty()) trial.checkpoint_rounds.erase(step);
        log_output(trial, "cairn: error: checkpoint at step " + std::to_string(step) +
                              " was not saved: " + dir.status().message() + "\n");
        return;  // its ranks' checkpoint_end are refused, as for any round without a directory
      }
      round.staging_dir = dir->string();
      trial.staging_dirs.insert(round.staging_dir);
    }
    round.rebuilt = true;
    RemoteRoundPart& part = round.remote[rank.machine];
    if (part.machine.empty()) {
      part.agent = *agent;
      part.machine = machines_[static_cast<size_t>(rank.machine)].name();
    }
    if (said == "error") {
      // The killed coordinator could not stage this machine's part: the rank takes no part,
      // and the round fails, as it would have there.
      if (part.path.empty() && part.failure.empty())
        part.failure = string_of(answer, "message").empty() ? std::string("refused")
                                                            : string_of(answer, "message");
    } else {
      const std::string path = string_of(answer, "path");
      round.begun.insert(conn.rank);
      if (part.path.empty() && !part.staging && part.failure.empty())
        part.path = path;  // the other ranks of its machine get it too
      else if (part.path != path)
        part.rank_paths[conn.rank] = path;
    }
  }
  settle_checkpoint_rounds(trial);
}

}  // namespace cairn
