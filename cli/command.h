// What every command shares: the global options, how a command reports failure, and the
// registration functions main.cc calls (one per command file).
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <optional>
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "store/experiment_ids.h"
#include "store/experiment_reader.h"
#include "store/store_location.h"

namespace cairn::cli {

struct GlobalOptions {
  std::string store;  // --store DIR
  std::optional<std::filesystem::path> store_dir() const {
    if (store.empty()) return std::nullopt;
    return std::filesystem::path(store);
  }
};

// Where a command's exit status goes (set by the command's callback).
struct Outcome {
  int exit_code = 0;
};

// Prints "cairn: error: MESSAGE" (plus an optional hint line) and returns the exit status.
int fail(const Status& status, const std::string& hint = {});
// Prints a JSON document on stdout, alone (SPEC §1: --json prints nothing else).
void print_json(const Json& doc);
Result<StoreLayout> open_store(const GlobalOptions& global);

std::string trial_id_text(int64_t experiment, int64_t trial);

// The TRIAL shape of SPEC §1 (`show --json`), from a stored trial record.
Json trial_json(const Json& record);
// The CHECKPOINT shape of SPEC §1.
Json checkpoint_json(const Json& record);

// The trial record with the best finite best_validation of the searcher's metric (the best
// so far while the experiment runs); null when no trial has one.
const Json* best_trial_record(const Json& experiment, const std::vector<Json>& trials);

void add_init(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_run(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_ls(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_show(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_logs(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_metrics(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_checkpoints(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_export(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_resume(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_pause(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_kill(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_best(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_watch(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_report(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_version(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_completion(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_gc(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_compare(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_reproduce(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_doctor(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_agent(CLI::App& app, GlobalOptions& global, Outcome& outcome);
void add_peers(CLI::App& app, GlobalOptions& global, Outcome& outcome);

}  // namespace cairn::cli
