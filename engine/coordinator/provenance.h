// What an experiment runs, recorded when it is created (SPEC §5): the code snapshot (a
// commit in .cairn/code.git), the data fingerprint (and the data itself when it is small)
// and the dependency fingerprint. And the directory its trials run in, made from those
// records rather than from the live workdir, so editing code or data while a search runs
// cannot change what the search trains.
#pragma once

#include <cstdint>
#include <filesystem>

#include "common/json.h"
#include "common/status.h"
#include "engine/config/config.h"
#include "store/data_fingerprint.h"
#include "store/store_location.h"

namespace cairn {

// {"code": {...}, "data": {...}, "dependencies": {...}} for the experiment record.
// BadInput when the workdir is over the snapshot limit or a data path is missing.
// `data_read`, when given, is the data fingerprint already taken where the trials will read
// the data (`cairn reproduce` takes it to check it against a record): it is recorded as it
// is, so the data is not read again and what was checked is what is recorded.
// `recorded_blas_core` is the OpenBLAS core of the trial a reproduction re-runs ("" none).
Result<Json> capture_provenance(const StoreLayout& store, const ExperimentConfig& config,
                                const std::string& message,
                                const DataFingerprint* data_read = nullptr,
                                const std::string& recorded_blas_core = "");

// The directory trials of experiment `exp_id` run in: `.cairn/experiments/<id>/code`, a
// checkout of the recorded snapshot with the recorded data restored into it (data too large
// to keep is linked to the live path instead). Made on first use, atomically; experiments
// recorded before snapshots existed run in the live workdir.
Result<std::filesystem::path> prepare_run_directory(const StoreLayout& store, int64_t exp_id,
                                                    const Json& experiment,
                                                    const ExperimentConfig& config);

// Writes the snapshot `code.commit` and the stored data of an experiment record into `dest`
// (created), linking data that was too large to keep to its live path: what trials and
// `cairn reproduce` run from.
Status materialize_workdir(const StoreLayout& store, const Json& experiment,
                           const ExperimentConfig& config, const std::filesystem::path& dest);

}  // namespace cairn
