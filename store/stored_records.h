// Reading what the coordinator stored, with every field it resumes from checked: a record or
// event that a crash, a disk or a hand edit left with a wrong type is a Corrupt status naming
// its key and field, never an exception (nlohmann's get<> throws on a type mismatch). The
// names of the event types are defined here once; their fields are documented in
// docs/store.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/json.h"
#include "common/status.h"
#include "store/schema.h"

namespace cairn::schema {

// The event log's entry types (the "type" of event/<seq>).
enum class EventType {
  kTrialCreated,         // trial, hparams, seed
  kTrain,                // trial, length: the searcher's operation for it
  kClose,                // trial: the searcher has no more work for it
  kSearcherValidation,   // trial, length, metric: what the searcher was told
  kSearcherTrialClosed,  // trial: the searcher was told it ended
  kTrialState,           // trial, state
  kTrialStarted,         // trial, pid
  kTrialExited,          // trial, code, signal
  kTrialRestart,         // trial, restart, reason
  kTrialInterrupted,     // trial: its coordinator went away while it ran
  kTrialAdopted,         // trial, attempt: a resume took its ranks, still running on agents
  kValidation,           // trial, step, metrics
  kCheckpoint,           // trial, checkpoint, steps
  kCheckpointCorrupt,    // trial, checkpoint
  kCheckpointFailed,     // trial, step, error
  kExperimentState,      // state
  kExperimentResumed,
};
const char* event_type_name(EventType type);
// nullopt for a type this cairn does not know (written by a newer one): skipped by readers.
std::optional<EventType> parse_event_type(std::string_view name);

// One stored event: its sequence number, its type, and its fields as stored.
struct StoredEvent {
  int64_t seq = 0;
  std::optional<EventType> type;
  Json fields;
  // An integer field; Corrupt naming the event and field when missing or not an integer.
  Result<int64_t> integer(const char* field) const;
};
Result<StoredEvent> read_event(std::string_view key, std::string_view value);

// The fields of a trial record (trial/<index>) that a resumed coordinator starts from.
struct TrialRecordHead {
  int64_t index = 0;
  int64_t target_length = 0;
  int64_t validated_target = 0;
  bool closed = false;
  TrialState state = TrialState::kQueued;
  int64_t latest_checkpoint_steps = -1;
};
// Checks those fields and the others the coordinator reads with a fixed type (hparams, seed,
// restarts, output offsets, log positions, process ids).
Result<TrialRecordHead> read_trial_record(std::string_view key, const Json& record);
// Writes `head` into the record's fields: the one place that maps them to JSON. The
// coordinator keeps them typed while it runs and writes them when it stores the record.
void write_trial_record(const TrialRecordHead& head, Json& record);

}  // namespace cairn::schema
