// The smaller sections: resources, checkpoint, reproducibility, data, environment, notify.
#include "engine/config/config_sections.h"

#include <algorithm>
#include <cctype>

#include "engine/config/config_reader.h"

namespace cairn::config {
namespace {

// Set by cairn for every trial (SPEC §4); a config that set them would break the trial.
constexpr std::string_view kTrialVariables[] = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};

bool is_host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_';
}

// host:port, host being a name, an IPv4 address or a bracketed IPv6 address.
bool is_host_port(std::string_view text) {
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::string_view host = text.substr(0, colon), port = text.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(),
                   [](unsigned char c) { return std::isdigit(c) != 0; })) {
    return false;
  }
  if (int number = std::stoi(std::string(port)); number < 1 || number > 65535) return false;
  if (host.front() == '[') {
    return host.size() > 2 && host.back() == ']' &&
           std::all_of(host.begin() + 1, host.end() - 1, [](unsigned char c) {
             return std::isxdigit(c) != 0 || c == ':' || c == '.';
           });
  }
  return std::all_of(host.begin(), host.end(), is_host_char);
}

std::string check_peer(const std::string& peer, const ConfigNode& at, const std::string& key) {
  if (!is_host_port(peer)) {
    fail(at, key, "expected none, auto or host:port (such as 10.0.0.2:7070), got '" + peer + "'");
  }
  return peer;
}

void read_peers(const ConfigNode& node, ResourcesConfig& out) {
  const std::string key = "resources.peers";
  if (node.kind == ConfigNode::Kind::kList) {
    for (size_t i = 0; i < node.items.size(); ++i) {
      std::string item_key = key + "[" + std::to_string(i) + "]";
      out.peers.push_back(
          check_peer(read_string(node.items[i], item_key), node.items[i], item_key));
    }
    out.peers_mode = out.peers.empty() ? "none" : "list";
    return;
  }
  std::string text = read_string(node, key);
  if (text == "none" || text == "auto") {
    out.peers_mode = text;
    return;
  }
  // The same comma-separated form as `cairn run --peers`.
  for (size_t start = 0; start <= text.size();) {
    size_t comma = std::min(text.find(',', start), text.size());
    out.peers.push_back(check_peer(text.substr(start, comma - start), node, key));
    start = comma + 1;
  }
  out.peers_mode = "list";
}

bool is_env_name(std::string_view name) {
  auto word_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  };
  return !name.empty() && std::isdigit(static_cast<unsigned char>(name[0])) == 0 &&
         std::all_of(name.begin(), name.end(), word_char);
}

void check_env_name(const MapEntry& entry) {
  const std::string key = "environment." + entry.key;
  if (!is_env_name(entry.key)) {
    fail(entry.key_where, key,
         "is not a valid variable name (letters, digits and _, not starting with a digit)");
  }
  if (entry.key.starts_with("CAIRN_")) {
    fail(entry.key_where, key, "CAIRN_* variables are set by cairn itself and cannot be set here");
  }
  for (std::string_view reserved : kTrialVariables) {
    if (entry.key == reserved) {
      fail(entry.key_where, key, "is set by cairn for each trial (as torchrun does)");
    }
  }
}

}  // namespace

ResourcesConfig read_resources(const ConfigNode& node) {
  MapReader resources(node, "resources");
  resources.reject_unknown(kResourcesKeys);
  ResourcesConfig out;
  out.slots_per_trial = resources.int_or("slots_per_trial", 1, 1);
  out.devices = resources.get_choice("devices", {"auto", "cpu", "gpu"}).value_or("auto");
  if (const ConfigNode* peers = resources.get("peers")) read_peers(*peers, out);
  if (const ConfigNode* slots = resources.get("slots_per_trial"))
    out.slots_per_trial_where = slots->where;
  if (const ConfigNode* devices = resources.get("devices")) out.devices_where = devices->where;
  return out;
}

CheckpointConfig read_checkpoint(const ConfigNode& node) {
  MapReader checkpoint(node, "checkpoint");
  checkpoint.reject_unknown(kCheckpointKeys);
  CheckpointConfig out;
  if (std::optional<int64_t> period = checkpoint.get_int("period")) {
    // 0 is what the protocol already meant by a period below 1 (CAIRN_CHECKPOINT_PERIOD, the
    // SDKs' checkpoint_due): no periodic checkpoints, only at the searcher's decision points
    // and when the trial is asked to stop. Below 0 means nothing more.
    if (*period < 0) {
      fail(*checkpoint.get("period"), "checkpoint.period",
           "must be 0 (only at decision points and stops) or more, got " + std::to_string(*period));
    }
    out.period = *period;
  }
  out.keep_trial_latest = checkpoint.int_or("keep_trial_latest", 1, 0);
  out.keep_trial_best = checkpoint.int_or("keep_trial_best", 1, 0);
  out.keep_experiment_best = checkpoint.int_or("keep_experiment_best", 0, 0);
  return out;
}

ReproducibilityConfig read_reproducibility(const ConfigNode& node) {
  MapReader reproducibility(node, "reproducibility");
  reproducibility.reject_unknown(kReproducibilityKeys);
  ReproducibilityConfig out;
  // Determined's experiment_seed is the experiment's seed, as seed is (docs/determined.md).
  const ConfigNode* seed = reproducibility.get("seed");
  std::string seed_key = "reproducibility.seed";
  // With both (`cairn reproduce` sets seed over a config's experiment_seed), seed wins.
  if (const ConfigNode* experiment_seed = reproducibility.get("experiment_seed");
      experiment_seed != nullptr && seed == nullptr) {
    seed = experiment_seed;
    seed_key = "reproducibility.experiment_seed";
  }
  if (seed != nullptr) {
    out.seed = scalar_uint(*seed);
    if (!out.seed) {
      bool is_int = seed->kind == ConfigNode::Kind::kScalar && !seed->quoted &&
                    scalar_type(*seed) == ScalarType::kInt;
      fail(*seed, seed_key,
           (is_int && seed->text[0] != '-' ? "is out of range (at most 2^64-1), got "
                                           : "expected a non-negative integer, got ") +
               describe(*seed));
    }
  }
  out.deterministic = reproducibility.get_bool("deterministic").value_or(false);
  out.snapshot_limit_mb = reproducibility.int_or("snapshot_limit_mb", out.snapshot_limit_mb, 1);
  return out;
}

std::vector<std::string> read_data(const ConfigNode& node) {
  if (node.kind == ConfigNode::Kind::kMap) {
    fail(node, "data", "expected a path or a list of paths, got " + describe(node));
  }
  bool single = node.kind == ConfigNode::Kind::kScalar;
  const std::vector<ConfigNode>& items = single ? std::vector<ConfigNode>{node} : node.items;
  std::vector<std::string> paths;
  for (size_t i = 0; i < items.size(); ++i) {
    std::string key = single ? "data" : "data[" + std::to_string(i) + "]";
    paths.push_back(read_string(items[i], key));
    if (paths.back().empty()) fail(items[i], key, "is an empty path");
  }
  return paths;
}

void check_data_exists(const ConfigNode& node, const std::filesystem::path& workdir) {
  const std::vector<std::string> paths = read_data(node);
  const bool single = node.kind == ConfigNode::Kind::kScalar;
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::filesystem::path path(paths[i]);
    const std::filesystem::path full = path.is_absolute() ? path : workdir / path;
    std::error_code error;
    if (std::filesystem::exists(full, error)) continue;
    std::string hint = paths[i].starts_with("~") ? " (~ is not expanded; write the full path)"
                       : path.is_absolute()      ? ""
                                                 : " (data paths are relative to the workdir)";
    fail(single ? node : node.items[i], single ? "data" : "data[" + std::to_string(i) + "]",
         full.lexically_normal().string() + " does not exist" + hint);
  }
}

std::vector<int> read_permanent_exit_codes(const ConfigNode& node) {
  const char* key = "permanent_exit_codes";
  if (node.kind != ConfigNode::Kind::kList)
    fail(node, key, "expected a list of exit statuses such as [2], got " + describe(node));
  std::vector<int> codes;
  for (size_t i = 0; i < node.items.size(); ++i) {
    const std::string item_key = std::string(key) + "[" + std::to_string(i) + "]";
    const int64_t code = read_int(node.items[i], item_key);
    // 0 is success; above 255 no process can exit with it.
    if (code < 1 || code > 255)
      fail(node.items[i], item_key,
           "must be an exit status from 1 to 255, got " + std::to_string(code));
    codes.push_back(static_cast<int>(code));
  }
  return codes;
}

std::map<std::string, std::string> read_environment(const ConfigNode& node) {
  MapReader environment(node, "environment");
  std::map<std::string, std::string> out;
  for (const MapEntry& entry : node.entries) {
    check_env_name(entry);
    const std::string key = "environment." + entry.key;
    if (entry.value.kind == ConfigNode::Kind::kNull) {
      fail(entry.value, key, "has no value; write \"\" for an empty one");
    }
    out[entry.key] = read_scalar_text(entry.value, key);
  }
  return out;
}

namespace {

void check_webhook_url(const ConfigNode& at, const std::string& key, const std::string& url) {
  bool http = url.starts_with("http://") && url.size() > 7;
  bool https = url.starts_with("https://") && url.size() > 8;
  // The URL is a secret (it carries a token): only its scheme is repeated.
  if (!http && !https)
    fail(at, key,
         "must be an http:// or https:// URL, got '" + url.substr(0, url.find("://")) + "…'");
  for (char c : url)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      fail(at, key, "must be a URL without spaces or control characters");
}

std::string read_env_name(const MapReader& notify, std::string_view name) {
  std::optional<std::string> value = notify.get_string(name);
  if (!value) return "";
  if (!is_env_name(*value))
    fail(*notify.get(name), notify.key_path(name),
         "must name an environment variable (letters, digits and _), got '" + *value + "'");
  return *value;
}

}  // namespace

NotifyConfig read_notify(const ConfigNode& node) {
  MapReader notify(node, "notify");
  notify.reject_unknown(kNotifyKeys);
  NotifyConfig out;
  if (const ConfigNode* webhook = notify.get("webhook")) {
    if (webhook->kind == ConfigNode::Kind::kMap)
      fail(*webhook, "notify.webhook", "expected a URL or a list of URLs, got a map");
    const bool single = webhook->kind == ConfigNode::Kind::kScalar;
    const std::vector<ConfigNode>& items =
        single ? std::vector<ConfigNode>{*webhook} : webhook->items;
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string key =
          single ? "notify.webhook" : "notify.webhook[" + std::to_string(i) + "]";
      out.webhooks.push_back(read_string(items[i], key));
      check_webhook_url(items[i], key, out.webhooks.back());
    }
  }
  out.webhook_env = read_env_name(notify, "webhook_env");
  out.secret_env = read_env_name(notify, "secret_env");
  if (const ConfigNode* on = notify.get("on")) {
    const bool single = on->kind == ConfigNode::Kind::kScalar;
    if (on->kind == ConfigNode::Kind::kMap)
      fail(*on, "notify.on", "expected a list of events such as [end, trial_error], got a map");
    const std::vector<ConfigNode>& items = single ? std::vector<ConfigNode>{*on} : on->items;
    out.on.clear();
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string key = single ? "notify.on" : "notify.on[" + std::to_string(i) + "]";
      const std::string event = read_string(items[i], key);
      if (event == "end")
        out.on.push_back(NotifyEvent::kEnd);
      else if (event == "trial_error")
        out.on.push_back(NotifyEvent::kTrialError);
      else if (event == "best_improved")
        out.on.push_back(NotifyEvent::kBestImproved);
      else
        fail(items[i], key, "must be one of end, trial_error, best_improved, got '" + event + "'");
    }
  }
  if (!out.enabled() && (notify.get("on") || !out.secret_env.empty()))
    fail(node, "notify",
         "says when and how to notify but not where: add notify.webhook or "
         "notify.webhook_env");
  return out;
}

}  // namespace cairn::config
