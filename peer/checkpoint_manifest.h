// A checkpoint directory as it travels between a coordinator and an agent (docs/peers.md
// "Checkpoints over the wire"): the list of its regular files — relative '/'-separated path,
// size, permission bits and SHA-256 — from which the receiving side decides which contents
// it lacks. Only those contents travel (checkpoint_wire.h).
//
// A manifest from the other side is untrusted input, even from an authenticated peer: it
// names files that will be written below a directory, so parse_wire_manifest checks every
// entry strictly (relative paths without "..", "." or empty parts, no duplicates, no file
// that is also another's directory, bounded counts, lengths and sizes, 64 lowercase hex
// digits) and refuses the whole manifest with one line on the first fault.
//
// Thread-safety: pure functions (scan_checkpoint_dir reads the file system).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "common/json.h"
#include "common/status.h"

namespace cairn {

// Bounds on what a manifest may name. A manifest travels in one frame (1 MiB), which bounds
// it further in practice.
inline constexpr size_t kMaxManifestFiles = 10000;
inline constexpr size_t kMaxManifestPathBytes = 1024;
inline constexpr size_t kMaxManifestPathDepth = 64;
inline constexpr uint64_t kMaxManifestFileBytes = uint64_t{1} << 40;   // 1 TiB
inline constexpr uint64_t kMaxManifestTotalBytes = uint64_t{1} << 42;  // 4 TiB

struct WireFile {
  std::string path;  // relative, '/'-separated, checked
  uint64_t size = 0;
  uint32_t mode = 0644;  // permission bits only (at most 0777)
  std::string sha256;    // 64 lowercase hex digits
};

struct WireManifest {
  std::vector<WireFile> files;  // sorted by path
  uint64_t bytes = 0;           // the sum of the sizes
  // {"files": [{"path", "size", "mode", "sha256"}, …], "bytes": N}
  Json to_json() const;
};

// Whether `digest` is 64 lowercase hex digits.
bool is_sha256_hex(const std::string& digest);
// Checks one relative path as a manifest may hold it; the error says what is wrong.
Status check_manifest_path(const std::string& path);
// A trial id as a message may name it: one path component of at most 64 characters of
// [A-Za-z0-9._-], not "." or "..".
Status check_trial_name(const std::string& trial);

// The manifest in `j` (an object with a "files" array, as to_json writes it), checked
// strictly; kBadInput with one line ("bad checkpoint manifest: …") on the first fault.
Result<WireManifest> parse_wire_manifest(const Json& j);

// Opens `rel` (a manifest path) below `dir` for reading without following any symlink on
// the way, so a directory swapped for a link after the manifest was made cannot lead out
// (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS; O_NOFOLLOW on the last part where
// the kernel lacks openat2). An invalid descriptor, errno set, on failure.
UniqueFd open_beneath(const std::filesystem::path& dir, const std::string& rel);

// The manifest of the directory `dir`, hashing every regular file. Refused (kBadInput, one
// line): a symlink anywhere below it (the store keeps files, and a link could lead out), a
// special file, more files or deeper paths than the bounds. `dir` itself must be a real
// directory (not a symlink).
Result<WireManifest> scan_checkpoint_dir(const std::filesystem::path& dir);

// What a scan learned of the files it hashed, for a later scan of the same directory: the
// agent's manifest of a staged directory fetched again after a dropped link
// (agent_checkpoints.h) does not read its files a second time (0.15 s of CPU per 256 MiB).
//
// A digest is reused only for a file whose identity — device, inode, size, mtime and ctime to
// the nanosecond — is the one it had while it was read, so a file changed since is hashed
// again, never sent under its old digest. ctime is the key that cannot be forged: a write,
// truncate, chmod or utimes (which can set mtime back) sets it to the kernel's clock, and no
// call sets it to a chosen value. Its limit is the clock's grain: the kernel stamps files with
// a coarse clock (one tick, 4 ms here), so a write in the same tick as the one before it may
// leave ctime unchanged. A digest is therefore kept only when the file's ctime was at least a
// tick (CLOCK_REALTIME_COARSE's resolution) older than the moment its reading began — every
// later write then stamps a later ctime — and when its identity did not change while it was
// read; a file whose ctime's nanoseconds are a whole number of milliseconds may come from a
// file system that keeps coarser times (1 s, 2 s), and needs 2 s more. Anything else (a file
// written in the same tick as the scan) is hashed again by the next scan. Files a scan no
// longer finds are forgotten.
struct FileIdentity {
  uint64_t device = 0, inode = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};
struct ScanCache {
  struct Entry {
    FileIdentity identity;
    std::string sha256;
  };
  std::map<std::string, Entry> files;  // by manifest path
};
struct ScanCounts {
  size_t hashed = 0;  // files read and hashed
  size_t reused = 0;  // files whose digest came from the cache, not read
};
// Whether a digest read from a file whose ctime was `ctime_ns` when its reading began at
// `read_ns` (both CLOCK_REALTIME nanoseconds) may be kept (ScanCache: a later write is sure
// to stamp another ctime).
bool scan_may_keep_digest(int64_t ctime_ns, int64_t read_ns);
// scan_checkpoint_dir, reusing `cache`'s digests where a file's identity is unchanged, and
// replacing `cache` with what this scan may let the next one reuse. `counts` may be null.
Result<WireManifest> scan_checkpoint_dir(const std::filesystem::path& dir, ScanCache& cache,
                                         ScanCounts* counts);

}  // namespace cairn
