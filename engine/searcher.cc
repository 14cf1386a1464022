#include "engine/searcher.h"

#include "engine/single_searcher.h"

namespace cairn {

Result<std::unique_ptr<Searcher>> make_searcher(const ExperimentConfig& config, uint64_t seed) {
  const std::string& name = config.searcher.name;
  if (name == "single")
    return std::unique_ptr<Searcher>(std::make_unique<SingleSearcher>(config, seed));
  return Status::BadInput(config.config_path.string() + ": searcher.name: '" + name +
                          "' is not available in this build yet (only 'single' is)");
}

}  // namespace cairn
