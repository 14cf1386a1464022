// Scalars under the YAML 1.2 core schema, and the tree's conversion to JSON.
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

#include "engine/config/config_tree.h"

namespace cairn::config {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

std::string_view strip_sign(std::string_view text) {
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) text.remove_prefix(1);
  return text;
}

bool all_of(std::string_view text, bool (*pred)(char)) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!pred(c)) return false;
  }
  return true;
}

// YAML 1.2 core ints: [-+]?[0-9]+ | 0o[0-7]+ | 0x[0-9a-fA-F]+
int int_base(std::string_view text) {
  if (text.size() > 2 && text[0] == '0' && text[1] == 'o') return 8;
  if (text.size() > 2 && text[0] == '0' && text[1] == 'x') return 16;
  return 10;
}

bool looks_like_int(std::string_view text) {
  switch (int_base(text)) {
    case 8:
      return all_of(text.substr(2), [](char c) { return c >= '0' && c <= '7'; });
    case 16:
      return all_of(text.substr(2), [](char c) { return std::isxdigit((unsigned char)c) != 0; });
    default:
      return all_of(strip_sign(text), is_digit);
  }
}

bool is_special_float(std::string_view text) {
  std::string_view body = strip_sign(text);
  bool signed_text = body.size() != text.size();
  for (std::string_view inf : {".inf", ".Inf", ".INF"}) {
    if (body == inf) return true;
  }
  return !signed_text && (text == ".nan" || text == ".NaN" || text == ".NAN");
}

// YAML 1.2 core floats: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool looks_like_float(std::string_view text) {
  if (is_special_float(text)) return true;
  std::string_view rest = strip_sign(text);
  size_t i = 0, digits = 0;
  while (i < rest.size() && is_digit(rest[i])) ++i, ++digits;
  if (i < rest.size() && rest[i] == '.') {
    ++i;
    while (i < rest.size() && is_digit(rest[i])) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < rest.size() && (rest[i] == 'e' || rest[i] == 'E')) {
    ++i;
    if (i < rest.size() && (rest[i] == '+' || rest[i] == '-')) ++i;
    size_t exponent_start = i;
    while (i < rest.size() && is_digit(rest[i])) ++i;
    if (i == exponent_start) return false;
  }
  return i == rest.size();
}

template <typename T>
std::optional<T> parse_integer(std::string_view text) {
  int base = int_base(text);
  bool negative = base == 10 && !text.empty() && text[0] == '-';
  std::string_view digits = base == 10 ? strip_sign(text) : text.substr(2);
  // from_chars takes no sign of its own except '-', so put a '-' back by hand.
  std::string buffer = negative ? "-" + std::string(digits) : std::string(digits);
  T value{};
  auto [end, ec] = std::from_chars(buffer.data(), buffer.data() + buffer.size(), value, base);
  if (ec != std::errc() || end != buffer.data() + buffer.size()) return std::nullopt;
  return value;
}

double parse_float(std::string_view text) {
  if (is_special_float(text)) {
    std::string_view body = strip_sign(text);
    if (body == ".nan" || body == ".NaN" || body == ".NAN") {
      return std::numeric_limits<double>::quiet_NaN();
    }
    double inf = std::numeric_limits<double>::infinity();
    return text[0] == '-' ? -inf : inf;
  }
  std::string_view body = text[0] == '+' ? text.substr(1) : text;
  double value = 0;
  std::from_chars(body.data(), body.data() + body.size(), value);  // syntax checked already
  return value;
}

}  // namespace

const ConfigNode* ConfigNode::find(std::string_view key) const {
  for (const MapEntry& entry : entries) {
    if (entry.key == key) return &entry.value;
  }
  return nullptr;
}

ConfigNode* ConfigNode::find(std::string_view key) {
  return const_cast<ConfigNode*>(std::as_const(*this).find(key));
}

ScalarType scalar_type(const ConfigNode& scalar) {
  if (scalar.quoted) return ScalarType::kString;
  if (scalar_bool(scalar)) return ScalarType::kBool;
  if (looks_like_int(scalar.text)) return ScalarType::kInt;
  if (looks_like_float(scalar.text)) return ScalarType::kFloat;
  return ScalarType::kString;
}

std::optional<bool> scalar_bool(const ConfigNode& scalar) {
  if (scalar.quoted) return std::nullopt;
  const std::string& t = scalar.text;
  if (t == "true" || t == "True" || t == "TRUE") return true;
  if (t == "false" || t == "False" || t == "FALSE") return false;
  return std::nullopt;
}

std::optional<int64_t> scalar_int(const ConfigNode& scalar) {
  if (scalar.quoted || !looks_like_int(scalar.text)) return std::nullopt;
  return parse_integer<int64_t>(scalar.text);
}

std::optional<uint64_t> scalar_uint(const ConfigNode& scalar) {
  if (scalar.quoted || !looks_like_int(scalar.text) || scalar.text[0] == '-') return std::nullopt;
  return parse_integer<uint64_t>(scalar.text);
}

std::optional<double> scalar_number(const ConfigNode& scalar) {
  switch (scalar_type(scalar)) {
    case ScalarType::kInt:
      if (auto value = scalar_int(scalar)) return static_cast<double>(*value);
      if (auto value = scalar_uint(scalar)) return static_cast<double>(*value);
      return parse_float(scalar.text);  // beyond 64 bits: a float is the best it can be
    case ScalarType::kFloat:
      return parse_float(scalar.text);
    default:
      return std::nullopt;
  }
}

Json to_json(const ConfigNode& node) {
  switch (node.kind) {
    case ConfigNode::Kind::kNull:
      return nullptr;
    case ConfigNode::Kind::kList: {
      Json list = Json::array();
      for (const ConfigNode& item : node.items) list.push_back(to_json(item));
      return list;
    }
    case ConfigNode::Kind::kMap: {
      Json map = Json::object();
      for (const MapEntry& entry : node.entries) map[entry.key] = to_json(entry.value);
      return map;
    }
    case ConfigNode::Kind::kScalar:
      break;
  }
  switch (scalar_type(node)) {
    case ScalarType::kBool:
      return *scalar_bool(node);
    case ScalarType::kInt:
      if (auto value = scalar_int(node)) return *value;
      if (auto value = scalar_uint(node)) return *value;
      return *scalar_number(node);
    case ScalarType::kFloat:
      return *scalar_number(node);
    case ScalarType::kString:
      break;
  }
  return node.text;
}

}  // namespace cairn::config
