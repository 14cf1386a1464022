// The coordinator's side of trial processes: starting them (with the environment of
// SPEC §4 and the checkpoint to resume from), capturing their output, and turning their
// exits into states and restarts.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>

#include "common/embedded.h"
#include "common/exit_status.h"
#include "common/file_util.h"
#include "engine/config/config.h"
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/determined_package.h"
#include "engine/coordinator/lost_before_start.h"
#include "engine/coordinator/rank_environment.h"
#include "engine/coordinator/rank_interfaces.h"
#include "engine/coordinator/trial_blas_core.h"
#include "engine/coordinator/trial_state.h"
#include "store/checkpoint_files.h"
#include "store/retention.h"
#include "store/schema.h"
#include "store/stored_records.h"
#include "store/trial_numbers.h"

namespace cairn {
namespace fs = std::filesystem;
using schema::TrialState;

namespace {

// A TCP port nobody listens on now, for MASTER_PORT: the kernel picks it. Another process
// could take it before rank 0 binds it, as with torchrun's own choice; rare, and a failed
// rendezvous is an ordinary trial failure that is retried.
std::optional<int> free_tcp_port() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return std::nullopt;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return std::nullopt;
  return ntohs(addr.sin_port);
}

// Writes the embedded Python SDK where PYTHONPATH will point, unless it is already there.
// `verified` is the file's stamp when its content last matched; while the stamp is
// unchanged the file is not read again (every trial start asks).
template <typename Stamp>
Result<fs::path> write_python_sdk(const StoreLayout& store, Stamp& verified) {
  const fs::path dir = store.sdk() / "python";
  const fs::path file = dir / "cairn.py";
  auto stamp_of = [&file]() {
    Stamp s;
    struct stat st {};
    if (::stat(file.c_str(), &st) == 0) {
      s.size = static_cast<int64_t>(st.st_size);
      s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    }
    return s;
  };
  if (verified.size >= 0 && stamp_of() == verified) return dir;
  if (Status st = write_determined_package(dir); !st.ok()) return st;
  auto existing = read_file(file);
  if (!existing.ok() || *existing != kPythonSdkSource) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return Status::Io("cannot create " + dir.string() + ": " + ec.message());
    Status st = write_file_atomic(file, kPythonSdkSource);
    if (!st.ok()) return st;
  }
  verified = stamp_of();
  return dir;
}

}  // namespace

Status Coordinator::restore_latest_checkpoint(Trial& trial, TrialEnvironment& env) {
  // Newest first: a corrupt checkpoint is reported and the one before it is used. Of two
  // checkpoints of one step (the trial saved the step twice) the one registered last is the
  // trial's latest; the others of that step are older states of it. The order is
  // retention's "latest" (store/retention.h), so keep_trial_latest keeps what a restart
  // resumes from.
  const Json& latest_json = trial.record["latest_checkpoint"];
  const std::string latest = latest_json.is_string() ? latest_json.get<std::string>() : "";
  std::vector<std::pair<CheckpointSummary, Json>> candidates;
  Status scan = db_->scan(schema::kCheckpointPrefix, [&](std::string_view, std::string_view value) {
    Json j = Json::parse(value, nullptr, false);
    // A record without the fields a restore needs is not a checkpoint to resume from.
    const bool usable = j.is_object() && j.contains("id") && j["id"].is_string() &&
                        j.contains("trial_index") && j["trial_index"].is_number_integer() &&
                        j.value("steps_completed", Json(0)).is_number_integer();
    if (usable && j["trial_index"].get<int64_t>() == trial.index && !j.value("corrupt", false) &&
        schema::checkpoint_is_kept(j)) {
      CheckpointSummary summary = CheckpointSummary::from_record(j);
      summary.registered_last = summary.id == latest;
      candidates.emplace_back(std::move(summary), std::move(j));
    }
    return true;
  });
  if (!scan.ok()) return scan;
  std::sort(candidates.begin(), candidates.end(),
            [](const auto& a, const auto& b) { return newer_checkpoint(a.first, b.first); });
  const fs::path dest =
      store_.trial_work(experiment_["id"].get<int64_t>(), trial.index) / "restore";
  std::error_code ec;
  fs::remove_all(dest, ec);
  for (auto& [summary, ckpt] : candidates) {
    const std::string id = ckpt["id"].get<std::string>();
    Status st = restore_checkpoint(trial, id, ckpt.value("steps_completed", int64_t{0}), dest, env);
    if (st.ok()) return st;
    if (st.kind() != ErrorKind::kCorrupt) return st;
    terminal_.warn("warning: trial " + trial_id(trial.index) + ": " + st.message() +
                   "; falling back to the previous checkpoint");
    ckpt["corrupt"] = true;
    batch_.put_json(schema::checkpoint_key(id), ckpt);
    record_event(schema::EventType::kCheckpointCorrupt,
                 {{"trial", trial.index}, {"checkpoint", id}});
  }
  return restore_parent_checkpoint(trial, dest, env);
}

Status Coordinator::restore_parent_checkpoint(Trial& trial, const fs::path& dest,
                                              TrialEnvironment& env) {
  // A clone (pbt) with no checkpoint of its own starts from its parent's: the same content,
  // read from the object store; nothing is copied in the store. So does every trial of a
  // warm-started experiment (Determined's searcher.source_*, docs/determined.md), from the
  // checkpoint recorded when the experiment was created (the store keeps it while the
  // experiment exists: store/garbage_collector.h).
  Json parent = trial.record.value("parent_checkpoint", Json());
  if (!parent.is_string() && experiment_.contains("warm_start"))
    parent = experiment_["warm_start"].value("checkpoint", Json());
  if (!parent.is_string()) return Status::Ok();
  const std::string id = parent.get<std::string>();
  auto record = db_->get_json(schema::checkpoint_key(id));
  // A `reproduce` re-run of a clone: the checkpoint's record is in the original experiment,
  // and its step was copied into the trial's record (adopt_replayed_parent()).
  const Json steps = record.ok() && record->has_value()
                         ? (**record).value("steps_completed", Json(0))
                         : trial.record.value("parent_checkpoint_step", Json(0));
  Status st = restore_checkpoint(trial, id, steps.is_number_integer() ? steps.get<int64_t>() : 0,
                                 dest, env);
  if (st.ok() || st.kind() != ErrorKind::kCorrupt) return st;
  terminal_.warn("warning: trial " + trial_id(trial.index) + ": its parent's checkpoint " +
                 id.substr(0, 12) + " is unusable (" + st.message() + "); it starts from scratch");
  return Status::Ok();
}

Status Coordinator::restore_checkpoint(Trial& trial, const std::string& id, int64_t steps,
                                       const fs::path& dest, TrialEnvironment& env) {
  auto manifest = load_manifest(objects_, id);
  Status st = manifest.ok() ? materialize_checkpoint(objects_, *manifest, dest) : manifest.status();
  if (!st.ok()) return st;
  env.restored_checkpoint = dest;
  env.steps_completed = steps;
  trial.record["restored_checkpoint"] = id;
  return Status::Ok();
}

Result<TrialEnvironment> Coordinator::trial_environment(Trial& trial) {
  auto sdk_dir = write_python_sdk(store_, python_sdk_verified_);
  if (!sdk_dir.ok()) return sdk_dir.status();
  const int64_t exp_id = experiment_["id"].get<int64_t>();
  TrialEnvironment env;
  env.inherited = current_environment();
  env.configured = config_.environment;
  // Determined's `data:` map, for det.get_cluster_info().user_data (docs/determined.md).
  if (!config_.user_data.is_null()) env.configured["CAIRN_USER_DATA"] = config_.user_data.dump();
  env.experiment_id = exp_id;
  env.trial_id = trial_id(trial.index);
  env.workdir = config_.workdir;
  env.hparams_json = trial.record["hparams"].dump();
  env.seed = trial.record["seed"].get<uint64_t>();
  env.control_address = listener_->address();
  env.deterministic = config_.reproducibility.deterministic;
  env.checkpoint_period = config_.checkpoint.period;
  env.max_length = config_.searcher.max_length;
  env.orphan_dir = store_.trial_work(exp_id, trial.index) / "orphans";
  if (is_builtin_entrypoint(config_)) env.kernel_cache = store_.kernel_cache();
  env.python_sdk_dir = *sdk_dir;
  // The trial's store-wide number (store/trial_numbers.h), given at its first start.
  if (!trial.record["number"].is_number_integer()) {
    auto number = allocate_trial_number(store_);
    if (!number.ok()) return number.status();
    trial.record["number"] = *number;
  }
  env.trial_number = trial.record["number"].get<int64_t>();
  env.searcher_metric = config_.searcher.metric;
  env.smaller_is_better = config_.searcher.smaller_is_better;
  env.world_size = config_.resources.slots_per_trial;
  env.master_port =
      free_tcp_port().value_or(static_cast<int>(29500 + (exp_id * 131 + trial.index) % 20000));
  env.gpu_slots = gpu_slots_;
  env.gpu_names = gpu_names_;
  env.cpu_only = config_.resources.devices == "cpu";
  // The OpenBLAS kernels, decided once for all ranks (engine/coordinator/trial_blas_core.h).
  env.blas = choose_trial_blas_core(config_, experiment_, trial.record, env);
  if (!env.blas.warning.empty())
    terminal_.warn("warning: trial " + trial_id(trial.index) + ": " + env.blas.warning);
  Status restored = restore_latest_checkpoint(trial, env);
  if (!restored.ok()) return restored;
  return env;
}

Status Coordinator::start_trial(Trial& trial) {
  // A failure report shows the last lines of this attempt only: earlier attempts' lines
  // were shown when they failed, and repeating them buries the new error.
  for (Rank& rank : trial.ranks) rank.tail.clear();
  trial.log_policy_matched.clear();
  // Each agent is asked whether it has the data before a trial is placed there (its
  // data_check, Launcher::check_run): one that lacks it is left out before any start is
  // spent on it, and the trial waits for other slots unless none can ever hold it.
  bool left_out = false;
  for (int m = 1; m < launcher_->size(); ++m) {
    if (machines_refusing_.count(m)) continue;
    if (Status can = launcher_->at(m).check_run(); !can.ok()) {
      if (!exclude_refusing_machine(m)) return can;
      left_out = true;
    }
  }
  auto env = trial_environment(trial);
  if (!env.ok()) return env.status();
  auto places =
      slots_->acquire(trial.index, config_.resources.slots_per_trial, preferred_machines(trial));
  if (!places && left_out) return Status::Ok();        // waits for the slots that are left
  if (!places) return Status::Failed("no free slot");  // schedule() checks first
  trial.reset_attempt();
  // Every start is a new attempt, counted across resumes (the record keeps it).
  trial.record["attempts"] = trial.record.value("attempts", int64_t{0}) + 1;
  env->attempt = trial.record["attempts"].get<int64_t>();
  env->slots.clear();
  env->machines.clear();
  for (size_t r = 0; r < places->size(); ++r) {
    env->slots.push_back((*places)[r].slot);
    env->machines.push_back((*places)[r].machine);
    if (r < trial.ranks.size()) trial.ranks[r].machine = (*places)[r].machine;
    machines_used_.insert((*places)[r].machine);
  }
  for (size_t m = 1; m < machines_.size(); ++m)
    if (!machines_[m].gpu_names.empty())
      env->peer_gpu_names[static_cast<int>(m)] = machines_[m].gpu_names;
  env->master_addr = master_address(*places);
  // An agent lost since its slots were chosen is a machine loss, not the trial's failure: the
  // trial waits for other slots, not counted against max_restarts (lost_before_start.h).
  const auto is_lost = [this](int m) { return launcher_->lost(m); };
  const auto requeue_if_lost = [&](const Status& why) {
    const std::vector<int> lost = lost_machines(*places, is_lost);
    if (lost.empty()) return false;
    watch_machines();  // says so, takes its slots out, and tries it again later
    terminal_.warn("trial " + trial_id(trial.index) + ": agent " +
                   machines_[static_cast<size_t>(lost.front())].address +
                   " was lost before the trial started there (" + why.message() +
                   "); it starts on other slots (not counted against max_restarts)");
    return true;
  };
  if (Status reach = check_rendezvous(*places, env->master_addr, &env->master_port); !reach.ok()) {
    slots_->release(trial.index);
    if (requeue_if_lost(reach)) return Status::Ok();
    return reach;
  }
  trial.record["slots"] = env->slots;
  trial.record["placement"] = placement_json(*places);
  wait_for_loss_if_testing(*places, is_lost, [&](int m) {
    terminal_.note("test hook: trial " + trial_id(trial.index) + " placed on " +
                   machines_[static_cast<size_t>(m)].address + "; waiting until it is lost");
  });
  Status started = start_ranks(trial, *env);
  if (!started.ok()) {
    slots_->release(trial.index);
    // A machine that cannot run this experiment (its data differs, say) is left out, and the
    // trial waits for other slots, unless no other machine can ever hold it.
    if (exclude_refusing_machine(trial.chief().machine)) return Status::Ok();
    if (requeue_if_lost(started)) return Status::Ok();
    return started;
  }
  trial.attempt_running = true;
  trial.last_heard = Clock::now();
  trial.released = false;
  trial.stop_requested = pausing_;
  record_start(trial);
  const std::string from =
      env->restored_checkpoint
          ? " from checkpoint " +
                trial.record["restored_checkpoint"].get<std::string>().substr(0, 12) + " (" +
                std::to_string(env->steps_completed) + " units done)"
          : "";
  terminal_.note("trial " + trial_id(trial.index) + " started " + where_started(trial) + from);
  return Status::Ok();
}

Status Coordinator::start_ranks(Trial& trial, const TrialEnvironment& env) {
  RankLaunch launch;
  launch.cwd = run_dir_;
  launch.source = run_source_;
  launch.argv = is_builtin_entrypoint(config_)
                    ? std::vector<std::string>{options_.self_executable, "__builtin-mlp"}
                    : config_.entrypoint;
  launch.self_program = is_builtin_entrypoint(config_);
  // A local rank's output file is made by its launch (its stdout); a remote rank's when its
  // first byte arrives (launcher.h take_new_outputs), so a trial of the agents alone that
  // prints nothing makes no directory here.
  if (std::any_of(trial.ranks.begin(), trial.ranks.end(),
                  [](const Rank& r) { return r.machine == 0; })) {
    std::error_code ec;
    fs::create_directories(trial.chief().output_file.parent_path(), ec);
  }
  for (Rank& rank : trial.ranks) {
    launch.env = rank_environment(env, rank.rank);
    launch.output = rank.output_file;
    launch.machine = rank.machine;
    // Which interface the rank's collectives bind (rank_interfaces.h): this machine's is
    // decided here; another's by its agent, so cairn's own setting, which names one of this
    // machine's interfaces, is not sent there (a config's `environment:` is).
    for (const char* name : kCollectiveInterfaceVariables)
      if (rank.machine != 0 && !env.configured.count(name)) launch.env.erase(name);
    if (rank.machine == 0) {
      Status routed = set_collective_interfaces(launch.env);
      if (!routed.ok())
        terminal_.warn("warning: trial " + trial_id(trial.index) + ": rank " +
                       std::to_string(rank.rank) + ": " + routed.message());
    }
    // Output files are opened for appending: what this attempt writes begins at the file's
    // end as it is before the start (measured after it, the first bytes could be past it).
    // From where the last read stopped, so that what is past it (written after the previous
    // attempt's last read) is read first; but never past the end: a file removed or
    // truncated since (someone cleaned .cairn/work) would hide this attempt's first bytes.
    std::error_code size_ec;
    const uint64_t size = fs::file_size(rank.output_file, size_ec);
    const uint64_t offset = std::min(trial.record.value(output_offset_field(rank.rank), UINT64_MAX),
                                     size_ec ? uint64_t{0} : size);
    auto started = launcher_->start(launch);
    if (!started.ok()) {
      if (rank.rank == 0) return started.status();  // nothing runs: the start failed
      // The gang cannot start: stop the ranks already running. On a machine lost since its
      // placement, that is the machine's loss, not the trial's (lost_before_start.h).
      trial.outcome.start_failed(rank.rank);
      if (launcher_->lost(rank.machine)) trial.machine_lost = true;
      terminal_.warn("trial " + trial_id(trial.index) + ": rank " + std::to_string(rank.rank) +
                     " did not start: " + started.status().message());
      signal_ranks(trial, SIGKILL);
      break;
    }
    rank.process = *started;
    Status followed =
        output_->follow(rank_output_key(trial.index, rank.rank), rank.output_file, offset);
    if (!followed.ok()) terminal_.warn("warning: " + followed.message());
  }
  return Status::Ok();
}

void Coordinator::record_start(Trial& trial) {
  const LaunchedRank& chief = *trial.chief().process;
  trial.record["pid"] = chief.pid;
  trial.record["process_start_time"] = chief.start_time;
  if (trial.world_size() > 1) {
    // With their start times, so that a resume can tell the ranks from recycled pids.
    Json pids = Json::array(), starts = Json::array();
    for (const Rank& r : trial.ranks) {
      pids.push_back(r.process ? r.process->pid : 0);
      starts.push_back(r.process ? r.process->start_time : 0);
    }
    trial.record["rank_pids"] = pids;
    trial.record["rank_start_times"] = starts;
  } else {
    trial.record.erase("rank_pids");
    trial.record.erase("rank_start_times");
  }
  trial.record["boot_id"] = boot_id();
  trial.record.erase("exit");
  set_trial_state(trial, TrialState::kRunning);
  record_event(
      schema::EventType::kTrialStarted,
      {{"trial", trial.index}, {"pid", chief.pid}, {"placement", trial.record["placement"]}});
}

void Coordinator::log_output(Trial& trial, std::string_view chunk) {
  log_rank_output(trial, trial.chief(), chunk);
}

void Coordinator::log_rank_output(Trial& trial, Rank& rank, std::string_view chunk) {
  trial.last_heard = Clock::now();
  batch_.put(schema::log_key(trial.index, rank.rank, ++rank.log_seq), chunk);
  rank.partial_line.append(chunk);
  const std::string prefix =
      trial_id(trial.index) + (rank.rank == 0 ? "" : ":" + std::to_string(rank.rank));
  size_t start = 0;
  for (size_t nl; (nl = rank.partial_line.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string line = rank.partial_line.substr(start, nl - start);
    terminal_.trial_line(prefix, line);
    if (trial.log_policy_matched.empty() && !log_policies_.empty())
      if (const LogPolicy* policy = log_policies_.cancels_retries(line))
        trial.log_policy_matched = policy->name.empty() ? policy->pattern : policy->name;
    keep_tail_line(rank.tail, std::move(line));
  }
  rank.partial_line.erase(0, start);
  trial.record[log_seq_field(rank.rank)] = rank.log_seq;
  mark_dirty(trial);
}

void Coordinator::drain_output(Trial& trial, Rank& rank, bool final) {
  const int64_t key = rank_output_key(trial.index, rank.rank);
  for (;;) {
    std::string_view chunk = output_->read_new(key);
    if (chunk.empty()) break;
    log_rank_output(trial, rank, chunk);
    // With the log, in one batch: a resumed coordinator reads on from here.
    trial.record[output_offset_field(rank.rank)] = output_->offset(key);
  }
  if (final) {
    if (!rank.partial_line.empty()) log_rank_output(trial, rank, "\n");
    output_->stop(key);
  }
}

void Coordinator::drain_output_key(int64_t key) {
  Trial* trial = trial_by_index(output_key_trial(key));
  if (!trial) return;
  const int rank = output_key_rank(key);
  if (rank < trial->world_size())
    drain_output(*trial, trial->ranks[static_cast<size_t>(rank)], false);
}

void Coordinator::follow_new_outputs() {
  for (const fs::path& file : launcher_->take_new_outputs())
    for (int64_t key : output_->attach(file)) drain_output_key(key);
}

void Coordinator::collect_exits() {
  for (const RankExit& ended : launcher_->take_exits()) {
    for (Trial* trial : live_trials()) {
      auto rank = std::find_if(trial->ranks.begin(), trial->ranks.end(), [&](const Rank& r) {
        return r.process && r.process->pid == ended.rank.pid;
      });
      if (rank == trial->ranks.end()) continue;
      if (ended.machine_lost) trial->machine_lost = true;
      drain_output(*trial, *rank, /*final=*/true);
      rank->process.reset();
      rank_exited(*trial, *rank, ended.info);
      break;
    }
  }
}

void Coordinator::signal_ranks(Trial& trial, int sig) {
  for (const Rank& rank : trial.ranks)
    if (rank.process && launcher_->signal(*rank.process, sig) && sig == SIGKILL)
      trial.outcome.killed_by_cairn(rank.rank);
}

bool Coordinator::declares_permanent(const ExitInfo& info) const {
  if (info.signal != 0 || info.code == 0) return false;
  if (is_builtin_entrypoint(config_) && info.code == kPermanentFailureExit) return true;
  const std::vector<int>& codes = config_.permanent_exit_codes;
  return std::find(codes.begin(), codes.end(), info.code) != codes.end();
}

void Coordinator::rank_exited(Trial& trial, Rank& rank, ExitInfo info) {
  rank.exit = info;
  if (rank.rank == 0 && !rank.left) {
    // The others' next_operation requests waiting for rank 0's are decided without it.
    rank.left = true;
    answer_deferred_operations(trial);
  }
  if (trial.world_size() > 1) {
    rank.wait.enter(RankCall::kExited, 0, "", Clock::now());
    // A rank that ended cleanly takes part in no more checkpoints: the others' may be whole.
    if (info.ok() && !trial.outcome.failed()) settle_checkpoint_rounds(trial);
  }
  const bool first_failure = trial.outcome.rank_ended(rank.rank, info, declares_permanent(info));
  // Gang semantics: the other ranks would wait forever in their next collective. Unless
  // cairn killed them itself and said why.
  if (first_failure && trial.world_size() > 1 && !trial.gang_fault) {
    // A rank of a lost agent is reported killed (the agent kills what it ran once its
    // coordinator is gone): say what happened, not the signal.
    const bool lost = trial.machine_lost && rank.machine > 0 &&
                      rank.machine < static_cast<int>(machines_.size()) &&
                      launcher_->lost(rank.machine);
    const std::string how =
        lost ? "was lost with agent " + machines_[static_cast<size_t>(rank.machine)].address
             : info.describe();
    log_output(trial, "cairn: rank " + std::to_string(rank.rank) + " " + how +
                          "; stopping the other ranks\n");
    signal_ranks(trial, SIGKILL);
  }
  if (!trial.gang_ended()) return;
  // Every rank has ended: so has the attempt.
  for (Rank& r : trial.ranks) {
    if (r.connection_fd >= 0) connections_.erase(r.connection_fd);
    r.connection_fd = -1;
  }
  const ExitInfo chief = trial.chief().exit.value_or(ExitInfo{127, 0});
  handle_exit(trial, trial.outcome.result(chief), trial.outcome.permanent());
}

void Coordinator::report_failure_tail(const Trial& trial) {
  const int failed = trial.outcome.failed() ? trial.outcome.failed_rank() : 0;
  const Rank& rank = trial.ranks[static_cast<size_t>(failed)];
  const std::string id = trial_id(trial.index);
  const std::string which = failed == 0 ? "its" : "rank " + std::to_string(failed) + "'s";
  const std::string logs = failed == 0 ? id : id + " --rank " + std::to_string(failed);
  if (rank.tail.empty()) {
    if (failed > 0)
      terminal_.warn("rank " + std::to_string(failed) + " failed and printed nothing");
    return;
  }
  terminal_.warn("last lines of " + which + " log (cairn logs " + logs + "):");
  for (const auto& line : rank.tail) terminal_.warn("  " + line);
}

AttemptEnd Coordinator::attempt_end_facts(const Trial& trial, const ExitInfo& info,
                                          bool permanent) const {
  AttemptEnd end;
  end.exit = info;
  end.permanent = permanent;
  end.canceling = canceling_;
  end.pausing = pausing_;
  end.closed = trial.closed;
  end.reached_max_length = trial.target >= config_.searcher.max_length;
  end.stop_requested = trial.stop_requested;
  end.own_length = config_.searcher.own_length || !config_.searcher.time_metric.empty();
  end.released = trial.validated_target >= trial.target || trial.released;
  end.promoted = trial.target > trial.validated_target;
  end.restarts = trial.record.value("restarts", 0);
  end.max_restarts = config_.max_restarts;
  end.failures_in_a_row = trial.failures_in_a_row;
  end.machine_lost = trial.machine_lost;
  end.log_policy = trial.log_policy_matched;
  end.retry_repeated_failures = config_.retry_repeated_failures;
  end.ever_reported = trial.reported_training ||
                      !trial.record.value("latest_validation", Json()).is_null() ||
                      !trial.record.value("latest_checkpoint", Json()).is_null() ||
                      trial.record.value("steps_completed", int64_t{0}) > 0;
  const Rank& failed = trial.ranks[trial.outcome.failed() ? trial.outcome.failed_rank() : 0];
  for (auto line = failed.tail.rbegin(); line != failed.tail.rend(); ++line)
    if (line->find_first_not_of(" \t\r") != std::string::npos) {
      end.last_line = *line;
      break;
    }
  // Stored with the trial, so a resume goes on comparing where the last process stopped.
  if (const Json line = trial.record.value("previous_failure_line", Json()); line.is_string())
    end.previous_failure_line = line.get<std::string>();
  return end;
}

std::string Coordinator::failure_reason(const Trial& trial, const ExitInfo& info,
                                        const std::optional<std::string>& fault) const {
  if (fault) return *fault;
  if (info.ok())
    return "exited with status 0 before finishing its work (" +
           std::to_string(trial.record.value("steps_completed", int64_t{0})) + " of " +
           std::to_string(trial.target) + " units)";
  // In a gang, which rank failed is half of the story (its lines follow).
  const int failed = trial.outcome.failed() ? trial.outcome.failed_rank() : 0;
  return (failed > 0 ? "rank " + std::to_string(failed) + " " : std::string()) + info.describe();
}

void Coordinator::handle_exit(Trial& trial, ExitInfo info, bool permanent) {
  trial.attempt_running = false;
  slots_->release(trial.index);
  // cairn killed it (liveness_timeout; a deadlock, rank_wait_timeout): that is the failure,
  // whatever the ranks' exit statuses say.
  const std::optional<std::string> fault = std::exchange(trial.gang_fault, std::nullopt);
  if (std::exchange(trial.liveness_killed, false) || fault) info = ExitInfo{0, SIGKILL};
  trial.pending_operation_seq.reset();
  std::error_code ec;
  for (const auto& dir : trial.staging_dirs) fs::remove_all(dir, ec);
  trial.staging_dirs.clear();
  trial.record["exit"] = {
      {"code", info.code}, {"signal", info.signal}, {"description", info.describe()}};
  trial.record["ended_at"] = Json(nullptr);
  mark_dirty(trial);
  record_event(schema::EventType::kTrialExited,
               {{"trial", trial.index}, {"code", info.code}, {"signal", info.signal}});
  const AttemptEnd facts = attempt_end_facts(trial, info, permanent);
  const AttemptDecision decision = decide_attempt_end(facts);
  if (const auto line = repeated_failure_line(facts))
    trial.record["previous_failure_line"] = *line;
  else
    trial.record.erase("previous_failure_line");
  const std::string id = trial_id(trial.index);
  const std::string why = failure_reason(trial, info, fault);
  set_trial_state(trial, decision.state);
  switch (decision.outcome) {
    case AttemptOutcome::kCanceled:
      trial.finished = true;
      break;
    case AttemptOutcome::kFinished:
      if (!info.ok())
        terminal_.warn("warning: trial " + id + " " + info.describe() +
                       " after its work was done; its results stand (the status is in its record)");
      trial.finished = true;
      terminal_.note("trial " + id +
                     (decision.state == TrialState::kCompleted ? " completed ("
                                                               : " stopped by the searcher (") +
                     std::to_string(trial.record.value("steps_completed", int64_t{0})) + " units)");
      break;
    case AttemptOutcome::kPaused:
      terminal_.note("trial " + id + " paused");
      break;
    case AttemptOutcome::kReleased:
      break;
    case AttemptOutcome::kStopping:
      terminal_.note("trial " + id + " stopped: " + why);
      break;
    case AttemptOutcome::kMachineLost:
      // Infrastructure, not the trial: restarted elsewhere at once, max_restarts untouched.
      record_event(schema::EventType::kTrialRestart,
                   {{"trial", trial.index},
                    {"restart", trial.record.value("restarts", 0)},
                    {"reason", "its machine was lost"},
                    {"counted", false}});
      terminal_.note("trial " + id +
                     " lost its machine; restarting it elsewhere from its latest checkpoint "
                     "(not counted against max_restarts)");
      break;
    case AttemptOutcome::kRestart:
    case AttemptOutcome::kError:
      report_failure(trial, info, permanent, why, decision);
      break;
  }
  if (decision.outcome == AttemptOutcome::kFinished || decision.outcome == AttemptOutcome::kError)
    close_in_searcher(trial);
}

void Coordinator::report_failure(Trial& trial, const ExitInfo& info, bool permanent,
                                 const std::string& why, const AttemptDecision& decision) {
  const std::string id = trial_id(trial.index);
  terminal_.warn("trial " + id + " failed: " + why);
  report_failure_tail(trial);
  // A trial that declared its failure permanent would fail the same way again.
  if (permanent && config_.max_restarts > 0)
    terminal_.note("trial " + id + " " + info.describe() +
                   ", a failure it declares permanent: not restarted");
  const std::string note = no_retry_note(decision.no_retry, trial.log_policy_matched);
  if (!note.empty()) terminal_.note("trial " + id + " not restarted: " + note);
  if (decision.outcome == AttemptOutcome::kError) {
    const std::string error = note.empty() ? why : why + "; not restarted: " + note;
    trial.record["error"] = error;
    trial.finished = true;
    notify_trial_error(trial, error);
    return;
  }
  const int restart = trial.record.value("restarts", 0) + 1;
  trial.record["restarts"] = restart;
  ++trial.failures_in_a_row;
  trial.not_before = Clock::now() + decision.backoff;
  record_event(schema::EventType::kTrialRestart,
               {{"trial", trial.index}, {"restart", restart}, {"reason", why}});
  terminal_.note("restarting trial " + id + " from its latest checkpoint in " +
                 std::to_string(decision.backoff.count()) + " s (restart " +
                 std::to_string(restart) + " of " + std::to_string(config_.max_restarts) + ")");
}

void Coordinator::request_stop(Trial& trial, const char* reason) {
  trial.stop_requested = true;
  for (const Rank& rank : trial.ranks) {
    auto it = connections_.find(rank.connection_fd);
    if (it == connections_.end()) continue;
    it->second->send(Json{{"type", "stop"}, {"reason", reason}});
    it->second->flush();
  }
  answer_pending_operation(trial);
}

void Coordinator::check_liveness() {
  if (config_.liveness_timeout <= 0) return;
  const auto limit = std::chrono::seconds(config_.liveness_timeout);
  for (Trial* trial : live_trials()) {
    const int64_t index = trial->index;
    if (!trial->running() || trial->liveness_killed || Clock::now() - trial->last_heard < limit)
      continue;
    terminal_.warn("trial " + trial_id(index) + " sent nothing for " +
                   std::to_string(config_.liveness_timeout) + " s (liveness_timeout): killing it");
    log_output(*trial, "cairn: error: no message or output for " +
                           std::to_string(config_.liveness_timeout) +
                           " s (liveness_timeout); the trial was killed\n");
    trial->liveness_killed = true;
    signal_ranks(*trial, SIGKILL);
  }
}

void Coordinator::cancel() {
  canceling_ = true;
  pausing_ = true;
  terminal_.note("canceling the experiment: stopping its trials");
  for (Trial* trial : live_trials()) {
    if (trial->running()) {
      signal_ranks(*trial, SIGKILL);
    } else if (!trial->finished) {
      trial->finished = true;
      set_trial_state(*trial, TrialState::kCanceled);
    }
  }
}

void Coordinator::handle_signal(int sig) {
  if (sig == SIGCHLD) {
    collect_exits();
    return;
  }
  if (sig == SIGUSR2) {
    cancel();
    return;
  }
  if (sig == SIGWINCH) {  // the terminal was resized: the status line is redrawn to fit
    terminal_.resized();
    return;
  }
  ++interrupts_;
  if (interrupts_ == 1) {
    pausing_ = true;
    // SIGTERM (shutdown, systemctl stop) and SIGHUP (terminal gone) are not the user's
    // decision to pause: the experiment stays ACTIVE, so `cairn resume --all` at boot
    // continues it. Ctrl-C and `cairn pause` (SIGINT) pause it deliberately.
    shutting_down_ = sig == SIGTERM || sig == SIGHUP;
    // A supervisor that sent SIGTERM (systemd, `timeout`, make) waits only so long: trials
    // that do not cooperate are killed after stop_grace_period, and cairn exits by itself
    // with the experiment resumable. Ctrl-C and `cairn pause` wait, as documented, since a
    // person is there to press Ctrl-C again.
    if (shutting_down_)
      stop_deadline_ = Clock::now() + std::chrono::seconds(config_.stop_grace_period);
    terminal_.note(
        shutting_down_
            ? "shutting down: trials checkpoint and exit (those still running in " +
                  std::to_string(config_.stop_grace_period) + " s are killed: stop_grace_period)"
            : "pausing: trials checkpoint and exit (press Ctrl-C again to stop at once)");
    for (Trial* trial : live_trials())
      if (trial->running()) request_stop(*trial, "pause");
    return;
  }
  terminal_.note("stopping at once");
  kill_running_trials();
}

void Coordinator::kill_running_trials() {
  for (Trial* trial : live_trials())
    if (trial->running()) signal_ranks(*trial, SIGKILL);
}

void Coordinator::enforce_stop_deadline() {
  if (!stop_deadline_ || Clock::now() < *stop_deadline_) return;
  stop_deadline_.reset();
  std::string running;
  for (const Trial* trial : live_trials())
    if (trial->running()) running += (running.empty() ? "" : ", ") + trial_id(trial->index);
  if (running.empty()) return;
  terminal_.note("stop_grace_period (" + std::to_string(config_.stop_grace_period) +
                 " s) passed: killing " + running +
                 ", still running; they resume from their latest checkpoints");
  kill_running_trials();
}

}  // namespace cairn
