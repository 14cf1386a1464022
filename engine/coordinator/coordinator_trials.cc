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
#include "engine/coordinator/trial_state.h"
#include "store/checkpoint_files.h"
#include "store/retention.h"
#include "store/schema.h"

namespace cairn {
namespace fs = std::filesystem;

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

Status Coordinator::restore_latest_checkpoint(Trial& trial,
                                              std::map<std::string, std::string>& env) {
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
    if (!j.is_discarded() && j.value("trial_index", int64_t{0}) == trial.index &&
        !j.value("corrupt", false) && schema::checkpoint_is_kept(j)) {
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
    auto manifest = load_manifest(objects_, id);
    Status st =
        manifest.ok() ? materialize_checkpoint(objects_, *manifest, dest) : manifest.status();
    if (st.ok()) {
      env["CAIRN_LATEST_CHECKPOINT"] = dest.string();
      env["CAIRN_STEPS_COMPLETED"] = std::to_string(ckpt["steps_completed"].get<int64_t>());
      trial.record["restored_checkpoint"] = id;
      return Status::Ok();
    }
    if (st.kind() != ErrorKind::kCorrupt) return st;
    terminal_.warn("warning: trial " + trial_id(trial.index) + ": " + st.message() +
                   "; falling back to the previous checkpoint");
    ckpt["corrupt"] = true;
    batch_.put_json(schema::checkpoint_key(id), ckpt);
    record_event("checkpoint_corrupt", {{"trial", trial.index}, {"checkpoint", id}});
  }
  env["CAIRN_STEPS_COMPLETED"] = "0";
  return Status::Ok();
}

Status Coordinator::start_trial(Trial& trial) {
  // A failure report shows the last lines of this attempt only: earlier attempts' lines
  // were shown when they failed, and repeating them buries the new error.
  trial.tail.clear();
  trial.failed_rank = 0;
  trial.failed_rank_tail.clear();
  auto sdk_dir = write_python_sdk(store_, python_sdk_verified_);
  if (!sdk_dir.ok()) return sdk_dir.status();

  std::map<std::string, std::string> env = current_environment();
  for (const auto& [k, v] : config_.environment) env[k] = v;
  const int64_t exp_id = experiment_["id"].get<int64_t>();
  env["CAIRN_EXPERIMENT_ID"] = std::to_string(exp_id);
  env["CAIRN_TRIAL_ID"] = trial_id(trial.index);
  // The live workdir, for trials that write outputs next to their code: they run in a
  // checkout of the snapshot (engine/coordinator/provenance.h), which is not where the user looks.
  env["CAIRN_WORKDIR"] = config_.workdir.string();
  env["CAIRN_HPARAMS"] = trial.record["hparams"].dump();
  env["CAIRN_SEED"] = std::to_string(trial.record["seed"].get<uint64_t>());
  env["CAIRN_CONTROL"] = listener_->address();
  env["CAIRN_DETERMINISTIC"] = config_.reproducibility.deterministic ? "1" : "0";
  env["CAIRN_CHECKPOINT_PERIOD"] = std::to_string(config_.checkpoint.period);
  env["CAIRN_MAX_LENGTH"] = std::to_string(config_.searcher.max_length);
  env["CAIRN_ORPHAN_DIR"] = (store_.trial_work(exp_id, trial.index) / "orphans").string();
  env.erase("CAIRN_LATEST_CHECKPOINT");
  // builtin:mlp keeps the GPU kernels it compiles there, so that the next trial, resume or
  // promotion loads them instead of compiling them again (gpu/kernel_cache.h).
  if (is_builtin_entrypoint(config_)) env["CAIRN_KERNEL_CACHE"] = store_.kernel_cache().string();
  // torchrun's variables (SPEC §4): every rank of a data-parallel trial on this machine.
  const int world = config_.resources.slots_per_trial;
  env["RANK"] = "0";
  env["LOCAL_RANK"] = "0";
  env["WORLD_SIZE"] = std::to_string(world);
  env["LOCAL_WORLD_SIZE"] = std::to_string(world);
  env["MASTER_ADDR"] = "127.0.0.1";
  env["MASTER_PORT"] = std::to_string(
      free_tcp_port().value_or(static_cast<int>(29500 + (exp_id * 131 + trial.index) % 20000)));
  auto pythonpath = env.find("PYTHONPATH");
  env["PYTHONPATH"] =
      sdk_dir->string() +
      (pythonpath != env.end() && !pythonpath->second.empty() ? ":" + pythonpath->second : "");
  if (config_.reproducibility.deterministic) {
    env.emplace("PYTHONHASHSEED", "0");
  }
  Status restored = restore_latest_checkpoint(trial, env);
  if (!restored.ok()) return restored;

  auto slots = slots_->acquire(trial.index, config_.resources.slots_per_trial);
  if (!slots) return Status::Failed("no free slot");  // schedule() checks first
  if (gpu_slots_) {
    // A single-process trial gets all of its GPUs; each rank of a data-parallel one, its own.
    env["CUDA_VISIBLE_DEVICES"] =
        world > 1 ? device_list({slots->front()}, gpu_names_) : device_list(*slots, gpu_names_);
  } else {
    if (config_.resources.devices == "cpu") env["CUDA_VISIBLE_DEVICES"] = "";
    // One core per slot by default, so concurrent trials do not oversubscribe the machine;
    // each rank of a data-parallel trial holds one slot.
    const std::string threads = std::to_string(world > 1 ? 1 : config_.resources.slots_per_trial);
    env.emplace("OMP_NUM_THREADS", threads);
    env.emplace("OPENBLAS_NUM_THREADS", threads);
  }
  trial.record["slots"] = *slots;

  ProcessSpec spec;
  spec.cwd = run_dir_;
  trial.output_file = store_.trial_work(exp_id, trial.index) / "output.log";
  spec.output = trial.output_file;
  std::error_code ec;
  fs::create_directories(trial.output_file.parent_path(), ec);
  // Output files are opened for appending: what this attempt writes begins at the file's
  // end as it is before the spawn (measured after it, the first bytes could be past it).
  auto size_now = [](const fs::path& file) {
    std::error_code size_ec;
    const uint64_t size = fs::file_size(file, size_ec);
    return size_ec ? uint64_t{0} : size;
  };
  // From where the last read stopped, so that what is past it (written after the previous
  // attempt's last read) is read first; but never past the end: a file removed or
  // truncated since (someone cleaned .cairn/work) would hide this attempt's first bytes.
  const uint64_t chief_offset =
      std::min(trial.record.value("output_offset", uint64_t{0}), size_now(trial.output_file));
  spec.env = std::move(env);
  spec.argv = is_builtin_entrypoint(config_)
                  ? std::vector<std::string>{options_.self_executable, "__builtin-mlp"}
                  : config_.entrypoint;
  auto process = TrialProcess::spawn(spec);
  if (!process.ok()) {
    slots_->release(trial.index);
    return process.status();
  }

  trial.process.emplace(std::move(*process));
  trial.reset_attempt();
  for (int rank = 1; rank < world; ++rank) {
    Worker worker;
    worker.rank = rank;
    ProcessSpec rank_spec = spec;
    rank_spec.env["RANK"] = rank_spec.env["LOCAL_RANK"] = std::to_string(rank);
    if (gpu_slots_)
      rank_spec.env["CUDA_VISIBLE_DEVICES"] = device_list({(*slots)[rank]}, gpu_names_);
    worker.output_file =
        store_.trial_work(exp_id, trial.index) / ("output.rank" + std::to_string(rank) + ".log");
    rank_spec.output = worker.output_file;
    worker.log_seq = trial.record.value("log_seq_rank" + std::to_string(rank), int64_t{0});
    // As the chief's (a record written before ranks' offsets were kept: the file's end).
    const uint64_t start = std::min(trial.record.value(worker_offset_field(rank), UINT64_MAX),
                                    size_now(worker.output_file));
    auto spawned = TrialProcess::spawn(rank_spec);
    if (!spawned.ok()) {  // the gang cannot start: stop the ranks already running
      trial.gang_failure = ExitInfo{127, 0};
      trial.failure_undeclared = true;
      terminal_.warn("trial " + trial_id(trial.index) + ": rank " + std::to_string(rank) +
                     " did not start: " + spawned.status().message());
      break;
    }
    worker.process.emplace(std::move(*spawned));
    Status f = output_->follow(worker_output_key(trial.index, rank), worker.output_file, start);
    if (!f.ok()) terminal_.warn("warning: " + f.message());
    trial.workers.push_back(std::move(worker));
  }
  if (trial.gang_failure) signal_ranks(trial, SIGKILL);
  trial.last_heard = Clock::now();
  Status followed = output_->follow(trial.index, trial.output_file, chief_offset);
  if (!followed.ok()) terminal_.warn("warning: " + followed.message());
  trial.exit.reset();
  trial.released = false;
  trial.stop_requested = pausing_;
  trial.record["pid"] = trial.process->pid();
  if (!trial.workers.empty()) {
    // With their start times, so that a resume can tell the ranks from recycled pids.
    Json pids = Json::array({trial.process->pid()});
    Json starts = Json::array({trial.process->start_time()});
    for (const Worker& w : trial.workers) {
      pids.push_back(w.process ? w.process->pid() : 0);
      starts.push_back(w.process ? w.process->start_time() : 0);
    }
    trial.record["rank_pids"] = pids;
    trial.record["rank_start_times"] = starts;
  } else {
    trial.record.erase("rank_pids");
    trial.record.erase("rank_start_times");
  }
  trial.record["process_start_time"] = trial.process->start_time();
  trial.record["boot_id"] = boot_id();
  trial.record.erase("exit");
  set_trial_state(trial, "RUNNING");
  record_event("trial_started", {{"trial", trial.index}, {"pid", trial.process->pid()}});
  const std::string from =
      trial.record.contains("restored_checkpoint") && spec.env.count("CAIRN_LATEST_CHECKPOINT")
          ? " from checkpoint " +
                trial.record["restored_checkpoint"].get<std::string>().substr(0, 12) + " (" +
                spec.env["CAIRN_STEPS_COMPLETED"] + " units done)"
          : "";
  terminal_.note("trial " + trial_id(trial.index) + " started (pid " +
                 std::to_string(trial.process->pid()) + ")" + from);
  return Status::Ok();
}

void Coordinator::log_output(Trial& trial, std::string_view chunk) {
  trial.last_heard = Clock::now();
  batch_.put(schema::log_key(trial.index, 0, ++trial.log_seq), chunk);
  trial.partial_line.append(chunk);
  size_t start = 0;
  for (;;) {
    size_t nl = trial.partial_line.find('\n', start);
    if (nl == std::string::npos) break;
    std::string line = trial.partial_line.substr(start, nl - start);
    start = nl + 1;
    terminal_.trial_line(trial_id(trial.index), line);
    keep_tail_line(trial.tail, std::move(line));
  }
  trial.partial_line.erase(0, start);
}

void Coordinator::drain_output(Trial& trial, bool final) {
  for (;;) {
    std::string_view chunk = output_->read_new(trial.index);
    if (chunk.empty()) break;
    log_output(trial, chunk);
  }
  const uint64_t offset = output_->offset(trial.index);
  if (offset != trial.record.value("output_offset", uint64_t{0})) {
    trial.record["output_offset"] = offset;
    trial.record["log_seq"] = trial.log_seq;
    mark_dirty(trial);
  }
  if (final) {
    if (!trial.partial_line.empty()) log_output(trial, "\n");
    trial.record["log_seq"] = trial.log_seq;
    output_->stop(trial.index);
  }
}

void Coordinator::drain_worker_output(Trial& trial, Worker& worker, bool final) {
  const int64_t key = worker_output_key(trial.index, worker.rank);
  const std::string rank_key = "log_seq_rank" + std::to_string(worker.rank);
  for (;;) {
    std::string_view chunk = output_->read_new(key);
    if (chunk.empty()) break;
    trial.last_heard = Clock::now();
    batch_.put(schema::log_key(trial.index, worker.rank, ++worker.log_seq), chunk);
    worker.partial_line.append(chunk);
    size_t start = 0;
    for (size_t nl; (nl = worker.partial_line.find('\n', start)) != std::string::npos;
         start = nl + 1) {
      std::string line = worker.partial_line.substr(start, nl - start);
      terminal_.trial_line(trial_id(trial.index) + ":" + std::to_string(worker.rank), line);
      keep_tail_line(worker.tail, std::move(line));
    }
    worker.partial_line.erase(0, start);
    trial.record[rank_key] = worker.log_seq;
    // With the log, in one batch: a resumed coordinator reads on from here.
    trial.record[worker_offset_field(worker.rank)] = output_->offset(key);
    mark_dirty(trial);
  }
  if (final) {
    if (!worker.partial_line.empty()) {
      terminal_.trial_line(trial_id(trial.index) + ":" + std::to_string(worker.rank),
                           worker.partial_line);
      keep_tail_line(worker.tail, worker.partial_line);
    }
    output_->stop(key);
  }
}

void Coordinator::reap_children() {
  for (;;) {
    // Looked at before it is reaped: while the ended process is a zombie its pid, which is
    // its group's id, cannot be reused, so what is left of its group can be killed.
    siginfo_t ended{};
    if (::waitid(P_ALL, 0, &ended, WEXITED | WNOHANG | WNOWAIT) != 0 || ended.si_pid <= 0) return;
    if (is_trial_process(ended.si_pid)) ::kill(-ended.si_pid, SIGKILL);
    int status = 0;
    pid_t pid = ::waitpid(ended.si_pid, &status, WNOHANG);
    if (pid <= 0) return;
    for (Trial* trial : live_trials()) {
      if (trial->process && !trial->chief_exit && trial->process->pid() == pid) {
        drain_output(*trial, /*final=*/true);
        rank_exited(*trial, 0, ExitInfo::from_wait_status(status));
        break;
      }
      auto worker =
          std::find_if(trial->workers.begin(), trial->workers.end(),
                       [&](const Worker& w) { return w.process && w.process->pid() == pid; });
      if (worker != trial->workers.end()) {
        drain_worker_output(*trial, *worker, /*final=*/true);
        worker->process.reset();
        rank_exited(*trial, worker->rank, ExitInfo::from_wait_status(status));
        break;
      }
    }
  }
}

bool Coordinator::is_trial_process(pid_t pid) const {
  for (const Trial* trial : live_trials()) {
    if (trial->process && !trial->chief_exit && trial->process->pid() == pid) return true;
    for (const Worker& w : trial->workers)
      if (w.process && w.process->pid() == pid) return true;
  }
  return false;
}

namespace {

// Whether the process has ended already (not yet reaped): a signal sent now is not what
// ended it. WNOWAIT leaves it for reap_children.
bool has_ended(pid_t pid) {
  siginfo_t si{};
  return ::waitid(P_PID, pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid;
}

}  // namespace

void Coordinator::signal_ranks(Trial& trial, int sig) {
  auto send = [&](int rank, const TrialProcess& process) {
    if (sig == SIGKILL && !has_ended(process.pid())) trial.killed_by_cairn.insert(rank);
    process.signal_group(sig);
  };
  if (trial.process && !trial.chief_exit) send(0, *trial.process);
  for (Worker& w : trial.workers)
    if (w.process) send(w.rank, *w.process);
}

bool Coordinator::declares_permanent(const ExitInfo& info) const {
  if (info.signal != 0 || info.code == 0) return false;
  if (is_builtin_entrypoint(config_) && info.code == kPermanentFailureExit) return true;
  const std::vector<int>& codes = config_.permanent_exit_codes;
  return std::find(codes.begin(), codes.end(), info.code) != codes.end();
}

void Coordinator::rank_exited(Trial& trial, int rank, ExitInfo info) {
  if (rank == 0) trial.chief_exit = info;
  if (trial.world_size() > 1) {
    trial.wait_of(rank).enter(RankCall::kExited, 0, "", Clock::now());
    // A rank that ended cleanly takes part in no more checkpoints: the others' may be whole.
    if (info.ok() && !trial.gang_failure) settle_checkpoint_rounds(trial);
  }
  // A rank cairn killed to stop the gang says nothing of why the trial failed; every rank
  // that failed by itself must have declared its failure permanent (the order in which the
  // ranks are reaped is not the order in which they failed).
  const bool stopped_by_gang = info.signal == SIGKILL && trial.killed_by_cairn.count(rank) > 0;
  if (!info.ok() && !stopped_by_gang)
    (declares_permanent(info) ? trial.failure_declared : trial.failure_undeclared) = true;
  if (!info.ok() && !trial.gang_failure) {
    // Gang semantics: the other ranks would wait forever in their next collective.
    trial.gang_failure = info;
    trial.failed_rank = rank;
    if (rank > 0)
      for (const Worker& w : trial.workers)
        if (w.rank == rank) trial.failed_rank_tail = w.tail;
    if (!trial.workers.empty() && !trial.gang_fault) {  // else cairn said why it killed them
      log_output(trial, "cairn: rank " + std::to_string(rank) + " " + info.describe() +
                            "; stopping the other ranks\n");
      signal_ranks(trial, SIGKILL);
    }
  }
  const bool all_done =
      trial.chief_exit && std::none_of(trial.workers.begin(), trial.workers.end(),
                                       [](const Worker& w) { return w.process.has_value(); });
  if (!all_done) return;
  ExitInfo final_info = trial.gang_failure ? *trial.gang_failure : *trial.chief_exit;
  const bool permanent = !final_info.ok() && trial.failure_declared && !trial.failure_undeclared;
  for (Worker& w : trial.workers)
    if (w.connection_fd >= 0) connections_.erase(w.connection_fd);
  trial.reset_attempt();
  handle_exit(trial, final_info, permanent);
}

void Coordinator::report_failure_tail(const Trial& trial) {
  const std::string id = trial_id(trial.index);
  if (trial.failed_rank > 0) {
    const std::string rank = std::to_string(trial.failed_rank);
    if (trial.failed_rank_tail.empty()) {
      terminal_.warn("rank " + rank + " failed and printed nothing");
      return;
    }
    terminal_.warn("last lines of rank " + rank + "'s log (cairn logs " + id + " --rank " + rank +
                   "):");
    for (const auto& line : trial.failed_rank_tail) terminal_.warn("  " + line);
    return;
  }
  if (trial.tail.empty()) return;
  terminal_.warn("last lines of its log (cairn logs " + id + "):");
  for (const auto& line : trial.tail) terminal_.warn("  " + line);
}

void Coordinator::handle_exit(Trial& trial, ExitInfo info, bool permanent) {
  trial.process.reset();
  trial.chief_exit.reset();
  slots_->release(trial.index);
  if (trial.liveness_killed) {
    trial.liveness_killed = false;
    info.code = 0;
    info.signal = SIGKILL;
  }
  // cairn killed the gang (deadlocked, rank_wait_timeout): that is the failure, whatever
  // the ranks' exit statuses say.
  const std::optional<std::string> fault = std::exchange(trial.gang_fault, std::nullopt);
  if (fault) {
    info.code = 0;
    info.signal = SIGKILL;
  }
  if (trial.connection_fd >= 0) connections_.erase(trial.connection_fd);
  trial.connection_fd = -1;
  trial.pending_operation_seq.reset();
  std::error_code ec;
  for (const auto& dir : trial.staging_dirs) fs::remove_all(dir, ec);
  trial.staging_dirs.clear();
  trial.record["exit"] = {
      {"code", info.code}, {"signal", info.signal}, {"description", info.describe()}};
  trial.record["ended_at"] = Json(nullptr);
  mark_dirty(trial);
  record_event("trial_exited",
               {{"trial", trial.index}, {"code", info.code}, {"signal", info.signal}});
  const std::string id = trial_id(trial.index);

  if (canceling_) {
    trial.finished = true;
    set_trial_state(trial, "CANCELED");
    return;
  }
  if (trial.closed) {
    // The searcher had closed it: its work is done and recorded. A failure on the way out
    // (a library crashing at interpreter exit, a kill after the last validation) would gain
    // nothing from a restart, which could not even run: closed trials are never scheduled.
    if (!info.ok())
      terminal_.warn("warning: trial " + id + " " + info.describe() +
                     " after its work was done; its results stand (the status is in its record)");
    trial.finished = true;
    const bool complete = trial.target >= config_.searcher.max_length;
    set_trial_state(trial, complete ? "COMPLETED" : "STOPPED");
    terminal_.note("trial " + id + (complete ? " completed (" : " stopped by the searcher (") +
                   std::to_string(trial.record.value("steps_completed", int64_t{0})) + " units)");
    close_in_searcher(trial);
    return;
  }
  if (info.ok() && trial.stop_requested) {
    set_trial_state(trial, "PAUSED");
    terminal_.note("trial " + id + " paused");
    return;
  }
  if (info.ok() && (trial.validated_target >= trial.target || trial.released)) {
    // It finished its operation and the searcher had not decided: it checkpointed and left
    // its slot to others; a promotion (perhaps already made) resumes it from that checkpoint.
    set_trial_state(trial, trial.target > trial.validated_target ? "QUEUED" : "PAUSED");
    return;
  }
  std::string why = fault ? *fault
                    : info.ok()
                        ? "exited with status 0 before finishing its work (" +
                              std::to_string(trial.record.value("steps_completed", int64_t{0})) +
                              " of " + std::to_string(trial.target) + " units)"
                        : info.describe();
  // In a gang, which rank failed is half of the story (its lines follow).
  if (!fault && !info.ok() && trial.failed_rank > 0)
    why = "rank " + std::to_string(trial.failed_rank) + " " + why;
  if (pausing_ && !permanent) {  // killed while we were stopping: not the trial's fault
    set_trial_state(trial, "PAUSED");
    terminal_.note("trial " + id + " stopped: " + why);
    return;
  }
  terminal_.warn("trial " + id + " failed: " + why);
  report_failure_tail(trial);
  // A trial that declared its failure permanent would fail the same way again.
  const int restarts = trial.record.value("restarts", 0);
  if (permanent && config_.max_restarts > 0)
    terminal_.note("trial " + id + " " + info.describe() +
                   ", a failure it declares permanent: not restarted");
  if (!permanent && restarts < config_.max_restarts) {
    trial.record["restarts"] = restarts + 1;
    // Back-off grows with failures in a row (a crash loop), and starts over once the trial
    // has made progress (registered a checkpoint) since its last start.
    const int in_a_row = trial.failures_in_a_row++;
    const int backoff_s = std::min(30, 1 << std::min(in_a_row, 5));
    trial.not_before = Clock::now() + std::chrono::seconds(backoff_s);
    set_trial_state(trial, "QUEUED");
    record_event("trial_restart",
                 {{"trial", trial.index}, {"restart", restarts + 1}, {"reason", why}});
    terminal_.note("restarting trial " + id + " from its latest checkpoint in " +
                   std::to_string(backoff_s) + " s (restart " + std::to_string(restarts + 1) +
                   " of " + std::to_string(config_.max_restarts) + ")");
    return;
  }
  trial.record["error"] = why;
  trial.finished = true;
  set_trial_state(trial, "ERROR");
  close_in_searcher(trial);
}

void Coordinator::request_stop(Trial& trial, const char* reason) {
  trial.stop_requested = true;
  std::vector<int> fds{trial.connection_fd};
  for (const Worker& w : trial.workers) fds.push_back(w.connection_fd);
  for (int fd : fds) {
    auto it = connections_.find(fd);
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
      set_trial_state(*trial, "CANCELED");
    }
  }
}

void Coordinator::handle_signal(int sig) {
  if (sig == SIGCHLD) {
    reap_children();
    return;
  }
  if (sig == SIGUSR2) {
    cancel();
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
