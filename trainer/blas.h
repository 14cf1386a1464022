// The one door to dense linear algebra: OpenBLAS's sgemm, row-major, plus control of its
// thread pool. Everything that multiplies matrices goes through here so a GPU or another
// BLAS can be slotted in at one place.
#pragma once

#include <string>

namespace cairn::blas {

enum class Op { kNone, kTranspose };

// C[m×n] = alpha · op(A)[m×k] · op(B)[k×n] + beta · C, all row-major. lda/ldb/ldc are the
// row strides of A, B and C as stored (before op is applied).
// REQUIRES: m, n, k >= 0; the pointers cover the sizes implied above.
void sgemm(Op op_a, Op op_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc);

// Threads OpenBLAS may use for one call. The setting is process-wide (OpenBLAS keeps one
// pool), which is fine because a trainer runs in its own process. 0 restores the default:
// OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS, else every core.
void set_threads(int threads);
int threads();

// The kernel set ("core type") OpenBLAS runs in this process, as it names it: "Haswell",
// "SkylakeX", "Prescott", … (trainer/blas_core_type.h says how builtin:mlp's is chosen).
std::string core_in_use();

// OpenBLAS's build description: "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH … Haswell …".
std::string config();

}  // namespace cairn::blas
