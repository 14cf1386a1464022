// Internal to the config module. Typed reading of ConfigNodes with errors that name the
// place and the dotted key. Inside the module a mistake is thrown as ConfigError, so the
// validation code reads as a list of rules; parse_experiment_config catches it and turns
// it into a Status, so no exception ever leaves the module.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/config/config_tree.h"

namespace cairn::config {

// The finished one-line message "WHERE: KEY: what".
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string& where, std::string_view key, std::string_view what);
[[noreturn]] inline void fail(const ConfigNode& at, std::string_view key, std::string_view what) {
  fail(at.where, key, what);
}

// "searcher" + "metric" -> "searcher.metric"; "" + "name" -> "name".
std::string join_key(std::string_view parent, std::string_view key);

// How a value reads in a message: 1.5, "8" (quoted), a list, a map, nothing.
std::string describe(const ConfigNode& node);

// The candidate the user most likely meant by `key` (a typo, another case, a prefix).
std::optional<std::string> closest_match(std::string_view key,
                                         const std::vector<std::string>& candidates);

// Readers of one value; each fails with "expected …, got …" under `key`.
int64_t read_int(const ConfigNode& node, std::string_view key);
double read_number(const ConfigNode& node, std::string_view key);  // finite
bool read_bool(const ConfigNode& node, std::string_view key);
// Strings, and numbers as written (a name such as 2024); never null, a bool or a collection.
std::string read_string(const ConfigNode& node, std::string_view key);
// Any scalar as written, for argv and environment values.
std::string read_scalar_text(const ConfigNode& node, std::string_view key);

// An int field: `value` within [min, max].
int checked_int(int64_t value, const ConfigNode& at, std::string_view key, int64_t min,
                int64_t max = 2147483647);

// One map of the config, at dotted `path` ("" for the top level).
class MapReader {
 public:
  // Fails with "expected a map of keys" unless `node` is a map.
  MapReader(const ConfigNode& node, std::string path);

  const ConfigNode& node() const { return node_; }
  const std::string& path() const { return path_; }
  std::string key_path(std::string_view key) const { return join_key(path_, key); }

  // Fails on the first key not in `known`, suggesting the closest known key.
  void reject_unknown(std::span<const std::string_view> known) const;

  // The value, or nullptr when the key is absent or null (null means "use the default").
  const ConfigNode* get(std::string_view key) const;
  // Fails with "is required" at this map when the key is absent or null.
  const ConfigNode& require(std::string_view key, std::string_view hint = "") const;

  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_number(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  // A string that must be one of `allowed`; suggests the closest on a mistake.
  std::optional<std::string> get_choice(std::string_view key,
                                        std::initializer_list<std::string_view> allowed) const;
  // An int field with a default, within [min, max].
  int int_or(std::string_view key, int fallback, int64_t min, int64_t max = 2147483647) const;

 private:
  const ConfigNode& node_;
  std::string path_;
};

}  // namespace cairn::config
