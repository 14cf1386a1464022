// Whether a new experiment's entrypoint can start at all: its program found (on PATH, or
// as a path relative to the workdir), and, for a Python interpreter, its script present in
// the workdir. Checked by `cairn run` before anything is created, so that a typo
// (`python3 trian.py`) is one clear config error instead of an experiment whose every trial
// fails and is restarted `max_restarts` times. Not on resume or reproduce: their trials
// run from the recorded code snapshot, not from the workdir as it is now.
#pragma once

#include "common/status.h"
#include "engine/config/config.h"

namespace cairn {

// kBadInput naming the config's place: "exp.yaml:2: entrypoint: python script 'trian.py'
// not found in /home/you/project".
Status check_entrypoint(const ExperimentConfig& config);

}  // namespace cairn
