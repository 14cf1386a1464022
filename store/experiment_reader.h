// Read-side access to one experiment's records, for the commands that look (ls, show,
// metrics, logs, checkpoints, export). Opens the database as a secondary instance, so it
// works while another process drives the experiment.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "store/experiment_db.h"
#include "store/schema.h"
#include "store/store_location.h"

namespace cairn {

struct MetricPoint {
  int64_t step = 0;
  Json metrics;
};

class ExperimentReader {
 public:
  static Result<std::unique_ptr<ExperimentReader>> open(const StoreLayout& store, int64_t id);

  int64_t id() const { return id_; }
  Result<Json> experiment() const;
  Result<std::vector<Json>> trials() const;
  Result<Json> trial(int64_t index) const;
  // A metric series in step order, one entry per step.
  Result<std::vector<MetricPoint>> metrics(int64_t trial, schema::MetricKind kind) const;
  // Checkpoint records, of one trial (trial > 0) or all, ordered by trial then step.
  Result<std::vector<Json>> checkpoints(int64_t trial = 0) const;
  // Log chunks of a trial's rank after `after_seq` (0 = from the start), in order.
  Status read_log(int64_t trial, int rank, int64_t after_seq,
                  const std::function<void(int64_t seq, std::string_view chunk)>& visit) const;
  Status refresh() { return db_->catch_up(); }
  const ExperimentDb& db() const { return *db_; }

 private:
  Result<std::vector<MetricPoint>> training_metrics(int64_t trial) const;
  int64_t id_ = 0;
  std::unique_ptr<ExperimentDb> db_;
};

}  // namespace cairn
