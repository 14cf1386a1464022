// The built-in trainer's optimizers, updating one flat parameter buffer in place.
//   sgd:  g' = g + weight_decay·w;  v = momentum·v + g';  w -= lr·v   (PyTorch's SGD)
//   adam: AdamW (Loshchilov & Hutter): w -= lr·weight_decay·w, decoupled from the moments,
//         then the bias-corrected Adam step with β1 = 0.9, β2 = 0.999, ε = 1e-8.
// The update is element-wise with a fixed order, so it is bit-reproducible, and it can be
// applied to any sub-range (a gradient bucket) as long as every element is stepped once.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "trainer/mlp_cpu_kernels.h"

namespace cairn {

enum class MlpOptimizerKind : uint32_t { kSgd = 0, kAdam = 1 };

std::string_view optimizer_name(MlpOptimizerKind kind);

struct MlpOptimizerConfig {
  MlpOptimizerKind kind = MlpOptimizerKind::kSgd;
  double lr = 0.05;
  double momentum = 0.9;  // sgd only
  double weight_decay = 0.0;
  double beta1 = 0.9;  // adam only
  double beta2 = 0.999;
  double epsilon = 1e-8;
};

// AdamW's per-step constants for step `step` (1 for the first update): the bias corrections,
// computed in double as PyTorch does. Shared by the CPU and CUDA updates so both use the
// same floats.
mlp_kernels::AdamConstants adam_constants(const MlpOptimizerConfig& config, int64_t step);

class MlpOptimizer {
 public:
  MlpOptimizer(const MlpOptimizerConfig& config, size_t parameter_count);

  // One update of every parameter. REQUIRES: both spans have parameter_count elements.
  void step(std::span<float> weights, std::span<const float> gradients);

  const MlpOptimizerConfig& config() const { return config_; }
  int64_t steps() const { return steps_; }

  // The whole state for checkpoints: sgd keeps a velocity per parameter, adam two moments
  // (all first moments, then all second moments).
  std::span<const float> state() const { return state_; }
  // REQUIRES: state.size() == state().size().
  void restore(std::span<const float> state, int64_t steps);

 private:
  void sgd_step(std::span<float> weights, std::span<const float> gradients);
  void adam_step(std::span<float> weights, std::span<const float> gradients);

  MlpOptimizerConfig config_;
  size_t parameter_count_;
  std::vector<float> state_;
  int64_t steps_ = 0;
};

}  // namespace cairn
