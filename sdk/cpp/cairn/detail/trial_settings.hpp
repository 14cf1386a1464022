// What a trial knows from its environment before it talks to cairn (SPEC §4).
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace cairn::sdk_detail {

using Environment = std::map<std::string, std::string>;

struct TrialSettings {
  std::string control;  // CAIRN_CONTROL; empty: standalone
  nlohmann::json hparams = nlohmann::json::object();
  uint64_t seed = 0;
  std::string trial_id;
  std::string experiment_id;
  int64_t steps_completed = 0;
  std::optional<std::filesystem::path> latest_checkpoint;
  int rank = 0;
  int world_size = 1;
  int64_t attempt = 0;  // CAIRN_ATTEMPT: which start of the trial; 0 when unset
  bool deterministic = false;
  int64_t checkpoint_period = 1;
  int64_t max_length = 1;  // the one operation of a standalone run
  std::optional<std::filesystem::path> orphan_dir;
  std::filesystem::path standalone_dir;  // ./checkpoints
  // Standalone: how many of the checkpoints this process committed are kept (<= 0: all).
  // 1 like checkpoint.keep_trial_latest, so period 1 does not fill the project.
  int64_t standalone_keep = 1;
};

inline Environment read_process_environment() {
  Environment environment;
  for (const char* name :
       {"CAIRN_CONTROL", "CAIRN_HPARAMS", "CAIRN_SEED", "CAIRN_TRIAL_ID", "CAIRN_EXPERIMENT_ID",
        "CAIRN_STEPS_COMPLETED", "CAIRN_LATEST_CHECKPOINT", "CAIRN_DETERMINISTIC",
        "CAIRN_CHECKPOINT_PERIOD", "CAIRN_MAX_LENGTH", "CAIRN_ORPHAN_DIR", "RANK", "WORLD_SIZE"}) {
    if (const char* value = std::getenv(name)) environment[name] = value;
  }
  return environment;
}

inline std::string lookup(const Environment& environment, const std::string& name) {
  auto it = environment.find(name);
  return it == environment.end() ? std::string() : it->second;
}

// A malformed number is reported and replaced by the default, as in the Python SDK.
template <typename Integer>
Integer integer_setting(const Environment& environment, const std::string& name, Integer fallback) {
  std::string text = lookup(environment, name);
  if (text.empty()) return fallback;
  Integer value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc() && end == text.data() + text.size()) return value;
  if constexpr (std::is_unsigned_v<Integer>) {  // a negative seed wraps, like Python's % 2**64
    int64_t signed_value{};
    auto [signed_end, signed_ec] =
        std::from_chars(text.data(), text.data() + text.size(), signed_value);
    if (signed_ec == std::errc() && signed_end == text.data() + text.size()) {
      return static_cast<Integer>(signed_value);
    }
  }
  std::fprintf(stderr, "cairn: warning: %s=%s is not an integer; using the default\n", name.c_str(),
               text.c_str());
  return fallback;
}

inline bool parse_settings(const Environment& environment, TrialSettings* settings,
                           std::string* error) {
  settings->control = lookup(environment, "CAIRN_CONTROL");
  std::string hparams = lookup(environment, "CAIRN_HPARAMS");
  if (!hparams.empty()) {
    settings->hparams = nlohmann::json::parse(hparams, nullptr, /*allow_exceptions=*/false);
    if (!settings->hparams.is_object()) {
      *error = "CAIRN_HPARAMS must be a JSON object";
      return false;
    }
  }
  settings->seed = integer_setting<uint64_t>(environment, "CAIRN_SEED", 0);
  settings->trial_id = lookup(environment, "CAIRN_TRIAL_ID");
  settings->experiment_id = lookup(environment, "CAIRN_EXPERIMENT_ID");
  settings->steps_completed = integer_setting<int64_t>(environment, "CAIRN_STEPS_COMPLETED", 0);
  std::string latest = lookup(environment, "CAIRN_LATEST_CHECKPOINT");
  std::error_code ec;
  if (!latest.empty()) settings->latest_checkpoint = std::filesystem::absolute(latest, ec);
  settings->rank = integer_setting<int>(environment, "RANK", 0);
  settings->world_size = std::max(1, integer_setting<int>(environment, "WORLD_SIZE", 1));
  settings->attempt = integer_setting<int64_t>(environment, "CAIRN_ATTEMPT", 0);
  std::string deterministic = lookup(environment, "CAIRN_DETERMINISTIC");
  settings->deterministic = deterministic == "1" || deterministic == "true";
  settings->checkpoint_period = integer_setting<int64_t>(environment, "CAIRN_CHECKPOINT_PERIOD", 1);
  settings->max_length = integer_setting<int64_t>(environment, "CAIRN_MAX_LENGTH", 1);
  std::string orphans = lookup(environment, "CAIRN_ORPHAN_DIR");
  if (!orphans.empty()) settings->orphan_dir = std::filesystem::absolute(orphans, ec);
  settings->standalone_dir = std::filesystem::current_path(ec) / "checkpoints";
  settings->standalone_keep = integer_setting<int64_t>(environment, "CAIRN_KEEP_LATEST", 1);
  return true;
}

}  // namespace cairn::sdk_detail
