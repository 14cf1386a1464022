#include <doctest/doctest.h>

#include <algorithm>

#include "common/sha256.h"
#include "engine/coordinator/dependency_fingerprint.h"
#include "store/data_fingerprint.h"
#include "store/object_store.h"
#include "store/store_location.h"
#include "test_dir.h"
#include "tree_fixture.h"

namespace cairn {
namespace fs = std::filesystem;
using testing::read_bytes;
using testing::TestDir;
using testing::write_file;

namespace {

constexpr uint64_t kNoLimit = ~uint64_t{0};

struct DataFixture {
  TestDir dir;
  StoreLayout store{*init_store(dir / "store")};
  fs::path work = dir / "work";

  DataFixture() {
    write_file(work / "data/train.csv", "x,y\n1,2\n");
    write_file(work / "data/sub/test.csv", "x,y\n3,4\n");
    write_file(work / "data/sub/empty", "");
    write_file(work / "labels.txt", "cat\ndog\n");
    write_file(dir / "outside/abs.bin", "absolute");
  }

  std::vector<std::string> paths() const {
    return {"data/", "labels.txt", (dir / "outside/abs.bin").string()};
  }

  DataFingerprint fingerprint(uint64_t limit = kNoLimit) {
    auto fp = fingerprint_data(store, work, paths(), limit);
    INFO(fp.status().message());
    REQUIRE(fp.ok());
    return *fp;
  }
};

}  // namespace

TEST_CASE("a data fingerprint lists every file, sorted, with its SHA-256 and size") {
  DataFixture f;
  const DataFingerprint fp = f.fingerprint();
  const std::string abs = (f.dir / "outside/abs.bin").string();
  const std::vector<std::pair<std::string, std::string>> expected = {
      {abs, "absolute"},
      {"data/sub/empty", ""},
      {"data/sub/test.csv", "x,y\n3,4\n"},
      {"data/train.csv", "x,y\n1,2\n"},
      {"labels.txt", "cat\ndog\n"}};
  REQUIRE(fp.files.size() == expected.size());
  uint64_t bytes = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO(expected[i].first);
    CHECK(fp.files[i].path == expected[i].first);
    CHECK(fp.files[i].sha256 == sha256_hex(expected[i].second));
    CHECK(fp.files[i].size == expected[i].second.size());
    bytes += expected[i].second.size();
  }
  CHECK(fp.bytes == bytes);
  CHECK(fp.digest.size() == 64);
  CHECK(f.fingerprint().digest == fp.digest);  // deterministic

  auto back = data_fingerprint_from_json(to_json(fp));
  REQUIRE(back.ok());
  CHECK(back->digest == fp.digest);
  CHECK(back->stored == fp.stored);
  CHECK(back->bytes == fp.bytes);
  REQUIRE(back->files.size() == fp.files.size());
  CHECK(back->files[2].sha256 == fp.files[2].sha256);
}

TEST_CASE("the data digest changes when a file changes, appears or disappears") {
  DataFixture f;
  const std::string base = f.fingerprint().digest;
  SUBCASE("content") {
    write_file(f.work / "data/train.csv", "x,y\n1,3\n");
    CHECK(f.fingerprint().digest != base);
  }
  SUBCASE("added") {
    write_file(f.work / "data/sub/new.csv", "");
    CHECK(f.fingerprint().digest != base);
  }
  SUBCASE("removed") {
    fs::remove(f.work / "data/sub/empty");
    CHECK(f.fingerprint().digest != base);
  }
  SUBCASE("renamed") {
    fs::rename(f.work / "data/sub/test.csv", f.work / "data/sub/test2.csv");
    CHECK(f.fingerprint().digest != base);
  }
}

TEST_CASE("fingerprinting unchanged data again reads no file") {
  DataFixture f;
  testing::age_tree(f.work);  // outside the racy window of the cache written now
  testing::age_tree(f.dir / "outside");
  const DataFingerprint first = f.fingerprint();
  {
    FileHasher hasher(f.store);  // the same cache fingerprint_data() used
    for (const DataFile& d : first.files) {
      const fs::path p = fs::path(d.path).is_absolute() ? fs::path(d.path) : f.work / d.path;
      auto h = hasher.hash(p);
      REQUIRE(h.ok());
      CHECK(*h == d.sha256);
    }
    CHECK(hasher.computed() == 0);
  }
  const uint64_t before = testing::bytes_read();
  CHECK(f.fingerprint().digest == first.digest);
  // The cache file is read (a few hundred bytes), no data file is.
  CHECK(testing::bytes_read() - before < 4096);

  SUBCASE("a changed file is hashed again, and only it") {
    const timespec old = testing::mtime_of(f.work / "data/train.csv");
    write_file(f.work / "data/train.csv", "x,y\n9,9\n");  // same size, mtime put back
    testing::set_mtime(f.work / "data/train.csv", old);
    FileHasher hasher(f.store);
    for (const char* p : {"data/train.csv", "data/sub/test.csv", "labels.txt"})
      REQUIRE(hasher.hash(f.work / p).ok());
    CHECK(hasher.computed() == 1);
    CHECK(*hasher.hash(f.work / "data/train.csv") == sha256_hex("x,y\n9,9\n"));
  }
}

TEST_CASE("data is kept in the object store when it fits under the limit") {
  DataFixture f;
  ObjectStore objects(f.store.objects());
  const uint64_t total = f.fingerprint(0).bytes;  // 0: fingerprinted only
  SUBCASE("over the limit: fingerprinted only") {
    const DataFingerprint fp = f.fingerprint(total - 1);
    CHECK_FALSE(fp.stored);
    for (const DataFile& d : fp.files) CHECK_FALSE(objects.contains(d.sha256));
  }
  SUBCASE("at the limit: stored") {
    const DataFingerprint fp = f.fingerprint(total);
    CHECK(fp.stored);
    for (const DataFile& d : fp.files) CHECK(objects.contains(d.sha256));
  }
}

TEST_CASE("restore_data puts back the recorded bytes after the originals changed") {
  DataFixture f;
  const DataFingerprint fp = f.fingerprint();
  REQUIRE(fp.stored);
  write_file(f.work / "data/train.csv", "edited since");
  fs::remove(f.work / "data/sub/test.csv");
  write_file(f.dir / "outside/abs.bin", "absolute paths are read where they are");

  const fs::path dest = f.dir / "restored";
  write_file(dest / "data/train.csv", "whatever the checkout held");
  REQUIRE(restore_data(f.store, fp, dest).ok());
  CHECK(read_bytes(dest / "data/train.csv") == "x,y\n1,2\n");
  CHECK(read_bytes(dest / "data/sub/test.csv") == "x,y\n3,4\n");
  CHECK(read_bytes(dest / "labels.txt") == "cat\ndog\n");
  CHECK(fs::exists(dest / "data/sub/empty"));
  CHECK_FALSE(fs::exists(dest / "outside"));
  size_t restored = 0;
  for (auto it = fs::recursive_directory_iterator(dest); it != fs::recursive_directory_iterator();
       ++it)
    restored += it->is_regular_file();
  CHECK(restored == 4);  // the absolute path is not copied anywhere

  SUBCASE("a damaged object is Corrupt, naming the data file") {
    ObjectStore objects(f.store.objects());
    const fs::path object = objects.path_of(sha256_hex("x,y\n3,4\n"));
    fs::permissions(object, fs::perms::owner_write, fs::perm_options::add);
    std::string bytes = read_bytes(object);
    bytes[2] ^= 0x01;
    write_file(object, bytes);
    const Status st = restore_data(f.store, fp, f.dir / "restored2");
    CHECK(st.kind() == ErrorKind::kCorrupt);
    CHECK(st.message().find("data/sub/test.csv") != std::string::npos);
  }
}

TEST_CASE("a data path that does not exist is bad input, named") {
  DataFixture f;
  auto fp = fingerprint_data(f.store, f.work, {"data", "data/missing.csv"}, kNoLimit);
  REQUIRE_FALSE(fp.ok());
  CHECK(fp.status().kind() == ErrorKind::kBadInput);
  CHECK(fp.status().message().find("data/missing.csv") != std::string::npos);
}

TEST_CASE("a symbolic link loop under a data path is listed once and ends") {
  DataFixture f;
  fs::create_directory_symlink("..", f.work / "data/sub/up");
  const DataFingerprint fp = f.fingerprint();
  size_t train = 0;
  for (const DataFile& d : fp.files) train += d.sha256 == sha256_hex("x,y\n1,2\n");
  CHECK(train == 1);
}

TEST_CASE("hash_data gives the recorded hashes for unchanged data, keeps nothing, reads no file") {
  DataFixture f;
  testing::age_tree(f.work);  // outside the racy window of the cache written now
  testing::age_tree(f.dir / "outside");
  const DataFingerprint recorded = f.fingerprint(0);  // too large to keep: hashes only
  REQUIRE_FALSE(recorded.stored);
  const uint64_t before = testing::bytes_read();
  auto now = hash_data(f.store, f.work, f.paths());
  REQUIRE(now.ok());
  CHECK(testing::bytes_read() - before < 4096);  // the cache file, no data file
  CHECK_FALSE(now->stored);
  CHECK(now->digest == recorded.digest);
  CHECK(compare_data(recorded, *now).empty());
  ObjectStore objects(f.store.objects());
  for (const DataFile& d : now->files) CHECK_FALSE(objects.contains(d.sha256));
}

TEST_CASE("data reached through a link, as in a run directory, is known to the stat cache") {
  DataFixture f;
  testing::age_tree(f.work);
  testing::age_tree(f.dir / "outside");
  const DataFingerprint recorded = f.fingerprint(0);
  // A checkout whose data entries are links to the project's, as `cairn reproduce` makes.
  const fs::path checkout = f.dir / "checkout";
  fs::create_directories(checkout);
  fs::create_directory_symlink("../work/data", checkout / "data");
  fs::create_symlink("../work/labels.txt", checkout / "labels.txt");
  const uint64_t before = testing::bytes_read();
  auto now = hash_data(f.store, checkout, f.paths());
  REQUIRE(now.ok());
  CHECK(testing::bytes_read() - before < 4096);  // the cache file, no data file
  CHECK(now->digest == recorded.digest);
}

TEST_CASE("compare_data names the files changed, removed and added, sorted") {
  DataFixture f;
  const DataFingerprint recorded = f.fingerprint(0);
  write_file(f.work / "data/train.csv", "x,y\n1,3\n");
  fs::remove(f.work / "data/sub/empty");
  fs::remove(f.work / "labels.txt");  // a `data:` entry that is gone: its files are removed
  write_file(f.work / "data/sub/new.csv", "");
  write_file(f.work / "data/a.csv", "");
  auto now = hash_data(f.store, f.work, f.paths());
  INFO(now.status().message());
  REQUIRE(now.ok());
  const DataChanges changes = compare_data(recorded, *now);
  CHECK_FALSE(changes.empty());
  CHECK(changes.changed == std::vector<std::string>{"data/train.csv"});
  CHECK(changes.removed == std::vector<std::string>{"data/sub/empty", "labels.txt"});
  CHECK(changes.added == std::vector<std::string>{"data/a.csv", "data/sub/new.csv"});

  SUBCASE("a record read back out of order compares the same") {
    DataFingerprint shuffled = recorded;
    std::reverse(shuffled.files.begin(), shuffled.files.end());
    const DataChanges again = compare_data(shuffled, *now);
    CHECK(again.changed == changes.changed);
    CHECK(again.removed == changes.removed);
    CHECK(again.added == changes.added);
  }
}

// --- the dependency fingerprint ---

namespace {

Json deps(const StoreLayout& store, std::vector<std::string> entrypoint, const fs::path& workdir,
          std::map<std::string, std::string> env = {}, bool builtin = false) {
  DependencyInput in;
  in.entrypoint = std::move(entrypoint);
  in.workdir = workdir;
  in.environment = std::move(env);
  in.builtin = builtin;
  return dependency_fingerprint(store, in);
}

}  // namespace

TEST_CASE("the dependency fingerprint of Debian's python3 names python, numpy, libc, the machine") {
  TestDir dir;
  const StoreLayout store = *init_store(dir.path());
  const Json fp = deps(store, {"/usr/bin/python3", "train.py"}, dir.path());
  INFO(fp.dump(1));
  for (const char* key :
       {"cairn", "os", "kernel", "cpu", "program", "python", "numpy", "libc.so.6"})
    CHECK(fp.contains(key));
  CHECK(fp.value("program", "").rfind("/usr/bin/python3", 0) == 0);
  CHECK(fp.value("program", "").find(" sha256:") != std::string::npos);
  CHECK(fp.value("python", "").rfind("3.", 0) == 0);
  CHECK_FALSE(fp.contains("interpreter"));  // an ELF program is not a script

  const Json again = deps(store, {"/usr/bin/python3", "train.py"}, dir.path());
  CHECK(again == fp);
}

TEST_CASE("the dependency fingerprint: environment entries, builtin entrypoints") {
  TestDir dir;
  const StoreLayout store = *init_store(dir.path());
  const Json fp = deps(store, {"cairn-builtin"}, dir.path(),
                       {{"OMP_NUM_THREADS", "4"}, {"CAIRN_TEST_X", "a b"}}, true);
  INFO(fp.dump(1));
  CHECK(fp.value("env OMP_NUM_THREADS", "") == "4");
  CHECK(fp.value("env CAIRN_TEST_X", "") == "a b");
  CHECK_FALSE(fp.contains("program"));
  CHECK(fp.contains("cairn"));
  CHECK(fp.contains("kernel"));
}

TEST_CASE("fingerprinting a script or a non-ELF program never runs it") {
  TestDir dir;
  const StoreLayout store = *init_store(dir / "store");
  const fs::path w = dir / "work";
  const fs::path marker = dir / "ran";

  SUBCASE("a #! script: the interpreter is fingerprinted, the script is not run") {
    write_file(w / "train.sh", "#!/bin/sh\ntouch '" + marker.string() + "'\n");
    fs::permissions(w / "train.sh", fs::perms(0755));
    const Json fp = deps(store, {"./train.sh"}, w);
    INFO(fp.dump(1));
    CHECK_FALSE(fs::exists(marker));
    CHECK_FALSE(fp.contains("program"));  // in the workdir: code, in the snapshot
    CHECK(fp.contains("interpreter"));
    CHECK(fp.contains("libc.so.6"));  // the interpreter's libraries
  }
  SUBCASE("an executable without #! and not ELF") {
    write_file(w / "job", "touch '" + marker.string() + "'\n");
    fs::permissions(w / "job", fs::perms(0755));
    const Json fp = deps(store, {"job"}, w, {{"PATH", w.string() + ":/usr/bin:/bin"}});
    INFO(fp.dump(1));
    CHECK_FALSE(fs::exists(marker));
    CHECK_FALSE(fp.contains("program"));  // in the workdir: code
    CHECK_FALSE(fp.contains("libc.so.6"));
  }
  SUBCASE("a script named like python") {
    write_file(w / "python-train", "#!/bin/sh\ntouch '" + marker.string() + "'\n");
    fs::permissions(w / "python-train", fs::perms(0755));
    deps(store, {"./python-train"}, w);
    CHECK_FALSE(fs::exists(marker));
  }
}

#if defined(__x86_64__)
namespace {

// A static x86-64 Linux executable, 148 bytes and a path: creat(marker, 0644); exit(0). If
// the fingerprint ran it, the marker would appear.
std::string static_elf_creating(const fs::path& marker) {
  std::string code = {'\xb8', '\x55', 0,      0,      0,        // mov eax, 85 (creat)
                      '\x48', '\x8d', '\x3d', '\x10', 0, 0, 0,  // lea rdi, [rip + 16]: the path
                      '\xbe', '\xa4', '\x01', 0,      0,        // mov esi, 0644
                      '\x0f', '\x05',                           // syscall
                      '\xb8', '\x3c', 0,      0,      0,        // mov eax, 60 (exit)
                      '\x31', '\xff',                           // xor edi, edi
                      '\x0f', '\x05'};                          // syscall
  code += marker.string() + std::string(1, '\0');
  auto put = [](std::string& out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  const uint64_t base = 0x400000, header = 64 + 56, size = header + code.size();
  std::string elf = {'\x7f', 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  put(elf, 2, 2);              // e_type: EXEC
  put(elf, 0x3e, 2);           // e_machine: x86-64
  put(elf, 1, 4);              // e_version
  put(elf, base + header, 8);  // e_entry
  put(elf, 64, 8);             // e_phoff
  put(elf, 0, 8);              // e_shoff
  put(elf, 0, 4);              // e_flags
  put(elf, 64, 2);             // e_ehsize
  put(elf, 56, 2);             // e_phentsize
  put(elf, 1, 2);              // e_phnum
  put(elf, 0, 6);              // e_shentsize, e_shnum, e_shstrndx
  put(elf, 1, 4);              // p_type: LOAD (no PT_INTERP: static)
  put(elf, 5, 4);              // p_flags: R+X
  put(elf, 0, 8);              // p_offset
  put(elf, base, 8);           // p_vaddr
  put(elf, base, 8);           // p_paddr
  put(elf, size, 8);           // p_filesz
  put(elf, size, 8);           // p_memsz
  put(elf, 0x1000, 8);         // p_align
  return elf + code;
}

// Writes the executable and checks that running it does leave the marker: the probe works.
void write_static_probe(const fs::path& exe, const fs::path& marker) {
  write_file(exe, static_elf_creating(marker));
  fs::permissions(exe, fs::perms(0755));
  REQUIRE(testing::sh("'" + exe.string() + "'") == 0);
  REQUIRE(fs::exists(marker));
  fs::remove(marker);
}

}  // namespace

TEST_CASE("fingerprinting a static executable never runs it") {
  TestDir dir;
  const StoreLayout store = *init_store(dir / "store");
  const fs::path w = dir / "work", marker = dir / "ran";
  write_static_probe(w / "job", marker);
  const Json fp = deps(store, {"./job", "--epochs", "3"}, w);
  INFO(fp.dump(1));
  CHECK_FALSE(fs::exists(marker));
  CHECK_FALSE(fp.contains("program"));  // in the workdir: code, in the snapshot
  CHECK_FALSE(fp.contains("libc.so.6"));
}

// Regression (fixed): a program whose file name starts with "python" was run as
// `BINARY -c <script>` to list Python distributions, at `cairn run`, with arguments it was
// not written for. Only a dynamically linked executable named python[0-9.]* is asked now.
TEST_CASE("a program whose name starts with python but is not Python is not run") {
  TestDir dir;
  const StoreLayout store = *init_store(dir / "store");
  const fs::path w = dir / "work", marker = dir / "ran";
  write_static_probe(w / "python-job", marker);
  deps(store, {"./python-job"}, w);
  CHECK_FALSE(fs::exists(marker));
}
#endif

TEST_CASE("a file named by two data entries, one through a link, is listed and counted once") {
  DataFixture f;
  fs::create_symlink(f.work / "labels.txt", f.work / "data/labels.link");
  auto fp = fingerprint_data(f.store, f.work, {"data", "data/labels.link"}, kNoLimit);
  REQUIRE(fp.ok());
  uint64_t bytes = 0;
  size_t links = 0;
  for (const DataFile& d : fp->files) {
    bytes += d.size;
    links += d.path == "data/labels.link";
  }
  CHECK(links == 1);
  CHECK(bytes == std::string("x,y\n1,2\n").size() * 2 + std::string("cat\ndog\n").size());
}

}  // namespace cairn
