// Which searcher a config names: the one place that knows every concrete searcher, so that
// the Searcher interface (engine/search/searcher.h), which they all implement, knows none.
#pragma once

#include <cstdint>
#include <memory>

#include "common/status.h"
#include "engine/config/config.h"
#include "engine/search/searcher.h"

namespace cairn {

// REQUIRES: `config` validated. `concurrency` is how many trials the coordinator can run at
// once (values below 1 count as 1): searchers create trials lazily to keep that many busy.
// kBadInput, naming the key, for a searcher config only the searcher can judge.
Result<std::unique_ptr<Searcher>> make_searcher(const ExperimentConfig& config, uint64_t seed,
                                                int concurrency);
// The same with a concurrency of 1.
Result<std::unique_ptr<Searcher>> make_searcher(const ExperimentConfig& config, uint64_t seed);

}  // namespace cairn
