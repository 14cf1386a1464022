// What Hyperband and ASHA share: brackets of rungs (bracket_plan.h) that trials climb. A
// trial that completes a rung waits there (the coordinator checkpoints and pauses it) until
// the searcher promotes it — it then resumes and trains only up to the next rung's length —
// or closes it. Trials are created lazily, in index order, whenever fewer than
// `concurrency` trials have training to do, so slots stay busy without creating every
// trial up front. The subclass decides when a rung promotes and which bracket grows next.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/search/bracket_plan.h"
#include "engine/search/rung.h"
#include "engine/search/searcher.h"
#include "engine/search/trial_sampler.h"

namespace cairn {

class HalvingSearcher : public Searcher {
 public:
  std::vector<SearcherAction> start() override;
  std::vector<SearcherAction> on_validation(int64_t trial, int64_t length, double metric) override;
  std::vector<SearcherAction> on_trial_closed(int64_t trial) override;
  bool finished() const override;
  // Adds "sampler" and "brackets" to the common fields; docs/search.md shows the shape.
  Json describe() const override;
  // Trials: the plan's. Units: per rung, the trials sent toward it times the units the rung
  // adds; a rung still open counts at least the plan's number (bracket_plan.h), a settled
  // one (rung_settled()) exactly those sent. Exact once every rung is settled; before, the
  // count of a rung still open is max(plan, sent so far), which a trial erroring below it
  // lowers and, for ASHA, a later promotion of a trial that overtook one already promoted
  // raises (docs/search.md, "What the status line counts"). Computed once per change of the
  // searcher's state (a walk over the rungs' entries), cached between.
  SearchPlan plan() const override;
  std::vector<SearcherAction> set_concurrency(int concurrency) override;

 protected:
  using Actions = std::vector<SearcherAction>;

  struct Bracket {
    BracketPlan plan;
    std::vector<Rung> rungs;
    std::vector<int64_t> training;  // per rung: trials training toward it right now
    int64_t created = 0;
    int last_rung() const { return static_cast<int>(rungs.size()) - 1; }
    bool all_created() const { return created == plan.trials; }
  };

  HalvingSearcher(std::string name, const ExperimentConfig& config, uint64_t seed, int concurrency,
                  std::vector<BracketPlan> plan);

  // `rung` of `brackets()[bracket]` changed: a trial completed it, errored on its way to it,
  // or ended while waiting in it.
  virtual void on_rung_changed(int bracket, int rung, Actions& out) = 0;
  // The bracket that creates the next trial; REQUIRES one is not all_created().
  virtual int next_bracket() const = 0;

  // Sends `trials` (waiting in `rung`) on to the next rung.
  void promote(int bracket, int rung, const std::vector<int64_t>& trials, Actions& out);
  void close(const std::vector<int64_t>& trials, Actions& out);

  const std::vector<Bracket>& brackets() const { return brackets_; }
  Bracket& bracket(int index) { return brackets_[index]; }
  double divisor() const { return config_.divisor; }

 private:
  struct Trial {
    int bracket = 0;
    int rung = 0;  // the rung it is training toward, or waiting in
    bool training = false;
    bool close_sent = false;
    bool closed = false;
  };

  Trial* find(int64_t trial);
  void create_while_room(Actions& out);
  // No trial will ever be sent toward rung `r` of bracket `b` again.
  bool rung_settled(const Bracket& b, int r) const;

  std::string name_;
  SearcherConfig config_;
  TrialSampler sampler_;  // BOHB when sampler: tpe
  uint64_t seed_;
  int concurrency_;
  std::vector<Bracket> brackets_;
  std::vector<Trial> trials_;  // trial index i is trials_[i - 1]
  int64_t planned_ = 0;
  int64_t busy_ = 0;  // trials with training to do
  int64_t closed_ = 0;
  BestValidation best_;
  mutable std::optional<SearchPlan> plan_;  // plan(), until the next call that changes state
};

}  // namespace cairn
