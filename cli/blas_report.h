// What `cairn version` and `cairn doctor` say of OpenBLAS's kernels (issue 22): the core type
// OpenBLAS runs in this process, whether OPENBLAS_CORETYPE forced it, and the ones cairn
// chooses for builtin:mlp trials here, with and without deterministic: true.
#pragma once

#include <string>

#include "common/json.h"

namespace cairn::cli {

struct BlasReport {
  std::string in_use;         // openblas_get_corename()
  std::string forced;         // OPENBLAS_CORETYPE, "" when unset
  std::string cpu;            // the CPU's newest level: "AVX-512 BF16", …
  std::string cairn_core;     // builtin:mlp's core here, OPENBLAS_CORETYPE aside
  std::string cairn_source;   // "cairn" or "openblas" (blas::source_name)
  std::string deterministic;  // what deterministic: true pins here
  bool falls_short = false;   // in_use is older than the CPU supports
};

BlasReport blas_report();

// {"core": …, "forced_by_env": …|null, "cpu": …, "cairn_choice": …, "cairn_deterministic": …,
//  "falls_short": …} for `version --json`.
Json blas_report_json(const BlasReport& report);

// One line: "Cooperlake kernels (OpenBLAS's own choice); cairn's choice for builtin:mlp: …".
std::string blas_report_text(const BlasReport& report);

}  // namespace cairn::cli
