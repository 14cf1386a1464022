// Where the store is: the nearest `.cairn/` from a directory upwards, like git finds `.git`;
// CAIRN_DIR or --store override (SPEC §1). Also the layout of the directories inside it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "common/status.h"

namespace cairn {

class StoreLayout {
 public:
  explicit StoreLayout(std::filesystem::path root) : root_(std::move(root)) {}
  const std::filesystem::path& root() const { return root_; }  // the `.cairn` directory
  std::filesystem::path experiments() const { return root_ / "experiments"; }
  std::filesystem::path experiment(int64_t id) const { return experiments() / std::to_string(id); }
  std::filesystem::path objects() const { return root_ / "objects"; }
  std::filesystem::path staging() const { return root_ / "staging"; }
  std::filesystem::path tmp() const { return root_ / "tmp"; }
  std::filesystem::path sdk() const { return root_ / "sdk"; }
  // Workdirs `cairn reproduce` checks recorded code and data out into, one per re-run.
  std::filesystem::path reproduce() const { return root_ / "reproduce"; }
  // GPU kernels builtin:mlp compiled, kept for the next trial (gpu/kernel_cache.h).
  std::filesystem::path kernel_cache() const { return root_ / "cache" / "kernels"; }
  // Per-trial scratch space: restored checkpoints, orphaned checkpoints.
  std::filesystem::path trial_work(int64_t exp, int64_t trial) const {
    return root_ / "work" / std::to_string(exp) / std::to_string(trial);
  }

 private:
  std::filesystem::path root_;
};

// The `.cairn` directory for `start`: `explicit_dir` (from --store) wins, then $CAIRN_DIR,
// then the nearest `.cairn/` from `start` upwards. NotFound when there is none.
// An explicit directory may name either the `.cairn` directory itself or its parent.
Result<StoreLayout> find_store(const std::optional<std::filesystem::path>& explicit_dir,
                               const std::filesystem::path& start);

// Creates `dir/.cairn` (idempotent) with its subdirectories and a format marker.
Result<StoreLayout> init_store(const std::filesystem::path& dir);

// Allocates the next experiment id by creating its directory (mkdir is atomic, so two
// `cairn run` on one store never get the same id).
Result<int64_t> allocate_experiment_id(const StoreLayout& store);

// The ids of all experiments in the store, ascending.
std::vector<int64_t> list_experiment_ids(const StoreLayout& store);

}  // namespace cairn
