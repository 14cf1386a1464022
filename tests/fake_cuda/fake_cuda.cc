// A host emulation of the slice of the CUDA driver API cairn uses (gpu/cuda_driver.h), built
// as libcuda.so.1 for tests only: put its directory on LD_LIBRARY_PATH and cairn's GPU path
// runs on the CPU. "Device memory" is host memory, streams and events are synchronous, and
// a kernel launch calls the kernel of trainer/mlp_cuda_kernels.cu compiled as host C++ on the
// calling thread (the module image NVRTC built is accepted and ignored). So the tests exercise
// everything of builtin:mlp's GPU path except the GPU: the driver calls, buffer layout, kernel
// arguments, the cuBLAS operand mapping (with fake_cublas.cc), the trainer's wiring, checkpoints.
//
// Never shipped, never loaded unless a test puts it on the library path.
#include <ucontext.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace fake_kernels {

struct Dim3 {
  unsigned x = 0;
};
// Per OS thread: ranks run as threads in some tests, each launching its own kernels.
thread_local Dim3 threadIdx;
Dim3 blockIdx{0}, blockDim{1}, gridDim{1};

// A block's threads run as fibers (ucontext) on the launching thread, taking turns:
// __syncthreads hands over to the next one, so every thread reaches the barrier before any
// goes past it. Cheap (no OS threads) and deterministic.
struct Block {
  ucontext_t scheduler;
  std::vector<ucontext_t> fibers;
  std::vector<bool> done;
  std::function<void()> body;
  unsigned current = 0;
};
Block* block = nullptr;

inline void __syncthreads() {
  swapcontext(&block->fibers[block->current], &block->scheduler);
}

#define __global__
#define __shared__ static  // one block at a time: static is "shared by the block"
#include "trainer/mlp_cuda_kernels.cu"
#undef __shared__
#undef __global__

}  // namespace fake_kernels

namespace {

using Launch = std::function<void(void**, unsigned threads)>;

template <typename... A, size_t... I>
void call(void (*f)(A...), void** params, std::index_sequence<I...>) {
  f(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(params[I])...);
}

// Grid-stride kernels run as one thread, which walks every element.
template <typename... A>
Launch serial(void (*f)(A...)) {
  return [f](void** params, unsigned) { call(f, params, std::index_sequence_for<A...>{}); };
}

void fiber_main() {
  fake_kernels::block->body();
  fake_kernels::block->done[fake_kernels::block->current] = true;
}  // returns to the scheduler through uc_link

// A kernel that uses __syncthreads: one fiber per CUDA thread of its one block. One such
// launch at a time in the process (the block's shared memory and the fibers are globals),
// which matters when a test runs several "GPU" ranks as threads.
std::mutex block_launch;

template <typename... A>
Launch block(void (*f)(A...)) {
  return [f](void** params, unsigned threads) {
    std::lock_guard<std::mutex> one_block_at_a_time(block_launch);
    fake_kernels::Block b;
    b.body = [&] { call(f, params, std::index_sequence_for<A...>{}); };
    b.fibers.resize(threads);
    b.done.assign(threads, false);
    static std::vector<std::unique_ptr<char[]>> stacks;  // kept across launches
    constexpr size_t kStack = 64 << 10;
    while (stacks.size() < threads) stacks.push_back(std::make_unique<char[]>(kStack));
    for (unsigned t = 0; t < threads; ++t) {
      getcontext(&b.fibers[t]);
      b.fibers[t].uc_stack.ss_sp = stacks[t].get();
      b.fibers[t].uc_stack.ss_size = kStack;
      b.fibers[t].uc_link = &b.scheduler;
      makecontext(&b.fibers[t], fiber_main, 0);
    }
    fake_kernels::block = &b;
    for (bool running = true; running;) {  // rounds until every thread has returned
      running = false;
      for (unsigned t = 0; t < threads; ++t) {
        if (b.done[t]) continue;
        running = true;
        b.current = t;
        fake_kernels::threadIdx.x = t;
        swapcontext(&b.scheduler, &b.fibers[t]);
      }
    }
    fake_kernels::block = nullptr;
    fake_kernels::threadIdx.x = 0;
  };
}

const std::map<std::string, Launch>& kernels() {
  namespace k = fake_kernels;
  static const std::map<std::string, Launch> table = {
      {"mlp_gather_rows", serial(k::mlp_gather_rows)},
      {"mlp_bias_forward", serial(k::mlp_bias_forward)},
      {"mlp_relu_backward", serial(k::mlp_relu_backward)},
      {"mlp_sum_rows", serial(k::mlp_sum_rows)},
      {"mlp_softmax_cross_entropy", serial(k::mlp_softmax_cross_entropy)},
      {"mlp_accumulate_stats", block(k::mlp_accumulate_stats)},
      {"mlp_sgd", serial(k::mlp_sgd)},
      {"mlp_sgd_momentum", serial(k::mlp_sgd_momentum)},
      {"mlp_adam", serial(k::mlp_adam)}};
  return table;
}

struct Function {
  const Launch* launch;
};

int context_marker, module_marker, stream_marker, event_marker;

}  // namespace

extern "C" {

using CUresult = int;
constexpr CUresult kOk = 0;
constexpr CUresult kInvalidValue = 1;
constexpr CUresult kNotFound = 500;

// FAKE_CUDA_INIT_ERROR=N: cuInit fails with N, as a driver does when there is no device
// (100), the system is not ready (802) or something unknown went wrong (999), so tests can
// check which of those end a trial and which it is retried after.
CUresult cuInit(unsigned) {
  if (const char* error = std::getenv("FAKE_CUDA_INIT_ERROR")) return std::atoi(error);
  return kOk;
}
CUresult cuDriverGetVersion(int* v) {
  *v = 13000;
  return kOk;
}
// The devices this process sees. FAKE_CUDA_DEVICES (default 1) is the machine's count; as
// the real driver does, CUDA_VISIBLE_DEVICES narrows it to the listed indices, up to the
// first that is not a device (an empty value hides every device). UUIDs and MIG names are
// not emulated: such an entry ends the list. Lets tests check which GPUs cairn hands out.
int visible_device_count() {
  // FAKE_CUDA_NO_DEVICE_RANK=R: the rank R of a data-parallel trial (env RANK) sees no
  // device, as on a machine without a GPU, so tests can make the ranks' machines differ.
  const char* rank = std::getenv("RANK");
  if (const char* blind = std::getenv("FAKE_CUDA_NO_DEVICE_RANK");
      blind && rank && std::strcmp(blind, rank) == 0)
    return 0;
  const char* machine = std::getenv("FAKE_CUDA_DEVICES");
  const int installed = machine ? std::atoi(machine) : 1;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!visible) return installed;
  int count = 0;
  for (const char* p = visible; *p;) {
    char* end = nullptr;
    const long index = std::strtol(p, &end, 10);
    if (end == p || index < 0 || index >= installed || (*end != ',' && *end != '\0')) break;
    ++count;
    p = *end == ',' ? end + 1 : end;
  }
  return count;
}

CUresult cuDeviceGetCount(int* n) {
  *n = visible_device_count();
  return kOk;
}
CUresult cuDeviceGet(int* d, int ordinal) {
  if (ordinal < 0 || ordinal >= visible_device_count()) return kInvalidValue;
  *d = ordinal;
  return kOk;
}
CUresult cuDeviceGetAttribute(int* value, int attribute, int) {
  switch (attribute) {
    case 16:
      *value = 4;
      return kOk;  // multiprocessors
    case 75:
      *value = 9;
      return kOk;  // compute capability major
    case 76:
      *value = 0;
      return kOk;  // minor
    default:
      *value = 0;
      return kOk;
  }
}
CUresult cuDeviceGetName(char* name, int length, int) {
  std::snprintf(name, static_cast<size_t>(length), "cairn fake GPU (host emulation)");
  return kOk;
}
CUresult cuDevicePrimaryCtxRetain(void** context, int) {
  *context = &context_marker;
  return kOk;
}
CUresult cuDevicePrimaryCtxRelease_v2(int) {
  return kOk;
}
CUresult cuCtxSetCurrent(void*) {
  return kOk;
}
CUresult cuStreamCreate(void** stream, unsigned) {
  *stream = &stream_marker;
  return kOk;
}
CUresult cuStreamDestroy_v2(void*) {
  return kOk;
}
CUresult cuStreamSynchronize(void*) {
  return kOk;
}
CUresult cuEventCreate(void** event, unsigned) {
  *event = &event_marker;
  return kOk;
}
CUresult cuEventRecord(void*, void*) {
  return kOk;
}
CUresult cuEventQuery(void*) {
  return kOk;
}
CUresult cuEventDestroy_v2(void*) {
  return kOk;
}
CUresult cuMemAlloc_v2(unsigned long long* ptr, size_t bytes) {
  // FAKE_CUDA_MAX_ALLOC: a smaller "GPU", so tests can see what an allocation that does not
  // fit does.
  if (const char* max = std::getenv("FAKE_CUDA_MAX_ALLOC");
      max && bytes > std::strtoull(max, nullptr, 10))
    return 2;  // CUDA_ERROR_OUT_OF_MEMORY
  // Filled with a pattern, as fresh device memory holds garbage: code that reads memory
  // it never wrote shows up.
  void* p = std::malloc(bytes);
  if (!p) return 2;  // CUDA_ERROR_OUT_OF_MEMORY
  std::memset(p, 0xA5, bytes);
  *ptr = reinterpret_cast<unsigned long long>(p);
  return kOk;
}
CUresult cuMemFree_v2(unsigned long long ptr) {
  std::free(reinterpret_cast<void*>(ptr));
  return kOk;
}
CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  *free = *total = size_t{1} << 32;
  // FAKE_CUDA_MEMORY: the "GPU"'s memory in all, so tests can see what a model or data
  // larger than the whole device does (no allocation is refused for it: see
  // FAKE_CUDA_MAX_ALLOC).
  if (const char* memory = std::getenv("FAKE_CUDA_MEMORY"))
    *free = *total = std::strtoull(memory, nullptr, 10);
  return kOk;
}
CUresult cuMemcpyHtoD_v2(unsigned long long dst, const void* src, size_t bytes) {
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return kOk;
}
CUresult cuMemcpyDtoH_v2(void* dst, unsigned long long src, size_t bytes) {
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return kOk;
}
CUresult cuMemcpyHtoDAsync_v2(unsigned long long dst, const void* src, size_t bytes, void*) {
  return cuMemcpyHtoD_v2(dst, src, bytes);
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, unsigned long long src, size_t bytes, void*) {
  return cuMemcpyDtoH_v2(dst, src, bytes);
}
CUresult cuMemsetD32Async(unsigned long long dst, unsigned value, size_t count, void*) {
  auto* p = reinterpret_cast<unsigned*>(dst);
  for (size_t i = 0; i < count; ++i) p[i] = value;
  return kOk;
}
CUresult cuModuleLoadData(void** module, const void* image) {
  if (!image) return kInvalidValue;
  // FAKE_CUDA_REFUSE_MODULE[=CODE]: a driver that refuses the image with CODE, by default
  // 209 (CUDA_ERROR_NO_BINARY_FOR_GPU), as a real one refuses a cubin for another GPU; or
  // with another error, say 999 (CUDA_ERROR_UNKNOWN), which a restart may not meet.
  if (const char* refuse = std::getenv("FAKE_CUDA_REFUSE_MODULE"))
    return std::atoi(refuse) > 0 ? std::atoi(refuse) : 209;
  *module = &module_marker;
  return kOk;
}
CUresult cuModuleUnload(void*) {
  return kOk;
}
CUresult cuModuleGetFunction(void** function, void*, const char* name) {
  const auto it = kernels().find(name);
  if (it == kernels().end()) return kNotFound;
  *function = new Function{&it->second};  // a handful per process, never freed
  return kOk;
}
CUresult cuLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, void* stream, void** params,
                        void** extra) {
  if (!function || !params || gx == 0 || bx == 0 || gy != 1 || gz != 1 || by != 1 || bz != 1)
    return kInvalidValue;
  (*static_cast<Function*>(function)->launch)(params, bx);
  return kOk;
}
// NVRTC opens libcuda.so.1 itself and asks for the driver's private export tables; "not
// supported" makes it carry on without them.
CUresult cuGetExportTable(const void** table, const void*) {
  *table = nullptr;
  return 801;  // CUDA_ERROR_NOT_SUPPORTED
}
CUresult cuGetErrorString(CUresult r, const char** text) {
  *text = r == kOk ? "no error" : "fake CUDA error";
  return kOk;
}

}  // extern "C"
