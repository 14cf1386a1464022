// Renders a searcher's state (Searcher::describe(), saved with the experiment) for people:
// the rung table of `cairn show` and `cairn watch`.
#pragma once

#include <ostream>

#include "common/json.h"

namespace cairn::cli {

void print_search_state(std::ostream& out, const Json& state, const std::string& experiment_id);

}  // namespace cairn::cli
