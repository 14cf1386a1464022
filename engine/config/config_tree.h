// Internal to the config module. The YAML document as a plain tree in which every value
// remembers where it came from (a file line, or the --set that introduced it), so that
// validation can name the place of each mistake, including after --set rewrote subtrees.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"

namespace cairn::config {

struct MapEntry;

struct ConfigNode {
  enum class Kind { kNull, kScalar, kList, kMap };
  Kind kind = Kind::kNull;
  std::string text;               // kScalar: the value as written, without quotes
  bool quoted = false;            // kScalar: quoted, block or !!str, so always a string
  std::vector<ConfigNode> items;  // kList
  std::vector<MapEntry> entries;  // kMap, in document order, keys unique
  std::string where;              // "FILE:LINE" or "--set KEY=VALUE"
  int line = 0;                   // 1-based; 0 when the value came from --set

  bool is_map() const { return kind == Kind::kMap; }
  const ConfigNode* find(std::string_view key) const;
  ConfigNode* find(std::string_view key);
};

struct MapEntry {
  std::string key;
  std::string key_where;  // where the key itself is written
  int key_line = 0;       // 1-based; 0 when the key came from --set
  ConfigNode value;
};

// What a scalar means under the YAML 1.2 core schema (`yes` is a string, `1e-4` a number).
enum class ScalarType { kString, kBool, kInt, kFloat };
ScalarType scalar_type(const ConfigNode& scalar);
std::optional<bool> scalar_bool(const ConfigNode& scalar);
std::optional<int64_t> scalar_int(const ConfigNode& scalar);    // nullopt: not an int or too big
std::optional<uint64_t> scalar_uint(const ConfigNode& scalar);  // nullopt: not a uint or too big
std::optional<double> scalar_number(const ConfigNode& scalar);  // ints and floats

// The value as JSON: scalars typed by scalar_type, maps keep their order.
Json to_json(const ConfigNode& node);

// Parses one YAML document. Throws ConfigError on a syntax error, a second document, a
// duplicate key or a mapping key that is not a string. An empty document is kNull.
ConfigNode parse_yaml_document(std::string_view text, const std::string& file_label);

// Parses the VALUE of a --set (a YAML scalar or flow collection); every node of it is
// placed at `where` ("--set KEY=VALUE"). Throws ConfigError naming `key` on a mistake.
ConfigNode parse_set_value(std::string_view value_text, const std::string& where,
                           const std::string& key);

// Applies one --set KEY=VALUE to `root` (a map). Throws ConfigError when the text is not
// KEY=VALUE, the value is not YAML, or the path runs through a value that is not a map.
void apply_set(ConfigNode& root, const std::string& set_text);

}  // namespace cairn::config
