// Sizes of GPU memory in the messages that say a model or data does not fit: "12 KiB",
// "2.4 MiB", "80.0 GiB". A need is rounded up and a capacity down, so that a need that
// does not fit never reads as one that does (and one that does never reads as too big).
#pragma once

#include <cstdint>
#include <string>

namespace cairn {

enum class Rounding { kDown, kUp };

inline std::string gpu_memory_text(uint64_t bytes, Rounding rounding) {
  constexpr uint64_t kKiB = 1024, kMiB = kKiB << 10, kGiB = kMiB << 10;
  const auto divide = [rounding](uint64_t n, uint64_t d) {
    return rounding == Rounding::kUp ? (n + d - 1) / d : n / d;
  };
  // The unit is chosen after rounding: rounded up, a need just under 1 MiB or 1 GiB reaches
  // it, and reads as "1.0 MiB", not "1024 KiB".
  if (bytes < kMiB) {
    if (const uint64_t kib = divide(bytes, kKiB); kib < 1024) return std::to_string(kib) + " KiB";
  }
  // Tenths of the unit, exactly: bytes * 10 / unit (GPU memory is far below 2^60 bytes).
  uint64_t unit = bytes < kGiB ? kMiB : kGiB;
  uint64_t tenths = divide(bytes * 10, unit);
  if (unit == kMiB && tenths >= 1024 * 10) {
    unit = kGiB;
    tenths = divide(bytes * 10, unit);
  }
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) +
         (unit == kMiB ? " MiB" : " GiB");
}

}  // namespace cairn
