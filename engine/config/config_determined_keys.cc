// Determined's experiment-config keys that mean something here, or configure its Trial APIs
// (docs/determined.md, "Determined's experiment config"): what each becomes in cairn's
// config; and Determined's defaults for a config that carries any key only its configs have.
#include <algorithm>

#include "engine/config/config_reader.h"
#include "engine/config/config_sections.h"
#include "engine/config/log_policy_matcher.h"

namespace cairn::config {
namespace {

struct TrialApiKey {
  std::string_view key;
  std::string_view instead;
};

// They configure what Determined's Trial APIs do for a script; a Core API script decides
// these things itself, under Determined as here.
constexpr TrialApiKey kTrialApiKeys[] = {
    {"min_validation_period", "the script validates when it chooses, as a Core API script does"},
    {"records_per_epoch",
     "lengths stay in the unit written (an epoch is the script's); the script converts"},
    {"checkpoint_policy",
     "the script checkpoints when it chooses; cairn asks it to before every searcher decision"},
    {"perform_initial_validation", "the script validates when it chooses"},
};

constexpr std::string_view kDeterminedSearcherKeys[] = {
    "bracket_rungs", "stop_once", "num_rungs", "source_trial_id", "source_checkpoint_uuid"};

const TrialApiKey* find_trial_api_key(std::string_view key) {
  for (const TrialApiKey& k : kTrialApiKeys)
    if (k.key == key) return &k;
  return nullptr;
}

bool writes(const ConfigNode* map, std::string_view key) {
  if (map == nullptr || !map->is_map()) return false;
  const ConfigNode* value = map->find(key);
  return value != nullptr && value->kind != ConfigNode::Kind::kNull;
}

LogPolicy::Action read_action(const ConfigNode& node, const std::string& key) {
  std::string word;
  if (node.is_map()) {  // the shape before 0.38: {type: cancel_retries}
    MapReader action(node, key);
    static constexpr std::string_view kKeys[] = {"type"};
    action.reject_unknown(kKeys);
    word = read_string(action.require("type", "cancel_retries or exclude_node"), key + ".type");
  } else {
    word = read_string(node, key);
  }
  if (word == "cancel_retries") return LogPolicy::Action::kCancelRetries;
  if (word == "exclude_node") return LogPolicy::Action::kExcludeNode;
  fail(node, key, "must be cancel_retries or exclude_node, got '" + word + "'");
}

}  // namespace

bool is_determined_top_level_key(std::string_view key) {
  return key == "log_policies" || key == "min_checkpoint_period" ||
         find_trial_api_key(key) != nullptr;
}

std::vector<std::string> determined_top_level_keys() {
  std::vector<std::string> out = determined_cluster_keys();
  out.emplace_back("log_policies");
  out.emplace_back("min_checkpoint_period");
  for (const TrialApiKey& k : kTrialApiKeys) out.emplace_back(k.key);
  return out;
}

std::optional<std::string> first_determined_key(const ConfigNode& root) {
  if (!root.is_map()) return std::nullopt;
  for (const MapEntry& entry : root.entries) {
    const ConfigNode& value = entry.value;
    if (is_determined_cluster_key(entry.key) || is_determined_top_level_key(entry.key))
      return entry.key;
    if (entry.key == "data" && value.is_map()) return entry.key;
    if (entry.key == "environment" && is_determined_environment(value)) return entry.key;
    if (entry.key == "resources" && value.is_map())
      for (const MapEntry& e : value.entries)
        if (is_determined_resources_key(e)) return "resources." + e.key;
    if (entry.key == "reproducibility" && writes(&value, "experiment_seed"))
      return "reproducibility.experiment_seed";
    if (entry.key == "searcher")
      for (std::string_view k : kDeterminedSearcherKeys)
        if (writes(&value, k)) return "searcher." + std::string(k);
  }
  return std::nullopt;
}

void apply_determined_defaults(const ConfigNode& root, ExperimentConfig& out) {
  const std::optional<std::string> because = first_determined_key(root);
  if (!because) return;
  auto& defaults = out.determined_defaults;
  defaults.because = *because;
  const ConfigNode* searcher = root.find("searcher");
  if ((out.searcher.name == "asha" || out.searcher.name == "hyperband") &&
      !writes(searcher, "divisor")) {
    out.searcher.divisor = 4;
    defaults.values.emplace_back("searcher.divisor", 4);
  }
  if (out.searcher.name != "single" && !writes(searcher, "max_concurrent_trials")) {
    out.searcher.max_concurrent_trials = 16;
    defaults.values.emplace_back("searcher.max_concurrent_trials", 16);
  }
  if (!writes(&root, "max_restarts")) {
    out.max_restarts = 5;
    defaults.values.emplace_back("max_restarts", 5);
  }
  // Determined's own policy for CUDA running out of memory, unless the config names its own
  // policy so (Determined merges by name the same way).
  const bool named = std::any_of(out.log_policies.begin(), out.log_policies.end(),
                                 [](const LogPolicy& p) { return p.name == "CUDA OOM"; });
  if (!named) {
    out.log_policies.insert(
        out.log_policies.begin(),
        LogPolicy{"CUDA OOM", ".*CUDA out of memory.*", LogPolicy::Action::kCancelRetries, ""});
    defaults.values.emplace_back("log_policies",
                                 Json::array({Json{{"name", "CUDA OOM"},
                                                   {"pattern", ".*CUDA out of memory.*"},
                                                   {"action", "cancel_retries"}}}));
  }
}

std::vector<LogPolicy> read_log_policies(const ConfigNode& node,
                                         std::vector<std::string>& warnings) {
  if (node.kind == ConfigNode::Kind::kNull) return {};
  if (node.kind != ConfigNode::Kind::kList)
    fail(node, "log_policies",
         "must be a list of {name, pattern, action}, such as [{name: OOM, pattern: "
         "'.*CUDA out of memory.*', action: cancel_retries}], got " +
             describe(node));
  std::vector<LogPolicy> out;
  for (size_t i = 0; i < node.items.size(); ++i) {
    const ConfigNode& item = node.items[i];
    const std::string key = "log_policies[" + std::to_string(i) + "]";
    MapReader entry(item, key);
    static constexpr std::string_view kKeys[] = {"name", "pattern", "action"};
    entry.reject_unknown(kKeys);
    LogPolicy policy;
    policy.where = item.where;
    policy.name = entry.get_string("name").value_or("");
    if (const ConfigNode* pattern = entry.get("pattern")) {
      policy.pattern = read_string(*pattern, key + ".pattern");
      if (auto error = LogPolicyMatcher::pattern_error(policy.pattern))
        fail(*pattern, key + ".pattern", "is not a regular expression cairn can use: " + *error);
    }
    if (const ConfigNode* action = entry.get("action")) {
      policy.action = read_action(*action, key + ".action");
      if (policy.pattern.empty())
        fail(*action, key + ".action", "needs a pattern: the lines it applies to");
      if (policy.action == LogPolicy::Action::kExcludeNode)
        warnings.push_back(action->where + ": " + key +
                           ".action: exclude_node is Determined's cluster setting, ignored: "
                           "trials run on this machine (a matching failure is restarted as usual)");
    }
    if (policy.name.empty() && policy.pattern.empty()) fail(item, key, "needs a name or a pattern");
    out.push_back(std::move(policy));
  }
  return out;
}

void read_determined_periods(const ConfigNode& root, ExperimentConfig& out) {
  for (const MapEntry& entry : root.entries) {
    if (const TrialApiKey* k = find_trial_api_key(entry.key)) {
      out.warnings.push_back(
          entry.key_where + ": " + entry.key +
          ": Determined's Trial API setting, ignored: " + std::string(k->instead));
      continue;
    }
    if (entry.key != "min_checkpoint_period" || entry.value.kind == ConfigNode::Kind::kNull)
      continue;
    // checkpoint.period, in the unit of the searcher's lengths: a plain number, or one unit
    // that is the searcher's (max_length's, or time_metric's name).
    const ConfigNode* period = &entry.value;
    std::string unit;
    if (period->is_map()) {
      if (period->entries.size() != 1)
        fail(*period, "min_checkpoint_period", "give one unit, such as {batches: 100}");
      unit = period->entries.front().key;
      period = &period->entries.front().value;
    }
    const std::string key =
        unit.empty() ? "min_checkpoint_period" : "min_checkpoint_period." + unit;
    const int64_t n = read_int(*period, key);
    if (n < 1) fail(*period, key, "must be at least 1, got " + std::to_string(n));
    const std::string& searcher_unit =
        out.searcher.time_metric.empty() ? out.searcher.length_unit : out.searcher.time_metric;
    if (!unit.empty() && !searcher_unit.empty() && unit != searcher_unit)
      fail(entry.value, "min_checkpoint_period",
           "is in " + unit + " but the searcher's lengths are in " + searcher_unit +
               "; write it in " + searcher_unit);
    if (writes(root.find("checkpoint"), "period")) {
      out.warnings.push_back(entry.key_where +
                             ": min_checkpoint_period: checkpoint.period, which the config also "
                             "writes, wins");
      continue;
    }
    out.checkpoint.period = n;
  }
}

}  // namespace cairn::config

namespace cairn {

void drop_determined_defaults(ExperimentConfig& config) {
  const ExperimentConfig cairn_defaults;
  const SearcherConfig searcher_defaults;
  for (const auto& [key, value] : config.determined_defaults.values) {
    if (key == "searcher.divisor") config.searcher.divisor = searcher_defaults.divisor;
    if (key == "searcher.max_concurrent_trials")
      config.searcher.max_concurrent_trials = searcher_defaults.max_concurrent_trials;
    if (key == "max_restarts") config.max_restarts = cairn_defaults.max_restarts;
    if (key == "log_policies" && !config.log_policies.empty() &&
        config.log_policies.front().where.empty())
      config.log_policies.erase(config.log_policies.begin());
  }
  config.determined_defaults = {};
  config.resolved.erase("determined_defaults");
}

}  // namespace cairn
