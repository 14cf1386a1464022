// `cairn logs TRIAL [-f] [--rank N] [--tail N]`: a trial's output.
#include <poll.h>
#include <unistd.h>

#include <deque>
#include <iostream>
#include <limits>

#include "cli/command.h"
#include "cli/experiment_view.h"

namespace cairn::cli {

namespace {

struct LogsOptions {
  std::string id;
  bool follow = false;
  int rank = 0;
  int tail = 0;
};

bool trial_is_live(const Json& trial) {
  const std::string s = trial.value("state", "");
  return s == "RUNNING" || s == "QUEUED";
}

int logs(const GlobalOptions& global, const LogsOptions& opts) {
  auto id = parse_id(opts.id);
  if (!id.ok()) return fail(id.status());
  if (!id->trial) return fail(Status::BadInput("logs needs a trial id such as " + opts.id + ".1"));
  auto view = open_experiment_view(global, id->experiment);
  if (!view.ok()) return fail(view.status());
  auto trial = (*view)->trial(id->trial);
  if (!trial.ok()) return fail(trial.status());
  // Every trial of an experiment has the config's number of ranks; a rank beyond them has
  // no output, which is worth an error rather than silence.
  if (auto exp = (*view)->experiment(); exp.ok()) {
    const Json resources = exp->value("config", Json::object()).value("resources", Json::object());
    const int ranks = resources.is_object() ? resources.value("slots_per_trial", 1) : 1;
    if (opts.rank >= ranks)
      return fail(Status::BadInput(
          "--rank " + std::to_string(opts.rank) + ": trial " + opts.id + " has " +
          (ranks == 1 ? std::string("one rank (0)")
                      : std::to_string(ranks) + " ranks (0–" + std::to_string(ranks - 1) + ")")));
  }

  int64_t last = 0;
  std::string text;
  Status st = (*view)->read_log(id->trial, opts.rank, 0, [&](int64_t seq, std::string_view chunk) {
    text.append(chunk);
    last = seq;
  });
  if (!st.ok()) return fail(st);
  if (opts.tail > 0) {
    size_t pos = text.size();
    if (pos && text[pos - 1] == '\n') --pos;
    for (int n = 0; n < opts.tail && pos != std::string::npos && pos > 0; ++n)
      pos = text.rfind('\n', pos - 1);
    if (pos != std::string::npos && pos > 0) text.erase(0, pos + 1);
  }
  std::cout << text << std::flush;
  if (!opts.follow) return 0;
  // Follow: poll the database for new chunks until the trial is no longer running and the
  // experiment is not being driven.
  for (;;) {
    ::poll(nullptr, 0, 250);
    if (!(*view)->refresh().ok()) continue;
    st = (*view)->read_log(id->trial, opts.rank, last, [&](int64_t seq, std::string_view chunk) {
      std::cout.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      last = seq;
    });
    std::cout << std::flush;
    if (!st.ok()) return fail(st);
    auto now = (*view)->trial(id->trial);
    if (now.ok() && !trial_is_live(*now)) break;
    if (!experiment_is_driven(view->store.experiment(id->experiment))) break;
  }
  return 0;
}

}  // namespace

void add_logs(CLI::App& app, GlobalOptions& global, Outcome& outcome) {
  auto opts = std::make_shared<LogsOptions>();
  CLI::App* cmd = app.add_subcommand("logs", "Print a trial's output (stdout and stderr)");
  cmd->add_option("trial", opts->id, "Trial id (7.3)")->required()->type_name("TRIAL");
  cmd->add_flag("-f,--follow", opts->follow, "Keep printing new output while the trial runs");
  // Integer ranges: CLI::NonNegativeNumber checks against a double and prints its 300-digit
  // maximum in the message for --rank -1.
  constexpr int kMax = std::numeric_limits<int>::max();
  cmd->add_option("--rank", opts->rank, "Rank of a data-parallel trial (default 0)")
      ->check(CLI::Range(0, kMax));
  cmd->add_option("--tail", opts->tail, "Print only the last N lines")->check(CLI::Range(0, kMax));
  cmd->callback([&global, &outcome, opts] { outcome.exit_code = logs(global, *opts); });
}

}  // namespace cairn::cli
