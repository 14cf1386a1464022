#include "engine/coordinator/trial_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

extern char** environ;

namespace cairn {
namespace fs = std::filesystem;

std::string ExitInfo::describe() const {
  if (signal != 0) {
    const char* name = sigabbrev_np(signal);
    return "killed by signal " + std::to_string(signal) +
           (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "exited with status " + std::to_string(code);
}

ExitInfo ExitInfo::from_wait_status(int status) {
  ExitInfo info;
  if (WIFEXITED(status)) info.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) info.signal = WTERMSIG(status);
  return info;
}

std::map<std::string, std::string> current_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

std::string boot_id() {
  // Read once: it cannot change while this process lives, and every trial start asks.
  static const std::string id = [] {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string line;
    std::getline(in, line);
    return line;
  }();
  return id;
}

std::optional<uint64_t> process_start_time(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
  auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return std::stoull(field);
  }
  return std::nullopt;
}

bool same_process_alive(pid_t pid, uint64_t start_time, const std::string& boot) {
  if (pid <= 0 || boot != boot_id()) return false;
  auto started = process_start_time(pid);
  if (!started || *started != start_time) return false;
  // A zombie has exited: its files are closed and flushed; only its exit status waits for
  // a parent to reap it. An orphan's parent is gone, and some init processes reap only
  // every second or so, so waiting for the pid to vanish would delay `resume` for nothing.
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  const char state = close != std::string::npos && close + 2 < stat.size() ? stat[close + 2] : '?';
  return state != 'Z' && state != 'X';
}

void kill_leftover_group(pid_t leader, uint64_t start_time) {
  if (leader <= 0) return;
  if (auto started = process_start_time(leader)) {
    if (*started != start_time) return;  // the pid was reused: not the trial's group
    if (same_process_alive(leader, start_time, boot_id())) return;  // not ended
  }
  ::kill(-leader, SIGKILL);
}

Result<std::string> resolve_program(const std::string& program, const fs::path& cwd,
                                    const std::map<std::string, std::string>& env) {
  auto executable = [](const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    fs::path p = fs::path(program).is_absolute() ? fs::path(program) : cwd / program;
    if (!executable(p))
      return Status::BadInput("entrypoint: " + p.string() + " is not an executable file");
    return p.string();
  }
  auto it = env.find("PATH");
  std::string path = it != env.end() ? it->second : "/usr/local/bin:/usr/bin:/bin";
  std::istringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    fs::path candidate = fs::path(dir.empty() ? "." : dir) / program;
    if (executable(candidate)) return candidate.string();
  }
  // model_def:Trial is Determined's Trial-class entrypoint, which no PATH holds.
  const std::string hint = program.find(':') != std::string::npos
                               ? " (module:Class names a Determined Trial class; cairn runs Core "
                                 "API scripts, see docs/determined.md)"
                               : "";
  return Status::BadInput("entrypoint: program '" + program + "' not found on PATH" + hint);
}

namespace {

// posix_spawn's attributes and file actions, destroyed on every path out.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  bool attr_ok = false, actions_ok = false;
  SpawnSetup() {
    attr_ok = ::posix_spawnattr_init(&attr) == 0;
    actions_ok = ::posix_spawn_file_actions_init(&actions) == 0;
  }
  ~SpawnSetup() {
    if (attr_ok) ::posix_spawnattr_destroy(&attr);
    if (actions_ok) ::posix_spawn_file_actions_destroy(&actions);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
  bool ok() const { return attr_ok && actions_ok; }
};

}  // namespace

Result<TrialProcess> TrialProcess::spawn(const ProcessSpec& spec) {
  if (spec.argv.empty()) return Status::BadInput("entrypoint is empty");
  auto program = resolve_program(spec.argv[0], spec.cwd, spec.env);
  if (!program.ok()) return program.status();

  UniqueFd write_end(::open(spec.output.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!write_end) return Status::Io("cannot open " + spec.output.string() + ": " + errno_text());

  // posix_spawn, not fork: glibc starts the child with clone(CLONE_VM | CLONE_VFORK), so the
  // coordinator's page tables (a large static binary, RocksDB's memtables) are neither
  // copied nor write-protected; with fork, every trial start cost a copy of them and every
  // later write of the parent a copy-on-write fault. The child's setup is the same as it
  // was: own process group, all signals unblocked and the ones cairn handles or ignores back
  // to their defaults, stdin from /dev/null, stdout and stderr to the output file, the
  // working directory. A failure of that setup or of execve comes back as posix_spawn's
  // result (the child is gone by then), not as a child exiting 127.
  std::vector<std::string> env_strings;
  env_strings.reserve(spec.env.size());
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string cwd = spec.cwd.string();

  SpawnSetup setup;
  if (!setup.ok()) return Status::Io("posix_spawn setup: " + errno_text());
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&defaults, sig);
  int err = ::posix_spawnattr_setflags(
      &setup.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  if (!err) err = ::posix_spawnattr_setpgroup(&setup.attr, 0);
  if (!err) err = ::posix_spawnattr_setsigmask(&setup.attr, &none);
  if (!err) err = ::posix_spawnattr_setsigdefault(&setup.attr, &defaults);
  if (!err)
    err =
        ::posix_spawn_file_actions_addopen(&setup.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (!err)
    err = ::posix_spawn_file_actions_adddup2(&setup.actions, write_end.get(), STDOUT_FILENO);
  if (!err)
    err = ::posix_spawn_file_actions_adddup2(&setup.actions, write_end.get(), STDERR_FILENO);
  if (!err) err = ::posix_spawn_file_actions_addchdir_np(&setup.actions, cwd.c_str());
  if (err) return Status::Io(std::string("posix_spawn setup: ") + strerror(err));

  pid_t pid = -1;
  err =
      ::posix_spawn(&pid, program->c_str(), &setup.actions, &setup.attr, argv.data(), envp.data());
  // kFailed, not kIo: the trial cannot start (a chdir or execve that fails), which makes it
  // ERROR; kIo from a trial's start means the store failed (Coordinator::schedule).
  if (err)
    return Status::Failed("cannot start the entrypoint " + *program + " in " + cwd + ": " +
                          strerror(err));
  // The child called setpgid before execve, and posix_spawn returns only after execve: the
  // group exists before anyone signals it.
  write_end.reset();

  TrialProcess proc;
  proc.pid_ = pid;
  proc.start_time_ = process_start_time(pid).value_or(0);
  return proc;
}

void TrialProcess::signal_group(int sig) const {
  if (pid_ > 0) ::kill(-pid_, sig);
}

}  // namespace cairn
