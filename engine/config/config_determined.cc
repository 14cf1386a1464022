// Keys of Determined's experiment config that only a cluster needs (docs/determined.md):
// accepted, each with one warning naming what cairn does instead, so that a config written
// for Determined runs here; and the one shape in which such a key still means something here
// (`environment: {environment_variables: …}`, `checkpoint_storage.save_*`).
#include <algorithm>

#include "engine/config/config_reader.h"
#include "engine/config/config_sections.h"

namespace cairn::config {
namespace {

struct IgnoredKey {
  std::string_view key;
  std::string_view instead;
};

constexpr IgnoredKey kClusterKeys[] = {
    {"checkpoint_storage",
     "checkpoints go to cairn's store (.cairn/objects); save_trial_latest, save_trial_best and "
     "save_experiment_best are read as checkpoint.keep_*"},
    {"bind_mounts", "trials run on this machine and see its files"},
    {"profiling", "cairn records no system profile"},
    {"workspace", "a store belongs to its project directory"},
    {"project", "a store belongs to its project directory"},
    {"labels", "kept in the recorded config only"},
    {"description", "kept in the recorded config only"},
    {"scheduling_unit", "cairn has no scheduler"},
    {"debug", "see `cairn logs`"},
    {"slurm", "trials run on this machine"},
    {"pbs", "trials run on this machine"},
    {"optimizations", "it configures Determined's Trial APIs, which cairn does not carry"},
};

constexpr IgnoredKey kClusterResourcesKeys[] = {
    {"resource_pool", "trials run on this machine"},
    {"priority", "cairn has no scheduler"},
    {"weight", "cairn has no scheduler"},
    {"shm_size", "trials run without containers"},
    {"agent_label", "trials run on this machine"},
    {"max_slots", "use searcher.max_concurrent_trials"},
    {"is_single_node", "every trial runs on one machine"},
    {"native_parallel", "cairn starts one process per slot"},
};

constexpr IgnoredKey kClusterEnvironmentKeys[] = {
    {"image", "trials run without containers, in cairn's own environment"},
    {"pod_spec", "trials run without containers"},
    {"registry_auth", "trials run without containers"},
    {"force_pull_image", "trials run without containers"},
    {"add_capabilities", "trials run without containers"},
    {"drop_capabilities", "trials run without containers"},
    {"proxy_ports", "trials run on this machine"},
};

template <size_t N>
const IgnoredKey* find_key(const IgnoredKey (&keys)[N], std::string_view key) {
  for (const IgnoredKey& k : keys)
    if (k.key == key) return &k;
  return nullptr;
}

void warn(std::vector<std::string>& warnings, const MapEntry& entry, const std::string& key,
          std::string_view instead) {
  warnings.push_back(entry.key_where + ": " + key +
                     ": Determined's cluster setting, ignored: " + std::string(instead));
}

// checkpoint_storage.save_trial_latest → checkpoint.keep_trial_latest, … (unless the config
// also writes checkpoint.keep_* itself, which wins).
void read_saves(const ConfigNode& storage, const ConfigNode* checkpoint, CheckpointConfig& out) {
  if (!storage.is_map()) return;
  const std::pair<std::string_view, int CheckpointConfig::*> saves[] = {
      {"save_trial_latest", &CheckpointConfig::keep_trial_latest},
      {"save_trial_best", &CheckpointConfig::keep_trial_best},
      {"save_experiment_best", &CheckpointConfig::keep_experiment_best}};
  for (const auto& [save, field] : saves) {
    const ConfigNode* value = storage.find(save);
    if (value == nullptr) continue;
    const std::string keep = "keep_" + std::string(save.substr(5));
    if (checkpoint != nullptr && checkpoint->find(keep) != nullptr) continue;
    const int64_t n = read_int(*value, "checkpoint_storage." + std::string(save));
    if (n < 0) fail(*value, "checkpoint_storage." + std::string(save), "must be at least 0");
    out.*field = static_cast<int>(n);
  }
}

}  // namespace

bool is_determined_devices(const MapEntry& entry) {
  return entry.key == "devices" && entry.value.kind == ConfigNode::Kind::kList;
}

bool is_determined_resources_key(const MapEntry& entry) {
  return find_key(kClusterResourcesKeys, entry.key) != nullptr || is_determined_devices(entry);
}

std::vector<std::string> determined_cluster_keys() {
  std::vector<std::string> out;
  for (const IgnoredKey& k : kClusterKeys) out.emplace_back(k.key);
  return out;
}

bool is_determined_cluster_key(std::string_view key) {
  return find_key(kClusterKeys, key) != nullptr;
}

void read_determined_cluster_keys(const ConfigNode& root, ExperimentConfig& out) {
  for (const MapEntry& entry : root.entries) {
    const IgnoredKey* k = find_key(kClusterKeys, entry.key);
    if (k == nullptr) continue;
    warn(out.warnings, entry, entry.key, k->instead);
    if (entry.key == "checkpoint_storage")
      read_saves(entry.value, root.find("checkpoint"), out.checkpoint);
  }
}

ConfigNode without_cluster_resources(const ConfigNode& node, std::vector<std::string>& warnings) {
  if (!node.is_map()) return node;
  ConfigNode kept = node;
  kept.entries.clear();
  for (const MapEntry& entry : node.entries) {
    if (const IgnoredKey* k = find_key(kClusterResourcesKeys, entry.key))
      warn(warnings, entry, "resources." + entry.key, k->instead);
    // The value's shape decides: Determined's devices are a list of Docker --device strings,
    // cairn's a word (auto, cpu, gpu).
    else if (is_determined_devices(entry))
      warn(warnings, entry, "resources.devices",
           "trials run without containers and see this machine's devices");
    else
      kept.entries.push_back(entry);
  }
  return kept;
}

bool is_determined_environment(const ConfigNode& node) {
  if (!node.is_map()) return false;
  return std::any_of(node.entries.begin(), node.entries.end(), [](const MapEntry& e) {
    return e.key == "environment_variables" || find_key(kClusterEnvironmentKeys, e.key);
  });
}

std::map<std::string, std::string> read_determined_environment(const ConfigNode& node,
                                                               std::vector<std::string>& warnings) {
  std::map<std::string, std::string> out;
  for (const MapEntry& entry : node.entries) {
    const std::string key = "environment." + entry.key;
    if (const IgnoredKey* k = find_key(kClusterEnvironmentKeys, entry.key)) {
      warn(warnings, entry, key, k->instead);
      continue;
    }
    if (entry.key != "environment_variables")
      fail(entry.key_where, key,
           "unknown key of Determined's environment (it has environment_variables, image, …)");
    // A list of NAME=VALUE, or {cpu: [...], cuda: [...]}: both lists apply here (one process
    // environment, whatever the device).
    std::vector<const ConfigNode*> lists;
    if (entry.value.is_map()) {
      for (const MapEntry& device : entry.value.entries) {
        if (device.key != "cpu" && device.key != "cuda" && device.key != "gpu" &&
            device.key != "rocm")
          fail(device.key_where, key + "." + device.key, "must be cpu, cuda, gpu or rocm");
        lists.push_back(&device.value);
      }
    } else {
      lists.push_back(&entry.value);
    }
    for (const ConfigNode* list : lists) {
      if (list->kind != ConfigNode::Kind::kList)
        fail(*list, key, "must be a list of NAME=VALUE strings");
      for (const ConfigNode& item : list->items) {
        const std::string text = read_scalar_text(item, key);
        const size_t eq = text.find('=');
        if (eq == std::string::npos || eq == 0) fail(item, key, "'" + text + "' is not NAME=VALUE");
        out[text.substr(0, eq)] = text.substr(eq + 1);
      }
    }
  }
  return out;
}

}  // namespace cairn::config
