#include "engine/config/config_reader.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace cairn::config {
namespace {

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Edit distance counting a swap of neighbours as one edit (optimal string alignment):
// "max_lenght" is one edit away from "max_length".
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string one_line(std::string_view text) {
  constexpr size_t kMaxShown = 40;
  std::string out;
  for (char c : text.substr(0, kMaxShown)) out += (c == '\n' || c == '\r') ? ' ' : c;
  if (text.size() > kMaxShown) out += "...";
  return out;
}

std::string list_words(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& word : words) out += (out.empty() ? "" : ", ") + word;
  return out;
}

}  // namespace

void fail(const std::string& where, std::string_view key, std::string_view what) {
  std::string message = where + ": ";
  if (!key.empty()) message += std::string(key) + ": ";
  message += what;
  // One line, and no control character from a value reaches the terminal (an escape in a
  // quoted YAML string could recolour it or move the cursor).
  for (char& c : message) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\r' || c == '\t')
      c = ' ';
    else if (u < 0x20 || u == 0x7f)
      c = '?';
  }
  throw ConfigError(message);
}

std::string join_key(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return std::string(parent) + "." + std::string(key);
}

std::string describe(const ConfigNode& node) {
  switch (node.kind) {
    case ConfigNode::Kind::kNull:
      return "nothing";
    case ConfigNode::Kind::kList:
      return "a list";
    case ConfigNode::Kind::kMap:
      return "a map";
    case ConfigNode::Kind::kScalar:
      break;
  }
  if (node.quoted) return "the string \"" + one_line(node.text) + "\"";
  return one_line(node.text);
}

std::optional<std::string> closest_match(std::string_view key,
                                         const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = std::max<size_t>(1, key.size() / 3) + 1;
  for (const std::string& candidate : candidates) {
    if (lowercase(candidate) == lowercase(key)) return candidate;
    size_t distance = edit_distance(key, candidate);
    if (distance < best_distance) best = candidate, best_distance = distance;
  }
  if (best) return best;
  // "min" for "minval": an abbreviation rather than a typo.
  for (const std::string& candidate : candidates) {
    bool abbreviates = key.size() >= 3 && candidate.starts_with(key);
    bool extends = candidate.size() >= 3 && key.starts_with(candidate);
    if (abbreviates || extends) return candidate;
  }
  return std::nullopt;
}

int64_t read_int(const ConfigNode& node, std::string_view key) {
  if (node.kind == ConfigNode::Kind::kScalar) {
    if (auto value = scalar_int(node)) return *value;
    if (scalar_type(node) == ScalarType::kInt) fail(node, key, "is out of range: " + node.text);
  }
  fail(node, key, "expected an integer, got " + describe(node));
}

double read_number(const ConfigNode& node, std::string_view key) {
  if (node.kind == ConfigNode::Kind::kScalar) {
    if (auto value = scalar_number(node)) {
      if (std::isfinite(*value)) return *value;
      fail(node, key, "must be a finite number, got " + describe(node));
    }
  }
  fail(node, key, "expected a number, got " + describe(node));
}

bool read_bool(const ConfigNode& node, std::string_view key) {
  if (node.kind == ConfigNode::Kind::kScalar) {
    if (auto value = scalar_bool(node)) return *value;
  }
  fail(node, key, "expected true or false, got " + describe(node));
}

std::string read_string(const ConfigNode& node, std::string_view key) {
  if (node.kind == ConfigNode::Kind::kScalar) {
    if (scalar_type(node) != ScalarType::kBool) return node.text;
    fail(node, key, "expected a string, got " + node.text + " (quote it to mean the text)");
  }
  fail(node, key, "expected a string, got " + describe(node));
}

std::string read_scalar_text(const ConfigNode& node, std::string_view key) {
  if (node.kind == ConfigNode::Kind::kScalar) return node.text;
  fail(node, key, "expected a string or a number, got " + describe(node));
}

int checked_int(int64_t value, const ConfigNode& at, std::string_view key, int64_t min,
                int64_t max) {
  if (value < min) {
    fail(at, key, "must be at least " + std::to_string(min) + ", got " + std::to_string(value));
  }
  if (value > max) {
    fail(at, key, "must be at most " + std::to_string(max) + ", got " + std::to_string(value));
  }
  return static_cast<int>(value);
}

MapReader::MapReader(const ConfigNode& node, std::string path)
    : node_(node), path_(std::move(path)) {
  if (!node.is_map()) fail(node, path_, "expected a map of keys, got " + describe(node));
}

void MapReader::reject_unknown(std::span<const std::string_view> known) const {
  std::vector<std::string> names(known.begin(), known.end());
  for (const MapEntry& entry : node_.entries) {
    if (std::find(names.begin(), names.end(), entry.key) != names.end()) continue;
    std::optional<std::string> guess = closest_match(entry.key, names);
    fail(entry.key_where, key_path(entry.key),
         guess ? "unknown key; did you mean '" + *guess + "'?"
               : "unknown key; expected one of " + list_words(names));
  }
}

const ConfigNode* MapReader::get(std::string_view key) const {
  const ConfigNode* value = node_.find(key);
  if (value == nullptr || value->kind == ConfigNode::Kind::kNull) return nullptr;
  return value;
}

const ConfigNode& MapReader::require(std::string_view key, std::string_view hint) const {
  std::string suffix = hint.empty() ? "" : "; " + std::string(hint);
  if (const ConfigNode* value = get(key)) return *value;
  if (const ConfigNode* empty = node_.find(key)) fail(*empty, key_path(key), "is empty" + suffix);
  fail(node_, key_path(key), "is required" + suffix);
}

std::optional<int64_t> MapReader::get_int(std::string_view key) const {
  const ConfigNode* value = get(key);
  if (value == nullptr) return std::nullopt;
  return read_int(*value, key_path(key));
}

std::optional<double> MapReader::get_number(std::string_view key) const {
  const ConfigNode* value = get(key);
  if (value == nullptr) return std::nullopt;
  return read_number(*value, key_path(key));
}

std::optional<bool> MapReader::get_bool(std::string_view key) const {
  const ConfigNode* value = get(key);
  if (value == nullptr) return std::nullopt;
  return read_bool(*value, key_path(key));
}

std::optional<std::string> MapReader::get_string(std::string_view key) const {
  const ConfigNode* value = get(key);
  if (value == nullptr) return std::nullopt;
  return read_string(*value, key_path(key));
}

std::optional<std::string> MapReader::get_choice(
    std::string_view key, std::initializer_list<std::string_view> allowed) const {
  std::optional<std::string> value = get_string(key);
  if (!value) return std::nullopt;
  std::vector<std::string> names(allowed.begin(), allowed.end());
  if (std::find(names.begin(), names.end(), *value) != names.end()) return value;
  std::optional<std::string> guess = closest_match(*value, names);
  fail(*get(key), key_path(key),
       "must be one of " + list_words(names) + ", got '" + one_line(*value) + "'" +
           (guess ? "; did you mean '" + *guess + "'?" : ""));
}

int MapReader::int_or(std::string_view key, int fallback, int64_t min, int64_t max) const {
  std::optional<int64_t> value = get_int(key);
  if (!value) return fallback;
  return checked_int(*value, *get(key), key_path(key), min, max);
}

}  // namespace cairn::config
