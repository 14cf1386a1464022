#include "store/object_store.h"

#include <doctest/doctest.h>

#include <fstream>

#include "common/file_util.h"
#include "common/sha256.h"
#include "store/checkpoint_files.h"
#include "test_dir.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {
void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}
}  // namespace

TEST_CASE("sha256 matches the FIPS 180-2 test vector") {
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("objects are stored once, by content, and verified on the way out") {
  testing::TestDir dir;
  ObjectStore objects(dir / "objects");
  write(dir / "a", "same bytes");
  write(dir / "b", "same bytes");
  uint64_t size = 0;
  bool added = false;
  auto h1 = objects.adopt(dir / "a", &size, &added);
  REQUIRE(h1.ok());
  CHECK(added);
  CHECK(size == 10);
  auto h2 = objects.adopt(dir / "b", &size, &added);
  REQUIRE(h2.ok());
  CHECK_FALSE(added);
  CHECK(*h1 == *h2);
  CHECK(fs::exists(dir / "b"));  // the caller's file stays where it was
  size_t objects_stored = 0;
  for (auto it = fs::recursive_directory_iterator(dir / "objects");
       it != fs::recursive_directory_iterator(); ++it)
    if (it->is_regular_file()) ++objects_stored;
  CHECK(objects_stored == 1);  // the duplicate content is stored once
  CHECK(objects.verify(*h1).ok());

  SUBCASE("a flipped byte is detected") {
    fs::path stored = objects.path_of(*h1);
    fs::permissions(stored, fs::perms::owner_write, fs::perm_options::add);
    write(stored, "same bytez");
    CHECK(objects.verify(*h1).kind() == ErrorKind::kCorrupt);
    CHECK(objects.copy_out(*h1, dir / "out").kind() == ErrorKind::kCorrupt);
    CHECK(objects.read(*h1).status().kind() == ErrorKind::kCorrupt);
  }
}

TEST_CASE("a checkpoint directory round-trips through the object store") {
  testing::TestDir dir;
  ObjectStore objects(dir / "objects");
  write(dir / "stage/model.bin", std::string(100000, 'x'));
  write(dir / "stage/nested/opt.json", "{\"lr\": 0.1}");
  write(dir / "stage/empty", "");
  uint64_t new_bytes = 0;
  auto manifest = ingest_checkpoint_dir(objects, dir / "stage", {"1.1", 10}, &new_bytes);
  REQUIRE(manifest.ok());
  CHECK_FALSE(fs::exists(dir / "stage"));
  CHECK(manifest->files.size() == 3);
  CHECK(manifest->bytes == 100000 + 11);
  CHECK(new_bytes == 100000 + 11);

  auto loaded = load_manifest(objects, manifest->id);
  REQUIRE(loaded.ok());
  CHECK(loaded->bytes == manifest->bytes);
  REQUIRE(materialize_checkpoint(objects, *loaded, dir / "restored").ok());
  CHECK(*read_file(dir / "restored/model.bin") == std::string(100000, 'x'));
  CHECK(*read_file(dir / "restored/nested/opt.json") == "{\"lr\": 0.1}");
  CHECK(fs::exists(dir / "restored/empty"));

  SUBCASE("the same content again costs no new bytes; a later step gets its own id") {
    for (const char* stage : {"stage2", "stage3", "stage4"}) {
      write(dir / stage / "model.bin", std::string(100000, 'x'));
      write(dir / stage / "nested/opt.json", "{\"lr\": 0.1}");
      write(dir / stage / "empty", "");
    }
    auto again = ingest_checkpoint_dir(objects, dir / "stage2", {"1.1", 10}, &new_bytes);
    REQUIRE(again.ok());
    CHECK(again->id == manifest->id);
    CHECK(new_bytes == 0);
    auto later = ingest_checkpoint_dir(objects, dir / "stage3", {"1.1", 20}, &new_bytes);
    REQUIRE(later.ok());
    CHECK(later->id != manifest->id);
    CHECK(new_bytes == 0);
    auto other = ingest_checkpoint_dir(objects, dir / "stage4", {"2.1", 10}, &new_bytes);
    REQUIRE(other.ok());
    CHECK(other->id != manifest->id);
    CHECK(other->id != later->id);
    CHECK(new_bytes == 0);
    auto reloaded = load_manifest(objects, later->id);
    REQUIRE(reloaded.ok());
    CHECK(reloaded->origin.trial == "1.1");
    CHECK(reloaded->origin.step == 20);
  }
  SUBCASE("a corrupt file fails the restore and leaves no partial directory") {
    const fs::path stored = objects.path_of(manifest->files[0].sha256);
    fs::permissions(stored, fs::perms::owner_write, fs::perm_options::add);
    std::fstream f(stored, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5);
    f.put('\x01');
    f.close();
    Status st = materialize_checkpoint(objects, *loaded, dir / "restored2");
    CHECK(st.kind() == ErrorKind::kCorrupt);
    CHECK_FALSE(fs::exists(dir / "restored2"));
  }
}

TEST_CASE("a batch stores content seen twice once, and counts it once") {
  testing::TestDir dir;
  ObjectStore objects(dir / "objects");
  write(dir / "a", "twice");
  write(dir / "b", "twice");
  write(dir / "c", "once");
  auto adopted = objects.adopt_all({dir / "a", dir / "b", dir / "c"});
  REQUIRE(adopted.ok());
  REQUIRE(adopted->size() == 3);
  CHECK((*adopted)[0].hash == (*adopted)[1].hash);
  CHECK((*adopted)[0].added + (*adopted)[1].added == 1);
  CHECK((*adopted)[2].added);
  CHECK((*adopted)[2].size == 4);
  size_t stored = 0;
  for (auto it = fs::recursive_directory_iterator(dir / "objects");
       it != fs::recursive_directory_iterator(); ++it) {
    CHECK(it->path().filename().string().rfind("tmp-", 0) != 0);  // no temporary left
    if (it->is_regular_file()) ++stored;
  }
  CHECK(stored == 2);
  auto again = objects.adopt_all({dir / "a", dir / "c"});
  REQUIRE(again.ok());
  CHECK_FALSE((*again)[0].added);
  CHECK_FALSE((*again)[1].added);
}

TEST_CASE("a large object is copied out in ranges and its hash still verified") {
  testing::TestDir dir;
  ObjectStore objects(dir / "objects");
  std::string big(20 << 20, '\0');  // above the size where hashing and copying split
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 4099);
  write(dir / "stage/big.bin", big);
  write(dir / "stage/small.txt", "small");
  auto manifest = ingest_checkpoint_dir(objects, dir / "stage", {"1.1", 1});
  REQUIRE(manifest.ok());
  REQUIRE(materialize_checkpoint(objects, *manifest, dir / "out").ok());
  CHECK(*read_file(dir / "out/big.bin") == big);
  CHECK(*read_file(dir / "out/small.txt") == "small");

  const fs::path stored = objects.path_of(manifest->files[0].sha256);
  REQUIRE(manifest->files[0].path == "big.bin");
  fs::permissions(stored, fs::perms::owner_write, fs::perm_options::add);
  SUBCASE("a flipped byte near the end") {
    std::fstream f(stored, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(big.size() - 3));
    f.put('\x01');
  }
  SUBCASE("a truncated object") {
    fs::resize_file(stored, big.size() / 2);
  }
  SUBCASE("a missing object") {
    fs::remove(stored);
  }
  Status st = materialize_checkpoint(objects, *manifest, dir / "out2");
  CHECK(st.kind() == ErrorKind::kCorrupt);
  CHECK_FALSE(fs::exists(dir / "out2"));
}

TEST_CASE("a checkpoint with a symlink is refused") {
  testing::TestDir dir;
  ObjectStore objects(dir / "objects");
  write(dir / "stage/a", "x");
  fs::create_symlink("/etc/passwd", dir / "stage/link");
  auto manifest = ingest_checkpoint_dir(objects, dir / "stage", {"1.1", 10});
  CHECK(manifest.status().kind() == ErrorKind::kBadInput);
}

TEST_CASE("a checkpoint file whose name starts with two dots restores") {
  // "..weights" is an ordinary name: only a path that climbs out of the checkpoint is bad.
  testing::TestDir dir;
  ObjectStore objects(dir / "objects");
  write(dir / "stage/..weights", "w");
  write(dir / "stage/sub/..opt", "o");
  auto manifest = ingest_checkpoint_dir(objects, dir / "stage", {"1.1", 10});
  REQUIRE(manifest.ok());
  REQUIRE(materialize_checkpoint(objects, *manifest, dir / "restored").ok());
  CHECK(*read_file(dir / "restored/..weights") == "w");
  CHECK(*read_file(dir / "restored/sub/..opt") == "o");

  // A manifest naming a path outside the checkpoint is refused as corrupt, writing nothing.
  CheckpointManifest bad = *manifest;
  bad.files.front().path = "sub/../../escaped";
  CHECK(materialize_checkpoint(objects, bad, dir / "restored2").kind() == ErrorKind::kCorrupt);
  CHECK_FALSE(fs::exists(dir / "escaped"));
  CHECK_FALSE(fs::exists(dir / "restored2"));
}

TEST_CASE("stays_below: relative paths that do not climb out") {
  CHECK(stays_below("a"));
  CHECK(stays_below("..a/b"));
  CHECK(stays_below("a/../b"));
  CHECK_FALSE(stays_below(""));
  CHECK_FALSE(stays_below("/a"));
  CHECK_FALSE(stays_below(".."));
  CHECK_FALSE(stays_below("../a"));
  CHECK_FALSE(stays_below("a/../../b"));
  CHECK_FALSE(stays_below("a/.."));
}
}  // namespace cairn
