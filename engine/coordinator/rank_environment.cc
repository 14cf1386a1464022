#include "engine/coordinator/rank_environment.h"

#include <algorithm>

#include "engine/coordinator/slot_pool.h"

namespace cairn {

namespace {

// The machine rank `rank` runs on (0: this one).
int machine_of(const TrialEnvironment& t, int rank) {
  const size_t r = static_cast<size_t>(rank);
  return r < t.machines.size() ? t.machines[r] : 0;
}

// Which devices the rank sees and how many threads it may use.
void set_devices(const TrialEnvironment& t, int rank, std::map<std::string, std::string>& env) {
  const int machine = machine_of(t, rank);
  auto peer = t.peer_gpu_names.find(machine);
  const bool gpu_slots = machine == 0 ? t.gpu_slots : peer != t.peer_gpu_names.end();
  if (gpu_slots) {
    const std::vector<std::string>& names = machine == 0 ? t.gpu_names : peer->second;
    // A single-process trial gets all of its GPUs; each rank of a data-parallel one, its own.
    const size_t r = static_cast<size_t>(rank);
    env["CUDA_VISIBLE_DEVICES"] = t.world_size > 1
                                      ? device_list({r < t.slots.size() ? t.slots[r] : 0}, names)
                                      : device_list(t.slots, names);
  } else {
    if (t.cpu_only) env["CUDA_VISIBLE_DEVICES"] = "";
    // One core per slot by default, so concurrent trials do not oversubscribe the machine;
    // each rank of a data-parallel trial holds one slot. A user's setting wins.
    const std::string threads =
        std::to_string(t.world_size > 1 ? 1 : static_cast<int>(t.slots.size()));
    env.emplace("OMP_NUM_THREADS", threads);
    env.emplace("OPENBLAS_NUM_THREADS", threads);
  }
}

}  // namespace

std::map<std::string, std::string> rank_environment(const TrialEnvironment& t, int rank) {
  std::map<std::string, std::string> env = t.inherited;
  for (const auto& [k, v] : t.configured) env[k] = v;
  // cairn's variables win over anything inherited or configured: they are the protocol.
  env["CAIRN_EXPERIMENT_ID"] = std::to_string(t.experiment_id);
  env["CAIRN_TRIAL_ID"] = t.trial_id;
  // Sent back in the rank's hello: a process of an earlier attempt (left running on a machine
  // that was lost, say) can never speak for this one.
  env.erase("CAIRN_ATTEMPT");
  if (t.attempt > 0) env["CAIRN_ATTEMPT"] = std::to_string(t.attempt);
  // What the `determined` package needs beyond the SDK's own (docs/determined.md): the
  // trial's integer number, the searcher's metric and order, and the slot of each rank.
  if (t.trial_number > 0) env["CAIRN_TRIAL_NUMBER"] = std::to_string(t.trial_number);
  env["CAIRN_SEARCHER_METRIC"] = t.searcher_metric;
  env["CAIRN_SMALLER_IS_BETTER"] = t.smaller_is_better ? "1" : "0";
  std::string slots;
  for (int s : t.slots) slots += (slots.empty() ? "" : ",") + std::to_string(s);
  env["CAIRN_SLOTS"] = slots;
  // The live workdir, for trials that write outputs next to their code: they run in a
  // checkout of the snapshot (engine/coordinator/provenance.h), which is not where the user looks.
  env["CAIRN_WORKDIR"] = t.workdir.string();
  env["CAIRN_HPARAMS"] = t.hparams_json;
  env["CAIRN_SEED"] = std::to_string(t.seed);
  env["CAIRN_CONTROL"] = t.control_address;
  env["CAIRN_DETERMINISTIC"] = t.deterministic ? "1" : "0";
  env["CAIRN_CHECKPOINT_PERIOD"] = std::to_string(t.checkpoint_period);
  env["CAIRN_MAX_LENGTH"] = std::to_string(t.max_length);
  env["CAIRN_ORPHAN_DIR"] = t.orphan_dir.string();
  // builtin:mlp keeps the GPU kernels it compiles there, so that the next trial, resume or
  // promotion loads them instead of compiling them again (gpu/kernel_cache.h).
  if (t.kernel_cache) env["CAIRN_KERNEL_CACHE"] = t.kernel_cache->string();
  // A checkpoint path inherited from an outer trial (cairn run inside a trial) is not ours.
  env.erase("CAIRN_LATEST_CHECKPOINT");
  if (t.restored_checkpoint) env["CAIRN_LATEST_CHECKPOINT"] = t.restored_checkpoint->string();
  env["CAIRN_STEPS_COMPLETED"] = std::to_string(t.restored_checkpoint ? t.steps_completed : 0);

  // torchrun's variables (SPEC §4). LOCAL_*: among the ranks on the same machine. GROUP_*:
  // the machines (torchrun's nodes), numbered in the order of their lowest rank, so the
  // machine of rank 0 is group 0.
  int local_rank = 0, local_world = 0;
  bool one_machine = true;
  std::vector<int> machines;  // distinct, by first rank
  for (int r = 0; r < t.world_size; ++r) {
    if (std::find(machines.begin(), machines.end(), machine_of(t, r)) == machines.end())
      machines.push_back(machine_of(t, r));
    if (machine_of(t, r) != machine_of(t, 0)) one_machine = false;
    if (machine_of(t, r) != machine_of(t, rank)) continue;
    ++local_world;
    if (r < rank) ++local_rank;
  }
  const auto group = std::find(machines.begin(), machines.end(), machine_of(t, rank));
  env["RANK"] = std::to_string(rank);
  env["LOCAL_RANK"] = std::to_string(local_rank);
  env["WORLD_SIZE"] = std::to_string(t.world_size);
  env["LOCAL_WORLD_SIZE"] = std::to_string(std::max(1, local_world));
  env["GROUP_RANK"] = std::to_string(group == machines.end() ? 0 : group - machines.begin());
  env["GROUP_WORLD_SIZE"] = std::to_string(std::max<size_t>(1, machines.size()));
  env["MASTER_ADDR"] = one_machine ? "127.0.0.1" : t.master_addr;
  env["MASTER_PORT"] = std::to_string(t.master_port);

  auto pythonpath = env.find("PYTHONPATH");
  env["PYTHONPATH"] =
      t.python_sdk_dir.string() +
      (pythonpath != env.end() && !pythonpath->second.empty() ? ":" + pythonpath->second : "");
  // Decided for the trial, so every rank runs the same kernels; it has taken the user's
  // OPENBLAS_CORETYPE into account already.
  if (!t.blas.coretype.empty()) env["OPENBLAS_CORETYPE"] = t.blas.coretype;
  env.erase("CAIRN_BLAS_CORE");
  if (!t.blas.advice.empty()) env["CAIRN_BLAS_CORE"] = t.blas.advice;
  // The user's own choice of hash seed stands; deterministic mode only fills it in.
  if (t.deterministic) env.emplace("PYTHONHASHSEED", "0");

  set_devices(t, rank, env);
  return env;
}

}  // namespace cairn
