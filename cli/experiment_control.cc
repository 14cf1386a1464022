#include "cli/experiment_control.h"

#include <poll.h>

#include <chrono>

#include "engine/config/config.h"
#include "engine/coordinator/trial_process.h"
#include "store/experiment_db.h"

namespace cairn::cli {
namespace fs = std::filesystem;

Result<ExperimentStatus> experiment_status(const StoreLayout& store, int64_t id) {
  auto reader = ExperimentReader::open(store, id);
  if (!reader.ok()) return reader.status();
  auto exp = (*reader)->experiment();
  if (!exp.ok()) return exp.status();
  ExperimentStatus status;
  status.record = std::move(*exp);
  status.driven = experiment_is_driven(store.experiment(id));
  const Json driver = status.record.value("driver", Json());
  if (status.driven && driver.is_object() &&
      same_process_alive(driver.value("pid", 0), driver.value("start_time", uint64_t{0}),
                         driver.value("boot_id", ""))) {
    status.driver = driver["pid"].get<pid_t>();
  }
  return status;
}

int recorded_slots(const Json& experiment) {
  const Json slots = experiment.value("slots", Json(0));
  return slots.is_number_integer() && slots.get<int64_t>() > 0 ? slots.get<int>() : 0;
}

bool wait_until_undriven(const StoreLayout& store, int64_t id, int timeout_s,
                         const std::function<void()>& still_waiting) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::seconds(timeout_s);
  auto next_word = start + std::chrono::seconds(10);
  while (experiment_is_driven(store.experiment(id))) {
    const auto now = std::chrono::steady_clock::now();
    if (now > deadline) return false;
    if (still_waiting && now >= next_word) {
      still_waiting();
      next_word = now + std::chrono::seconds(30);
    }
    ::poll(nullptr, 0, 50);
  }
  return true;
}

fs::path moved_workdir(const Json& experiment, const StoreLayout& store) {
  const fs::path recorded = experiment.value("workdir", "");
  const fs::path old_store = experiment.value("store", "");
  std::error_code ec;
  const fs::path store_now = fs::weakly_canonical(store.root(), ec);
  if (recorded.empty() || old_store.empty() || ec || store_now == old_store) return {};
  const fs::path inside = recorded.lexically_relative(old_store.parent_path());
  if (inside.empty() || *inside.begin() == "..") return {};
  const fs::path now = (store_now.parent_path() / inside).lexically_normal();
  return fs::is_directory(now, ec) ? now : fs::path();
}

Result<ExperimentConfig> stored_config(const Json& experiment, const StoreLayout& store,
                                       std::string* moved_note) {
  const std::string file = experiment.value("config_file", "");
  std::vector<std::string> sets;
  for (const auto& s : experiment.value("sets", Json::array()))
    sets.push_back(s.get<std::string>());
  if (const fs::path now = moved_workdir(experiment, store); !now.empty()) {
    sets.push_back("workdir=" + Json(now.string()).dump());  // last: it wins
    if (moved_note)
      *moved_note = "the project moved: workdir " + experiment.value("workdir", "") + " is now " +
                    now.string();
  }
  auto config =
      parse_experiment_config(experiment.value("config_text", ""), file,
                              fs::path(file).parent_path(), sets, ConfigUse::kStoredExperiment);
  if (!config.ok()) return config.status();
  config->name = experiment.value("name", config->name);
  if (!experiment.value("config", Json::object()).contains("determined_defaults"))
    drop_determined_defaults(*config);  // recorded before cairn applied them
  return config;
}

}  // namespace cairn::cli
