// cairn's entry point: one CLI11 application with a subcommand per file in cli/.
#include <CLI/CLI.hpp>
#include <cstring>
#include <iostream>

#include "cli/command.h"
#include "common/build_info.h"
#include "trainer/mlp_main.h"

namespace {

constexpr const char* kDescription =
    "cairn: run, track, checkpoint and search training trials on your own machines.\n"
    "Store: the nearest .cairn/ from the current directory upwards (or CAIRN_DIR, --store).";

int print_help(CLI::App& app, const std::string& command) {
  if (command.empty()) {
    // Not app.help(): once `help` itself was parsed, that describes the `help` subcommand.
    std::cout << app.get_formatter()->make_help(&app, "cairn", CLI::AppFormatMode::Normal);
    return 0;
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->get_name() == command && !sub->get_group().empty()) {
      std::cout << sub->help("cairn");
      return 0;
    }
  }
  std::cerr << "cairn: error: no command '" << command
            << "'\nhint: `cairn help` lists the commands\n";
  return 2;
}

// The first word that is not an option (or --store's value), if it names no command:
// CLI11 would only say "A subcommand is required".
const char* unknown_command(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return nullptr;
    if (arg == "--store") {
      ++i;
      continue;
    }
    if (arg.empty() || arg[0] == '-') continue;
    try {
      app.get_subcommand(arg);
      return nullptr;
    } catch (const CLI::OptionNotFound&) {
      return argv[i];
    }
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  // The built-in trainer is cairn re-executing itself as a trial (SPEC §6).
  if (argc >= 2 && std::strcmp(argv[1], "__builtin-mlp") == 0) return cairn::run_builtin_mlp();

  CLI::App app(kDescription, "cairn");
  app.set_version_flag("--version", std::string("cairn ") + CAIRN_VERSION);
  app.require_subcommand(1);
  app.fallthrough();
  cairn::cli::GlobalOptions global;
  cairn::cli::Outcome outcome;
  app.add_option("--store", global.store,
                 "Store directory (default: nearest .cairn/ upwards; env CAIRN_DIR)")
      ->type_name("DIR");

  cairn::cli::add_init(app, global, outcome);
  cairn::cli::add_run(app, global, outcome);
  cairn::cli::add_resume(app, global, outcome);
  cairn::cli::add_pause(app, global, outcome);
  cairn::cli::add_kill(app, global, outcome);
  cairn::cli::add_ls(app, global, outcome);
  cairn::cli::add_show(app, global, outcome);
  cairn::cli::add_compare(app, global, outcome);
  cairn::cli::add_logs(app, global, outcome);
  cairn::cli::add_metrics(app, global, outcome);
  cairn::cli::add_checkpoints(app, global, outcome);
  cairn::cli::add_best(app, global, outcome);
  cairn::cli::add_watch(app, global, outcome);
  cairn::cli::add_report(app, global, outcome);
  cairn::cli::add_export(app, global, outcome);
  cairn::cli::add_version(app, global, outcome);
  cairn::cli::add_completion(app, global, outcome);
  cairn::cli::add_gc(app, global, outcome);
  cairn::cli::add_reproduce(app, global, outcome);
  cairn::cli::add_doctor(app, global, outcome);
  cairn::cli::add_agent(app, global, outcome);
  cairn::cli::add_peers(app, global, outcome);
  std::string help_topic;
  CLI::App* help = app.add_subcommand("help", "Describe every command, or one command");
  help->add_option("command", help_topic, "Command to describe")->type_name("COMMAND");
  help->callback([&] { outcome.exit_code = print_help(app, help_topic); });

  if (const char* word = unknown_command(app, argc, argv)) {
    std::cerr << "cairn: error: no command '" << word
              << "'\nhint: `cairn help` lists the commands\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "cairn: error: " << e.what()
              << "\nhint: `cairn help` lists the commands and their options\n";
    return 2;
  } catch (const std::exception& e) {
    // Nothing should get here; if something does, it still gets a one-line error.
    std::cerr << "cairn: error: " << e.what() << "\n";
    return 1;
  }
  return outcome.exit_code;
}
