// The content-addressed object store (`.cairn/objects/ab/cdef…`): a file's name is the
// SHA-256 of its bytes, so identical content is stored once, whichever checkpoint or
// experiment it came from. Objects are immutable; a new one is written to a temporary name,
// made durable and only then renamed into place, so a crash (power loss included) never
// leaves a partial object under its hash, and each call returns only once the names it
// added are durable too.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace cairn {

// One file adopted into the store.
struct AdoptedObject {
  std::string hash;
  uint64_t size = 0;
  bool added = false;  // false: the content was already stored
};

// One object to copy out: `size` is what the manifest recorded.
struct ObjectCopy {
  std::string hash;
  uint64_t size = 0;
  std::filesystem::path dest;
};

class ObjectStore {
 public:
  explicit ObjectStore(std::filesystem::path objects_dir) : dir_(std::move(objects_dir)) {}

  std::filesystem::path path_of(const std::string& hash) const;
  bool contains(const std::string& hash) const;

  // Hashes `file` and moves it into the store (it must be on the same file system; the
  // staging area is). When the content is already stored the file is simply removed.
  // Sets *added to whether the object is new.
  Result<std::string> adopt(const std::filesystem::path& file, uint64_t* size, bool* added);
  // adopt() for many files at once, as cheaply as one `cp` + `sync` of them: the files are
  // hashed in parallel while the kernel already writes them out, then every new object is
  // made durable in one go (one syncfs(2), or an fsync per file when there are few), renamed
  // into place, and each objects/xx directory that changed is fsynced once. Everything is
  // durable when it returns. The files stay where they are (hard links).
  //
  // `trailer` (optional) makes one more object from the files' hashes (a checkpoint's
  // manifest), stored in the same batch, so it costs no sync of its own; its id goes to
  // *trailer_hash. Nothing is renamed into place before everything is durable, so the
  // trailer never names an object that could be lost.
  //
  // `verified` (optional): the files' hashes, which the caller checked the content against
  // as it wrote the files (a checkpoint received from a peer, peer/checkpoint_wire.h); they
  // are not hashed again.
  using Trailer = std::function<std::string(const std::vector<AdoptedObject>&)>;
  Result<std::vector<AdoptedObject>> adopt_all(const std::vector<std::filesystem::path>& files,
                                               const Trailer& trailer = {},
                                               std::string* trailer_hash = nullptr,
                                               const std::vector<std::string>* verified = nullptr);
  // Copies `file` into the store, hashing while copying; the file itself is left alone
  // (used for data files, which stay the user's).
  Result<std::string> copy_in(const std::filesystem::path& file, uint64_t* size, bool* added);
  // Stores `bytes` (used for manifests).
  Result<std::string> put_bytes(std::string_view bytes);
  Result<std::string> read(const std::string& hash) const;  // verifies the hash
  // Copies an object to `dest`, verifying its hash while copying. Corrupt when it differs.
  Status copy_out(const std::string& hash, const std::filesystem::path& dest) const;
  // copy_out() of many objects, in parallel; a large object is copied in ranges by the
  // kernel (copy_file_range) while another thread verifies its hash. Every hash is verified
  // before it returns: one Status per copy, kCorrupt for a missing, short or corrupt object.
  // The destinations' directories must exist; nothing is fsynced (a restore is redone
  // from the store after a crash).
  std::vector<Status> copy_out_all(const std::vector<ObjectCopy>& copies) const;
  Status verify(const std::string& hash) const;
  Status remove(const std::string& hash);

 private:
  Status install(const std::filesystem::path& tmp, const std::string& hash, bool* added);
  std::filesystem::path temp_name(const std::string& tag) const;
  std::filesystem::path dir_;
};

}  // namespace cairn
