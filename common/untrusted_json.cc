#include "common/untrusted_json.h"

#include <string>

namespace cairn {

bool json_depth_within(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > max_depth) return false;
        break;
      case ']':
      case '}':
        --depth;  // unbalanced text is the parser's to refuse
        break;
      default:
        break;
    }
  }
  return true;
}

Result<Json> parse_untrusted_json(std::string_view text, size_t max_bytes) {
  if (max_bytes > 0 && text.size() > max_bytes)
    return Status::BadInput("larger than " + std::to_string(max_bytes) + " bytes");
  if (!json_depth_within(text))
    return Status::BadInput("nested deeper than " + std::to_string(kMaxUntrustedJsonDepth) +
                            " levels");
  Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return Status::BadInput("not JSON");
  return value;
}

}  // namespace cairn
