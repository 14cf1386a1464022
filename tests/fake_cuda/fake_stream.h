// The host emulation's streams (fake_cuda.cc), shared with fake_cublas.cc, which links
// against the emulated libcuda.so.1: work enqueued on a stream runs only when something
// synchronises with it (cuStreamSynchronize, an event query, cuMemFree, a synchronous copy
// for a blocking stream), in the order it was enqueued, as on a GPU. Code that reads a
// result before synchronising gets stale memory here, as it would on a device.
#pragma once

#include <functional>

// Appends `work` to `stream` (a CUstream from cuStreamCreate; null is the legacy default
// stream, which runs `work` at once after the blocking streams' pending work).
extern "C++" void fake_cuda_enqueue(void* stream, std::function<void()> work);
