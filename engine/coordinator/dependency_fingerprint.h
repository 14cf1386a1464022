// The dependency fingerprint (SPEC §5): what a trial's result can depend on besides its
// code, data, config and seed — cairn itself, the OS, kernel and CPU, the GPU runtime, the
// entrypoint program and the shared libraries it loads, Python and its installed
// distributions, the `environment:` variables; for builtin:mlp, the OpenBLAS kernels its
// trials get here ("openblas-core"). A flat map of name -> version (or a hash
// where there is no version), so `cairn compare` can say "numpy: 1.24.2 → 1.26.0".
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/json.h"
#include "store/store_location.h"

namespace cairn {

struct DependencyInput {
  std::vector<std::string> entrypoint;
  std::filesystem::path workdir;
  std::map<std::string, std::string> environment;  // the config's
  bool builtin = false;                            // builtin:mlp: the program is cairn
  // builtin:mlp's OpenBLAS kernels depend on these (engine/coordinator/trial_blas_core.h):
  bool deterministic = false;
  std::string recorded_blas_core;  // the reproduced trial's, "" for none
};

// Never fails: what cannot be found out is left out. Identical on an unchanged machine.
Json dependency_fingerprint(const StoreLayout& store, const DependencyInput& in);

}  // namespace cairn
