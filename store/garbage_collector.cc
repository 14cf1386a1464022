#include "store/garbage_collector.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <unordered_set>

#include "common/file_util.h"
#include "store/experiment_reader.h"
#include "store/schema.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::system_clock;
using References = std::unordered_set<std::string>;

bool is_hash(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::string now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The objects a checkpoint names: its manifest and, when the manifest can be read, its
// files. The manifest is read without verifying its hash: a damaged manifest still names
// the files it names, and keeping them is the safe side.
Result<std::vector<std::string>> checkpoint_objects(const ObjectStore& objects,
                                                    const std::string& id) {
  std::vector<std::string> out{id};
  auto bytes = read_file(objects.path_of(id));
  if (!bytes.ok()) {
    if (bytes.status().kind() == ErrorKind::kNotFound) return out;
    return bytes.status();
  }
  Json manifest = Json::parse(*bytes, nullptr, false);
  if (!manifest.is_object() || !manifest.contains("files") || !manifest["files"].is_array())
    return out;
  for (const Json& f : manifest["files"])
    if (f.is_object() && f.contains("sha256") && f["sha256"].is_string() &&
        is_hash(f["sha256"].get<std::string>()))
      out.push_back(f["sha256"].get<std::string>());
  return out;
}

Result<std::vector<Json>> checkpoint_records(const ExperimentDb& db) {
  auto records = db.scan_json(schema::kCheckpointPrefix);
  if (!records.ok()) return records.status();
  for (const Json& j : *records)
    if (!is_hash(j.value("id", "")))
      return Status::Corrupt("store corrupt: a checkpoint record has no valid id");
  return records;
}

Status add_live_references(const ExperimentDb& db, const ObjectStore& objects, References& refs) {
  // The data kept for `cairn reproduce` (store/data_fingerprint.h) lives as long as its
  // experiment.
  auto experiment = db.get_json(schema::kExperiment);
  if (experiment.ok() && experiment->has_value() && (**experiment).contains("data")) {
    const Json& data = (**experiment)["data"];
    if (data.value("stored", false))
      for (const Json& f : data.value("files", Json::array()))
        if (is_hash(f.value("sha256", ""))) refs.insert(f["sha256"].get<std::string>());
  }
  // A warm-started experiment's source checkpoint (docs/determined.md), wherever it is
  // registered, lives as long as the experiment: its trials restart from it until they have
  // checkpoints of their own.
  if (experiment.ok() && experiment->has_value() && (**experiment).contains("warm_start")) {
    const std::string source = (**experiment)["warm_start"].value("checkpoint", "");
    if (is_hash(source)) {
      auto names = checkpoint_objects(objects, source);
      if (!names.ok()) return names.status();
      refs.insert(names->begin(), names->end());
    }
  }
  auto records = checkpoint_records(db);
  if (!records.ok()) return records.status();
  for (const Json& r : *records) {
    if (!schema::checkpoint_is_kept(r)) continue;
    auto names = checkpoint_objects(objects, r["id"].get<std::string>());
    if (!names.ok()) return names.status();
    refs.insert(names->begin(), names->end());
  }
  return Status::Ok();
}

// Every experiment's live references but `except`'s (0: none excepted). An experiment whose
// database does not exist yet has no checkpoints; one that cannot be read stops everything,
// since what it names is unknown.
Status add_store_references(const StoreLayout& store, const ObjectStore& objects, int64_t except,
                            References& refs) {
  for (int64_t id : list_experiment_ids(store)) {
    if (id == except) continue;
    auto reader = ExperimentReader::open(store, id);
    if (!reader.ok()) {
      if (reader.status().kind() == ErrorKind::kNotFound) continue;
      return Status::Failed("cannot tell which objects experiment " + std::to_string(id) +
                            " uses: " + reader.status().message());
    }
    Status st = add_live_references((*reader)->db(), objects, refs);
    if (!st.ok())
      return Status::Failed("cannot tell which objects experiment " + std::to_string(id) +
                            " uses: " + st.message());
  }
  return Status::Ok();
}

struct Stat {
  uint64_t size = 0;
  Clock::time_point changed;
};

std::optional<Stat> stat_path(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
  auto since_epoch =
      std::chrono::seconds(st.st_ctim.tv_sec) + std::chrono::nanoseconds(st.st_ctim.tv_nsec);
  return Stat{static_cast<uint64_t>(st.st_size),
              Clock::time_point(std::chrono::duration_cast<Clock::duration>(since_epoch))};
}

enum class Removal { kGone, kRemoved, kTooFresh };

// Removes `path` unless it changed after `cutoff`; adds its size to *bytes when removed.
Result<Removal> remove_if_older(const fs::path& path, Clock::time_point cutoff, uint64_t* bytes) {
  auto st = stat_path(path);
  if (!st) return Removal::kGone;
  if (st->changed > cutoff) return Removal::kTooFresh;
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return Removal::kGone;
    return Status::Io("cannot remove " + path.string() + ": " + errno_text());
  }
  *bytes += st->size;
  return Removal::kRemoved;
}

// Step (b) for one checkpoint: the objects only it names, then its manifest. Returns false
// when something was too fresh to remove (the checkpoint stays "deleting").
Result<bool> remove_checkpoint_objects(const ObjectStore& objects, const std::string& id,
                                       const References& live, Clock::time_point cutoff,
                                       uint64_t* bytes) {
  auto names = checkpoint_objects(objects, id);
  if (!names.ok()) return names.status();
  bool complete = true;
  for (size_t i = 1; i < names->size(); ++i) {  // [0] is the manifest: last
    if (live.count((*names)[i])) continue;
    auto r = remove_if_older(objects.path_of((*names)[i]), cutoff, bytes);
    if (!r.ok()) return r.status();
    if (*r == Removal::kTooFresh) complete = false;
  }
  if (!complete || live.count(id)) return complete;
  auto r = remove_if_older(objects.path_of(id), cutoff, bytes);
  if (!r.ok()) return r.status();
  return *r != Removal::kTooFresh;
}

// Step (a): one durable batch, so no reader is offered these checkpoints again.
Status mark_deleting(ExperimentDb& db, const std::vector<std::string>& ids) {
  StoreBatch batch;
  for (const std::string& id : ids) {
    auto record = db.get_json(schema::checkpoint_key(id));
    if (!record.ok()) return record.status();
    if (!record->has_value() || !schema::checkpoint_is_kept(**record)) continue;
    Json r = std::move(**record);
    r["deleting"] = true;
    r["deleted"] = true;
    batch.put_json(schema::checkpoint_key(id), r);
  }
  return db.commit(batch, /*sync=*/true);
}

Result<std::vector<Json>> deleting_records(const ExperimentDb& db) {
  auto records = checkpoint_records(db);
  if (!records.ok()) return records.status();
  std::vector<Json> out;
  for (Json& r : *records)
    if (r.value("deleting", false)) out.push_back(std::move(r));
  return out;
}

}  // namespace

std::chrono::seconds ingest_grace(const StoreLayout& store, int64_t collecting) {
  for (int64_t id : list_experiment_ids(store))
    if (id != collecting && experiment_is_driven(store.experiment(id))) return kIngestGrace;
  return std::chrono::seconds(0);
}

Result<DeleteResult> delete_checkpoints(ExperimentDb& db, ObjectStore& objects,
                                        const StoreLayout& store, int64_t experiment_id,
                                        const std::vector<std::string>& ids,
                                        const DeleteOptions& options) {
  if (db.mode() != ExperimentDb::Mode::kWrite)
    return Status::Failed("deleting checkpoints needs the experiment open for writing");
  // Taken before looking at any reference: whatever is adopted after this is newer.
  const Clock::time_point cutoff = Clock::now() - options.fresh_grace;
  if (Status st = mark_deleting(db, ids); !st.ok()) return st;
  DeleteResult result;
  if (options.stop_after == DeleteOptions::StopAfter::kMarking) return result;
  auto pending = deleting_records(db);
  if (!pending.ok()) return pending.status();
  if (pending->empty()) return result;

  References live;
  if (Status st = add_live_references(db, objects, live); !st.ok()) return st;
  if (Status st = add_store_references(store, objects, experiment_id, live); !st.ok()) return st;

  StoreBatch batch;
  for (Json& record : *pending) {
    const std::string id = record["id"].get<std::string>();
    uint64_t bytes = 0;
    auto complete = remove_checkpoint_objects(objects, id, live, cutoff, &bytes);
    if (!complete.ok()) return complete.status();
    result.bytes_reclaimed += bytes;
    record["bytes_reclaimed"] = record.value("bytes_reclaimed", uint64_t{0}) + bytes;
    if (*complete) {
      record.erase("deleting");
      record["deleted_at"] = now_iso8601();
      ++result.deleted;
    } else {
      ++result.pending;
    }
    batch.put_json(schema::checkpoint_key(id), record);
  }
  if (options.stop_after == DeleteOptions::StopAfter::kRemovingFiles) return result;
  if (Status st = db.commit(batch, /*sync=*/true); !st.ok()) return st;
  return result;
}

namespace {

void sweep_objects(const fs::path& dir, const References& live, Clock::time_point cutoff,
                   SweepResult& out) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    uint64_t bytes = 0;
    if (name.starts_with("tmp-")) {  // an object write interrupted before its rename
      auto r = remove_if_older(entry.path(), cutoff, &bytes);
      if (r.ok() && *r == Removal::kRemoved) ++out.objects_removed;
      out.bytes_reclaimed += bytes;
      continue;
    }
    if (name.size() != 2 || !entry.is_directory(ec)) continue;
    std::error_code sub_ec;
    for (const auto& object : fs::directory_iterator(entry.path(), sub_ec)) {
      const std::string hash = name + object.path().filename().string();
      if (!is_hash(hash) || live.count(hash)) continue;
      auto r = remove_if_older(object.path(), cutoff, &bytes);
      if (r.ok() && *r == Removal::kRemoved) ++out.objects_removed;
    }
    out.bytes_reclaimed += bytes;
  }
}

// The newest change anywhere in a tree, and the bytes of its files.
Stat tree_stat(const fs::path& root) {
  Stat total = stat_path(root).value_or(Stat{});
  total.size = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    auto st = stat_path(it->path());
    if (!st) continue;
    total.changed = std::max(total.changed, st->changed);
    if (it->is_regular_file(ec)) total.size += st->size;
  }
  return total;
}

// A staging directory is named "<experiment>.<trial>-<random>" by the coordinator that
// handed it out; while that experiment is driven, its coordinator owns the directory.
bool owned_by_driven_experiment(const StoreLayout& store, const std::string& name) {
  const size_t dot = name.find('.');
  if (dot == 0 || dot == std::string::npos) return false;
  const std::string exp = name.substr(0, dot);
  if (exp.size() > 12 || exp.find_first_not_of("0123456789") != std::string::npos) return false;
  return experiment_is_driven(store.experiment(std::stoll(exp)));
}

void sweep_staging(const StoreLayout& store, Clock::time_point cutoff, SweepResult& out) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(store.staging(), ec)) {
    const std::string name = entry.path().filename().string();
    if (owned_by_driven_experiment(store, name)) continue;
    const Stat st = tree_stat(entry.path());
    if (st.changed > cutoff) continue;
    std::error_code rm_ec;
    fs::remove_all(entry.path(), rm_ec);
    if (rm_ec) continue;  // left for the next sweep
    ++out.staging_removed;
    out.bytes_reclaimed += st.size;
  }
}

}  // namespace

Result<SweepResult> sweep_unreferenced_objects(const StoreLayout& store,
                                               std::chrono::seconds grace) {
  // Taken before the marking: whatever is adopted while we look is newer than this.
  const Clock::time_point cutoff = Clock::now() - grace;
  ObjectStore objects(store.objects());
  References live;
  if (Status st = add_store_references(store, objects, 0, live); !st.ok()) return st;
  SweepResult out;
  sweep_objects(store.objects(), live, cutoff, out);
  sweep_staging(store, cutoff, out);
  return out;
}

}  // namespace cairn
