// A resumed coordinator's side of orphans on agents (remote_orphans.h, docs/peers.md "Orphans
// on an agent"): before the trials are recovered, every agent of an unfinished trial's last
// placement is asked (and, once, every other agent reached: it can hold an earlier attempt's
// orphans only, which are dropped) whether the trial's ranks still run there (a kept session the
// agent let go when this coordinator opened its own, or whose window ended: they checkpoint and
// exit), waited for within a bound — on a thread of its own (remote_orphan_wait.h) while the
// loop starts the other trials: a trial waited for is recovered and started only once its
// wait ended — and its orphan checkpoints newer than the trial's latest are
// fetched into the trial's work directory, orphans/remote-<step>/ (a gang's ranks of every
// agent in one directory), where adopt_orphan_checkpoints finds them as it finds a local
// trial's. Once they are durable here the agents remove theirs.
#include <algorithm>
#include <cstdint>
#include <set>

#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/remote_orphan_wait.h"
#include "engine/coordinator/remote_orphans.h"
#include "engine/coordinator/remote_session.h"
#include "engine/coordinator/trial_state.h"
#include "peer/agent_orphans.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// How long a question to an agent may take to connect and be answered.
constexpr auto kAskTime = std::chrono::seconds(5);
// How often an agent whose ranks still run is asked again.
constexpr auto kAskEvery = std::chrono::milliseconds(200);
// The agent kills an orphaned rank kOrphanExitBound after its channel closed; this side
// waits that long and a little more.
constexpr auto kWaitBound = kOrphanExitBound + std::chrono::seconds(30);

struct Ask {
  Trial* trial = nullptr;
  std::string machine;  // its name in the placement ("host:port")
  AgentEndpoint agent;
  OrphanListing listing;
  bool answered = false;  // it said the trial's ranks no longer run there
  // Another agent this resume reached, not of the trial's last placement: it can hold only
  // an earlier attempt's orphans (dropped, never adopted). Asked once, never waited for;
  // an answer it cannot give costs nothing.
  bool elsewhere = false;
};

}  // namespace

// What a resume asked the agents about orphans, kept while some trials' ranks still run there.
struct Coordinator::RemoteOrphans {
  std::string owner;
  std::vector<Ask> asks;
  std::set<int64_t> unusable;  // trials an agent of which cannot be asked
  std::unique_ptr<RemoteOrphanWait> wait;
};

void Coordinator::take_remote_orphans() {
  auto state = std::make_shared<RemoteOrphans>();
  std::vector<Ask>& asks = state->asks;
  std::set<int64_t>& unusable = state->unusable;
  for (auto& [index, trial] : trials_) {
    // A trial whose kept ranks this coordinator continues runs: it left no orphan.
    if (trial->finished || trial->running()) continue;
    std::vector<std::string> names;  // rank order: rank 0's machine first
    for (const Json& place : trial->record.value("placement", Json::array())) {
      const std::string name = place.is_object() ? place.value("machine", "") : "";
      if (name.empty() || name == "local") continue;
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    for (const std::string& name : names) {
      const AgentEndpoint* agent = nullptr;
      for (int m = 1; m < launcher_->size() && m < static_cast<int>(machines_.size()); ++m)
        if (machines_[static_cast<size_t>(m)].name() == name && !launcher_->lost(m))
          agent = launcher_->at(m).agent_of(LaunchedRank{});
      if (!agent) {
        terminal_.warn("warning: trial " + trial_id(index) + ": agent " + name +
                       " cannot be reached; what its ranks checkpointed there while cairn was "
                       "away is not adopted (it restarts from its latest registered checkpoint)");
        unusable.insert(index);
        continue;
      }
      asks.push_back({trial.get(), name, *agent, {}, false, false});
    }
    // Every other agent reached, for a trial that ever started: one question each.
    if (trial->attempt() <= 0) continue;
    for (int m = 1; m < launcher_->size() && m < static_cast<int>(machines_.size()); ++m) {
      const std::string& name = machines_[static_cast<size_t>(m)].name();
      if (launcher_->lost(m) || std::find(names.begin(), names.end(), name) != names.end())
        continue;
      if (const AgentEndpoint* agent = launcher_->at(m).agent_of(LaunchedRank{}))
        asks.push_back({trial.get(), name, *agent, {}, false, true});
    }
  }
  if (asks.empty()) return;
  // The agents keep each store's orphans apart (another store's experiment of the same id).
  state->owner = remote_session_options().owner;

  // One round: each agent asked about all its trials on one connection, the agents at once
  // (a hung one costs kAskTime once, and holds no other back).
  std::vector<OrphanQuestions> questions;
  std::vector<std::pair<size_t, size_t>> asked_as(asks.size());
  for (size_t i = 0; i < asks.size(); ++i) {
    const Ask& ask = asks[i];
    auto q = std::find_if(questions.begin(), questions.end(), [&](const OrphanQuestions& o) {
      return o.agent->address.text() == ask.agent.address.text();
    });
    if (q == questions.end())
      q = questions.insert(questions.end(), OrphanQuestions{&ask.agent, {}, {}});
    asked_as[i] = {static_cast<size_t>(q - questions.begin()), q->trials.size()};
    q->trials.push_back(trial_id(ask.trial->index));
  }
  ask_remote_orphans(questions, state->owner, kAskTime);
  std::vector<RemoteOrphanWait::Entry> waiting;
  for (size_t i = 0; i < asks.size(); ++i) {
    Ask& ask = asks[i];
    const int64_t index = ask.trial->index;
    Result<OrphanListing>& listed = questions[asked_as[i].first].answers[asked_as[i].second];
    if (ask.elsewhere) {
      // Ranks of an earlier attempt still running there leave their orphan for the GC or a
      // later resume: nothing of it is taken now.
      if (listed.ok() && !listed->running) ask.listing = std::move(*listed);
      ask.answered = true;
      continue;
    }
    if (!listed.ok()) {
      terminal_.warn("warning: trial " + trial_id(index) + ": cannot ask agent " + ask.machine +
                     " for its orphaned checkpoints (" + listed.status().message() +
                     "); it restarts from its latest registered checkpoint");
      unusable.insert(index);
      continue;
    }
    if (!listed->running) {
      ask.listing = std::move(*listed);
      ask.answered = true;
      continue;
    }
    // Waited for even when another agent of the trial cannot be asked: the trial never
    // starts beside its own ranks.
    terminal_.note("trial " + trial_id(index) + ": waiting for its ranks on agent " + ask.machine +
                   ", left from the previous run, to checkpoint and exit");
    ask.trial->remote_orphan_wait = true;
    waiting.push_back({index, trial_id(index), ask.machine, ask.agent});
  }
  remote_orphans_ = state;
  if (!waiting.empty())
    state->wait = std::make_unique<RemoteOrphanWait>(std::move(waiting), state->owner, kAskTime,
                                                     kAskEvery, Clock::now() + kWaitBound);
  for (auto& [index, trial] : trials_)
    if (!trial->remote_orphan_wait) fetch_remote_orphans(*trial);
}

bool Coordinator::settle_remote_orphans(Trial& trial) {
  if (!trial.remote_orphan_wait) return true;
  RemoteOrphans& state = *remote_orphans_;
  auto settled = state.wait->settled(trial.index);
  if (!settled) return false;
  const int64_t index = trial.index;
  for (const RemoteOrphanWait::Entry& e : *settled) {
    Ask* ask = nullptr;
    for (Ask& a : state.asks)
      if (a.trial == &trial && a.machine == e.machine && !a.elsewhere) ask = &a;
    if (!ask) continue;
    switch (e.state) {
      case RemoteOrphanWait::State::kAnswered:
        ask->listing = e.listing;
        ask->answered = true;
        break;
      case RemoteOrphanWait::State::kFailed:
        terminal_.warn("warning: trial " + trial_id(index) + ": cannot ask agent " + e.machine +
                       " for its orphaned checkpoints (" + e.why +
                       "); it restarts from its latest registered checkpoint");
        state.unusable.insert(index);
        break;
      case RemoteOrphanWait::State::kTimedOut:
        terminal_.warn(
            "warning: trial " + trial_id(index) + ": its ranks on agent " + e.machine +
            " still run after " +
            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kWaitBound).count()) +
            " s; it restarts from its latest registered checkpoint");
        state.unusable.insert(index);
        break;
      case RemoteOrphanWait::State::kWaiting:
        break;
    }
  }
  trial.remote_orphan_wait = false;
  fetch_remote_orphans(trial);
  return true;
}

void Coordinator::stop_remote_orphan_waits() {
  if (!remote_orphans_) return;
  // Ctrl-C, `cairn pause`, SIGTERM: what the ranks leave stays on the agents for the next
  // resume.
  for (auto& [index, trial] : trials_) {
    if (!trial->remote_orphan_wait) continue;
    for (const Ask& ask : remote_orphans_->asks)
      if (ask.trial == trial.get() && !ask.elsewhere && !ask.answered)
        terminal_.note("trial " + trial_id(index) + ": stopped waiting for its ranks on agent " +
                       ask.machine + " (interrupted); a later resume adopts what they leave there");
    trial->remote_orphan_wait = false;
  }
  remote_orphans_.reset();
}

void Coordinator::fetch_remote_orphans(Trial& trial_ref) {
  if (!remote_orphans_) return;
  const std::vector<Ask>& asks = remote_orphans_->asks;
  const std::string& owner = remote_orphans_->owner;
  const int64_t index = trial_ref.index;
  Trial* const trial = &trial_ref;
  const int64_t exp = experiment_["id"].get<int64_t>();
  {
    if (trial->finished || trial->running() || remote_orphans_->unusable.count(index)) return;
    // Only the trial's latest attempt's orphans: an earlier attempt's (given up while its
    // agent was cut off, which only this resume reaches) is stale, dropped, never registered.
    const int64_t attempt = trial->attempt();
    std::set<int64_t> steps;
    bool asked = false, stale = false;
    for (const Ask& ask : asks) {
      if (ask.trial != trial) continue;
      asked = true;
      std::string old;
      for (const OrphanStep& o : ask.listing.orphans) {
        if (o.attempt == attempt) {
          if (o.step > trial->latest_checkpoint_step) steps.insert(o.step);
          continue;
        }
        old += std::string(old.empty() ? "" : ", ") + "attempt " + std::to_string(o.attempt) +
               " at step " + std::to_string(o.step);
      }
      if (old.empty()) continue;
      stale = true;
      terminal_.note("trial " + trial_id(index) + ": dropping the orphaned checkpoints of " + old +
                     " on agent " + ask.machine + ": not of its latest attempt (" +
                     std::to_string(attempt) + "), never adopted");
    }
    if (!asked) return;
    const fs::path orphans = store_.trial_work(exp, index) / "orphans";
    bool complete = true;
    for (int64_t step : steps) {
      const fs::path into = orphans / ("remote-" + std::to_string(step));
      std::error_code ec;
      fs::remove_all(into, ec);  // a fetch a killed resume left half done
      uint64_t bytes = 0;
      size_t files = 0;
      std::string from;
      const OrphanStep orphan{attempt, step};
      for (const Ask& ask : asks) {
        if (ask.trial != trial ||
            !std::binary_search(ask.listing.orphans.begin(), ask.listing.orphans.end(), orphan))
          continue;
        // Tried again while its link fails, within the agent's link window (checkpoint_retry.h),
        // each try from where the last stopped (a content cut in the middle kept in staging).
        auto got = fetch_remote_orphan_retrying(ask.agent, owner, trial_id(index), orphan, into,
                                                objects_, store_.staging());
        if (!got.ok()) {
          terminal_.warn("warning: trial " + trial_id(index) +
                         ": cannot fetch its orphaned checkpoint at step " + std::to_string(step) +
                         " from agent " + ask.machine + " (" + got.status().message() + ")");
          fs::remove_all(into, ec);
          complete = false;
          break;
        }
        bytes += got->content_bytes;
        files += got->files;
        from += (from.empty() ? "" : ", ") + ask.machine;
      }
      if (fs::exists(into, ec))
        terminal_.note("trial " + trial_id(index) + ": fetched the checkpoint it took at step " +
                       std::to_string(step) + " while cairn was away from agent " + from + " (" +
                       std::to_string(files) + " files, " + std::to_string(bytes) +
                       " content bytes on the wire)");
    }
    // What is here now is durable: the agents' copies go (on failure they stay there for a
    // later resume, which fetches them again).
    if (!complete) return;
    const bool any = stale || std::any_of(asks.begin(), asks.end(), [&](const Ask& ask) {
                       return ask.trial == trial && !ask.listing.orphans.empty();
                     });
    for (const Ask& ask : asks) {
      // A rank's part that is no checkpoint without the others' goes too, as here.
      if (ask.trial != trial || !any) continue;
      if (ask.elsewhere && ask.listing.orphans.empty()) continue;  // nothing there
      if (Status dropped = drop_remote_orphans(ask.agent, owner, trial_id(index)); !dropped.ok())
        terminal_.warn("warning: trial " + trial_id(index) + ": agent " + ask.machine +
                       " keeps its orphaned checkpoints (" + dropped.message() + ")");
    }
  }
}

}  // namespace cairn
