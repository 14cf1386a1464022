#include "trainer/blas.h"

#include <cblas.h>

#include <cstdlib>
#include <thread>

namespace cairn::blas {
namespace {

CBLAS_TRANSPOSE to_cblas(Op op) {
  return op == Op::kTranspose ? CblasTrans : CblasNoTrans;
}

int positive_env_int(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr) return 0;
  const int value = std::atoi(text);
  return value > 0 ? value : 0;
}

int default_threads() {
  if (int n = positive_env_int("OPENBLAS_NUM_THREADS")) return n;
  if (int n = positive_env_int("OMP_NUM_THREADS")) return n;
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 0 ? static_cast<int>(cores) : 1;
}

}  // namespace

void sgemm(Op op_a, Op op_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, to_cblas(op_a), to_cblas(op_b), m, n, k, alpha, a, lda, b, ldb, beta,
              c, ldc);
}

void set_threads(int threads) {
  openblas_set_num_threads(threads > 0 ? threads : default_threads());
}

int threads() {
  return openblas_get_num_threads();
}

std::string core_in_use() {
  const char* name = openblas_get_corename();
  return name != nullptr ? name : "";
}

std::string config() {
  const char* text = openblas_get_config();
  return text != nullptr ? text : "";
}

}  // namespace cairn::blas
