// What the x86-64 CPU can run, as far as choosing BLAS kernels needs: the instruction sets
// cpuid reports, and whether the operating system saves their registers on a context switch
// (XCR0, read with XGETBV). Both count: a VM may report AVX-512 and not save the ZMM state,
// and AVX-512 code then faults or, worse, loses register contents.
//
// Reading (read_cpuid) is kept apart from deciding (decode_cpu_features), so that the
// decisions are unit-tested with the register values of CPUs this machine is not.
// Thread-safety: everything here is pure or reads a value computed once; callable from any
// thread.
#pragma once

#include <cstdint>
#include <string>

namespace cairn {

struct CpuidRegisters {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

// The raw words the features are decoded from. Leaves the CPU does not have are zeros;
// off x86 everything is.
struct CpuidSnapshot {
  std::string vendor;         // "GenuineIntel", "AuthenticAMD", … ("" off x86)
  uint32_t max_leaf = 0;      // CPUID.0:EAX
  CpuidRegisters leaf1;       // CPUID.1
  CpuidRegisters leaf7;       // CPUID.(7,0); EAX is the highest subleaf
  CpuidRegisters leaf7_1;     // CPUID.(7,1)
  uint32_t max_extended = 0;  // CPUID.0x80000000:EAX
  CpuidRegisters extended1;   // CPUID.0x80000001
  uint64_t xcr0 = 0;          // XGETBV(0) when CPUID.1:ECX.OSXSAVE is set, else 0
};

// Usable features: reported by cpuid and, for the AVX families, with their state saved by
// the OS. The "reported" fields say what cpuid claims, for messages ("this VM reports
// AVX-512 but does not save its registers").
struct CpuFeatures {
  std::string vendor;
  bool sse3 = false, ssse3 = false, sse4_1 = false, sse4_2 = false;
  bool fma4 = false;  // AMD's 4-operand FMA (Bulldozer … Steamroller kernels use it)
  bool avx = false, avx2 = false, fma = false;
  bool avx512f = false, avx512dq = false, avx512cd = false, avx512bw = false, avx512vl = false;
  bool avx512_bf16 = false;
  bool avx_reported = false;     // cpuid says AVX, whatever the OS saves
  bool avx512_reported = false;  // cpuid says AVX-512 F, whatever the OS saves

  // AVX2 with FMA3: what OpenBLAS's Haswell kernels use.
  bool avx2_fma() const { return avx2 && fma; }
  // The AVX-512 subsets OpenBLAS's SkylakeX kernels use (F, DQ, CD, BW, VL), on AVX2+FMA.
  bool avx512_skylakex() const {
    return avx2_fma() && avx512f && avx512dq && avx512cd && avx512bw && avx512vl;
  }
  bool avx512_cooperlake() const { return avx512_skylakex() && avx512_bf16; }
  // One line for messages: "AVX-512 BF16", "AVX2+FMA", "SSE4.2", … (the newest level).
  std::string summary() const;
};

// Pure: the features `snapshot` describes.
CpuFeatures decode_cpu_features(const CpuidSnapshot& snapshot);

// This CPU's registers (cpuid and XGETBV instructions; an empty snapshot off x86).
CpuidSnapshot read_cpuid();

// This CPU's features, decoded once per process. For tests of what depends on a weaker
// CPU, CAIRN_TEST_CPU_WITHOUT (comma-separated: "avx512", "avx2", "avx") removes a family
// and everything newer, as an OS that does not save its state would.
const CpuFeatures& this_cpu_features();

}  // namespace cairn
