// gpu/version_text.h: the GPU libraries' version numbers as people write them.
#include <doctest/doctest.h>

#include "gpu/version_text.h"

namespace cairn {
namespace {

TEST_CASE("version text: CUDA and NCCL numbers read as their releases") {
  CHECK(cuda_version_text(13000) == "13.0");
  CHECK(cuda_version_text(12080) == "12.8");
  CHECK(nccl_version_text(22809) == "2.28.9");
  CHECK(nccl_version_text(21400) == "2.14.0");
  CHECK(nccl_version_text(2804) == "2.8.4");  // before 2.9: four digits
}

}  // namespace
}  // namespace cairn
