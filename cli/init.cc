// `cairn init [DIR]`: create a store.
#include <iostream>

#include "cli/command.h"

namespace cairn::cli {

void add_init(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto dir = std::make_shared<std::string>(".");
  CLI::App* cmd = app.add_subcommand(
      "init", "Create a store (.cairn/) in DIR (default: the current directory)");
  cmd->add_option("dir", *dir, "Directory to hold .cairn/")->type_name("DIR");
  cmd->callback([&outcome, dir] {
    auto store = init_store(*dir);
    if (!store.ok()) {
      outcome.exit_code = fail(store.status());
      return;
    }
    std::cout << "cairn: store ready at " << store->root().string() << "\n";
  });
}

}  // namespace cairn::cli
