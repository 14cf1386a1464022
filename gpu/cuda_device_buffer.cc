#include "gpu/cuda_device_buffer.h"

#include "gpu/cuda_driver.h"

namespace cairn {

namespace {

using cuda::CUcontext;
using cuda::CUdevice;
using cuda::CUdeviceptr;
using cuda::CUresult;
constexpr CUresult kCudaSuccess = cuda::kSuccess;

const cuda::Driver& drv() {
  return cuda::driver();
}

Status cuda_error(const char* what, CUresult r) {
  return cuda::error(what, r);
}

}  // namespace

Result<std::unique_ptr<CudaDeviceBuffer>> CudaDeviceBuffer::allocate(int device, size_t bytes) {
  if (!drv().status.ok()) return drv().status;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUresult r = drv().cuDeviceGet(&dev, device);
  if (r != kCudaSuccess) return cuda_error("cuDeviceGet", r);
  if ((r = drv().cuDevicePrimaryCtxRetain(&ctx, dev)) != kCudaSuccess)
    return cuda_error("cuDevicePrimaryCtxRetain", r);
  drv().cuCtxSetCurrent(ctx);
  CUdeviceptr ptr = 0;
  if ((r = drv().cuMemAlloc(&ptr, bytes == 0 ? 1 : bytes)) != kCudaSuccess) {
    drv().cuDevicePrimaryCtxRelease(dev);
    return cuda_error("cuMemAlloc", r);
  }
  // The primary context stays retained while the buffer lives.
  return std::unique_ptr<CudaDeviceBuffer>(new CudaDeviceBuffer(dev, ctx, ptr, bytes));
}

CudaDeviceBuffer::~CudaDeviceBuffer() {
  drv().cuCtxSetCurrent(static_cast<CUcontext>(context_));
  drv().cuMemFree(ptr_);
  drv().cuDevicePrimaryCtxRelease(device_);
}

Status CudaDeviceBuffer::upload(const void* host, size_t bytes) {
  if (bytes > bytes_) return Status::BadInput("upload larger than the device buffer");
  drv().cuCtxSetCurrent(static_cast<CUcontext>(context_));
  CUresult r = drv().cuMemcpyHtoD(ptr_, host, bytes);
  return r == kCudaSuccess ? Status::Ok() : cuda_error("cuMemcpyHtoD", r);
}

Status CudaDeviceBuffer::download(void* host, size_t bytes) const {
  if (bytes > bytes_) return Status::BadInput("download larger than the device buffer");
  drv().cuCtxSetCurrent(static_cast<CUcontext>(context_));
  CUresult r = drv().cuMemcpyDtoH(host, ptr_, bytes);
  return r == kCudaSuccess ? Status::Ok() : cuda_error("cuMemcpyDtoH", r);
}

}  // namespace cairn
