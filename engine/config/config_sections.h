// Internal to the config module: one reader per section of the config. Each validates its
// section completely and throws ConfigError (config_reader.h) at the first mistake.
#pragma once

#include <array>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/config/config.h"
#include "engine/config/config_tree.h"

namespace cairn::config {

inline constexpr std::array<std::string_view, 18> kTopLevelKeys = {"name",
                                                                   "entrypoint",
                                                                   "workdir",
                                                                   "hyperparameters",
                                                                   "searcher",
                                                                   "resources",
                                                                   "max_restarts",
                                                                   "checkpoint",
                                                                   "reproducibility",
                                                                   "data",
                                                                   "environment",
                                                                   "notify",
                                                                   "liveness_timeout",
                                                                   "permanent_exit_codes",
                                                                   "stop_grace_period",
                                                                   "rank_wait_timeout",
                                                                   "reattach_window",
                                                                   "retry_repeated_failures"};
inline constexpr std::array<std::string_view, 23> kSearcherKeys = {
    "name", "metric", "smaller_is_better", "max_length", "max_trials", "max_concurrent_trials",
    "divisor", "min_length", "max_rungs", "mode", "population_size", "perturbation_interval",
    "quantile_fraction", "perturbations", "sampler", "tpe", "max_time", "time_metric",
    // Determined's (docs/determined.md)
    "bracket_rungs", "stop_once", "num_rungs", "source_trial_id", "source_checkpoint_uuid"};
inline constexpr std::array<std::string_view, 7> kTpeKeys = {
    "n_startup_trials",   "n_ei_candidates",    "gamma", "max_good", "prior_weight",
    "consider_endpoints", "consider_magic_clip"};
inline constexpr std::array<std::string_view, 3> kResourcesKeys = {"slots_per_trial", "devices",
                                                                   "peers"};
inline constexpr std::array<std::string_view, 4> kCheckpointKeys = {
    "period", "keep_trial_latest", "keep_trial_best", "keep_experiment_best"};
inline constexpr std::array<std::string_view, 4> kReproducibilityKeys = {
    "seed", "deterministic", "snapshot_limit_mb", "experiment_seed" /* Determined's seed */};
inline constexpr std::array<std::string_view, 4> kNotifyKeys = {"webhook", "webhook_env",
                                                                "secret_env", "on"};

// Each reads the value of its top-level key.
std::vector<std::string> read_entrypoint(const ConfigNode& node);
std::map<std::string, HyperparameterSpec> read_hyperparameters(const ConfigNode& node);
SearcherConfig read_searcher(const ConfigNode& node);
ResourcesConfig read_resources(const ConfigNode& node);
CheckpointConfig read_checkpoint(const ConfigNode& node);
ReproducibilityConfig read_reproducibility(const ConfigNode& node);
std::vector<std::string> read_data(const ConfigNode& node);
// Each `data:` entry exists under `workdir`, checked for a new experiment only: a stored one
// may have lost its data since, and resume and reproduce fingerprint what is left.
void check_data_exists(const ConfigNode& node, const std::filesystem::path& workdir);
std::vector<int> read_permanent_exit_codes(const ConfigNode& node);
std::map<std::string, std::string> read_environment(const ConfigNode& node);

// Determined's experiment config (engine/config/config_determined.cc, docs/determined.md).
// Its top-level keys that only a cluster needs: accepted, one warning each in out.warnings;
// checkpoint_storage.save_* set checkpoint.keep_* the config does not write itself.
bool is_determined_cluster_key(std::string_view key);
std::vector<std::string> determined_cluster_keys();
// Determined's top-level keys that mean something here or configure its Trial APIs
// (log_policies, min_checkpoint_period, records_per_epoch, …; config_determined_keys.cc).
bool is_determined_top_level_key(std::string_view key);
// Every top-level key of Determined's that cairn accepts (for suggestions).
std::vector<std::string> determined_top_level_keys();
// The first key of `root` (after --set) that only Determined's configs have, as a dotted
// path, or nullopt for a config of cairn's own: such a config gets Determined's defaults.
std::optional<std::string> first_determined_key(const ConfigNode& root);
// Determined's defaults (searcher.divisor 4, searcher.max_concurrent_trials 16,
// max_restarts 5, the CUDA OOM log policy) for every one of them `root` does not write,
// recorded in out.determined_defaults.
void apply_determined_defaults(const ConfigNode& root, ExperimentConfig& out);
// log_policies: Determined's shape of 0.38 ([{name, pattern, action: cancel_retries}]) or the
// older one ([{pattern, action: {type: cancel_retries}}]).
// exclude_node is accepted with a warning: there is no other node to run on.
std::vector<LogPolicy> read_log_policies(const ConfigNode& node,
                                         std::vector<std::string>& warnings);
// min_checkpoint_period (checkpoint.period when the config has no checkpoint.period, in the
// searcher's unit), min_validation_period, records_per_epoch, checkpoint_policy,
// perform_initial_validation: what each means here, warning those that change nothing.
void read_determined_periods(const ConfigNode& root, ExperimentConfig& out);
void read_determined_cluster_keys(const ConfigNode& root, ExperimentConfig& out);
// Determined's resources.devices (a list) and its other keys of `resources` (resource_pool, …).
bool is_determined_devices(const MapEntry& entry);
bool is_determined_resources_key(const MapEntry& entry);
// `resources` without Determined's cluster keys (resource_pool, priority, …), warning each.
ConfigNode without_cluster_resources(const ConfigNode& node, std::vector<std::string>& warnings);
// Determined's shape of `environment` ({environment_variables: [NAME=VALUE…], image: …}),
// told apart from cairn's map of variables by its keys; its variables, warning each cluster key.
bool is_determined_environment(const ConfigNode& node);
std::map<std::string, std::string> read_determined_environment(const ConfigNode& node,
                                                               std::vector<std::string>& warnings);
NotifyConfig read_notify(const ConfigNode& node);

// The grid searcher's rules: `count` where a range needs one, and at most 100000 points.
// `node` is the value of `hyperparameters` (nullptr when absent).
void check_grid(const ConfigNode* node, const std::map<std::string, HyperparameterSpec>& specs);
// pbt's `perturbations:` name hyperparameters that a perturbation can change: not constants,
// not nested groups (their members are named "group.member").
void check_perturbations(const ConfigNode& searcher,
                         const std::map<std::string, HyperparameterSpec>& specs);

// With `entrypoint: builtin:mlp`, what the trainer would refuse once a trial runs: lengths in
// batches or records (it counts epochs), and hyperparameters it does not take or any value
// the search could give them that it refuses (trainer/mlp_hparams.h). `root` is the whole config
// after --set; `config` what was read from it. Nothing for another entrypoint.
void check_builtin_mlp(const ConfigNode& root, const ExperimentConfig& config);

// Splits a command line into argv as a POSIX shell splits words (blanks, '…', "…", \),
// expanding nothing. BadInput when a quote is left open or a shell operator (| ; & < > ( ))
// appears unquoted, since no shell will ever see it.
Result<std::vector<std::string>> split_command_words(std::string_view command);

}  // namespace cairn::config
