// Which of OpenBLAS's kernel sets ("core types") builtin:mlp runs, and why (issue 22).
//
// cairn links an OpenBLAS built with DYNAMIC_ARCH: at start-up it picks a kernel set from
// the CPU's model, or takes the one OPENBLAS_CORETYPE names. An OpenBLAS older than the
// CPU may not know the model and fall back to old kernels: 0.3.21 runs its SSE3 "Prescott"
// kernels on Intel models it has no case for (Emerald and Granite Rapids Xeons fall
// through to its Pentium 4 branch), 4× slower than the CPU allows. So cairn decides from
// the instruction sets the CPU and the OS support (common/cpu_features.h) and hands the
// choice to the trial in its environment, before OpenBLAS initialises.
//
// Everything here but openblas_own_choice() is pure: the decision is unit-tested with the
// features of CPUs this machine is not. Thread-safety: pure functions; callable anywhere.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/cpu_features.h"

namespace cairn::blas {

// What a core type's kernels need, oldest first: a later level includes the earlier ones.
enum class IsaLevel {
  kUnknown,
  kSse2,
  kSse3,
  kSsse3,
  kSse42,
  kAvx,
  kAvx2Fma,
  kAvx512,      // F, DQ, CD, BW, VL (OpenBLAS's SkylakeX kernels)
  kAvx512Bf16,  // and BF16 (Cooperlake)
};

// "AVX-512 BF16", "AVX2+FMA", … for messages.
std::string_view isa_text(IsaLevel level);

struct CoreType {
  std::string_view name;  // as OpenBLAS spells it (openblas_get_corename())
  IsaLevel needs = IsaLevel::kUnknown;
  bool needs_fma4 = false;  // AMD Bulldozer … Steamroller kernels
};

// The x86-64 core types of OpenBLAS's DYNAMIC_ARCH builds, found by name ignoring case (as
// OpenBLAS reads OPENBLAS_CORETYPE); nullopt for a name it is not (a newer OpenBLAS's, a
// typo, another architecture's).
std::optional<CoreType> find_core_type(std::string_view name);

// Whether `cpu` can run `core`'s kernels; without, OpenBLAS dies of SIGILL.
bool can_run(const CoreType& core, const CpuFeatures& cpu);

// What `core` needs that `cpu` lacks, for messages ("AVX-512 BF16"); "" when it runs.
std::string missing_for(const CoreType& core, const CpuFeatures& cpu);

// The newest core type for `cpu`: Cooperlake (AVX-512 BF16), SkylakeX (AVX-512), Haswell
// (AVX2+FMA), Sandybridge (AVX), Nehalem (SSE4.2), Core2 (SSSE3), Prescott (SSE3); nullopt
// where cpuid reports nothing (not x86), where cairn leaves OpenBLAS to itself.
std::optional<CoreType> newest_core_type(const CpuFeatures& cpu);

// What `deterministic: true` pins: Haswell on every CPU with AVX2+FMA, so that any two
// such machines run the same kernels and give the same bits (the golden tests' kernels);
// elsewhere the newest the CPU has.
std::optional<CoreType> deterministic_core_type(const CpuFeatures& cpu);

// Whether OpenBLAS's own choice `openblas_core` runs older kernels than `cpu` supports: a
// lower level than newest_core_type(cpu), or a name cairn does not know.
bool falls_short(std::string_view openblas_core, const CpuFeatures& cpu);

// Who decided a trial's core type; recorded with the trial as its name().
enum class CoreSource {
  kCairn,          // OpenBLAS's own choice fell short: the newest the CPU supports
  kOpenblas,       // OpenBLAS's own choice, which is as new as the CPU allows
  kUser,           // OPENBLAS_CORETYPE in the trial's environment
  kDeterministic,  // deterministic: true's pin
  kRecorded,       // an earlier attempt's, or the reproduced trial's (deterministic mode)
};
std::string_view source_name(CoreSource source);
std::optional<CoreSource> parse_source(std::string_view name);

struct CoreRequest {
  CpuFeatures cpu;
  std::string openblas_own;  // OpenBLAS's choice without OPENBLAS_CORETYPE; "" unknown
  std::string user;          // OPENBLAS_CORETYPE in the trial's environment; "" unset
  std::string recorded;      // what the trial (or the one reproduced) ran; "" none
  bool deterministic = false;
};

struct CoreChoice {
  std::string core;  // the OPENBLAS_CORETYPE to set; "" leaves OpenBLAS to itself
  CoreSource source = CoreSource::kOpenblas;
  std::string warning;  // what the user should be told; "" nothing
};

// The rules, in order:
// 1. deterministic, with a recorded core: the recorded one, so a trial never switches
//    kernels mid-run and a reproduction runs the original's; a different OPENBLAS_CORETYPE
//    is ignored, with a warning. A recorded core this CPU cannot run is replaced (warning:
//    the results will differ), by the rules below.
// 2. OPENBLAS_CORETYPE set by the user: it wins (in deterministic mode it is then recorded
//    like any other choice), unless it names kernels this CPU cannot run (warning, ignored).
// 3. deterministic: deterministic_core_type().
// 4. OpenBLAS's own choice when it is as new as the CPU allows (its kernels for that model
//    are tuned: Zen on a Zen 3), else newest_core_type().
CoreChoice choose_core_type(const CoreRequest& request);

// "" when OpenBLAS runs the kernels OPENBLAS_CORETYPE names (or the variable is unset), else
// a warning saying it does not: a name this OpenBLAS does not know, which it replaces by
// the newest kernels it has for the CPU.
std::string coretype_mismatch();

// OpenBLAS's own choice in this process: the core in use when OPENBLAS_CORETYPE is unset
// (or empty), "" when it is set (the core in use is then the forced one).
std::string openblas_own_choice();

}  // namespace cairn::blas
