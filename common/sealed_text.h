// A cache file written without fsync and replaced by rename can come back from a crash cut
// short, or with blocks that never reached the disk (zeros) or stale ones (another file's
// old bytes) in the middle, its end intact. A damaged entry can still parse and pair a key
// with a value it never had, so such a file must not be used at all: sealing appends an
// end line carrying the SHA-256 of every byte before it, and a file whose end line is
// missing or does not match is rejected whole.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cairn {

// Appends "end <SHA-256 of `text`, 64 lowercase hex digits>\n". `text` may be binary; when
// it ends in a newline (a text file), the seal is its last line.
void seal(std::string& text);

// The body `file_text` was sealed from: everything before its end line, when that line is
// the last thing in it and its check matches. nullopt otherwise (cut short, damaged, not
// sealed at all). The view points into `file_text`.
std::optional<std::string_view> unseal(std::string_view file_text);

}  // namespace cairn
