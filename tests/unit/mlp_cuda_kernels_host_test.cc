// builtin:mlp's CUDA kernels (trainer/mlp_cuda_kernels.cu) compiled as host C++ and run on the
// CPU, against the CPU kernels they mirror (trainer/mlp_cpu_kernels.h). This checks the
// kernels' logic — indexing, formulas, the order of operations — on any machine, GPU or
// not; what it cannot check is the GPU itself (CUDA's expf/logf, the launch
// configuration), which tests/unit/mlp_cuda_test.cc does where there is a GPU.
//
// The emulation: the grid-stride kernels run as one block of one thread, which then walks
// every element; mlp_accumulate_stats, the one kernel that uses a block's shared memory,
// runs as kStatsThreads std::threads meeting at a std::barrier for __syncthreads.
#include <doctest/doctest.h>

#include <barrier>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "optimizer_cases.h"
#include "trainer/mlp_cpu_kernels.h"
#include "trainer/mlp_optimizer.h"

namespace cairn::cuda_host {

struct Dim3 {
  unsigned x = 0;
};
thread_local Dim3 threadIdx;
Dim3 blockIdx{0}, blockDim{1}, gridDim{1};
std::barrier<>* block_barrier = nullptr;
inline void __syncthreads() {
  block_barrier->arrive_and_wait();
}

#define __global__
#define __shared__ static  // one block at a time: static is exactly "shared by the block"
#include "trainer/mlp_cuda_kernels.cu"
#undef __shared__
#undef __global__

}  // namespace cairn::cuda_host

namespace cairn {
namespace {

namespace k = cuda_host;

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_CASE("cuda kernels on the host: gather, bias + ReLU, ReLU mask and bias gradient") {
  const int rows = 9, cols = 7, features = 5;
  // Gather: rows picked by an order, as the trainer's epoch shuffle does.
  const std::vector<float> x = random_floats(20 * features, 1);
  std::vector<int> y(20);
  std::iota(y.begin(), y.end(), 100);
  const std::vector<long long> order = {3, 19, 0, 7, 7, 12, 5, 1, 2, 4, 6, 8};
  std::vector<float> xb(rows * features);
  std::vector<int> yb(rows);
  k::mlp_gather_rows(x.data(), y.data(), order.data(), 2, rows, features, xb.data(), yb.data());
  for (int r = 0; r < rows; ++r) {
    CHECK(yb[r] == 100 + order[2 + r]);
    CHECK(std::memcmp(&xb[r * features], &x[order[2 + r] * features], features * 4) == 0);
  }

  // y += b, then ReLU: what the CPU gets from broadcast_rows + (product) + relu.
  const std::vector<float> product = random_floats(rows * cols, 2);
  const std::vector<float> bias = random_floats(cols, 3);
  for (int relu : {0, 1}) {
    std::vector<float> got = product, expected(rows * cols);
    k::mlp_bias_forward(got.data(), bias.data(), rows, cols, relu);
    for (int i = 0; i < rows * cols; ++i) expected[i] = product[i] + bias[i % cols];
    if (relu) mlp_kernels::relu(expected.data(), expected.size());
    CHECK(bit_equal(got, expected));
  }

  const std::vector<float> activation = random_floats(rows * cols, 4);
  std::vector<float> got = random_floats(rows * cols, 5), expected = got;
  k::mlp_relu_backward(got.data(), activation.data(), rows * cols);
  mlp_kernels::relu_backward(expected.data(), activation.data(), expected.size());
  CHECK(bit_equal(got, expected));

  std::vector<float> sums(cols), cpu_sums(cols);
  k::mlp_sum_rows(got.data(), rows, cols, sums.data());
  mlp_kernels::sum_rows(got.data(), rows, cols, cpu_sums.data());
  CHECK(bit_equal(sums, cpu_sums));  // the same order: row by row
}

TEST_CASE("cuda kernels on the host: softmax cross-entropy, its gradient and the totals") {
  const int rows = 301, classes = 6;  // more rows than the stats kernel's threads
  const std::vector<float> logits = random_floats(rows * classes, 6, 3.0f);
  std::vector<int32_t> labels(rows);
  std::mt19937 rng(7);
  for (int32_t& l : labels) l = static_cast<int32_t>(rng() % classes);
  const float scale = 1.0f / 512;

  std::vector<float> delta(rows * classes), cpu_delta(rows * classes), row_loss(rows);
  std::vector<int> row_correct(rows);
  k::mlp_softmax_cross_entropy(logits.data(), labels.data(), rows, classes, scale, delta.data(),
                               row_loss.data(), row_correct.data());
  const mlp_kernels::CrossEntropy cpu = mlp_kernels::softmax_cross_entropy(
      logits.data(), labels.data(), rows, classes, scale, cpu_delta.data());
  // On the host the kernel calls the same expf/logf as the CPU path: the same bits.
  CHECK(bit_equal(delta, cpu_delta));

  struct Totals {
    double loss = 0;
    long long correct = 0, rows = 0;
  } totals;
  std::barrier<> barrier(kStatsThreads);
  k::block_barrier = &barrier;
  for (int batch = 0; batch < 2; ++batch) {  // accumulates across calls
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < kStatsThreads; ++t) {
      threads.emplace_back([&, t] {
        k::threadIdx.x = t;
        k::mlp_accumulate_stats(row_loss.data(), row_correct.data(), rows, &totals.loss,
                                &totals.correct);
      });
    }
    for (std::thread& t : threads) t.join();
  }
  k::block_barrier = nullptr;
  CHECK(totals.rows == 2 * rows);
  CHECK(totals.correct == 2 * cpu.correct);
  // A tree of doubles against the CPU's running double sum: equal to ~1e-15.
  CHECK(std::abs(totals.loss - 2 * cpu.loss_sum) < 1e-12 * std::abs(cpu.loss_sum));

  // Without a delta (validation), only the loss.
  std::vector<float> loss_only(rows);
  k::mlp_softmax_cross_entropy(logits.data(), labels.data(), rows, classes, 1.0f, nullptr,
                               loss_only.data(), row_correct.data());
  CHECK(bit_equal(loss_only, row_loss));
}

TEST_CASE("cuda optimizer kernels on the host give MlpOptimizer's bits") {
  const size_t n = 1003;  // not a multiple of the CPU's vector widths
  const std::vector<float> start = random_floats(n, 8);
  for (const testing::OptimizerCase& c : testing::kOptimizerCases) {
    CAPTURE(c.name);
    MlpOptimizer cpu(c.config, n);
    std::vector<float> cpu_w = start, w = start;
    std::vector<float> state(cpu.state().size(), 0.0f);
    for (int step = 1; step <= 4; ++step) {
      CAPTURE(step);
      const std::vector<float> g = random_floats(n, 100 + step, 0.1f);
      cpu.step(cpu_w, g);
      const float lr = static_cast<float>(c.config.lr);
      const float decay = static_cast<float>(c.config.weight_decay);
      const long long count = static_cast<long long>(n);
      if (c.config.kind == MlpOptimizerKind::kAdam) {
        // The same per-step constants the CUDA model passes (CudaMlpModel::optimizer_step).
        const mlp_kernels::AdamConstants a = adam_constants(c.config, step);
        k::mlp_adam(w.data(), state.data(), state.data() + n, g.data(), count, a.beta1, a.beta2,
                    a.epsilon, a.step_size, a.inv_sqrt_bc2, a.shrink);
      } else if (c.config.momentum == 0.0) {
        k::mlp_sgd(w.data(), g.data(), count, lr, decay);
      } else {
        k::mlp_sgd_momentum(w.data(), state.data(), g.data(), count, lr,
                            static_cast<float>(c.config.momentum), decay);
      }
      CHECK(bit_equal(w, cpu_w));
    }
    if (c.config.kind == MlpOptimizerKind::kAdam || c.config.momentum != 0.0)
      CHECK(bit_equal(state, {cpu.state().begin(), cpu.state().end()}));
  }
}

}  // namespace
}  // namespace cairn
