// The data fingerprint (SPEC §5): content hashes of every file under the config's `data:`
// paths, cached by stat data so an unchanged directory costs a stat per file. Data that
// fits under the snapshot limit is also kept in the content-addressed object store, so
// `cairn reproduce` can put back exactly what a trial read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "store/store_location.h"

namespace cairn {

struct DataFile {
  std::string path;  // as under `data:`: relative to the workdir ('/'-separated) or absolute
  std::string sha256;
  uint64_t size = 0;
};

struct DataFingerprint {
  std::vector<DataFile> files;  // sorted by path
  uint64_t bytes = 0;
  bool stored = false;  // the files are in the object store
  std::string digest;   // SHA-256 over the sorted (path, hash) list
};

// BadInput naming the path when a `data:` entry does not exist.
Result<DataFingerprint> fingerprint_data(const StoreLayout& store,
                                         const std::filesystem::path& workdir,
                                         const std::vector<std::string>& data_paths,
                                         uint64_t store_limit);

// The fingerprint of the data as it is now, keeping nothing (`stored` is false): what
// `cairn reproduce` compares with a record whose data was too large to keep. The files are
// listed and hashed as fingerprint_data() does, through the same stat cache, so unchanged
// data gives the recorded hashes for a stat per file. A `data:` entry that is gone lists no
// files (compare_data() names them removed) rather than failing.
Result<DataFingerprint> hash_data(const StoreLayout& store, const std::filesystem::path& workdir,
                                  const std::vector<std::string>& data_paths);

// What differs between a fingerprint and a later one, by path (each list sorted): what
// `cairn reproduce` checks and `cairn compare` shows, in the same words.
struct DataChanges {
  std::vector<std::string> changed;  // in both, with other contents
  std::vector<std::string> removed;  // in the first, not in the later one
  std::vector<std::string> added;    // in the later one, not in the first
  bool empty() const { return changed.empty() && removed.empty() && added.empty(); }
};
DataChanges compare_data(const DataFingerprint& recorded, const DataFingerprint& now);

// Writes the stored files with relative paths under `dest`, verifying their hashes.
Status restore_data(const StoreLayout& store, const DataFingerprint& fp,
                    const std::filesystem::path& dest);

Json to_json(const DataFingerprint& fp);
Result<DataFingerprint> data_fingerprint_from_json(const Json& j);

// SHA-256 of a file through the store's stat cache (also used for dependency hashes).
class FileHasher {
 public:
  explicit FileHasher(const StoreLayout& store);
  ~FileHasher();  // saves the cache
  Result<std::string> hash(const std::filesystem::path& file, uint64_t* size = nullptr);
  int computed() const { return computed_; }  // files actually read (for tests)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int computed_ = 0;
};

}  // namespace cairn
