#include "engine/coordinator/remote_paths.h"

#include <mutex>
#include <set>

#include "common/build_info.h"
#include "common/embedded.h"
#include "common/file_util.h"
#include "engine/coordinator/agent_gc.h"
#include "engine/coordinator/determined_package.h"
#include "engine/coordinator/orphan_messages.h"

namespace cairn {

namespace fs = std::filesystem;

namespace {

struct Rule {
  const char* name;
  const char* kind;
};
constexpr Rule kRules[] = {{"CAIRN_CONTROL", "control"},
                           {"CAIRN_WORKDIR", "workdir"},
                           {"CAIRN_ORPHAN_DIR", "orphans"},
                           {"CAIRN_KERNEL_CACHE", "kernel_cache"}};

// A trial id as one path component: what cairn makes ("3.12"), nothing that climbs.
bool safe_component(const std::string& s) {
  if (s.empty() || s.size() > 100 || s == "." || s == "..") return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_')
      return false;
  return true;
}

Status make_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Io("cannot create " + dir.string() + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

Status make_orphan_dir(const fs::path& orphans) {
  // Once more if it failed: the agent's GC may have just removed an empty owner directory.
  if (Status st = make_dir(orphans); !st.ok() && !make_dir(orphans).ok()) return st;
  mark_agent_entry_used(orphans.parent_path());  // the trial's: what the GC ages (agent_gc.h)
  return Status::Ok();
}

void mark_remote_paths(std::map<std::string, std::string>& env,
                       std::map<std::string, std::string>& paths) {
  for (const Rule& rule : kRules) {
    if (env.erase(rule.name)) paths[rule.name] = rule.kind;
  }
  auto python = env.find("PYTHONPATH");
  if (python != env.end()) {
    const size_t colon = python->second.find(':');
    python->second = colon == std::string::npos ? "" : python->second.substr(colon + 1);
    paths["PYTHONPATH"] = "python_sdk";
  }
}

Result<fs::path> agent_python_sdk(const fs::path& dir) {
  static std::mutex mutex;
  static std::set<fs::path> written;  // this process wrote (or found) the SDK there
  const fs::path sdk = dir / "sdk" / CAIRN_VERSION / "python";
  std::lock_guard lock(mutex);
  if (written.count(sdk)) return sdk;
  if (Status st = make_dir(sdk); !st.ok()) return st;
  if (Status st = write_determined_package(sdk); !st.ok()) return st;
  const fs::path file = sdk / "cairn.py";
  auto existing = read_file(file);
  if (!existing.ok() || *existing != kPythonSdkSource) {
    if (Status st = write_file_atomic(file, kPythonSdkSource); !st.ok()) return st;
  }
  written.insert(sdk);
  return sdk;
}

Status resolve_agent_paths(const fs::path& dir, RemoteLaunch& launch) {
  for (const auto& [name, kind] : launch.paths) {
    std::string& value = launch.env[name];
    if (kind == "control") {
      continue;  // the connection's relay (control_relay.h)
    } else if (kind == "workdir") {
      value = (dir / "work" / launch.cwd).lexically_normal().string();
    } else if (kind == "orphans") {
      auto trial = launch.env.find("CAIRN_TRIAL_ID");
      const std::string id = trial != launch.env.end() && safe_component(trial->second)
                                 ? trial->second
                                 : std::string("unnamed");
      // Per owner (another store's experiment of the same id has its own), per trial, per
      // attempt: a resume adopts only its trial's latest attempt's (remote_orphans.h).
      auto attempt = launch.env.find("CAIRN_ATTEMPT");
      const int64_t number =
          attempt == launch.env.end() || attempt->second.empty() || attempt->second.size() > 15 ||
                  attempt->second.find_first_not_of("0123456789") != std::string::npos
              ? 0
              : std::stoll(attempt->second);
      const fs::path trial_dir = dir / "orphans" / orphan_owner_dir(launch.owner) / id;
      const fs::path orphans = trial_dir / orphan_attempt_dir(number);
      // Not made here: most ranks never leave an orphan, and two directories per rank were
      // two new inodes per trial. The agent makes them when it asks the rank to checkpoint
      // as an orphan (make_orphan_dir), and an SDK makes them whenever it writes one.
      // The GC counts the orphans an earlier attempt left from here (agent_gc.h).
      mark_agent_entry_used(trial_dir);
      value = orphans.string();
    } else if (kind == "kernel_cache") {
      const fs::path cache = dir / "cache" / "kernels";
      if (Status st = make_dir(cache); !st.ok()) return st;
      value = cache.string();
    } else if (kind == "python_sdk") {
      auto sdk = agent_python_sdk(dir);
      if (!sdk.ok()) return sdk.status();
      value = sdk->string() + (value.empty() ? "" : ":" + value);
    } else {
      return Status::BadInput("unknown path kind '" + kind.substr(0, 64) + "' for " + name);
    }
  }
  return Status::Ok();
}

}  // namespace cairn
