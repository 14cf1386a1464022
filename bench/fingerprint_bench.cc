// Data fingerprint cost (issue 5): fingerprint_data() of a generated data directory, the
// first run (every file hashed) and the second run of the unchanged directory (the stat
// cache answers); beside it, a bare walk that only stats every file (the floor), and
// `sha256sum` of the same files (what hashing costs elsewhere).
//
//   cmake --build build -j2 --target bench_fingerprint_bench
//   build/bench_fingerprint_bench [--files 1000] [--mb 1000] [--reps 3] [--limit-mb 100]
//                                 [--dir DIR] [--keep] [--no-sha256sum]
//
// The data is random bytes (as compressed images or binary shards are; SHA-256 costs the
// same whatever the bytes), in 10 subdirectories, aged an hour back (data that was not
// just written); it is read from the page cache. --limit-mb is the store limit passed on
// (cairn's default snapshot limit, 100 MB): data over it is fingerprinted, not stored.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "store/data_fingerprint.h"
#include "store/store_location.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty()      ? 0
         : v.size() % 2 ? v[v.size() / 2]
                        : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double load_average() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

void die(const std::string& what) {
  std::fprintf(stderr, "fingerprint_bench: %s\n", what.c_str());
  std::exit(1);
}

uint64_t generate(const fs::path& data, int files, double mb) {
  std::mt19937_64 rng(42);
  const uint64_t each = static_cast<uint64_t>(mb * 1e6 / files);
  std::string buf(each, '\0');
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_sec -= 3600;
  const timespec times[2] = {t, t};
  uint64_t total = 0;
  for (int i = 0; i < files; ++i) {
    for (size_t k = 0; k + 8 <= buf.size(); k += 8) {
      const uint64_t r = rng();
      std::memcpy(&buf[k], &r, 8);
    }
    const fs::path p = data / ("shard" + std::to_string(i % 10)) / ("part-" + std::to_string(i));
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << buf;
    ::utimensat(AT_FDCWD, p.c_str(), times, 0);
    total += buf.size();
  }
  return total;
}

double stat_walk(const fs::path& data) {
  const auto t = Clock::now();
  size_t n = 0;
  for (auto it = fs::recursive_directory_iterator(data); it != fs::recursive_directory_iterator();
       ++it) {
    struct stat st;
    n += ::stat(it->path().c_str(), &st) == 0;
  }
  return n ? seconds_since(t) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  int files = 1000, reps = 3;
  double mb = 1000, limit_mb = 100;
  fs::path dir;
  bool keep = false, sha256sum = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--files")
      files = std::stoi(next());
    else if (a == "--mb")
      mb = std::stod(next());
    else if (a == "--reps")
      reps = std::stoi(next());
    else if (a == "--limit-mb")
      limit_mb = std::stod(next());
    else if (a == "--dir")
      dir = next();
    else if (a == "--keep")
      keep = true;
    else if (a == "--no-sha256sum")
      sha256sum = false;
    else
      die("unknown option " + a);
  }
  if (dir.empty()) dir = fs::temp_directory_path() / ("cairn-fpbench-" + std::to_string(getpid()));
  fs::remove_all(dir);
  const fs::path work = dir / "work";
  std::printf("load average before: %.2f\n", load_average());
  auto t = Clock::now();
  const uint64_t total = generate(work / "data", files, mb);
  std::printf("data %s: %d files, %.1f MB random bytes, in 10 directories; generated in %.1f s\n",
              (work / "data").c_str(), files, total / 1e6, seconds_since(t));
  (void)std::system("sync");

  const uint64_t limit = static_cast<uint64_t>(limit_mb * (1 << 20));
  std::vector<double> first, second, walk, sums;
  for (int rep = 1; rep <= reps; ++rep) {
    const fs::path store_dir = dir / ("store" + std::to_string(rep));
    auto store = cairn::init_store(store_dir);
    if (!store.ok()) die(store.status().message());
    t = Clock::now();
    auto fp1 = cairn::fingerprint_data(*store, work, {"data"}, limit);
    first.push_back(seconds_since(t));
    if (!fp1.ok()) die(fp1.status().message());
    t = Clock::now();
    auto fp2 = cairn::fingerprint_data(*store, work, {"data"}, limit);
    second.push_back(seconds_since(t));
    if (!fp2.ok()) die(fp2.status().message());
    if (fp2->digest != fp1->digest) die("the digest changed between runs");
    walk.push_back(stat_walk(work / "data"));
    if (sha256sum) {
      t = Clock::now();
      if (std::system(("find '" + (work / "data").string() +
                       "' -type f -print0 | xargs -0 sha256sum > /dev/null")
                          .c_str()) != 0)
        die("sha256sum failed");
      sums.push_back(seconds_since(t));
    }
    std::printf(
        "rep %d: first run %.3f s (%.0f MB/s), second run %.4f s, stat walk %.4f s%s | "
        "stored: %s | load %.2f\n",
        rep, first.back(), total / 1e6 / first.back(), second.back(), walk.back(),
        sha256sum ? (", sha256sum " + std::to_string(sums.back()) + " s").c_str() : "",
        fp1->stored ? "yes" : "no", load_average());
    if (!keep) fs::remove_all(store_dir);
  }
  std::printf("\nmedians of %d reps: first run %.3f s, second run %.4f s, stat walk %.4f s", reps,
              median(first), median(second), median(walk));
  if (sha256sum) std::printf(", sha256sum %.3f s", median(sums));
  std::printf("\nload average after: %.2f\n", load_average());
  if (!keep) fs::remove_all(dir);
  return 0;
}
