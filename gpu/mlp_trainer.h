// builtin:mlp's training loop, free of the SDK: owns the model, optimizer and data, trains
// one epoch per call and saves/restores everything a resumed run needs. gpu/mlp_main.cc
// wires it to the trial contract.
//
// Determinism: every random draw is a function of (seed, epoch) (gpu/mlp_random.h), the
// loops have a fixed order, and with `deterministic` BLAS runs on one thread. So training
// N epochs straight and training K, saving, loading into a fresh trainer and training N−K
// more give bit-identical weights on the same machine and build.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "gpu/mlp_dataset.h"
#include "gpu/mlp_hparams.h"
#include "gpu/mlp_model.h"
#include "gpu/mlp_optimizer.h"

namespace cairn {

class MlpTrainer {
 public:
  // Builds the dataset (CSV paths are relative to `workdir`) and an initialised model.
  // Sets the process's BLAS thread count: 1 when `deterministic`, else hparams.threads.
  // Errors in the hyperparameters or the data are kBadInput.
  static Result<std::unique_ptr<MlpTrainer>> create(const MlpHparams& hparams, uint64_t seed,
                                                    bool deterministic,
                                                    const std::filesystem::path& workdir);

  // One pass over the training split in the order derived from (seed, epoch); returns the
  // mean training loss over the epoch's rows. Advances epochs_completed().
  double train_epoch();

  struct Eval {
    double loss = 0;      // mean cross-entropy over the validation rows
    double accuracy = 0;  // fraction classified correctly
  };
  Eval evaluate() const;

  int64_t epochs_completed() const { return epochs_completed_; }

  // Writes dir/mlp.ckpt. REQUIRES: dir exists.
  Status save(const std::filesystem::path& dir) const;
  // Restores weights, optimizer state and epoch from dir/mlp.ckpt. Refuses (and leaves this
  // trainer untouched) a corrupt file, another architecture or optimizer, or a checkpoint
  // trained on different data (another seed).
  Status load(const std::filesystem::path& dir);

  std::vector<float> flat_weights() const;
  const MlpShape& shape() const { return model_.shape(); }
  const MlpDataset& dataset() const { return data_; }
  // One line for logs: data, architecture, optimizer.
  std::string describe() const;

 private:
  struct Passkey {  // lets only create() construct a trainer, through make_unique
    explicit Passkey() = default;
  };

 public:
  MlpTrainer(Passkey, const MlpHparams& hparams, uint64_t seed, uint64_t data_seed,
             MlpDataset data);

 private:
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
};

}  // namespace cairn
