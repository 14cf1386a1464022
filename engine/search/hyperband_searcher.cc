#include "engine/search/hyperband_searcher.h"

namespace cairn {
namespace {

std::vector<BracketPlan> plan_or_nothing(const SearcherConfig& config) {
  auto plan = hyperband_plan(config);
  return plan.ok() ? std::move(*plan) : std::vector<BracketPlan>{};
}

}  // namespace

HyperbandSearcher::HyperbandSearcher(const ExperimentConfig& config, uint64_t seed, int concurrency)
    : HalvingSearcher("hyperband", config, seed, concurrency, plan_or_nothing(config.searcher)) {
  decided_.assign(brackets().size(), 0);
}

void HyperbandSearcher::on_rung_changed(int index, int, Actions& out) {
  Bracket& b = bracket(index);
  // Decide every rung that is complete; a rung left empty (all its trials errored) is
  // complete at once, so the bracket still ends.
  for (int& r = decided_[index]; r < b.last_rung(); ++r) {
    const bool everyone_arrived = r > 0 || b.all_created();
    if (!everyone_arrived || b.training[r] > 0) return;
    promote(index, r, b.rungs[r].promote_best(b.plan.rungs[r + 1].trials), out);
    close(b.rungs[r].close_waiting(), out);
  }
}

int HyperbandSearcher::next_bracket() const {
  for (size_t i = 0; i < brackets().size(); ++i)
    if (!brackets()[i].all_created()) return static_cast<int>(i);
  return 0;
}

}  // namespace cairn
