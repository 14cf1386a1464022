#include "engine/coordinator/rank_environment.h"

#include <doctest/doctest.h>

namespace cairn {

namespace {

TrialEnvironment two_rank_trial() {
  TrialEnvironment t;
  t.inherited = {{"PATH", "/usr/bin"},
                 {"PYTHONPATH", "/home/me/lib"},
                 {"CAIRN_LATEST_CHECKPOINT", "/outer/trial/checkpoint"},
                 {"CAIRN_TRIAL_ID", "1.1"}};
  t.configured = {{"MY_FLAG", "on"}, {"CAIRN_SEED", "99"}};
  t.experiment_id = 7;
  t.trial_id = "7.3";
  t.workdir = "/work/project";
  t.hparams_json = R"({"lr":0.1})";
  t.seed = 42;
  t.control_address = "/run/cairn.sock";
  t.checkpoint_period = 5;
  t.max_length = 100;
  t.orphan_dir = "/store/work/7/3/orphans";
  t.python_sdk_dir = "/store/sdk/python";
  t.world_size = 2;
  t.master_port = 31000;
  t.slots = {2, 3};
  return t;
}

}  // namespace

TEST_CASE("the determined package's variables: trial number, searcher metric") {
  TrialEnvironment t = two_rank_trial();
  t.trial_number = 17;
  t.searcher_metric = "val_acc";
  t.smaller_is_better = false;
  auto env = rank_environment(t, 1);
  CHECK(env["CAIRN_TRIAL_NUMBER"] == "17");
  CHECK(env["CAIRN_SEARCHER_METRIC"] == "val_acc");
  CHECK(env["CAIRN_SMALLER_IS_BETTER"] == "0");
}

TEST_CASE("every rank gets the protocol's variables, and they win over inherited ones") {
  const TrialEnvironment t = two_rank_trial();
  for (int rank = 0; rank < 2; ++rank) {
    auto env = rank_environment(t, rank);
    CHECK(env["CAIRN_TRIAL_ID"] == "7.3");
    CHECK(env.count("CAIRN_TRIAL_NUMBER") == 0);  // none given
    CHECK(env["CAIRN_SLOTS"] == "2,3");           // every rank sees all, in rank order
    CHECK(env["CAIRN_SMALLER_IS_BETTER"] == "1");
    CHECK(env["CAIRN_EXPERIMENT_ID"] == "7");
    CHECK(env["CAIRN_SEED"] == "42");  // the config's environment cannot fake the protocol
    CHECK(env["CAIRN_HPARAMS"] == R"({"lr":0.1})");
    CHECK(env["CAIRN_CONTROL"] == "/run/cairn.sock");
    CHECK(env["CAIRN_CHECKPOINT_PERIOD"] == "5");
    CHECK(env["CAIRN_MAX_LENGTH"] == "100");
    CHECK(env["CAIRN_DETERMINISTIC"] == "0");
    CHECK(env["MY_FLAG"] == "on");
    CHECK(env["PATH"] == "/usr/bin");
    CHECK(env["RANK"] == std::to_string(rank));
    CHECK(env["LOCAL_RANK"] == std::to_string(rank));
    CHECK(env["WORLD_SIZE"] == "2");
    CHECK(env["LOCAL_WORLD_SIZE"] == "2");
    CHECK(env["GROUP_RANK"] == "0");
    CHECK(env["GROUP_WORLD_SIZE"] == "1");
    CHECK(env["MASTER_ADDR"] == "127.0.0.1");
    CHECK(env["MASTER_PORT"] == "31000");
    CHECK(env["PYTHONPATH"] == "/store/sdk/python:/home/me/lib");
    CHECK(env.count("CAIRN_KERNEL_CACHE") == 0);
    CHECK(env.count("PYTHONHASHSEED") == 0);
  }
}

TEST_CASE("a fresh start has no checkpoint, even one inherited from an outer trial") {
  auto env = rank_environment(two_rank_trial(), 0);
  CHECK(env.count("CAIRN_LATEST_CHECKPOINT") == 0);
  CHECK(env["CAIRN_STEPS_COMPLETED"] == "0");

  TrialEnvironment restored = two_rank_trial();
  restored.restored_checkpoint = "/store/work/7/3/restore";
  restored.steps_completed = 40;
  for (int rank = 0; rank < 2; ++rank) {
    env = rank_environment(restored, rank);
    CHECK(env["CAIRN_LATEST_CHECKPOINT"] == "/store/work/7/3/restore");
    CHECK(env["CAIRN_STEPS_COMPLETED"] == "40");
  }
}

TEST_CASE("CPU slots: one thread per rank of a gang, one per slot for a single process") {
  TrialEnvironment t = two_rank_trial();
  auto env = rank_environment(t, 1);
  CHECK(env["OMP_NUM_THREADS"] == "1");
  CHECK(env["OPENBLAS_NUM_THREADS"] == "1");
  CHECK(env.count("CUDA_VISIBLE_DEVICES") == 0);

  t.world_size = 1;
  t.slots = {0, 1, 2};
  env = rank_environment(t, 0);
  CHECK(env["OMP_NUM_THREADS"] == "3");

  // The user's own thread count wins; devices: cpu hides every GPU.
  t.inherited["OMP_NUM_THREADS"] = "8";
  t.cpu_only = true;
  env = rank_environment(t, 0);
  CHECK(env["OMP_NUM_THREADS"] == "8");
  CHECK(env["OPENBLAS_NUM_THREADS"] == "3");
  CHECK(env["CUDA_VISIBLE_DEVICES"].empty());
  CHECK(env.count("CUDA_VISIBLE_DEVICES") == 1);
}

TEST_CASE("GPU slots: each rank of a gang sees its own GPU, a single process all of its own") {
  TrialEnvironment t = two_rank_trial();
  t.gpu_slots = true;
  t.gpu_names = {"GPU-a", "GPU-b", "GPU-c", "GPU-d"};
  CHECK(rank_environment(t, 0)["CUDA_VISIBLE_DEVICES"] == "GPU-c");
  CHECK(rank_environment(t, 1)["CUDA_VISIBLE_DEVICES"] == "GPU-d");
  CHECK(rank_environment(t, 0).count("OMP_NUM_THREADS") == 0);

  t.world_size = 1;
  CHECK(rank_environment(t, 0)["CUDA_VISIBLE_DEVICES"] == "GPU-c,GPU-d");
}

TEST_CASE("deterministic mode fills in the hash seed without overriding the user's") {
  TrialEnvironment t = two_rank_trial();
  t.deterministic = true;
  t.kernel_cache = "/store/kernels";
  auto env = rank_environment(t, 0);
  CHECK(env["CAIRN_DETERMINISTIC"] == "1");
  CHECK(env["PYTHONHASHSEED"] == "0");
  CHECK(env["CAIRN_KERNEL_CACHE"] == "/store/kernels");
  t.inherited["PYTHONHASHSEED"] = "123";
  CHECK(rank_environment(t, 0)["PYTHONHASHSEED"] == "123");
}

}  // namespace cairn

namespace cairn {

TEST_CASE("the trial's OpenBLAS kernels reach every rank, over the user's variable") {
  TrialEnvironment t = two_rank_trial();
  t.inherited["OPENBLAS_CORETYPE"] = "Prescott";
  t.inherited["CAIRN_BLAS_CORE"] = "from an outer trial";
  // Nothing decided (a trial that is not builtin:mlp): the user's variable stands, and the
  // advice of an outer trial is not passed on.
  for (int rank = 0; rank < 2; ++rank) {
    auto env = rank_environment(t, rank);
    CHECK(env["OPENBLAS_CORETYPE"] == "Prescott");
    CHECK(env.count("CAIRN_BLAS_CORE") == 0);
  }
  // Decided once for the trial (engine/coordinator/trial_blas_core.h, which has weighed the
  // user's variable): every rank gets the same.
  t.blas.coretype = "Haswell";
  t.blas.advice = "Cooperlake";
  t.blas.warning = "not for the environment";
  for (int rank = 0; rank < 2; ++rank) {
    auto env = rank_environment(t, rank);
    CHECK(env["OPENBLAS_CORETYPE"] == "Haswell");
    CHECK(env["CAIRN_BLAS_CORE"] == "Cooperlake");
    for (const auto& [name, value] : env) CHECK(value != "not for the environment");
  }
}

}  // namespace cairn

namespace cairn {

TEST_CASE("ranks on several machines: local ranks per machine, rank 0's address, their GPUs") {
  TrialEnvironment t = two_rank_trial();
  t.world_size = 4;
  t.slots = {0, 1, 0, 1};
  t.machines = {0, 0, 2, 1};  // two here, one on each of two agents
  t.gpu_slots = true;
  t.gpu_names = {"4", "5"};
  t.peer_gpu_names[2] = {"0", "1"};  // machine 1 has CPU slots
  t.master_addr = "10.0.0.1";
  auto rank0 = rank_environment(t, 0);
  auto rank1 = rank_environment(t, 1);
  auto rank2 = rank_environment(t, 2);
  auto rank3 = rank_environment(t, 3);
  CHECK(rank0["LOCAL_RANK"] == "0");
  CHECK(rank1["LOCAL_RANK"] == "1");
  CHECK(rank1["LOCAL_WORLD_SIZE"] == "2");
  CHECK(rank2["LOCAL_RANK"] == "0");
  CHECK(rank2["LOCAL_WORLD_SIZE"] == "1");
  CHECK(rank3["RANK"] == "3");
  CHECK(rank3["WORLD_SIZE"] == "4");
  // Machines as torchrun's nodes: numbered by their lowest rank (machine 2 before 1).
  CHECK(rank0["GROUP_RANK"] == "0");
  CHECK(rank1["GROUP_RANK"] == "0");
  CHECK(rank2["GROUP_RANK"] == "1");
  CHECK(rank3["GROUP_RANK"] == "2");
  for (auto* env : {&rank0, &rank1, &rank2, &rank3}) CHECK((*env)["GROUP_WORLD_SIZE"] == "3");
  for (auto* env : {&rank0, &rank1, &rank2, &rank3}) CHECK((*env)["MASTER_ADDR"] == "10.0.0.1");
  // Each machine's own names for its GPUs; a CPU machine gets threads instead.
  CHECK(rank1["CUDA_VISIBLE_DEVICES"] == "5");
  CHECK(rank2["CUDA_VISIBLE_DEVICES"] == "0");
  CHECK(rank3.count("CUDA_VISIBLE_DEVICES") == 0);
  CHECK(rank3["OMP_NUM_THREADS"] == "1");
  // All on one machine (an agent): loopback, whatever the machine's address.
  t.machines = {1, 1, 1, 1};
  CHECK(rank_environment(t, 0)["MASTER_ADDR"] == "127.0.0.1");
  CHECK(rank_environment(t, 3)["LOCAL_RANK"] == "3");
}

}  // namespace cairn
