#include "gpu/cublas.h"

#include "gpu/shared_library.h"

#include <utility>

namespace cairn::cublas {
namespace {

// The slice of cublas_api.h used here (the _v2 API, stable since CUDA 4).
using cublasStatus_t = int;
using cublasHandle_t = void*;
constexpr cublasStatus_t kSuccess = 0;
constexpr int kOpN = 0;                                               // CUBLAS_OP_N
constexpr int kOpT = 1;                                               // CUBLAS_OP_T
constexpr int kMajorVersion = 0, kMinorVersion = 1, kPatchLevel = 2;  // libraryPropertyType

struct Api {
  cublasStatus_t (*cublasCreate)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*cublasDestroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*cublasSetStream)(cublasHandle_t, cuda::CUstream) = nullptr;
  cublasStatus_t (*cublasSgemm)(cublasHandle_t, int, int, int, int, int, const float*, const float*,
                                int, const float*, int, const float*, float*, int) = nullptr;
  cublasStatus_t (*cublasGetProperty)(int, int*) = nullptr;
  const char* (*cublasGetStatusString)(cublasStatus_t) = nullptr;  // optional (11.4+)
  Info info;
};

// Never unloaded: cuBLAS registers state with the CUDA runtime it carries.
Api load() {
  Api a;
  void* lib = cuda::open_per_cuda_version("cublas");
  if (!lib) return a;
  gpu_lib::Binder bind(lib);
  bind("cublasCreate_v2", a.cublasCreate);
  bind("cublasDestroy_v2", a.cublasDestroy);
  bind("cublasSetStream_v2", a.cublasSetStream);
  bind("cublasSgemm_v2", a.cublasSgemm);
  bind("cublasGetProperty", a.cublasGetProperty);
  gpu_lib::bind(lib, "cublasGetStatusString", a.cublasGetStatusString);
  if (!bind.ok()) {
    a.info.status =
        Status::NotFound(std::string("cuBLAS too old (it lacks ") + bind.missing() + ")");
    return a;
  }
  a.cublasGetProperty(kMajorVersion, &a.info.major);
  a.cublasGetProperty(kMinorVersion, &a.info.minor);
  a.cublasGetProperty(kPatchLevel, &a.info.patch);
  a.info.status = Status::Ok();
  return a;
}

const Api& api() {
  static const Api instance = load();
  return instance;
}

Status cublas_error(const char* what, cublasStatus_t r) {
  const char* text = api().cublasGetStatusString ? api().cublasGetStatusString(r) : nullptr;
  return Status::Failed(std::string("cuBLAS ") + what + ": " +
                        (text ? text : "status " + std::to_string(r)));
}

int to_cublas(Op op) {
  return op == Op::kTranspose ? kOpT : kOpN;
}

}  // namespace

const Info& info() {
  return api().info;
}

ColumnMajorGemm to_column_major(Op op_a, Op op_b, int m, int n, int k, const float* a, int lda,
                                const float* b, int ldb, float* c, int ldc) {
  // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: B comes first.
  return ColumnMajorGemm{.op_a = op_b,
                         .op_b = op_a,
                         .m = n,
                         .n = m,
                         .k = k,
                         .a = b,
                         .lda = ldb,
                         .b = a,
                         .ldb = lda,
                         .c = c,
                         .ldc = ldc};
}

Result<Handle> Handle::create(const cuda::Context& context, const cuda::Stream& stream) {
  const Api& a = api();
  if (!a.info.status.ok()) return a.info.status;
  if (Status st = context.make_current(); !st.ok()) return st;
  Handle h;
  cublasStatus_t r = a.cublasCreate(&h.handle_);
  if (r != kSuccess) {
    h.handle_ = nullptr;
    return cublas_error("cublasCreate", r);
  }
  h.context_ = context.get();
  if ((r = a.cublasSetStream(h.handle_, stream.get())) != kSuccess)
    return cublas_error("cublasSetStream", r);
  return h;
}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    reset();
    context_ = std::exchange(other.context_, nullptr);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

Handle::~Handle() {
  reset();
}

void Handle::reset() {
  if (handle_) {
    cuda::driver().cuCtxSetCurrent(context_);
    api().cublasDestroy(handle_);
  }
  handle_ = nullptr;
}

Status Handle::sgemm(Op op_a, Op op_b, int m, int n, int k, float alpha, const float* a, int lda,
                     const float* b, int ldb, float beta, float* c, int ldc) const {
  if (m == 0 || n == 0) return Status::Ok();
  cuda::driver().cuCtxSetCurrent(context_);
  const ColumnMajorGemm g = to_column_major(op_a, op_b, m, n, k, a, lda, b, ldb, c, ldc);
  const cublasStatus_t r =
      api().cublasSgemm(handle_, to_cublas(g.op_a), to_cublas(g.op_b), g.m, g.n, g.k, &alpha, g.a,
                        g.lda, g.b, g.ldb, &beta, g.c, g.ldc);
  return r == kSuccess ? Status::Ok() : cublas_error("cublasSgemm", r);
}

}  // namespace cairn::cublas
