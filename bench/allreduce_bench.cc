// CPU all-reduce bandwidth through cairn's Gloo path (collective/gloo_collective.h): N ranks as N
// processes forked by this program, meeting through a FileKeyValueStore in a temporary
// directory. bench/allreduce_mpi.c measures MPI_Allreduce the same way and
// bench/allreduce_bench.py runs both and compares; see bench/README.md.
//
// For each size: 5 warm-up calls, then rank 0 picks the number of back-to-back calls k that takes
// about --rep-seconds and broadcasts it; each of --reps repetitions is barrier, k calls,
// and its time / k; the median is reported. busbw = algbw * 2(n-1)/n as nccl-tests
// defines it (algbw = bytes / time).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "collective/file_kv_store.h"
#include "collective/gloo_collective.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int ranks = 2;
  std::vector<size_t> sizes;
  int reps = 7;
  double rep_seconds = 0.25;
  std::string host = "127.0.0.1";
  cairn::GlooAlgorithm algorithm = cairn::GlooAlgorithm::kRing;
  size_t segment_bytes = 0;
  double timeout_s = 120;
  bool busy_poll = cairn::GlooOptions{}.busy_poll;
  bool json = false;
};

size_t parse_size(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  std::string unit = end;
  if (unit == "K" || unit == "KB") v *= 1024;
  if (unit == "M" || unit == "MB") v *= 1024 * 1024;
  if (unit == "G" || unit == "GB") v *= 1024.0 * 1024 * 1024;
  return static_cast<size_t>(v);
}

std::vector<size_t> default_sizes() {
  std::vector<size_t> sizes;
  for (size_t s = 4 << 10; s <= (256u << 20); s *= 4) sizes.push_back(s);
  return sizes;
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: bench_allreduce_bench [--ranks N] [--sizes 4K,1M,...] [--reps R]\n"
               "  [--rep-seconds S] [--host ADDR|IFACE] [--algorithm ring|gloo-ring|gloo-bcube]\n"
               "  [--busy-poll|--no-busy-poll]"
               "  [--segment BYTES] [--timeout SECONDS] [--json]\n");
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string opt = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (opt == "--ranks") {
      a.ranks = std::stoi(next());
    } else if (opt == "--sizes") {
      std::string list = next();
      size_t pos = 0;
      while (pos <= list.size()) {
        size_t comma = list.find(',', pos);
        if (comma == std::string::npos) comma = list.size();
        a.sizes.push_back(parse_size(list.substr(pos, comma - pos)));
        pos = comma + 1;
      }
    } else if (opt == "--reps") {
      a.reps = std::stoi(next());
    } else if (opt == "--rep-seconds") {
      a.rep_seconds = std::stod(next());
    } else if (opt == "--host") {
      a.host = next();
    } else if (opt == "--algorithm") {
      std::string name = next();
      if (name == "ring")
        a.algorithm = cairn::GlooAlgorithm::kRing;
      else if (name == "gloo-ring")
        a.algorithm = cairn::GlooAlgorithm::kGlooRing;
      else if (name == "gloo-bcube")
        a.algorithm = cairn::GlooAlgorithm::kGlooBcube;
      else
        usage();
    } else if (opt == "--no-busy-poll") {
      a.busy_poll = false;
    } else if (opt == "--busy-poll") {
      a.busy_poll = true;
    } else if (opt == "--segment") {
      a.segment_bytes = parse_size(next());
    } else if (opt == "--timeout") {
      a.timeout_s = std::stod(next());
    } else if (opt == "--json") {
      a.json = true;
    } else {
      usage();
    }
  }
  if (a.sizes.empty()) a.sizes = default_sizes();
  if (a.ranks < 2 || a.reps < 1) usage();
  return a;
}

int fail(int rank, const cairn::Status& st) {
  std::fprintf(stderr, "rank %d: %s\n", rank, st.message().c_str());
  return 1;
}

int run_rank(const Args& args, int rank, const std::filesystem::path& store_dir) {
  cairn::FileKeyValueStore kv(store_dir);
  cairn::GlooOptions options;
  options.host = args.host;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(args.timeout_s * 1000));
  options.algorithm = args.algorithm;
  options.segment_bytes = args.segment_bytes;
  options.busy_poll = args.busy_poll;
  auto made = cairn::make_gloo_collective(kv, rank, args.ranks, options);
  if (!made.ok()) return fail(rank, made.status());
  cairn::Collective& c = **made;
  const int n = args.ranks;

  if (rank == 0 && !args.json)
    std::printf("%12s %12s %12s %12s\n", "bytes", "time_us", "algbw_GB/s", "busbw_GB/s");
  for (size_t bytes : args.sizes) {
    const size_t count = std::max<size_t>(1, bytes / sizeof(float));
    std::vector<float> data(count, 0.0f);
    // Warm-up, and a first estimate of the time per call. A fixed count: every rank must
    // make the same calls.
    const int warm = 5;
    const auto w0 = Clock::now();
    for (int i = 0; i < warm; ++i)
      if (auto st = c.allreduce_sum(data.data(), count); !st.ok()) return fail(rank, st);
    const double per_call = std::chrono::duration<double>(Clock::now() - w0).count() / warm;
    int64_t k = std::max<int64_t>(1, static_cast<int64_t>(args.rep_seconds / per_call));
    if (auto st = c.broadcast(&k, sizeof(k), 0); !st.ok()) return fail(rank, st);

    std::vector<double> times;
    for (int rep = 0; rep < args.reps; ++rep) {
      if (auto st = c.barrier(); !st.ok()) return fail(rank, st);
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < k; ++i)
        if (auto st = c.allreduce_sum(data.data(), count); !st.ok()) return fail(rank, st);
      times.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / k);
    }
    std::sort(times.begin(), times.end());
    const double t = times[times.size() / 2];
    const double algbw = static_cast<double>(count * sizeof(float)) / t / 1e9;
    const double busbw = algbw * 2.0 * (n - 1) / n;
    if (rank == 0) {
      if (args.json)
        std::printf(
            "{\"impl\":\"gloo\",\"ranks\":%d,\"bytes\":%zu,\"calls\":%lld,\"reps\":%d,"
            "\"time_us\":%.3f,\"algbw_gbs\":%.4f,\"busbw_gbs\":%.4f}\n",
            n, count * sizeof(float), static_cast<long long>(k), args.reps, t * 1e6, algbw, busbw);
      else
        std::printf("%12zu %12.1f %12.3f %12.3f\n", count * sizeof(float), t * 1e6, algbw, busbw);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  char tmpl[] = "/tmp/cairn-allreduce-XXXXXX";
  if (!::mkdtemp(tmpl)) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::filesystem::path store_dir = tmpl;

  std::vector<pid_t> children;
  for (int rank = 0; rank < args.ranks; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) {
      const int rc = run_rank(args, rank, store_dir);
      std::fflush(stdout);
      ::_exit(rc);
    }
    children.push_back(pid);
  }
  int rc = 0;
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  std::error_code ec;
  std::filesystem::remove_all(store_dir, ec);
  return rc;
}
