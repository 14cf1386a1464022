// The coordinator's side of the control protocol (docs/protocol.md).
#include <cmath>

#include "common/file_util.h"
#include "common/metric_order.h"
#include "common/untrusted_json.h"
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/metric_values.h"
#include "engine/coordinator/one_answer_hook.h"
#include "engine/coordinator/time_metric.h"
#include "engine/coordinator/trial_state.h"
#include "store/checkpoint_files.h"
#include "store/schema.h"
#include "store/stored_records.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

constexpr int kProtocolVersion = 1;

std::optional<double> finite_metric(const Json& metrics, const std::string& name) {
  if (!metrics.is_object() || !metrics.contains(name) || !metrics[name].is_number())
    return std::nullopt;
  double d = metrics[name].get<double>();
  if (!std::isfinite(d)) return std::nullopt;
  return d;
}

bool is_step(const Json& msg) {
  return msg.contains("step") && msg["step"].is_number_integer();
}

}  // namespace

void Coordinator::handle_line(ControlConnection& conn, const std::string& line) {
  // Training reports are most of the traffic: the SDKs put "type" first, so a batch is
  // recognised without parsing it and stored exactly as sent. Readers parse it.
  static constexpr std::string_view kTrainingPrefix = R"({"type":"training")";
  if (Trial* heard = trial_by_index(conn.trial)) heard->last_heard = Clock::now();
  if (conn.trial > 0 && std::string_view(line).starts_with(kTrainingPrefix)) {
    // Rank 0's reports are the trial's; the other ranks' are dropped (SPEC §4).
    Trial* trial = trial_by_index(conn.trial);
    if (trial && trial->world_size() > 1) note_rank_call(*trial, conn.rank, "training", Json());
    if (trial && conn.rank == 0) tell_dropped_metrics(conn, store_training_batch(*trial, line));
    return;
  }
  Result<Json> msg = parse_untrusted_json(line);
  if (!msg.ok() || !msg->is_object()) {
    const std::string why = msg.ok() ? "" : " (" + msg.status().message() + ")";
    reply(conn, Json{{"type", "error"},
                     {"message", "malformed message" + why + ": " + line.substr(0, 200)}});
    return;
  }
  handle_message(conn, *msg);
}

std::string Coordinator::store_training_batch(Trial& trial, std::string_view batch_json) {
  trial.reported_training = true;
  if (training_batch_is_numeric(batch_json)) {  // every batch the SDKs send
    batch_.put(schema::training_batch_key(trial.index, next_training_batch_seq_++), batch_json);
    return {};
  }
  // A raw client's batch, or one with values that are not numbers: what readers cannot
  // use is dropped here, and said once per metric in the trial's log.
  Result<Json> parsed = parse_untrusted_json(batch_json);
  Json batch = parsed.ok() ? std::move(*parsed) : Json();
  if (!batch.is_object() || !batch.contains("reports") || !batch["reports"].is_array()) {
    // Stored, it would make every reader of the trial's metrics fail.
    const std::string why = parsed.ok() ? "" : " (" + parsed.status().message() + ")";
    const std::string problem =
        "a training batch that is not a JSON object with a \"reports\" list" + why +
        " was not stored";
    log_output(trial, "cairn: warning: " + problem + "\n");
    return problem;
  }
  std::vector<std::string> dropped = drop_non_numeric_metrics(batch);
  batch_.put(schema::training_batch_key(trial.index, next_training_batch_seq_++),
             batch.dump(-1, ' ', false, Json::error_handler_t::replace));
  std::string problem;
  for (const std::string& what : dropped)
    if (trial.metric_warnings.insert(what).second) problem += (problem.empty() ? "" : ", ") + what;
  if (problem.empty()) return {};
  problem = "training metric values dropped (metric values must be numbers): " + problem;
  log_output(trial, "cairn: warning: " + problem + "\n");
  return problem;
}

void Coordinator::tell_dropped_metrics(ControlConnection& conn, const std::string& problem) {
  if (!problem.empty()) reply(conn, Json{{"type", "error"}, {"message", problem}});
}

void Coordinator::handle_message(ControlConnection& conn, const Json& msg) {
  // A trial's message with a field of an unexpected type must not take the coordinator down:
  // nlohmann reports those as exceptions, which stop here and become an error reply.
  try {
    dispatch_message(conn, msg);
  } catch (const std::exception& e) {
    Json error{{"type", "error"}, {"message", std::string("malformed message: ") + e.what()}};
    if (msg.contains("seq")) error["re"] = msg["seq"];
    reply(conn, std::move(error));
  }
}

void Coordinator::dispatch_message(ControlConnection& conn, const Json& msg) {
  const std::string type =
      msg.contains("type") && msg["type"].is_string() ? msg["type"].get<std::string>() : "";
  if (type == "hello") return handle_hello(conn, msg);
  Trial* trial = conn.trial > 0 ? trial_by_index(conn.trial) : nullptr;
  if (!trial) {
    reply(conn, Json{{"type", "error"}, {"message", "say hello first"}});
    return;
  }
  if (type == "answered") return handle_answered(*trial, conn, msg);  // adoption's replay
  if (trial->world_size() > 1) note_rank_call(*trial, conn.rank, type, msg);
  if (type == "next_operation") return handle_next_operation(*trial, conn, msg);
  if (type == "sync") return handle_sync(*trial, conn, msg);
  if (type == "kv_set") return handle_kv_set(*trial, conn, msg);
  if (type == "kv_get") return handle_kv_get(*trial, conn, msg);
  if (type == "best_validation") return handle_best_validation(conn, msg);
  if (type == "checkpoint_fetch") return handle_checkpoint_fetch(*trial, conn, msg);
  if (conn.rank != 0 && (type == "training" || type == "validation")) {
    // Only the chief's reports are recorded; the others are acknowledged and dropped.
    if (msg.contains("seq")) reply(conn, Json{{"type", "ack"}, {"re", msg["seq"]}});
    return;
  }
  if (type == "training") return handle_training(*trial, conn, msg);
  if (type == "validation") return handle_validation(*trial, conn, msg);
  if (trial->world_size() > 1 && type == "checkpoint_begin")
    return handle_rank_checkpoint_begin(*trial, conn, msg);
  if (trial->world_size() > 1 && type == "checkpoint_end")
    return handle_rank_checkpoint_end(*trial, conn, msg);
  if (trial->world_size() > 1 && type == "checkpoint_abort")
    return handle_rank_checkpoint_abort(*trial, conn, msg);
  if (type == "checkpoint_skip") return handle_checkpoint_skip(*trial, conn, msg);
  if (type == "checkpoint_begin") return handle_checkpoint_begin(*trial, conn, msg);
  if (type == "checkpoint_end") return handle_checkpoint_end(*trial, conn, msg);
  if (type == "checkpoint_abort") return handle_checkpoint_abort(*trial, msg);
  if (msg.contains("seq"))
    reply(conn, Json{{"type", "error"},
                     {"re", msg["seq"]},
                     {"message", "unknown message type '" + type + "'"}});
}

void Coordinator::handle_hello(ControlConnection& conn, const Json& msg) {
  if (conn.trial != 0) {
    // One connection speaks for one rank: a second hello naming another rank or trial would
    // leave the first one's slot pointing at a connection that now speaks for someone else.
    reply(conn,
          Json{{"type", "error"},
               {"message", "this connection already said hello, as rank " +
                               std::to_string(conn.rank) + " of trial " + trial_id(conn.trial)}});
    return;
  }
  if (msg.value("protocol", 0) != kProtocolVersion) {
    reply(conn, Json{{"type", "error"},
                     {"message",
                      "this cairn speaks control protocol " + std::to_string(kProtocolVersion)}});
    return;
  }
  const std::string id =
      msg.contains("trial") && msg["trial"].is_string() ? msg["trial"].get<std::string>() : "";
  Trial* trial = running_trial_by_id(id);
  if (!trial) {
    reply(conn,
          Json{{"type", "error"}, {"message", "no running trial '" + id + "' in this experiment"}});
    return;
  }
  // A process of an earlier attempt (one its lost machine left running, one that outlived
  // its gang) names that attempt: it speaks for nothing now. A hello without an attempt (an
  // SDK that predates it, a hand-written client) is taken as the current one.
  if (const Json attempt = msg.value("attempt", Json());
      attempt.is_number_integer() && attempt.get<int64_t>() != trial->attempt()) {
    reply(conn, Json{{"type", "error"},
                     {"message", "attempt " + attempt.dump() + " of trial " + id +
                                     " has ended (the trial is at attempt " +
                                     trial->record.value("attempts", Json(0)).dump() + ")"}});
    return;
  }
  const int rank =
      msg.contains("rank") && msg["rank"].is_number_integer() ? msg["rank"].get<int>() : 0;
  if (rank < 0 || rank >= trial->world_size()) {
    reply(conn,
          Json{{"type", "error"},
               {"message", "rank " + std::to_string(rank) + " is not a rank of trial " + id}});
    return;
  }
  if (const int first = rank_connection_fd(*trial, rank); first >= 0 && first != conn.fd()) {
    // The rank's connection may have closed with its end not read yet (a process that
    // closes and connects again): read it now, so that a reconnect is not refused.
    read_connection(first);
    if (auto it = connections_.find(first);
        it != connections_.end() && it->second->trial == trial->index && it->second->rank == rank) {
      // Another process (a child that inherited the trial's environment) connecting as this
      // rank would take the trial's place: the trial's answers would go to it, and the trial
      // would wait for ever. The connection that came first keeps the rank.
      const int64_t pid = it->second->pid;
      reply(conn, Json{{"type", "error"},
                       {"message", "rank " + std::to_string(rank) + " of trial " + id +
                                       " is already connected" +
                                       (pid > 0 ? " (process " + std::to_string(pid) + ")" : "") +
                                       "; only the trial's own process may talk to cairn, not "
                                       "a process it started with its environment"}});
      return;
    }
  }
  conn.trial = trial->index;
  conn.rank = rank;
  conn.pid = msg.contains("pid") && msg["pid"].is_number_integer() ? msg["pid"].get<int64_t>() : 0;
  Rank& joined = trial->ranks[static_cast<size_t>(rank)];
  joined.connection_fd = conn.fd();
  // A rank 0 that closed its connection and connected again decides the gang's operations
  // again (Rank::left).
  if (!joined.exit) joined.left = false;
  // The trial's settings (checkpoint period, deterministic mode, …) reach it once, in its
  // environment (CAIRN_*; docs/protocol.md, "Environment"), not again here.
  reply(conn, Json{{"type", "welcome"}, {"protocol", kProtocolVersion}});
  if (trial->stop_requested) reply(conn, Json{{"type", "stop"}, {"reason", "pause"}});
}

int Coordinator::rank_connection_fd(const Trial& trial, int rank) const {
  if (rank < 0 || rank >= trial.world_size()) return -1;
  return trial.ranks[static_cast<size_t>(rank)].connection_fd;
}

Json Coordinator::operation_answer(Trial& trial, size_t n) {
  if (n < trial.operations.size()) return trial.operations[n];  // decided for another rank
  const int64_t steps = trial.record.value("steps_completed", int64_t{0});
  Json answer = Json::object();
  if (trial.closed || trial.stop_requested) {
    answer["done"] = true;
  } else if (trial.target > trial.validated_target || trial.target > steps) {
    answer["length"] = trial.target;
  } else {
    // The searcher has not decided yet (the rung is not full, no promotion yet): the trial
    // has checkpointed at this decision point, so it exits and frees its slot (SPEC §3); a
    // promotion later resumes it from that checkpoint.
    answer["done"] = true;
    trial.released = true;
  }
  // The ranks of a data-parallel trial all get this answer for their n-th request.
  if (trial.world_size() > 1) trial.operations.push_back(answer);
  return answer;
}

void Coordinator::answer_pending_operation(Trial& trial) {
  if (!trial.pending_operation_seq) return;
  Rank& chief = trial.chief();
  auto it = connections_.find(chief.connection_fd);
  if (it == connections_.end()) {
    trial.pending_operation_seq.reset();
    return;
  }
  Json answer{{"type", "operation"}, {"re", *trial.pending_operation_seq}};
  const size_t n = chief.operations_asked;
  const bool decided_now = n >= trial.operations.size();
  answer.update(operation_answer(trial, n));
  if (trial.world_size() > 1) ++chief.operations_asked;
  trial.pending_operation_seq.reset();
  if (trial.world_size() > 1 && withhold_operation_if_testing(decided_now, n)) return;  // tests
  reply(*it->second, std::move(answer));
  answer_deferred_operations(trial);
}

bool Coordinator::decides_operations(const Trial& trial) const {
  // Not "connected": a rank 0 that is slow to start (connected after the others asked) must
  // still decide, or the others would make operations of their own, one after another, which
  // rank 0 then had to run through (the same length each time).
  return !trial.chief().left;
}

void Coordinator::answer_rank_operation(Trial& trial, Rank& rank, ControlConnection& conn,
                                        int64_t seq) {
  Json answer{{"type", "operation"}, {"re", seq}};
  const size_t n = rank.operations_asked++;
  const bool decided_now = n >= trial.operations.size();
  answer.update(operation_answer(trial, n));
  if (withhold_operation_if_testing(decided_now, n)) return;  // tests only (one_answer_hook.h)
  reply(conn, std::move(answer));
}

void Coordinator::answer_deferred_operations(Trial& trial) {
  for (Rank& rank : trial.ranks) {
    if (!rank.deferred_operation_seq) continue;
    if (rank.operations_asked >= trial.operations.size() && decides_operations(trial)) continue;
    const int64_t seq = *rank.deferred_operation_seq;
    rank.deferred_operation_seq.reset();
    auto it = connections_.find(rank.connection_fd);
    if (it != connections_.end()) answer_rank_operation(trial, rank, *it->second, seq);
  }
}

void Coordinator::handle_next_operation(Trial& trial, ControlConnection& conn, const Json& msg) {
  if (conn.rank == 0) {
    trial.pending_operation_seq = msg.value("seq", int64_t{0});
    answer_pending_operation(trial);
    return;
  }
  Rank& rank = trial.ranks[static_cast<size_t>(conn.rank)];
  const int64_t seq = msg.value("seq", int64_t{0});
  // Only rank 0's request decides a new operation. Rank 0 asks once its validation of the
  // last one is acknowledged, so stored; another rank may ask before that validation has even
  // arrived, and deciding then would give the gang the same length again (an operation of no
  // steps, validated a second time). Its request waits for rank 0's, also before rank 0 has
  // connected, unless rank 0 has left (its connection closed, or it ended: then it is decided
  // here, as before).
  if (rank.operations_asked >= trial.operations.size() && decides_operations(trial)) {
    rank.deferred_operation_seq = seq;
    return;
  }
  answer_rank_operation(trial, rank, conn, seq);
}

void Coordinator::handle_training(Trial& trial, ControlConnection& conn, const Json& msg) {
  // Only a client that does not put "type" first gets here (see handle_line).
  if (!msg.contains("reports") || !msg["reports"].is_array()) return;
  tell_dropped_metrics(
      conn, store_training_batch(trial, msg.dump(-1, ' ', false, Json::error_handler_t::replace)));
}

std::optional<double> Coordinator::note_validation(Trial& trial, int64_t step,
                                                   const Json& metrics) {
  const std::string& name = config_.searcher.metric;
  std::optional<double> value = finite_metric(metrics, name);
  if (!value) {
    log_output(trial, "cairn: warning: validation at step " + std::to_string(step) +
                          " has no finite '" + name +
                          "'; the searcher counts it as the worst value\n");
  } else {
    const Json& best = trial.record["best_validation"];
    std::optional<double> old = best.is_object() ? finite_metric(best, name) : std::nullopt;
    if (!old || MetricOrder(config_.searcher.smaller_is_better).better(*value, *old)) {
      trial.record["best_validation"] = metrics;
      trial.record["best_validation_step"] = step;
      notify_best(trial, *value);
    }
  }
  // A checkpoint taken at this step gets the metrics it was validated with.
  if (trial.latest_checkpoint_step == step && trial.record["latest_checkpoint"].is_string()) {
    const std::string id = trial.record["latest_checkpoint"].get<std::string>();
    auto ckpt = db_->get_json(schema::checkpoint_key(id));
    if (ckpt.ok() && ckpt->has_value()) {
      Json record = **ckpt;
      record["metrics"] = metrics;
      batch_.put_json(schema::checkpoint_key(id), record);
    }
  }
  return value;
}

void Coordinator::handle_validation(Trial& trial, ControlConnection& conn, const Json& msg) {
  if (!is_step(msg) || !msg.contains("metrics") || !msg["metrics"].is_object()) {
    reply(conn, Json{{"type", "error"},
                     {"re", msg.value("seq", 0)},
                     {"message", "validation needs step and metrics"}});
    return;
  }
  // Refused whole, not stored in part: the client is waiting for this answer and can say so.
  if (std::vector<std::string> bad = non_numeric_metrics(msg["metrics"]); !bad.empty()) {
    std::string message = "validation metric values must be numbers: ";
    for (size_t i = 0; i < bad.size(); ++i) message += (i ? ", " : "") + bad[i];
    reply(conn, Json{{"type", "error"}, {"re", msg.value("seq", 0)}, {"message", message}});
    return;
  }
  const int64_t step = msg["step"].get<int64_t>();
  const Json& metrics = msg["metrics"];
  batch_.put_json(schema::metric_key(trial.index, schema::MetricKind::kValidation, step), metrics);
  batch_needs_sync_ = true;
  trial.record["steps_completed"] =
      std::max(step, trial.record.value("steps_completed", int64_t{0}));
  trial.record["latest_validation"] = Json{{"step", step}, {"metrics", metrics}};
  mark_dirty(trial);

  const std::optional<double> value = note_validation(trial, step, metrics);
  record_event(schema::EventType::kValidation,
               {{"trial", trial.index}, {"step", step}, {"metrics", metrics}});
  reply(conn, Json{{"type", "ack"}, {"re", msg.value("seq", 0)}});

  const int64_t reached = searcher_progress(config_.searcher.time_metric, step, metrics);
  if (reached >= trial.target && trial.validated_target < trial.target) {
    trial.validated_target = trial.target;
    const double m = value ? *value : MetricOrder(config_.searcher.smaller_is_better).worst();
    // What the searcher is told is logged with the decisions it leads to (same batch), so a
    // resumed coordinator rebuilds the searcher by replaying exactly these calls.
    record_event(schema::EventType::kSearcherValidation,
                 {{"trial", trial.index},
                  {"length", trial.target},
                  {"metric", value ? Json(*value) : Json(nullptr)}});
    apply(searcher_->on_validation(trial.index, trial.target, m));
    if (!config_.searcher.time_metric.empty()) stop_at_rung(trial, reached);
  }
}

void Coordinator::handle_checkpoint_begin(Trial& trial, ControlConnection& conn, const Json& msg) {
  if (remote_checkpoint_begin(trial, conn, msg)) return;  // staged on the rank's agent
  auto dir = make_unique_dir(store_.staging(), trial_id(trial.index) + "-");
  if (!dir.ok()) {
    reply(
        conn,
        Json{{"type", "error"}, {"re", msg.value("seq", 0)}, {"message", dir.status().message()}});
    return;
  }
  trial.staging_dirs.insert(dir->string());
  reply(conn,
        Json{{"type", "checkpoint_dir"}, {"re", msg.value("seq", 0)}, {"path", dir->string()}});
}

void Coordinator::handle_checkpoint_end(Trial& trial, ControlConnection& conn, const Json& msg) {
  if (remote_checkpoint_end(trial, conn, msg)) return;  // fetched from the rank's agent
  const Json seq = msg.value("seq", Json(0));
  const std::string path = msg.value("path", "");
  if (!trial.staging_dirs.count(path) || !is_step(msg)) {
    reply(conn, Json{{"type", "error"},
                     {"re", seq},
                     {"message", "checkpoint_end for a directory cairn did not hand out"}});
    return;
  }
  trial.staging_dirs.erase(path);
  const int64_t step = msg["step"].get<int64_t>();
  uint64_t new_bytes = 0;
  auto manifest = ingest_checkpoint_dir(objects_, path, {trial_id(trial.index), step}, &new_bytes,
                                        /*remove_staging=*/false);
  if (manifest.ok()) staging_to_remove_.push_back(path);  // once the record is durable
  if (!manifest.ok()) {
    std::error_code ec;
    fs::remove_all(path, ec);
    log_output(trial, "cairn: error: checkpoint at step " + std::to_string(step) +
                          " was not saved: " + manifest.status().message() + "\n");
    record_event(schema::EventType::kCheckpointFailed,
                 {{"trial", trial.index}, {"step", step}, {"error", manifest.status().message()}});
    reply(conn, Json{{"type", "error"}, {"re", seq}, {"message", manifest.status().message()}});
    return;
  }
  register_checkpoint(trial, *manifest, step, new_bytes, msg.value("metadata", Json::object()));
  reply(conn, Json{{"type", "ack"}, {"re", seq}, {"checkpoint", manifest->id}});
}

void Coordinator::register_checkpoint(Trial& trial, const CheckpointManifest& manifest,
                                      int64_t step, uint64_t new_bytes, const Json& metadata) {
  Json record{
      {"id", manifest.id},       {"trial", trial_id(trial.index)}, {"trial_index", trial.index},
      {"steps_completed", step}, {"metrics", Json::object()},      {"bytes", manifest.bytes},
      {"new_bytes", new_bytes},  {"files", manifest.files.size()}, {"metadata", metadata}};
  if (trial.record.contains("latest_validation") &&
      trial.record["latest_validation"].value("step", int64_t{-1}) == step)
    record["metrics"] = trial.record["latest_validation"]["metrics"];
  batch_.put_json(schema::checkpoint_key(manifest.id), record);
  batch_has_checkpoint_ = true;
  trial.record["latest_checkpoint"] = manifest.id;
  trial.record["steps_completed"] =
      std::max(step, trial.record.value("steps_completed", int64_t{0}));
  trial.latest_checkpoint_step = step;
  trial.failures_in_a_row = 0;
  retention_due_ = true;
  mark_dirty(trial);
  record_event(schema::EventType::kCheckpoint,
               {{"trial", trial.index}, {"step", step}, {"checkpoint", manifest.id}});
  // Clones waiting for this checkpoint of their parent (pbt) can start from it.
  for (Trial* child : live_trials())
    if (child->record.contains("parent") && !child->record.contains("parent_checkpoint"))
      resolve_parent_checkpoint(*child);
}

void Coordinator::resolve_parent_checkpoint(Trial& child) {
  const Json& parent = child.record["parent"];
  Trial* from = trial_by_index(parent.value("index", int64_t{0}));
  const int64_t step = parent.value("step", int64_t{0});
  if (!from || from->latest_checkpoint_step != step ||
      !from->record["latest_checkpoint"].is_string())
    return;
  child.record["parent_checkpoint"] = from->record["latest_checkpoint"];
  mark_dirty(child);
}

bool Coordinator::parent_checkpoint_ready(Trial& child) {
  if (!child.record.contains("parent") || child.record.contains("parent_checkpoint")) return true;
  const Json& parent = child.record["parent"];
  const Trial* from = trial_by_index(parent.value("index", int64_t{0}));
  // The parent checkpoints at every decision point; until it has at the step the clone was
  // made at, the clone waits. A parent that ended without it (it failed past its restarts)
  // leaves the clone its newest checkpoint from before that step, or none.
  const int64_t step = parent.value("step", int64_t{0});
  if (from && !from->finished && from->latest_checkpoint_step <= step) return false;
  // Past it (a resumed coordinator: the parent trained on before the clone started), or
  // ended: the parent's newest registered checkpoint at or before the step, from the store.
  std::optional<std::pair<int64_t, std::string>> found;
  (void)db_->scan(schema::kCheckpointPrefix, [&](std::string_view, std::string_view value) {
    const Json c = Json::parse(value, nullptr, false);
    if (c.is_object() && c.value("trial_index", Json()) == parent.value("index", Json()) &&
        c.value("steps_completed", Json()).is_number_integer() &&
        c.value("id", Json()).is_string() && schema::checkpoint_is_kept(c)) {
      const int64_t s = c["steps_completed"].get<int64_t>();
      if (s <= step && (!found || s > found->first)) found.emplace(s, c["id"].get<std::string>());
    }
    return true;
  });
  if (found)
    child.record["parent_checkpoint"] = found->second;
  else
    terminal_.warn("warning: trial " + trial_id(child.index) + ": its parent " +
                   parent.value("trial", std::string("?")) + " left no checkpoint at step " +
                   std::to_string(step) + "; it starts from scratch");
  child.record["parent_checkpoint"] = child.record.value("parent_checkpoint", Json(nullptr));
  mark_dirty(child);
  return true;
}

void Coordinator::handle_checkpoint_abort(Trial& trial, const Json& msg) {
  if (remote_checkpoint_abort(trial, msg)) return;
  const std::string path = msg.value("path", "");
  if (!trial.staging_dirs.count(path)) return;
  trial.staging_dirs.erase(path);
  std::error_code ec;
  fs::remove_all(path, ec);
}

}  // namespace cairn
