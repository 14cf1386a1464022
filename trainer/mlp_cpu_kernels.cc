#include "trainer/mlp_cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// Why the loops are written in blocks: the project builds with -O2, where GCC vectorises a
// loop only when its trip count is a known multiple of the vector width. A fixed-size inner
// loop over kBlock elements qualifies; the scalar tail handles the rest. Element-wise
// arithmetic gives the same bits either way.
namespace cairn::mlp_kernels {
namespace {

constexpr size_t kBlock = 16;

inline size_t whole_blocks(size_t n) {
  return n - n % kBlock;
}

}  // namespace

void relu(float* __restrict x, size_t n) {
  const size_t blocked = whole_blocks(n);
  for (size_t i = 0; i < blocked; i += kBlock) {
    for (size_t k = 0; k < kBlock; ++k) x[i + k] = x[i + k] > 0.0f ? x[i + k] : 0.0f;
  }
  for (size_t j = blocked; j < n; ++j) x[j] = x[j] > 0.0f ? x[j] : 0.0f;
}

void relu_backward(float* __restrict delta, const float* __restrict activation, size_t n) {
  const size_t blocked = whole_blocks(n);
  for (size_t i = 0; i < blocked; i += kBlock) {
    for (size_t k = 0; k < kBlock; ++k) {
      delta[i + k] = activation[i + k] > 0.0f ? delta[i + k] : 0.0f;
    }
  }
  for (size_t j = blocked; j < n; ++j) delta[j] = activation[j] > 0.0f ? delta[j] : 0.0f;
}

void sum_rows(const float* __restrict x, size_t rows, size_t cols, float* __restrict out) {
  std::fill(out, out + cols, 0.0f);
  const size_t blocked = whole_blocks(cols);
  for (size_t r = 0; r < rows; ++r) {
    const float* __restrict row = x + r * cols;
    for (size_t i = 0; i < blocked; i += kBlock) {
      for (size_t k = 0; k < kBlock; ++k) out[i + k] += row[i + k];
    }
    for (size_t c = blocked; c < cols; ++c) out[c] += row[c];
  }
}

void broadcast_rows(const float* bias, size_t rows, size_t cols, float* out) {
  for (size_t r = 0; r < rows; ++r) std::memcpy(out + r * cols, bias, sizeof(float) * cols);
}

// Per row: loss = logsumexp(z) − z[label], computed around max(z) so exp never overflows.
CrossEntropy softmax_cross_entropy(const float* logits, const int32_t* labels, size_t rows,
                                   size_t classes, float delta_scale, float* delta) {
  CrossEntropy result;
  for (size_t r = 0; r < rows; ++r) {
    const float* z = logits + r * classes;
    const size_t label = static_cast<size_t>(labels[r]);
    const size_t argmax = static_cast<size_t>(std::max_element(z, z + classes) - z);
    const float max = z[argmax];
    float sum = 0;
    for (size_t c = 0; c < classes; ++c) sum += std::exp(z[c] - max);
    result.loss_sum += static_cast<double>(std::log(sum) + max - z[label]);
    result.correct += argmax == label ? 1 : 0;
    if (delta == nullptr) continue;
    float* d = delta + r * classes;
    const float scale = delta_scale / sum;
    for (size_t c = 0; c < classes; ++c) d[c] = std::exp(z[c] - max) * scale;
    d[label] -= delta_scale;
  }
  return result;
}

void sgd_update(float* __restrict w, const float* __restrict g, size_t n, float lr, float decay) {
  const size_t blocked = whole_blocks(n);
  for (size_t i = 0; i < blocked; i += kBlock) {
    for (size_t k = 0; k < kBlock; ++k) w[i + k] -= lr * (g[i + k] + decay * w[i + k]);
  }
  for (size_t j = blocked; j < n; ++j) w[j] -= lr * (g[j] + decay * w[j]);
}

namespace {
inline void momentum_step(float* __restrict w, float* __restrict v, const float* __restrict g,
                          size_t j, float lr, float momentum, float decay) {
  v[j] = momentum * v[j] + (g[j] + decay * w[j]);
  w[j] -= lr * v[j];
}
}  // namespace

void sgd_momentum_update(float* __restrict w, float* __restrict v, const float* __restrict g,
                         size_t n, float lr, float momentum, float decay) {
  const size_t blocked = whole_blocks(n);
  for (size_t i = 0; i < blocked; i += kBlock) {
    for (size_t k = 0; k < kBlock; ++k) momentum_step(w, v, g, i + k, lr, momentum, decay);
  }
  for (size_t j = blocked; j < n; ++j) momentum_step(w, v, g, j, lr, momentum, decay);
}

#if defined(__SSE2__)
namespace {

struct AdamLanes {
  explicit AdamLanes(const AdamConstants& c)
      : beta1(_mm_set1_ps(c.beta1)),
        one_minus_beta1(_mm_set1_ps(1.0f - c.beta1)),
        beta2(_mm_set1_ps(c.beta2)),
        one_minus_beta2(_mm_set1_ps(1.0f - c.beta2)),
        epsilon(_mm_set1_ps(c.epsilon)),
        step_size(_mm_set1_ps(c.step_size)),
        inv_sqrt_bc2(_mm_set1_ps(c.inv_sqrt_bc2)),
        shrink(_mm_set1_ps(c.shrink)) {}
  __m128 beta1, one_minus_beta1, beta2, one_minus_beta2, epsilon, step_size, inv_sqrt_bc2, shrink;
};

// Four parameters at a time, in SSE2 intrinsics because std::sqrt keeps a scalar errno path
// that stops GCC from vectorising at our flags (and intrinsics are never FMA-contracted).
inline void adam_four(float* w, float* m, float* v, const float* g, const AdamLanes& c) {
  const __m128 grad = _mm_loadu_ps(g);
  const __m128 m1 =
      _mm_add_ps(_mm_mul_ps(c.beta1, _mm_loadu_ps(m)), _mm_mul_ps(c.one_minus_beta1, grad));
  const __m128 v1 = _mm_add_ps(_mm_mul_ps(c.beta2, _mm_loadu_ps(v)),
                               _mm_mul_ps(_mm_mul_ps(c.one_minus_beta2, grad), grad));
  const __m128 denom = _mm_add_ps(_mm_mul_ps(_mm_sqrt_ps(v1), c.inv_sqrt_bc2), c.epsilon);
  const __m128 w1 = _mm_sub_ps(_mm_mul_ps(_mm_loadu_ps(w), c.shrink),
                               _mm_div_ps(_mm_mul_ps(c.step_size, m1), denom));
  _mm_storeu_ps(m, m1);
  _mm_storeu_ps(v, v1);
  _mm_storeu_ps(w, w1);
}

}  // namespace

// The tail (< 4 parameters) goes through the same four-lane code, zero-padded, so every
// parameter gets the same bits wherever a bucket boundary puts it.
void adam_update(float* w, float* m, float* v, const float* g, size_t n, const AdamConstants& c) {
  const AdamLanes lanes(c);
  size_t j = 0;
  for (; j + 4 <= n; j += 4) adam_four(w + j, m + j, v + j, g + j, lanes);
  if (j == n) return;
  float tw[4] = {}, tm[4] = {}, tv[4] = {}, tg[4] = {};
  const size_t tail = n - j;
  std::copy_n(w + j, tail, tw);
  std::copy_n(m + j, tail, tm);
  std::copy_n(v + j, tail, tv);
  std::copy_n(g + j, tail, tg);
  adam_four(tw, tm, tv, tg, lanes);
  std::copy_n(tw, tail, w + j);
  std::copy_n(tm, tail, m + j);
  std::copy_n(tv, tail, v + j);
}
#else
void adam_update(float* __restrict w, float* __restrict m, float* __restrict v,
                 const float* __restrict g, size_t n, const AdamConstants& c) {
  for (size_t j = 0; j < n; ++j) {
    m[j] = c.beta1 * m[j] + (1.0f - c.beta1) * g[j];
    v[j] = c.beta2 * v[j] + (1.0f - c.beta2) * g[j] * g[j];
    const float denom = std::sqrt(v[j]) * c.inv_sqrt_bc2 + c.epsilon;
    w[j] = w[j] * c.shrink - c.step_size * m[j] / denom;
  }
}
#endif

}  // namespace cairn::mlp_kernels
