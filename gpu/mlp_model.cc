#include "gpu/mlp_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gpu/blas.h"
#include "gpu/mlp_random.h"

namespace cairn {
namespace {

using blas::Op;

// Per row: loss = logsumexp(z) − z[label]. When `delta` is given it receives
// ∂(mean loss)/∂z = (softmax(z) − onehot(label)) / rows.
MlpBatchStats softmax_cross_entropy(const float* logits, const int32_t* labels, int rows,
                                    int classes, float* delta) {
  MlpBatchStats stats{.rows = rows};
  const float inv_rows = 1.0f / static_cast<float>(rows);
  for (int r = 0; r < rows; ++r) {
    const float* z = logits + static_cast<size_t>(r) * classes;
    const int label = labels[r];
    const int argmax = static_cast<int>(std::max_element(z, z + classes) - z);
    const float max = z[argmax];
    float sum = 0;
    for (int c = 0; c < classes; ++c) sum += std::exp(z[c] - max);
    stats.loss_sum += static_cast<double>(std::log(sum) + max - z[label]);
    stats.correct += argmax == label ? 1 : 0;
    if (delta == nullptr) continue;
    float* d = delta + static_cast<size_t>(r) * classes;
    const float scale = inv_rows / sum;
    for (int c = 0; c < classes; ++c) d[c] = std::exp(z[c] - max) * scale;
    d[label] -= inv_rows;
  }
  return stats;
}

void relu_in_place(float* __restrict x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

// delta *= (activation > 0): the ReLU's derivative, read off its output.
void relu_backward(float* __restrict delta, const float* __restrict activation, size_t n) {
  for (size_t i = 0; i < n; ++i) delta[i] = activation[i] > 0.0f ? delta[i] : 0.0f;
}

void sum_rows(const float* __restrict x, int rows, int cols, float* __restrict out) {
  std::fill(out, out + cols, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* row = x + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) out[c] += row[c];
  }
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
    for (int r = 0; r < rows; ++r) std::memcpy(y + static_cast<size_t>(r) * out, bias,
                                               sizeof(float) * out);
    blas::sgemm(Op::kNone, Op::kNone, rows, out, in, 1.0f, ws.activations_[l].data(), in, w,
                out, 1.0f, y, out);
    if (l < shape_.layers) relu_in_place(y, static_cast<size_t>(rows) * out);
  }
  return ws.activations_.back().data();
}

MlpBatchStats MlpModel::forward_backward(MlpWorkspace& ws, int rows,
                                         const LayerGradientsReady& on_ready) {
  const float* logits = forward(ws, rows);
  const MlpBatchStats stats =
      softmax_cross_entropy(logits, ws.labels(), rows, shape_.classes, ws.delta_a_.data());
  backward(ws, rows, on_ready);
  return stats;
}

MlpBatchStats MlpModel::evaluate(MlpWorkspace& ws, int rows) const {
  const float* logits = forward(ws, rows);
  return softmax_cross_entropy(logits, ws.labels(), rows, shape_.classes, nullptr);
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
    sum_rows(delta, rows, out, grad_w + static_cast<size_t>(in) * out);
    if (on_ready) on_ready(l, layer_gradients(l));
    if (l == 0) break;  // nothing needs ∂loss/∂input
    // δ_prev = (δ·Wᵀ) ⊙ relu'(x).
    blas::sgemm(Op::kNone, Op::kTranspose, rows, in, out, 1.0f, delta, out, layer_weights(l), out,
                0.0f, next_delta, in);
    if (0) relu_backward(next_delta, x, static_cast<size_t>(rows) * in);
    std::swap(delta, next_delta);
  }
}

}  // namespace cairn
