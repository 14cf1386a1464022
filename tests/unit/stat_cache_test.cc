#include "store/stat_cache.h"

#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_dir.h"
#include "tree_fixture.h"

namespace cairn {
namespace fs = std::filesystem;
using testing::TestDir;

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr int64_t kSecond = 1'000'000'000;

// Stat data of a file last changed an hour ago: well outside the racy window.
FileStat old_stat() {
  FileStat st;
  st.size = 1234;
  static const int64_t an_hour_ago = now_ns() - 3600 * kSecond;  // the same at every call
  st.mtime_ns = an_hour_ago;
  st.ctime_ns = st.mtime_ns + 5;
  st.ino = 424242;
  st.mode = S_IFREG | 0644;
  return st;
}

StatCache saved_and_loaded(const StatCache& cache, const fs::path& file, bool keep = false) {
  REQUIRE(cache.save(file, keep).ok());
  return StatCache::load(file);
}

// `n` keys as a walk meets them: directories one after another, not in sorted order.
std::vector<std::string> walk_keys(int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i)
    keys.push_back("pkg" + std::to_string((i * 7) % 5) + "/sub" + std::to_string(i % 3) + "/f" +
                   std::to_string(n - i));
  return keys;
}

// A value for `key`, of the same length whatever the key and tag; other tags, other digits.
std::string value_of(const std::string& key, const std::string& tag) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(std::hash<std::string>()(tag + key)));
  return tag + "-" + hex;
}

// The keys of a cache file, in the file's order.
std::vector<std::string> keys_in_file(const fs::path& file) {
  std::istringstream in(testing::read_bytes(file));
  std::vector<std::string> keys;
  for (std::string line; std::getline(in, line);) {
    const size_t tab = line.find('\t');
    if (tab != std::string::npos) keys.push_back(line.substr(tab + 1));
  }
  return keys;
}

// A cache file's lines but its second (the time it was written) and its last (the end line,
// which may carry a check of what precedes it).
std::vector<std::string> lines_but_time(const fs::path& file) {
  std::istringstream in(testing::read_bytes(file));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() >= 3);
  lines.erase(lines.begin() + 1);
  lines.pop_back();
  return lines;
}

}  // namespace

TEST_CASE("FileStat::of takes size, mtime, ctime, inode and mode from stat") {
  TestDir dir;
  testing::write_file(dir / "f", "12345");
  struct stat st;
  REQUIRE(::stat((dir / "f").c_str(), &st) == 0);
  const FileStat f = FileStat::of(st);
  CHECK(f.size == 5);
  CHECK(f.ino == st.st_ino);
  CHECK(f.mode == st.st_mode);
  CHECK(f.mtime_ns == int64_t{st.st_mtim.tv_sec} * kSecond + st.st_mtim.tv_nsec);
  CHECK(f.ctime_ns == int64_t{st.st_ctim.tv_sec} * kSecond + st.st_ctim.tv_nsec);
}

TEST_CASE("a stat cache round-trips through its file and misses on any change of stat data") {
  TestDir dir;
  const FileStat st = old_stat();
  StatCache cache;
  cache.record("a/b.py", st, "value-1");
  cache.record("name with spaces\tand a tab", st, "value-2");
  cache.record("line\nbreak", st, "never-written");
  // A cache answers from what it loaded, not from what it recorded since.
  CHECK_FALSE(cache.lookup("a/b.py", st).has_value());

  const StatCache loaded = saved_and_loaded(cache, dir / "sub/cache");
  CHECK(loaded.lookup("a/b.py", st) == "value-1");
  CHECK(loaded.lookup("name with spaces\tand a tab", st) == "value-2");
  CHECK_FALSE(loaded.lookup("line\nbreak", st).has_value());
  CHECK_FALSE(loaded.lookup("a/c.py", st).has_value());

  auto changed = [&](auto mutate) {
    FileStat other = st;
    mutate(other);
    return loaded.lookup("a/b.py", other).has_value();
  };
  CHECK_FALSE(changed([](FileStat& s) { s.size += 1; }));
  CHECK_FALSE(changed([](FileStat& s) { s.mtime_ns += 1; }));
  CHECK_FALSE(changed([](FileStat& s) { s.mtime_ns -= kSecond; }));
  CHECK_FALSE(changed([](FileStat& s) { s.ctime_ns += 1; }));
  CHECK_FALSE(changed([](FileStat& s) { s.ino += 1; }));
  CHECK_FALSE(changed([](FileStat& s) { s.mode |= 0100; }));
}

TEST_CASE("a missing or damaged cache file is an empty cache") {
  TestDir dir;
  const FileStat st = old_stat();
  CHECK_FALSE(StatCache::load(dir / "absent").lookup("k", st).has_value());
  testing::write_file(dir / "garbage", "not a cache\n1 2 3\n");
  CHECK_FALSE(StatCache::load(dir / "garbage").lookup("k", st).has_value());

  StatCache cache;
  cache.record("k", st, "v");
  cache.record("j", st, "w");
  REQUIRE(cache.save(dir / "cache").ok());
  std::string text = testing::read_bytes(dir / "cache");
  const size_t j_line = text.find("w ");
  REQUIRE(j_line != std::string::npos);
  text.replace(j_line, 2, "w x");  // a damaged line: the whole file is not used
  testing::write_file(dir / "cache", text);
  const StatCache damaged = StatCache::load(dir / "cache");
  CHECK_FALSE(damaged.lookup("k", st).has_value());
  CHECK_FALSE(damaged.lookup("j", st).has_value());
}

// Saved without fsync: after a crash the file may be cut short, and is then not used at all
// (a cut line could otherwise pair a key's prefix with another file's value).
TEST_CASE("a cache file cut short is not used") {
  TestDir dir;
  const FileStat st = old_stat();
  StatCache cache;
  cache.record("dir/key", st, "v");
  REQUIRE(cache.save(dir / "cache").ok());
  CHECK(StatCache::load(dir / "cache").lookup("dir/key", st) == "v");
  std::string text = testing::read_bytes(dir / "cache");
  text.resize(text.size() - 2);
  testing::write_file(dir / "cache", text);
  const StatCache cut = StatCache::load(dir / "cache");
  CHECK_FALSE(cut.lookup("dir/key", st).has_value());
  CHECK_FALSE(cut.contains("dir/key"));
  CHECK_FALSE(cut.contains_dir("dir"));
}

// An unchanged entry recorded again is written back as it was (record() marks it rather
// than copying it); an entry not recorded again drops out.
TEST_CASE("entries recorded again unchanged are saved; the others drop out") {
  TestDir dir;
  const FileStat st = old_stat();
  StatCache cache;
  cache.record("a/same", st, "1");
  cache.record("a/changed", st, "2");
  cache.record("gone", st, "3");
  const StatCache loaded = saved_and_loaded(cache, dir / "one");
  StatCache again = loaded;
  again.record("a/same", st, "1");
  again.record("a/changed", st, "22");
  const StatCache second = saved_and_loaded(again, dir / "two");
  CHECK(second.lookup("a/same", st) == "1");
  CHECK(second.lookup("a/changed", st) == "22");
  CHECK_FALSE(second.contains("gone"));
  CHECK(second.contains_dir("a"));
}

TEST_CASE("entries modified close to when the cache was written are not trusted") {
  TestDir dir;
  FileStat racy = old_stat();
  racy.mtime_ns = now_ns();  // the file may change again within its timestamp granule
  FileStat future = old_stat();
  future.mtime_ns = now_ns() + 3600 * kSecond;
  FileStat recent = old_stat();
  recent.mtime_ns = now_ns() - kSecond / 2;
  StatCache cache;
  cache.record("racy", racy, "r");
  cache.record("future", future, "f");
  cache.record("recent", recent, "n");
  cache.record("old", old_stat(), "o");
  const StatCache loaded = saved_and_loaded(cache, dir / "cache");
  CHECK_FALSE(loaded.lookup("racy", racy).has_value());
  CHECK_FALSE(loaded.lookup("future", future).has_value());
  CHECK_FALSE(loaded.lookup("recent", recent).has_value());
  CHECK(loaded.lookup("old", old_stat()) == "o");
}

TEST_CASE("save keeps loaded entries only with keep_loaded; recorded ones win") {
  TestDir dir;
  const FileStat st = old_stat();
  StatCache first;
  first.record("a", st, "a1");
  first.record("b", st, "b1");
  const StatCache loaded = saved_and_loaded(first, dir / "cache");

  StatCache again = loaded;
  again.record("a", st, "a2");
  again.record("c", st, "c2");

  SUBCASE("without keep_loaded: a cache of one tree, where unrecorded keys are deleted files") {
    const StatCache next = saved_and_loaded(again, dir / "cache", false);
    CHECK(next.lookup("a", st) == "a2");
    CHECK_FALSE(next.lookup("b", st).has_value());
    CHECK(next.lookup("c", st) == "c2");
  }
  SUBCASE("with keep_loaded: a cache shared by several users") {
    const StatCache next = saved_and_loaded(again, dir / "cache", true);
    CHECK(next.lookup("a", st) == "a2");
    CHECK(next.lookup("b", st) == "b1");
    CHECK(next.lookup("c", st) == "c2");
  }
}

// Regression (fixed): save(keep_loaded=true) writes the loaded entries again under the new cache's
// own write time, so an entry that was racy (untrusted) when recorded becomes trusted the next time
// any other user of the shared cache saves it, more than the racy window later, without its file
// ever being hashed again. If the file changed within its timestamp granule right after it was
// hashed (the very case the racy rule guards against), the stale hash is then served for good.
// FileHasher (store/data_fingerprint.cc) saves its cache this way; save() now leaves out
// loaded entries that were racy when loaded.
TEST_CASE("an entry racy when written stays untrusted when another user re-saves the cache") {
  TestDir dir;
  FileStat racy = old_stat();
  racy.mtime_ns = now_ns() - kSecond / 2;  // hashed half a second after its last change
  StatCache cache;
  cache.record("data.csv", racy, "hash-before-a-same-granule-change");
  const StatCache loaded = saved_and_loaded(cache, dir / "cache");
  REQUIRE_FALSE(loaded.lookup("data.csv", racy).has_value());  // racy: untrusted, rightly

  // Another user of the shared cache saves it once the racy window has passed: waits on the
  // clock (about 0.6 s), not a fixed sleep.
  const int64_t deadline = racy.mtime_ns + kSecond + kSecond / 10;
  while (now_ns() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  StatCache other = StatCache::load(dir / "cache");
  FileStat unrelated = old_stat();
  unrelated.ino = 1;
  other.record("other-file", unrelated, "x");
  REQUIRE(other.save(dir / "cache", true).ok());

  const StatCache later = StatCache::load(dir / "cache");
  CHECK(later.lookup("other-file", unrelated) == "x");
  CHECK_FALSE(later.lookup("data.csv", racy).has_value());
}

// The loaded text is one buffer that every copy of the cache shares, with the entries and
// directories as views into it: a copy must keep it alive, whatever becomes of the cache it
// was copied from. Reloading the original from a file of the same size but other values
// would most likely reuse the freed buffer, so a copy left with views into it would read
// the other values.
TEST_CASE("copies of a loaded cache stay valid after the original is destroyed or reloaded") {
  TestDir dir;
  const FileStat st = old_stat();
  const std::vector<std::string> keys = walk_keys(300);
  for (const char* tag : {"a", "b", "c"}) {
    StatCache cache;
    for (const std::string& k : keys) cache.record(k, st, value_of(k, tag));
    REQUIRE(cache.save(dir / tag).ok());
  }
  auto check = [&](const StatCache& copy, const std::string& tag) {
    for (const std::string& k : keys) CHECK(copy.lookup(k, st) == value_of(k, tag));
    CHECK(copy.contains_dir("pkg3/sub1"));
    CHECK_FALSE(copy.contains("pkg3"));
  };

  SUBCASE("the original destroyed") {
    std::optional<StatCache> copy;
    {
      const StatCache original = StatCache::load(dir / "a");
      copy = original;
    }
    const StatCache other = StatCache::load(dir / "b");  // may take the freed memory
    check(*copy, "a");
    check(other, "b");
  }
  SUBCASE("the original reloaded, from another file and from its own") {
    StatCache original = StatCache::load(dir / "a");
    const StatCache copy = original;
    original = StatCache::load(dir / "b");
    check(copy, "a");
    check(original, "b");
    StatCache second = copy;
    original = StatCache::load(dir / "c");
    second = StatCache::load(dir / "a");
    check(copy, "a");
    check(original, "c");
  }
  SUBCASE("a copy recorded into and saved, the original gone") {
    std::optional<StatCache> original = StatCache::load(dir / "a");
    StatCache copy = *original;
    original.reset();
    const StatCache other = StatCache::load(dir / "b");
    for (const std::string& k : keys) copy.record(k, st, value_of(k, "a"));  // kept as loaded
    REQUIRE(copy.save(dir / "again").ok());
    check(StatCache::load(dir / "again"), "a");
    check(other, "b");
  }
}

// Entries are saved in the order they were recorded (the walk's), which is the order the
// next walk asks for them; loaded entries kept unrecorded come after, in the file's order.
TEST_CASE("save writes entries in walk order, and a load and save round trip is identical") {
  TestDir dir;
  const FileStat st = old_stat();
  const std::vector<std::string> keys = walk_keys(200);
  StatCache cache;
  for (const std::string& k : keys) cache.record(k, st, value_of(k, "v"));
  REQUIRE(cache.save(dir / "first").ok());
  CHECK(keys_in_file(dir / "first") == keys);

  SUBCASE("recorded again in the same order, unchanged: the same lines") {
    StatCache again = StatCache::load(dir / "first");
    for (const std::string& k : keys) again.record(k, st, value_of(k, "v"));
    REQUIRE(again.save(dir / "second").ok());
    CHECK(lines_but_time(dir / "second") == lines_but_time(dir / "first"));
  }
  SUBCASE("kept unrecorded (keep_loaded): the same lines") {
    const StatCache again = StatCache::load(dir / "first");
    REQUIRE(again.save(dir / "second", true).ok());
    CHECK(lines_but_time(dir / "second") == lines_but_time(dir / "first"));
  }
  SUBCASE("a later walk in another order, some changed, some kept unrecorded") {
    StatCache again = StatCache::load(dir / "first");
    std::vector<std::string> walk(keys.rbegin(), keys.rbegin() + 120);  // the rest: unrecorded
    for (size_t i = 0; i < walk.size(); ++i)
      again.record(walk[i], st, value_of(walk[i], i % 3 == 0 ? "changed" : "v"));
    again.record("new/file", st, "n");
    walk.push_back("new/file");
    REQUIRE(again.save(dir / "second", true).ok());
    std::vector<std::string> expected = walk;
    expected.insert(expected.end(), keys.begin(), keys.begin() + 80);  // the file's order
    CHECK(keys_in_file(dir / "second") == expected);
    const StatCache loaded = StatCache::load(dir / "second");
    for (size_t i = 0; i + 1 < walk.size(); ++i)
      CHECK(loaded.lookup(walk[i], st) == value_of(walk[i], i % 3 == 0 ? "changed" : "v"));
  }
}

// find() looks first where the last lookup left off (a hint, right when keys are asked in
// the saved order); asked in any other order, every key must still be found through the
// hash, and an absent key must miss, wherever the hint points.
TEST_CASE("lookups out of walk order find every entry and miss absent ones") {
  TestDir dir;
  const FileStat st = old_stat();
  const std::vector<std::string> keys = walk_keys(500);
  StatCache cache;
  for (const std::string& k : keys) cache.record(k, st, value_of(k, "v"));
  REQUIRE(cache.save(dir / "cache").ok());
  const StatCache loaded = StatCache::load(dir / "cache");

  std::vector<std::string> order = keys;
  SUBCASE("in walk order") {}
  SUBCASE("reversed") {
    std::reverse(order.begin(), order.end());
  }
  SUBCASE("shuffled") {
    std::shuffle(order.begin(), order.end(), std::mt19937(7));
  }
  SUBCASE("every other, twice over") {
    order.clear();
    for (int pass = 0; pass < 2; ++pass)
      for (size_t i = pass; i < keys.size(); i += 2) order.push_back(keys[i]);
  }
  const std::set<std::string> present(keys.begin(), keys.end());
  size_t misses = 0;
  auto check_absent = [&](const std::string& key) {
    if (present.count(key)) return;
    ++misses;
    CHECK_FALSE(loaded.lookup(key, st).has_value());
    CHECK_FALSE(loaded.contains(key));
  };
  for (size_t i = 0; i < order.size(); ++i) {
    INFO(order[i]);
    CHECK(loaded.lookup(order[i], st) == value_of(order[i], "v"));
    CHECK(loaded.contains(order[i]));
    // Absent keys in between: with a suffix, cut short, its directory, elsewhere.
    check_absent(order[i] + "x");
    check_absent(order[i].substr(0, order[i].size() - 1));
    check_absent(order[i].substr(0, order[i].rfind('/')));
    check_absent("elsewhere/" + order[i]);
    if (i + 1 < order.size()) check_absent(order[i + 1] + "/");
  }
  CHECK(misses > 3 * order.size());
  CHECK_FALSE(loaded.lookup("", st).has_value());
}

// The hint is one per thread, shared by every cache that thread reads: a hint left by one
// cache must not make another answer with the first one's entry, even where both hold the
// same keys in the same order.
TEST_CASE("two caches read in turn on one thread do not confuse each other") {
  TestDir dir;
  const FileStat st = old_stat();
  const std::vector<std::string> keys = walk_keys(200);
  std::vector<std::string> fewer(keys.begin(), keys.begin() + 150);
  std::reverse(fewer.begin(), fewer.end());
  StatCache a, b, c;
  for (const std::string& k : keys) a.record(k, st, value_of(k, "a"));
  for (const std::string& k : keys) b.record(k, st, value_of(k, "b"));
  for (const std::string& k : fewer) c.record(k, st, value_of(k, "c"));
  REQUIRE(a.save(dir / "a").ok());
  REQUIRE(b.save(dir / "b").ok());
  REQUIRE(c.save(dir / "c").ok());
  const StatCache la = StatCache::load(dir / "a");
  const StatCache lb = StatCache::load(dir / "b");
  const StatCache lc = StatCache::load(dir / "c");
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string& k = keys[i];
    INFO(k);
    CHECK(la.lookup(k, st) == value_of(k, "a"));
    CHECK(lb.lookup(k, st) == value_of(k, "b"));
    if (i < 150)
      CHECK(lc.lookup(k, st) == value_of(k, "c"));
    else
      CHECK_FALSE(lc.lookup(k, st).has_value());
    CHECK(la.lookup_view(k, st) == std::optional<std::string_view>(value_of(k, "a")));
  }
  // One cache a key ahead of the other: where the first left the hint is exactly the key the
  // second asks for next, in its own entries.
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    INFO(keys[i]);
    CHECK(la.lookup(keys[i], st) == value_of(keys[i], "a"));
    CHECK(lb.lookup(keys[i + 1], st) == value_of(keys[i + 1], "b"));
  }
}

// Saved without fsync: after a crash the file may be cut short anywhere, or hold blocks
// that never reached the disk (zeros) or stale ones (another file's old bytes) while its
// end is intact. No such file may be used, not even in part: a damaged line can still
// parse, pairing a key with a value it never had (a data fingerprint would then report a
// wrong hash). Each case is checked at every offset of a small cache.
TEST_CASE("a cache file cut short or damaged anywhere is not used at all") {
  TestDir dir;
  const FileStat st = old_stat();
  // The last key ends in "end": cut after its line, the file ends as a whole one does.
  const std::vector<std::string> keys = {"src/model.py", "src/data/loader.py", "README",
                                         "lib/backend"};
  StatCache a, b;
  for (const std::string& k : keys) a.record(k, st, value_of(k, "a"));
  for (const std::string& k : keys) b.record(k, st, value_of(k, "b"));
  a.set_meta("meta-of-a");
  b.set_meta("meta-of-b");
  REQUIRE(a.save(dir / "a").ok());
  REQUIRE(b.save(dir / "b").ok());
  const std::string text = testing::read_bytes(dir / "a");
  const std::string other = testing::read_bytes(dir / "b");
  {
    const StatCache whole = StatCache::load(dir / "a");
    for (const std::string& k : keys) REQUIRE(whole.lookup(k, st) == value_of(k, "a"));
  }
  auto unused = [&](const std::string& damaged) {
    testing::write_file(dir / "damaged", damaged);
    const StatCache loaded = StatCache::load(dir / "damaged");
    for (const std::string& k : keys) CHECK_FALSE(loaded.contains(k));
    CHECK_FALSE(loaded.contains_dir("src"));
    CHECK(loaded.meta().empty());
  };

  SUBCASE("cut short") {
    for (size_t n = 0; n < text.size(); ++n) {
      INFO("the first " << n << " bytes");
      unused(text.substr(0, n));
    }
  }
  SUBCASE("a run of zeros") {
    for (size_t at = 0; at + 8 <= text.size(); ++at) {
      INFO("zeros at " << at);
      std::string damaged = text;
      damaged.replace(at, 8, std::string(8, '\0'));
      unused(damaged);
    }
  }
  SUBCASE("a byte changed") {
    for (size_t at = 0; at < text.size(); ++at) {
      INFO("byte " << at);
      std::string damaged = text;
      damaged[at] = static_cast<char>(damaged[at] ^ 0x01);
      unused(damaged);
    }
  }
  SUBCASE("a stale run of another cache's bytes") {
    REQUIRE(other.size() == text.size());
    size_t differing = 0;
    for (size_t at = 0; at + 16 <= text.size(); ++at) {
      std::string damaged = text;
      damaged.replace(at, 16, other.substr(at, 16));
      if (damaged == text) continue;
      ++differing;
      INFO("stale bytes at " << at);
      unused(damaged);
    }
    CHECK(differing > 100);  // a run over each value, the meta line, the time, the check
  }
}

}  // namespace cairn
