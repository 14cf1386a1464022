// searcher.time_metric (Determined 0.38's model, docs/determined.md): the trial trains to its
// own length and never asks for operations, so when a validation reaches its rung the
// coordinator asks it to stop. It checkpoints and exits 0, which releases its slot (its
// operation is validated, engine/coordinator/exit_decision.h); a promotion resumes it from
// that checkpoint, so nothing is trained twice.
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/trial_state.h"

namespace cairn {

void Coordinator::stop_at_rung(Trial& trial, int64_t reached) {
  // Promoted at once past what it has trained (the searcher had decided already): it goes on.
  if (!trial.closed && trial.target > reached) return;
  // Not trial.stop_requested: that would make its clean exit a pause, not a release. A
  // multi-rank trial's ranks stop where they agree (handle_sync), which reads rung_stop.
  trial.rung_stop = true;
  for (const Rank& rank : trial.ranks) {
    auto it = connections_.find(rank.connection_fd);
    if (it == connections_.end()) continue;
    it->second->send(Json{{"type", "stop"}, {"reason", "rung"}});
    it->second->flush();
  }
}

}  // namespace cairn
