// The content-addressed object store (`.cairn/objects/ab/cdef…`): a file's name is the
// SHA-256 of its bytes, so identical content is stored once, whichever checkpoint or
// experiment it came from. Objects are immutable; a new one is written to a temporary name,
// fsynced and renamed into place, so a crash never leaves a partial object under its hash.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "common/status.h"

namespace cairn {

class ObjectStore {
 public:
  explicit ObjectStore(std::filesystem::path objects_dir) : dir_(std::move(objects_dir)) {}

  std::filesystem::path path_of(const std::string& hash) const;
  bool contains(const std::string& hash) const;

  // Hashes `file` and moves it into the store (it must be on the same file system; the
  // staging area is). When the content is already stored the file is simply removed.
  // Sets *added to whether the object is new.
  Result<std::string> adopt(const std::filesystem::path& file, uint64_t* size, bool* added);
  // Copies `file` into the store, hashing while copying; the file itself is left alone
  // (used for data files, which stay the user's).
  Result<std::string> copy_in(const std::filesystem::path& file, uint64_t* size, bool* added);
  // Stores `bytes` (used for manifests).
  Result<std::string> put_bytes(std::string_view bytes);
  Result<std::string> read(const std::string& hash) const;  // verifies the hash
  // Copies an object to `dest`, verifying its hash while copying. Corrupt when it differs.
  Status copy_out(const std::string& hash, const std::filesystem::path& dest) const;
  Status verify(const std::string& hash) const;
  Status remove(const std::string& hash);

 private:
  Status install(const std::filesystem::path& tmp, const std::string& hash, bool* added);
  std::filesystem::path dir_;
};

}  // namespace cairn
