// JSON from bytes cairn did not write itself: the control channel's messages and the files a
// trial's SDK writes while cairn is away (orphan checkpoints and metrics). nlohmann's parser
// accepts any nesting depth, but its serializer and destructor recurse once per level, so a
// hostile or buggy trial could send `{"metadata": [[[…]]]}` 100,000 levels deep and crash the
// coordinator when it stores the value. Everything parsed from such bytes goes through here,
// which refuses, before parsing, text nested deeper than the bound below.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string_view>

#include "common/json.h"
#include "common/status.h"

namespace cairn {

// Deeper than any message or record cairn defines (the deepest, a checkpoint's metadata as a
// user nests it, has room to spare); far below what recursion over a value can exhaust.
inline constexpr int kMaxUntrustedJsonDepth = 64;

// Whether `text`'s arrays and objects nest at most `max_depth` deep (strings and escapes
// inside them are skipped; the text need not be valid JSON). Linear, no allocation.
bool json_depth_within(std::string_view text, int max_depth = kMaxUntrustedJsonDepth);

// The value `text` holds, or kBadInput with one line: "nested deeper than 64 levels" or "not
// JSON". Never throws. (How long a line may be is the reader's to bound: the control
// channel drops lines over ControlConnection::kMaxLineBytes before they get here.)
Result<Json> parse_untrusted_json(std::string_view text);

}  // namespace cairn
