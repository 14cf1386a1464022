#include "store/garbage_collector.h"

#include <doctest/doctest.h>

#include <fstream>

#include "common/file_util.h"
#include "store/checkpoint_files.h"
#include "store/experiment_reader.h"
#include "store/schema.h"
#include "test_dir.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

uint64_t size_of(const ObjectStore& objects, const std::string& hash) {
  return fs::file_size(objects.path_of(hash));
}

// A store with experiments whose checkpoints are made of named contents, registered the way
// the coordinator registers them.
class Fixture {
 public:
  Fixture() : store_(*init_store(dir_.path())), objects_(store_.objects()) {}

  const StoreLayout& store() const { return store_; }
  ObjectStore& objects() { return objects_; }
  const fs::path& dir() const { return dir_.path(); }

  std::unique_ptr<ExperimentDb> open_experiment() {
    const int64_t id = *allocate_experiment_id(store_);
    auto db = ExperimentDb::open(store_.experiment(id), ExperimentDb::Mode::kWrite, store_.tmp());
    REQUIRE(db.ok());
    StoreBatch batch;
    batch.put_json(schema::kExperiment, Json{{"id", id}, {"config", Json::object()}});
    REQUIRE((*db)->commit(batch, true).ok());
    return std::move(*db);
  }

  // Ingests a checkpoint whose files hold `files` (path → content) and registers it.
  CheckpointManifest add_checkpoint(ExperimentDb& db, int64_t steps,
                                    const std::map<std::string, std::string>& files) {
    const fs::path staging = store_.staging() / ("1.1-" + std::to_string(++staged_));
    for (const auto& [path, content] : files) write(staging / path, content);
    auto manifest = ingest_checkpoint_dir(objects_, staging, {"1.1", steps});
    REQUIRE(manifest.ok());
    StoreBatch batch;
    batch.put_json(schema::checkpoint_key(manifest->id), Json{{"id", manifest->id},
                                                              {"trial", "1.1"},
                                                              {"trial_index", 1},
                                                              {"steps_completed", steps},
                                                              {"bytes", manifest->bytes}});
    REQUIRE(db.commit(batch, true).ok());
    return *manifest;
  }

  Json record(const ExperimentDb& db, const std::string& id) {
    auto r = db.get_json(schema::checkpoint_key(id));
    REQUIRE(r.ok());
    REQUIRE(r->has_value());
    return **r;
  }

  bool restorable(const CheckpointManifest& m) {
    const fs::path out = dir_ / ("restore-" + std::to_string(++restored_));
    return materialize_checkpoint(objects_, m, out).ok();
  }

 private:
  testing::TestDir dir_;
  StoreLayout store_;
  ObjectStore objects_;
  int staged_ = 0;
  int restored_ = 0;
};

const std::string kShared(10000, 's');
const std::string kOnlyA(1000, 'a');
const std::string kOnlyB(2000, 'b');

}  // namespace

TEST_CASE("shared content is kept while a live checkpoint names it, freed with the last") {
  Fixture f;
  auto db = f.open_experiment();
  auto a = f.add_checkpoint(*db, 1, {{"shared.bin", kShared}, {"own.bin", kOnlyA}});
  auto b = f.add_checkpoint(*db, 2, {{"shared.bin", kShared}, {"own.bin", kOnlyB}});
  const std::string shared = a.files[1].sha256;  // sorted paths: own.bin, shared.bin
  REQUIRE(a.files[1].path == "shared.bin");
  const uint64_t manifest_a = size_of(f.objects(), a.id);
  const uint64_t manifest_b = size_of(f.objects(), b.id);

  auto first = delete_checkpoints(*db, f.objects(), f.store(), 1, {a.id});
  REQUIRE(first.ok());
  CHECK(first->deleted == 1);
  CHECK(first->pending == 0);
  CHECK(first->bytes_reclaimed == kOnlyA.size() + manifest_a);
  CHECK(f.objects().contains(shared));
  CHECK_FALSE(f.objects().contains(a.files[0].sha256));
  CHECK_FALSE(f.objects().contains(a.id));
  CHECK(f.restorable(b));
  Json ra = f.record(*db, a.id);
  CHECK(ra.value("deleted", false));
  CHECK_FALSE(ra.contains("deleting"));
  CHECK(ra.contains("deleted_at"));
  CHECK(ra["bytes_reclaimed"] == kOnlyA.size() + manifest_a);

  auto second = delete_checkpoints(*db, f.objects(), f.store(), 1, {b.id, a.id});
  REQUIRE(second.ok());
  CHECK(second->deleted == 1);  // a was already deleted: ignored
  CHECK(second->bytes_reclaimed == kShared.size() + kOnlyB.size() + manifest_b);
  CHECK_FALSE(f.objects().contains(shared));
  CHECK_FALSE(f.objects().contains(b.id));
}

TEST_CASE("two checkpoints deleted together free their shared object once") {
  Fixture f;
  auto db = f.open_experiment();
  auto a = f.add_checkpoint(*db, 1, {{"shared.bin", kShared}, {"own.bin", kOnlyA}});
  auto b = f.add_checkpoint(*db, 2, {{"shared.bin", kShared}, {"own.bin", kOnlyB}});
  const uint64_t manifests = size_of(f.objects(), a.id) + size_of(f.objects(), b.id);
  auto r = delete_checkpoints(*db, f.objects(), f.store(), 1, {a.id, b.id});
  REQUIRE(r.ok());
  CHECK(r->deleted == 2);
  CHECK(r->bytes_reclaimed == kShared.size() + kOnlyA.size() + kOnlyB.size() + manifests);
}

TEST_CASE("objects named by another experiment's checkpoints are kept") {
  Fixture f;
  auto db1 = f.open_experiment();
  auto db2 = f.open_experiment();
  auto a = f.add_checkpoint(*db1, 1, {{"shared.bin", kShared}, {"own.bin", kOnlyA}});
  auto same_as_a = f.add_checkpoint(*db2, 1, {{"shared.bin", kShared}, {"own.bin", kOnlyA}});
  auto c = f.add_checkpoint(*db2, 2, {{"shared.bin", kShared}});
  REQUIRE(same_as_a.id == a.id);  // identical files: one manifest, one id, two records
  db2.reset();                    // experiment 2 is read through a secondary instance

  auto r = delete_checkpoints(*db1, f.objects(), f.store(), 1, {a.id});
  REQUIRE(r.ok());
  CHECK(r->deleted == 1);
  CHECK(r->bytes_reclaimed == 0);
  CHECK(f.restorable(same_as_a));
  CHECK(f.restorable(c));
}

TEST_CASE("a warm-started experiment keeps its source checkpoint, of another experiment") {
  Fixture f;
  auto db1 = f.open_experiment();
  auto db2 = f.open_experiment();
  auto source = f.add_checkpoint(*db1, 6, {{"weights.bin", kOnlyA}});
  // Experiment 2 starts its trials from experiment 1's checkpoint (docs/determined.md).
  StoreBatch batch;
  batch.put_json(
      schema::kExperiment,
      Json{{"id", 2}, {"config", Json::object()}, {"warm_start", {{"checkpoint", source.id}}}});
  REQUIRE(db2->commit(batch, true).ok());
  db2.reset();

  auto r = delete_checkpoints(*db1, f.objects(), f.store(), 1, {source.id});
  REQUIRE(r.ok());
  CHECK(r->deleted == 1);  // its record is experiment 1's to delete
  CHECK(r->bytes_reclaimed == 0);
  CHECK(f.restorable(source));  // its content is experiment 2's to keep
  auto sweep = sweep_unreferenced_objects(f.store(), std::chrono::seconds(0));
  REQUIRE(sweep.ok());
  CHECK(f.restorable(source));
}

TEST_CASE("a collection interrupted after any step is finished by the next call") {
  Fixture f;
  auto db = f.open_experiment();
  auto a = f.add_checkpoint(*db, 1, {{"shared.bin", kShared}, {"own.bin", kOnlyA}});
  auto b = f.add_checkpoint(*db, 2, {{"shared.bin", kShared}, {"own.bin", kOnlyB}});
  const uint64_t expected = kOnlyA.size() + size_of(f.objects(), a.id);
  DeleteOptions crash;

  SUBCASE("after marking") {
    crash.stop_after = DeleteOptions::StopAfter::kMarking;
    auto r = delete_checkpoints(*db, f.objects(), f.store(), 1, {a.id}, crash);
    REQUIRE(r.ok());
    Json ra = f.record(*db, a.id);
    CHECK(ra.value("deleting", false));
    CHECK(ra.value("deleted", false));  // no longer offered to readers
    CHECK(f.objects().contains(a.id));
    CHECK(f.objects().contains(a.files[0].sha256));

    auto again = delete_checkpoints(*db, f.objects(), f.store(), 1, {});
    REQUIRE(again.ok());
    CHECK(again->deleted == 1);
    CHECK(again->bytes_reclaimed == expected);
  }
  SUBCASE("after removing the files, before the records") {
    crash.stop_after = DeleteOptions::StopAfter::kRemovingFiles;
    auto r = delete_checkpoints(*db, f.objects(), f.store(), 1, {a.id}, crash);
    REQUIRE(r.ok());
    CHECK(r->bytes_reclaimed == expected);
    CHECK_FALSE(f.objects().contains(a.id));
    CHECK(f.record(*db, a.id).value("deleting", false));

    auto again = delete_checkpoints(*db, f.objects(), f.store(), 1, {});
    REQUIRE(again.ok());
    CHECK(again->deleted == 1);
    CHECK(again->bytes_reclaimed == 0);
  }
  Json ra = f.record(*db, a.id);
  CHECK_FALSE(ra.contains("deleting"));
  CHECK(ra.contains("deleted_at"));
  CHECK_FALSE(f.objects().contains(a.files[0].sha256));
  CHECK(f.restorable(b));
  // Nothing was leaked: a sweep finds nothing left to collect.
  auto sweep = sweep_unreferenced_objects(f.store(), std::chrono::seconds(0));
  REQUIRE(sweep.ok());
  CHECK(sweep->objects_removed == 0);
}

TEST_CASE("objects too fresh for the grace period wait, and the next call finishes them") {
  Fixture f;
  auto db1 = f.open_experiment();
  auto a = f.add_checkpoint(*db1, 1, {{"own.bin", kOnlyA}});
  CHECK(ingest_grace(f.store(), 1).count() == 0);
  {
    // Another process driving experiment 2 could be ingesting right now.
    auto db2 = f.open_experiment();
    CHECK(ingest_grace(f.store(), 1) == kIngestGrace);
    DeleteOptions careful;
    careful.fresh_grace = ingest_grace(f.store(), 1);
    auto r = delete_checkpoints(*db1, f.objects(), f.store(), 1, {a.id}, careful);
    REQUIRE(r.ok());
    CHECK(r->deleted == 0);
    CHECK(r->pending == 1);
    CHECK(r->bytes_reclaimed == 0);
    CHECK(f.objects().contains(a.id));
    CHECK(f.record(*db1, a.id).value("deleting", false));
  }
  auto later = delete_checkpoints(*db1, f.objects(), f.store(), 1, {});
  REQUIRE(later.ok());
  CHECK(later->deleted == 1);
  CHECK(later->pending == 0);
  CHECK_FALSE(f.objects().contains(a.id));
}

TEST_CASE("deleting needs the experiment open for writing") {
  Fixture f;
  auto db = f.open_experiment();
  auto a = f.add_checkpoint(*db, 1, {{"own.bin", kOnlyA}});
  db.reset();
  auto reader =
      ExperimentDb::open(f.store().experiment(1), ExperimentDb::Mode::kRead, f.store().tmp());
  REQUIRE(reader.ok());
  CHECK_FALSE(delete_checkpoints(**reader, f.objects(), f.store(), 1, {a.id}).ok());
  CHECK(f.objects().contains(a.id));
}

TEST_CASE("a sweep removes unreferenced objects and abandoned staging older than the grace") {
  Fixture f;
  auto db = f.open_experiment();
  auto live = f.add_checkpoint(*db, 1, {{"shared.bin", kShared}, {"own.bin", kOnlyB}});
  db.reset();
  auto orphan = f.objects().put_bytes(kOnlyA);  // adopted, but no record was committed
  REQUIRE(orphan.ok());
  write(f.store().objects() / "tmp-deadbeef-1", "half an object");
  write(f.store().staging() / "1.1-abandoned/model.bin", std::string(300, 'm'));

  auto careful = sweep_unreferenced_objects(f.store(), std::chrono::hours(1));
  REQUIRE(careful.ok());
  CHECK(careful->objects_removed == 0);
  CHECK(careful->staging_removed == 0);
  CHECK(careful->bytes_reclaimed == 0);
  CHECK(f.objects().contains(*orphan));

  SUBCASE("everything old enough goes, live checkpoints stay") {
    auto r = sweep_unreferenced_objects(f.store(), std::chrono::seconds(0));
    REQUIRE(r.ok());
    CHECK(r->objects_removed == 2);
    CHECK(r->staging_removed == 1);
    CHECK(r->bytes_reclaimed == kOnlyA.size() + 14 + 300);
    CHECK_FALSE(f.objects().contains(*orphan));
    CHECK_FALSE(fs::exists(f.store().objects() / "tmp-deadbeef-1"));
    CHECK_FALSE(fs::exists(f.store().staging() / "1.1-abandoned"));
    CHECK(f.restorable(live));
  }
  SUBCASE("staging of an experiment being driven belongs to its coordinator") {
    auto driving =
        ExperimentDb::open(f.store().experiment(1), ExperimentDb::Mode::kWrite, f.store().tmp());
    REQUIRE(driving.ok());
    auto r = sweep_unreferenced_objects(f.store(), std::chrono::seconds(0));
    REQUIRE(r.ok());
    CHECK(r->staging_removed == 0);
    CHECK(fs::exists(f.store().staging() / "1.1-abandoned"));
    CHECK_FALSE(f.objects().contains(*orphan));
    CHECK(f.restorable(live));
  }
  SUBCASE("a store it cannot read fully is left alone") {
    fs::create_directories(f.store().experiment(2) / "db");
    write(f.store().experiment(2) / "db/CURRENT", "MANIFEST-000404\n");
    auto r = sweep_unreferenced_objects(f.store(), std::chrono::seconds(0));
    CHECK_FALSE(r.ok());
    CHECK(r.status().message().find("experiment 2") != std::string::npos);
    CHECK(f.objects().contains(*orphan));
  }
}

TEST_CASE("a sweep collects what deleting records name and keeps what live records name") {
  Fixture f;
  auto db = f.open_experiment();
  auto a = f.add_checkpoint(*db, 1, {{"shared.bin", kShared}, {"own.bin", kOnlyA}});
  auto b = f.add_checkpoint(*db, 2, {{"shared.bin", kShared}, {"own.bin", kOnlyB}});
  DeleteOptions crash;
  crash.stop_after = DeleteOptions::StopAfter::kMarking;
  REQUIRE(delete_checkpoints(*db, f.objects(), f.store(), 1, {a.id}, crash).ok());
  db.reset();
  auto r = sweep_unreferenced_objects(f.store(), std::chrono::seconds(0));
  REQUIRE(r.ok());
  CHECK(r->objects_removed == 2);  // a's own file and a's manifest
  CHECK(f.restorable(b));
}

}  // namespace cairn
