// cuBLAS, loaded with dlopen (libcublas.so.13, .12, or unversioned) on first use and never
// linked. Only what builtin:mlp needs: a handle bound to a stream, and sgemm.
//
// Row-major vs column-major: cairn keeps matrices row-major (as the CPU's trainer/blas.h does);
// cuBLAS is column-major. A row-major M×N matrix with row stride ld is, byte for byte, the
// column-major N×M matrix (its transpose) with leading dimension ld. So the row-major
//   C = op(A)·op(B)           (C is m×n)
// is computed as the column-major
//   Cᵀ = op(B)ᵀ·op(A)ᵀ        (Cᵀ is n×m)
// i.e. cublasSgemm(op_b, op_a, n, m, k, B, ldb, A, lda, C, ldc): swap the operands and the
// outer dimensions, keep the ops and leading dimensions. to_column_major() does exactly
// this and is unit-tested against OpenBLAS without a GPU.
//
// Determinism: cuBLAS gives the same bits run after run for the same library version,
// architecture, SM count and stream (its documented guarantee); this module uses one
// stream per handle. The math mode is left at CUBLAS_DEFAULT_MATH, which does not use TF32
// for sgemm unless NVIDIA_TF32_OVERRIDE=1 is set in the environment.
//
// NOTE: written on a machine without a GPU; the real library loads and reports its version
// there, but no real sgemm has run yet (tests/fake_cuda's emulation stands in).
#pragma once

#include <memory>

#include "common/status.h"
#include "gpu/cuda_driver.h"

namespace cairn::cublas {

// Whether an operand is used as stored or transposed. cuBLAS's own (cublasOperation_t) is
// not declared here, since cuBLAS's headers are not needed to build cairn.
enum class Op { kNone, kTranspose };

struct Info {
  Status status = Status::NotFound("cuBLAS not found (libcublas.so.13 or .12)");
  int major = 0, minor = 0, patch = 0;  // cublasGetProperty
};
const Info& info();

// The column-major call equivalent to a row-major sgemm (see the top of this file).
struct ColumnMajorGemm {
  Op op_a, op_b;
  int m, n, k;
  const float* a;
  int lda;
  const float* b;
  int ldb;
  float* c;
  int ldc;
};
ColumnMajorGemm to_column_major(Op op_a, Op op_b, int m, int n, int k, const float* a, int lda,
                                const float* b, int ldb, float* c, int ldc);

// A cuBLAS handle whose work goes to one stream. The context and stream must outlive it.
class Handle {
 public:
  static Result<Handle> create(const cuda::Context& context, const cuda::Stream& stream);
  Handle() = default;
  Handle(Handle&& other) noexcept { *this = std::move(other); }
  Handle& operator=(Handle&& other) noexcept;
  ~Handle();

  // Row-major, the same contract as blas::sgemm, on device pointers; enqueued on the
  // handle's stream (returns before the product is computed).
  Status sgemm(Op op_a, Op op_b, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc) const;

 private:
  void reset();
  cuda::CUcontext context_ = nullptr;
  void* handle_ = nullptr;
};

}  // namespace cairn::cublas
