#include "store/stored_records.h"

#include <utility>

namespace cairn::schema {

namespace {

constexpr std::pair<EventType, const char*> kEventNames[] = {
    {EventType::kTrialCreated, "trial_created"},
    {EventType::kTrain, "train"},
    {EventType::kClose, "close"},
    {EventType::kSearcherValidation, "searcher_validation"},
    {EventType::kSearcherTrialClosed, "searcher_trial_closed"},
    {EventType::kTrialState, "trial_state"},
    {EventType::kTrialStarted, "trial_started"},
    {EventType::kTrialExited, "trial_exited"},
    {EventType::kTrialRestart, "trial_restart"},
    {EventType::kTrialInterrupted, "trial_interrupted"},
    {EventType::kTrialAdopted, "trial_adopted"},
    {EventType::kValidation, "validation"},
    {EventType::kCheckpoint, "checkpoint"},
    {EventType::kCheckpointCorrupt, "checkpoint_corrupt"},
    {EventType::kCheckpointFailed, "checkpoint_failed"},
    {EventType::kExperimentState, "experiment_state"},
    {EventType::kExperimentResumed, "experiment_resumed"},
};

Status corrupt(std::string_view key, const std::string& what) {
  return Status::Corrupt("store corrupt: " + std::string(key) + " " + what +
                         " (`cairn doctor` checks the store)");
}

using Accepts = bool (*)(const Json&);
bool integer(const Json& v) {
  return v.is_number_integer();
}
// Parsed from text, a non-negative integer is unsigned; built in memory, it may be signed.
bool natural(const Json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}
bool text(const Json& v) {
  return v.is_string();
}
bool object(const Json& v) {
  return v.is_object();
}
bool array(const Json& v) {
  return v.is_array();
}
bool boolean(const Json& v) {
  return v.is_boolean();
}

// The field is of the type `accepts` checks, or is absent when `optional`.
bool field_is(const Json& record, const char* field, bool optional, Accepts accepts) {
  auto it = record.find(field);
  if (it == record.end()) return optional;
  return accepts(*it);
}

}  // namespace

const char* event_type_name(EventType type) {
  for (const auto& [t, name] : kEventNames)
    if (t == type) return name;
  return "unknown";
}

std::optional<EventType> parse_event_type(std::string_view name) {
  for (const auto& [t, n] : kEventNames)
    if (name == n) return t;
  return std::nullopt;
}

Result<int64_t> StoredEvent::integer(const char* field) const {
  auto it = fields.find(field);
  if (it == fields.end() || !it->is_number_integer())
    return corrupt("event " + std::to_string(seq),
                   std::string("has no integer '") + field + "' (a " +
                       fields.value("type", std::string("?")) + " event)");
  return it->get<int64_t>();
}

Result<StoredEvent> read_event(std::string_view key, std::string_view value) {
  StoredEvent ev;
  ev.fields = Json::parse(value, nullptr, false);
  if (ev.fields.is_discarded() || !ev.fields.is_object())
    return corrupt(key, "is not a JSON object");
  auto seq = ev.fields.find("seq");
  auto type = ev.fields.find("type");
  if (seq == ev.fields.end() || !seq->is_number_integer())
    return corrupt(key, "has no integer 'seq'");
  if (type == ev.fields.end() || !type->is_string()) return corrupt(key, "has no string 'type'");
  ev.seq = seq->get<int64_t>();
  ev.type = parse_event_type(type->get<std::string>());
  return ev;
}

Result<TrialRecordHead> read_trial_record(std::string_view key, const Json& record) {
  if (!record.is_object()) return corrupt(key, "is not a JSON object");
  struct Check {
    const char* field;
    bool optional;
    Accepts accepts;
    const char* type;
  };
  static const Check kChecks[] = {
      {"index", false, integer, "an integer"},
      {"state", false, text, "a string"},
      {"hparams", false, object, "an object"},
      {"seed", false, natural, "a non-negative integer"},
      {"target_length", true, integer, "an integer"},
      {"validated_target", true, integer, "an integer"},
      {"latest_checkpoint_steps", true, integer, "an integer"},
      {"steps_completed", true, integer, "an integer"},
      {"restarts", true, integer, "an integer"},
      {"closed", true, boolean, "true or false"},
      {"pid", true, integer, "an integer"},
      {"process_start_time", true, natural, "a non-negative integer"},
      {"boot_id", true, text, "a string"},
      {"rank_pids", true, array, "an array"},
      {"rank_start_times", true, array, "an array"},
  };
  for (const Check& c : kChecks)
    if (!field_is(record, c.field, c.optional, c.accepts))
      return corrupt(key, std::string("field '") + c.field + "' is " +
                              (record.contains(c.field) ? "not " : "missing; it must be ") +
                              c.type);
  // Output positions and log sequence numbers, per rank: "output_offset", "log_seq",
  // "output_offset_rank1", …
  for (const auto& [field, value] : record.items())
    if ((field.starts_with("output_offset") || field.starts_with("log_seq")) && !natural(value))
      return corrupt(key, "field '" + field + "' is not a non-negative integer");
  for (const char* list : {"rank_pids", "rank_start_times"})
    if (record.contains(list))
      for (const Json& v : record[list])
        if (!v.is_number_integer())
          return corrupt(key, std::string("field '") + list + "' holds a non-integer");
  const std::optional<TrialState> state = parse_trial_state(record["state"].get<std::string>());
  if (!state)
    return corrupt(key, "has an unknown state '" + record["state"].get<std::string>() + "'");
  TrialRecordHead head;
  head.index = record["index"].get<int64_t>();
  head.state = *state;
  head.target_length = record.value("target_length", int64_t{0});
  head.validated_target = record.value("validated_target", int64_t{0});
  head.closed = record.value("closed", false);
  head.latest_checkpoint_steps = record.value("latest_checkpoint_steps", int64_t{-1});
  return head;
}

void write_trial_record(const TrialRecordHead& head, Json& record) {
  record["index"] = head.index;
  record["state"] = trial_state_name(head.state);
  record["target_length"] = head.target_length;
  record["validated_target"] = head.validated_target;
  record["closed"] = head.closed;
  if (head.latest_checkpoint_steps >= 0)
    record["latest_checkpoint_steps"] = head.latest_checkpoint_steps;
}

}  // namespace cairn::schema
