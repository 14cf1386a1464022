// The OpenBLAS kernels of a trial (issue 22), decided by the coordinator once per attempt and
// handed to every rank in the environment they share (rank_environment.h), so that the
// ranks of one trial agree (they run on this machine; a rank elsewhere would get the
// coordinator's decision too).
//
// builtin:mlp trials, which are cairn itself, get OPENBLAS_CORETYPE set before OpenBLAS
// initialises (trainer/blas_core_type.h has the rules), and the choice is recorded in the
// trial's record as "blas_core": {"core", "chosen_by", "openblas_own", "cpu"[, "from",
// "warning"]}. Other trials keep their numerics: they are only told, in CAIRN_BLAS_CORE, what
// cairn would choose, which the Python SDK compares with the OpenBLAS the trial loads.
// Thread-safety: call from the coordinator's thread (it edits the record it is given).
#pragma once

#include <map>
#include <string>

#include "common/json.h"
#include "engine/coordinator/rank_environment.h"

namespace cairn {

struct ExperimentConfig;

// Decides for one attempt of a trial: reads the user's OPENBLAS_CORETYPE from `env` (its
// inherited variables with the config's over them), the record of an earlier attempt in
// `trial_record` and, for a reproduction, experiment["reproduces"]; writes
// trial_record["blas_core"] for builtin:mlp. The result's warning is for the user.
TrialEnvironment::Blas choose_trial_blas_core(const ExperimentConfig& config,
                                              const Json& experiment, Json& trial_record,
                                              const TrialEnvironment& env);

// A field of the "blas_core" record that `holder` (a trial record, or an experiment's
// "reproduces") carries, as text: "" when the record or the field is missing or not text,
// so a damaged record reads as none rather than throwing.
std::string blas_core_field(const Json& holder, const char* field);

// The dependency fingerprint's "openblas-core" (engine/coordinator/dependency_fingerprint.h):
// what the trials of a builtin:mlp experiment get on this machine, "Cooperlake (cairn)",
// "Haswell (deterministic)", …; `recorded` is the reproduced trial's core, "" for none.
std::string blas_core_fingerprint(bool deterministic, const std::string& recorded,
                                  const std::map<std::string, std::string>& env);

}  // namespace cairn
