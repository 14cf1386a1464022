// `cairn run CONFIG.yaml`: validate the config, create the experiment, drive it to the end.
#include <fcntl.h>
#include <unistd.h>

#include <iostream>
#include <random>

#include "cli/command.h"
#include "cli/experiment_control.h"
#include "common/build_info.h"
#include "engine/config.h"
#include "engine/coordinator.h"
#include "engine/searcher.h"
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
  int slots = 0;
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

std::string self_executable() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("cairn") : p.string();
}

namespace {

// Detaches from the terminal: the parent returns, the child goes on in a new session with
// its output in the experiment's coordinator.log. Must happen before RocksDB starts threads.
bool detach_into(const fs::path& log_file) {
  std::fflush(stdout);
  pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid > 0) ::_exit(0);
  start_session_with_output(log_file);
  return true;
}

int run(const GlobalOptions& global, const RunOptions& opts) {
  auto config = load_experiment_config(opts.config_file, opts.sets);
  if (!config.ok()) return fail(config.status());
  if (!opts.name.empty()) config->name = opts.name;
  if (opts.slots < 0) return fail(Status::BadInput("--slots: must be a positive number"));
  // Searcher settings only a searcher can judge are checked before anything is created.
  if (auto searcher = make_searcher(*config, 0, 1); !searcher.ok()) return fail(searcher.status());

  auto store = open_store(global);
  if (!store.ok() && store.status().kind() == ErrorKind::kNotFound && global.store.empty() &&
      !std::getenv("CAIRN_DIR")) {
    store = init_store(fs::absolute(opts.config_file).parent_path());
  }
  if (!store.ok()) return fail(store.status());
  auto id = allocate_experiment_id(*store);
  if (!id.ok()) return fail(id.status());

  uint64_t seed = 0;
  if (config->reproducibility.seed) {
    seed = *config->reproducibility.seed;
  } else {
    std::random_device rd;
    seed = rd() & 0x7fffffffu;
  }
  auto text = read_file(opts.config_file);
  Json experiment{{"id", *id},
                  {"name", config->name},
                  {"state", "ACTIVE"},
                  {"searcher", config->searcher.name},
                  {"seed", seed},
                  {"seed_chosen", !config->reproducibility.seed.has_value()},
                  {"config", config->resolved},
                  {"config_file", fs::absolute(opts.config_file).string()},
                  {"config_text", text.ok() ? *text : std::string()},
                  {"sets", opts.sets},
                  {"workdir", config->workdir.string()},
                  {"created_at", std::time(nullptr)},
                  {"cairn_version", CAIRN_VERSION}};

  // The id is the first line, alone, so scripts can take it: EXP=$(cairn run --detach x.yaml)
  std::cout << *id << std::endl;
  if (opts.detach && !detach_into(store->experiment(*id) / "coordinator.log"))
    return fail(Status::Io("cannot detach: " + errno_text()));

  auto db = ExperimentDb::open(store->experiment(*id), ExperimentDb::Mode::kWrite, store->tmp());
  if (!db.ok()) return fail(db.status());
  StoreBatch batch;
  batch.put_json(schema::kExperiment, experiment);
  batch.put_json(schema::event_key(0),
                 Json{{"seq", 0}, {"type", "experiment_created"}, {"seed", seed}});
  Status st = (*db)->commit(batch, true);
  if (!st.ok()) return fail(st);
  if (!opts.detach) {
    std::cout << "cairn: experiment " << *id << " '" << config->name << "' ("
              << config->searcher.name << ", seed " << seed << ") in " << store->root().string()
              << std::endl;
  }

  CoordinatorOptions options;
  options.slots = opts.slots;
  options.self_executable = self_executable();
  Coordinator coordinator(*store, std::move(*db), std::move(*config), std::move(experiment),
                          options);
  return coordinator.run();
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
  cmd->add_option("--slots", opts->slots,
                  "Slots to use on this machine (default: GPUs, or CPU cores)");
  cmd->callback([&global, &outcome, opts] { outcome.exit_code = run(global, *opts); });
}

}  // namespace cairn::cli
