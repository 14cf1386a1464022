// A host emulation of the slice of the CUDA driver API cairn uses (gpu/cuda_driver.h), built
// as libcuda.so.1 for tests only: put its directory on LD_LIBRARY_PATH and cairn's GPU path
// runs on the CPU. "Device memory" is host memory, and a kernel launch runs the kernel of
// trainer/mlp_cuda_kernels.cu compiled as host C++ (the module image NVRTC built is
// accepted and ignored). So the tests exercise everything of builtin:mlp's GPU path except
// the GPU: the driver calls, buffer layout, kernel arguments, the cuBLAS operand mapping
// (with fake_cublas.cc), the trainer's wiring, checkpoints.
//
// It is stricter than one thread would be, so that bugs a GPU shows show here too:
// - a launch runs the kernel body once per (block, thread) of its grid, last block and
//   last thread first, so a kernel that ignores its index, or that assumes thread 0 ran
//   before the others, gives wrong results; a block's threads run as fibers that take
//   turns at __syncthreads;
// - streams defer their work (fake_stream.h) until a synchronisation, so a result read
//   without one is stale.
//
// Never shipped, never loaded unless a test puts it on the library path.
#include <ucontext.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tests/fake_cuda/fake_stream.h"

namespace fake_kernels {

struct Dim3 {
  unsigned x = 0;
};
// Per OS thread: ranks run as threads in some tests, each launching its own kernels.
thread_local Dim3 threadIdx, blockIdx, blockDim{1}, gridDim{1};

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
thread_local Block* block = nullptr;

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

// A launch binds the kernel's arguments (copied now: `params` points at the caller's
// variables, which are gone by the time the stream runs the work) and the grid, and returns
// the work to run.
using Launch =
    std::function<std::function<void()>(void** params, unsigned blocks, unsigned threads)>;

template <typename... A, size_t... I>
auto bind_args(void** params, std::index_sequence<I...>) {
  return std::make_tuple(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(params[I])...);
}

// Sets the index variables of one (block, thread) of the grid.
void at(unsigned b, unsigned t, unsigned blocks, unsigned threads) {
  fake_kernels::blockIdx.x = b;
  fake_kernels::threadIdx.x = t;
  fake_kernels::blockDim.x = threads;
  fake_kernels::gridDim.x = blocks;
}

// A kernel without __syncthreads: the body once per (block, thread), from the last block's
// last thread down to thread 0 of block 0, each to its end before the next starts.
template <typename... A>
Launch serial(void (*f)(A...)) {
  return [f](void** params, unsigned blocks, unsigned threads) -> std::function<void()> {
    auto args = bind_args<A...>(params, std::index_sequence_for<A...>{});
    return [f, args, blocks, threads] {
      for (unsigned b = blocks; b-- > 0;)
        for (unsigned t = threads; t-- > 0;) {
          at(b, t, blocks, threads);
          std::apply(f, args);
        }
      at(0, 0, 1, 1);
    };
  };
}

void fiber_main() {
  fake_kernels::block->body();
  fake_kernels::block->done[fake_kernels::block->current] = true;
}  // returns to the scheduler through uc_link

// A kernel that uses __syncthreads: the blocks one after another (last first), each with
// one fiber per CUDA thread, scheduled last thread first. One such block at a time in the
// process (its shared memory is static), which matters when a test runs several "GPU"
// ranks as threads.
std::mutex block_launch;

template <typename... A>
Launch block(void (*f)(A...)) {
  return [f](void** params, unsigned blocks, unsigned threads) -> std::function<void()> {
    auto args = bind_args<A...>(params, std::index_sequence_for<A...>{});
    return [f, args, blocks, threads] {
      std::lock_guard<std::mutex> one_block_at_a_time(block_launch);
      static std::vector<std::unique_ptr<char[]>> stacks;  // kept across launches
      constexpr size_t kStack = 64 << 10;
      while (stacks.size() < threads) stacks.push_back(std::make_unique<char[]>(kStack));
      for (unsigned blk = blocks; blk-- > 0;) {
        fake_kernels::Block b;
        b.body = [&] { std::apply(f, args); };
        b.fibers.resize(threads);
        b.done.assign(threads, false);
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
          for (unsigned t = threads; t-- > 0;) {
            if (b.done[t]) continue;
            running = true;
            b.current = t;
            at(blk, t, blocks, threads);
            swapcontext(&b.scheduler, &b.fibers[t]);
          }
        }
        fake_kernels::block = nullptr;
      }
      at(0, 0, 1, 1);
    };
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

int context_marker, module_marker;

// A stream: its pending work, run in order by flush().
struct Stream {
  bool blocking = true;
  std::mutex mutex;
  std::deque<std::function<void()>> pending;

  void flush() {
    std::lock_guard<std::mutex> lock(mutex);
    while (!pending.empty()) {
      pending.front()();
      pending.pop_front();
    }
  }
};

std::mutex streams_mutex;
std::set<Stream*> streams;

// Runs every stream's pending work (or the blocking streams' only), as cuMemFree and a
// synchronous copy wait for them on a GPU.
void flush_streams(bool blocking_only) {
  std::vector<Stream*> all;
  {
    std::lock_guard<std::mutex> lock(streams_mutex);
    all.assign(streams.begin(), streams.end());
  }
  for (Stream* s : all)
    if (!blocking_only || s->blocking) s->flush();
}

struct Event {
  Stream* stream = nullptr;
  bool done = true;
};

}  // namespace

void fake_cuda_enqueue(void* handle, std::function<void()> work) {
  if (!handle) {  // the legacy default stream waits for the blocking streams
    flush_streams(true);
    work();
    return;
  }
  auto* stream = static_cast<Stream*>(handle);
  std::lock_guard<std::mutex> lock(stream->mutex);
  stream->pending.push_back(std::move(work));
}

namespace {}  // namespace

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
CUresult cuStreamCreate(void** stream, unsigned flags) {
  auto* s = new Stream;
  s->blocking = (flags & 0x1) == 0;  // CU_STREAM_NON_BLOCKING
  std::lock_guard<std::mutex> lock(streams_mutex);
  streams.insert(s);
  *stream = s;
  return kOk;
}
CUresult cuStreamDestroy_v2(void* stream) {
  auto* s = static_cast<Stream*>(stream);
  s->flush();  // a GPU finishes the work of a destroyed stream
  std::lock_guard<std::mutex> lock(streams_mutex);
  streams.erase(s);
  delete s;
  return kOk;
}
CUresult cuStreamSynchronize(void* stream) {
  if (stream)
    static_cast<Stream*>(stream)->flush();
  else
    flush_streams(true);
  return kOk;
}
CUresult cuCtxSynchronize() {
  flush_streams(false);
  return kOk;
}
CUresult cuEventCreate(void** event, unsigned) {
  *event = new Event;
  return kOk;
}
CUresult cuEventRecord(void* event, void* stream) {
  auto* e = static_cast<Event*>(event);
  e->stream = static_cast<Stream*>(stream);
  e->done = false;
  fake_cuda_enqueue(stream, [e] { e->done = true; });
  return kOk;
}
// Not ready until the stream has run up to the event: the first query of a pending event
// answers CUDA_ERROR_NOT_READY and lets the stream run, as a GPU would meanwhile.
CUresult cuEventQuery(void* event) {
  auto* e = static_cast<Event*>(event);
  if (e->done) return kOk;
  if (e->stream) e->stream->flush();
  return 600;  // CUDA_ERROR_NOT_READY
}
CUresult cuEventDestroy_v2(void* event) {
  delete static_cast<Event*>(event);
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
  flush_streams(false);  // cuMemFree waits for the work that may use the memory
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
// Synchronous copies wait for the blocking streams only, as on a GPU: work on a stream
// created CU_STREAM_NON_BLOCKING (as cairn's are) may still be pending.
CUresult cuMemcpyHtoD_v2(unsigned long long dst, const void* src, size_t bytes) {
  flush_streams(true);
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return kOk;
}
CUresult cuMemcpyDtoH_v2(void* dst, unsigned long long src, size_t bytes) {
  flush_streams(true);
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return kOk;
}
// From pageable host memory the driver stages the source before returning, so the caller
// may reuse it at once; the device sees it when the stream gets there.
CUresult cuMemcpyHtoDAsync_v2(unsigned long long dst, const void* src, size_t bytes, void* stream) {
  auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                    static_cast<const char*>(src) + bytes);
  fake_cuda_enqueue(stream, [dst, staged] {
    std::memcpy(reinterpret_cast<void*>(dst), staged->data(), staged->size());
  });
  return kOk;
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, unsigned long long src, size_t bytes, void* stream) {
  fake_cuda_enqueue(
      stream, [dst, src, bytes] { std::memcpy(dst, reinterpret_cast<const void*>(src), bytes); });
  return kOk;
}
CUresult cuMemsetD32Async(unsigned long long dst, unsigned value, size_t count, void* stream) {
  fake_cuda_enqueue(stream, [dst, value, count] {
    auto* p = reinterpret_cast<unsigned*>(dst);
    for (size_t i = 0; i < count; ++i) p[i] = value;
  });
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
  // 1024 threads a block at most, as on every GPU cairn supports.
  if (!function || !params || gx == 0 || bx == 0 || bx > 1024 || gy != 1 || gz != 1 || by != 1 ||
      bz != 1)
    return kInvalidValue;
  fake_cuda_enqueue(stream, (*static_cast<Function*>(function)->launch)(params, gx, bx));
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
