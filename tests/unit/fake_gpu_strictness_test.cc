// tests/fake_cuda is stricter than one synchronous thread (fake_cuda.cc's header): work on a
// stream waits for a synchronisation. These cases keep it so: if the emulation ran stream
// work at once again, code that reads results without synchronising would pass on it and
// fail on a GPU. Host emulation only: on a GPU the same reads race.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "gpu/cuda_driver.h"
#include "tests/unit/cairn_skip.h"

namespace cairn {
namespace {

bool on_host_emulation() {
  auto context = cuda::Context::retain(0);
  return context.ok() && context->name().find("host emulation") != std::string::npos;
}

}  // namespace

TEST_CASE("fake GPU: stream work waits for a synchronisation [needs fake gpu]") {
  if (!cuda::driver().status.ok())
    CAIRN_SKIP("needs fake gpu: " << cuda::driver().status.message());
  if (!on_host_emulation()) CAIRN_SKIP("needs fake gpu: this is a real GPU");
  auto context = cuda::Context::retain(0);
  REQUIRE(context.ok());
  REQUIRE(context->make_current().ok());
  auto stream = cuda::Stream::create(*context);
  REQUIRE(stream.ok());
  const auto& d = cuda::driver();
  constexpr size_t kWords = 64;
  cuda::CUdeviceptr memory = 0;
  REQUIRE(d.cuMemAlloc(&memory, kWords * 4) == cuda::kSuccess);

  // A memset on cairn's (non-blocking) stream, then a synchronous copy, which does not wait
  // for such a stream: the copy sees the fresh allocation's pattern, not the zeros.
  REQUIRE(d.cuMemsetD32Async(memory, 0, kWords, stream->get()) == cuda::kSuccess);
  std::vector<uint32_t> host(kWords, 1);
  REQUIRE(d.cuMemcpyDtoH(host.data(), memory, kWords * 4) == cuda::kSuccess);
  CHECK(host[0] == 0xA5A5A5A5u);
  // An asynchronous copy back is not there before the stream is synchronised.
  std::vector<uint32_t> later(kWords, 7);
  REQUIRE(d.cuMemcpyDtoHAsync(later.data(), memory, kWords * 4, stream->get()) == cuda::kSuccess);
  CHECK(later[0] == 7u);
  REQUIRE(stream->synchronize().ok());
  CHECK(later[0] == 0u);
  CHECK(later[kWords - 1] == 0u);

  // An event is not ready until the stream has run up to it.
  cuda::CUevent event = nullptr;
  REQUIRE(d.cuEventCreate(&event, 0) == cuda::kSuccess);
  REQUIRE(d.cuMemsetD32Async(memory, 5, kWords, stream->get()) == cuda::kSuccess);
  REQUIRE(d.cuEventRecord(event, stream->get()) == cuda::kSuccess);
  CHECK(d.cuEventQuery(event) != cuda::kSuccess);  // CUDA_ERROR_NOT_READY
  CHECK(d.cuEventQuery(event) == cuda::kSuccess);
  REQUIRE(d.cuMemcpyDtoH(host.data(), memory, 4) == cuda::kSuccess);
  CHECK(host[0] == 5u);
  CHECK(d.cuEventDestroy(event) == cuda::kSuccess);
  CHECK(d.cuMemFree(memory) == cuda::kSuccess);
}

}  // namespace cairn
