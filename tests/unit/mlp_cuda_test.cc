// builtin:mlp's CUDA path. Two kinds of test:
// - what runs without a GPU: the embedded kernels compile with NVRTC (whenever libnvrtc
//   loads), the row-major → column-major mapping handed to cuBLAS is right (checked
//   against OpenBLAS), device selection and the `device` hyperparameter;
// - what needs a GPU, NVRTC or NCCL ("[needs CAPABILITY]" in the name; CAIRN_SKIP says
//   why when it is missing, and ctest runs each capability as an entry of its own, listed
//   as Skipped where the machine lacks it): kernels and gradients against the CPU path on
//   the same data and weights, optimizer updates bit for bit, training, checkpoints across
//   devices, and gradient buckets over NCCL.
// Where there is no GPU, ctest's unit_fake_gpu runs the "[needs gpu]" and "[needs fake
// gpu]" cases on tests/fake_cuda (the driver and cuBLAS emulated on the host) and fails if
// any of them skips.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "collective/file_kv_store.h"
#include "collective/gloo_collective.h"
#include "collective/memory_kv_store.h"
#include "collective/nccl_collective.h"
#include "common/embedded.h"
#include "gpu/cublas.h"
#include "gpu/cuda_driver.h"
#include "gpu/nvrtc.h"
#include "optimizer_cases.h"
#include "tests/unit/cairn_skip.h"
#include "tests/unit/rank_threads.h"
#include "tests/unit/test_dir.h"
#include "trainer/blas.h"
#include "trainer/gradient_buckets.h"
#include "trainer/mlp_cuda_model.h"
#include "trainer/mlp_hparams.h"
#include "trainer/mlp_model.h"
#include "trainer/mlp_optimizer.h"
#include "trainer/mlp_trainer.h"

namespace cairn {
namespace {

namespace fs = std::filesystem;

// Why the GPU tests cannot run here, or "" when they can.
std::string why_no_gpu() {
  const Status st = cuda_mlp_available();
  return st.ok() ? "" : st.message();
}

// Skips the running case (tests/unit/cairn_skip.h) when there is no GPU, real or emulated.
#define SKIP_WITHOUT_GPU() \
  if (const std::string why = why_no_gpu(); !why.empty()) CAIRN_SKIP("needs gpu: " << why)

// tests/fake_cuda (a host emulation of the driver and cuBLAS on LD_LIBRARY_PATH) runs
// these tests without a GPU, except what needs NCCL, which the emulation cannot serve.
bool running_on_fake_gpu() {
  auto context = cuda::Context::retain(0);
  return context.ok() && context->name().find("host emulation") != std::string::npos;
}

// A trainer for one process on the device this machine allows, decided as mlp_main does
// for one rank.
Result<std::unique_ptr<MlpTrainer>> create_alone(const MlpHparams& hparams, uint64_t seed,
                                                 const fs::path& workdir) {
  auto device = choose_mlp_device(hparams.device, mlp_gpu_usable(1));
  if (!device.ok()) return device.status();
  return MlpTrainer::create(hparams, seed, /*deterministic=*/true, workdir, *device);
}

MlpHparams parse(const Json& json) {
  auto hp = MlpHparams::from_json(json);
  REQUIRE_MESSAGE(hp.ok(), hp.status().message());
  return *hp;
}

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

using testing::bit_equal;

// max |a − b| / max |b|: the error relative to the values' scale.
double relative_error(std::span<const float> a, std::span<const float> b) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

// --- Without a GPU ---

TEST_CASE("cuda kernels compile with NVRTC for sm_80 and sm_90 [needs nvrtc]") {
  const nvrtc::Info& info = nvrtc::info();
  if (!info.status.ok()) {
    CAIRN_SKIP("needs nvrtc: " << info.status.message());
  }
  if (info.major == 0) {
    CAIRN_SKIP("needs nvrtc: libnvrtc is tests/fake_cuda's stand-in, which compiles nothing");
  }
  MESSAGE("NVRTC " << info.major << "." << info.minor);
  for (int sm : {80, 90}) {
    CAPTURE(sm);
    auto cubin = nvrtc::compile(kMlpCudaKernels, "mlp_cuda_kernels.cu", sm, nvrtc::Output::kCubin);
    REQUIRE_MESSAGE(cubin.ok(), cubin.status().message());
    CHECK(cubin->rfind("\x7f"
                       "ELF",
                       0) == 0);
    auto ptx = nvrtc::compile(kMlpCudaKernels, "mlp_cuda_kernels.cu", sm, nvrtc::Output::kPtx);
    REQUIRE_MESSAGE(ptx.ok(), ptx.status().message());
    // Every kernel the model looks up is there, unmangled.
    for (const std::string& name : mlp_cuda_kernel_names()) {
      CAPTURE(name);
      CHECK(ptx->find(".entry " + name + "(") != std::string::npos);
    }
  }
}

TEST_CASE(
    "NVRTC reports a compile error in one line, and compiles PTX for an unknown GPU [needs "
    "nvrtc]") {
  if (!nvrtc::info().status.ok() || nvrtc::info().major == 0) {
    CAIRN_SKIP("needs nvrtc: the real libnvrtc.so: " << nvrtc::info().status.message());
  }
  auto bad = nvrtc::compile("__global__ void f() { undefined_thing(); }", "bad.cu", 80,
                            nvrtc::Output::kPtx);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("bad.cu") != std::string::npos);
  CHECK(bad.status().message().find("undefined_thing") != std::string::npos);
  CHECK(bad.status().message().find('\n') == std::string::npos);
  // It would fail the same way on every restart: bad input (exit 2), not a retryable error.
  CHECK(bad.status().exit_code() == 2);
  // A device newer than every architecture NVRTC knows gets PTX, which the driver JITs.
  auto future = nvrtc::compile_for_device(kMlpCudaKernels, "mlp_cuda_kernels.cu", 990);
  REQUIRE_MESSAGE(future.ok(), future.status().message());
  CHECK(future->find(".entry mlp_adam(") != std::string::npos);
}

// A plain column-major sgemm, BLAS's definition, for checking the mapping cuBLAS receives.
void reference_column_major(const cublas::ColumnMajorGemm& g, float alpha, float beta) {
  auto at = [](const float* m, int ld, bool transposed, int row, int col) {
    return transposed ? m[col + static_cast<size_t>(row) * ld]
                      : m[row + static_cast<size_t>(col) * ld];
  };
  for (int j = 0; j < g.n; ++j) {
    for (int i = 0; i < g.m; ++i) {
      double sum = 0;
      for (int p = 0; p < g.k; ++p) {
        sum += static_cast<double>(at(g.a, g.lda, g.op_a == cublas::Op::kTranspose, i, p)) *
               at(g.b, g.ldb, g.op_b == cublas::Op::kTranspose, p, j);
      }
      float& c = g.c[i + static_cast<size_t>(j) * g.ldc];
      c = static_cast<float>(alpha * sum + beta * c);
    }
  }
}

TEST_CASE("the row-major sgemm handed to cuBLAS is the column-major transpose") {
  const int m = 5, n = 7, k = 3, pad = 2;
  for (blas::Op op_a : {blas::Op::kNone, blas::Op::kTranspose}) {
    for (blas::Op op_b : {blas::Op::kNone, blas::Op::kTranspose}) {
      CAPTURE(static_cast<int>(op_a));
      CAPTURE(static_cast<int>(op_b));
      // Row-major storage with padded rows: A is m×k (or k×m stored), B is k×n (or n×k).
      const int a_rows = op_a == blas::Op::kNone ? m : k, a_cols = op_a == blas::Op::kNone ? k : m;
      const int b_rows = op_b == blas::Op::kNone ? k : n, b_cols = op_b == blas::Op::kNone ? n : k;
      const int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
      const std::vector<float> a = random_floats(static_cast<size_t>(a_rows) * lda, 1);
      const std::vector<float> b = random_floats(static_cast<size_t>(b_rows) * ldb, 2);
      std::vector<float> expected = random_floats(static_cast<size_t>(m) * ldc, 3);
      std::vector<float> got = expected;
      blas::sgemm(op_a, op_b, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 0.25f, expected.data(),
                  ldc);
      const auto cu = [](blas::Op op) {
        return op == blas::Op::kTranspose ? cublas::Op::kTranspose : cublas::Op::kNone;
      };
      reference_column_major(cublas::to_column_major(cu(op_a), cu(op_b), m, n, k, a.data(), lda,
                                                     b.data(), ldb, got.data(), ldc),
                             0.5f, 0.25f);
      CHECK(relative_error(got, expected) < 1e-6);
    }
  }
}

TEST_CASE("device choice: cpu always works; auto falls back to the CPU and says why") {
  auto cpu = choose_mlp_device(MlpDevice::kCpu, mlp_gpu_usable(1));
  REQUIRE(cpu.ok());
  CHECK_FALSE(cpu->cuda);
  CHECK(cpu->note == "cpu");
  const Status gpu = cuda_mlp_available();
  auto automatic = choose_mlp_device(MlpDevice::kAuto, mlp_gpu_usable(1));
  REQUIRE(automatic.ok());
  CHECK(automatic->cuda == gpu.ok());
  auto cuda = choose_mlp_device(MlpDevice::kCuda, mlp_gpu_usable(1));
  if (gpu.ok()) {
    CHECK(cuda.ok());
  } else {
    CHECK(automatic->note == "cpu (auto: " + gpu.message() + ")");
    REQUIRE_FALSE(cuda.ok());
    CHECK(cuda.status().kind() == ErrorKind::kBadInput);
    CHECK(cuda.status().message().find("cannot train on a GPU: " + gpu.message()) !=
          std::string::npos);
  }
}

TEST_CASE("mlp hyperparameter device: auto by default, cpu or cuda, nothing else") {
  CHECK(parse(Json::object()).device == MlpDevice::kAuto);
  CHECK(parse({{"device", "cpu"}}).device == MlpDevice::kCpu);
  CHECK(parse({{"device", "cuda"}}).device == MlpDevice::kCuda);
  auto bad = MlpHparams::from_json({{"device", "gpu"}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "hyperparameter 'device' must be \"auto\", \"cpu\" or \"cuda\", got \"gpu\"");
}

TEST_CASE(
    "a cuda trainer without a GPU is a one-line error; auto trains on the CPU [needs no gpu]") {
  if (cuda_mlp_available().ok()) {
    CAIRN_SKIP(
        "needs no gpu: a GPU, or tests/fake_cuda's emulation of one, is here; this tests the "
        "fallback without one");
  }
  auto cuda = create_alone(parse({{"device", "cuda"}, {"samples", 100}}), 1, ".");
  REQUIRE_FALSE(cuda.ok());
  CHECK(cuda.status().exit_code() == 2);
  CHECK(cuda.status().message().find('\n') == std::string::npos);
  auto automatic = create_alone(parse({{"device", "auto"}, {"samples", 100}}), 1, ".");
  REQUIRE(automatic.ok());
  CHECK_FALSE((*automatic)->on_gpu());
  CHECK((*automatic)->describe().find("device cpu (auto: ") != std::string::npos);
}

// --- With a GPU ---

struct Batch {
  MlpShape shape;
  MlpSplit split;
};

Batch make_batch(int rows, const MlpShape& shape, uint32_t seed) {
  Batch b{.shape = shape, .split = {}};
  b.split.x = random_floats(static_cast<size_t>(rows) * shape.inputs, seed);
  std::mt19937 rng(seed + 1);
  for (int r = 0; r < rows; ++r) b.split.y.push_back(static_cast<int32_t>(rng() % shape.classes));
  return b;
}

std::unique_ptr<CudaMlpModel> make_cuda_model(const MlpShape& shape,
                                              const MlpOptimizerConfig& optimizer, int rows) {
  auto made = CudaMlpModel::create(shape, optimizer, rows);
  REQUIRE_MESSAGE(made.ok(), made.status().message());
  return std::move(made).value();
}

TEST_CASE("cuda forward/backward matches the CPU on the same data and weights [needs gpu]") {
  SKIP_WITHOUT_GPU();
  // Widths that are not multiples of anything, and a hidden layer with dead ReLUs.
  const MlpShape shape{.inputs = 13, .hidden = 37, .layers = 2, .classes = 5};
  const int rows = 70;
  const Batch batch = make_batch(rows, shape, 11);
  MlpModel cpu(shape);
  cpu.initialize(3);
  MlpWorkspace ws(shape, rows);
  std::copy(batch.split.x.begin(), batch.split.x.end(), ws.input());
  std::copy(batch.split.y.begin(), batch.split.y.end(), ws.labels());
  const MlpBatchStats cpu_stats = cpu.forward_backward(ws, rows, {}, 2 * rows);

  auto gpu = make_cuda_model(shape, MlpOptimizerConfig{}, rows);
  MESSAGE("GPU: " << gpu->describe());
  REQUIRE(gpu->set_weights(cpu.weights()).ok());
  REQUIRE(gpu->set_data(batch.split, batch.split).ok());
  std::vector<int64_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  REQUIRE(gpu->set_order(order).ok());
  REQUIRE(gpu->train_batch(0, rows, 2 * rows).ok());
  std::vector<float> gradients(shape.parameters());
  REQUIRE(gpu->get_gradients(gradients).ok());
  auto stats = gpu->take_stats();
  REQUIRE(stats.ok());

  // Tolerance: float sums in another order (cuBLAS, bias added after the product) and
  // CUDA's expf/logf differ from the CPU's by a few ulp per term; 1e-4 of each layer's
  // largest gradient leaves room for that and catches any real mistake (a wrong transpose
  // or a missed ReLU mask is off by O(1)).
  for (int l = 0; l < shape.linear_layers(); ++l) {
    CAPTURE(l);
    const auto cpu_layer = std::span<const float>(cpu.gradients())
                               .subspan(cpu.layer_gradients(l).data() - cpu.gradients().data(),
                                        shape.layer_parameters(l));
    const auto gpu_layer = std::span<const float>(gradients).subspan(
        cpu_layer.data() - cpu.gradients().data(), cpu_layer.size());
    CHECK(relative_error(gpu_layer, cpu_layer) < 1e-4);
  }
  CHECK(stats->rows == rows);
  CHECK(stats->correct == cpu_stats.correct);
  CHECK(std::abs(stats->loss_sum - cpu_stats.loss_sum) < 1e-5 * std::abs(cpu_stats.loss_sum));

  // Evaluation reads the validation split in place: the same loss, no gradients.
  REQUIRE(gpu->evaluate_batch(0, rows).ok());
  auto eval = gpu->take_stats();
  REQUIRE(eval.ok());
  CHECK(std::abs(eval->loss_sum - cpu_stats.loss_sum) < 1e-5 * std::abs(cpu_stats.loss_sum));
}

TEST_CASE("cuda optimizer updates give the CPU's bits for the same gradients [needs gpu]") {
  SKIP_WITHOUT_GPU();
  const MlpShape shape{.inputs = 6, .hidden = 19, .layers = 1, .classes = 3};
  const int rows = 33;
  const Batch batch = make_batch(rows, shape, 5);
  std::vector<int64_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  for (const testing::OptimizerCase& c : testing::kOptimizerCases) {
    CAPTURE(c.name);
    MlpModel cpu(shape);
    cpu.initialize(9);
    MlpOptimizer cpu_optimizer(c.config, shape.parameters());
    auto gpu = make_cuda_model(shape, c.config, rows);
    REQUIRE(gpu->set_weights(cpu.weights()).ok());
    REQUIRE(gpu->set_data(batch.split, batch.split).ok());
    REQUIRE(gpu->set_order(order).ok());
    std::vector<float> gradients(shape.parameters()), weights(shape.parameters());
    for (int step = 0; step < 3; ++step) {
      CAPTURE(step);
      REQUIRE(gpu->train_batch(0, rows, rows).ok());
      // The CPU steps with the GPU's gradients, so the updates see the same inputs.
      REQUIRE(gpu->get_gradients(gradients).ok());
      REQUIRE(gpu->optimizer_step().ok());
      cpu_optimizer.step(cpu.weights(), gradients);
      REQUIRE(gpu->get_weights(weights).ok());
      CHECK(bit_equal(weights, cpu.weights()));
    }
    std::vector<float> state(gpu->optimizer_state_size());
    REQUIRE(gpu->get_optimizer_state(state).ok());
    CHECK(bit_equal(state, cpu_optimizer.state()));
    CHECK(gpu->optimizer_steps() == cpu_optimizer.steps());
  }
}

TEST_CASE(
    "builtin:mlp trains on the GPU, repeats itself, and checkpoints cross devices "
    "[needs gpu]") {
  SKIP_WITHOUT_GPU();
  testing::TestDir dir;
  const Json config = {{"optimizer", "adam"}, {"hidden", 32}, {"batch_size", 32}};
  auto make = [&](const char* device) {
    Json with_device = config;
    with_device["device"] = device;
    auto t = create_alone(parse(with_device), 4, dir.path());
    REQUIRE_MESSAGE(t.ok(), t.status().message());
    return std::move(t).value();
  };
  auto gpu = make("cuda");
  REQUIRE(gpu->on_gpu());
  MESSAGE(gpu->describe());
  const double first = *gpu->train_epoch();
  double last = first;
  for (int epoch = 1; epoch < 8; ++epoch) {
    auto loss = gpu->train_epoch();
    REQUIRE_MESSAGE(loss.ok(), loss.status().message());
    last = *loss;
  }
  auto eval = gpu->evaluate();
  REQUIRE(eval.ok());
  CHECK(last < 0.8 * first);
  CHECK(eval->accuracy > 0.6);  // chance is 1/3

  // The same seed on the same GPU gives the same bits.
  auto again = make("cuda");
  for (int epoch = 0; epoch < 8; ++epoch) REQUIRE(again->train_epoch().ok());
  CHECK(bit_equal(again->flat_weights(), gpu->flat_weights()));

  // A GPU checkpoint resumes on the CPU with the same weights and optimizer state, and a
  // CPU checkpoint on the GPU.
  REQUIRE(gpu->save(dir.path()).ok());
  auto cpu = make("cpu");
  REQUIRE(cpu->load(dir.path()).ok());
  CHECK(cpu->epochs_completed() == 8);
  CHECK(bit_equal(cpu->flat_weights(), gpu->flat_weights()));
  REQUIRE(cpu->train_epoch().ok());
  REQUIRE(cpu->save(dir.path()).ok());
  auto back = make("cuda");
  REQUIRE(back->load(dir.path()).ok());
  CHECK(bit_equal(back->flat_weights(), cpu->flat_weights()));
  // CPU and GPU epochs agree to rounding: their losses are close, not equal.
  auto cpu_loss = cpu->train_epoch();
  auto gpu_loss = back->train_epoch();
  REQUIRE(cpu_loss.ok());
  REQUIRE(gpu_loss.ok());
  CHECK(std::abs(*cpu_loss - *gpu_loss) < 1e-2 * std::abs(*cpu_loss) + 1e-4);
}

TEST_CASE(
    "gradient buckets over NCCL with one rank leave GPU gradients as they are "
    "[needs nccl]") {
  SKIP_WITHOUT_GPU();
  if (!nccl_available()) {
    CAIRN_SKIP("needs nccl: libnccl not found");
  }
  if (running_on_fake_gpu()) {
    CAIRN_SKIP("needs nccl: NCCL needs a real GPU, not tests/fake_cuda's host emulation");
  }
  const MlpShape shape{.inputs = 4, .hidden = 16, .layers = 3, .classes = 3};
  const int rows = 20;
  const Batch batch = make_batch(rows, shape, 8);
  MlpModel init(shape);
  init.initialize(2);
  auto gpu = make_cuda_model(shape, MlpOptimizerConfig{}, rows);
  REQUIRE(gpu->set_weights(init.weights()).ok());
  REQUIRE(gpu->set_data(batch.split, batch.split).ok());
  std::vector<int64_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  REQUIRE(gpu->set_order(order).ok());
  REQUIRE(gpu->train_batch(0, rows, rows).ok());
  std::vector<float> plain(shape.parameters()), reduced(shape.parameters());
  REQUIRE(gpu->get_gradients(plain).ok());

  MemoryKeyValueStore kv;
  NcclOptions options;
  options.key_prefix = "mlp-nccl-1";
  auto nccl = make_nccl_collective(kv, 0, 1, options);
  REQUIRE_MESSAGE(nccl.ok(), nccl.status().message());
  std::vector<size_t> layer_sizes;
  for (int l = 0; l < shape.linear_layers(); ++l) layer_sizes.push_back(shape.layer_parameters(l));
  GradientBuckets buckets(**nccl, layer_sizes, /*bucket_bytes=*/256, /*overlap=*/true);
  std::vector<int> order_seen;
  REQUIRE(gpu->train_batch(0, rows, rows,
                           [&](int layer, std::span<float> g) {
                             order_seen.push_back(layer);
                             buckets.layer_ready(layer, g);
                           })
              .ok());
  REQUIRE(buckets.finish().ok());
  REQUIRE(gpu->get_gradients(reduced).ok());
  CHECK(order_seen == std::vector<int>{3, 2, 1, 0});
  CHECK(bit_equal(reduced, plain));  // a sum over one rank
  float loss[2] = {1.5f, 2.5f};
  REQUIRE(gpu->allreduce_host(**nccl, loss, 2).ok());
  CHECK(loss[0] == 1.5f);
  CHECK(loss[1] == 2.5f);
}

// NCCL refuses two ranks on one GPU, so on a one-GPU machine the trainer's NCCL path (the
// communicator, bucketed gradient all-reduce, the loss all-reduce) runs with one rank: it
// must train exactly as the trainer does with no collective at all.
TEST_CASE("builtin:mlp over NCCL with one rank trains as it does alone [needs nccl]") {
  SKIP_WITHOUT_GPU();
  if (!nccl_available()) {
    CAIRN_SKIP("needs nccl: libnccl not found");
  }
  if (running_on_fake_gpu()) {
    CAIRN_SKIP("needs nccl: NCCL needs a real GPU, not tests/fake_cuda's host emulation");
  }
  const MlpHparams hparams = parse(
      {{"device", "cuda"}, {"hidden", 32}, {"batch_size", 37}, {"bucket_kb", 1}, {"samples", 600}});
  const MlpDeviceChoice gpu{.cuda = true, .note = "cuda"};
  auto train = [&](Collective* collective) {
    testing::TestDir dir;
    auto trainer =
        MlpTrainer::create(hparams, 7, /*deterministic=*/true, dir.path(), gpu, collective);
    REQUIRE_MESSAGE(trainer.ok(), trainer.status().message());
    REQUIRE((*trainer)->on_gpu());
    testing::RankRun run;
    for (int e = 0; e < 3; ++e) {
      auto loss = (*trainer)->train_epoch();
      REQUIRE_MESSAGE(loss.ok(), loss.status().message());
      run.losses.push_back(*loss);
    }
    run.weights = (*trainer)->flat_weights();
    return run;
  };
  MemoryKeyValueStore kv;
  NcclOptions options;
  options.key_prefix = "mlp-trainer-nccl-1";
  auto nccl = make_nccl_collective(kv, 0, 1, options);
  REQUIRE_MESSAGE(nccl.ok(), nccl.status().message());
  const testing::RankRun alone = train(nullptr);
  const testing::RankRun ranked = train(nccl->get());
  CHECK(ranked.losses == alone.losses);
  CHECK(bit_equal(ranked.weights, alone.weights));
  CHECK(ranked.losses.back() < ranked.losses.front());
}

// Gloo under NCCL's name: on tests/fake_cuda "device" memory is host memory, so Gloo can
// reduce it, and the trainer's multi-GPU path (which insists on an "nccl" collective) runs
// with ranks as threads. Meaningless on a real GPU.
class GlooAsNccl final : public Collective {
 public:
  explicit GlooAsNccl(std::unique_ptr<Collective> gloo) : gloo_(std::move(gloo)) {}
  int rank() const override { return gloo_->rank(); }
  int size() const override { return gloo_->size(); }
  const char* backend() const override { return "nccl"; }
  Status allreduce_sum(float* data, size_t count) override {
    return gloo_->allreduce_sum(data, count);
  }
  std::unique_ptr<PendingReduce> allreduce_sum_async(float* data, size_t count) override {
    return gloo_->allreduce_sum_async(data, count);
  }
  Status broadcast(void* data, size_t bytes, int root) override {
    return gloo_->broadcast(data, bytes, root);
  }
  Status barrier() override { return gloo_->barrier(); }

 private:
  std::unique_ptr<Collective> gloo_;
};

TEST_CASE("auto falls back to the CPU when the GPU fails at attach; cuda fails [needs fake gpu]") {
  SKIP_WITHOUT_GPU();
  if (!running_on_fake_gpu()) {
    CAIRN_SKIP("needs fake gpu: runs on tests/fake_cuda only: it can make every allocation fail");
  }
  ::setenv("FAKE_CUDA_MAX_ALLOC", "1024", 1);  // a "GPU" too small for the model or data
  auto automatic = create_alone(parse({{"device", "auto"}, {"samples", 600}}), 1, ".");
  auto cuda = create_alone(parse({{"device", "cuda"}, {"samples", 600}}), 1, ".");
  ::unsetenv("FAKE_CUDA_MAX_ALLOC");
  REQUIRE_MESSAGE(automatic.ok(), automatic.status().message());
  CHECK_FALSE((*automatic)->on_gpu());
  CHECK((*automatic)->describe().find("device cpu (auto: the GPU failed: ") != std::string::npos);
  CHECK((*automatic)->train_epoch().ok());
  REQUIRE_FALSE(cuda.ok());
  CHECK(cuda.status().message().find("cannot train on the GPU: ") != std::string::npos);
}

TEST_CASE("2 GPU ranks follow the 1-GPU curve and agree bit for bit [needs fake gpu]") {
  SKIP_WITHOUT_GPU();
  if (!running_on_fake_gpu()) {
    CAIRN_SKIP(
        "needs fake gpu: runs on tests/fake_cuda only; on GPUs the e2e tests cover NCCL ranks");
  }
  // The ranks are handed the GPU as mlp_main hands them the agreed device, so NCCL need not
  // be found here: Gloo stands in for it.
  const Json json = {
      {"device", "cuda"}, {"hidden", 16}, {"batch_size", 37}, {"bucket_kb", 1}, {"samples", 600}};
  const MlpHparams hparams = parse(json);
  auto train = [&](int world) {
    return testing::train_ranks(
        world, hparams, MlpDeviceChoice{.cuda = true, .note = "cuda"}, 3,
        [](std::unique_ptr<Collective> gloo) -> std::unique_ptr<Collective> {
          return std::make_unique<GlooAsNccl>(std::move(gloo));
        },
        [](const MlpTrainer& trainer, int rank) {
          return trainer.on_gpu()
                     ? Status::Ok()
                     : Status::Failed("rank " + std::to_string(rank) + " is not on the GPU");
        });
  };
  const auto single = train(1);
  const auto pair = train(2);
  CHECK(bit_equal(pair[0].weights, pair[1].weights));
  CHECK(pair[0].losses == pair[1].losses);
  for (size_t e = 0; e < single[0].losses.size(); ++e) {
    CAPTURE(e);
    CHECK(pair[0].losses[e] == doctest::Approx(single[0].losses[e]).epsilon(1e-3));
  }
  CHECK(relative_error(pair[0].weights, single[0].weights) < 1e-3);
}

}  // namespace
}  // namespace cairn
