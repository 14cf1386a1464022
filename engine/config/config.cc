// Loading an experiment config: YAML -> tree -> --set overrides -> validated ExperimentConfig.
// Validation throws ConfigError inside the module; this file is where it becomes a Status.
#include "engine/config/config.h"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <system_error>

#include "engine/config/config_reader.h"
#include "engine/config/config_sections.h"
#include "engine/config/config_tree.h"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using config::ConfigNode;
using config::fail;
using config::MapReader;

// A top-level key that names a key of a section was most likely meant to be inside it.
std::optional<std::string> section_of(std::string_view key) {
  auto holds = [&](const auto& keys) {
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  };
  if (holds(config::kSearcherKeys)) return "searcher";
  if (holds(config::kResourcesKeys)) return "resources";
  if (holds(config::kCheckpointKeys)) return "checkpoint";
  if (holds(config::kReproducibilityKeys)) return "reproducibility";
  if (holds(config::kNotifyKeys)) return "notify";
  return std::nullopt;
}

void reject_unknown_top_level(const MapReader& top) {
  for (const config::MapEntry& entry : top.node().entries) {
    const auto& known = config::kTopLevelKeys;
    if (std::find(known.begin(), known.end(), entry.key) != known.end()) continue;
    if (config::is_determined_cluster_key(entry.key)) continue;
    if (config::is_determined_top_level_key(entry.key)) continue;
    if (auto section = section_of(entry.key)) {
      fail(entry.key_where, entry.key,
           "unknown top-level key; did you mean " + *section + "." + entry.key +
               "? (it goes "
               "under '" +
               *section + ":')");
    }
  }
  // A key close to one of Determined's (and to none of cairn's) is most likely a typo of it.
  const std::vector<std::string> cairn_keys(config::kTopLevelKeys.begin(),
                                            config::kTopLevelKeys.end());
  for (const config::MapEntry& entry : top.node().entries) {
    if (std::find(cairn_keys.begin(), cairn_keys.end(), entry.key) != cairn_keys.end() ||
        config::is_determined_cluster_key(entry.key) ||
        config::is_determined_top_level_key(entry.key) ||
        config::closest_match(entry.key, cairn_keys))
      continue;
    if (auto guess = config::closest_match(entry.key, config::determined_top_level_keys()))
      fail(entry.key_where, entry.key,
           "unknown key; did you mean '" + *guess + "'? (a key of Determined's config)");
  }
  std::vector<std::string_view> known(config::kTopLevelKeys.begin(), config::kTopLevelKeys.end());
  for (const config::MapEntry& entry : top.node().entries)
    if (config::is_determined_cluster_key(entry.key) ||
        config::is_determined_top_level_key(entry.key))
      known.push_back(entry.key);
  top.reject_unknown(known);
}

void check_root(const ConfigNode& root) {
  if (root.kind == ConfigNode::Kind::kNull) {
    fail(root, "", "the config is empty; it needs at least entrypoint and searcher");
  }
  if (!root.is_map()) {
    fail(root, "",
         "the top level must be a map of keys (entrypoint:, searcher:, …), got " +
             config::describe(root));
  }
}

std::string read_name(const MapReader& top, const std::string& file_label) {
  const ConfigNode* node = top.get("name");
  if (node == nullptr) {
    std::string stem = fs::path(file_label).stem().string();
    return stem.empty() ? "experiment" : stem;
  }
  std::string name = config::read_string(*node, "name");
  if (name.empty()) fail(*node, "name", "is empty");
  for (char c : name) {
    if (static_cast<unsigned char>(c) < 0x20) fail(*node, "name", "must be one line of text");
  }
  return name;
}

fs::path read_workdir(const MapReader& top, const fs::path& base_dir) {
  const ConfigNode* node = top.get("workdir");
  const ConfigNode& at = node != nullptr ? *node : top.node();
  std::string text = node != nullptr ? config::read_string(*node, "workdir") : ".";
  if (text.empty()) fail(at, "workdir", "is empty; write . for the config file's directory");
  std::error_code error;
  fs::path dir = fs::absolute(base_dir / text, error).lexically_normal();
  if (!dir.has_filename() && dir.has_parent_path() && dir != dir.root_path()) {
    dir = dir.parent_path();  // drop the trailing separator that "dir/." leaves
  }
  fs::file_status status = fs::status(dir, error);
  if (!fs::exists(status)) {
    std::string hint = text.starts_with("~") ? " (~ is not expanded; write the full path)" : "";
    fail(at, "workdir", dir.string() + " does not exist" + hint);
  }
  if (!fs::is_directory(status)) fail(at, "workdir", dir.string() + " is not a directory");
  return dir;
}

fs::path config_path_of(const std::string& file_label, const fs::path& base_dir) {
  fs::path label(file_label);
  if (label.is_absolute()) return label.lexically_normal();
  std::error_code error;
  return fs::absolute(base_dir / label.filename(), error).lexically_normal();
}

// What Determined's keys and defaults set, recorded at cairn's keys in the config that `show
// --json` prints, and the defaults under "determined_defaults" for `show` to state.
void record_determined_values(const ConfigNode& root, ExperimentConfig& out) {
  const ConfigNode* checkpoint = root.find("checkpoint");
  if (root.find("min_checkpoint_period") != nullptr &&
      (checkpoint == nullptr || !checkpoint->is_map() || checkpoint->find("period") == nullptr)) {
    Json& recorded = out.resolved["checkpoint"];
    if (!recorded.is_object()) recorded = Json::object();
    recorded["period"] = out.checkpoint.period;
  }
  if (out.determined_defaults.because.empty()) return;
  Json values = Json::object();
  for (const auto& [key, value] : out.determined_defaults.values) {
    values[key] = value;
    if (key == "log_policies") continue;  // the config's own list stays as written
    Json* at = &out.resolved;
    size_t start = 0;
    for (size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1) {
      at = &(*at)[key.substr(start, dot - start)];
      if (!at->is_object()) *at = Json::object();
    }
    (*at)[key.substr(start)] = value;
  }
  out.resolved["determined_defaults"] = {{"because", out.determined_defaults.because},
                                         {"values", values}};
}

ExperimentConfig build_config(const ConfigNode& root, const std::string& file_label,
                              const fs::path& base_dir, ConfigUse use) {
  MapReader top(root, "");
  reject_unknown_top_level(top);
  ExperimentConfig out;
  out.name = read_name(top, file_label);
  const ConfigNode& entrypoint = top.require(
      "entrypoint", "the command that starts a trial, such as python3 train.py, or builtin:mlp");
  out.entrypoint = config::read_entrypoint(entrypoint);
  out.entrypoint_where = entrypoint.where;
  out.config_path = config_path_of(file_label, base_dir);
  out.workdir = read_workdir(top, base_dir);
  const ConfigNode* hyperparameters = top.get("hyperparameters");
  if (hyperparameters != nullptr)
    out.hyperparameters = config::read_hyperparameters(*hyperparameters);
  const ConfigNode& searcher =
      top.require("searcher", "for one trial: {name: single, metric: val_loss, max_length: 10}");
  out.searcher = config::read_searcher(searcher);
  out.searcher_where = searcher.where;
  if (out.searcher.name == "grid") config::check_grid(hyperparameters, out.hyperparameters);
  if (out.searcher.name == "pbt") config::check_perturbations(searcher, out.hyperparameters);
  if (const ConfigNode* node = top.get("resources"))
    out.resources = config::read_resources(config::without_cluster_resources(*node, out.warnings));
  out.max_restarts = top.int_or("max_restarts", 3, 0);
  out.liveness_timeout = top.int_or("liveness_timeout", 0, 0);
  out.stop_grace_period = top.int_or("stop_grace_period", 60, 0);
  out.rank_wait_timeout = top.int_or("rank_wait_timeout", 600, 0);
  out.reattach_window = top.int_or("reattach_window", 600, 0, 86400);
  if (const ConfigNode* node = top.get("permanent_exit_codes"))
    out.permanent_exit_codes = config::read_permanent_exit_codes(*node);
  out.retry_repeated_failures = top.get_bool("retry_repeated_failures").value_or(false);
  if (const ConfigNode* node = top.get("log_policies"))
    out.log_policies = config::read_log_policies(*node, out.warnings);
  if (const ConfigNode* node = top.get("checkpoint"))
    out.checkpoint = config::read_checkpoint(*node);
  config::read_determined_cluster_keys(root, out);
  config::read_determined_periods(root, out);
  if (const ConfigNode* node = top.get("reproducibility")) {
    out.reproducibility = config::read_reproducibility(*node);
  }
  // The value's shape decides: a map is Determined's data, the user's own settings for the
  // script; a path or a list of paths is cairn's data, fingerprinted with the experiment.
  if (const ConfigNode* node = top.get("data"); node != nullptr && node->is_map()) {
    out.user_data = config::to_json(*node);
  } else if (node != nullptr) {
    out.data = config::read_data(*node);
    if (use == ConfigUse::kNewExperiment) config::check_data_exists(*node, out.workdir);
  }
  if (const ConfigNode* node = top.get("environment")) {
    out.environment = config::is_determined_environment(*node)
                          ? config::read_determined_environment(*node, out.warnings)
                          : config::read_environment(*node);
  }
  if (const ConfigNode* node = top.get("notify")) out.notify = config::read_notify(*node);
  config::apply_determined_defaults(root, out);
  if (use == ConfigUse::kNewExperiment) config::check_builtin_mlp(root, out);
  out.resolved = config::to_json(root);
  // Retention reads checkpoint.keep_* from the recorded config (store/retention.h): what
  // checkpoint_storage.save_* set is recorded there too.
  if (const ConfigNode* storage = root.find("checkpoint_storage");
      storage != nullptr && storage->is_map() &&
      (storage->find("save_trial_latest") || storage->find("save_trial_best") ||
       storage->find("save_experiment_best"))) {
    Json& checkpoint = out.resolved["checkpoint"];
    if (!checkpoint.is_object()) checkpoint = Json::object();
    checkpoint["keep_trial_latest"] = out.checkpoint.keep_trial_latest;
    checkpoint["keep_trial_best"] = out.checkpoint.keep_trial_best;
    checkpoint["keep_experiment_best"] = out.checkpoint.keep_experiment_best;
  }
  record_determined_values(root, out);
  // In the order of the file's lines ("FILE:LINE: …"), as a reader goes through it.
  auto line_of = [](const std::string& w) {
    const size_t colon = w.find(": ");
    const size_t start = w.rfind(':', colon == std::string::npos ? 0 : colon - 1);
    return start == std::string::npos ? 0L : std::atol(w.c_str() + start + 1);
  };
  std::stable_sort(
      out.warnings.begin(), out.warnings.end(),
      [&](const std::string& a, const std::string& b) { return line_of(a) < line_of(b); });
  return out;
}

}  // namespace

Result<ExperimentConfig> parse_experiment_config(std::string_view yaml_text,
                                                 const std::string& file_label,
                                                 const fs::path& base_dir,
                                                 const std::vector<std::string>& sets,
                                                 ConfigUse use) {
  try {
    ConfigNode root = config::parse_yaml_document(yaml_text, file_label);
    check_root(root);
    for (const std::string& set : sets) config::apply_set(root, set);
    return build_config(root, file_label, base_dir, use);
  } catch (const config::ConfigError& error) {
    return Status::BadInput(error.what());
  } catch (const std::exception& error) {  // a bug here must not abort the program
    return Status::Failed(file_label + ": reading the config failed: " + error.what());
  }
}

Result<ExperimentConfig> load_experiment_config(const fs::path& file,
                                                const std::vector<std::string>& sets) {
  const std::string label = file.string();
  std::error_code error;
  if (fs::is_directory(file, error)) {
    return Status::BadInput(label + ": is a directory, not a config file");
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return Status::BadInput(label +
                            ": cannot read the config: " + std::generic_category().message(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  fs::path absolute = fs::absolute(file, error).lexically_normal();
  Result<ExperimentConfig> config = parse_experiment_config(
      text.str(), label, absolute.parent_path(), sets, ConfigUse::kNewExperiment);
  if (config.ok()) config->config_path = absolute;
  return config;
}

bool is_builtin_entrypoint(const ExperimentConfig& config) {
  return config.entrypoint.size() == 1 && config.entrypoint[0] == "builtin:mlp";
}

}  // namespace cairn
