// A host emulation of the slice of cuBLAS cairn uses (gpu/cublas.h), built as
// libcublas.so.13 for tests only (see fake_cuda.cc). cublasSgemm_v2 is BLAS's column-major
// definition written out as loops, independent of gpu/cublas.cc's row-major mapping, so
// a wrong mapping gives wrong products here as it would on a GPU. The product runs on the
// handle's stream when that stream is synchronised (fake_stream.h), as on a GPU.
#include <cstddef>

#include "tests/fake_cuda/fake_stream.h"

namespace {

struct Handle {
  void* stream = nullptr;
};

// C = alpha·op(A)·op(B) + beta·C, column-major; op 0 = N, 1 = T.
void sgemm(int transa, int transb, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc) {
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      float sum = 0;
      for (int p = 0; p < k; ++p) {
        const float x =
            transa ? a[p + static_cast<size_t>(i) * lda] : a[i + static_cast<size_t>(p) * lda];
        const float y =
            transb ? b[j + static_cast<size_t>(p) * ldb] : b[p + static_cast<size_t>(j) * ldb];
        sum += x * y;
      }
      float& out = c[i + static_cast<size_t>(j) * ldc];
      // beta == 0 must ignore C (it may hold garbage), as BLAS specifies.
      out = beta == 0.0f ? alpha * sum : alpha * sum + beta * out;
    }
  }
}

}  // namespace

extern "C" {

using cublasStatus_t = int;
constexpr cublasStatus_t kOk = 0;
constexpr cublasStatus_t kInvalidValue = 7;  // CUBLAS_STATUS_INVALID_VALUE

cublasStatus_t cublasCreate_v2(void** handle) {
  *handle = new Handle;
  return kOk;
}
cublasStatus_t cublasDestroy_v2(void* handle) {
  delete static_cast<Handle*>(handle);
  return kOk;
}
cublasStatus_t cublasSetStream_v2(void* handle, void* stream) {
  static_cast<Handle*>(handle)->stream = stream;
  return kOk;
}
cublasStatus_t cublasGetProperty(int type, int* value) {
  *value = type == 0 ? 13 : 0;
  return kOk;
}
const char* cublasGetStatusString(cublasStatus_t s) {
  return s == kOk ? "CUBLAS_STATUS_SUCCESS" : "fake cuBLAS error";
}

// Checks the leading dimensions as cuBLAS does, then enqueues the product on the handle's
// stream; alpha and beta are read now (host pointer mode).
cublasStatus_t cublasSgemm_v2(void* handle, int transa, int transb, int m, int n, int k,
                              const float* alpha, const float* a, int lda, const float* b, int ldb,
                              const float* beta, float* c, int ldc) {
  if (m < 0 || n < 0 || k < 0 || ldc < (m > 1 ? m : 1) ||
      lda < ((transa ? k : m) > 1 ? (transa ? k : m) : 1) ||
      ldb < ((transb ? n : k) > 1 ? (transb ? n : k) : 1))
    return kInvalidValue;
  fake_cuda_enqueue(static_cast<Handle*>(handle)->stream, [=, alpha = *alpha, beta = *beta] {
    sgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  });
  return kOk;
}

}  // extern "C"
