#include "trainer/mlp_cuda_model.h"

#include <algorithm>
#include <array>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/embedded.h"
#include "gpu/cublas.h"
#include "gpu/cuda_driver.h"
#include "gpu/nvrtc.h"
#include "trainer/gpu_memory_reserve.h"
#include "trainer/gpu_memory_text.h"

namespace cairn {
namespace {

using cublas::Op;
using cuda::CUfunction;
using cuda::DeviceMemory;

constexpr unsigned kThreads = 256;
constexpr unsigned kStatsThreads = 256;  // must equal kStatsThreads in mlp_cuda_kernels.cu

// The device's loss/accuracy totals: [loss sum (double), correct (i64), rows (i64)].
struct DeviceStats {
  double loss_sum;
  int64_t correct;
  int64_t rows;
};

enum Kernel {
  kGatherRows,
  kBiasForward,
  kReluBackward,
  kSumRows,
  kSoftmaxCrossEntropy,
  kAccumulateStats,
  kSgd,
  kSgdMomentum,
  kAdam,
  kKernelCount
};
constexpr const char* kKernelNames[kKernelCount] = {
    "mlp_gather_rows", "mlp_bias_forward",          "mlp_relu_backward",
    "mlp_sum_rows",    "mlp_softmax_cross_entropy", "mlp_accumulate_stats",
    "mlp_sgd",         "mlp_sgd_momentum",          "mlp_adam"};

template <typename T>
T* as(const DeviceMemory& m) {
  return reinterpret_cast<T*>(m.address());
}

}  // namespace

// Members are destroyed bottom-up: buffers, module, cuBLAS and the stream go before the
// context they live in.
struct CudaMlpModel::Impl {
  cuda::Context context;
  cuda::Stream stream;
  cublas::Handle blas;
  cuda::Module module;
  std::array<CUfunction, kKernelCount> kernels{};
  std::string compiled_as;  // "cubin" or "PTX", and whether it came from the kernel cache

  std::vector<size_t> offsets;  // start of each layer's [W, b], as in MlpModel
  DeviceMemory weights, gradients, optimizer_state;
  std::vector<DeviceMemory> activations;  // [l]: output of layer l, max_rows × width_out(l)
  DeviceMemory input, labels;             // the gathered batch
  DeviceMemory delta_a, delta_b;
  DeviceMemory row_loss, row_correct, stats;
  DeviceMemory train_x, train_y, val_x, val_y, order;
  DeviceMemory scratch;  // allreduce_host
  int64_t train_rows = 0, val_rows = 0;
  size_t model_bytes = 0;              // device memory create() allocated
  const float* batch_input = nullptr;  // what layer 0 read in the last forward pass

  // Enqueues kernel k over `work` items (grid-stride loops cover any count).
  template <typename... Args>
  Status launch(Kernel k, int64_t work, Args... args) {
    const int64_t wanted = (std::max<int64_t>(work, 1) + kThreads - 1) / kThreads;
    // Enough blocks to fill the GPU several times over; the loops stride past the rest.
    const int64_t cap = std::max(1, context.multiprocessors()) * int64_t{32};
    return launch_grid(k, static_cast<unsigned>(std::min(wanted, cap)), kThreads, args...);
  }

  template <typename... Args>
  Status launch_grid(Kernel k, unsigned blocks, unsigned threads, Args... args) {
    std::tuple<Args...> values(args...);
    void* pointers[sizeof...(Args)];
    std::apply(
        [&](auto&... v) {
          size_t i = 0;
          ((pointers[i++] = static_cast<void*>(&v)), ...);
        },
        values);
    const cuda::CUresult r = cuda::driver().cuLaunchKernel(kernels[k], blocks, 1, 1, threads, 1, 1,
                                                           0, stream.get(), pointers, nullptr);
    return r == cuda::kSuccess
               ? Status::Ok()
               : cuda::error((std::string("cuLaunchKernel ") + kKernelNames[k]).c_str(), r);
  }

  Status upload(const DeviceMemory& dst, const void* src, size_t bytes) {
    if (bytes > dst.bytes()) return Status::BadInput("upload larger than its device buffer");
    if (bytes == 0) return Status::Ok();
    context.make_current();
    const cuda::CUresult r =
        cuda::driver().cuMemcpyHtoDAsync(dst.address(), src, bytes, stream.get());
    if (r != cuda::kSuccess) return cuda::error("cuMemcpyHtoDAsync", r);
    // The host memory is pageable and the caller may reuse it at once.
    return stream.synchronize();
  }

  Status download(void* dst, const DeviceMemory& src, size_t bytes) {
    if (bytes > src.bytes()) return Status::BadInput("download larger than its device buffer");
    if (bytes == 0) return Status::Ok();
    context.make_current();
    const cuda::CUresult r =
        cuda::driver().cuMemcpyDtoHAsync(dst, src.address(), bytes, stream.get());
    if (r != cuda::kSuccess) return cuda::error("cuMemcpyDtoHAsync", r);
    return stream.synchronize();
  }

  // kBadInput when `bytes` exceed what the GPU can ever give the trainer (its whole memory
  // less the CUDA context's share, trainer/gpu_memory_reserve.h): no restart can make them fit,
  // so the trial ends (exit 2) instead of being retried. Allocations that fail below that
  // are left to fail as kFailed: other processes may be holding the memory for now.
  Status fits_device(size_t bytes, const std::string& what) {
    size_t free = 0, total = 0;
    context.make_current();
    if (cuda::driver().cuMemGetInfo(&free, &total) != cuda::kSuccess ||
        bytes <= gpu_memory_usable(total))
      return Status::Ok();
    return Status::BadInput(what + " needs " + gpu_memory_text(bytes, Rounding::kUp) +
                            " of GPU memory; the GPU has " +
                            gpu_memory_text(total, Rounding::kDown) + " in all, " +
                            gpu_memory_text(gpu_memory_usable(total), Rounding::kDown) +
                            " after the CUDA context's share (use device: cpu)");
  }

  Status zero(const DeviceMemory& m, size_t bytes) {
    const cuda::CUresult r =
        cuda::driver().cuMemsetD32Async(m.address(), 0, bytes / 4, stream.get());
    return r == cuda::kSuccess ? Status::Ok() : cuda::error("cuMemsetD32Async", r);
  }
};

Status cuda_mlp_available() {
  if (Status st = cuda::driver().status; !st.ok()) return st;
  if (Status st = nvrtc::info().status; !st.ok()) return st;
  return cublas::info().status;
}

std::vector<std::string> mlp_cuda_kernel_names() {
  return {std::begin(kKernelNames), std::end(kKernelNames)};
}

CudaMlpModel::CudaMlpModel(const MlpShape& shape, std::unique_ptr<Impl> impl, int max_rows)
    : shape_(shape), impl_(std::move(impl)), max_rows_(max_rows) {}

CudaMlpModel::~CudaMlpModel() {
  // Let queued work finish before its buffers go.
  if (impl_) (void)impl_->stream.synchronize();
}

Result<std::unique_ptr<CudaMlpModel>> CudaMlpModel::create(const MlpShape& shape,
                                                           const MlpOptimizerConfig& optimizer,
                                                           int max_rows, int device) {
  if (Status st = cuda_mlp_available(); !st.ok()) return st;
  auto impl = std::make_unique<Impl>();
  auto context = cuda::Context::retain(device);
  if (!context.ok()) return context.status();
  impl->context = std::move(context).value();
  auto stream = cuda::Stream::create(impl->context);
  if (!stream.ok()) return stream.status();
  impl->stream = std::move(stream).value();
  auto handle = cublas::Handle::create(impl->context, impl->stream);
  if (!handle.ok()) return handle.status();
  impl->blas = std::move(handle).value();

  const int sm = impl->context.capability().sm();
  // nvrtc.h and Module classify their errors: a compile error, a module the driver refuses
  // or a kernel it lacks is kBadInput (the same source, NVRTC and driver fail the same way
  // on every restart); the rest (out of memory, an internal error) is kFailed (retryable).
  bool from_cache = false;
  auto image = nvrtc::compile_for_device(kMlpCudaKernels, "mlp_cuda_kernels.cu", sm, &from_cache);
  if (!image.ok()) return image.status();
  // A PTX image is text ending in NUL; a cubin is an ELF file.
  impl->compiled_as = image->rfind(
                          "\x7f"
                          "ELF",
                          0) == 0
                          ? "cubin"
                          : "PTX";
  if (from_cache) impl->compiled_as += " (from the kernel cache)";
  auto module = cuda::Module::load(impl->context, *image);
  if (!module.ok()) return module.status();
  impl->module = std::move(module).value();
  for (int k = 0; k < kKernelCount; ++k) {
    auto f = impl->module.function(kKernelNames[k]);
    if (!f.ok()) return f.status();  // kBadInput when the image lacks it (Module::function)
    impl->kernels[static_cast<size_t>(k)] = *f;
  }

  const size_t parameters = shape.parameters();
  size_t offset = 0;
  for (int l = 0; l < shape.linear_layers(); ++l) {
    impl->offsets.push_back(offset);
    offset += shape.layer_parameters(l);
  }
  const size_t rows = static_cast<size_t>(std::max(max_rows, 1));
  int widest = shape.classes;
  for (int l = 0; l < shape.linear_layers(); ++l) widest = std::max(widest, shape.width_out(l));
  const size_t state_floats = parameters * (optimizer.kind == MlpOptimizerKind::kAdam ? 2 : 1);

  // Every buffer is planned first, so that a model larger than the whole GPU is told apart
  // from an allocation that fails because other processes hold memory.
  std::vector<std::pair<DeviceMemory*, size_t>> plan;
  plan.emplace_back(&impl->weights, parameters * sizeof(float));
  plan.emplace_back(&impl->gradients, parameters * sizeof(float));
  plan.emplace_back(&impl->optimizer_state, state_floats * sizeof(float));
  impl->activations.resize(static_cast<size_t>(shape.linear_layers()));
  for (int l = 0; l < shape.linear_layers(); ++l)
    plan.emplace_back(&impl->activations[static_cast<size_t>(l)],
                      rows * shape.width_out(l) * sizeof(float));
  plan.emplace_back(&impl->input, rows * shape.inputs * sizeof(float));
  plan.emplace_back(&impl->labels, rows * sizeof(int32_t));
  plan.emplace_back(&impl->delta_a, rows * widest * sizeof(float));
  plan.emplace_back(&impl->delta_b, rows * widest * sizeof(float));
  plan.emplace_back(&impl->row_loss, rows * sizeof(float));
  plan.emplace_back(&impl->row_correct, rows * sizeof(int32_t));
  plan.emplace_back(&impl->stats, sizeof(DeviceStats));
  plan.emplace_back(&impl->scratch, 2 * sizeof(float));
  for (const auto& [memory, bytes] : plan) impl->model_bytes += bytes;
  if (Status st = impl->fits_device(impl->model_bytes, "the model " + shape.describe()); !st.ok())
    return st;
  for (const auto& [memory, bytes] : plan) {
    auto made = DeviceMemory::allocate(impl->context, bytes);
    if (!made.ok()) return made.status();  // memory held by others: a restart may find it
    *memory = std::move(made).value();
  }
  if (Status st = impl->zero(impl->optimizer_state, impl->optimizer_state.bytes()); !st.ok())
    return st;
  if (Status st = impl->zero(impl->stats, sizeof(DeviceStats)); !st.ok()) return st;
  if (Status st = impl->stream.synchronize(); !st.ok()) return st;

  auto model = std::unique_ptr<CudaMlpModel>(
      new CudaMlpModel(shape, std::move(impl), static_cast<int>(rows)));
  model->optimizer_ = optimizer;
  return model;
}

std::string CudaMlpModel::describe() const {
  const cuda::Context& c = impl_->context;
  const std::string sm =
      std::to_string(c.capability().major) + "." + std::to_string(c.capability().minor);
  return "cuda:" + std::to_string(c.ordinal()) + " " + c.name() + " (compute " + sm +
         ", kernels compiled by NVRTC " + std::to_string(nvrtc::info().major) + "." +
         std::to_string(nvrtc::info().minor) + " as " + impl_->compiled_as + "; cuBLAS " +
         std::to_string(cublas::info().major) + "." + std::to_string(cublas::info().minor) + ")";
}

size_t CudaMlpModel::optimizer_state_size() const {
  return impl_->optimizer_state.bytes() / sizeof(float);
}

Status CudaMlpModel::set_weights(std::span<const float> weights) {
  if (weights.size() != shape_.parameters()) return Status::BadInput("weights of the wrong size");
  return impl_->upload(impl_->weights, weights.data(), weights.size_bytes());
}

Status CudaMlpModel::get_weights(std::span<float> weights) const {
  if (weights.size() != shape_.parameters()) return Status::BadInput("weights of the wrong size");
  return impl_->download(weights.data(), impl_->weights, weights.size_bytes());
}

Status CudaMlpModel::get_gradients(std::span<float> gradients) const {
  if (gradients.size() != shape_.parameters())
    return Status::BadInput("gradients of the wrong size");
  return impl_->download(gradients.data(), impl_->gradients, gradients.size_bytes());
}

Status CudaMlpModel::set_optimizer_state(std::span<const float> state, int64_t steps) {
  if (state.size() != optimizer_state_size())
    return Status::BadInput("optimizer state of the wrong size");
  steps_ = steps;
  return impl_->upload(impl_->optimizer_state, state.data(), state.size_bytes());
}

Status CudaMlpModel::get_optimizer_state(std::span<float> state) const {
  if (state.size() != optimizer_state_size())
    return Status::BadInput("optimizer state of the wrong size");
  return impl_->download(state.data(), impl_->optimizer_state, state.size_bytes());
}

Status CudaMlpModel::set_data(const MlpSplit& train, const MlpSplit& validation) {
  Impl& m = *impl_;
  struct Piece {
    DeviceMemory* memory;
    const void* host;
    size_t bytes;
  };
  const Piece pieces[] = {{&m.train_x, train.x.data(), train.x.size() * sizeof(float)},
                          {&m.train_y, train.y.data(), train.y.size() * sizeof(int32_t)},
                          {&m.val_x, validation.x.data(), validation.x.size() * sizeof(float)},
                          {&m.val_y, validation.y.data(), validation.y.size() * sizeof(int32_t)},
                          {&m.order, nullptr, train.y.size() * sizeof(int64_t)}};
  size_t data_bytes = 0;
  for (const Piece& p : pieces) data_bytes += p.bytes;
  const std::string data =
      "the data (" + std::to_string(train.rows() + validation.rows()) + " rows) beside the model";
  if (Status st = m.fits_device(m.model_bytes + data_bytes, data); !st.ok()) return st;
  for (const Piece& p : pieces) {
    auto made = DeviceMemory::allocate(m.context, p.bytes);
    if (!made.ok()) {  // it fits the GPU, but other processes hold memory: retryable
      return Status::Failed(data +
                            " does not fit in the GPU memory free now: " + made.status().message());
    }
    *p.memory = std::move(made).value();
    if (p.host)
      if (Status st = m.upload(*p.memory, p.host, p.bytes); !st.ok()) return st;
  }
  m.train_rows = train.rows();
  m.val_rows = validation.rows();
  return Status::Ok();
}

Status CudaMlpModel::set_order(std::span<const int64_t> order) {
  if (static_cast<int64_t>(order.size()) != impl_->train_rows)
    return Status::BadInput("order of the wrong size");
  return impl_->upload(impl_->order, order.data(), order.size_bytes());
}

// Layer by layer: y = x·W (cuBLAS), then y += b and ReLU (one kernel).
Status CudaMlpModel::forward(const float* input, int rows) {
  Impl& m = *impl_;
  m.batch_input = input;
  const float* x = input;
  for (int l = 0; l < shape_.linear_layers(); ++l) {
    const int in = shape_.width_in(l), out = shape_.width_out(l);
    const float* w = m.weights.floats() + m.offsets[static_cast<size_t>(l)];
    const float* bias = w + static_cast<size_t>(in) * out;
    float* y = m.activations[static_cast<size_t>(l)].floats();
    if (Status st =
            m.blas.sgemm(Op::kNone, Op::kNone, rows, out, in, 1.0f, x, in, w, out, 0.0f, y, out);
        !st.ok())
      return st;
    if (Status st = m.launch(kBiasForward, int64_t{rows} * out, y, bias, rows, out,
                             l < shape_.layers ? 1 : 0);
        !st.ok())
      return st;
    x = y;
  }
  return Status::Ok();
}

Status CudaMlpModel::loss(const int32_t* labels, int rows, float delta_scale, bool with_delta) {
  Impl& m = *impl_;
  const float* logits = m.activations.back().floats();
  float* delta = with_delta ? m.delta_a.floats() : nullptr;
  if (Status st = m.launch(kSoftmaxCrossEntropy, rows, logits, labels, rows, shape_.classes,
                           delta_scale, delta, m.row_loss.floats(), as<int32_t>(m.row_correct));
      !st.ok())
    return st;
  return m.launch_grid(kAccumulateStats, 1, kStatsThreads, m.row_loss.floats(),
                       as<const int32_t>(m.row_correct), rows, as<double>(m.stats),
                       as<int64_t>(m.stats) + 1);
}

// Mirrors MlpModel::backward; `delta` starts as ∂loss/∂logits in delta_a.
Status CudaMlpModel::backward(int rows, const LayerGradientsReady& on_ready) {
  Impl& m = *impl_;
  float* delta = m.delta_a.floats();
  float* next_delta = m.delta_b.floats();
  for (int l = shape_.layers; l >= 0; --l) {
    const int in = shape_.width_in(l), out = shape_.width_out(l);
    const float* x = l == 0 ? m.batch_input : m.activations[static_cast<size_t>(l - 1)].floats();
    const size_t offset = m.offsets[static_cast<size_t>(l)];
    float* grad_w = m.gradients.floats() + offset;
    // ∂W = xᵀ·δ, ∂b = Σ_rows δ.
    if (Status st = m.blas.sgemm(Op::kTranspose, Op::kNone, in, out, rows, 1.0f, x, in, delta, out,
                                 0.0f, grad_w, out);
        !st.ok())
      return st;
    if (Status st =
            m.launch(kSumRows, out, delta, rows, out, grad_w + static_cast<size_t>(in) * out);
        !st.ok())
      return st;
    if (on_ready) {
      // The collective reads the gradients on its own stream: they must be final first.
      if (Status st = m.stream.synchronize(); !st.ok()) return st;
      on_ready(l, std::span<float>(m.gradients.floats() + offset, shape_.layer_parameters(l)));
    }
    if (l == 0) break;
    // δ_prev = (δ·Wᵀ) ⊙ relu'(x).
    const float* w = m.weights.floats() + offset;
    if (Status st = m.blas.sgemm(Op::kNone, Op::kTranspose, rows, in, out, 1.0f, delta, out, w, out,
                                 0.0f, next_delta, in);
        !st.ok())
      return st;
    if (Status st = m.launch(kReluBackward, int64_t{rows} * in, next_delta, x,
                             static_cast<int64_t>(rows) * in);
        !st.ok())
      return st;
    std::swap(delta, next_delta);
  }
  return Status::Ok();
}

Status CudaMlpModel::train_batch(int64_t offset, int rows, int mean_over,
                                 const LayerGradientsReady& on_ready) {
  Impl& m = *impl_;
  if (rows < 0 || rows > max_rows_ || offset < 0 || offset + rows > m.train_rows)
    return Status::BadInput("batch out of range");
  if (Status st = m.context.make_current(); !st.ok()) return st;
  if (rows == 0) {
    if (Status st = m.zero(m.gradients, m.gradients.bytes()); !st.ok()) return st;
    if (on_ready) {
      if (Status st = m.stream.synchronize(); !st.ok()) return st;
      for (int l = shape_.layers; l >= 0; --l) {
        const size_t at = m.offsets[static_cast<size_t>(l)];
        on_ready(l, std::span<float>(m.gradients.floats() + at, shape_.layer_parameters(l)));
      }
    }
    return Status::Ok();
  }
  if (Status st = m.launch(kGatherRows, int64_t{rows} * shape_.inputs, m.train_x.floats(),
                           as<const int32_t>(m.train_y), as<const int64_t>(m.order), offset, rows,
                           shape_.inputs, m.input.floats(), as<int32_t>(m.labels));
      !st.ok())
    return st;
  if (Status st = forward(m.input.floats(), rows); !st.ok()) return st;
  const float scale = 1.0f / static_cast<float>(mean_over > 0 ? mean_over : rows);
  if (Status st = loss(as<const int32_t>(m.labels), rows, scale, true); !st.ok()) return st;
  return backward(rows, on_ready);
}

Status CudaMlpModel::optimizer_step() {
  Impl& m = *impl_;
  if (Status st = m.context.make_current(); !st.ok()) return st;
  ++steps_;
  const int64_t n = static_cast<int64_t>(shape_.parameters());
  float* w = m.weights.floats();
  const float* g = m.gradients.floats();
  if (optimizer_.kind == MlpOptimizerKind::kAdam) {
    const mlp_kernels::AdamConstants c = adam_constants(optimizer_, steps_);
    float* first = m.optimizer_state.floats();
    float* second = first + n;
    return m.launch(kAdam, n, w, first, second, g, n, c.beta1, c.beta2, c.epsilon, c.step_size,
                    c.inv_sqrt_bc2, c.shrink);
  }
  const float lr = static_cast<float>(optimizer_.lr);
  const float momentum = static_cast<float>(optimizer_.momentum);
  const float decay = static_cast<float>(optimizer_.weight_decay);
  if (momentum == 0.0f) return m.launch(kSgd, n, w, g, n, lr, decay);
  return m.launch(kSgdMomentum, n, w, m.optimizer_state.floats(), g, n, lr, momentum, decay);
}

Status CudaMlpModel::evaluate_batch(int64_t start, int rows) {
  Impl& m = *impl_;
  if (rows <= 0 || rows > max_rows_ || start < 0 || start + rows > m.val_rows)
    return Status::BadInput("validation batch out of range");
  if (Status st = m.context.make_current(); !st.ok()) return st;
  const float* x = m.val_x.floats() + start * shape_.inputs;
  if (Status st = forward(x, rows); !st.ok()) return st;
  return loss(as<const int32_t>(m.val_y) + start, rows, 1.0f, false);
}

Result<MlpBatchStats> CudaMlpModel::take_stats() {
  DeviceStats s{};
  if (Status st = impl_->download(&s, impl_->stats, sizeof(s)); !st.ok()) return st;
  if (Status st = impl_->zero(impl_->stats, sizeof(s)); !st.ok()) return st;
  return MlpBatchStats{.loss_sum = s.loss_sum, .correct = s.correct, .rows = s.rows};
}

Status CudaMlpModel::allreduce_host(Collective& collective, float* data, size_t n) {
  if (n > 2) return Status::BadInput("allreduce_host takes at most 2 floats");
  if (Status st = impl_->upload(impl_->scratch, data, n * sizeof(float)); !st.ok()) return st;
  if (Status st = collective.allreduce_sum(impl_->scratch.floats(), n); !st.ok()) return st;
  return impl_->download(data, impl_->scratch, n * sizeof(float));
}

}  // namespace cairn
