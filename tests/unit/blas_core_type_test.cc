// The CPU features cairn decodes from cpuid/XGETBV (common/cpu_features.h) and the OpenBLAS
// core type it chooses from them (trainer/blas_core_type.h), for CPUs this machine is not.
#include "trainer/blas_core_type.h"

#include <doctest/doctest.h>

#include <initializer_list>

#include "common/cpu_features.h"
#include "trainer/blas.h"

namespace cairn::blas {

namespace {

// Register bits (Intel SDM vol. 2, CPUID).
enum Leaf1Ecx {
  kSse3 = 0,
  kSsse3 = 9,
  kFma = 12,
  kSse41 = 19,
  kSse42 = 20,
  kOsxsave = 27,
  kAvx = 28
};
enum Leaf7Ebx {
  kAvx2 = 5,
  kAvx512F = 16,
  kAvx512Dq = 17,
  kAvx512Cd = 28,
  kAvx512Bw = 30,
  kAvx512Vl = 31
};
constexpr int kAvx512Bf16 = 5;  // CPUID.(7,1):EAX
constexpr int kFma4 = 16;       // CPUID.0x80000001:ECX
constexpr uint64_t kXcr0Sse = 0x3, kXcr0Avx = 0x7, kXcr0Avx512 = 0xe7;

uint32_t bits(std::initializer_list<int> ns) {
  uint32_t word = 0;
  for (int n : ns) word |= 1u << n;
  return word;
}

CpuidSnapshot sse42_cpu() {
  CpuidSnapshot s;
  s.vendor = "GenuineIntel";
  s.max_leaf = 0x20;
  s.leaf1.ecx = bits({kSse3, kSsse3, kSse41, kSse42});
  s.max_extended = 0x80000008u;
  s.xcr0 = 0;
  return s;
}

CpuidSnapshot avx_cpu(uint64_t xcr0 = kXcr0Avx) {  // Sandy Bridge
  CpuidSnapshot s = sse42_cpu();
  s.leaf1.ecx |= bits({kOsxsave, kAvx});
  s.xcr0 = xcr0;
  return s;
}

CpuidSnapshot haswell_cpu(uint64_t xcr0 = kXcr0Avx) {
  CpuidSnapshot s = avx_cpu(xcr0);
  s.leaf1.ecx |= bits({kFma});
  s.leaf7.ebx = bits({kAvx2});
  return s;
}

CpuidSnapshot skylakex_cpu(uint64_t xcr0 = kXcr0Avx512) {
  CpuidSnapshot s = haswell_cpu(xcr0);
  s.leaf7.ebx |= bits({kAvx512F, kAvx512Dq, kAvx512Cd, kAvx512Bw, kAvx512Vl});
  return s;
}

// A Xeon with AVX-512 BF16 and AMX (the issue's), whose tile state is in XCR0 too.
CpuidSnapshot xeon_amx_cpu(uint64_t xcr0 = 0x602e7) {
  CpuidSnapshot s = skylakex_cpu(xcr0);
  s.leaf7.eax = 2;  // highest subleaf
  s.leaf7_1.eax = bits({kAvx512Bf16});
  return s;
}

// This VM's AMD EPYC (family 0x1A, Zen 5), as read on 2026-11-26.
CpuidSnapshot zen5_cpu() {
  CpuidSnapshot s;
  s.vendor = "AuthenticAMD";
  s.max_leaf = 0x10;
  s.leaf1 = {0xb00f21, 0, 0xfffa3203, 0};
  s.leaf7 = {1, 0xf1bf07ab, 0x405fc6, 0x110};
  s.leaf7_1 = {0x30, 0, 0, 0};
  s.max_extended = 0x80000021u;
  s.extended1 = {0, 0, 0x4003f3, 0};
  s.xcr0 = 0xe7;
  return s;
}

CpuFeatures cpu(const CpuidSnapshot& s) {
  return decode_cpu_features(s);
}

std::string newest(const CpuidSnapshot& s) {
  auto core = newest_core_type(cpu(s));
  return core ? std::string(core->name) : "(none)";
}

CoreChoice choose(const CpuidSnapshot& s, std::string own, std::string user = "",
                  std::string recorded = "", bool deterministic = false) {
  return choose_core_type(
      {cpu(s), std::move(own), std::move(user), std::move(recorded), deterministic});
}

}  // namespace

TEST_CASE("decode_cpu_features: AVX needs the OS to save YMM, AVX-512 the ZMM state") {
  const CpuFeatures spr = cpu(xeon_amx_cpu());
  CHECK(spr.avx512_cooperlake());
  CHECK(spr.summary() == "AVX-512 BF16");

  // A VM that reports AVX-512 and saves only up to YMM (XCR0 = 7): AVX2 is usable, AVX-512
  // is not, though cpuid says it is there.
  const CpuFeatures vm = cpu(xeon_amx_cpu(kXcr0Avx));
  CHECK(vm.avx512_reported);
  CHECK_FALSE(vm.avx512f);
  CHECK_FALSE(vm.avx512_bf16);
  CHECK(vm.avx2_fma());
  CHECK(vm.summary() == "AVX2+FMA");

  // An OS that saves no AVX state: nothing AVX, SSE4.2 is the most.
  const CpuFeatures no_avx_os = cpu(haswell_cpu(kXcr0Sse));
  CHECK(no_avx_os.avx_reported);
  CHECK_FALSE(no_avx_os.avx);
  CHECK_FALSE(no_avx_os.avx2);
  CHECK_FALSE(no_avx_os.fma);
  CHECK(no_avx_os.summary() == "SSE4.2");

  // OSXSAVE clear: XCR0 cannot be read, so no AVX whatever the snapshot's xcr0 says.
  CpuidSnapshot no_osxsave = haswell_cpu();
  no_osxsave.leaf1.ecx &= ~bits({kOsxsave});
  CHECK_FALSE(cpu(no_osxsave).avx);

  // BF16 is in subleaf 1, which exists only when subleaf 0 says so.
  CpuidSnapshot no_subleaf = xeon_amx_cpu();
  no_subleaf.leaf7.eax = 0;
  CHECK_FALSE(cpu(no_subleaf).avx512_bf16);
  CHECK(cpu(no_subleaf).avx512_skylakex());

  // AVX-512 without VL (Knights Landing) is not what the SkylakeX kernels need.
  CpuidSnapshot knl = skylakex_cpu();
  knl.leaf7.ebx &= ~bits({kAvx512Vl, kAvx512Bw, kAvx512Dq});
  CHECK(cpu(knl).avx512f);
  CHECK_FALSE(cpu(knl).avx512_skylakex());

  const CpuFeatures zen5 = cpu(zen5_cpu());
  CHECK(zen5.avx512_cooperlake());
  CHECK_FALSE(zen5.fma4);

  CHECK(cpu(CpuidSnapshot{}).summary() == "not x86");
}

TEST_CASE("newest_core_type: the newest OpenBLAS kernels the CPU and the OS support") {
  CHECK(newest(xeon_amx_cpu()) == "Cooperlake");
  CHECK(newest(zen5_cpu()) == "Cooperlake");
  CHECK(newest(skylakex_cpu()) == "SkylakeX");
  CHECK(newest(xeon_amx_cpu(kXcr0Avx)) == "Haswell");  // the VM above
  CHECK(newest(haswell_cpu()) == "Haswell");
  CHECK(newest(avx_cpu()) == "Sandybridge");
  CHECK(newest(haswell_cpu(kXcr0Sse)) == "Nehalem");
  CpuidSnapshot core2 = sse42_cpu();
  core2.leaf1.ecx = bits({kSse3, kSsse3});
  CHECK(newest(core2) == "Core2");
  CpuidSnapshot prescott = sse42_cpu();
  prescott.leaf1.ecx = bits({kSse3});
  CHECK(newest(prescott) == "Prescott");
  CHECK(newest(CpuidSnapshot{}) == "(none)");  // not x86: cairn leaves OpenBLAS alone
}

TEST_CASE("find_core_type and can_run: OpenBLAS's names, ignoring case, and what they need") {
  REQUIRE(find_core_type("skylakex"));
  CHECK(find_core_type("skylakex")->name == "SkylakeX");
  CHECK_FALSE(find_core_type("SapphireRapids"));  // newer than the OpenBLAS cairn links
  CHECK_FALSE(find_core_type(""));

  const CpuFeatures hsw = cpu(haswell_cpu());
  CHECK(can_run(*find_core_type("Haswell"), hsw));
  CHECK(can_run(*find_core_type("Zen"), hsw));
  CHECK(can_run(*find_core_type("Prescott"), hsw));
  CHECK_FALSE(can_run(*find_core_type("SkylakeX"), hsw));
  CHECK(missing_for(*find_core_type("SkylakeX"), hsw) == "AVX-512");
  CHECK(missing_for(*find_core_type("Cooperlake"), cpu(skylakex_cpu())) == "AVX-512 BF16");
  // AMD's family 15h kernels use FMA4, which neither Intel nor Zen has.
  CHECK(missing_for(*find_core_type("Piledriver"), hsw) == "FMA4");
  CpuidSnapshot piledriver = haswell_cpu();
  piledriver.leaf7.ebx = 0;
  piledriver.extended1.ecx = bits({kFma4});
  CHECK(can_run(*find_core_type("Piledriver"), cpu(piledriver)));
  CHECK_FALSE(can_run(*find_core_type("Excavator"), cpu(piledriver)));  // no AVX2
}

TEST_CASE("falls_short: OpenBLAS's own choice is older than the CPU supports") {
  CHECK(falls_short("Prescott", cpu(xeon_amx_cpu())));  // the Xeon
  CHECK(falls_short("Haswell", cpu(zen5_cpu())));       // this VM
  CHECK_FALSE(falls_short("Cooperlake", cpu(zen5_cpu())));
  CHECK_FALSE(falls_short("Zen", cpu(haswell_cpu())));  // as new: OpenBLAS's tuned kernels
  CHECK_FALSE(falls_short("Haswell", cpu(xeon_amx_cpu(kXcr0Avx))));
  CHECK(falls_short("SomethingNew", cpu(haswell_cpu())));  // unknown: cairn cannot tell
  CHECK_FALSE(falls_short("Prescott", cpu(CpuidSnapshot{})));
}

TEST_CASE("choose_core_type: the newest kernels when OpenBLAS's own fall short") {
  CoreChoice c = choose(xeon_amx_cpu(), "Prescott");
  CHECK(c.core == "Cooperlake");
  CHECK(c.source == CoreSource::kCairn);
  CHECK(c.warning.empty());

  c = choose(zen5_cpu(), "Haswell");
  CHECK(c.core == "Cooperlake");
  CHECK(c.source == CoreSource::kCairn);

  // As new as the CPU allows: OpenBLAS's own choice (its Zen kernels are tuned for Zen).
  c = choose(haswell_cpu(), "Zen");
  CHECK(c.core == "Zen");
  CHECK(c.source == CoreSource::kOpenblas);
  c = choose(skylakex_cpu(), "SkylakeX");
  CHECK(c.core == "SkylakeX");
  CHECK(c.source == CoreSource::kOpenblas);

  // The VM that reports AVX-512 without saving it: never the AVX-512 kernels.
  c = choose(xeon_amx_cpu(kXcr0Avx), "Prescott");
  CHECK(c.core == "Haswell");

  // OpenBLAS's choice unknown (a forced variable in the deciding process): cairn's.
  c = choose(skylakex_cpu(), "");
  CHECK(c.core == "SkylakeX");
  CHECK(c.source == CoreSource::kCairn);

  // Not x86: OpenBLAS decides.
  c = choose(CpuidSnapshot{}, "NeoverseN1");
  CHECK(c.core == "NeoverseN1");
  CHECK(c.source == CoreSource::kOpenblas);
}

TEST_CASE("choose_core_type: the user's OPENBLAS_CORETYPE wins, unless the CPU cannot run it") {
  CoreChoice c = choose(zen5_cpu(), "Haswell", "Haswell");
  CHECK(c.core == "Haswell");
  CHECK(c.source == CoreSource::kUser);
  CHECK(c.warning.empty());

  // A name cairn does not know is OpenBLAS's to judge.
  c = choose(zen5_cpu(), "Haswell", "SapphireRapids");
  CHECK(c.core == "SapphireRapids");
  CHECK(c.source == CoreSource::kUser);

  // Kernels the CPU cannot run would kill the trial with SIGILL: ignored, said.
  c = choose(haswell_cpu(), "Haswell", "SkylakeX");
  CHECK(c.core == "Haswell");
  CHECK(c.source == CoreSource::kOpenblas);
  CHECK(c.warning ==
        "OPENBLAS_CORETYPE=SkylakeX is ignored: this CPU cannot run those kernels "
        "(they need AVX-512)");

  // Recorded kernels outside deterministic mode do not count: the machine's best.
  c = choose(zen5_cpu(), "Haswell", "", "Haswell");
  CHECK(c.core == "Cooperlake");
  CHECK(c.source == CoreSource::kCairn);
}

TEST_CASE("choose_core_type: deterministic mode pins Haswell on AVX2+FMA and keeps the record") {
  for (const CpuidSnapshot& s : {zen5_cpu(), xeon_amx_cpu(), skylakex_cpu(), haswell_cpu()}) {
    const CoreChoice c = choose(s, "Prescott", "", "", true);
    CHECK(c.core == "Haswell");
    CHECK(c.source == CoreSource::kDeterministic);
  }
  // Without AVX2+FMA: the newest the CPU has (the same bits only on the same kernels).
  CHECK(choose(avx_cpu(), "Sandybridge", "", "", true).core == "Sandybridge");
  CHECK(choose(avx_cpu(), "Sandybridge", "", "", true).source == CoreSource::kDeterministic);

  // The user's choice is recorded like any other: it wins while nothing is recorded.
  CoreChoice c = choose(zen5_cpu(), "Haswell", "SkylakeX", "", true);
  CHECK(c.core == "SkylakeX");
  CHECK(c.source == CoreSource::kUser);

  // Recorded: reused, whatever OpenBLAS or the user would pick now.
  c = choose(zen5_cpu(), "Haswell", "", "Prescott", true);
  CHECK(c.core == "Prescott");
  CHECK(c.source == CoreSource::kRecorded);
  CHECK(c.warning.empty());
  c = choose(zen5_cpu(), "Haswell", "SkylakeX", "Haswell", true);
  CHECK(c.core == "Haswell");
  CHECK(c.source == CoreSource::kRecorded);
  CHECK(c.warning ==
        "OPENBLAS_CORETYPE=SkylakeX is ignored: the trial ran OpenBLAS's Haswell "
        "kernels, which deterministic: true keeps");
  // The same name in another case is no conflict.
  CHECK(choose(zen5_cpu(), "Haswell", "haswell", "Haswell", true).warning.empty());

  // Recorded kernels this CPU cannot run: replaced, and said.
  c = choose(haswell_cpu(), "Haswell", "", "SkylakeX", true);
  CHECK(c.core == "Haswell");
  CHECK(c.source == CoreSource::kDeterministic);
  CHECK(c.warning ==
        "this CPU cannot run the recorded OpenBLAS SkylakeX kernels (they need AVX-512): the "
        "trial runs other kernels, and its results will differ from the recorded ones");
  c = choose(avx_cpu(), "Sandybridge", "", "Haswell", true);
  CHECK(c.core == "Sandybridge");
  CHECK(c.warning.find("(they need AVX2+FMA)") != std::string::npos);
}

TEST_CASE("source_name and parse_source round-trip; the record's words") {
  for (CoreSource s : {CoreSource::kCairn, CoreSource::kOpenblas, CoreSource::kUser,
                       CoreSource::kDeterministic, CoreSource::kRecorded})
    CHECK(parse_source(source_name(s)) == s);
  CHECK_FALSE(parse_source("someone"));
}

TEST_CASE("this process: OpenBLAS names a core cairn knows, and this CPU can run it") {
  // The statically linked OpenBLAS (DYNAMIC_ARCH) reports the kernels it runs here.
  const std::string in_use = core_in_use();
  CHECK_FALSE(in_use.empty());
  CHECK(config().find("DYNAMIC_ARCH") != std::string::npos);
#if defined(__x86_64__)
  const auto core = find_core_type(in_use);
  REQUIRE_MESSAGE(core, "OpenBLAS runs a core cairn does not know: " << in_use);
  CHECK(can_run(*core, this_cpu_features()));
  CHECK(newest_core_type(this_cpu_features()));
#endif
}

}  // namespace cairn::blas
