// builtin:mlp's optimizers against PyTorch's: the same weights and gradients through
// MlpOptimizer and through torch.optim.SGD (momentum, weight decay) and torch.optim.AdamW,
// whose weights after each step tests/unit/fixtures/torch_optimizer_steps.h holds (made by
// tests/unit/fixtures/make_torch_optimizer_steps.py; its docstring says how). A reference
// that is not cairn's own code: the CPU and GPU updates are checked against each other
// elsewhere, which cannot catch a formula both share.
//
// Within some float ulps of the weight, not bit for bit: PyTorch divides by √v̂ where cairn
// multiplies by its inverse, and its kernels may fuse multiply-adds (SGD: within 8 ulps).
// AdamW differs more, up to 40 ulps after 5 steps, for a reason that is cairn's: it forms
// 1 − β2 in float from β2 rounded to float (1.0f − 0.999f = 0.0010000467, 4.7e-5 above
// 0.001), where PyTorch rounds 1 − β2 computed in double; with PyTorch's 1 − β2 the
// updates agree within 3 ulps (checked with numpy on this fixture). Left as it is: fixing
// it changes every adam trial's numbers (tests/e2e/test_builtin_mlp_golden.py). A formula
// error, such as a missing bias correction or weight decay coupled to the moments, moves
// weights by thousands of ulps.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "tests/unit/fixtures/torch_optimizer_steps.h"
#include "tests/unit/optimizer_cases.h"
#include "trainer/mlp_optimizer.h"

namespace cairn {
namespace {

namespace ts = testing::torch_steps;

MlpOptimizerConfig config_named(const char* name) {
  for (const auto& c : testing::kOptimizerCases)
    if (std::string_view(c.name) == name) return c.config;
  FAIL("no optimizer case " << name);
  return {};
}

// Steps MlpOptimizer through the fixture's gradients, comparing with `expected` after each.
void check_against_torch(const char* name, const float (&expected)[ts::kSteps][ts::kParameters],
                         int ulps) {
  MlpOptimizer optimizer(config_named(name), ts::kParameters);
  std::vector<float> w(std::begin(ts::kWeights), std::end(ts::kWeights));
  for (int step = 0; step < ts::kSteps; ++step) {
    optimizer.step(w, ts::kGradients[step]);
    for (int i = 0; i < ts::kParameters; ++i) {
      CAPTURE(step);
      CAPTURE(i);
      const float want = expected[step][i];
      CHECK(std::abs(w[i] - want) <= ulps * std::ldexp(1.0f, std::ilogb(want) - 23));
    }
  }
}

}  // namespace

TEST_CASE("sgd with momentum and weight decay steps as torch.optim.SGD does") {
  check_against_torch("sgd momentum", ts::kSgdMomentum, 8);
}

TEST_CASE("adamw steps as torch.optim.AdamW does") {
  check_against_torch("adamw", ts::kAdamw, 48);
}

}  // namespace cairn
