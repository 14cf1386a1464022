// builtin:mlp on one CUDA GPU: the same model, memory layout and math as MlpModel +
// MlpOptimizer (trainer/mlp_model.h, trainer/mlp_optimizer.h), with matrix products in cuBLAS and
// everything else in the kernels of trainer/mlp_cuda_kernels.cu, compiled at run time by NVRTC.
//
// Everything lives on the device for the whole trial: parameters, gradients, optimizer
// state, and the training and validation splits (a batch is gathered on the device from
// the epoch's order), so an epoch enqueues work without waiting for the GPU; the host
// waits once per epoch, for the loss totals (and, with several ranks, for each gradient
// bucket before it goes to NCCL). Weights and optimizer state are copied to and from the
// host in MlpModel's flat layout, so checkpoints keep the CPU format: a checkpoint written
// on a GPU resumes on the CPU and the other way round.
//
// Results match the CPU path to float rounding, not bit for bit (cuBLAS sums in another
// order, CUDA's expf differs from glibc's); run to run on the same GPU they repeat (see
// gpu/cublas.h and trainer/mlp_cuda_kernels.cu).
//
// NOTE: written on a machine without a GPU and never run on a real one. Tested there: the
// kernels compile with NVRTC, and the whole path runs on tests/fake_cuda (the driver and
// cuBLAS emulated on the host), where tests/unit/mlp_cuda_test.cc compares it with the
// CPU path; the same tests run on the real libraries where there is a GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "collective/collective.h"
#include "common/status.h"
#include "trainer/mlp_dataset.h"
#include "trainer/mlp_model.h"
#include "trainer/mlp_optimizer.h"

namespace cairn {

// Ok when builtin:mlp can run on a GPU here: the CUDA driver sees a device and NVRTC and
// cuBLAS load. Otherwise why not, in one line.
Status cuda_mlp_available();

// The kernels trainer/mlp_cuda_kernels.cu must define (extern "C"), for tests.
std::vector<std::string> mlp_cuda_kernel_names();

class CudaMlpModel {
 public:
  // Gradients handed over during backward are device memory.
  using LayerGradientsReady = MlpModel::LayerGradientsReady;

  // Compiles the kernels for `device` (an ordinal as this process sees it) and allocates
  // the model, optimizer state and a workspace for batches of up to `max_rows` rows. The
  // parameters start at zero: upload them with set_weights.
  static Result<std::unique_ptr<CudaMlpModel>> create(const MlpShape& shape,
                                                      const MlpOptimizerConfig& optimizer,
                                                      int max_rows, int device = 0);
  ~CudaMlpModel();
  CudaMlpModel(const CudaMlpModel&) = delete;
  CudaMlpModel& operator=(const CudaMlpModel&) = delete;

  const MlpShape& shape() const { return shape_; }
  // "cuda:0 NVIDIA H100 (sm_90)".
  std::string describe() const;

  // Parameters, in MlpModel::weights()'s layout.
  Status set_weights(std::span<const float> weights);
  Status get_weights(std::span<float> weights) const;
  // The last forward_backward's gradients, in MlpModel::gradients()'s layout.
  Status get_gradients(std::span<float> gradients) const;
  // Optimizer state in MlpOptimizer::state()'s layout, and its step count.
  Status set_optimizer_state(std::span<const float> state, int64_t steps);
  Status get_optimizer_state(std::span<float> state) const;
  int64_t optimizer_steps() const { return steps_; }
  size_t optimizer_state_size() const;

  // Copies the data to the device, where it stays. kFailed (naming the size) when it does
  // not fit.
  Status set_data(const MlpSplit& train, const MlpSplit& validation);
  // This epoch's order of the training rows (MlpTrainer::shuffle_for_epoch).
  Status set_order(std::span<const int64_t> order);

  // Forward, loss and backward on the training rows order[offset .. offset + rows), with
  // the gradient divided by `mean_over` (see MlpModel::forward_backward; rows 0 gives
  // zero gradients). With `on_ready`, waits for each layer's gradients before handing them
  // over, last layer first. The loss and accuracy totals accumulate on the device until
  // take_stats().
  Status train_batch(int64_t offset, int rows, int mean_over,
                     const LayerGradientsReady& on_ready = {});
  // One optimizer update with the current gradients (MlpOptimizer::step).
  Status optimizer_step();
  // Forward and loss on validation rows [start, start + rows); rows <= max_rows.
  Status evaluate_batch(int64_t start, int rows);
  // Waits for the GPU, returns the totals since the last call and resets them.
  Result<MlpBatchStats> take_stats();

  // All-reduces host floats through a device buffer, for collectives whose buffers live on
  // the device (NCCL). REQUIRES: n <= 2.
  Status allreduce_host(Collective& collective, float* data, size_t n);

  int max_rows() const { return max_rows_; }

 private:
  struct Impl;
  explicit CudaMlpModel(const MlpShape& shape, std::unique_ptr<Impl> impl, int max_rows);
  Status forward(const float* input, int rows);
  Status loss(const int32_t* labels, int rows, float delta_scale, bool with_delta);
  Status backward(int rows, const LayerGradientsReady& on_ready);

  MlpShape shape_;
  std::unique_ptr<Impl> impl_;
  int max_rows_;
  int64_t steps_ = 0;
  MlpOptimizerConfig optimizer_;
};

}  // namespace cairn
