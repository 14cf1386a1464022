// trainer/gpu_memory_reserve.h: what "can never fit" is measured against.
#include <doctest/doctest.h>

#include "trainer/gpu_memory_reserve.h"

namespace cairn {
namespace {

TEST_CASE("gpu memory reserve: 5 % of the GPU or 512 MiB, whichever is larger") {
  constexpr uint64_t kMiB = uint64_t{1} << 20, kGiB = uint64_t{1} << 30;
  CHECK(gpu_memory_reserve(8 * kGiB) == 512 * kMiB);  // 5 % would be 410 MiB
  CHECK(gpu_memory_reserve(80 * kGiB) == 4 * kGiB);
  CHECK(gpu_memory_usable(80 * kGiB) == 76 * kGiB);
  // A need just under the whole memory is not counted as fitting.
  CHECK(gpu_memory_usable(8 * kGiB) < 8 * kGiB - kMiB);
  // A "GPU" smaller than the reserve (the host emulation's) can hold nothing.
  CHECK(gpu_memory_usable(256 * kMiB) == 0);
}

}  // namespace
}  // namespace cairn
