// Garbage collection of a `cairn agent`'s directory (docs/peers.md "Garbage collection").
// What the agent receives and makes stays until it is collected:
//   code/<tree>/             checkouts               last use: mtime (touched when used)
//   data/<sha256>            data files by content   last use: mtime (touched when used)
//   work/runs/<run>/         run directories         last use: mtime (touched when used)
//   objects/ab/cdef…         checkpoint contents     last use: the later of mtime and atime
//   .stage-*, .incoming-*, tmp-*, work/trials/<t>/checkpoints/attempt-*, work/trials/<t>/
//   restore-*                staging left by a killed agent, a rank that died mid-checkpoint
//                            or a finished trial     last use: mtime
//   orphans/<owner>/<trial>/ orphan checkpoints      last use: the newest mtime in it (a rank's
//                            write; a launch of the trial, a resume's listing or fetch touch it)
// Orphans go by age only (`keep`), never for the budget, and never while a rank of that owner's
// trial runs here or a resume fetches them (AgentInUse::orphans_in_use).
// A collection removes every entry not used for `keep` (staging: for `staging_age`), then,
// while the entries together are over `max_bytes`, the least recently used. It never
// removes what is in use: a run directory or a trial's directories that a connected
// coordinator's ranks use (AgentInUse: held from a rank's launch until its connection
// ends), nor anything used within `grace` (being made, shipped, or about to be used).
//
// Crash safety: an entry is first renamed into DIR/.trash (atomic: it is there whole or gone
// whole, and a checkout half deleted is never taken for a checkout), then deleted; whatever
// a killed collection left in DIR/.trash is deleted by the next. The renames hold the
// shipping lock (agent_shipping.h), so no shipment reads an entry as it goes.
//
// Thread-safety: collect_agent_dir may run on its own thread beside the connections';
// AgentInUse is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"

namespace cairn {

struct AgentGcPolicy {
  std::chrono::seconds keep = std::chrono::hours(24 * 14);    // --keep-days
  uint64_t max_bytes = 0;                                     // --max-cache; 0: no budget
  std::chrono::seconds grace = std::chrono::hours(1);         // never younger than this
  std::chrono::seconds staging_age = std::chrono::hours(24);  // abandoned staging
};

struct AgentGcStats {
  int code = 0, data = 0, runs = 0, objects = 0, staging = 0;  // entries removed, by kind
  int orphans = 0;  // orphaned trials' directories (DIR/orphans/<owner>/<trial>) removed
  uint64_t freed_bytes = 0;
  uint64_t kept_bytes = 0;   // what the collected kinds hold afterwards
  int in_use = 0;            // run and trial directories kept because ranks use them
  std::string line() const;  // "removed …; N bytes freed, M kept…"
};

// One collection of `dir` at `now`. An error only when DIR itself cannot be read; an entry
// that cannot be removed is left (and the next collection tries again).
Result<AgentGcStats> collect_agent_dir(
    const std::filesystem::path& dir, const AgentGcPolicy& policy,
    std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

// Marks `path` used now (its mtime), so that a collection counts its age from here.
void mark_agent_entry_used(const std::filesystem::path& path);

// What connected coordinators' ranks use, process-wide: a run directory (`runs/<run>`) and a
// trial's directory (`work/trials/<trial>`), held while the connection that ran them lasts;
// and, apart from those, the trials that have a rank still running here (held from its
// start until it has ended and been reaped), which is what an orphan request asks
// (remote_orphans.h). A hold lasts as long as its token.
class AgentInUse {
 public:
  using Token = std::shared_ptr<void>;
  static Token hold_run(const std::string& run);
  static Token hold_trial(const std::string& trial);
  // `key` is orphan_trial_key(owner, trial) (orphan_messages.h): a trial of another store
  // with the same id is another key.
  static Token hold_running_rank(const std::string& key);
  static bool run_in_use(const std::string& run);
  static bool trial_in_use(const std::string& trial);
  static bool trial_has_running_rank(const std::string& key);
  // A resume fetches the orphans of `key` (orphan_trial_key): held while it does. Taken under
  // the lock a collection removes under, so a collection never removes them after this.
  static Token hold_orphans(const std::string& key);
  // A rank of `key` runs here, or a resume fetches its orphans.
  static bool orphans_in_use(const std::string& key);
  // The same for any trial of the owner whose orphans go in DIR/orphans/`owner_dir`: its
  // directory is not removed even when empty (a rank's orphan directory is made in it only
  // when the rank is asked for an orphan).
  static bool owner_in_use(const std::string& owner_dir);
};

// Collects at once, then every `interval`, on a thread of its own, logging one line per
// collection (agent_log: "collected DIR: removed …"). Stops (and joins) when destroyed.
class AgentCollector {
 public:
  AgentCollector(std::filesystem::path dir, AgentGcPolicy policy, std::chrono::seconds interval);
  ~AgentCollector();
  AgentCollector(const AgentCollector&) = delete;
  AgentCollector& operator=(const AgentCollector&) = delete;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// "20G", "500M", "1T", "4096" (bytes), "none" or "0" (no budget): a --max-cache value.
Result<uint64_t> parse_size(const std::string& text);

}  // namespace cairn
