#include "trainer/mlp_optimizer.h"

#include <algorithm>
#include <cmath>

#include "trainer/mlp_cpu_kernels.h"

namespace cairn {

std::string_view optimizer_name(MlpOptimizerKind kind) {
  return kind == MlpOptimizerKind::kAdam ? "adam" : "sgd";
}

mlp_kernels::AdamConstants adam_constants(const MlpOptimizerConfig& config, int64_t step) {
  const double t = static_cast<double>(step);
  // Bias corrections in double, once per step, as PyTorch does.
  return mlp_kernels::AdamConstants{
      .beta1 = static_cast<float>(config.beta1),
      .beta2 = static_cast<float>(config.beta2),
      .epsilon = static_cast<float>(config.epsilon),
      .step_size = static_cast<float>(config.lr / (1.0 - std::pow(config.beta1, t))),
      .inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(config.beta2, t))),
      .shrink = static_cast<float>(1.0 - config.lr * config.weight_decay)};
}

MlpOptimizer::MlpOptimizer(const MlpOptimizerConfig& config, size_t parameter_count)
    : config_(config),
      parameter_count_(parameter_count),
      state_(parameter_count * (config.kind == MlpOptimizerKind::kAdam ? 2 : 1), 0.0f) {}

void MlpOptimizer::step(std::span<float> weights, std::span<const float> gradients) {
  ++steps_;
  if (config_.kind == MlpOptimizerKind::kAdam) {
    adam_step(weights, gradients);
  } else {
    sgd_step(weights, gradients);
  }
}

void MlpOptimizer::sgd_step(std::span<float> weights, std::span<const float> gradients) {
  const float lr = static_cast<float>(config_.lr);
  const float momentum = static_cast<float>(config_.momentum);
  const float decay = static_cast<float>(config_.weight_decay);
  if (momentum == 0.0f) {
    mlp_kernels::sgd_update(weights.data(), gradients.data(), parameter_count_, lr, decay);
  } else {
    mlp_kernels::sgd_momentum_update(weights.data(), state_.data(), gradients.data(),
                                     parameter_count_, lr, momentum, decay);
  }
}

void MlpOptimizer::adam_step(std::span<float> weights, std::span<const float> gradients) {
  const mlp_kernels::AdamConstants constants = adam_constants(config_, steps_);
  float* first_moment = state_.data();
  float* second_moment = state_.data() + parameter_count_;
  mlp_kernels::adam_update(weights.data(), first_moment, second_moment, gradients.data(),
                           parameter_count_, constants);
}

void MlpOptimizer::restore(std::span<const float> state, int64_t steps) {
  std::copy(state.begin(), state.end(), state_.begin());
  steps_ = steps;
}

}  // namespace cairn
