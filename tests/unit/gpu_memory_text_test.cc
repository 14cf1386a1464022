// trainer/gpu_memory_text.h: sizes in "does not fit" messages, exact to the digit shown.
#include <doctest/doctest.h>

#include "trainer/gpu_memory_text.h"

namespace cairn {
namespace {

TEST_CASE("gpu memory text: a need rounds up, a capacity down, never past the digit shown") {
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  CHECK(gpu_memory_text(80 * kGiB, Rounding::kDown) == "80.0 GiB");  // not "81920.4 MiB"
  CHECK(gpu_memory_text(80 * kGiB, Rounding::kUp) == "80.0 GiB");
  CHECK(gpu_memory_text(80 * kGiB + 1, Rounding::kUp) == "80.1 GiB");
  CHECK(gpu_memory_text(80 * kGiB - 1, Rounding::kDown) == "79.9 GiB");
  CHECK(gpu_memory_text(uint64_t{1} << 20, Rounding::kDown) == "1.0 MiB");
  CHECK(gpu_memory_text((uint64_t{5} << 20) / 2, Rounding::kUp) == "2.5 MiB");
  CHECK(gpu_memory_text(65536, Rounding::kDown) == "64 KiB");
  CHECK(gpu_memory_text(65537, Rounding::kUp) == "65 KiB");
}

TEST_CASE("gpu memory text: the unit is chosen after rounding") {
  constexpr uint64_t kMiB = uint64_t{1} << 20, kGiB = uint64_t{1} << 30;
  CHECK(gpu_memory_text(kMiB - 1, Rounding::kUp) == "1.0 MiB");  // not "1024 KiB"
  CHECK(gpu_memory_text(kMiB - 1, Rounding::kDown) == "1023 KiB");
  CHECK(gpu_memory_text(kGiB - 1, Rounding::kUp) == "1.0 GiB");  // not "1024.0 MiB"
  CHECK(gpu_memory_text(kGiB - kMiB / 20, Rounding::kUp) == "1.0 GiB");
  CHECK(gpu_memory_text(kGiB - 1, Rounding::kDown) == "1023.9 MiB");
  CHECK(gpu_memory_text(kGiB - kMiB, Rounding::kUp) == "1023.0 MiB");
}

}  // namespace
}  // namespace cairn
