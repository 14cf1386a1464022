// The built-in trainer's element-wise CPU kernels: everything that is not a matrix product.
// Each is a plain loop whose result does not depend on how it is vectorised, so the CPU
// path stays bit-reproducible; the CUDA path will mirror these one for one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cairn::mlp_kernels {

// x = max(x, 0).
void relu(float* x, size_t n);
// delta = activation > 0 ? delta : 0 (the ReLU derivative, read off the ReLU's output).
void relu_backward(float* delta, const float* activation, size_t n);
// out[c] = Σ_r x[r][c] for a rows × cols row-major matrix, summing rows in order.
void sum_rows(const float* x, size_t rows, size_t cols, float* out);
// out[r][·] = bias for every row.
void broadcast_rows(const float* bias, size_t rows, size_t cols, float* out);

// Softmax cross-entropy over rows of logits; see MlpModel. When `delta` is not null it
// receives (softmax − onehot) · delta_scale.
struct CrossEntropy {
  double loss_sum = 0;
  int64_t correct = 0;
};
CrossEntropy softmax_cross_entropy(const float* logits, const int32_t* labels, size_t rows,
                                   size_t classes, float delta_scale, float* delta);

// w -= lr · (g + decay · w)
void sgd_update(float* w, const float* g, size_t n, float lr, float decay);
// v = momentum · v + (g + decay · w);  w -= lr · v
void sgd_momentum_update(float* w, float* v, const float* g, size_t n, float lr, float momentum,
                         float decay);
// AdamW with precomputed bias corrections:
//   m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²
//   w = w·shrink − step_size · m / (√v · inv_sqrt_bc2 + ε)
struct AdamConstants {
  float beta1, beta2, epsilon, step_size, inv_sqrt_bc2, shrink;
};
void adam_update(float* w, float* m, float* v, const float* g, size_t n, const AdamConstants& c);

}  // namespace cairn::mlp_kernels
