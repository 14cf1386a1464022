// `cairn completion bash|zsh|fish` prints the shell completion script shipped in
// completions/ (compiled into the binary); `cairn __complete ids` feeds those scripts.
#include <iostream>

#include "cli/command.h"
#include "common/embedded.h"

namespace cairn::cli {

namespace {

int complete_ids(const GlobalOptions& global) {
  auto store = open_store(global);
  if (!store.ok()) return 0;  // completion must stay quiet
  for (int64_t id : list_experiment_ids(*store)) {
    std::cout << id << "\n";
    auto reader = ExperimentReader::open(*store, id);
    if (!reader.ok()) continue;
    auto trials = (*reader)->trials();
    if (!trials.ok()) continue;
    for (const Json& t : *trials) std::cout << t.value("id", "") << "\n";
  }
  return 0;
}

}  // namespace

void add_completion(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto shell = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("completion", "Print a shell completion script");
  cmd->add_option("shell", *shell, "bash, zsh or fish")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh", "fish"}))
      ->type_name("SHELL");
  cmd->callback([shell] {
    std::cout << (*shell == "bash"  ? kBashCompletion
                  : *shell == "zsh" ? kZshCompletion
                                    : kFishCompletion);
  });

  auto what = std::make_shared<std::string>();
  CLI::App* hidden = app.add_subcommand("__complete", "");  // empty description: hidden from help
  hidden->group("");
  hidden->add_option("what", *what)->required()->check(CLI::IsMember({"ids"}));
  hidden->callback([&global, &outcome] { outcome.exit_code = complete_ids(global); });
}

}  // namespace cairn::cli
