// Benchmark trial for bench/runner_bench.py --trial cpp: bench/trivial_trial.py in C++.
// It does no work, reports one validation (a fixed function of its hyperparameter `x`)
// and exits; its process costs about a millisecond where Python's costs ~100 ms, so the
// drivers' own overhead is not buried in the trials' start-up time. Standalone (no
// CAIRN_CONTROL) the SDK prints "cairn: step 1 validation: val_loss=..." on stderr, which
// the Python drivers parse.
#include <cairn/trial.hpp>

#include <cstdio>

int main() {
  std::string error;
  auto ctx = cairn::Context::init(&error);
  if (!ctx) {
    std::fprintf(stderr, "trivial_trial: %s\n", error.c_str());
    return 1;
  }
  const double x = ctx->hparams().value("x", 0.5);
  while (auto op = ctx->next_operation())
    if (!ctx->report_validation(op->length, {{"val_loss", (x - 0.3) * (x - 0.3)}})) return 1;
  return 0;
}
