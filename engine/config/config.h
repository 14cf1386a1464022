// The experiment config (SPEC §2): YAML in, a typed and fully validated ExperimentConfig
// out. Every mistake is reported before anything runs, as one line naming the file, the
// line and the dotted key: `exp.yaml:12: searcher.max_length: must be at least 1, got 0`.
// docs/config.md is the user-facing reference of every key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace cairn {

// One entry of `hyperparameters:`. A plain value is kConst; a map with `type:` is a
// distribution; a map without `type:` is kNested.
struct HyperparameterSpec {
  enum class Type { kConst, kInt, kDouble, kLog, kCategorical, kNested };
  Type type = Type::kConst;
  Json value;                     // kConst
  double minval = 0, maxval = 0;  // kInt/kDouble/kLog (for kLog these are exponents)
  double base = 10;               // kLog; > 0 and != 1
  std::optional<int> count;       // grid points of an int/double/log range (>= 1)
  std::vector<Json> vals;         // kCategorical; never empty
  std::map<std::string, HyperparameterSpec> children;  // kNested (sorted keys)
  int line = 0;  // 1-based line in the config file; 0 when it came from --set
};

// `searcher.tpe`: the TPE sampler's settings (docs/search.md, "TPE"); Optuna 3.1's defaults.
struct TpeConfig {
  int n_startup_trials = 10;  // >= 0: trials with a result before the model is used
  int n_ei_candidates = 24;   // 1..10000: candidates drawn from l(x), best l(x)/g(x) taken
  double gamma = 0.1;         // (0, 1]: the good share, ⌈gamma · n⌉ of n observations
  int max_good = 25;          // >= 1: … but never more than this many
  double prior_weight = 1.0;  // > 0
  bool consider_endpoints = false;
  bool consider_magic_clip = true;
};

struct SearcherConfig {
  // Canonical: single|grid|random|hyperband|asha (adaptive_asha, async_halving -> asha;
  // tpe -> random with sampler "tpe").
  std::string name;
  // How random, hyperband and asha draw a trial's hyperparameters: random|tpe.
  std::string sampler = "random";
  TpeConfig tpe;
  std::string metric;
  bool smaller_is_better = true;
  int64_t max_length = 0;  // > 0
  // `single` without max_length: the trial trains to its own end, and exiting 0 with no
  // stop request outstanding completes it (Determined 0.38's model, docs/determined.md).
  // max_length is then kOwnLength, the operation a script that asks for one gets.
  bool own_length = false;
  static constexpr int64_t kOwnLength = int64_t{1} << 40;
  // Determined 0.38's model: a trial's progress is this validation metric's value, not the
  // step; lengths (max_length, from `max_time`) are in its unit. At a rung the trial is asked
  // to stop, and a promoted one resumes from its checkpoint (docs/determined.md). "": steps.
  std::string time_metric;
  std::string length_unit;  // "" for a plain number; "epochs"/"batches"/"records" for {epochs: 81}
  int max_trials = 0;       // random, asha: > 0; grid, hyperband: 0 = no cap; single: 1
  int max_concurrent_trials = 0;  // 0 = as many as slots allow
  double divisor = 3;             // > 1
  int64_t min_length = 1;         // 1 <= min_length <= max_length, in length_unit
  int max_rungs = 5;              // >= 1
  // asha: the number of rungs of each bracket, instead of the ones `mode` picks (Determined's
  // bracket_rungs); each >= 1, and at most the rungs the ladder has. Empty: `mode` decides.
  std::vector<int> bracket_rungs;
  // asha: a trial below a rung's top 1/divisor when it reports there is stopped at once and
  // never resumed; the others go on without pausing (Determined's stop_once).
  bool stop_once = false;
  std::string mode = "standard";  // aggressive|standard|conservative
  // pbt (docs/search.md, "Population-based training").
  int population_size = 0;            // >= 2
  int64_t perturbation_interval = 0;  // units between generations; 1..max_length
  double quantile_fraction = 0.25;    // (0, 0.5]; floor(q * population_size) >= 1
  struct Perturbation {
    std::vector<double> factors = {0.8, 1.2};  // numeric: multiplied by one of them
    double resample_probability = -1;          // < 0: 0 for numeric, 0.25 for categorical
  };
  // By hyperparameter name ("optimizer.lr" for a nested one); absent: the defaults.
  std::map<std::string, Perturbation> perturbations;
  // Determined's warm start (source_trial_id / source_checkpoint_uuid, docs/determined.md):
  // every trial starts from this checkpoint until it has one of its own. Which checkpoint
  // it is is decided once, when the experiment is created (cli/new_experiment.cc), and
  // recorded as the experiment's "warm_start".
  struct WarmStart {
    std::string key;           // "searcher.source_trial_id" or "searcher.source_checkpoint_uuid"
    std::string where;         // "FILE:LINE" of the key, for its errors
    int64_t trial_number = 0;  // source_trial_id: a store-wide trial number
    std::string checkpoint;    // source_checkpoint_uuid: a storage id or a checkpoint ref
  };
  std::optional<WarmStart> warm_start;
};

struct ResourcesConfig {
  int slots_per_trial = 1;          // >= 1
  std::string devices = "auto";     // auto|cpu|gpu
  std::string peers_mode = "none";  // none|auto|list
  std::vector<std::string> peers;   // "host:port", set when peers_mode == "list"
  // Where slots_per_trial and devices were written ("FILE:LINE" or "--set KEY=VALUE"; ""
  // when left at the default), for what only the machine can judge (machine_resources.h).
  std::string slots_per_trial_where, devices_where;
};

struct CheckpointConfig {
  int64_t period = 1;                                                        // >= 1
  int keep_trial_latest = 1, keep_trial_best = 1, keep_experiment_best = 0;  // >= 0
};

struct ReproducibilityConfig {
  std::optional<uint64_t> seed;  // absent: the experiment picks one and records it
  bool deterministic = false;
  // The code snapshot (and the data kept with it) may hold at most this many MB; a larger
  // workdir is refused rather than silently truncated (SPEC §5).
  int snapshot_limit_mb = 100;
};

// One entry of Determined's `log_policies` (docs/determined.md): a line of a trial's output
// that `pattern` matches decides what happens when the attempt fails.
struct LogPolicy {
  enum class Action {
    kCancelRetries,  // the failed trial is not restarted
    kExcludeNode,    // Determined's: no other node to run on here; accepted, no effect
    kNone,           // only named (Determined shows the name as a label)
  };
  std::string name;     // "" when the old shape gave none
  std::string pattern;  // ECMAScript regex, searched in each line; "" matches nothing
  Action action = Action::kNone;
  std::string where;  // "FILE:LINE" of the entry
};

// `notify:` (docs/config.md, "Notifications"): where webhooks go and on which events. The
// URLs are secrets: `show`, `compare`, `--json` and reports print them redacted.
enum class NotifyEvent { kEnd, kTrialError, kBestImproved };
struct NotifyConfig {
  std::vector<std::string> webhooks;  // http(s):// URLs, as written
  std::string webhook_env;            // "" or the variable holding one more URL
  std::string secret_env;             // "" or the variable holding the signing secret
  std::vector<NotifyEvent> on = {NotifyEvent::kEnd, NotifyEvent::kTrialError};
  bool enabled() const { return !webhooks.empty() || !webhook_env.empty(); }
  bool wants(NotifyEvent e) const {
    for (NotifyEvent x : on)
      if (x == e) return true;
    return false;
  }
};

struct ExperimentConfig {
  // "FILE:LINE: key: …" for each key accepted without effect (Determined's cluster settings,
  // docs/determined.md); `cairn run` prints them.
  std::vector<std::string> warnings;
  std::string name;                     // default: the config file's stem
  std::vector<std::string> entrypoint;  // argv, never empty; nothing in it was expanded
  std::string entrypoint_where;         // "FILE:LINE" or "--set …", for errors
  std::filesystem::path config_path;    // absolute
  std::filesystem::path workdir;        // absolute; an existing directory
  std::map<std::string, HyperparameterSpec> hyperparameters;
  SearcherConfig searcher;
  std::string searcher_where;  // "FILE:LINE" of `searcher:`, for what the searcher refuses
  ResourcesConfig resources;
  int max_restarts = 3;  // >= 0
  // Exit statuses with which a trial declares a failure permanent: not restarted. Empty by
  // default; builtin:mlp's kPermanentFailureExit (common/exit_status.h) counts whatever this
  // says (docs/fault-tolerance.md).
  std::vector<int> permanent_exit_codes;
  // false (the default): a trial that never reported anything and failed twice in a row
  // with an exit status (not a signal) and the same last line of output is not restarted
  // again (docs/fault-tolerance.md); true: such failures are restarted like any other.
  bool retry_repeated_failures = false;
  // Lines of a failed attempt's output that decide its restart (Determined's log_policies).
  std::vector<LogPolicy> log_policies;
  // Seconds a running trial may go without a message on its control channel (or output)
  // before it is killed and counted as failed; 0: never.
  int liveness_timeout = 0;
  // Seconds `cairn run`/`resume` gives its trials to checkpoint and exit after SIGTERM or
  // SIGHUP before it kills the ones still running; 0: at once. Within systemd's default 90 s
  // stop timeout, so cairn exits by itself before systemd kills it.
  int stop_grace_period = 60;
  // Seconds a rank of a multi-rank trial may wait in cairn on the other ranks (a
  // checkpoint_due, a checkpoint, a rendezvous key) before the attempt fails; 0: never.
  // Rank 0 alone may evaluate for minutes while the others wait, hence the long default.
  int rank_wait_timeout = 600;
  CheckpointConfig checkpoint;
  ReproducibilityConfig reproducibility;
  std::vector<std::string> data;  // as written (relative to workdir)
  // Determined's `data:` (a map, the user's own settings): given to trials as
  // CAIRN_USER_DATA, read by det.get_cluster_info().user_data. Null when absent.
  Json user_data;
  // A config that carries a key only Determined's configs have gets Determined's defaults
  // for the keys it does not write (docs/determined.md); `show` states them.
  struct DeterminedDefaults {
    std::string because;                               // the first such key, dotted; "": none
    std::vector<std::pair<std::string, Json>> values;  // ("searcher.divisor", 4), …
  } determined_defaults;
  std::map<std::string, std::string> environment;  // valid names, no CAIRN_*
  NotifyConfig notify;
  Json resolved;  // the whole config after --set, as JSON (for storing and `show`)
};

// What a config is read for. A new experiment's config is also checked against what its
// trials will refuse (builtin:mlp's hyperparameters over the whole search space and its
// length unit). A stored one (`cairn resume`, `cairn reproduce`) was accepted when its
// experiment was created and is read as it was then: a check added or tightened since must
// not strand an experiment that already ran.
enum class ConfigUse { kNewExperiment, kStoredExperiment };

// Reads `file` for a new experiment (`cairn run`) and validates it. `sets` are "KEY=VALUE" strings
// from --set: a dotted key and a YAML value (scalar or flow: `searcher.max_trials=8`,
// `entrypoint=[a, b]`); each replaces or adds one subtree, in order, before validation. Errors:
// Status::BadInput, "FILE:LINE: KEY: what is wrong", or for a value that came from --set, "--set
// KEY=VALUE: KEY: what is wrong".
Result<ExperimentConfig> load_experiment_config(const std::filesystem::path& file,
                                                const std::vector<std::string>& sets);

// The same from text already read (`cairn resume` stores the original text and sets).
// `file_label` names the file in messages and gives the default name; `base_dir` is the
// directory relative paths (workdir) are resolved against.
Result<ExperimentConfig> parse_experiment_config(std::string_view yaml_text,
                                                 const std::string& file_label,
                                                 const std::filesystem::path& base_dir,
                                                 const std::vector<std::string>& sets,
                                                 ConfigUse use);

// An experiment recorded before cairn gave configs with Determined's keys Determined's
// defaults (its recorded config has no "determined_defaults") is resumed and reproduced as it
// ran: this puts cairn's defaults back where `config` took Determined's.
void drop_determined_defaults(ExperimentConfig& config);

// True when the trials run the trainer built into cairn (entrypoint: builtin:mlp).
bool is_builtin_entrypoint(const ExperimentConfig& config);

}  // namespace cairn
