#include "common/cpu_features.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace cairn {

namespace {

bool bit(uint32_t word, int n) {
  return (word >> n) & 1u;
}

// XCR0 bits: 1 SSE (XMM), 2 AVX (upper YMM), 5 opmask, 6 upper ZMM0-15, 7 ZMM16-31.
constexpr uint64_t kXcr0Ymm = (1u << 1) | (1u << 2);
constexpr uint64_t kXcr0Zmm = (1u << 5) | (1u << 6) | (1u << 7);

void remove_family(CpuFeatures& f, const std::string& family) {
  if (family == "avx" || family == "avx2" || family == "avx512") {
    f.avx512f = f.avx512dq = f.avx512cd = f.avx512bw = f.avx512vl = f.avx512_bf16 = false;
  }
  if (family == "avx" || family == "avx2") f.avx2 = f.fma = false;
  if (family == "avx") f.avx = f.fma4 = false;
}

}  // namespace

std::string CpuFeatures::summary() const {
  if (avx512_cooperlake()) return "AVX-512 BF16";
  if (avx512_skylakex()) return "AVX-512";
  if (avx2_fma()) return "AVX2+FMA";
  if (avx) return "AVX";
  if (sse4_2) return "SSE4.2";
  if (ssse3) return "SSSE3";
  if (sse3) return "SSE3";
  return vendor.empty() ? "not x86" : "SSE2";
}

CpuFeatures decode_cpu_features(const CpuidSnapshot& s) {
  CpuFeatures f;
  f.vendor = s.vendor;
  if (s.max_leaf < 1) return f;
  const uint32_t ecx1 = s.leaf1.ecx;
  f.sse3 = bit(ecx1, 0);
  f.ssse3 = bit(ecx1, 9);
  f.sse4_1 = bit(ecx1, 19);
  f.sse4_2 = bit(ecx1, 20);
  const bool osxsave = bit(ecx1, 27);
  f.avx_reported = bit(ecx1, 28);
  // The OS enables XGETBV (OSXSAVE) and, in XCR0, the state it saves.
  const bool os_ymm = osxsave && (s.xcr0 & kXcr0Ymm) == kXcr0Ymm;
  const bool os_zmm = os_ymm && (s.xcr0 & kXcr0Zmm) == kXcr0Zmm;
  f.avx = f.avx_reported && os_ymm;
  f.fma = f.avx && bit(ecx1, 12);
  if (s.max_extended >= 0x80000001u) f.fma4 = f.avx && bit(s.extended1.ecx, 16);
  if (s.max_leaf >= 7) {
    const uint32_t ebx7 = s.leaf7.ebx;
    f.avx2 = f.avx && bit(ebx7, 5);
    f.avx512_reported = bit(ebx7, 16);
    if (os_zmm) {
      f.avx512f = bit(ebx7, 16);
      f.avx512dq = bit(ebx7, 17);
      f.avx512cd = bit(ebx7, 28);
      f.avx512bw = bit(ebx7, 30);
      f.avx512vl = bit(ebx7, 31);
      // Subleaf 1 exists when subleaf 0's EAX (the highest subleaf) is at least 1.
      f.avx512_bf16 = f.avx512f && s.leaf7.eax >= 1 && bit(s.leaf7_1.eax, 5);
    }
  }
  return f;
}

CpuidSnapshot read_cpuid() {
  CpuidSnapshot s;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return s;
  s.max_leaf = a;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  s.vendor = vendor;
  auto leaf = [](unsigned id, unsigned sub, CpuidRegisters& r) {
    unsigned ra = 0, rb = 0, rc = 0, rd = 0;
    __cpuid_count(id, sub, ra, rb, rc, rd);
    r = {ra, rb, rc, rd};
  };
  if (s.max_leaf >= 1) leaf(1, 0, s.leaf1);
  if (s.max_leaf >= 7) {
    leaf(7, 0, s.leaf7);
    if (s.leaf7.eax >= 1) leaf(7, 1, s.leaf7_1);
  }
  s.max_extended = __get_cpuid_max(0x80000000u, nullptr);
  if (s.max_extended >= 0x80000001u) leaf(0x80000001u, 0, s.extended1);
  // XGETBV faults unless the OS has set CR4.OSXSAVE, which CPUID.1:ECX bit 27 mirrors.
  if (bit(s.leaf1.ecx, 27)) {
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    s.xcr0 = (uint64_t{hi} << 32) | lo;
  }
#endif
  return s;
}

const CpuFeatures& this_cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f = decode_cpu_features(read_cpuid());
    if (const char* without = std::getenv("CAIRN_TEST_CPU_WITHOUT"); without && *without) {
      std::stringstream families(without);
      std::string family;
      while (std::getline(families, family, ',')) remove_family(f, family);
    }
    return f;
  }();
  return features;
}

}  // namespace cairn
