#include "cli/experiment_view.h"

#include <utility>

namespace cairn::cli {

Result<ExperimentView> open_experiment_view(const GlobalOptions& global, int64_t experiment,
                                            ViewStep* failed) {
  auto store = open_store(global);
  if (!store.ok()) {
    if (failed) *failed = ViewStep::kStore;
    return store.status();
  }
  auto reader = ExperimentReader::open(*store, experiment);
  if (!reader.ok()) {
    if (failed) *failed = ViewStep::kExperiment;
    return reader.status();
  }
  return ExperimentView{std::move(*store), std::move(*reader)};
}

}  // namespace cairn::cli
