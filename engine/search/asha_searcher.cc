#include "engine/search/asha_searcher.h"

#include <algorithm>
#include <cmath>

namespace cairn {

AshaSearcher::AshaSearcher(const ExperimentConfig& config, uint64_t seed, int concurrency)
    : HalvingSearcher("asha", config, seed, concurrency, asha_plan(config.searcher)),
      stop_once_(config.searcher.stop_once) {}

void AshaSearcher::on_rung_changed(int index, int r, Actions& out) {
  Bracket& b = bracket(index);
  if (r < b.last_rung()) {
    Rung& rung = b.rungs[r];
    // The tolerance keeps ⌊6/1.5⌋ at 4 whatever the rounding of the division.
    const auto top = static_cast<int64_t>(std::floor(rung.size() / divisor() * (1 + 1e-9)));
    if (stop_once_) {
      // Decided once, on arrival: among the best ⌊n/η⌋ (at least one) of the n that reached
      // the rung so far, it goes on at once; otherwise it stops for good.
      promote(index, r, rung.promote_best(std::max<int64_t>(top, 1)), out);
      close(rung.close_waiting(), out);
    } else {
      promote(index, r, rung.promote_best(top), out);
    }
  }
  close_settled_rungs(index, out);
}

void AshaSearcher::close_settled_rungs(int index, Actions& out) {
  Bracket& b = bracket(index);
  if (!b.all_created()) return;
  // A rung can only grow while some trial trains toward it or toward a rung below it.
  for (int r = 0; r < b.last_rung(); ++r) {
    if (b.training[r] > 0) return;
    close(b.rungs[r].close_waiting(), out);
  }
}

int AshaSearcher::next_bracket() const {
  int best = -1;
  for (size_t i = 0; i < brackets().size(); ++i) {
    const Bracket& b = brackets()[i];
    if (b.all_created()) continue;
    if (best < 0) {
      best = static_cast<int>(i);
      continue;
    }
    const Bracket& chosen = brackets()[best];
    // created / planned below the chosen one's, compared without division.
    if (b.created * chosen.plan.trials < chosen.created * b.plan.trials) best = static_cast<int>(i);
  }
  return best < 0 ? 0 : best;
}

}  // namespace cairn
