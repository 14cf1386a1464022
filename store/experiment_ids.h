// The ids users type for experiments and trials: "7" names an experiment, "7.3" its trial 3.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace cairn {

struct ParsedId {
  int64_t experiment = 0;
  int64_t trial = 0;  // 0: the id names an experiment
};

// Positive numbers of at most 12 digits; anything else is kBadInput naming the text.
Result<ParsedId> parse_id(const std::string& text);

}  // namespace cairn
