#include "gpu/mlp_optimizer.h"

#include <algorithm>
#include <cmath>

namespace cairn {

std::string_view optimizer_name(MlpOptimizerKind kind) {
  return kind == MlpOptimizerKind::kAdam ? "adam" : "sgd";
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
  const size_t n = parameter_count_;
  float* __restrict w = weights.data();
  const float* __restrict g = gradients.data();
  float* __restrict v = state_.data();
  const float lr = static_cast<float>(config_.lr);
  const float mu = static_cast<float>(config_.momentum);
  const float decay = static_cast<float>(config_.weight_decay);
  if (mu == 0.0f) {
    for (size_t i = 0; i < n; ++i) w[i] -= lr * (g[i] + decay * w[i]);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    v[i] = mu * v[i] + (g[i] + decay * w[i]);
    w[i] -= lr * v[i];
  }
}

void MlpOptimizer::adam_step(std::span<float> weights, std::span<const float> gradients) {
  const size_t n = parameter_count_;
  float* __restrict w = weights.data();
  const float* __restrict g = gradients.data();
  float* __restrict m = state_.data();
  float* __restrict v = state_.data() + n;
  const double t = static_cast<double>(steps_);
  // Bias corrections in double, once per step, as PyTorch does.
  const float step_size = static_cast<float>(config_.lr / (1.0 - std::pow(config_.beta1, t)));
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(config_.beta2, t)));
  const float b1 = static_cast<float>(config_.beta1);
  const float b2 = static_cast<float>(config_.beta2);
  const float eps = static_cast<float>(config_.epsilon);
  const float shrink = static_cast<float>(1.0 - config_.lr * config_.weight_decay);
  for (size_t i = 0; i < n; ++i) {
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    const float denom = std::sqrt(v[i]) * inv_sqrt_bc2 + eps;
    w[i] = w[i] * shrink - step_size * m[i] / denom;
  }
}

void MlpOptimizer::restore(std::span<const float> state, int64_t steps) {
  std::copy(state.begin(), state.end(), state_.begin());
  steps_ = steps;
}

}  // namespace cairn
