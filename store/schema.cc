#include "store/schema.h"

#include <cstdio>
#include <utility>

namespace cairn::schema {

namespace {
std::string pad(int64_t n, int width) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*lld", width, static_cast<long long>(n));
  return buf;
}
}  // namespace

namespace {
constexpr std::pair<TrialState, const char*> kTrialStateNames[] = {
    {TrialState::kQueued, "QUEUED"},     {TrialState::kRunning, "RUNNING"},
    {TrialState::kPaused, "PAUSED"},     {TrialState::kCompleted, "COMPLETED"},
    {TrialState::kStopped, "STOPPED"},   {TrialState::kError, "ERROR"},
    {TrialState::kCanceled, "CANCELED"},
};
}  // namespace

const char* experiment_state_name(ExperimentState state) {
  switch (state) {
    case ExperimentState::kActive:
      return "ACTIVE";
    case ExperimentState::kPaused:
      return "PAUSED";
    case ExperimentState::kCompleted:
      return "COMPLETED";
    case ExperimentState::kError:
      return "ERROR";
    case ExperimentState::kCanceled:
      return "CANCELED";
  }
  return "UNKNOWN";
}

const char* trial_state_name(TrialState state) {
  for (const auto& [s, name] : kTrialStateNames)
    if (s == state) return name;
  return "UNKNOWN";
}

std::optional<TrialState> parse_trial_state(std::string_view name) {
  for (const auto& [s, n] : kTrialStateNames)
    if (name == n) return s;
  return std::nullopt;
}

std::string trial_key(int64_t trial) {
  return kTrialPrefix + pad(trial, 8);
}
std::string metric_prefix(int64_t trial, MetricKind kind) {
  return "metric/" + pad(trial, 8) + "/" + static_cast<char>(kind) + "/";
}
std::string metric_key(int64_t trial, MetricKind kind, int64_t step) {
  return metric_prefix(trial, kind) + pad(step, 12);
}
std::string training_batch_prefix(int64_t trial) {
  return kTrainingBatchPrefix + pad(trial, 8) + "/";
}
std::string training_batch_key(int64_t trial, int64_t seq) {
  return training_batch_prefix(trial) + pad(seq, 12);
}
std::string checkpoint_key(const std::string& id) {
  return kCheckpointPrefix + id;
}
std::string log_prefix(int64_t trial, int rank) {
  return "log/" + pad(trial, 8) + "/" + pad(rank, 4) + "/";
}
std::string log_key(int64_t trial, int rank, int64_t seq) {
  return log_prefix(trial, rank) + pad(seq, 12);
}
std::string event_key(int64_t seq) {
  return kEventPrefix + pad(seq, 16);
}

std::string notify_key(const std::string& delivery_id) {
  return kNotifyPrefix + delivery_id;
}

int64_t key_suffix_number(const std::string& key) {
  auto slash = key.rfind('/');
  return std::stoll(key.substr(slash == std::string::npos ? 0 : slash + 1));
}

}  // namespace cairn::schema
