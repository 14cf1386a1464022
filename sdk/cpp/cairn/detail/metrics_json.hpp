// JSON text for metric reports, written straight into a string buffer: the training
// fast path must not build a JSON object per report (see docs/sdk.md, performance).
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace cairn::sdk_detail {

// Appends `text` as a JSON string. Plain ASCII names (the usual case) are copied as
// they are; anything else goes through nlohmann, which escapes and repairs UTF-8.
inline void append_json_string(std::string& out, std::string_view text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) {
      out += nlohmann::json(std::string(text))
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      return;
    }
  }
  out += '"';
  out += text;
  out += '"';
}

// NaN and infinities are not JSON numbers; the protocol sends them as null.
inline void append_number(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  char digits[32];
  auto result = std::to_chars(digits, digits + sizeof digits, value);
  out.append(digits, result.ptr);
}

inline void append_integer(std::string& out, int64_t value) {
  char digits[24];
  auto result = std::to_chars(digits, digits + sizeof digits, value);
  out.append(digits, result.ptr);
}

// {"step":S,"metrics":{"name":value,...}}
inline void append_report(std::string& out, int64_t step,
                          const std::map<std::string, double>& metrics) {
  out += R"({"step":)";
  append_integer(out, step);
  out += R"(,"metrics":{)";
  bool first = true;
  for (const auto& [name, value] : metrics) {
    if (!first) out += ',';
    first = false;
    append_json_string(out, name);
    out += ':';
    append_number(out, value);
  }
  out += "}}";
}

inline nlohmann::json metrics_to_json(const std::map<std::string, double>& metrics) {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [name, value] : metrics) {
    object[name] = std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
  }
  return object;
}

// One line of JSON; never throws on strings that are not valid UTF-8.
inline std::string to_line(const nlohmann::json& message) {
  std::string line = message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line += '\n';
  return line;
}

}  // namespace cairn::sdk_detail
