// cairn trial SDK for C++: header-only; needs the C++ standard library, POSIX and
// nlohmann/json. Speaks the control protocol of docs/protocol.md; docs/sdk.md is the
// user guide. The same concepts as the Python SDK:
//
//   std::string error;
//   auto ctx = cairn::Context::init(&error);
//   if (!ctx) { std::fprintf(stderr, "cairn: error: %s\n", error.c_str()); return 1; }
//   int64_t step = ctx->steps_completed();       // load *ctx->latest_checkpoint() if set
//   while (auto op = ctx->next_operation()) {
//     while (step < op->length) {
//       train_one_unit(ctx->rng());
//       ctx->report_training(++step, {{"loss", loss}});
//       if (ctx->checkpoint_due(step)) {
//         auto writer = ctx->checkpoint(step);    // an empty directory: writer.path()
//         save(writer.path());
//         writer.commit();
//         if (ctx->should_preempt()) return 0;
//       }
//     }
//     ctx->report_validation(step, {{"val_loss", evaluate()}});
//   }
//   return 0;
//
// No exception escapes the public API. A Context is used from one thread; it runs one
// helper thread of its own that sends buffered training reports.
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cairn/detail/checkpoint_files.hpp"
#include "cairn/detail/control_channel.hpp"
#include "cairn/detail/hex.hpp"
#include "cairn/detail/metrics_json.hpp"
#include "cairn/detail/stop_signals.hpp"
#include "cairn/detail/trial_settings.hpp"

namespace cairn {

namespace sdk_detail {
inline constexpr int kProtocolVersion = 1;
inline constexpr const char* kSdkVersion = "cpp/0.1.0";
}  // namespace sdk_detail

using Metrics = std::map<std::string, double>;

// One unit of work from the searcher: train until `length` units are completed.
struct Operation {
  int64_t length;
};

class Context;

// An empty directory to write one checkpoint into, from Context::checkpoint(step).
// commit() registers it; destroying an uncommitted writer discards it.
// REQUIRES: the Context outlives the writer.
class CheckpointWriter {
 public:
  CheckpointWriter(CheckpointWriter&& other) noexcept { take(other); }
  CheckpointWriter& operator=(CheckpointWriter&& other) noexcept {
    if (this != &other) {
      abort();
      take(other);
    }
    return *this;
  }
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;
  ~CheckpointWriter() { abort(); }

  const std::filesystem::path& path() const { return path_; }

  // Saves the state of the context's rng() beside the files, and registers the
  // checkpoint with cairn (waiting for its ack). False on failure: see error().
  bool commit(const nlohmann::json& metadata = {});

  const std::string& error() const { return error_; }
  // cairn's id of the committed checkpoint; empty outside cairn.
  const std::string& checkpoint_id() const { return checkpoint_id_; }

 private:
  friend class Context;
  enum class Target {
    kCairn,       // a staging directory cairn created
    kStandalone,  // ./checkpoints/.partial-<step>-XXXXXX, renamed to <step> on commit
    kOrphan,      // $CAIRN_ORPHAN_DIR/<step>: cairn was gone
    kDiscarded,   // a scratch directory: the checkpoint cannot be kept
  };

  CheckpointWriter(Context* context, Target target, int64_t step, std::filesystem::path path,
                   std::string rng_state)
      : context_(context),
        target_(target),
        step_(step),
        path_(std::move(path)),
        rng_state_(std::move(rng_state)) {}

  void take(CheckpointWriter& other) noexcept {
    context_ = std::exchange(other.context_, nullptr);
    target_ = other.target_;
    step_ = other.step_;
    path_ = std::move(other.path_);
    rng_state_ = std::move(other.rng_state_);
    error_ = std::move(other.error_);
    checkpoint_id_ = std::move(other.checkpoint_id_);
  }

  bool commit_to_cairn(const nlohmann::json& metadata);
  bool commit_standalone();
  bool commit_orphan(const nlohmann::json& metadata, const std::filesystem::path& from);
  void abort() noexcept;

  Context* context_ = nullptr;  // null once committed, aborted or moved from
  Target target_ = Target::kDiscarded;
  int64_t step_ = 0;
  std::filesystem::path path_;
  std::string rng_state_;
  std::string error_;
  std::string checkpoint_id_;
};

// The trial's view of cairn. Create it with init().
class Context {
 public:
  using Environment = sdk_detail::Environment;

  // Connects to cairn (CAIRN_CONTROL), or runs standalone when it is unset. nullptr
  // and *error (one line) when cairn cannot be reached or refuses the trial.
  static std::unique_ptr<Context> init(std::string* error) {
    return init(sdk_detail::read_process_environment(), error);
  }
  // The same, from the given variables instead of the process's environment.
  static std::unique_ptr<Context> init(const Environment& environment, std::string* error);

  struct Passkey {  // lets only init() construct a Context, through make_unique
    explicit Passkey() = default;
  };
  explicit Context(Passkey) {}
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  // Sends buffered training reports and closes the channel.
  ~Context() {
    // cairn gone: the orphan checkpoint of a due step this rank did not enter needs its marker.
    if (due_ && channel_ && channel_->closed()) leave_checkpoint("exit");
  }

  const nlohmann::json& hparams() const { return settings_.hparams; }
  uint64_t seed() const { return settings_.seed; }
  int64_t steps_completed() const { return settings_.steps_completed; }
  const std::optional<std::filesystem::path>& latest_checkpoint() const {
    return settings_.latest_checkpoint;
  }
  const std::string& trial_id() const { return settings_.trial_id; }
  const std::string& experiment_id() const { return settings_.experiment_id; }
  int rank() const { return settings_.rank; }
  int world_size() const { return settings_.world_size; }
  bool deterministic() const { return settings_.deterministic; }
  int64_t checkpoint_period() const { return settings_.checkpoint_period; }
  bool standalone() const { return channel_ == nullptr; }

  // The next unit of work; nullopt when there is none or the trial must stop (exit 0).
  // The first call on a resume restores rng() from the checkpoint.
  std::optional<Operation> next_operation();

  // Buffered; cheap enough for every batch. NaN and infinities are recorded as null.
  void report_training(int64_t step, const Metrics& metrics);
  // Waits until cairn has stored the metrics; false when they could not be delivered.
  bool report_validation(int64_t step, const Metrics& metrics);

  // True when `step` is a multiple of the checkpoint period, reaches the current
  // operation's length, or when the trial has been asked to stop. In a multi-rank
  // trial every rank must call it at the same steps (the ranks agree through cairn).
  bool checkpoint_due(int64_t step);
  CheckpointWriter checkpoint(int64_t step);
  // Paused, pre-empted, Ctrl-C, or cairn went away: checkpoint and exit 0.
  // In a multi-rank trial rank 0 alone may call checkpoint(step): a rank whose next call
  // after a true checkpoint_due(step) is another one is not part of that checkpoint (its
  // rng() state is kept with it all the same; docs/protocol.md, "Multi-rank trials").
  bool should_preempt();

  // Seeded from seed(); saved in every checkpoint and restored on a resume.
  std::mt19937_64& rng() { return rng_; }

  // The rendezvous of a multi-rank trial (docs/protocol.md, "Rendezvous"): a key/value table
  // shared by the ranks of this attempt of the trial, held by cairn, so ranks can exchange
  // connection details (a collective library's addresses or unique id) without a shared
  // file system. Keys and values are printable strings (hex-encode binary data).
  // kv_set publishes `value` under `key`; false (with *error) when cairn refused it or is
  // gone. kv_get returns the value some rank set, waiting up to `timeout` for it; nullopt
  // (with *error) on timeout or when cairn is gone. Without cairn the table is local.
  bool kv_set(const std::string& key, const std::string& value, std::string* error = nullptr);
  std::optional<std::string> kv_get(const std::string& key, std::chrono::milliseconds timeout,
                                    std::string* error = nullptr);

 private:
  friend class CheckpointWriter;

  bool connect(std::string* error);
  std::optional<std::string> stop_reason() const;
  std::optional<int64_t> next_operation_length();
  CheckpointWriter orphan_or_discarded(int64_t step, std::string rng_state);
  // Multi-rank: this rank made `call` instead of entering the checkpoint of the due step:
  // tells cairn (with rng()'s state), or, cairn gone, marks its part of the orphan.
  void leave_checkpoint(const char* call) noexcept;
  void write_orphan_skip(int64_t step, const std::string& rng_state);
  void restore_rng();
  // Rank 0: the metrics cairn may not have stored, for an orphan checkpoint at `step`.
  bool write_orphan_metrics(const std::filesystem::path& dir, int64_t step, bool* complete,
                            std::string* error);
  nlohmann::json orphan_marker(int64_t step, const nlohmann::json& metadata,
                               std::optional<bool> metrics_complete) const;

  sdk_detail::TrialSettings settings_;
  std::unique_ptr<sdk_detail::ControlChannel> channel_;
  std::mt19937_64 rng_;
  std::optional<int64_t> op_length_;
  bool rng_pending_ = false;
  // Multi-rank: the step of the last true checkpoint_due() and rng()'s state then, until
  // this rank enters checkpoint(step) or makes another call (leave_checkpoint).
  std::optional<std::pair<int64_t, std::string>> due_;
  bool cairn_knows_skip_ = true;  // false once cairn answered checkpoint_skip with an error
  // Rank 0: validation reports made once cairn was gone, as {"step":S,"metrics":{…}}.
  std::vector<std::pair<int64_t, std::string>> undelivered_validations_;
  // Standalone checkpoints this process committed, oldest first, for CAIRN_KEEP_LATEST.
  // Others in ./checkpoints (an earlier run's, the one resumed) are never deleted.
  std::deque<std::filesystem::path> standalone_committed_;
  std::map<std::string, std::string> local_kv_;  // kv_set/kv_get without cairn
};

// ---- implementation --------------------------------------------------------------------

namespace sdk_detail {

// Ids as the protocol carries them: the experiment a number, an unset id null.
inline nlohmann::json id_json(const std::string& id, bool numeric) {
  if (id.empty()) return nullptr;
  bool digits = id.find_first_not_of("0123456789") == std::string::npos && id.size() < 19;
  return numeric && digits ? nlohmann::json(std::stoll(id)) : nlohmann::json(id);
}

inline void print_metrics(const char* kind, int64_t step, const Metrics& metrics) {
  std::string line = "cairn: step " + std::to_string(step) + " " + kind + ":";
  for (const auto& [name, value] : metrics) {
    char number[32];
    std::snprintf(number, sizeof number, "%.6g", value);
    line += " " + name + "=" + number;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace sdk_detail

inline std::unique_ptr<Context> Context::init(const Environment& environment, std::string* error) {
  try {
    auto context = std::make_unique<Context>(Passkey());
    if (!sdk_detail::parse_settings(environment, &context->settings_, error)) return nullptr;
    if (!context->settings_.control.empty() && !context->connect(error)) return nullptr;
    context->rng_.seed(context->settings_.seed);
    context->rng_pending_ = context->settings_.latest_checkpoint.has_value();
    sdk_detail::install_stop_signals();
    return context;
  } catch (const std::exception& e) {
    *error = e.what();
    return nullptr;
  }
}

inline bool Context::connect(std::string* error) {
  auto fd = sdk_detail::connect_control(settings_.control, error);
  if (!fd.valid()) return false;
  // cairn records only rank 0's metrics, so only rank 0 keeps them for an orphan.
  channel_ = std::make_unique<sdk_detail::ControlChannel>(std::move(fd), settings_.world_size > 1,
                                                          settings_.rank == 0);
  nlohmann::json hello = {{"type", "hello"},
                          {"protocol", sdk_detail::kProtocolVersion},
                          {"trial", sdk_detail::id_json(settings_.trial_id, false)},
                          {"experiment", sdk_detail::id_json(settings_.experiment_id, true)},
                          {"rank", settings_.rank},
                          {"world_size", settings_.world_size},
                          {"pid", static_cast<int64_t>(::getpid())},
                          {"sdk", sdk_detail::kSdkVersion}};
  if (settings_.attempt > 0) hello["attempt"] = settings_.attempt;
  if (!channel_->handshake(hello, std::chrono::seconds(60), error)) return false;
  // An older cairn sent these settings in `welcome` too, besides CAIRN_CHECKPOINT_PERIOD and
  // CAIRN_DETERMINISTIC; such a cairn is still understood (its values win, as they did).
  const auto& welcome = channel_->welcome();
  auto period = welcome.find("checkpoint_period");
  if (period != welcome.end() && period->is_number_integer()) {
    settings_.checkpoint_period = period->get<int64_t>();
  }
  auto deterministic = welcome.find("deterministic");
  if (deterministic != welcome.end() && deterministic->is_boolean()) {
    settings_.deterministic = deterministic->get<bool>();
  }
  return true;
}

inline std::optional<std::string> Context::stop_reason() const {
  if (channel_) {
    auto reason = channel_->stop_reason();
    if (reason || channel_->agrees_on_stop()) return reason;  // ranks stop only together
  }
  return sdk_detail::stop_signal_reason();
}

inline std::optional<Operation> Context::next_operation() {
  leave_checkpoint("next_operation");
  try {
    std::optional<int64_t> length;
    if (!stop_reason()) length = next_operation_length();
    if (!length) {
      if (channel_) channel_->flush();
      return std::nullopt;
    }
    op_length_ = length;
    if (rng_pending_) {
      rng_pending_ = false;
      restore_rng();
    }
    return Operation{*length};
  } catch (const std::exception& e) {
    sdk_detail::warn(std::string("next_operation: ") + e.what());
    return std::nullopt;
  }
}

inline std::optional<int64_t> Context::next_operation_length() {
  if (!channel_) {
    if (op_length_) return std::nullopt;
    return settings_.max_length;
  }
  // A single rank may stop waiting on Ctrl-C; ranks of one trial must stay together.
  std::function<bool()> interrupt;
  if (!channel_->agrees_on_stop())
    interrupt = [] { return sdk_detail::stop_signal_reason().has_value(); };
  auto answer = channel_->request({{"type", "next_operation"}}, interrupt);
  if (!answer || sdk_detail::string_field(*answer, "type") != "operation") return std::nullopt;
  auto done = answer->find("done");
  if (done != answer->end() && done->is_boolean() && done->get<bool>()) return std::nullopt;
  auto length = answer->find("length");
  if (length == answer->end() || !length->is_number_integer()) return std::nullopt;
  return length->get<int64_t>();
}

inline void Context::report_training(int64_t step, const Metrics& metrics) {
  if (due_) leave_checkpoint("report_training");
  try {
    if (channel_) {
      channel_->add_training_report(step, metrics);
    } else {
      sdk_detail::print_metrics("training", step, metrics);
    }
  } catch (const std::exception& e) {
    sdk_detail::warn(std::string("report_training: ") + e.what());
  }
}

inline bool Context::kv_set(const std::string& key, const std::string& value, std::string* error) {
  try {
    if (!channel_) {
      local_kv_[key] = value;
      return true;
    }
    auto answer = channel_->request({{"type", "kv_set"}, {"key", key}, {"value", value}});
    std::string problem;
    if (!answer) {
      problem = "cairn is gone";
    } else if (sdk_detail::string_field(*answer, "type") != "kv") {
      problem = sdk_detail::string_field(*answer, "message");
      if (problem.empty()) problem = "unexpected answer";
    }
    if (problem.empty()) return true;
    if (error) *error = "kv_set " + key + ": " + problem;
  } catch (const std::exception& e) {
    if (error) *error = std::string("kv_set: ") + e.what();
  }
  return false;
}

inline std::optional<std::string> Context::kv_get(const std::string& key,
                                                  std::chrono::milliseconds timeout,
                                                  std::string* error) {
  try {
    if (!channel_) {
      auto it = local_kv_.find(key);
      if (it != local_kv_.end()) return it->second;
      if (error) *error = "kv_get " + key + ": no rank set it";
      return std::nullopt;
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    bool timed_out = false;
    auto answer = channel_->request({{"type", "kv_get"}, {"key", key}}, [&] {
      timed_out = std::chrono::steady_clock::now() >= deadline;
      return timed_out;
    });
    std::string problem;
    if (!answer) {
      problem = timed_out ? "no rank set it within " + std::to_string(timeout.count()) + " ms"
                          : "cairn is gone";
    } else if (sdk_detail::string_field(*answer, "type") != "kv") {
      problem = sdk_detail::string_field(*answer, "message");
      if (problem.empty()) problem = "unexpected answer";
    } else if (auto value = answer->find("value"); value != answer->end() && value->is_string()) {
      return value->get<std::string>();
    } else {
      problem = "answer without a value";
    }
    if (error) *error = "kv_get " + key + ": " + problem;
  } catch (const std::exception& e) {
    if (error) *error = std::string("kv_get: ") + e.what();
  }
  return std::nullopt;
}

inline bool Context::report_validation(int64_t step, const Metrics& metrics) {
  try {
    if (!channel_) {
      sdk_detail::print_metrics("validation", step, metrics);
      return true;
    }
    leave_checkpoint("report_validation");
    auto answer = channel_->request({{"type", "validation"},
                                     {"step", step},
                                     {"metrics", sdk_detail::metrics_to_json(metrics)}});
    if (!answer) {
      if (settings_.rank == 0) {
        std::string report;
        sdk_detail::append_report(report, step, metrics);
        undelivered_validations_.emplace_back(step, std::move(report));
      }
      sdk_detail::warn("validation metrics for step " + std::to_string(step) +
                       " not delivered: cairn is gone (kept with an orphan checkpoint)");
      return false;
    }
    if (sdk_detail::string_field(*answer, "type") == "error") {
      sdk_detail::warn("validation metrics for step " + std::to_string(step) +
                       " rejected: " + sdk_detail::string_field(*answer, "message"));
      return false;
    }
    return true;
  } catch (const std::exception& e) {
    sdk_detail::warn(std::string("report_validation: ") + e.what());
    return false;
  }
}

inline bool Context::checkpoint_due(int64_t step) {
  try {
    if (channel_ && channel_->agrees_on_stop()) {
      leave_checkpoint("checkpoint_due");
      channel_->sync(step, sdk_detail::stop_signal_reason());
    } else if (channel_) {
      channel_->poll();
    }
  } catch (const std::exception& e) {
    sdk_detail::warn(std::string("checkpoint_due: ") + e.what());
  }
  const int64_t period = settings_.checkpoint_period;
  const bool due = stop_reason() || (step > 0 && period > 0 && step % period == 0) ||
                   (op_length_ && step >= *op_length_);
  if (due && settings_.world_size > 1 && channel_) {
    // Captured where checkpoint(step) would capture it: a rank that does not enter it still
    // resumes with the numbers it would have drawn.
    std::ostringstream rng_state;
    rng_state << rng_;
    due_.emplace(step, rng_state.str());
  }
  return due;
}

inline bool Context::should_preempt() {
  leave_checkpoint("should_preempt");
  try {
    if (channel_ && !channel_->agrees_on_stop()) channel_->poll();
  } catch (const std::exception& e) {
    sdk_detail::warn(std::string("should_preempt: ") + e.what());
  }
  return stop_reason().has_value();
}

inline void Context::leave_checkpoint(const char* call) noexcept {
  if (!due_) return;
  const auto [step, rng_state] = std::move(*due_);
  due_.reset();
  try {
    std::optional<nlohmann::json> answer;
    if (!channel_->closed() && cairn_knows_skip_) {
      nlohmann::json rng = {{"name", sdk_detail::rng_file_name(settings_.rank)},
                            {"hex", sdk_detail::to_hex(rng_state.data(), rng_state.size())}};
      // Answered once the checkpoint is committed (or known to have no rank).
      answer = channel_->request(
          {{"type", "checkpoint_skip"}, {"step", step}, {"call", call}, {"rng", std::move(rng)}});
      // An older cairn: its ranks enter checkpoints together; say nothing more.
      if (answer && sdk_detail::string_field(*answer, "type") == "error") cairn_knows_skip_ = false;
    }
    if (!answer && channel_->closed()) write_orphan_skip(step, rng_state);
  } catch (const std::exception& e) {
    sdk_detail::warn(std::string(call) + ": " + e.what());
  }
}

// This rank's part of an orphan checkpoint it did not enter: its rng() state and a marker
// saying so, so that the checkpoint the other ranks write there is complete.
inline void Context::write_orphan_skip(int64_t step, const std::string& rng_state) {
  if (!settings_.orphan_dir) return;
  const auto dir = *settings_.orphan_dir / std::to_string(step);
  std::string error;
  std::optional<bool> metrics_complete;
  bool ok =
      sdk_detail::prepare_orphan_dir(dir, settings_.rank, settings_.world_size, &error) &&
      sdk_detail::write_file(dir / sdk_detail::rng_file_name(settings_.rank), rng_state, &error);
  if (ok && settings_.rank == 0) {
    bool complete = true;
    ok = write_orphan_metrics(dir, step, &complete, &error);
    metrics_complete = complete;
  }
  if (ok) {
    sdk_detail::fsync_tree(dir);
    nlohmann::json marker = orphan_marker(step, nlohmann::json::object(), metrics_complete);
    marker["entered"] = false;
    ok = sdk_detail::write_file_atomically(
        dir / sdk_detail::orphan_marker_name(settings_.rank),
        marker.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), &error);
  }
  if (!ok)
    sdk_detail::warn("cannot keep this rank's part of the checkpoint for step " +
                     std::to_string(step) + ": " + error);
}

inline CheckpointWriter Context::checkpoint(int64_t step) {
  using Target = CheckpointWriter::Target;
  if (due_ && due_->first != step) leave_checkpoint("checkpoint");
  due_.reset();  // this rank takes part in the checkpoint of `step`
  std::ostringstream rng_state;
  rng_state << rng_;
  try {
    if (!channel_) {
      std::error_code ec;
      std::filesystem::create_directories(settings_.standalone_dir, ec);
      // A directory of its own: two checkpoints of one step may be open at once, and one
      // must not delete or commit the other's files.
      const auto partial =
          ec ? std::filesystem::path()
             : sdk_detail::make_unique_dir(settings_.standalone_dir,
                                           ".partial-" + std::to_string(step) + "-");
      if (!ec && partial.empty()) ec = std::error_code(errno, std::generic_category());
      // Checkpoints are outputs, not code: git and cairn's code snapshot skip the directory.
      const auto ignore = settings_.standalone_dir / ".gitignore";
      if (!ec && !std::filesystem::exists(ignore))
        std::ofstream(ignore)
            << "# written by the cairn SDK: checkpoints are outputs, not code\n*\n";
      if (!ec) return CheckpointWriter(this, Target::kStandalone, step, partial, rng_state.str());
      sdk_detail::warn("cannot create a checkpoint directory in " +
                       settings_.standalone_dir.string() + ": " + ec.message());
    } else if (auto answer = channel_->request({{"type", "checkpoint_begin"}, {"step", step}})) {
      std::string path = sdk_detail::string_field(*answer, "path");
      if (sdk_detail::string_field(*answer, "type") == "checkpoint_dir" && !path.empty()) {
        return CheckpointWriter(this, Target::kCairn, step, path, rng_state.str());
      }
      sdk_detail::warn("cairn refused a checkpoint at step " + std::to_string(step) + ": " +
                       sdk_detail::string_field(*answer, "message") + "; it will not be kept");
    } else {
      return orphan_or_discarded(step, rng_state.str());
    }
  } catch (const std::exception& e) {
    sdk_detail::warn(std::string("checkpoint: ") + e.what());
  }
  return CheckpointWriter(this, Target::kDiscarded, step,
                          sdk_detail::make_scratch_dir("cairn-discarded-"), rng_state.str());
}

inline CheckpointWriter Context::orphan_or_discarded(int64_t step, std::string rng_state) {
  using Target = CheckpointWriter::Target;
  std::string error = "cairn is gone and CAIRN_ORPHAN_DIR is unset";
  if (settings_.orphan_dir) {
    auto dir = *settings_.orphan_dir / std::to_string(step);
    if (sdk_detail::prepare_orphan_dir(dir, settings_.rank, settings_.world_size, &error)) {
      return CheckpointWriter(this, Target::kOrphan, step, dir, std::move(rng_state));
    }
  }
  sdk_detail::warn(error + ": the checkpoint for step " + std::to_string(step) +
                   " will not be kept");
  return CheckpointWriter(this, Target::kDiscarded, step,
                          sdk_detail::make_scratch_dir("cairn-discarded-"), std::move(rng_state));
}

inline void Context::restore_rng() {
  auto path = *settings_.latest_checkpoint / sdk_detail::rng_file_name(settings_.rank);
  auto text = sdk_detail::read_file(path);
  if (!text) {
    sdk_detail::warn(path.string() + " is missing; rng() not restored");
    return;
  }
  std::istringstream in(*text);
  std::mt19937_64 restored;
  if (in >> restored) {
    rng_ = restored;
  } else {
    sdk_detail::warn("cannot read " + path.string() + "; rng() not restored");
  }
}

inline bool Context::write_orphan_metrics(const std::filesystem::path& dir, int64_t step,
                                          bool* complete, std::string* error) {
  std::string training = channel_ ? channel_->unacked_report_lines(step, complete) : "";
  std::string validations;
  for (const auto& [validation_step, report] : undelivered_validations_) {
    if (validation_step > step) continue;
    validations += report;
    validations += '\n';
  }
  return sdk_detail::write_file(dir / sdk_detail::kOrphanTrainingFile, training, error) &&
         sdk_detail::write_file(dir / sdk_detail::kOrphanValidationFile, validations, error);
}

inline nlohmann::json Context::orphan_marker(int64_t step, const nlohmann::json& metadata,
                                             std::optional<bool> metrics_complete) const {
  nlohmann::json marker = {{"protocol", sdk_detail::kProtocolVersion},
                           {"trial", sdk_detail::id_json(settings_.trial_id, false)},
                           {"experiment", sdk_detail::id_json(settings_.experiment_id, true)},
                           {"step", step},
                           {"rank", settings_.rank},
                           {"world_size", settings_.world_size},
                           {"metadata", metadata},
                           {"created", static_cast<double>(std::time(nullptr))}};
  if (metrics_complete) marker["metrics_complete"] = *metrics_complete;
  return marker;
}

// ---- CheckpointWriter ----

inline bool CheckpointWriter::commit(const nlohmann::json& metadata) {
  if (context_ == nullptr) {
    error_ = "this checkpoint is already finished";
    return false;
  }
  nlohmann::json meta = metadata.is_null() ? nlohmann::json::object() : metadata;
  Target target = target_;
  bool ok = false;
  try {
    auto rng_file = path_ / sdk_detail::rng_file_name(context_->settings_.rank);
    if (!sdk_detail::write_file(rng_file, rng_state_, &error_)) {
      ok = false;
    } else if (target == Target::kCairn) {
      ok = commit_to_cairn(meta);
    } else if (target == Target::kStandalone) {
      ok = commit_standalone();
    } else if (target == Target::kOrphan) {
      ok = commit_orphan(meta, {});
    } else {
      error_ = "the checkpoint for step " + std::to_string(step_) + " cannot be kept";
    }
  } catch (const std::exception& e) {
    error_ = e.what();
  }
  // Once checkpoint_end is sent, the staging directory is cairn's (or, cairn gone, the
  // orphan's): only our own directories are cleaned up after a failure.
  if (!ok && target != Target::kCairn) abort();
  context_ = nullptr;
  return ok;
}

inline bool CheckpointWriter::commit_to_cairn(const nlohmann::json& metadata) {
  auto answer = context_->channel_->request({{"type", "checkpoint_end"},
                                             {"step", step_},
                                             {"path", path_.string()},
                                             {"metadata", metadata}});
  if (!answer) return commit_orphan(metadata, path_);  // cairn died after the begin
  if (sdk_detail::string_field(*answer, "type") == "error") {
    error_ = "checkpoint at step " + std::to_string(step_) +
             " failed: " + sdk_detail::string_field(*answer, "message");
    return false;
  }
  checkpoint_id_ = sdk_detail::string_field(*answer, "checkpoint");
  return true;
}

inline bool CheckpointWriter::commit_standalone() {
  sdk_detail::fsync_tree(path_);
  auto final_path = path_.parent_path() / std::to_string(step_);
  std::error_code ec;
  std::filesystem::remove_all(final_path, ec);
  std::filesystem::rename(path_, final_path, ec);
  if (ec) {
    error_ = "cannot rename " + path_.string() + ": " + ec.message();
    return false;
  }
  sdk_detail::fsync_path(final_path.parent_path(), true);
  path_ = final_path;
  std::fprintf(stderr, "cairn: checkpoint saved in %s\n", path_.c_str());
  auto& committed = context_->standalone_committed_;
  // The same step again replaced the old one.
  committed.erase(std::remove(committed.begin(), committed.end(), final_path), committed.end());
  committed.push_back(final_path);
  while (context_->settings_.standalone_keep > 0 &&
         committed.size() > static_cast<size_t>(context_->settings_.standalone_keep)) {
    std::filesystem::remove_all(committed.front(), ec);
    committed.pop_front();
  }
  return true;
}

// Keeps the checkpoint for cairn to adopt later: the marker file, written last and
// atomically, says the directory is complete. Rank 0 adds the metrics cairn may not have
// stored, which cairn records when it adopts the checkpoint. `from`: a staging
// directory to move.
inline bool CheckpointWriter::commit_orphan(const nlohmann::json& metadata,
                                            const std::filesystem::path& from) {
  const auto& settings = context_->settings_;
  if (!from.empty()) {
    if (!settings.orphan_dir) {
      error_ = "cairn is gone and CAIRN_ORPHAN_DIR is unset: checkpoint left in " + from.string();
      return false;
    }
    auto dir = *settings.orphan_dir / std::to_string(step_);
    if (!sdk_detail::prepare_orphan_dir(dir, settings.rank, settings.world_size, &error_) ||
        !sdk_detail::move_contents(from, dir, &error_)) {
      return false;
    }
    std::error_code ec;
    std::filesystem::remove_all(from, ec);
    path_ = dir;
    target_ = Target::kOrphan;
  }
  std::optional<bool> metrics_complete;
  if (settings.rank == 0) {
    bool complete = true;
    if (!context_->write_orphan_metrics(path_, step_, &complete, &error_)) return false;
    metrics_complete = complete;
  }
  sdk_detail::fsync_tree(path_);
  auto marker = path_ / sdk_detail::orphan_marker_name(settings.rank);
  if (!sdk_detail::write_file_atomically(
          marker,
          context_->orphan_marker(step_, metadata, metrics_complete)
              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
          &error_)) {
    return false;
  }
  sdk_detail::warn("cairn is gone: checkpoint for step " + std::to_string(step_) + " kept in " +
                   path_.string());
  return true;
}

inline void CheckpointWriter::abort() noexcept {
  if (context_ == nullptr) return;
  try {
    std::error_code ec;
    const auto& settings = context_->settings_;
    if (target_ == Target::kCairn) {
      if (context_->channel_ && !context_->channel_->closed()) {
        context_->channel_->send(
            {{"type", "checkpoint_abort"}, {"step", step_}, {"path", path_.string()}});
      }
    } else if (target_ == Target::kOrphan && settings.world_size > 1) {
      std::filesystem::remove(path_ / sdk_detail::orphan_marker_name(settings.rank), ec);
    } else {
      std::filesystem::remove_all(path_, ec);
    }
  } catch (...) {
    // Nothing more can be done for a checkpoint that is being thrown away.
  }
  context_ = nullptr;
}

}  // namespace cairn
