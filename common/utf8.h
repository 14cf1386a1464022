// Whether bytes are well-formed UTF-8, as JSON text must be (RFC 8259 §8.1).
//
// Thread-safety: a pure function.
#pragma once

#include <string_view>

namespace cairn {

// True when `bytes` is well-formed UTF-8 (Unicode §3.9, table 3-7): no overlong forms, no
// surrogates (U+D800..U+DFFF), nothing above U+10FFFF, no sequence cut short — exactly what
// a JSON encoder can carry as text without replacing a byte. A multi-byte character split
// between two pieces of a stream makes both pieces fail.
bool is_utf8(std::string_view bytes);

}  // namespace cairn
