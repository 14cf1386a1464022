// --set KEY=VALUE: replaces (or adds) one subtree of the config before validation, so a
// value from the command line is checked by exactly the same rules as one in the file.
#include <string>
#include <vector>

#include "engine/config/config_reader.h"
#include "engine/config/config_tree.h"

namespace cairn::config {
namespace {

std::string trim(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return "";
  size_t end = text.find_last_not_of(" \t");
  return std::string(text.substr(begin, end - begin + 1));
}

std::vector<std::string> split_dotted(const std::string& key) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = key.find('.', start);
    parts.push_back(key.substr(start, dot - start));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

ConfigNode empty_map(const std::string& where) {
  return ConfigNode{.kind = ConfigNode::Kind::kMap, .where = where};
}

// The map under `parent` at `key`, created (or replacing a null) when there is none.
ConfigNode& descend(ConfigNode& parent, const std::string& key, const std::string& path,
                    const std::string& where) {
  ConfigNode* child = parent.find(key);
  if (child == nullptr) {
    parent.entries.push_back(MapEntry{key, where, 0, empty_map(where)});
    return parent.entries.back().value;
  }
  if (child->kind == ConfigNode::Kind::kNull) *child = empty_map(where);
  if (!child->is_map()) {
    fail(where, path,
         "is " + describe(*child) + " (at " + child->where + "), not a map, so it has no keys");
  }
  return *child;
}

}  // namespace

void apply_set(ConfigNode& root, const std::string& set_text) {
  const std::string where = "--set " + set_text;
  size_t equals = set_text.find('=');
  std::string key = trim(std::string_view(set_text).substr(0, equals));
  if (equals == std::string::npos || key.empty()) {
    throw ConfigError(where + ": expected KEY=VALUE, such as searcher.max_trials=8");
  }
  std::vector<std::string> parts = split_dotted(key);
  for (const std::string& part : parts) {
    if (part.empty()) fail(where, key, "a dotted key has an empty part");
  }
  ConfigNode value = parse_set_value(std::string_view(set_text).substr(equals + 1), where, key);

  ConfigNode* map = &root;
  std::string path;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    path = join_key(path, parts[i]);
    map = &descend(*map, parts[i], path, where);
  }
  for (MapEntry& entry : map->entries) {
    if (entry.key != parts.back()) continue;
    entry.key_where = where;
    entry.key_line = 0;
    entry.value = std::move(value);
    return;
  }
  map->entries.push_back(MapEntry{parts.back(), where, 0, std::move(value)});
}

}  // namespace cairn::config
