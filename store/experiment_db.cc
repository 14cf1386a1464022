#include "store/experiment_db.h"

#include <fcntl.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <sys/file.h>

#include <cerrno>

#include "store/rocksdb_logger.h"

namespace cairn {
namespace fs = std::filesystem;

StoreBatch::StoreBatch() : rep_(std::make_unique<rocksdb::WriteBatch>()) {}
StoreBatch::~StoreBatch() = default;
StoreBatch::StoreBatch(StoreBatch&&) noexcept = default;
StoreBatch& StoreBatch::operator=(StoreBatch&&) noexcept = default;

void StoreBatch::put(std::string_view key, std::string_view value) {
  rep_->Put(rocksdb::Slice(key.data(), key.size()), rocksdb::Slice(value.data(), value.size()));
}
void StoreBatch::put_json(std::string_view key, const Json& value) {
  put(key, value.dump(-1, ' ', false, Json::error_handler_t::replace));
}
void StoreBatch::erase(std::string_view key) {
  rep_->Delete(rocksdb::Slice(key.data(), key.size()));
}
bool StoreBatch::empty() const {
  return rep_->Count() == 0;
}
size_t StoreBatch::count() const {
  return static_cast<size_t>(rep_->Count());
}

namespace {

Status from_rocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  if (s.IsCorruption()) return Status::Corrupt(what + ": store corrupt: " + s.ToString());
  return Status::Io(what + ": " + s.ToString());
}

rocksdb::Options base_options() {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.compression = rocksdb::kLZ4Compression;
  // An experiment's database is small; keep its footprint and thread count modest so many
  // experiments in one store stay cheap.
  options.max_background_jobs = 2;
  options.keep_log_file_num = 2;
  options.max_log_file_size = 1 << 20;
  options.max_open_files = 64;
  // The default, point-in-time recovery, stops replaying the WAL at a corrupt record and
  // opens what came before: a writer would then roll the experiment back silently (states,
  // metrics, checkpoint records after the damage gone for good once it flushes), while
  // readers already refuse it. An incomplete last record, all a crash leaves, still opens.
  options.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  return options;
}

}  // namespace

ExperimentDb::~ExperimentDb() {
  db_.reset();
  if (!secondary_dir_.empty()) {
    std::error_code ec;
    fs::remove_all(secondary_dir_, ec);
  }
}

bool experiment_is_driven(const fs::path& exp_dir) {
  UniqueFd fd(::open((exp_dir / "lock").c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return false;
  if (::flock(fd.get(), LOCK_SH | LOCK_NB) == 0) {
    ::flock(fd.get(), LOCK_UN);
    return false;
  }
  return errno == EWOULDBLOCK;
}

// RocksDB writes CURRENT before the first WAL or table file, so such files without it are
// damage, not a database being created: "no database yet" there would hide the experiment
// from `ls`, drop its checkpoints from `gc`'s references, and let a writer create an empty
// database over it.
Status database_presence(const fs::path& exp_dir) {
  const fs::path db_path = exp_dir / "db";
  std::error_code ec;
  if (fs::exists(db_path / "CURRENT", ec)) return Status::Ok();
  for (fs::directory_iterator it(db_path, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path ext = it->path().extension();
    if (ext == ".log" || ext == ".sst")
      return Status::Corrupt("cannot read " + db_path.string() +
                             ": store corrupt: its CURRENT file is missing");
  }
  return Status::NotFound("experiment " + exp_dir.filename().string() + " has no database yet");
}

Result<std::unique_ptr<ExperimentDb>> ExperimentDb::open(const fs::path& exp_dir, Mode mode,
                                                         const fs::path& tmp_dir) {
  std::unique_ptr<ExperimentDb> db(new ExperimentDb());
  db->mode_ = mode;
  const fs::path db_path = exp_dir / "db";
  rocksdb::Options options = base_options();
  rocksdb::DB* raw = nullptr;
  if (Status st = database_presence(exp_dir); st.kind() == ErrorKind::kCorrupt) return st;
  if (mode == Mode::kWrite) {
    UniqueFd fd(::open((exp_dir / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!fd) return Status::Io("cannot open " + (exp_dir / "lock").string() + ": " + errno_text());
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK)
        return Status::Failed("experiment " + exp_dir.filename().string() +
                              " is being driven by another cairn process");
      return Status::Io("cannot lock " + (exp_dir / "lock").string() + ": " + errno_text());
    }
    db->lock_fd_ = std::move(fd);
    options.paranoid_checks = true;
    // RocksDB's own LOG writer aborts the process when it logs again after a failed write
    // (store/rocksdb_logger.h): a full disk must end in an error the coordinator reports.
    std::error_code dir_ec;
    fs::create_directories(db_path, dir_ec);
    options.info_log = file_rocksdb_logger(db_path, options.max_log_file_size);
    if (!options.info_log) options.info_log = discarding_rocksdb_logger();
    rocksdb::Status s = rocksdb::DB::Open(options, db_path.string(), &raw);
    if (!s.ok()) return from_rocks(s, "cannot open " + db_path.string());
  } else {
    if (Status st = database_presence(exp_dir); !st.ok()) return st;
    auto secondary = make_unique_dir(tmp_dir, "secondary-");
    if (!secondary.ok()) return secondary.status();
    db->secondary_dir_ = *secondary;
    options.create_if_missing = false;
    options.max_open_files = -1;  // required by secondary instances
    // A reader's LOG would go to its scratch directory, removed when it closes; writing it
    // only costs (and on a full disk, RocksDB's writer aborted every reader).
    options.info_log = discarding_rocksdb_logger();
    rocksdb::Status s =
        rocksdb::DB::OpenAsSecondary(options, db_path.string(), secondary->string(), &raw);
    if (!s.ok()) return from_rocks(s, "cannot read " + db_path.string());
  }
  db->db_.reset(raw);
  return db;
}

Status ExperimentDb::commit(StoreBatch& batch, bool sync) {
  if (batch.empty()) return Status::Ok();
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  Status st = from_rocks(db_->Write(wo, &batch.rep()), "cannot write the experiment database");
  if (st.ok()) batch.rep().Clear();
  return st;
}

Result<std::optional<std::string>> ExperimentDb::get(std::string_view key) const {
  std::string value;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), rocksdb::Slice(key.data(), key.size()), &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return from_rocks(s, "cannot read the experiment database");
  return std::optional<std::string>(std::move(value));
}

Result<std::optional<Json>> ExperimentDb::get_json(std::string_view key) const {
  auto raw = get(key);
  if (!raw.ok()) return raw.status();
  if (!raw->has_value()) return std::optional<Json>();
  Json j = Json::parse(**raw, nullptr, false);
  if (j.is_discarded())
    return Status::Corrupt("store corrupt: record '" + std::string(key) + "' is not valid JSON");
  return std::optional<Json>(std::move(j));
}

Status ExperimentDb::scan(std::string_view prefix,
                          const std::function<bool(std::string_view, std::string_view)>& visit,
                          std::string_view start_after) const {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  rocksdb::Slice pfx(prefix.data(), prefix.size());
  if (start_after.empty()) {
    it->Seek(pfx);
  } else {
    it->Seek(rocksdb::Slice(start_after.data(), start_after.size()));
    if (it->Valid() && it->key().ToStringView() == start_after) it->Next();
  }
  for (; it->Valid() && it->key().starts_with(pfx); it->Next()) {
    if (!visit(it->key().ToStringView(), it->value().ToStringView())) break;
  }
  return from_rocks(it->status(), "cannot scan the experiment database");
}

Result<std::vector<Json>> ExperimentDb::scan_json(std::string_view prefix) const {
  std::vector<Json> out;
  Status bad = Status::Ok();
  Status st = scan(prefix, [&](std::string_view key, std::string_view value) {
    Json j = Json::parse(value, nullptr, false);
    if (j.is_discarded()) {
      bad = Status::Corrupt("store corrupt: record '" + std::string(key) + "' is not valid JSON");
      return false;
    }
    out.push_back(std::move(j));
    return true;
  });
  if (!st.ok()) return st;
  if (!bad.ok()) return bad;
  return out;
}

Status ExperimentDb::catch_up() {
  if (mode_ != Mode::kRead) return Status::Ok();
  return from_rocks(db_->TryCatchUpWithPrimary(), "cannot refresh the experiment database");
}

}  // namespace cairn
