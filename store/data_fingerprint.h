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
