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

// "sampler     tpe: 20 trials from the model, 10 at random; the last model: 29 observations at
// length 1 (for trial 7.30)".
void print_sampler(std::ostream& out, const Json& state, const std::string& exp) {
  const Json sampler = state.value("sampler", Json());
  if (!sampler.is_string()) return;
  out << "sampler     " << sampler.get<std::string>();
  const Json tpe = state.value("tpe", Json());
  if (tpe.is_object()) {
    out << ": " << tpe.value("model_trials", 0) << " trials from the model, "
        << tpe.value("random_trials", 0) << " at random";
    const Json last = tpe.value("last_model", Json());
    if (last.is_object())
      out << "; the last model: " << last.value("observations", 0) << " observations at length "
          << last.value("length", 0) << " (for trial " << exp << "." << last.value("trial", 0)
          << ")";
  }
  out << "\n";
}

// pbt: its generation, and which trial each clone came from.
void print_population(std::ostream& out, const Json& state, const std::string& exp) {
  out << "search      pbt generation " << state.value("generation", 0) << " (to "
      << state.value("length", 0) << " units), " << state.value("trials_created", 0)
      << " trials created";
  const Json best = state.value("best", Json());
  if (best.is_object())
    out << "; best " << exp << "." << best.value("trial", 0) << " ("
        << metric_text(best.value("metric", Json())) << " at " << best.value("length", 0) << ")";
  out << "\n";
  const Json lineage = state.value("lineage", Json::array());
  if (!lineage.is_array() || lineage.empty()) return;
  out << "\n";
  Table table({"TRIAL", "CLONED FROM", "AT"});
  for (const Json& clone : lineage)
    table.add({exp + "." + std::to_string(clone.value("trial", 0)),
               exp + "." + std::to_string(clone.value("parent", 0)),
               std::to_string(clone.value("cloned_at", 0))});
  table.print(out);
}

}  // namespace

void print_search_state(std::ostream& out, const Json& state, const std::string& exp) {
  if (!state.is_object() || state.empty()) return;
  if (state.value("searcher", "") == "pbt") {
    print_population(out, state, exp);
    return;
  }
  out << "search      " << state.value("trials_created", 0) << " of "
      << state.value("trials_planned", 0) << " trials created, " << state.value("trials_closed", 0)
      << " closed";
  const Json best = state.value("best", Json());
  if (best.is_object())
    out << "; best at a rung " << exp << "." << best.value("trial", 0) << " ("
        << metric_text(best.value("metric", Json())) << " at " << best.value("length", 0) << ")";
  out << "\n";
  print_sampler(out, state, exp);
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
