// The environment a trial's rank starts with (SPEC §4, docs/protocol.md "Environment"): a
// pure function of what the coordinator decided for the trial, so that every rule (which
// variable wins over the user's, which GPU a rank sees, how many threads it may use) is
// stated once and unit-tested without starting a process.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cairn {

// What one attempt of a trial gives all of its ranks.
struct TrialEnvironment {
  // cairn's own environment (the base), then the config's `environment:` over it.
  std::map<std::string, std::string> inherited;
  std::map<std::string, std::string> configured;

  int64_t experiment_id = 0;
  std::string trial_id;      // "7.3"
  int64_t attempt = 0;       // which start of the trial this is (CAIRN_ATTEMPT); 0: unset
  int64_t trial_number = 0;  // store-wide (store/trial_numbers.h); 0: none
  std::string searcher_metric;
  bool smaller_is_better = true;
  std::filesystem::path workdir;
  std::string hparams_json;
  uint64_t seed = 0;
  std::string control_address;
  bool deterministic = false;
  int64_t checkpoint_period = 0;
  int64_t max_length = 0;
  std::filesystem::path orphan_dir;
  std::optional<std::filesystem::path> kernel_cache;  // builtin:mlp only
  std::filesystem::path python_sdk_dir;               // prepended to PYTHONPATH

  // The checkpoint the attempt resumes from (materialized there), or none: a fresh start.
  std::optional<std::filesystem::path> restored_checkpoint;
  int64_t steps_completed = 0;

  // torchrun's rendezvous. MASTER_ADDR is `master_addr` when the ranks run on several
  // machines (rank 0's machine as the others reach it), else 127.0.0.1.
  int world_size = 1;
  int master_port = 29500;
  std::string master_addr = "127.0.0.1";

  // The trial's slots, in rank order, each an index among its machine's slots; `machines`
  // says which machine runs each rank (slot_pool.h: 0 is this one; empty: all here).
  // GPU slots are named in CUDA_VISIBLE_DEVICES by `gpu_names` here and by
  // `peer_gpu_names` on another machine (a machine it does not list has CPU slots); CPU
  // slots are cores.
  std::vector<int> slots;
  std::vector<int> machines;
  bool gpu_slots = false;
  std::vector<std::string> gpu_names;
  std::map<int, std::vector<std::string>> peer_gpu_names;
  bool cpu_only = false;  // resources.devices: cpu — hide every GPU

  // OpenBLAS's kernels (engine/coordinator/trial_blas_core.h): OPENBLAS_CORETYPE for every
  // rank (builtin:mlp), or what cairn would choose, for the SDK to compare (other trials).
  struct Blas {
    std::string coretype;  // "": leave OPENBLAS_CORETYPE as it is
    std::string advice;    // CAIRN_BLAS_CORE; "": unset
    std::string warning;   // for the terminal, not the environment
  } blas;
};

// The complete environment of rank `rank` (0 ≤ rank < world_size).
std::map<std::string, std::string> rank_environment(const TrialEnvironment& trial, int rank);

}  // namespace cairn
