// Random identifiers (a session's, an agent process's): lowercase hex of OpenSSL's
// RAND_bytes, so two are never the same by accident and none can be guessed.
//
// Thread-safety: safe from any thread (OpenSSL's generator is).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace cairn {

// 2 × `bytes` hex digits. kFailed ("cannot draw random bytes for WHAT") when the generator
// fails.
Result<std::string> random_hex_id(size_t bytes, std::string_view what);

}  // namespace cairn
