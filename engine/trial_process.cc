#include "engine/trial_process.h"

#include <fcntl.h>
#include <signal.h>
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
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
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
  return Status::BadInput("entrypoint: program '" + program + "' not found on PATH");
}

Result<TrialProcess> TrialProcess::spawn(const ProcessSpec& spec) {
  if (spec.argv.empty()) return Status::BadInput("entrypoint is empty");
  auto program = resolve_program(spec.argv[0], spec.cwd, spec.env);
  if (!program.ok()) return program.status();

  UniqueFd write_end(::open(spec.output.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!write_end) return Status::Io("cannot open " + spec.output.string() + ": " + errno_text());

  // Everything the child needs is prepared before fork: after fork only async-signal-safe
  // calls are allowed.
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string cwd = spec.cwd.string();

  pid_t pid = ::fork();
  if (pid < 0) return Status::Io("fork: " + errno_text());
  if (pid == 0) {
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGCHLD, SIG_DFL);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::dup2(write_end.get(), STDOUT_FILENO);
    ::dup2(write_end.get(), STDERR_FILENO);
    if (::chdir(cwd.c_str()) != 0) {
      const char msg[] = "cairn: error: cannot enter the trial's working directory\n";
      (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
      ::_exit(127);
    }
    ::execve(program->c_str(), argv.data(), envp.data());
    const char msg[] = "cairn: error: cannot execute the entrypoint\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, so the group exists before we signal it
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
