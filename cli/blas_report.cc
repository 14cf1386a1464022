#include "cli/blas_report.h"

#include <cstdlib>

#include "common/cpu_features.h"
#include "trainer/blas.h"
#include "trainer/blas_core_type.h"

namespace cairn::cli {

BlasReport blas_report() {
  BlasReport r;
  const CpuFeatures& cpu = this_cpu_features();
  r.in_use = blas::core_in_use();
  if (const char* forced = std::getenv("OPENBLAS_CORETYPE"); forced && *forced) r.forced = forced;
  r.cpu = cpu.summary();
  const blas::CoreChoice choice =
      blas::choose_core_type({cpu, blas::openblas_own_choice(), "", "", false});
  r.cairn_core = choice.core;
  r.cairn_source = std::string(blas::source_name(choice.source));
  const blas::CoreChoice pinned =
      blas::choose_core_type({cpu, blas::openblas_own_choice(), "", "", true});
  r.deterministic = pinned.core;
  r.falls_short = blas::falls_short(r.in_use, cpu);
  return r;
}

Json blas_report_json(const BlasReport& r) {
  return Json{{"core", r.in_use},
              {"forced_by_env", r.forced.empty() ? Json(nullptr) : Json(r.forced)},
              {"cpu", r.cpu},
              {"cairn_choice", r.cairn_core},
              {"cairn_choice_by", r.cairn_source},
              {"cairn_deterministic", r.deterministic},
              {"falls_short", r.falls_short}};
}

std::string blas_report_text(const BlasReport& r) {
  std::string text = r.in_use + " kernels (" +
                     (r.forced.empty() ? "OpenBLAS's own choice" : "set by OPENBLAS_CORETYPE") +
                     ")";
  if (r.cairn_core.empty()) return text + "; cairn leaves the choice to OpenBLAS on this CPU";
  text += "; cairn's choice for builtin:mlp: " + r.cairn_core +
          (r.deterministic == r.cairn_core ? " (deterministic: true too)"
                                           : ", " + r.deterministic + " with deterministic: true") +
          " (CPU: " + r.cpu + ")";
  if (!r.forced.empty()) text += "; a user's OPENBLAS_CORETYPE comes first";
  return text;
}

}  // namespace cairn::cli
