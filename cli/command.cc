#include "cli/command.h"

#include "common/metric_order.h"
#include "store/best_trial.h"

#include <cstdio>
#include <iostream>

namespace cairn::cli {

int fail(const Status& status, const std::string& hint) {
  std::fflush(stdout);
  // An id or a path as the user typed it may hold an escape sequence: shown, not obeyed.
  std::string message = status.message();
  for (char& c : message)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') || c == 0x7f) c = '?';
  std::cerr << "cairn: error: " << message << "\n";
  if (!hint.empty()) std::cerr << "hint: " << hint << "\n";
  return status.exit_code();
}

void print_json(const Json& doc) {
  std::cout << doc.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
}

Result<StoreLayout> open_store(const GlobalOptions& global) {
  return find_store(global.store_dir(), std::filesystem::current_path());
}

std::string trial_id_text(int64_t experiment, int64_t trial) {
  return std::to_string(experiment) + "." + std::to_string(trial);
}

Json trial_json(const Json& r) {
  Json t{{"id", r.value("id", "")},
         {"state", r.value("state", "")},
         {"hparams", r.value("hparams", Json::object())},
         {"seed", r.value("seed", Json(nullptr))},
         {"steps_completed", r.value("steps_completed", 0)},
         {"restarts", r.value("restarts", 0)},
         {"best_validation", r.value("best_validation", Json(nullptr))},
         {"latest_checkpoint", r.value("latest_checkpoint", Json(nullptr))}};
  if (r.value("state", "") == "RUNNING" && r.contains("pid")) t["pid"] = r["pid"];
  if (r.value("state", "") == "RUNNING" && r.contains("rank_pids")) t["rank_pids"] = r["rank_pids"];
  // The store-wide number (store/trial_numbers.h) and the slots of its latest start.
  if (r.contains("number")) t["number"] = r["number"];
  if (r.contains("slots")) t["slots"] = r["slots"];
  // Where each rank of its latest start ran: [{"rank", "machine" ("local" or an agent's
  // "host:port"), "slot"}] (docs/peers.md "Placement").
  if (r.contains("placement")) t["placement"] = r["placement"];
  if (r.contains("exit")) t["exit"] = r["exit"];
  if (r.contains("error")) t["error"] = r["error"];
  // A clone (pbt): the trial and step it started from, and that checkpoint.
  if (r.contains("parent")) {
    t["parent"] = r["parent"];
    t["parent"].erase("index");
    if (r.contains("parent_checkpoint")) t["parent"]["checkpoint"] = r["parent_checkpoint"];
  }
  // builtin:mlp's OpenBLAS kernels (engine/coordinator/trial_blas_core.h).
  if (r.contains("blas_core")) t["blas_core"] = r["blas_core"];
  return t;
}

Json checkpoint_json(const Json& r) {
  Json c{{"id", r.value("id", "")},
         {"trial", r.value("trial", "")},
         {"steps_completed", r.value("steps_completed", 0)},
         {"metrics", r.value("metrics", Json::object())},
         {"bytes", r.value("bytes", 0)},
         // what this checkpoint added to the store; the rest it shares with others
         {"new_bytes", r.value("new_bytes", 0)}};
  // What the trial passed with it (ctx.checkpoint(step, metadata); the determined package's
  // storage id), when anything.
  if (const Json m = r.value("metadata", Json::object()); m.is_object() && !m.empty())
    c["metadata"] = m;
  return c;
}

const Json* best_trial_record(const Json& experiment, const std::vector<Json>& trials) {
  const Json searcher =
      experiment.value("config", Json::object()).value("searcher", Json::object());
  std::vector<const Json*> records;
  for (const Json& t : trials) records.push_back(&t);
  return best_trial(records, searcher.value("metric", ""),
                    MetricOrder(searcher.value("smaller_is_better", true)));
}

}  // namespace cairn::cli
