// The cluster key: a file of random bytes that every machine of a team holds. It is the
// pre-shared key of TLS 1.3 (tls_context.h), so it both authenticates the two ends of every
// peer connection and keys their encryption. Only its id — the first 8 bytes of its SHA-256,
// in hex — is ever shown (logs, errors, `cairn peers`); never the key.
//
// Without a key file, cairn uses "no key": a fixed, public key with the id "none". It
// authenticates nothing, which is why an agent without a key listens on loopback only
// (docs/peers.md).
//
// Thread-safety: pure functions and values.
#pragma once

#include <filesystem>
#include <string>

#include "common/status.h"

namespace cairn {

// Bounds of a key file's size: shorter is too guessable, longer is not a key.
inline constexpr size_t kMinClusterKeyBytes = 16;
inline constexpr size_t kMaxClusterKeyBytes = 4096;
// What `cairn agent --new-key` writes.
inline constexpr size_t kNewClusterKeyBytes = 32;

struct ClusterKey {
  std::string bytes;  // the secret
  std::string id;     // 16 hex digits, or "none"
  bool none() const { return id == "none"; }
};

// The id of a key's bytes: the first 8 bytes of their SHA-256, in hex.
std::string cluster_key_id(const std::string& bytes);

// The public stand-in used when there is no key file.
ClusterKey no_cluster_key();

// The key in `file`. kBadInput with one line naming the file when it cannot be read, when
// group or others may read or write it (its mode is named, and the chmod that fixes it), or
// when its size is outside [kMinClusterKeyBytes, kMaxClusterKeyBytes]; kNotFound when it does
// not exist.
Result<ClusterKey> load_cluster_key(const std::filesystem::path& file);

// Writes a new key of kNewClusterKeyBytes random bytes (OpenSSL's RAND_bytes) to `file`,
// mode 0600, created exclusively (an existing file is never overwritten: that would lock a
// team out) and fsynced with its directory; makes the directory (0700) when missing.
Result<ClusterKey> write_new_cluster_key(const std::filesystem::path& file);

}  // namespace cairn
