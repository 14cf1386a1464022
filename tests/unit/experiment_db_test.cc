#include "store/experiment_db.h"

#include <doctest/doctest.h>

#include <fstream>
#include <iterator>

#include "store/experiment_reader.h"
#include "store/schema.h"
#include "store/store_location.h"
#include "test_dir.h"

namespace cairn {
namespace fs = std::filesystem;

TEST_CASE("store discovery walks upwards and honours an explicit directory") {
  testing::TestDir dir;
  REQUIRE(init_store(dir.path()).ok());
  fs::create_directories(dir / "a/b/c");
  auto found = find_store(std::nullopt, dir / "a/b/c");
  REQUIRE(found.ok());
  CHECK(found->root() == dir / ".cairn");
  CHECK(find_store(dir.path(), "/").ok());
  CHECK(find_store(dir / ".cairn", "/").ok());
  CHECK(find_store(dir / "a", "/").status().kind() == ErrorKind::kNotFound);
  CHECK(init_store(dir.path()).ok());  // idempotent
}

TEST_CASE("a store of another format version is named as such, not as damage") {
  testing::TestDir dir;
  REQUIRE(init_store(dir.path()).ok());
  std::ofstream(dir / ".cairn/FORMAT", std::ios::trunc) << "cairn-store 2\n";
  auto found = find_store(dir.path(), "/");
  REQUIRE_FALSE(found.ok());
  CHECK(found.status().message().find("another cairn version (its FORMAT says 'cairn-store 2'") !=
        std::string::npos);
}

TEST_CASE("experiment ids are allocated once each") {
  testing::TestDir dir;
  auto store = init_store(dir.path());
  REQUIRE(store.ok());
  CHECK(*allocate_experiment_id(*store) == 1);
  CHECK(*allocate_experiment_id(*store) == 2);
  fs::create_directories(store->experiment(7));
  CHECK(*allocate_experiment_id(*store) == 8);
  CHECK(list_experiment_ids(*store) == std::vector<int64_t>{1, 2, 7, 8});
  // A stray directory with a name no id has (too long for one) is not an experiment.
  fs::create_directories(store->experiments() / "99999999999999999999");
  fs::create_directories(store->experiments() / "9223372036854775807");
  CHECK(list_experiment_ids(*store) == std::vector<int64_t>{1, 2, 7, 8});
  CHECK(*allocate_experiment_id(*store) == 9);
}

TEST_CASE("one writer, many readers: readers see committed records and catch up") {
  testing::TestDir dir;
  auto store = init_store(dir.path());
  REQUIRE(store.ok());
  const int64_t id = *allocate_experiment_id(*store);
  auto writer = ExperimentDb::open(store->experiment(id), ExperimentDb::Mode::kWrite, store->tmp());
  REQUIRE(writer.ok());
  CHECK(experiment_is_driven(store->experiment(id)));

  // A second writer is refused while the first holds the experiment.
  auto second = ExperimentDb::open(store->experiment(id), ExperimentDb::Mode::kWrite, store->tmp());
  CHECK(second.status().kind() == ErrorKind::kFailed);

  StoreBatch batch;
  batch.put_json(schema::kExperiment, Json{{"id", id}, {"state", "ACTIVE"}});
  batch.put_json(schema::trial_key(1), Json{{"id", "1.1"}, {"state", "RUNNING"}});
  // Training reports arrive in batches; a step reported again (after a restart) gets the new
  // values, and two reports of one step are merged.
  Json first{{"type", "training"}, {"reports", Json::array()}};
  for (int step = 1; step <= 12; ++step)
    first["reports"].push_back({{"step", step}, {"metrics", {{"loss", 1.0 / step}}}});
  batch.put_json(schema::training_batch_key(1, 1), first);
  Json again{{"type", "training"}, {"reports", Json::array()}};
  again["reports"].push_back({{"step", 11}, {"metrics", {{"loss", 42.0}}}});
  // Another call at the same step with other metrics adds to it: nothing is lost.
  again["reports"].push_back({{"step", 12}, {"metrics", {{"lr", 0.5}}}});
  batch.put_json(schema::training_batch_key(1, 2), again);
  REQUIRE((*writer)->commit(batch, true).ok());
  CHECK(batch.empty());

  auto reader = ExperimentReader::open(*store, id);
  REQUIRE(reader.ok());
  CHECK((*reader)->experiment()->value("state", "") == "ACTIVE");
  auto series = (*reader)->metrics(1, schema::MetricKind::kTraining);
  REQUIRE(series.ok());
  REQUIRE(series->size() == 12);
  CHECK((*series)[9].step == 10);  // numeric order, not string order
  CHECK((*series)[10].metrics["loss"] == 42.0);
  CHECK((*series)[11].metrics["loss"] == 1.0 / 12);
  CHECK((*series)[11].metrics["lr"] == 0.5);
  CHECK((*series)[10].metrics.size() == 1);

  batch.put_json(schema::trial_key(1), Json{{"id", "1.1"}, {"state", "COMPLETED"}});
  REQUIRE((*writer)->commit(batch, true).ok());
  REQUIRE((*reader)->refresh().ok());
  CHECK((*reader)->trial(1)->value("state", "") == "COMPLETED");

  writer->reset();
  CHECK_FALSE(experiment_is_driven(store->experiment(id)));
}

TEST_CASE("log chunks are read back in order from any point") {
  testing::TestDir dir;
  auto store = init_store(dir.path());
  const int64_t id = *allocate_experiment_id(*store);
  auto writer = ExperimentDb::open(store->experiment(id), ExperimentDb::Mode::kWrite, store->tmp());
  REQUIRE(writer.ok());
  StoreBatch batch;
  for (int seq = 1; seq <= 11; ++seq)
    batch.put(schema::log_key(3, 0, seq), "chunk" + std::to_string(seq) + ";");
  batch.put(schema::log_key(3, 1, 1), "other rank;");
  REQUIRE((*writer)->commit(batch, false).ok());
  auto reader = ExperimentReader::open(*store, id);
  REQUIRE(reader.ok());
  std::string all, after;
  (*reader)->read_log(3, 0, 0, [&](int64_t, std::string_view c) { all += c; });
  (*reader)->read_log(3, 0, 9, [&](int64_t, std::string_view c) { after += c; });
  CHECK(all == "chunk1;chunk2;chunk3;chunk4;chunk5;chunk6;chunk7;chunk8;chunk9;chunk10;chunk11;");
  CHECK(after == "chunk10;chunk11;");
}

namespace {

// An experiment database with `records` synced commits, closed; returns its write-ahead log.
fs::path database_with_records(const StoreLayout& store, int64_t id, int records) {
  auto writer = ExperimentDb::open(store.experiment(id), ExperimentDb::Mode::kWrite, store.tmp());
  REQUIRE(writer.ok());
  for (int i = 1; i <= records; ++i) {
    StoreBatch batch;
    batch.put_json(schema::trial_key(i), Json{{"id", "1." + std::to_string(i)},
                                              {"state", "COMPLETED"},
                                              {"padding", std::string(200, 'x')}});
    REQUIRE((*writer)->commit(batch, true).ok());
  }
  writer->reset();
  for (const auto& entry : fs::directory_iterator(store.experiment(id) / "db"))
    if (entry.path().extension() == ".log") return entry.path();
  FAIL("no write-ahead log");
  return {};
}

std::string bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace

TEST_CASE("a write-ahead log damaged in the middle is refused by writers too, not rolled back") {
  testing::TestDir dir;
  auto store = init_store(dir.path());
  const int64_t id = *allocate_experiment_id(*store);
  const fs::path wal = database_with_records(*store, id, 20);
  std::string bytes = bytes_of(wal);
  bytes[bytes.size() / 4] ^= 0x55;
  write_bytes(wal, bytes);

  auto writer = ExperimentDb::open(store->experiment(id), ExperimentDb::Mode::kWrite, store->tmp());
  CHECK(writer.status().kind() == ErrorKind::kCorrupt);
  auto reader = ExperimentDb::open(store->experiment(id), ExperimentDb::Mode::kRead, store->tmp());
  CHECK(reader.status().kind() == ErrorKind::kCorrupt);
}

TEST_CASE("a write-ahead log cut short, as a crash leaves it, opens with what came before") {
  testing::TestDir dir;
  auto store = init_store(dir.path());
  const int64_t id = *allocate_experiment_id(*store);
  const fs::path wal = database_with_records(*store, id, 20);
  const std::string bytes = bytes_of(wal);
  write_bytes(wal, bytes.substr(0, bytes.size() - 50));

  auto writer = ExperimentDb::open(store->experiment(id), ExperimentDb::Mode::kWrite, store->tmp());
  REQUIRE(writer.ok());
  CHECK((*writer)->get_json(schema::trial_key(19))->has_value());
  CHECK_FALSE((*writer)->get_json(schema::trial_key(20))->has_value());
}

TEST_CASE("a database that lost its CURRENT file is corrupt, not one not created yet") {
  testing::TestDir dir;
  auto store = init_store(dir.path());
  const int64_t id = *allocate_experiment_id(*store);
  CHECK(database_presence(store->experiment(id)).kind() == ErrorKind::kNotFound);
  database_with_records(*store, id, 3);
  CHECK(database_presence(store->experiment(id)).ok());
  fs::remove(store->experiment(id) / "db" / "CURRENT");

  CHECK(database_presence(store->experiment(id)).kind() == ErrorKind::kCorrupt);
  auto reader = ExperimentDb::open(store->experiment(id), ExperimentDb::Mode::kRead, store->tmp());
  CHECK(reader.status().kind() == ErrorKind::kCorrupt);
  // A writer must not create a new, empty database over the old one's files.
  auto writer = ExperimentDb::open(store->experiment(id), ExperimentDb::Mode::kWrite, store->tmp());
  CHECK(writer.status().kind() == ErrorKind::kCorrupt);
  CHECK_FALSE(fs::exists(store->experiment(id) / "db" / "CURRENT"));
}

}  // namespace cairn
