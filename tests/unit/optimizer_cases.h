// The optimizer settings the GPU tests compare with MlpOptimizer (the CPU's): plain SGD with
// L2, SGD with momentum, and AdamW, so every update kernel runs with weight decay.
#pragma once

#include "trainer/mlp_optimizer.h"

namespace cairn::testing {

struct OptimizerCase {
  const char* name;
  MlpOptimizerConfig config;
};

inline constexpr OptimizerCase kOptimizerCases[] = {
    {"sgd", {.kind = MlpOptimizerKind::kSgd, .lr = 0.1, .momentum = 0.0, .weight_decay = 1e-3}},
    {"sgd momentum",
     {.kind = MlpOptimizerKind::kSgd, .lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4}},
    {"adamw", {.kind = MlpOptimizerKind::kAdam, .lr = 0.01, .weight_decay = 0.01}}};

}  // namespace cairn::testing
