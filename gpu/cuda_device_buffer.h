// Device memory through the run-time loaded driver (gpu/cuda_driver.h), for the tests and
// benchmarks of the NCCL path. Not thread-safe: one owner.
#pragma once

#include <cstddef>
#include <memory>

#include "common/status.h"

namespace cairn {

// Device memory through the run-time loaded driver, for tests and benchmarks of the NCCL
// path.
class CudaDeviceBuffer {
 public:
  static Result<std::unique_ptr<CudaDeviceBuffer>> allocate(int device, size_t bytes);
  ~CudaDeviceBuffer();
  CudaDeviceBuffer(const CudaDeviceBuffer&) = delete;
  CudaDeviceBuffer& operator=(const CudaDeviceBuffer&) = delete;

  void* data() const { return reinterpret_cast<void*>(ptr_); }
  size_t bytes() const { return bytes_; }
  Status upload(const void* host, size_t bytes);
  Status download(void* host, size_t bytes) const;

 private:
  CudaDeviceBuffer(int device, void* context, unsigned long long ptr, size_t bytes)
      : device_(device), context_(context), ptr_(ptr), bytes_(bytes) {}
  int device_;
  void* context_;  // the device's primary context, retained while the buffer lives
  unsigned long long ptr_;
  size_t bytes_;
};

}  // namespace cairn
