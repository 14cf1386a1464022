#include "engine/coordinator/remote_orphan_wait.h"

#include <algorithm>
#include <utility>

namespace cairn {

using Clock = std::chrono::steady_clock;

RemoteOrphanWait::RemoteOrphanWait(std::vector<Entry> entries, std::string owner,
                                   std::chrono::milliseconds ask_time,
                                   std::chrono::milliseconds ask_every, Clock::time_point give_up)
    : owner_(std::move(owner)),
      ask_time_(ask_time),
      ask_every_(ask_every),
      give_up_(give_up),
      entries_(std::move(entries)) {
  thread_ = std::thread([this] { run(); });
}

RemoteOrphanWait::~RemoteOrphanWait() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

std::optional<std::vector<RemoteOrphanWait::Entry>> RemoteOrphanWait::settled(int64_t index) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Entry> out;
  for (const Entry& e : entries_) {
    if (e.trial != index) continue;
    if (e.state == State::kWaiting) return std::nullopt;
    out.push_back(e);
  }
  return out;
}

void RemoteOrphanWait::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      // The first round was the resume's own: wait a period before asking again.
      if (stop_cv_.wait_for(lock, ask_every_, [this] { return stop_; })) return;
      if (Clock::now() >= give_up_) {
        for (Entry& e : entries_)
          if (e.state == State::kWaiting) e.state = State::kTimedOut;
        return;
      }
    }
    // This round's questions, outside the lock: one connection per agent, all at once.
    std::vector<OrphanQuestions> questions;
    std::vector<AgentEndpoint> agents;             // kept alive for `questions`
    std::vector<std::pair<size_t, size_t>> where;  // entry -> (question, trial)
    {
      std::lock_guard<std::mutex> lock(mu_);
      agents.reserve(entries_.size());
      where.assign(entries_.size(), {SIZE_MAX, 0});
      std::vector<std::string> machines;
      for (size_t i = 0; i < entries_.size(); ++i) {
        const Entry& e = entries_[i];
        if (e.state != State::kWaiting) continue;
        auto m = std::find(machines.begin(), machines.end(), e.machine);
        size_t q = static_cast<size_t>(m - machines.begin());
        if (m == machines.end()) {
          machines.push_back(e.machine);
          agents.push_back(e.agent);
        }
        where[i] = {q, 0};
      }
      questions.resize(machines.size());
      for (size_t q = 0; q < questions.size(); ++q) questions[q].agent = &agents[q];
      for (size_t i = 0; i < entries_.size(); ++i) {
        if (where[i].first == SIZE_MAX) continue;
        where[i].second = questions[where[i].first].trials.size();
        questions[where[i].first].trials.push_back(entries_[i].trial_id);
      }
    }
    if (questions.empty()) return;
    ask_remote_orphans(questions, owner_, ask_time_);
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (where[i].first == SIZE_MAX) continue;
      Entry& e = entries_[i];
      Result<OrphanListing>& got = questions[where[i].first].answers[where[i].second];
      if (!got.ok()) {
        e.state = State::kFailed;
        e.why = got.status().message();
      } else if (!got->running) {
        e.state = State::kAnswered;
        e.listing = std::move(*got);
      }
    }
    if (std::none_of(entries_.begin(), entries_.end(),
                     [](const Entry& e) { return e.state == State::kWaiting; }))
      return;
  }
}

}  // namespace cairn
