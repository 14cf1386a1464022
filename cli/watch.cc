// `cairn watch EXP`: a live view of a running experiment. On a terminal it redraws in place
// until the experiment stops; piped, it prints one snapshot.
#include <poll.h>
#include <unistd.h>

#include <iostream>
#include <map>
#include <sstream>

#include "cli/command.h"
#include "cli/experiment_view.h"
#include "cli/search_view.h"
#include "cli/table.h"

namespace cairn::cli {

namespace {

std::string render(const Json& exp, const std::vector<Json>& trials, bool driven) {
  std::ostringstream out;
  const std::string id = std::to_string(exp.value("id", 0));
  out << "experiment " << id << "  " << exp.value("name", "") << "  " << exp.value("state", "")
      << (driven                               ? ""
          : exp.value("state", "") == "ACTIVE" ? " (no cairn process is driving it)"
                                               : "")
      << "\n";
  std::map<std::string, int> states;
  for (const Json& t : trials) ++states[t.value("state", "")];
  out << "trials      " << trials.size();
  for (const auto& [state, n] : states) out << "  " << state << " " << n;
  out << "\n";
  print_search_state(out, exp.value("searcher_state", Json()), id);
  out << "\n";
  Table running({"TRIAL", "STATE", "STEPS", "BEST VALIDATION"});
  const std::string metric = exp["config"].value("searcher", Json::object()).value("metric", "");
  for (const Json& t : trials) {
    const std::string s = t.value("state", "");
    if (s != "RUNNING" && s != "QUEUED") continue;
    const Json bv = t.value("best_validation", Json());
    running.add({t.value("id", ""), s, std::to_string(t.value("steps_completed", 0)),
                 bv.is_object() && bv.contains(metric) && bv[metric].is_number()
                     ? metric + "=" + format_number(bv[metric].get<double>())
                     : "-"});
  }
  running.print(out);
  return out.str();
}

int watch(const GlobalOptions& global, const std::string& id_text, double interval) {
  auto id = parse_id(id_text);
  if (!id.ok()) return fail(id.status());
  if (id->trial) return fail(Status::BadInput("watch needs an experiment id, not a trial"));
  if (interval <= 0) return fail(Status::BadInput("--interval must be positive"));
  auto view = open_experiment_view(global, id->experiment);
  if (!view.ok()) return fail(view.status());
  const bool tty = ::isatty(STDOUT_FILENO) == 1;
  for (;;) {
    (void)(*view)->refresh();
    auto exp = (*view)->experiment();
    if (!exp.ok()) return fail(exp.status());
    auto trials = (*view)->trials();
    if (!trials.ok()) return fail(trials.status());
    const bool driven = experiment_is_driven(view->store.experiment(id->experiment));
    const std::string view = render(*exp, *trials, driven);
    if (!tty) {
      std::cout << view;
      return 0;
    }
    std::cout << "\033[H\033[2J" << view << std::flush;  // home, clear: redraw in place
    if (!driven) return 0;
    ::poll(nullptr, 0, static_cast<int>(interval * 1000));
  }
}

}  // namespace

void add_watch(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto id = std::make_shared<std::string>();
  auto interval = std::make_shared<double>(1.0);
  CLI::App* cmd = app.add_subcommand(
      "watch", "Live view of an experiment: trials by bracket and rung, best so far");
  cmd->add_option("id", *id, "Experiment id")->required()->type_name("EXP");
  cmd->add_option("--interval", *interval, "Seconds between redraws (default 1)")
      ->type_name("SECONDS");
  cmd->callback(
      [&global, &outcome, id, interval] { outcome.exit_code = watch(global, *id, *interval); });
}

}  // namespace cairn::cli
