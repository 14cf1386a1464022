#include "cli/search_view.h"

#include "cli/table.h"

namespace cairn::cli {

namespace {

std::string metric_text(const Json& v) {
  return v.is_number() ? format_number(v.get<double>()) : std::string("n/a");
}

std::string rung_best(const Json& rung, const std::string& exp) {
  const Json results = rung.value("results", Json::array());
  if (!results.is_array() || results.empty()) return "-";
  const Json& best = results[0];  // results are best first
  return exp + "." + std::to_string(best.value("trial", 0)) + " (" +
         metric_text(best.value("metric", Json())) + ")";
}

}  // namespace

void print_search_state(std::ostream& out, const Json& state, const std::string& exp) {
  if (!state.is_object() || state.empty()) return;
  out << "search      " << state.value("trials_created", 0) << " of "
      << state.value("trials_planned", 0) << " trials created, " << state.value("trials_closed", 0)
      << " closed";
  const Json best = state.value("best", Json());
  if (best.is_object())
    out << "; best at a rung " << exp << "." << best.value("trial", 0) << " ("
        << metric_text(best.value("metric", Json())) << " at " << best.value("length", 0) << ")";
  out << "\n";
  const Json brackets = state.value("brackets", Json::array());
  if (!brackets.is_array() || brackets.empty()) return;
  out << "\n";
  Table table({"BRACKET", "RUNG", "EXPECTED", "TRAINING", "COMPLETED", "PROMOTED", "BEST"});
  for (const Json& bracket : brackets) {
    for (const Json& rung : bracket.value("rungs", Json::array())) {
      table.add(
          {std::to_string(bracket.value("bracket", 0)),
           "@" + std::to_string(rung.value("length", 0)), std::to_string(rung.value("expected", 0)),
           std::to_string(rung.value("training", 0)), std::to_string(rung.value("completed", 0)),
           std::to_string(rung.value("promoted", Json::array()).size()), rung_best(rung, exp)});
    }
  }
  table.print(out);
}

}  // namespace cairn::cli
