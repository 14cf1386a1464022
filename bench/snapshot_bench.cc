// Code snapshot cost (issue 5): CodeRepository::snapshot() of a generated workdir against
// `git add -A && git commit` of the same tree in a temporary copy, in the same run; then a
// second snapshot (and commit) after one file changed, and a third with nothing changed.
//
//   cmake --build build -j2 --target bench_snapshot_bench
//   build/bench_snapshot_bench [--files 10000] [--mb 500] [--binary-share 0.3] [--reps 3]
//                              [--dir DIR] [--keep] [--phases] [--strict-off]
//
// The workdir is not a git checkout (so cairn reads no user repository). Its files are
// aged an hour back, as code that was not just written; both tools read it from the page
// cache (it was just generated). --phases times the parts of an unchanged snapshot
// separately, replicating what store/code_snapshot.cc does, to show where its time goes;
// --strict-off turns libgit2's strict object creation off for the whole run (a process-wide
// option), which is what the first fix suggested in /tmp/bench_results_h6.md would do.
// --snapshot-once STORE WORKDIR and --phases-only STORE WORKDIR time one snapshot, or its
// phases, of an existing workdir (for perf or strace). --changed-loop STORE WORKDIR FILE N
// appends to FILE and snapshots, N times in one process, and prints the median.
#include <dirent.h>
#include <fcntl.h>
#include <git2.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "store/code_snapshot.h"
#include "store/git_handles.h"
#include "store/stat_cache.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  int files = 10000;
  double mb = 500;
  double binary_share = 0.3;  // of the bytes: random (incompressible) files
  int reps = 3;
  fs::path dir;
  bool keep = false;
  bool phases = false;
};

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

int sh(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

void die(const std::string& what) {
  std::fprintf(stderr, "snapshot_bench: %s\n", what.c_str());
  std::exit(1);
}

// Source-like text: indented lines of identifiers, keywords, operators and numbers, which
// zlib compresses about as well as real code.
class TextGen {
 public:
  explicit TextGen(std::mt19937_64& rng) : rng_(rng) {
    const char* syll[] = {"con",  "fig",  "mod", "el", "lay", "er",   "in",  "put", "out", "grad",
                          "loss", "step", "val", "tr", "ain", "data", "set", "bat", "ch",  "norm",
                          "lin",  "ear",  "opt", "im", "sch", "ed",   "ul",  "hid", "den", "emb"};
    for (int i = 0; i < 500; ++i) {
      std::string id;
      const int n = 1 + static_cast<int>(rng_() % 3);
      for (int k = 0; k < n; ++k) id += (k ? "_" : "") + std::string(syll[rng_() % 30]);
      if (rng_() % 4 == 0) id += std::to_string(rng_() % 100);
      words_.push_back(id);
    }
    for (const char* kw : {"def", "return", "if", "else", "for", "in", "import", "from", "self",
                           "class", "None", "True", "with", "as", "not", "and"})
      keywords_.push_back(kw);
  }

  void append(std::string& out, size_t bytes) {
    std::vector<std::string> recent;  // code repeats its own lines, nearly
    while (out.size() < bytes) {
      std::string line;
      if (recent.size() > 8 && rng_() % 5 < 2) {
        line = recent[recent.size() - 1 - rng_() % 8];
      } else {
        line.assign(4 * (rng_() % 4), ' ');
        const int tokens = 2 + static_cast<int>(rng_() % 7);
        for (int t = 0; t < tokens; ++t) {
          const uint64_t r = rng_() % 10;
          if (r < 5)
            line += words_[zipf()];
          else if (r < 7)
            line += keywords_[rng_() % keywords_.size()];
          else if (r < 9)
            line += kOps[rng_() % 10];
          else
            line += std::to_string(rng_() % 10);
          line += t + 1 < tokens ? " " : "";
        }
      }
      recent.push_back(line);
      out += line + "\n";
    }
    out.resize(bytes);
  }

 private:
  // Word frequencies fall off like a natural vocabulary's.
  size_t zipf() {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng_);
    return std::min(words_.size() - 1, static_cast<size_t>(std::pow(u, 4) * words_.size()));
  }
  static constexpr const char* kOps[10] = {"=", "+", "(", ")", ":", ",", ".", "[", "]", "=="};
  std::mt19937_64& rng_;
  std::vector<std::string> words_, keywords_;
};

struct Tree {
  std::vector<fs::path> files;  // relative
  uint64_t text_bytes = 0, binary_bytes = 0;
  int binary_files = 0;
  double zlib1_ratio = 0, zlib6_ratio = 0;  // of a text sample
};

double zlib_ratio(const std::string& s, int level) {
  uLongf n = compressBound(s.size());
  std::string out(n, '\0');
  compress2(reinterpret_cast<Bytef*>(out.data()), &n, reinterpret_cast<const Bytef*>(s.data()),
            s.size(), level);
  return static_cast<double>(s.size()) / n;
}

// Sizes spread log-uniformly between lo and hi, scaled to add up to `total`.
std::vector<uint64_t> sizes(std::mt19937_64& rng, int n, double lo, double hi, uint64_t total) {
  std::vector<double> raw(n);
  double sum = 0;
  for (double& r : raw) {
    r = std::exp(std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(rng));
    sum += r;
  }
  std::vector<uint64_t> out(n);
  for (int i = 0; i < n; ++i) out[i] = std::max<uint64_t>(1, raw[i] / sum * total);
  return out;
}

Tree generate(const fs::path& work, const Options& o) {
  std::mt19937_64 rng(20261122);
  TextGen text(rng);
  Tree tree;
  const uint64_t total = static_cast<uint64_t>(o.mb * 1e6);
  tree.binary_files = o.binary_share > 0 ? std::max(1, o.files * 3 / 100) : 0;
  const int text_files = o.files - tree.binary_files - 1;  // and a .gitignore
  const auto text_sizes =
      sizes(rng, text_files, 2e3, 2e5, static_cast<uint64_t>(total * (1 - o.binary_share)));
  const auto bin_sizes =
      sizes(rng, tree.binary_files, 1e5, 2e6, static_cast<uint64_t>(total * o.binary_share));
  const char* exts[] = {".py", ".py", ".py", ".yaml", ".json", ".md", ".cc", ".h", ".txt", ".csv"};
  auto write = [&](const fs::path& rel, const std::string& bytes) {
    fs::create_directories((work / rel).parent_path());
    std::ofstream(work / rel, std::ios::binary) << bytes;
    tree.files.push_back(rel);
  };
  write(".gitignore", "__pycache__/\n*.pyc\n.ipynb_checkpoints/\n/outputs/\n");
  std::string buf;
  for (int i = 0; i < text_files; ++i) {
    // 60 packages of 12 modules, some with 2 subpackages: ~1,100 directories of ~9 files (a
    // real repository has 8 to 15 files per directory), depth 1 to 3.
    fs::path rel = "pkg" + std::to_string(i % 60);
    if (i % 7) rel /= "mod" + std::to_string((i / 60) % 12);
    if (i % 5 == 0) rel /= "sub" + std::to_string((i / 720) % 2);
    rel /= "f" + std::to_string(i) + exts[i % 10];
    buf.clear();
    text.append(buf, text_sizes[i]);
    if (i == 0) {
      tree.zlib1_ratio = zlib_ratio(buf, 1);
      tree.zlib6_ratio = zlib_ratio(buf, 6);
    }
    tree.text_bytes += buf.size();
    write(rel, buf);
  }
  for (int i = 0; i < tree.binary_files; ++i) {
    buf.resize(bin_sizes[i]);
    for (size_t k = 0; k + 8 <= buf.size(); k += 8) {
      const uint64_t r = rng();
      std::memcpy(&buf[k], &r, 8);
    }
    tree.binary_bytes += buf.size();
    write(
        fs::path("assets") / ("a" + std::to_string(i % 10)) / ("blob" + std::to_string(i) + ".bin"),
        buf);
  }
  // As code that was not written a moment ago.
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_sec -= 3600;
  const timespec times[2] = {t, t};
  for (const fs::path& rel : tree.files) ::utimensat(AT_FDCWD, (work / rel).c_str(), times, 0);
  return tree;
}

void change_one_file(const fs::path& work, const fs::path& rel, int rep) {
  std::ofstream(work / rel, std::ios::app) << "\n# changed in rep " << rep << "\n";
}

// Wall and CPU (user + system) seconds of one measured step.
struct Sample {
  double wall = 0, cpu = 0;
};

double cpu_seconds(int who) {
  rusage u;
  getrusage(who, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

Sample time_cairn(const fs::path& store, const fs::path& work) {
  auto repo = cairn::CodeRepository::open(store);
  if (!repo.ok()) die(repo.status().message());
  cairn::SnapshotOptions opts;
  opts.size_limit = ~uint64_t{0};
  const double cpu = cpu_seconds(RUSAGE_SELF);
  const auto t = Clock::now();
  auto snap = repo->snapshot(work, opts, "bench");
  const Sample s{seconds_since(t), cpu_seconds(RUSAGE_SELF) - cpu};
  if (!snap.ok()) die(snap.status().message());
  return s;
}

const std::string kGit =
    "GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null git -c user.name=b "
    "-c user.email=b@example.com";

// `git add -A && git commit` in `copy`; CPU time is that of the shell and both gits.
Sample time_git_commit(const fs::path& copy, const std::string& msg) {
  const double cpu = cpu_seconds(RUSAGE_CHILDREN);
  const auto t = Clock::now();
  if (sh(kGit + " -C '" + copy.string() + "' add -A && " + kGit + " -C '" + copy.string() +
         "' commit -q --allow-empty -m " + msg) != 0)
    die("git add/commit failed in " + copy.string());
  return {seconds_since(t), cpu_seconds(RUSAGE_CHILDREN) - cpu};
}

// The parts of an unchanged snapshot, each on its own, as store/code_snapshot.cc does them.
void phases(const fs::path& store, const fs::path& work) {
  std::printf("\nphases of an unchanged snapshot (store %s):\n", store.c_str());
  cairn::git::ensure_initialized();
  std::vector<std::pair<std::string, struct stat>> entries;
  auto t = Clock::now();
  std::function<void(const fs::path&, const std::string&)> walk = [&](const fs::path& d,
                                                                      const std::string& rel) {
    for (const auto& e : fs::directory_iterator(d)) {
      struct stat st;
      if (::lstat(e.path().c_str(), &st) != 0) continue;
      const std::string r =
          rel.empty() ? e.path().filename().string() : rel + "/" + e.path().filename().string();
      if (S_ISDIR(st.st_mode))
        walk(e.path(), r);
      else
        entries.emplace_back(r, st);
    }
  };
  walk(work, "");
  std::printf("  readdir + lstat of %zu files            %.3f s\n", entries.size(),
              seconds_since(t));

  // The same walk with fstatat() relative to each directory's descriptor, and readdir's
  // d_type: no absolute path resolved per file.
  t = Clock::now();
  size_t counted = 0;
  std::function<void(int)> walk_at = [&](int dfd) {
    DIR* d = fdopendir(dfd);
    if (!d) return;
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
        continue;
      struct stat st;
      if (::fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISDIR(st.st_mode))
        walk_at(::openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      else
        ++counted;
    }
    closedir(d);
  };
  walk_at(::open(work.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::printf("    the same with openat/fstatat (%zu files) %.3f s\n", counted, seconds_since(t));

  git_repository* own = nullptr;
  if (git_repository_open_bare(&own, (store / "code.git").c_str()) != 0) die("open code.git");
  git_repository_set_workdir(own, work.c_str(), 0);
  t = Clock::now();
  int ignored_count = 0;
  for (const auto& [rel, st] : entries) {
    int ignored = 0;
    git_ignore_path_is_ignored(&ignored, own, rel.c_str());
    ignored_count += ignored;
  }
  std::printf("  git_ignore_path_is_ignored per file     %.3f s\n", seconds_since(t));

  t = Clock::now();
  const fs::path cache_file = store / "code.git/cairn-cache" / cairn::sha256_hex(work.string());
  cairn::StatCache cache = cairn::StatCache::load(cache_file);
  std::printf("  stat cache load                          %.3f s\n", seconds_since(t));
  t = Clock::now();
  std::vector<git_oid> oids;
  std::vector<std::string> hit_paths;
  int hits = 0;
  for (const auto& [rel, st] : entries) {
    auto v = cache.lookup(rel, cairn::FileStat::of(st));
    git_oid oid;
    if (v && cairn::git::parse_oid(*v, &oid)) ++hits, oids.push_back(oid), hit_paths.push_back(rel);
    cache.record(rel, cairn::FileStat::of(st), v.value_or(""));
  }
  std::printf("  stat cache lookup + record (%d hits)   %.3f s\n", hits, seconds_since(t));
  git_odb* odb = nullptr;
  git_repository_odb(&odb, own);
  t = Clock::now();
  for (const git_oid& oid : oids) git_odb_exists(odb, &oid);
  std::printf("  git_odb_exists per blob                  %.3f s\n", seconds_since(t));
  git_odb_free(odb);
  // The trees, as write_tree() builds them, from the cached blob ids.
  struct Node {
    std::map<std::string, Node> dirs;
    std::map<std::string, git_oid> files;
  };
  Node root;
  for (size_t i = 0; i < oids.size(); ++i) {
    Node* n = &root;
    const fs::path rel(hit_paths[i]);
    for (auto part = rel.begin(); std::next(part) != rel.end(); ++part)
      n = &n->dirs[part->string()];
    n->files[rel.filename().string()] = oids[i];
  }
  int trees = 0;
  std::function<git_oid(const Node&)> write_tree = [&](const Node& node) {
    git_treebuilder* b = nullptr;
    git_treebuilder_new(&b, own, nullptr);
    for (const auto& [name, sub] : node.dirs) {
      const git_oid oid = write_tree(sub);
      git_treebuilder_insert(nullptr, b, name.c_str(), &oid, GIT_FILEMODE_TREE);
    }
    for (const auto& [name, oid] : node.files)
      git_treebuilder_insert(nullptr, b, name.c_str(), &oid, GIT_FILEMODE_BLOB);
    git_oid oid;
    git_treebuilder_write(&oid, b);
    git_treebuilder_free(b);
    ++trees;
    return oid;
  };
  t = Clock::now();
  write_tree(root);
  std::printf("  write %d trees (all present already)    %.3f s\n", trees, seconds_since(t));
  // libgit2 checks that every entry's object exists (reading each blob's header) unless
  // strict object creation is off; cairn has just stored or checked each blob itself.
  git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 0);
  trees = 0;
  t = Clock::now();
  write_tree(root);
  std::printf("    the same, strict object creation off   %.3f s\n", seconds_since(t));
  git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 1);
  t = Clock::now();
  (void)cache.save(store / "phase-cache");
  std::printf("  stat cache save (write, fsync, rename)   %.3f s\n", seconds_since(t));
  git_repository_free(own);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--files")
      o.files = std::stoi(next());
    else if (a == "--mb")
      o.mb = std::stod(next());
    else if (a == "--binary-share")
      o.binary_share = std::stod(next());
    else if (a == "--reps")
      o.reps = std::stoi(next());
    else if (a == "--dir")
      o.dir = next();
    else if (a == "--keep")
      o.keep = true;
    else if (a == "--phases")
      o.phases = true;
    else if (a == "--strict-off") {  // what the first suggested fix would give: see phases()
      cairn::git::ensure_initialized();
      git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 0);
    } else if (a == "--snapshot-once") {  // STORE WORKDIR: one timed snapshot (for perf/strace)
      const fs::path store = next(), w = next();
      const Sample x = time_cairn(store, w);
      std::printf("snapshot: %.3f s (cpu %.3f s)\n", x.wall, x.cpu);
      return 0;
    } else if (a == "--changed-loop") {  // STORE WORKDIR FILE N: N timed "one file changed"
      const fs::path store = next(), w = next(), rel = next();
      const int n = std::stoi(next());
      std::vector<double> wall, cpu;
      for (int k = 0; k < n; ++k) {
        change_one_file(w, rel, 1000 + k);
        const Sample x = time_cairn(store, w);
        wall.push_back(x.wall), cpu.push_back(x.cpu);
        std::printf(" %.4f", x.wall);
      }
      std::printf("\nchanged-loop: median %.4f s (cpu %.4f s) of %d, load %.2f\n", median(wall),
                  median(cpu), n, load_average());
      return 0;
    } else if (a == "--phases-only") {  // STORE WORKDIR: the phases of an unchanged snapshot
      const fs::path store = next(), w = next();
      phases(store, w);
      return 0;
    } else
      die("unknown option " + a);
  }
  if (o.dir.empty())
    o.dir = fs::temp_directory_path() / ("cairn-snapbench-" + std::to_string(getpid()));
  const fs::path work = o.dir / "work";
  fs::remove_all(o.dir);
  fs::create_directories(o.dir);

  std::printf("load average before: %.2f\n", load_average());
  auto t = Clock::now();
  const Tree tree = generate(work, o);
  std::printf(
      "workdir %s: %zu files, %.1f MB: %zu text files %.1f MB (zlib -1: %.1fx, -6: %.1fx), "
      "%d random files %.1f MB; generated in %.1f s\n",
      work.c_str(), tree.files.size(), (tree.text_bytes + tree.binary_bytes) / 1e6,
      tree.files.size() - tree.binary_files, tree.text_bytes / 1e6, tree.zlib1_ratio,
      tree.zlib6_ratio, tree.binary_files, tree.binary_bytes / 1e6, seconds_since(t));
  sh("sync");

  // [step][tool]: steps first snapshot, one file changed, nothing changed; tools cairn, git.
  const char* kSteps[3] = {"first snapshot", "one file changed", "nothing changed"};
  std::vector<Sample> samples[3][2];
  for (int rep = 1; rep <= o.reps; ++rep) {
    const fs::path store = o.dir / ("store" + std::to_string(rep));
    const fs::path copy = o.dir / ("gitcopy" + std::to_string(rep));
    if (sh("cp -a '" + work.string() + "' '" + copy.string() + "'") != 0) die("cp failed");
    if (sh(kGit + " -C '" + copy.string() + "' init -q") != 0) die("git init failed");
    cairn::CodeRepository::open(store);  // code.git exists, as git init's repository does
    sh("sync");
    const fs::path changed = tree.files[(rep * 7919) % tree.files.size()];
    for (int step = 0; step < 3; ++step) {
      if (step == 1) {
        change_one_file(work, changed, rep);
        change_one_file(copy, changed, rep);
      }
      // Alternate which tool goes first, so neither always meets a cooler cache or CPU.
      const std::string msg = "step" + std::to_string(step);
      if ((rep + step) % 2) {
        samples[step][0].push_back(time_cairn(store, work));
        samples[step][1].push_back(time_git_commit(copy, msg));
      } else {
        samples[step][1].push_back(time_git_commit(copy, msg));
        samples[step][0].push_back(time_cairn(store, work));
      }
    }
    std::printf("rep %d (changed %s):", rep, changed.c_str());
    for (int step = 0; step < 3; ++step)
      std::printf(" | %s: cairn %.3f s (cpu %.3f), git %.3f s (cpu %.3f)", kSteps[step],
                  samples[step][0].back().wall, samples[step][0].back().cpu,
                  samples[step][1].back().wall, samples[step][1].back().cpu);
    std::printf(" | load %.2f\n", load_average());
    if (o.phases && rep == o.reps) phases(store, work);
    if (!o.keep) {
      fs::remove_all(copy);
      if (rep < o.reps) fs::remove_all(store);
    }
  }
  std::printf("\nmedians of %d reps (wall; cpu = user + system):\n", o.reps);
  for (int step = 0; step < 3; ++step) {
    std::vector<double> wall[2], cpu[2], ratios;
    for (int tool = 0; tool < 2; ++tool)
      for (const Sample& x : samples[step][tool])
        wall[tool].push_back(x.wall), cpu[tool].push_back(x.cpu);
    for (size_t r = 0; r < wall[0].size(); ++r) ratios.push_back(wall[0][r] / wall[1][r]);
    std::printf(
        "  %-17s cairn %.3f s (cpu %.3f)  git add+commit %.3f s (cpu %.3f)  "
        "ratio %.2fx (median of per-rep ratios %.2fx; cpu %.2fx)\n",
        kSteps[step], median(wall[0]), median(cpu[0]), median(wall[1]), median(cpu[1]),
        median(wall[0]) / median(wall[1]), median(ratios), median(cpu[0]) / median(cpu[1]));
  }
  std::printf("load average after: %.2f\n", load_average());
  const fs::path last_store = o.dir / ("store" + std::to_string(o.reps));
  std::printf("code.git after the last rep's 3 snapshots: ");
  std::fflush(stdout);
  sh("du -sh '" + last_store.string() + "/code.git' | cut -f1");
  if (!o.keep) fs::remove_all(o.dir);
  return 0;
}
