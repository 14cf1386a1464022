// builtin:mlp's CUDA kernels: everything of the GPU path that is not a matrix product
// (those go to cuBLAS). This file is not compiled when cairn is built: CMake embeds it in
// the binary as the string kMlpCudaKernels (CAIRN_EMBEDDED in CMakeLists.txt), and
// trainer/mlp_cuda_model.cc compiles it at run time with NVRTC for the GPU present, with
// --fmad=false. So it may use nothing but the CUDA language and NVRTC's built-in
// definitions: no #include.
//
// Each kernel mirrors a function of trainer/mlp_cpu_kernels.cc and says which. The optimizer
// updates do the same float operations in the same order as the CPU's (no FMA contraction,
// IEEE sqrt and division, which are NVRTC's defaults), so given the same inputs they give
// the same bits. Softmax uses CUDA's expf/logf, which differ from glibc's by an ulp or two.
// Every reduction has an order fixed by its sizes only (no atomics), so a run repeats
// bit for bit on the same GPU.
//
// NOTE: no kernel here has run on a GPU yet. Tests compile them with NVRTC, and run them
// compiled as host C++ (tests/unit/mlp_cuda_kernels_host_test.cc, tests/fake_cuda), which
// checks their logic but not their behaviour on a device.

typedef long long i64;

#define GRID_STRIDE(i, n)                                           \
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
       i += (i64)blockDim.x * gridDim.x)

extern "C" {

// x_batch[r][·] = x[order[offset + r]][·], y_batch[r] = y[order[offset + r]]: assembles a
// batch from the training split, which stays on the device for the whole trial.
// (MlpTrainer::gather_batch on the CPU.)
__global__ void mlp_gather_rows(const float* x, const int* y, const i64* order, i64 offset,
                                int rows, int features, float* x_batch, int* y_batch) {
  const i64 n = (i64)rows * features;
  GRID_STRIDE(i, n) {
    const i64 r = i / features;
    const i64 c = i - r * features;
    const i64 src = order[offset + r];
    x_batch[i] = x[src * features + c];
    if (c == 0) y_batch[r] = y[src];
  }
}

// y[r][c] += bias[c], then max(y, 0) when relu: the bias and activation after cuBLAS has
// written y = x·W. (broadcast_rows + sgemm with beta 1 + relu on the CPU, which adds the
// bias before the product instead of after: the sums round differently.)
__global__ void mlp_bias_forward(float* y, const float* bias, int rows, int cols, int relu) {
  const i64 n = (i64)rows * cols;
  GRID_STRIDE(i, n) {
    const float v = y[i] + bias[i % cols];
    y[i] = relu && !(v > 0.0f) ? 0.0f : v;
  }
}

// delta = activation > 0 ? delta : 0. (relu_backward)
__global__ void mlp_relu_backward(float* delta, const float* activation, i64 n) {
  GRID_STRIDE(i, n) {
    if (!(activation[i] > 0.0f)) delta[i] = 0.0f;
  }
}

// out[c] = Σ_r x[r][c], rows summed in order by one thread per column: the bias gradient.
// (sum_rows, the same order.) Columns are few (the layer width) and rows a batch, so this
// uses only `cols` threads; a two-level fixed-order sum would be faster for wide batches.
__global__ void mlp_sum_rows(const float* x, int rows, int cols, float* out) {
  GRID_STRIDE(c, (i64)cols) {
    float sum = 0.0f;
    for (int r = 0; r < rows; ++r) sum += x[(i64)r * cols + c];
    out[c] = sum;
  }
}

// Per row: loss = log Σ exp(z − max) + max − z[label], correct = (first argmax == label),
// and when delta is not null, delta = (softmax − onehot) · delta_scale. One thread per row.
// (softmax_cross_entropy; the totals are summed by mlp_accumulate_stats.)
__global__ void mlp_softmax_cross_entropy(const float* logits, const int* labels, int rows,
                                          int classes, float delta_scale, float* delta,
                                          float* row_loss, int* row_correct) {
  GRID_STRIDE(r, (i64)rows) {
    const float* z = logits + r * classes;
    const int label = labels[r];
    int argmax = 0;
    for (int c = 1; c < classes; ++c)
      if (z[c] > z[argmax]) argmax = c;
    const float max = z[argmax];
    float sum = 0.0f;
    for (int c = 0; c < classes; ++c) sum += expf(z[c] - max);
    row_loss[r] = logf(sum) + max - z[label];
    row_correct[r] = argmax == label ? 1 : 0;
    if (delta != 0) {
      float* d = delta + r * classes;
      const float scale = delta_scale / sum;
      for (int c = 0; c < classes; ++c) d[c] = expf(z[c] - max) * scale;
      d[label] -= delta_scale;
    }
  }
}

// totals[0] += Σ row_loss (in double), counts[0] += Σ row_correct. One block of
// kStatsThreads threads: each sums a fixed stride of rows, then a fixed tree; the order
// depends on `rows` only, so the result repeats bit for bit. Accumulates across batches so
// the host reads the totals once per epoch instead of synchronising every batch.
#define kStatsThreads 256
__global__ void mlp_accumulate_stats(const float* row_loss, const int* row_correct, int rows,
                                     double* totals, i64* counts) {
  __shared__ double loss[kStatsThreads];
  __shared__ i64 correct[kStatsThreads];
  const int t = threadIdx.x;
  double l = 0.0;
  i64 k = 0;
  for (int r = t; r < rows; r += kStatsThreads) {
    l += (double)row_loss[r];
    k += row_correct[r];
  }
  loss[t] = l;
  correct[t] = k;
  __syncthreads();
  for (int half = kStatsThreads / 2; half > 0; half /= 2) {
    if (t < half) {
      loss[t] += loss[t + half];
      correct[t] += correct[t + half];
    }
    __syncthreads();
  }
  if (t == 0) {
    totals[0] += loss[0];
    counts[0] += correct[0];
    counts[1] += rows;
  }
}

// w -= lr · (g + decay · w). (sgd_update)
__global__ void mlp_sgd(float* w, const float* g, i64 n, float lr, float decay) {
  GRID_STRIDE(i, n) {
    w[i] -= lr * (g[i] + decay * w[i]);
  }
}

// v = momentum · v + (g + decay · w); w -= lr · v. (sgd_momentum_update)
__global__ void mlp_sgd_momentum(float* w, float* v, const float* g, i64 n, float lr,
                                 float momentum, float decay) {
  GRID_STRIDE(i, n) {
    const float vi = momentum * v[i] + (g[i] + decay * w[i]);
    v[i] = vi;
    w[i] -= lr * vi;
  }
}

// AdamW with the bias corrections precomputed on the host (adam_update, whose SSE code does
// these operations in this order):
//   m = β1·m + (1−β1)·g;  v = β2·v + ((1−β2)·g)·g
//   w = w·shrink − (step_size·m) / (√v·inv_sqrt_bc2 + ε)
__global__ void mlp_adam(float* w, float* m, float* v, const float* g, i64 n, float beta1,
                         float beta2, float epsilon, float step_size, float inv_sqrt_bc2,
                         float shrink) {
  const float one_minus_beta1 = 1.0f - beta1;
  const float one_minus_beta2 = 1.0f - beta2;
  GRID_STRIDE(i, n) {
    const float grad = g[i];
    const float m1 = beta1 * m[i] + one_minus_beta1 * grad;
    const float v1 = beta2 * v[i] + (one_minus_beta2 * grad) * grad;
    const float denom = sqrtf(v1) * inv_sqrt_bc2 + epsilon;
    m[i] = m1;
    v[i] = v1;
    w[i] = w[i] * shrink - (step_size * m1) / denom;
  }
}

}  // extern "C"
