// builtin:mlp's training loop, free of the SDK: owns the model, optimizer and data, trains
// one epoch per call and saves/restores everything a resumed run needs. trainer/mlp_main.cc
// wires it to the trial contract.
//
// Determinism: every random draw is a function of (seed, epoch) (trainer/mlp_random.h), the
// loops have a fixed order, and with `deterministic` BLAS runs on one thread. So training
// N epochs straight and training K, saving, loading into a fresh trainer and training N−K
// more give bit-identical weights on the same machine and build.
//
// Data parallel: with a Collective of N ranks, every rank holds the whole model (the same
// initial weights, from the same seed) and walks the same epoch order; each global batch
// of `batch_size` rows is split into N contiguous shards, rank r computing the gradient of
// its shard (divided by the global batch's rows), and the gradients are summed over the
// ranks in buckets (trainer/gradient_buckets.h) before every rank applies the same update. The
// result is the single-rank gradient up to float rounding (the sum is split differently),
// and bit-identical from run to run for a given N, since the reduction order is fixed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "collective/collective.h"
#include "common/status.h"
#include "trainer/gradient_buckets.h"
#include "trainer/mlp_cuda_model.h"
#include "trainer/mlp_dataset.h"
#include "trainer/mlp_hparams.h"
#include "trainer/mlp_model.h"
#include "trainer/mlp_optimizer.h"

namespace cairn {

// Where a trial trains, decided once before the ranks connect (the collective depends on
// it: Gloo for the CPU, NCCL for CUDA).
struct MlpDeviceChoice {
  bool cuda = false;
  std::string note;  // for the trial's log: "cuda (auto)", "cpu (auto: no CUDA device)"
};
// Whether builtin:mlp can train on a GPU here, with `world_size` ranks: Ok, or kNotFound
// with one line naming what is missing (the driver, a device, cuBLAS, NVRTC; NCCL with
// several ranks), or kFailed when the driver failed in a way a later process may not
// (cuda::init_error_kind). The one check behind every device decision: choose_mlp_device's and a
// rank's that follows rank 0 (trainer/mlp_device_agreement.h).
Status mlp_gpu_usable(int world_size);
// The rule, given mlp_gpu_usable's answer `usable`: kCuda without a usable GPU is an
// error with a one-line reason, kBadInput (exit 2) when `usable` would repeat (its exit
// code is 2), else kFailed (exit 1, retried); kAuto falls back to the CPU and says why in
// `note`, as it does when setting the GPU up fails.
Result<MlpDeviceChoice> choose_mlp_device(MlpDevice wanted, const Status& usable);

class MlpTrainer {
 public:
  // Builds the dataset (CSV paths are relative to `workdir`) and an initialised model.
  // Sets the process's BLAS thread count: 1 when `deterministic`, else hparams.threads.
  // Errors in the hyperparameters or the data are kBadInput.
  // Trains on `device`, decided by the caller once for the trial (with several ranks,
  // agreed: trainer/mlp_device_agreement.h); its note starts the log's device line. Where
  // device.cuda and the GPU then fails (the model or data too large, a module the driver
  // refuses), kAuto with one rank falls back to the CPU; otherwise that is an error,
  // kBadInput when a restart would fail the same way.
  // `collective` (optional; must outlive the trainer) makes this one rank of a
  // data-parallel trainer; its backend must suit the device (gloo: cpu, nccl: cuda), or
  // create() fails with kBadInput.
  static Result<std::unique_ptr<MlpTrainer>> create(const MlpHparams& hparams, uint64_t seed,
                                                    bool deterministic,
                                                    const std::filesystem::path& workdir,
                                                    const MlpDeviceChoice& device,
                                                    Collective* collective = nullptr);

  // One pass over the training split in the order derived from (seed, epoch); returns the
  // mean training loss over the epoch's rows (over all ranks). Advances epochs_completed().
  // Fails only when the collective does (a rank died or timed out); the trainer's state is
  // then undefined and the trial must restart from its checkpoint.
  Result<double> train_epoch();

  struct Eval {
    double loss = 0;      // mean cross-entropy over the validation rows
    double accuracy = 0;  // fraction classified correctly
  };
  // Fails only on a GPU error.
  Result<Eval> evaluate() const;

  int64_t epochs_completed() const { return epochs_completed_; }

  // Writes dir/mlp.ckpt. REQUIRES: dir exists.
  Status save(const std::filesystem::path& dir) const;
  // Restores weights, optimizer state and epoch from dir/mlp.ckpt. Refuses (and leaves this
  // trainer untouched) a corrupt file, another architecture or optimizer, or a checkpoint
  // trained on different data (another seed).
  Status load(const std::filesystem::path& dir);

  // The weights (copied from the GPU when training there; empty if that copy fails).
  std::vector<float> flat_weights() const;
  bool on_gpu() const { return cuda_ != nullptr; }
  const MlpShape& shape() const { return model_.shape(); }
  const MlpDataset& dataset() const { return data_; }
  // One line for logs: data, architecture, optimizer.
  std::string describe() const;

 private:
  struct Passkey {  // lets only create() construct a trainer, through make_unique
    explicit Passkey() = default;
  };

 public:
  MlpTrainer(Passkey, const MlpHparams& hparams, uint64_t seed, uint64_t data_seed, MlpDataset data,
             Collective* collective);

 private:
  Status attach_cuda();
  Result<double> train_epoch_cuda();
  void shuffle_for_epoch(int64_t epoch);
  void gather_batch(const int64_t* rows, int count);

  MlpHparams hparams_;
  uint64_t seed_;
  uint64_t data_seed_;
  MlpDataset data_;
  MlpModel model_;
  MlpOptimizer optimizer_;
  MlpWorkspace workspace_;
  std::vector<int64_t> order_;  // training rows in this epoch's order
  int64_t epochs_completed_ = 0;
  Collective* collective_;  // null: one rank
  // Training on a GPU: the model, optimizer state and data live there, and model_ and
  // optimizer_ hold the initial weights and what a checkpoint load brings. Declared before
  // buckets_, so that reductions still in flight end before its memory goes.
  std::unique_ptr<CudaMlpModel> cuda_;
  std::unique_ptr<GradientBuckets> buckets_;  // with more than one rank
  std::string device_note_ = "cpu";
};

}  // namespace cairn
