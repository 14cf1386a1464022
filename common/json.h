// One JSON type for the whole program (nlohmann, ordered so documents keep key order).
#pragma once

#include <nlohmann/json.hpp>

namespace cairn {
using Json = nlohmann::ordered_json;
}  // namespace cairn
