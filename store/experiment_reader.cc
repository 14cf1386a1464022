#include "store/experiment_reader.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

namespace cairn {

Result<std::unique_ptr<ExperimentReader>> ExperimentReader::open(const StoreLayout& store,
                                                                 int64_t id) {
  std::error_code ec;
  if (!std::filesystem::is_directory(store.experiment(id), ec))
    return Status::NotFound("no experiment " + std::to_string(id));
  auto db = ExperimentDb::open(store.experiment(id), ExperimentDb::Mode::kRead, store.tmp());
  if (!db.ok()) return db.status();
  auto reader = std::unique_ptr<ExperimentReader>(new ExperimentReader());
  reader->id_ = id;
  reader->db_ = std::move(*db);
  return reader;
}

Result<Json> ExperimentReader::experiment() const {
  auto j = db_->get_json(schema::kExperiment);
  // A reader that opened while the coordinator was opening the database (resume: RocksDB
  // replays the log into a new table file and deletes the log) can see neither the old log
  // nor the new file. Catching up with the coordinator's manifest finds it; a few tries,
  // because the coordinator may not have written the manifest yet.
  for (int attempt = 0; attempt < 5 && j.ok() && !j->has_value(); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (Status st = db_->catch_up(); !st.ok()) return st;
    j = db_->get_json(schema::kExperiment);
  }
  if (!j.ok()) return j.status();
  if (!j->has_value())
    return Status::NotFound("experiment " + std::to_string(id_) + " has no record yet");
  Json exp = std::move(**j);
  // The search state has its own record (store/schema.h); readers see it in the experiment,
  // where older stores kept it.
  auto state = db_->get_json(schema::kSearcherState);
  if (!state.ok()) return state.status();
  if (state->has_value()) exp["searcher_state"] = std::move(**state);
  return exp;
}

Result<std::vector<Json>> ExperimentReader::trials() const {
  return db_->scan_json(schema::kTrialPrefix);
}

Result<Json> ExperimentReader::trial(int64_t index) const {
  auto j = db_->get_json(schema::trial_key(index));
  if (!j.ok()) return j.status();
  if (!j->has_value())
    return Status::NotFound("no trial " + std::to_string(id_) + "." + std::to_string(index));
  return std::move(**j);
}

Result<std::vector<MetricPoint>> ExperimentReader::training_metrics(int64_t trial) const {
  // Batches are visited in the order they were stored, and each step appears once. Two
  // reports of one step are merged by metric name, the later value winning: a script that
  // reports its loss and, in another call, its learning rate at the same step keeps both,
  // and a step reported again (after a restart re-trained it) gets the new values.
  std::map<int64_t, Json> by_step;
  Status bad = Status::Ok();
  Status st = db_->scan(schema::training_batch_prefix(trial), [&](std::string_view key,
                                                                  std::string_view value) {
    Json batch = Json::parse(value, nullptr, false);
    if (batch.is_discarded() || !batch.is_object() || !batch.contains("reports") ||
        !batch["reports"].is_array()) {
      bad = Status::Corrupt("store corrupt: training batch " + std::string(key) + " is malformed");
      return false;
    }
    for (Json& report : batch["reports"]) {
      if (!report.is_object() || !report.contains("step") || !report["step"].is_number_integer() ||
          !report.contains("metrics"))
        continue;
      Json& point = by_step[report["step"].get<int64_t>()];
      Json& metrics = report["metrics"];
      if (!point.is_object() || !metrics.is_object()) {
        point = std::move(metrics);
        continue;
      }
      for (auto& [name, value] : metrics.items()) point[name] = std::move(value);
    }
    return true;
  });
  if (!st.ok()) return st;
  if (!bad.ok()) return bad;
  std::vector<MetricPoint> out;
  out.reserve(by_step.size());
  for (auto& [step, metrics] : by_step) out.push_back({step, std::move(metrics)});
  return out;
}

Result<std::vector<MetricPoint>> ExperimentReader::metrics(int64_t trial,
                                                           schema::MetricKind kind) const {
  if (kind == schema::MetricKind::kTraining) return training_metrics(trial);
  std::vector<MetricPoint> out;
  Status bad = Status::Ok();
  Status st = db_->scan(
      schema::metric_prefix(trial, kind), [&](std::string_view key, std::string_view value) {
        Json j = Json::parse(value, nullptr, false);
        if (j.is_discarded()) {
          bad = Status::Corrupt("store corrupt: metric record is not JSON");
          return false;
        }
        out.push_back({schema::key_suffix_number(std::string(key)), std::move(j)});
        return true;
      });
  if (!st.ok()) return st;
  if (!bad.ok()) return bad;
  return out;
}

Result<std::vector<Json>> ExperimentReader::checkpoints(int64_t trial) const {
  std::vector<Json> out;
  Status st = db_->scan(schema::kCheckpointPrefix, [&](std::string_view, std::string_view value) {
    Json j = Json::parse(value, nullptr, false);
    if (j.is_discarded()) return true;
    if (trial > 0 && j.value("trial_index", int64_t{0}) != trial) return true;
    out.push_back(std::move(j));
    return true;
  });
  if (!st.ok()) return st;
  std::sort(out.begin(), out.end(), [](const Json& a, const Json& b) {
    auto key = [](const Json& j) {
      return std::make_pair(j.value("trial_index", int64_t{0}),
                            j.value("steps_completed", int64_t{0}));
    };
    return key(a) < key(b);
  });
  return out;
}

Status ExperimentReader::read_log(
    int64_t trial, int rank, int64_t after_seq,
    const std::function<void(int64_t, std::string_view)>& visit) const {
  const std::string prefix = schema::log_prefix(trial, rank);
  const std::string start = after_seq > 0 ? schema::log_key(trial, rank, after_seq) : std::string();
  return db_->scan(
      prefix,
      [&](std::string_view key, std::string_view value) {
        visit(schema::key_suffix_number(std::string(key)), value);
        return true;
      },
      start);
}

}  // namespace cairn
