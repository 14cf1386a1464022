// The ceilings builtin:mlp's CPU throughput is measured against (issue 22), printed as one
// JSON object for bench/mlp_bench.py --roofline:
//
// - sgemm: OpenBLAS's own speed on exactly the matrix products builtin:mlp makes for one
//   batch (trainer/mlp_model.cc: per layer, forward y += x·W; backward ∂W = xᵀ·δ and, but
//   for the first layer, δ·Wᵀ), same shapes, transposes and strides, through the same
//   wrapper (trainer/blas.h). Their time per batch bounds the samples/s a trainer that did
//   nothing but these products could reach: the "sgemm-bound rate".
// - peak: the core's FMA throughput, measured: independent fused multiply-adds on 512-bit
//   (where the CPU and OS support AVX-512) and 256-bit vectors, in registers, one thread;
//   FLOPs = 2 × lanes × FMAs. This is FMA units × vector width × clock without reading
//   the clock (which a VM does not report faithfully).
//
// OPENBLAS_CORETYPE picks the kernels, as for a trial. Build: cmake --build build --target
// bench_blas_roofline. Usage: bench_blas_roofline [--features 32] [--hidden 256]
// [--layers 2] [--classes 10] [--batch 128] [--eval-batch 1024] [--threads 1] [--seconds 0.5]
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/cpu_features.h"
#include "common/json.h"
#include "trainer/blas.h"

namespace {

using cairn::Json;
using cairn::blas::Op;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Lanes × 2 FLOPs per FMA; 12 independent chains, named so they stay in registers, cover
// the FMA latency (4–5 cycles) on two ports. Returns GFLOP/s.
#define CAIRN_FMA12(fma, a, b)                                                    \
  x0 = fma(x0, a, b), x1 = fma(x1, a, b), x2 = fma(x2, a, b), x3 = fma(x3, a, b), \
  x4 = fma(x4, a, b), x5 = fma(x5, a, b), x6 = fma(x6, a, b), x7 = fma(x7, a, b), \
  x8 = fma(x8, a, b), x9 = fma(x9, a, b), x10 = fma(x10, a, b), x11 = fma(x11, a, b)
constexpr long kInner = 1 << 16;

__attribute__((target("avx512f"))) double peak_avx512(double seconds) {
  __m512 x0 = _mm512_set1_ps(0), x1 = x0, x2 = x0, x3 = x0, x4 = x0, x5 = x0, x6 = x0, x7 = x0,
         x8 = x0, x9 = x0, x10 = x0, x11 = x0;
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  long rounds = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    for (long n = 0; n < kInner; ++n) CAIRN_FMA12(_mm512_fmadd_ps, a, b);
    ++rounds;
    elapsed = seconds_since(start);
  } while (elapsed < seconds);
  const __m512 sum =
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(x0, x1), _mm512_add_ps(x2, x3)),
                                  _mm512_add_ps(_mm512_add_ps(x4, x5), _mm512_add_ps(x6, x7))),
                    _mm512_add_ps(_mm512_add_ps(x8, x9), _mm512_add_ps(x10, x11)));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  volatile float sink = lanes[0] + lanes[15];
  (void)sink;
  return 2.0 * 16 * 12 * kInner * rounds / elapsed / 1e9;
}

__attribute__((target("avx2,fma"))) double peak_avx2(double seconds) {
  __m256 x0 = _mm256_set1_ps(0), x1 = x0, x2 = x0, x3 = x0, x4 = x0, x5 = x0, x6 = x0, x7 = x0,
         x8 = x0, x9 = x0, x10 = x0, x11 = x0;
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  long rounds = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    for (long n = 0; n < kInner; ++n) CAIRN_FMA12(_mm256_fmadd_ps, a, b);
    ++rounds;
    elapsed = seconds_since(start);
  } while (elapsed < seconds);
  const __m256 sum =
      _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(x0, x1), _mm256_add_ps(x2, x3)),
                                  _mm256_add_ps(_mm256_add_ps(x4, x5), _mm256_add_ps(x6, x7))),
                    _mm256_add_ps(_mm256_add_ps(x8, x9), _mm256_add_ps(x10, x11)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  volatile float sink = lanes[0] + lanes[7];
  (void)sink;
  return 2.0 * 8 * 12 * kInner * rounds / elapsed / 1e9;
}
#undef CAIRN_FMA12

struct Gemm {
  const char* what;
  int layer;
  Op op_a, op_b;
  int m, n, k;
  const float* a;
  int lda;
  const float* b;
  int ldb;
  float beta;
  float* c;
  int ldc;
  double flops() const { return 2.0 * m * n * k; }
  void run() const { cairn::blas::sgemm(op_a, op_b, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc); }
};

// Median seconds of one pass over `calls`, from repetitions of about `seconds` in all.
double time_pass(const std::vector<Gemm>& calls, double seconds) {
  for (int i = 0; i < 20; ++i)
    for (const Gemm& g : calls) g.run();
  std::vector<double> samples;
  const auto start = Clock::now();
  while (seconds_since(start) < seconds || samples.size() < 15) {
    const auto t = Clock::now();
    for (int i = 0; i < 10; ++i)
      for (const Gemm& g : calls) g.run();
    samples.push_back(seconds_since(t) / 10);
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

int arg(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int features = arg(argc, argv, "--features", 32);
  const int hidden = arg(argc, argv, "--hidden", 256);
  const int layers = arg(argc, argv, "--layers", 2);
  const int classes = arg(argc, argv, "--classes", 10);
  const int batch = arg(argc, argv, "--batch", 128);
  const int threads = arg(argc, argv, "--threads", 1);
  // builtin:mlp validates in batches of up to 1,024 rows (trainer/mlp_trainer.cc, kEvalRows).
  const int eval_batch = arg(argc, argv, "--eval-batch", 1024);
  double seconds = 0.5;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::atof(argv[i + 1]);
  cairn::blas::set_threads(threads);

  std::vector<int> widths = {features};
  for (int l = 0; l < layers; ++l) widths.push_back(hidden);
  widths.push_back(classes);
  const int linear = static_cast<int>(widths.size()) - 1;
  const int max_width = *std::max_element(widths.begin(), widths.end());
  const int rows_max = std::max(batch, eval_batch);
  // Buffers as the model has them: activations per layer, weights, gradients, two deltas.
  std::vector<std::vector<float>> act(widths.size()), w(linear), gw(linear);
  for (size_t l = 0; l < widths.size(); ++l) act[l].assign(size_t(rows_max) * widths[l], 0.5f);
  for (int l = 0; l < linear; ++l) {
    w[l].assign(size_t(widths[l]) * widths[l + 1], 0.01f);
    gw[l].assign(w[l].size(), 0.0f);
  }
  std::vector<float> delta_a(size_t(rows_max) * max_width, 0.1f);
  std::vector<float> delta_b(delta_a.size(), 0.1f);

  auto forward_calls = [&](int rows) {
    std::vector<Gemm> calls;
    for (int l = 0; l < linear; ++l) {
      const int in = widths[l], out = widths[l + 1];
      calls.push_back({"forward x·W", l, Op::kNone, Op::kNone, rows, out, in, act[l].data(), in,
                       w[l].data(), out, 1.0f, act[l + 1].data(), out});
    }
    return calls;
  };
  std::vector<Gemm> forward = forward_calls(batch), backward;
  float* delta = delta_a.data();
  float* next = delta_b.data();
  for (int l = linear - 1; l >= 0; --l) {
    const int in = widths[l], out = widths[l + 1];
    backward.push_back({"backward xᵀ·δ", l, Op::kTranspose, Op::kNone, in, out, batch,
                        act[l].data(), in, delta, out, 0.0f, gw[l].data(), out});
    if (l == 0) break;
    backward.push_back({"backward δ·Wᵀ", l, Op::kNone, Op::kTranspose, batch, in, out, delta, out,
                        w[l].data(), out, 0.0f, next, in});
    std::swap(delta, next);
  }

  Json calls = Json::array();
  auto each = [&](const std::vector<Gemm>& list) {
    for (const Gemm& g : list) {
      const double s = time_pass({g}, seconds / 4);
      calls.push_back({{"call", g.what},
                       {"layer", g.layer},
                       {"m", g.m},
                       {"n", g.n},
                       {"k", g.k},
                       {"gflops", g.flops() / s / 1e9}});
    }
  };
  each(forward);
  each(backward);
  std::vector<Gemm> train = forward;
  train.insert(train.end(), backward.begin(), backward.end());
  const std::vector<Gemm> eval = forward_calls(eval_batch);
  auto flops = [](const std::vector<Gemm>& list) {
    double sum = 0;
    for (const Gemm& g : list) sum += g.flops();
    return sum;
  };
  const double train_s = time_pass(train, seconds);
  const double eval_s = time_pass(eval, seconds);

  const cairn::CpuFeatures& cpu = cairn::this_cpu_features();
  Json peak = Json::object();
  if (cpu.avx512f) peak["avx512_gflops"] = peak_avx512(seconds);
  if (cpu.avx2_fma()) peak["avx2_gflops"] = peak_avx2(seconds);

  const Json out{{"core", cairn::blas::core_in_use()},
                 {"cpu", cpu.summary()},
                 {"threads", cairn::blas::threads()},
                 {"batch", batch},
                 {"widths", widths},
                 {"eval_batch", eval_batch},
                 {"train_flops_per_sample", flops(train) / batch},
                 {"forward_flops_per_sample", flops(eval) / eval_batch},
                 {"train_batch_s", train_s},
                 {"train_gflops", flops(train) / train_s / 1e9},
                 {"eval_batch_s", eval_s},
                 {"eval_gflops", flops(eval) / eval_s / 1e9},
                 {"calls", calls},
                 {"peak", peak}};
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
