#include "trainer/mlp_model.h"

#include <algorithm>
#include <cmath>

#include "trainer/blas.h"
#include "trainer/mlp_cpu_kernels.h"
#include "trainer/mlp_random.h"

namespace cairn {
namespace {

using blas::Op;

MlpBatchStats cross_entropy(const float* logits, const int32_t* labels, int rows, int classes,
                            float* delta, int mean_over) {
  // delta is the gradient of the loss averaged over `mean_over` rows, hence the scale.
  const mlp_kernels::CrossEntropy ce = mlp_kernels::softmax_cross_entropy(
      logits, labels, rows, classes, 1.0f / static_cast<float>(mean_over), delta);
  return MlpBatchStats{.loss_sum = ce.loss_sum, .correct = ce.correct, .rows = rows};
}

}  // namespace

size_t MlpShape::layer_parameters(int layer) const {
  return static_cast<size_t>(width_in(layer)) * width_out(layer) + width_out(layer);
}

size_t MlpShape::parameters() const {
  size_t total = 0;
  for (int l = 0; l < linear_layers(); ++l) total += layer_parameters(l);
  return total;
}

std::string MlpShape::describe() const {
  std::string text = std::to_string(inputs);
  for (int l = 0; l < linear_layers(); ++l) text += "→" + std::to_string(width_out(l));
  return text;
}

MlpWorkspace::MlpWorkspace(const MlpShape& shape, int max_rows)
    : max_rows_(max_rows), labels_(max_rows) {
  const size_t rows = static_cast<size_t>(max_rows);
  activations_.emplace_back(rows * shape.inputs);
  int widest = shape.classes;
  for (int l = 0; l < shape.linear_layers(); ++l) {
    activations_.emplace_back(rows * shape.width_out(l));
    widest = std::max(widest, shape.width_out(l));
  }
  delta_a_.resize(rows * widest);
  delta_b_.resize(rows * widest);
}

MlpModel::MlpModel(const MlpShape& shape) : shape_(shape) {
  size_t offset = 0;
  for (int l = 0; l < shape.linear_layers(); ++l) {
    offsets_.push_back(offset);
    offset += shape.layer_parameters(l);
  }
  weights_.assign(offset, 0.0f);
  gradients_.assign(offset, 0.0f);
}

void MlpModel::initialize(uint64_t seed) {
  MlpRng rng(derive_seed(seed, MlpStream::kWeightInit));
  for (int l = 0; l < shape_.linear_layers(); ++l) {
    const size_t fan_in = shape_.width_in(l);
    const double gain = l == shape_.layers ? 1.0 : 2.0;
    const double stddev = std::sqrt(gain / static_cast<double>(fan_in));
    float* w = weights_.data() + offsets_[l];
    const size_t count = fan_in * shape_.width_out(l);
    for (size_t i = 0; i < count; ++i) w[i] = static_cast<float>(stddev * rng.normal());
    std::fill(w + count, w + count + shape_.width_out(l), 0.0f);
  }
}

std::span<float> MlpModel::layer_gradients(int layer) {
  return std::span<float>(gradients_).subspan(offsets_[layer], shape_.layer_parameters(layer));
}

float* MlpModel::forward(MlpWorkspace& ws, int rows) const {
  for (int l = 0; l < shape_.linear_layers(); ++l) {
    const int in = shape_.width_in(l);
    const int out = shape_.width_out(l);
    const float* w = layer_weights(l);
    const float* bias = w + static_cast<size_t>(in) * out;
    float* y = ws.activations_[l + 1].data();
    // y = broadcast(b), then y += x·W in the same sgemm (beta = 1).
    mlp_kernels::broadcast_rows(bias, rows, out, y);
    blas::sgemm(Op::kNone, Op::kNone, rows, out, in, 1.0f, ws.activations_[l].data(), in, w, out,
                1.0f, y, out);
    if (l < shape_.layers) mlp_kernels::relu(y, static_cast<size_t>(rows) * out);
  }
  return ws.activations_.back().data();
}

MlpBatchStats MlpModel::forward_backward(MlpWorkspace& ws, int rows,
                                         const LayerGradientsReady& on_ready, int mean_over) {
  if (rows == 0) {
    std::fill(gradients_.begin(), gradients_.end(), 0.0f);
    for (int l = shape_.layers; l >= 0; --l)
      if (on_ready) on_ready(l, layer_gradients(l));
    return MlpBatchStats{};
  }
  const float* logits = forward(ws, rows);
  const MlpBatchStats stats = cross_entropy(logits, ws.labels(), rows, shape_.classes,
                                            ws.delta_a_.data(), mean_over > 0 ? mean_over : rows);
  backward(ws, rows, on_ready);
  return stats;
}

MlpBatchStats MlpModel::evaluate(MlpWorkspace& ws, int rows) const {
  const float* logits = forward(ws, rows);
  return cross_entropy(logits, ws.labels(), rows, shape_.classes, nullptr, rows);
}

// Walks the layers from the output back. `delta` holds ∂loss/∂(layer output before ReLU).
void MlpModel::backward(MlpWorkspace& ws, int rows, const LayerGradientsReady& on_ready) {
  float* delta = ws.delta_a_.data();
  float* next_delta = ws.delta_b_.data();
  for (int l = shape_.layers; l >= 0; --l) {
    const int in = shape_.width_in(l);
    const int out = shape_.width_out(l);
    const float* x = ws.activations_[l].data();
    float* grad_w = gradients_.data() + offsets_[l];
    // ∂W = xᵀ·δ, ∂b = Σ_rows δ.
    blas::sgemm(Op::kTranspose, Op::kNone, in, out, rows, 1.0f, x, in, delta, out, 0.0f, grad_w,
                out);
    mlp_kernels::sum_rows(delta, rows, out, grad_w + static_cast<size_t>(in) * out);
    if (on_ready) on_ready(l, layer_gradients(l));
    if (l == 0) break;  // nothing needs ∂loss/∂input
    // δ_prev = (δ·Wᵀ) ⊙ relu'(x).
    blas::sgemm(Op::kNone, Op::kTranspose, rows, in, out, 1.0f, delta, out, layer_weights(l), out,
                0.0f, next_delta, in);
    mlp_kernels::relu_backward(next_delta, x, static_cast<size_t>(rows) * in);
    std::swap(delta, next_delta);
  }
}

}  // namespace cairn
