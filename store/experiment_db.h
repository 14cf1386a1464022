// One RocksDB per experiment (`.cairn/experiments/7/db`). The process that drives the
// experiment opens it for writing and holds an exclusive lock file; every other process
// (ls, show, logs -f, a second `cairn run` listing ids) opens it as a RocksDB *secondary*
// instance, which never takes the primary's lock and can catch up with its writes. That is
// how several cairn processes share one store without one failing on another's lock.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/file_util.h"
#include "common/json.h"
#include "common/status.h"

namespace rocksdb {
class DB;
class WriteBatch;
}  // namespace rocksdb

namespace cairn {

// Puts gathered during one iteration of the coordinator's loop and committed together:
// one fsync for the whole group (DESIGN.md, Durability).
class StoreBatch {
 public:
  StoreBatch();
  ~StoreBatch();
  StoreBatch(StoreBatch&&) noexcept;
  StoreBatch& operator=(StoreBatch&&) noexcept;

  void put(std::string_view key, std::string_view value);
  void put_json(std::string_view key, const Json& value);
  void erase(std::string_view key);
  bool empty() const;
  size_t count() const;
  rocksdb::WriteBatch& rep() { return *rep_; }

 private:
  std::unique_ptr<rocksdb::WriteBatch> rep_;
};

class ExperimentDb {
 public:
  enum class Mode { kWrite, kRead };
  ~ExperimentDb();

  // kWrite: takes `exp_dir/lock` (flock, non-blocking) and opens the database, creating it if
  // needed; fails with kFailed when another process drives the experiment. kRead: opens a
  // secondary instance with its scratch directory under `tmp_dir`.
  static Result<std::unique_ptr<ExperimentDb>> open(const std::filesystem::path& exp_dir, Mode mode,
                                                    const std::filesystem::path& tmp_dir);

  // REQUIRES: kWrite. `sync` makes the write durable before returning.
  Status commit(StoreBatch& batch, bool sync);
  Result<std::optional<std::string>> get(std::string_view key) const;
  Result<std::optional<Json>> get_json(std::string_view key) const;
  // Visits keys beginning with `prefix` in order until `visit` returns false.
  Status scan(std::string_view prefix,
              const std::function<bool(std::string_view key, std::string_view value)>& visit,
              std::string_view start_after = {}) const;
  // Every record under `prefix`, parsed; kCorrupt names the first that is not JSON.
  Result<std::vector<Json>> scan_json(std::string_view prefix) const;
  // Secondary only: pick up what the primary wrote since the last call.
  Status catch_up();
  Mode mode() const { return mode_; }

 private:
  ExperimentDb() = default;
  Mode mode_ = Mode::kRead;
  std::unique_ptr<rocksdb::DB> db_;
  UniqueFd lock_fd_;
  std::filesystem::path secondary_dir_;  // removed on close
};

// True when some process holds the experiment's write lock (it is being driven right now).
bool experiment_is_driven(const std::filesystem::path& exp_dir);

// Whether the experiment's database exists: Ok; kNotFound while it is being created (no
// CURRENT file yet); kCorrupt when its files are there but CURRENT is not.
Status database_presence(const std::filesystem::path& exp_dir);

}  // namespace cairn
