// YAML text (a config file, or the value of a --set) into a ConfigNode tree. yaml-cpp's
// exceptions stop here: they become ConfigErrors with the file and line.
#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "engine/config/config_reader.h"
#include "engine/config/config_tree.h"

namespace cairn::config {
namespace {

// Aliases can make a small document expand into a huge tree; refuse that early.
constexpr size_t kMaxNodes = 1'000'000;
constexpr int kMaxDepth = 100;
constexpr std::string_view kStringTag = "tag:yaml.org,2002:str";

int line_of(const YAML::Mark& mark) {
  return std::max(mark.line, 0) + 1;
}

// Builds the tree and places each node: at "FILE:LINE", or for a --set value, every node
// at the --set itself.
class TreeBuilder {
 public:
  TreeBuilder(std::string label, bool from_set) : label_(std::move(label)), from_set_(from_set) {}

  ConfigNode build(const YAML::Node& yaml, const std::string& path, int line) {
    if (++nodes_ > kMaxNodes) {
      fail(where_at(line), path, "the document is too large (over a million values)");
    }
    if (depth_ >= kMaxDepth) {
      fail(where_at(line), "", "values are nested too deeply, or an alias (*name) contains itself");
    }
    ++depth_;
    ConfigNode node = build_node(yaml, path, line);
    --depth_;
    return node;
  }

 private:
  ConfigNode build_node(const YAML::Node& yaml, const std::string& path, int line) {
    ConfigNode node;
    node.line = from_set_ ? 0 : line;
    node.where = where_at(line);
    switch (yaml.Type()) {
      case YAML::NodeType::Scalar:
        node.kind = ConfigNode::Kind::kScalar;
        node.text = yaml.Scalar();
        // yaml-cpp tags plain scalars "?" and quoted or block ones "!".
        node.quoted = yaml.Tag() == "!" || yaml.Tag() == kStringTag;
        break;
      case YAML::NodeType::Sequence:
        node.kind = ConfigNode::Kind::kList;
        for (size_t i = 0; i < yaml.size(); ++i) {
          node.items.push_back(
              build(yaml[i], path + "[" + std::to_string(i) + "]", line_of(yaml[i].Mark())));
        }
        break;
      case YAML::NodeType::Map:
        node.kind = ConfigNode::Kind::kMap;
        add_entries(yaml, path, node);
        break;
      default:
        break;  // null
    }
    return node;
  }

  std::string where_at(int line) const {
    return from_set_ ? label_ : label_ + ":" + std::to_string(line);
  }

  // YAML's merge key: `<<: *base` (or a list of them) adds the keys of those maps that this
  // map does not write itself; yaml-cpp leaves it to us. Shared settings written once under
  // an anchor are common in configs brought from elsewhere.
  static bool is_merge_key(const YAML::Node& key) {
    return key.IsScalar() && key.Scalar() == "<<" && key.Tag() != "!" && key.Tag() != kStringTag;
  }

  void add_entries(const YAML::Node& yaml, const std::string& path, ConfigNode& map) {
    std::vector<std::pair<YAML::Node, int>> merges;
    for (const auto& pair : yaml) {
      int key_line = line_of(pair.first.Mark());
      if (is_merge_key(pair.first)) {
        merges.emplace_back(pair.second, key_line);
        continue;
      }
      std::string key = key_text(pair.first, path, key_line);
      for (const MapEntry& earlier : map.entries) {
        if (earlier.key != key) continue;
        std::string first =
            from_set_ ? "" : " (first written on line " + std::to_string(earlier.key_line) + ")";
        fail(where_at(key_line), join_key(path, key), "duplicate key" + first);
      }
      // A block map or list starts on the line after its key, and yaml-cpp places a
      // missing value on the next token; the key's line is where a reader looks.
      const YAML::Node& value = pair.second;
      int value_line = value.IsScalar() ? line_of(value.Mark()) : key_line;
      map.entries.push_back(MapEntry{key, where_at(key_line), from_set_ ? 0 : key_line,
                                     build(value, join_key(path, key), value_line)});
    }
    for (const auto& [value, key_line] : merges) merge_into(value, key_line, path, map);
  }

  // The maps of one `<<:` value, the first ones winning over later ones as YAML says; a key
  // this map writes itself wins over all of them.
  void merge_into(const YAML::Node& value, int key_line, const std::string& path, ConfigNode& map) {
    std::vector<YAML::Node> sources;
    if (value.IsMap()) sources.push_back(value);
    if (value.IsSequence())
      for (size_t i = 0; i < value.size(); ++i) sources.push_back(value[i]);
    if (sources.empty() || !std::all_of(sources.begin(), sources.end(),
                                        [](const YAML::Node& n) { return n.IsMap(); })) {
      fail(where_at(key_line), join_key(path, "<<"),
           "a merge key takes a map (<<: *name) or a list of maps (<<: [*a, *b])");
    }
    for (const YAML::Node& source : sources) {
      ConfigNode merged = build(source, path, line_of(source.Mark()));
      for (MapEntry& entry : merged.entries)
        if (map.find(entry.key) == nullptr) map.entries.push_back(std::move(entry));
    }
  }

  std::string key_text(const YAML::Node& key, const std::string& path, int key_line) const {
    if (key.IsScalar()) {
      ConfigNode scalar{.kind = ConfigNode::Kind::kScalar,
                        .text = key.Scalar(),
                        .quoted = key.Tag() == "!" || key.Tag() == kStringTag};
      if (scalar.text.empty())
        fail(where_at(key_line), path, "a key is empty; every key needs a name");
      if (scalar_type(scalar) == ScalarType::kString) return scalar.text;
      fail(where_at(key_line), join_key(path, scalar.text),
           "a key must be a string; quote it (\"" + scalar.text + "\") to use it as one");
    }
    fail(where_at(key_line), path,
         key.IsNull() ? "a key is empty; every key needs a name"
                      : "a key must be a string, not a list or a map");
  }

  std::string label_;
  bool from_set_;
  size_t nodes_ = 0;
  int depth_ = 0;
};

}  // namespace

ConfigNode parse_yaml_document(std::string_view text, const std::string& file_label) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    throw ConfigError(file_label + ":" + std::to_string(line_of(e.mark)) +
                      ": yaml syntax error: " + e.msg);
  }
  // A file that ends with `---` has an empty document after it: nothing to refuse.
  while (documents.size() > 1 && documents.back().IsNull()) documents.pop_back();
  if (documents.empty()) {
    return ConfigNode{.where = file_label + ":1", .line = 1};
  }
  if (documents.size() > 1) {
    fail(file_label + ":" + std::to_string(line_of(documents[1].Mark())), "",
         "a second YAML document (---) follows the first; a config is one document");
  }
  TreeBuilder builder(file_label, /*from_set=*/false);
  return builder.build(documents[0], "", line_of(documents[0].Mark()));
}

ConfigNode parse_set_value(std::string_view value_text, const std::string& where,
                           const std::string& key) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(std::string(value_text));
  } catch (const YAML::Exception& e) {
    fail(where, key, "yaml syntax error: " + e.msg);
  }
  // YAML::Load kept the first of several documents and dropped the rest without a word.
  while (documents.size() > 1 && documents.back().IsNull()) documents.pop_back();
  if (documents.size() > 1)
    fail(where, key, "the value holds a second YAML document (---); a value is one document");
  const YAML::Node yaml = documents.empty() ? YAML::Node() : documents[0];
  TreeBuilder builder(where, /*from_set=*/true);
  return builder.build(yaml, key, 0);
}

}  // namespace cairn::config
