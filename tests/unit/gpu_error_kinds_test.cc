// Which GPU failures end a trial (kBadInput, exit 2) and which cairn retries (kFailed,
// exit 1): only what repeats on every restart with the same machine is kBadInput.
#include <doctest/doctest.h>

#include "gpu/cuda_driver.h"
#include "gpu/nvrtc.h"
#include "trainer/mlp_trainer.h"

namespace cairn {
namespace {

TEST_CASE("nvrtc: only a compile error is bad input") {
  CHECK(nvrtc::compile_failure_kind(6) == ErrorKind::kBadInput);  // NVRTC_ERROR_COMPILATION
  CHECK(nvrtc::compile_failure_kind(1) == ErrorKind::kFailed);    // out of memory
  CHECK(nvrtc::compile_failure_kind(7) == ErrorKind::kFailed);    // builtin operation failure
  CHECK(nvrtc::compile_failure_kind(11) == ErrorKind::kFailed);   // internal error
}

TEST_CASE("cuda: a module the driver refuses is bad input only for the image's faults") {
  for (const cuda::CUresult image_fault : {200, 209, 218, 221, 222})
    CHECK(cuda::module_error_kind(image_fault) == ErrorKind::kBadInput);
  // Out of memory, not initialized, deinitialized, ECC uncorrectable, system not ready,
  // unknown: a fresh process may not meet them.
  for (const cuda::CUresult passing : {cuda::kErrorOutOfMemory, 3, 4, 214, 802, 999})
    CHECK(cuda::module_error_kind(passing) == ErrorKind::kFailed);
}

TEST_CASE("cuda: a failed cuInit ends a trial only when every process would meet it") {
  // No device, driver too old, the stub library, forward compatibility not supported.
  for (const cuda::CUresult lasting :
       {cuda::kErrorNoDevice, cuda::kErrorInsufficientDriver, cuda::kErrorStubLibrary,
        cuda::kErrorCompatNotSupportedOnDevice})
    CHECK(cuda::init_error_kind(lasting) == ErrorKind::kNotFound);
  // Out of memory, system not ready, unknown.
  for (const cuda::CUresult passing : {cuda::kErrorOutOfMemory, 802, 999})
    CHECK(cuda::init_error_kind(passing) == ErrorKind::kFailed);
}

TEST_CASE("choose_mlp_device: device cuda fails for good only when the check would repeat") {
  const auto missing = choose_mlp_device(MlpDevice::kCuda, Status::NotFound("no CUDA device"));
  REQUIRE(!missing.ok());
  CHECK(missing.status().exit_code() == 2);
  const auto passing = choose_mlp_device(MlpDevice::kCuda, Status::Failed("cuInit failed"));
  REQUIRE(!passing.ok());
  CHECK(passing.status().exit_code() == 1);
  // auto falls back to the CPU either way.
  const auto fallback = choose_mlp_device(MlpDevice::kAuto, Status::Failed("cuInit failed"));
  REQUIRE(fallback.ok());
  CHECK(!fallback->cuda);
}

}  // namespace
}  // namespace cairn
