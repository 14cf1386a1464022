// Internal to the config module: one reader per section of the config. Each validates its
// section completely and throws ConfigError (config_reader.h) at the first mistake.
#pragma once

#include <array>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/config/config.h"
#include "engine/config/config_tree.h"

namespace cairn::config {

inline constexpr std::array<std::string_view, 16> kTopLevelKeys = {"name",
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
                                                                   "rank_wait_timeout"};
inline constexpr std::array<std::string_view, 18> kSearcherKeys = {"name",
                                                                   "metric",
                                                                   "smaller_is_better",
                                                                   "max_length",
                                                                   "max_trials",
                                                                   "max_concurrent_trials",
                                                                   "divisor",
                                                                   "min_length",
                                                                   "max_rungs",
                                                                   "mode",
                                                                   "population_size",
                                                                   "perturbation_interval",
                                                                   "quantile_fraction",
                                                                   "perturbations",
                                                                   "sampler",
                                                                   "tpe",
                                                                   "max_time",
                                                                   "time_metric"};
inline constexpr std::array<std::string_view, 7> kTpeKeys = {
    "n_startup_trials",   "n_ei_candidates",    "gamma", "max_good", "prior_weight",
    "consider_endpoints", "consider_magic_clip"};
inline constexpr std::array<std::string_view, 3> kResourcesKeys = {"slots_per_trial", "devices",
                                                                   "peers"};
inline constexpr std::array<std::string_view, 4> kCheckpointKeys = {
    "period", "keep_trial_latest", "keep_trial_best", "keep_experiment_best"};
inline constexpr std::array<std::string_view, 3> kReproducibilityKeys = {"seed", "deterministic",
                                                                         "snapshot_limit_mb"};
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
void read_determined_cluster_keys(const ConfigNode& root, ExperimentConfig& out);
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
