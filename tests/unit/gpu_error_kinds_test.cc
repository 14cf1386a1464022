// Which GPU failures end a trial (kBadInput, exit 2) and which cairn retries (kFailed,
// exit 1): only what repeats on every restart with the same machine is kBadInput.
#include <doctest/doctest.h>

#include "gpu/cuda_driver.h"
#include "gpu/nvrtc.h"

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
  for (const cuda::CUresult passing : {2, 3, 4, 214, 802, 999})
    CHECK(cuda::module_error_kind(passing) == ErrorKind::kFailed);
}

}  // namespace
}  // namespace cairn
