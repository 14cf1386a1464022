#include "trainer/blas_core_type.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>

#include "trainer/blas.h"

namespace cairn::blas {

namespace {

// OpenBLAS 0.3.21's x86-64 names (driver/others/dynamic.c), with what their kernels use.
// Conservative where a family is mixed: a core marked as needing more than it does is at
// worst not chosen, one marked as needing less could be started on a CPU it kills.
// 32-bit-only cores (Katmai, Coppermine, Banias, Athlon) are left out: a 64-bit OpenBLAS
// runs Prescott's in their place. Newer OpenBLAS names (SapphireRapids, …) are unknown here,
// as they are to the OpenBLAS cairn links.
constexpr std::array<CoreType, 21> kCoreTypes = {{
    {"Northwood", IsaLevel::kSse2},
    {"Opteron", IsaLevel::kSse2},
    {"Prescott", IsaLevel::kSse3},
    {"Opteron_SSE3", IsaLevel::kSse3},
    {"Barcelona", IsaLevel::kSse3},
    {"Atom", IsaLevel::kSsse3},
    {"Core2", IsaLevel::kSsse3},
    {"Penryn", IsaLevel::kSsse3},
    {"Dunnington", IsaLevel::kSsse3},
    {"Nano", IsaLevel::kSsse3},
    {"Bobcat", IsaLevel::kSsse3},
    {"Nehalem", IsaLevel::kSse42},
    {"Sandybridge", IsaLevel::kAvx},
    {"Bulldozer", IsaLevel::kAvx, /*needs_fma4=*/true},
    {"Piledriver", IsaLevel::kAvx, true},
    {"Steamroller", IsaLevel::kAvx, true},
    {"Excavator", IsaLevel::kAvx2Fma, true},
    {"Haswell", IsaLevel::kAvx2Fma},
    {"Zen", IsaLevel::kAvx2Fma},
    {"SkylakeX", IsaLevel::kAvx512},
    {"Cooperlake", IsaLevel::kAvx512Bf16},
}};

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

CoreType named(std::string_view name) {
  return *find_core_type(name);
}

// The highest level `cpu` supports.
IsaLevel cpu_level(const CpuFeatures& cpu) {
  if (cpu.avx512_cooperlake()) return IsaLevel::kAvx512Bf16;
  if (cpu.avx512_skylakex()) return IsaLevel::kAvx512;
  if (cpu.avx2_fma()) return IsaLevel::kAvx2Fma;
  if (cpu.avx) return IsaLevel::kAvx;
  if (cpu.sse4_2) return IsaLevel::kSse42;
  if (cpu.ssse3) return IsaLevel::kSsse3;
  if (cpu.sse3) return IsaLevel::kSse3;
  return cpu.vendor.empty() ? IsaLevel::kUnknown : IsaLevel::kSse2;
}

std::string var(std::string_view core) {
  return "OPENBLAS_CORETYPE=" + std::string(core);
}

}  // namespace

std::string_view isa_text(IsaLevel level) {
  switch (level) {
    case IsaLevel::kUnknown:
      return "an unknown instruction set";
    case IsaLevel::kSse2:
      return "SSE2";
    case IsaLevel::kSse3:
      return "SSE3";
    case IsaLevel::kSsse3:
      return "SSSE3";
    case IsaLevel::kSse42:
      return "SSE4.2";
    case IsaLevel::kAvx:
      return "AVX";
    case IsaLevel::kAvx2Fma:
      return "AVX2+FMA";
    case IsaLevel::kAvx512:
      return "AVX-512";
    case IsaLevel::kAvx512Bf16:
      return "AVX-512 BF16";
  }
  return "";
}

std::optional<CoreType> find_core_type(std::string_view name) {
  for (const CoreType& core : kCoreTypes)
    if (same_name(core.name, name)) return core;
  return std::nullopt;
}

bool can_run(const CoreType& core, const CpuFeatures& cpu) {
  return missing_for(core, cpu).empty();
}

std::string missing_for(const CoreType& core, const CpuFeatures& cpu) {
  std::string missing;
  if (core.needs == IsaLevel::kUnknown || cpu_level(cpu) < core.needs)
    missing = std::string(isa_text(core.needs));
  if (core.needs_fma4 && !cpu.fma4) missing += missing.empty() ? "FMA4" : " and FMA4";
  return missing;
}

std::optional<CoreType> newest_core_type(const CpuFeatures& cpu) {
  switch (cpu_level(cpu)) {
    case IsaLevel::kAvx512Bf16:
      return named("Cooperlake");
    case IsaLevel::kAvx512:
      return named("SkylakeX");
    case IsaLevel::kAvx2Fma:
      return named("Haswell");
    case IsaLevel::kAvx:
      return named("Sandybridge");
    case IsaLevel::kSse42:
      return named("Nehalem");
    case IsaLevel::kSsse3:
      return named("Core2");
    case IsaLevel::kSse3:
    case IsaLevel::kSse2:
      return named("Prescott");
    case IsaLevel::kUnknown:
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<CoreType> deterministic_core_type(const CpuFeatures& cpu) {
  if (cpu.avx2_fma()) return named("Haswell");
  return newest_core_type(cpu);
}

bool falls_short(std::string_view openblas_core, const CpuFeatures& cpu) {
  const auto newest = newest_core_type(cpu);
  if (!newest) return false;
  const auto own = find_core_type(openblas_core);
  return !own || own->needs < newest->needs;
}

std::string_view source_name(CoreSource source) {
  switch (source) {
    case CoreSource::kCairn:
      return "cairn";
    case CoreSource::kOpenblas:
      return "openblas";
    case CoreSource::kUser:
      return "user";
    case CoreSource::kDeterministic:
      return "deterministic";
    case CoreSource::kRecorded:
      return "recorded";
  }
  return "";
}

std::optional<CoreSource> parse_source(std::string_view name) {
  for (CoreSource s : {CoreSource::kCairn, CoreSource::kOpenblas, CoreSource::kUser,
                       CoreSource::kDeterministic, CoreSource::kRecorded})
    if (source_name(s) == name) return s;
  return std::nullopt;
}

CoreChoice choose_core_type(const CoreRequest& r) {
  std::string warning;
  auto add_warning = [&](const std::string& text) {
    warning += (warning.empty() ? "" : "; ") + text;
  };
  if (r.deterministic && !r.recorded.empty()) {
    const auto recorded = find_core_type(r.recorded);
    // A name this cairn does not know was recorded by another OpenBLAS: passed on, as
    // OpenBLAS reads it (it falls back to its own choice when it does not know it either).
    if (!recorded || can_run(*recorded, r.cpu)) {
      if (!r.user.empty() && !same_name(r.user, r.recorded))
        add_warning(var(r.user) + " is ignored: the trial ran OpenBLAS's " + r.recorded +
                    " kernels, which deterministic: true keeps");
      return {r.recorded, CoreSource::kRecorded, warning};
    }
    add_warning("this CPU cannot run the recorded OpenBLAS " + r.recorded + " kernels (they need " +
                missing_for(*recorded, r.cpu) +
                "): the trial runs other kernels, and its results will differ from the recorded "
                "ones");
  }
  // The user's variable, where no recorded kernels decided.
  if (!r.user.empty()) {
    const auto user = find_core_type(r.user);
    if (!user || can_run(*user, r.cpu)) return {r.user, CoreSource::kUser, warning};
    add_warning(var(r.user) + " is ignored: this CPU cannot run those kernels (they need " +
                missing_for(*user, r.cpu) + ")");
  }
  if (r.deterministic) {
    if (const auto pinned = deterministic_core_type(r.cpu))
      return {std::string(pinned->name), CoreSource::kDeterministic, warning};
    return {r.openblas_own, CoreSource::kOpenblas, warning};
  }
  const auto newest = newest_core_type(r.cpu);
  if (!newest) return {r.openblas_own, CoreSource::kOpenblas, warning};
  if (const auto own = find_core_type(r.openblas_own);
      own && own->needs >= newest->needs && can_run(*own, r.cpu))
    return {std::string(own->name), CoreSource::kOpenblas, warning};
  return {std::string(newest->name), CoreSource::kCairn, warning};
}

std::string coretype_mismatch() {
  const char* asked = std::getenv("OPENBLAS_CORETYPE");
  if (asked == nullptr || *asked == '\0') return "";
  const std::string running = core_in_use();
  if (same_name(asked, running)) return "";
  return var(asked) + ", but OpenBLAS runs its " + running +
         " kernels (this OpenBLAS does not know " + asked + ")";
}

std::string openblas_own_choice() {
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  if (forced != nullptr && *forced != '\0') return "";
  return core_in_use();
}

}  // namespace cairn::blas
