// `cairn run CONFIG.yaml`: validate the config, create the experiment, drive it to the end.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <random>

#include "cli/command.h"
#include "cli/experiment_control.h"
#include "cli/new_experiment.h"
#include "cli/placement_options.h"
#include "common/build_info.h"
#include "engine/config/config.h"
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/entrypoint_check.h"
#include "engine/search/searcher_factory.h"
#include "store/experiment_db.h"
#include "store/schema.h"

namespace cairn::cli {
namespace fs = std::filesystem;

namespace {

struct RunOptions {
  std::string config_file;
  std::vector<std::string> sets;
  std::string name;
  bool detach = false;
  PlacementOptions placement;  // --slots, --peers, --key-file
};

}  // namespace

void start_session_with_output(const fs::path& log_file) {
  ::setsid();
  int log = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
  if (log >= 0) {
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
  }
}

void keep_driving_without_stdout() {
  // SIG_IGN survives the fork of `--detach` and `resume --all`; trials get the default back
  // (engine/coordinator/trial_process.cc), so a trial's own pipes behave as usual.
  ::signal(SIGPIPE, SIG_IGN);
}

std::string self_executable() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("cairn") : p.string();
}

namespace {

int run(const GlobalOptions& global, const RunOptions& opts) {
  auto config = load_experiment_config(opts.config_file, opts.sets);
  if (!config.ok()) return fail(config.status());
  // One line of text, as `name:` in the config must be: a newline in it broke `cairn ls`.
  if (std::any_of(opts.name.begin(), opts.name.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
    return fail(Status::BadInput("--name: must be one line of text"));
  if (!opts.name.empty()) config->name = opts.name;
  for (const std::string& warning : config->warnings)
    std::cerr << "cairn: warning: " << warning << "\n";
  // Searcher settings only a searcher can judge are checked before anything is created.
  if (auto searcher = make_searcher(*config, 0, 1); !searcher.ok()) return fail(searcher.status());
  if (Status st = check_entrypoint(*config); !st.ok()) return fail(st);
  // Where the trials run (--slots, --peers or resources.peers): every agent answers and the
  // resources fit, or nothing is created.
  NewExperiment what;
  if (Status st = place_new_experiment(opts.placement, *config, 0, what); !st.ok()) return fail(st);

  auto store = open_store(global);
  if (!store.ok() && store.status().kind() == ErrorKind::kNotFound && global.store.empty() &&
      !std::getenv("CAIRN_DIR")) {
    store = init_store(fs::absolute(opts.config_file).parent_path());
  }
  if (!store.ok()) return fail(store.status());
  what.config_file = fs::absolute(opts.config_file).string();
  auto text = read_file(opts.config_file);
  what.config_text = text.ok() ? *text : std::string();
  what.sets = opts.sets;
  what.detach = opts.detach;
  return create_and_drive(*store, std::move(*config), what);
}

}  // namespace

void add_run(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App* cmd =
      app.add_subcommand("run", "Create an experiment from a config file and drive it to the end");
  cmd->add_option("config", opts->config_file, "Experiment config (YAML)")
      ->required()
      ->type_name("CONFIG.yaml");
  cmd->add_option("--set", opts->sets, "Override a config key, e.g. --set searcher.max_length=5")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  cmd->add_option("--name", opts->name, "Name of the experiment (default: the config's name)");
  cmd->add_flag("--detach", opts->detach, "Print the experiment id and continue in the background");
  add_placement_options(cmd, opts->placement, "GPUs, or CPU cores");
  cmd->callback([&global, &outcome, opts] { outcome.exit_code = run(global, *opts); });
}

}  // namespace cairn::cli
