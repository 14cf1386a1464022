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
        // Never below 0: text that closes more than it opened must not earn room for
        // deeper nesting after it (the parser refuses such text, but this check does not
        // rely on where it stops).
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return true;
}

Result<Json> parse_untrusted_json(std::string_view text) {
  if (!json_depth_within(text))
    return Status::BadInput("nested deeper than " + std::to_string(kMaxUntrustedJsonDepth) +
                            " levels");
  Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return Status::BadInput("not JSON");
  return value;
}

}  // namespace cairn
