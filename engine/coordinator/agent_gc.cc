#include "engine/coordinator/agent_gc.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "engine/coordinator/agent_shipping.h"
#include "peer/agent_log.h"

namespace cairn {

namespace {

namespace fs = std::filesystem;
using SysClock = std::chrono::system_clock;

enum class Kind { kCode, kData, kRun, kObject, kStaging, kOrphan };

struct Entry {
  fs::path path;
  Kind kind;
  SysClock::time_point used;
  uint64_t bytes = 0;
  std::string run, trial;  // what AgentInUse may hold
  std::string orphans;     // an orphan directory's key (orphan_trial_key), "" for an old layout's
};

SysClock::time_point to_time(const struct timespec& ts) {
  return SysClock::time_point(std::chrono::duration_cast<SysClock::duration>(
      std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
}

// The bytes a tree holds (never following links), and the newest mtime in it is not used:
// an entry's own time says when it was used.
uint64_t bytes_of(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0;
  if (!S_ISDIR(st.st_mode)) return static_cast<uint64_t>(st.st_size);
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    struct stat s {};
    if (::lstat(it->path().c_str(), &s) == 0 && !S_ISDIR(s.st_mode))
      total += static_cast<uint64_t>(s.st_size);
  }
  return total;
}

// The newest mtime in a tree, its root's included (an orphan's last use: a rank's write into
// it, or an agent's mark_agent_entry_used on its root).
SysClock::time_point newest_mtime(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};
  SysClock::time_point newest = to_time(st.st_mtim);
  std::error_code ec;
  for (fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    struct stat s {};
    if (::lstat(it->path().c_str(), &s) == 0) newest = std::max(newest, to_time(s.st_mtim));
  }
  return newest;
}

// An owner's directory below DIR/orphans, as orphan_owner_dir names them: "o" and 16 hex digits.
bool owner_dir_name(const std::string& name) {
  return name.size() == 17 && name[0] == 'o' &&
         name.find_first_not_of("0123456789abcdef", 1) == std::string::npos;
}

bool entry_of(const fs::path& path, Kind kind, bool with_atime, Entry* out) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return false;
  out->path = path;
  out->kind = kind;
  out->used = to_time(st.st_mtim);
  if (with_atime) out->used = std::max(out->used, to_time(st.st_atim));
  out->bytes = bytes_of(path);
  return true;
}

std::vector<fs::path> children(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.push_back(it->path());
  return out;
}

bool starts(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// Deletes a tree whose directories may be read-only (checkouts are 0555): each directory is
// made writable before its entries go.
void delete_tree(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    ::chmod(path.c_str(), 0700);
    for (const fs::path& child : children(path)) delete_tree(child);
    ::rmdir(path.c_str());
  } else {
    ::unlink(path.c_str());
  }
}

std::atomic<uint64_t> g_trash_counter{0};

// Moves `path` into DIR/.trash at once (atomic), to be deleted after.
bool to_trash(const fs::path& dir, const fs::path& path) {
  const fs::path trash = dir / ".trash";
  std::error_code ec;
  fs::create_directories(trash, ec);
  const fs::path dest =
      trash / (std::to_string(::getpid()) + "-" + std::to_string(++g_trash_counter) + "-" +
               path.filename().string());
  return ::rename(path.c_str(), dest.c_str()) == 0;
}

std::string plural(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

struct Holds {
  std::mutex mutex;
  std::map<std::string, int> runs, trials, running_ranks, orphan_fetches;
};
Holds& holds() {
  static Holds h;
  return h;
}

AgentInUse::Token hold(std::map<std::string, int> Holds::*which, const std::string& name) {
  Holds& h = holds();
  {
    std::lock_guard lock(h.mutex);
    ++(h.*which)[name];
  }
  return AgentInUse::Token(static_cast<void*>(nullptr), [which, name](void*) {
    Holds& h = holds();
    std::lock_guard lock(h.mutex);
    if (--(h.*which)[name] <= 0) (h.*which).erase(name);
  });
}

bool held(std::map<std::string, int> Holds::*which, const std::string& name) {
  Holds& h = holds();
  std::lock_guard lock(h.mutex);
  return (h.*which).count(name) > 0;
}

}  // namespace

AgentInUse::Token AgentInUse::hold_run(const std::string& run) {
  return hold(&Holds::runs, run);
}
AgentInUse::Token AgentInUse::hold_trial(const std::string& trial) {
  return hold(&Holds::trials, trial);
}
AgentInUse::Token AgentInUse::hold_running_rank(const std::string& trial) {
  return hold(&Holds::running_ranks, trial);
}
AgentInUse::Token AgentInUse::hold_orphans(const std::string& key) {
  // Under the lock a collection renames under: it never takes what this now holds.
  std::lock_guard lock(agent_shipping_lock());
  return hold(&Holds::orphan_fetches, key);
}
bool AgentInUse::orphans_in_use(const std::string& key) {
  return held(&Holds::running_ranks, key) || held(&Holds::orphan_fetches, key);
}
bool AgentInUse::owner_in_use(const std::string& owner_dir) {
  const std::string prefix = owner_dir + "/";
  Holds& h = holds();
  std::lock_guard lock(h.mutex);
  for (const auto* which : {&h.running_ranks, &h.orphan_fetches}) {
    auto it = which->lower_bound(prefix);
    if (it != which->end() && it->first.compare(0, prefix.size(), prefix) == 0) return true;
  }
  return false;
}
bool AgentInUse::run_in_use(const std::string& run) {
  return held(&Holds::runs, run);
}
bool AgentInUse::trial_in_use(const std::string& trial) {
  return held(&Holds::trials, trial);
}
bool AgentInUse::trial_has_running_rank(const std::string& trial) {
  return held(&Holds::running_ranks, trial);
}

void mark_agent_entry_used(const fs::path& path) {
  // UTIME_NOW on mtime only: the owner may set it on a read-only file or directory.
  const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  ::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW);
}

std::string AgentGcStats::line() const {
  std::string removed;
  auto add = [&](int n, const char* one, const char* many) {
    if (n == 0) return;
    removed += (removed.empty() ? "" : ", ") + plural(n, one, many);
  };
  add(code, "code checkout", "code checkouts");
  add(data, "data file", "data files");
  add(runs, "run directory", "run directories");
  add(objects, "checkpoint object", "checkpoint objects");
  add(staging, "staging leftover", "staging leftovers");
  add(orphans, "orphaned trial", "orphaned trials");
  return "removed " + (removed.empty() ? std::string("nothing") : removed) + " (" +
         std::to_string(freed_bytes) + " bytes); " + std::to_string(kept_bytes) + " bytes kept" +
         (in_use ? ", " + plural(in_use, "directory", "directories") + " in use" : "");
}

Result<AgentGcStats> collect_agent_dir(const fs::path& dir, const AgentGcPolicy& policy,
                                       SysClock::time_point now) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Status::Io("cannot read the agent directory " + dir.string());
  AgentGcStats stats;
  // What a killed collection left.
  for (const fs::path& left : children(dir / ".trash")) delete_tree(left);

  std::vector<Entry> cache;    // code, data, runs, objects: age and budget
  std::vector<Entry> staging;  // leftovers: age only
  auto add = [](std::vector<Entry>& to, const fs::path& p, Kind kind, bool atime = false) {
    Entry e;
    if (!entry_of(p, kind, atime, &e)) return static_cast<Entry*>(nullptr);
    to.push_back(std::move(e));
    return &to.back();
  };
  for (const fs::path& p : children(dir / "code")) {
    const std::string name = p.filename().string();
    if (starts(name, ".stage-"))
      add(staging, p, Kind::kStaging);
    else if (name.size() == 40)
      add(cache, p, Kind::kCode);
  }
  for (const fs::path& p : children(dir / "data")) {
    const std::string name = p.filename().string();
    if (starts(name, ".incoming-"))
      add(staging, p, Kind::kStaging);
    else if (name.size() == 64)
      add(cache, p, Kind::kData);
  }
  for (const fs::path& p : children(dir / "work" / "runs")) {
    const std::string name = p.filename().string();
    if (starts(name, ".stage-")) {
      add(staging, p, Kind::kStaging);
    } else if (Entry* e = add(cache, p, Kind::kRun)) {
      e->run = name;
    }
  }
  for (const fs::path& sub : children(dir / "objects")) {
    const std::string name = sub.filename().string();
    if (starts(name, "tmp-")) {
      add(staging, sub, Kind::kStaging);
      continue;
    }
    if (name.size() != 2) continue;
    for (const fs::path& p : children(sub)) add(cache, p, Kind::kObject, /*atime=*/true);
  }
  // Orphans (docs/peers.md "Orphans on an agent"): by age only, never for the budget (they are
  // a user's work, not a cache), one entry per owner's trial; the old layout's DIR/orphans/<trial>
  // likewise.
  std::vector<Entry> orphans;
  for (const fs::path& o : children(dir / "orphans")) {
    const std::string name = o.filename().string();
    std::vector<std::pair<fs::path, std::string>> found;
    if (owner_dir_name(name) && fs::symlink_status(o, ec).type() == fs::file_type::directory) {
      for (const fs::path& t : children(o))
        found.emplace_back(t, name + "/" + t.filename().string());
    } else {
      found.emplace_back(o, "");
    }
    for (const auto& [p, key] : found) {
      if (Entry* e = add(orphans, p, Kind::kOrphan)) {
        e->used = newest_mtime(p);
        e->orphans = key;
      }
    }
  }
  for (const fs::path& t : children(dir / "work" / "trials")) {
    const std::string trial = t.filename().string();
    std::vector<fs::path> found;
    for (const fs::path& p : children(t / "checkpoints"))
      if (starts(p.filename().string(), "attempt-")) found.push_back(p);
    for (const fs::path& p : children(t))
      if (starts(p.filename().string(), "restore-")) found.push_back(p);
    for (const fs::path& p : found)
      if (Entry* e = add(staging, p, Kind::kStaging)) e->trial = trial;
  }

  auto in_use = [&](const Entry& e) {
    return (!e.run.empty() && AgentInUse::run_in_use(e.run)) ||
           (!e.trial.empty() && AgentInUse::trial_in_use(e.trial)) ||
           (!e.orphans.empty() && AgentInUse::orphans_in_use(e.orphans));
  };
  auto remove = [&](const Entry& e) {
    bool moved;
    {
      std::lock_guard lock(agent_shipping_lock());
      // Checked again under the lock (its time only: a stat): a shipment may have used it
      // meanwhile.
      struct stat st {};
      SysClock::time_point used{};
      if (::lstat(e.path.c_str(), &st) == 0) {
        used = to_time(st.st_mtim);
        if (e.kind == Kind::kObject) used = std::max(used, to_time(st.st_atim));
        if (e.kind == Kind::kOrphan) used = newest_mtime(e.path);  // a rank may be writing
      }
      moved = used != SysClock::time_point{} && now - used >= policy.grace && !in_use(e) &&
              to_trash(dir, e.path);
    }
    if (!moved) return false;
    switch (e.kind) {
      case Kind::kCode:
        ++stats.code;
        break;
      case Kind::kData:
        ++stats.data;
        break;
      case Kind::kRun:
        ++stats.runs;
        break;
      case Kind::kObject:
        ++stats.objects;
        break;
      case Kind::kStaging:
        ++stats.staging;
        break;
      case Kind::kOrphan:
        ++stats.orphans;
        break;
    }
    stats.freed_bytes += e.bytes;
    return true;
  };

  std::set<std::string> counted_in_use;
  auto note_in_use = [&](const Entry& e) {
    if (in_use(e)) counted_in_use.insert(e.path.string());
  };
  const auto staging_age = std::max(policy.staging_age, policy.grace);
  for (const Entry& e : staging) {
    note_in_use(e);
    if (now - e.used >= staging_age && !in_use(e)) remove(e);
  }
  const auto keep = std::max(policy.keep, policy.grace);
  for (const Entry& e : orphans) {
    note_in_use(e);
    if (now - e.used >= keep && !in_use(e)) remove(e);
  }
  // Owners' directories left empty (rmdir leaves one that holds anything), but those of an
  // owner with a rank running here: its orphan directory may be made in it any time.
  for (const fs::path& o : children(dir / "orphans"))
    if (owner_dir_name(o.filename().string()) && !AgentInUse::owner_in_use(o.filename().string()))
      ::rmdir(o.c_str());
  std::vector<Entry> kept;
  for (Entry& e : cache) {
    note_in_use(e);
    if (now - e.used >= keep && !in_use(e) && remove(e)) continue;
    kept.push_back(std::move(e));
  }
  uint64_t total = 0;
  for (const Entry& e : kept) total += e.bytes;
  if (policy.max_bytes > 0 && total > policy.max_bytes) {
    std::sort(kept.begin(), kept.end(),
              [](const Entry& a, const Entry& b) { return a.used < b.used; });  // oldest first
    for (const Entry& e : kept) {
      if (total <= policy.max_bytes) break;
      if (now - e.used < policy.grace || in_use(e)) continue;
      if (remove(e)) total -= e.bytes;
    }
  }
  stats.kept_bytes = total;
  stats.in_use = static_cast<int>(counted_in_use.size());
  // Trial directories left empty.
  for (const fs::path& t : children(dir / "work" / "trials")) {
    if (AgentInUse::trial_in_use(t.filename().string())) continue;
    ::rmdir((t / "checkpoints").c_str());
    ::rmdir(t.c_str());
  }
  for (const fs::path& left : children(dir / ".trash")) delete_tree(left);
  return stats;
}

struct AgentCollector::State {
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::thread thread;
};

AgentCollector::AgentCollector(fs::path dir, AgentGcPolicy policy, std::chrono::seconds interval)
    : state_(std::make_shared<State>()) {
  state_->thread = std::thread([s = state_.get(), dir = std::move(dir), policy, interval] {
    std::unique_lock lock(s->mutex);
    while (!s->stopping) {
      lock.unlock();
      auto stats = collect_agent_dir(dir, policy);
      agent_log("collected " + dir.string() + ": " +
                (stats.ok() ? stats->line() : "failed: " + stats.status().message()));
      lock.lock();
      s->wake.wait_for(lock, interval, [s] { return s->stopping; });
    }
  });
}

AgentCollector::~AgentCollector() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  state_->thread.join();
}

Result<uint64_t> parse_size(const std::string& text) {
  if (text == "none" || text == "0") return uint64_t{0};
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string unit = text.substr(digits);
  uint64_t scale = 1;
  if (unit == "K" || unit == "k")
    scale = 1ull << 10;
  else if (unit == "M")
    scale = 1ull << 20;
  else if (unit == "G")
    scale = 1ull << 30;
  else if (unit == "T")
    scale = 1ull << 40;
  else if (!unit.empty())
    scale = 0;
  if (digits == 0 || digits > 12 || scale == 0)
    return Status::BadInput("'" + text.substr(0, 64) +
                            "' is not a size (a number of bytes with K, M, G or T, or none)");
  return std::stoull(text.substr(0, digits)) * scale;
}

}  // namespace cairn
