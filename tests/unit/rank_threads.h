// builtin:mlp's ranks as threads of the test process, each with its own Gloo collective
// (TCP on loopback), meeting through a directory-backed key/value store: how the unit
// tests train data parallel without cairn. Shared by the CPU and the GPU trainer's tests.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "collective/file_kv_store.h"
#include "collective/gloo_collective.h"
#include "test_dir.h"
#include "trainer/mlp_hparams.h"
#include "trainer/mlp_trainer.h"

namespace cairn::testing {

struct RankRun {
  Status status;
  std::vector<double> losses;  // per epoch
  std::vector<float> weights;  // at the end
};

// Wraps a rank's Gloo collective before the trainer gets it (e.g. to stand in for NCCL).
using WrapCollective = std::function<std::unique_ptr<Collective>(std::unique_ptr<Collective>)>;
// Checked once the rank's trainer exists; a failure ends that rank's run.
using CheckTrainer = std::function<Status(const MlpTrainer&, int rank)>;

// Trains `epochs` epochs of builtin:mlp with `hparams` (seed 7, deterministic) on `world`
// ranks, each on `device` (as agreed, not chosen again: the test says which); world 1 has no
// collective.
inline std::vector<RankRun> train_ranks(int world, const MlpHparams& hparams,
                                        const MlpDeviceChoice& device, int epochs,
                                        const WrapCollective& wrap = {},
                                        const CheckTrainer& check = {}) {
  TestDir dir;
  FileKeyValueStore kv(dir.path());
  std::vector<RankRun> runs(static_cast<size_t>(world));
  auto rank_main = [&](int rank) {
    RankRun& run = runs[static_cast<size_t>(rank)];
    std::unique_ptr<Collective> collective;
    if (world > 1) {
      auto made = make_gloo_collective(kv, rank, world, "127.0.0.1", std::chrono::seconds(30));
      if (!made.ok()) {
        run.status = made.status();
        return;
      }
      collective = std::move(made).value();
      if (wrap) collective = wrap(std::move(collective));
    }
    auto trainer = MlpTrainer::create(hparams, 7, /*deterministic=*/true, dir.path(), device,
                                      collective.get());
    if (!trainer.ok()) {
      run.status = trainer.status();
      return;
    }
    if (check) {
      run.status = check(**trainer, rank);
      if (!run.status.ok()) return;
    }
    for (int e = 0; e < epochs; ++e) {
      auto loss = (*trainer)->train_epoch();
      if (!loss.ok()) {
        run.status = loss.status();
        return;
      }
      run.losses.push_back(*loss);
    }
    run.weights = (*trainer)->flat_weights();
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back(rank_main, r);
  for (auto& t : threads) t.join();
  for (const RankRun& run : runs) REQUIRE_MESSAGE(run.status.ok(), run.status.message());
  return runs;
}

inline bool bit_equal(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

}  // namespace cairn::testing
