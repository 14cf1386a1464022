// The key layout of an experiment's database. Records are JSON objects so that fields can
// be added without migrating old stores; readers ignore fields they do not know.
//
//   experiment                          the experiment: id, name, state, config, seed, …
//   searcher_state                      what `show` and `watch` display of the search
//                                       (the searcher's describe()); its own record so that
//                                       the round that changes it does not rewrite the
//                                       experiment's (config, provenance: kilobytes). Stores
//                                       written before it have it in `experiment`.
//   trial/<trial:8>                     a trial: id "7.3", state, hparams, seed, steps, …
//   tbatch/<trial:8>/<seq:12>           a batch of training reports, stored as the trial sent
//                                       it ({"reports": [{"step", "metrics"}, …]}); readers
//                                       merge batches in order, a later report of a step
//                                       replacing an earlier one
//   metric/<trial:8>/v/<step:12>        validation metrics reported at a step
//   ckpt/<sha256>                       a registered checkpoint: trial, steps, metrics, bytes
//   log/<trial:8>/<rank:4>/<seq:12>     a chunk of a rank's stdout+stderr, in order
//   event/<seq:16>                      the append-only event log
//   notify/<delivery_id>                a notification's marker: written in the commit that
//                                       stores the state change it reports, so a prepared
//                                       notification is delivered exactly when that change
//                                       is durable (engine/coordinator/notifier.h)
//   notify_best                         best_improved's pacing: the best value notified or
//                                       waiting, when the last one left, the one waiting
//                                       (engine/coordinator/notify_outbox.h)
//
// Numbers are zero-padded so that byte order is numeric order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/json.h"

namespace cairn::schema {

inline constexpr const char* kExperiment = "experiment";
inline constexpr const char* kSearcherState = "searcher_state";
inline constexpr const char* kTrialPrefix = "trial/";
inline constexpr const char* kCheckpointPrefix = "ckpt/";
inline constexpr const char* kEventPrefix = "event/";
inline constexpr const char* kNotifyPrefix = "notify/";
inline constexpr const char* kNotifyBest = "notify_best";

// States that never change again: an experiment's (its record's "state") and a trial's
// (a trial may also be STOPPED by its searcher).
inline bool experiment_has_ended(const std::string& state) {
  return state == "COMPLETED" || state == "ERROR" || state == "CANCELED";
}
inline bool trial_has_ended(const std::string& state) {
  return experiment_has_ended(state) || state == "STOPPED";
}

// A trial's state, as its record's "state" holds it (SPEC §5 names them).
enum class TrialState {
  kQueued,     // waits for a slot (new, promoted, or restarting after a failure)
  kRunning,    // its ranks run
  kPaused,     // stopped with a checkpoint; a resume or a promotion continues it
  kCompleted,  // trained to max_length
  kStopped,    // closed early by its searcher
  kError,      // failed past its restarts, or could not start
  kCanceled,   // the experiment was canceled
};
// An experiment's state (its record's "state").
enum class ExperimentState {
  kActive,     // driven now, or interrupted (SIGTERM, a crash): `resume --all` continues it
  kPaused,     // paused on purpose (Ctrl-C, `cairn pause`): `resume ID` continues it
  kCompleted,  // the searcher finished
  kError,      // every trial errored
  kCanceled,   // `cairn kill`
};
const char* experiment_state_name(ExperimentState state);

// The stored name ("QUEUED", …), and back; nullopt for a name no cairn writes.
const char* trial_state_name(TrialState state);
std::optional<TrialState> parse_trial_state(std::string_view name);
inline bool trial_has_ended(TrialState state) {
  return state == TrialState::kCompleted || state == TrialState::kStopped ||
         state == TrialState::kError || state == TrialState::kCanceled;
}

// A checkpoint record whose files are still there: not removed by retention or gc, nor
// being removed ("deleting" marks the first step of a deletion, see garbage_collector.h).
inline bool checkpoint_is_kept(const Json& record) {
  return !record.value("deleted", false) && !record.value("deleting", false);
}

enum class MetricKind : char { kTraining = 't', kValidation = 'v' };

std::string trial_key(int64_t trial);
std::string metric_prefix(int64_t trial, MetricKind kind);
std::string metric_key(int64_t trial, MetricKind kind, int64_t step);
inline constexpr const char* kTrainingBatchPrefix = "tbatch/";
std::string training_batch_prefix(int64_t trial);
std::string training_batch_key(int64_t trial, int64_t seq);
std::string checkpoint_key(const std::string& id);
std::string log_prefix(int64_t trial, int rank);
std::string log_key(int64_t trial, int rank, int64_t seq);
std::string event_key(int64_t seq);
std::string notify_key(const std::string& delivery_id);
// The number after the last '/' of a key (the step of a metric key, the seq of a log key).
int64_t key_suffix_number(const std::string& key);

}  // namespace cairn::schema
