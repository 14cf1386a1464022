// Compiled GPU kernels kept between trial processes. NVRTC takes about half a second to
// compile builtin:mlp's kernels, and every trial start pays it again: each resume of a
// paused trial, each rung promotion of an ASHA or Hyperband search, each restart. The
// coordinator names a directory in the store (CAIRN_KERNEL_CACHE, `.cairn/cache/kernels/`);
// an image compiled once is read back from there by later trials.
//
// An entry is named by the SHA-256 of everything the image depends on (the NVRTC version,
// the target, the options, the source), so a changed source or NVRTC is a different entry,
// never a stale one. Entries are sealed (common/sealed_text.h): one cut short or damaged is
// reported and replaced by a fresh compile, never loaded into the GPU.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace cairn::kernel_cache {

// The cache directory, from CAIRN_KERNEL_CACHE; empty when unset (nothing is cached: a
// standalone run, a test).
std::filesystem::path directory();

// Where the image for `key` (the description of what it was compiled from) lives in `dir`.
std::filesystem::path entry(const std::filesystem::path& dir, std::string_view key);

// The image cached for `key`, or nullopt when there is none. A damaged entry is removed
// and nullopt returned; `problem` then says so (for a warning), otherwise it is left empty.
std::optional<std::string> load(const std::filesystem::path& dir, std::string_view key,
                                std::string* problem);

// Keeps `image` for `key`. Best effort: a cache that cannot be written (a full disk, a
// read-only store) costs the next trial a compile, nothing more.
void save(const std::filesystem::path& dir, std::string_view key, std::string_view image);

}  // namespace cairn::kernel_cache
