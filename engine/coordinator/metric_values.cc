#include "engine/coordinator/metric_values.h"

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

namespace cairn {
namespace {

bool numeric(const Json& value) {
  return value.is_number() || value.is_null();
}

const char* type_name(const Json& value) {
  if (value.is_string()) return "a string";
  if (value.is_boolean()) return "a boolean";
  if (value.is_array()) return "a list";
  if (value.is_object()) return "an object";
  return "not a number";
}

// A recursive-descent walk of one JSON text that knows where metric values are:
// top-level "reports" → each report → its "metrics" → the values. Everything else is
// skipped without being decoded. It is conservative: it says yes only to text that
// nlohmann::json parses and that has the shape the readers need (an object whose "reports"
// is an array), and leaves anything unusual (escapes, bytes outside printable ASCII,
// numbers that could overflow a double) to the full parser.
class BatchScanner {
 public:
  explicit BatchScanner(std::string_view text) : s_(text) {}

  bool numeric_batch() {
    skip_space();
    if (i_ >= s_.size() || s_[i_] != '{') return false;
    if (!value(Role::kTop, 0)) return false;
    skip_space();
    return i_ == s_.size() && saw_reports_;
  }

 private:
  enum class Role { kTop, kReports, kReport, kMetrics, kMetric, kOther };
  static constexpr int kMaxDepth = 64;

  bool value(Role role, int depth) {
    skip_space();
    if (i_ >= s_.size() || depth > kMaxDepth) return false;
    const char c = s_[i_];
    if (role == Role::kMetric) return c == 'n' ? literal("null") : number();
    if (role == Role::kMetrics && c != '{') return false;
    if (role == Role::kReports) {
      if (c != '[' || saw_reports_) return false;  // a second "reports": the parser decides
      saw_reports_ = true;
    }
    switch (c) {
      case '{':
        return object(role, depth);
      case '[':
        return array(role, depth);
      case '"':
        return string(nullptr);
      case 't':
        return literal("true");
      case 'f':
        return literal("false");
      case 'n':
        return literal("null");
      default:
        return number();
    }
  }

  bool object(Role role, int depth) {
    ++i_;
    skip_space();
    if (consume('}')) return true;
    for (;;) {
      skip_space();
      // Only the keys that lead to metric values are compared, so only they must be plain.
      std::string_view key;
      const bool compared = role == Role::kTop || role == Role::kReport;
      if (!string(compared ? &key : nullptr)) return false;
      skip_space();
      if (!consume(':')) return false;
      Role child = Role::kOther;
      if (role == Role::kTop && key == "reports") child = Role::kReports;
      if (role == Role::kReport && key == "metrics") child = Role::kMetrics;
      if (role == Role::kMetrics) child = Role::kMetric;
      if (!value(child, depth + 1)) return false;
      skip_space();
      if (consume(',')) continue;
      return consume('}');
    }
  }

  bool array(Role role, int depth) {
    ++i_;
    skip_space();
    if (consume(']')) return true;
    const Role child = role == Role::kReports ? Role::kReport : Role::kOther;
    for (;;) {
      if (!value(child, depth + 1)) return false;
      skip_space();
      if (consume(',')) continue;
      return consume(']');
    }
  }

  // A key with an escape might spell "metrics": only the full parser can tell.
  bool string(std::string_view* key) {
    if (!consume('"')) return false;
    const size_t start = i_;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '"') {
        if (key) *key = s_.substr(start, i_ - start);
        ++i_;
        return true;
      }
      // Escapes, control characters and non-ASCII bytes (which must be valid UTF-8) are
      // the full parser's to judge.
      if (c == '\\' || static_cast<unsigned char>(c) < 0x20 ||
          static_cast<unsigned char>(c) >= 0x80)
        return false;
      ++i_;
    }
    return false;
  }

  // JSON's grammar (NaN, Infinity, 0x10, .5 and 01 are not numbers), and a magnitude a
  // double holds: at most 10^300, so 1e400 goes to the parser (which refuses it).
  bool number() {
    consume('-');
    const size_t int_start = i_;
    if (!digits()) return false;
    const size_t int_digits = i_ - int_start;
    if (int_digits > 1 && s_[int_start] == '0') return false;
    if (consume('.') && !digits()) return false;
    long exponent = 0;
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      const bool negative = consume('-');
      if (!negative) consume('+');
      const size_t start = i_;
      if (!digits() || i_ - start > 3) return false;
      exponent = std::strtol(std::string(s_.substr(start, i_ - start)).c_str(), nullptr, 10);
      if (negative) exponent = -exponent;
    }
    return static_cast<long>(int_digits) + exponent <= 300;
  }

  bool digits() {
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    return i_ > start;
  }

  bool literal(const char* word) {
    const size_t n = std::strlen(word);
    if (s_.substr(i_, n) != word) return false;
    i_ += n;
    return true;
  }

  bool consume(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }

  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }

  std::string_view s_;
  size_t i_ = 0;
  bool saw_reports_ = false;
};

}  // namespace

std::string describe_non_numeric_metric(const std::string& name, const Json& value) {
  return "'" + name + "' is " + type_name(value);
}

std::vector<std::string> non_numeric_metrics(const Json& metrics) {
  std::vector<std::string> found;
  if (!metrics.is_object()) return found;
  for (const auto& [name, value] : metrics.items())
    if (!numeric(value)) found.push_back(describe_non_numeric_metric(name, value));
  return found;
}

bool training_batch_is_numeric(std::string_view batch) {
  return BatchScanner(batch).numeric_batch();
}

std::vector<std::string> drop_non_numeric_metrics(Json& batch) {
  std::vector<std::string> dropped;
  std::set<std::string> names;
  if (!batch.is_object() || !batch.contains("reports") || !batch["reports"].is_array())
    return dropped;
  for (Json& report : batch["reports"]) {
    if (!report.is_object() || !report.contains("metrics")) continue;
    Json& metrics = report["metrics"];
    if (!metrics.is_object()) {
      if (names.insert("").second)
        dropped.push_back(std::string("metrics is ") + type_name(metrics));
      metrics = Json::object();
      continue;
    }
    std::vector<std::string> bad;
    for (const auto& [name, value] : metrics.items())
      if (!numeric(value)) {
        bad.push_back(name);
        if (names.insert(name).second) dropped.push_back(describe_non_numeric_metric(name, value));
      }
    for (const std::string& name : bad) metrics.erase(name);
  }
  return dropped;
}

}  // namespace cairn
