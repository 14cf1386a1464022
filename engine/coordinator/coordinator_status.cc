// The facts of the live status line (engine/coordinator/status_line.h), gathered when
// terminal_ says a redraw is due: at most a few times a second, and only on a terminal, so
// the walk over every trial costs nothing when output is piped.
#include <cstdlib>

#include "common/metric_order.h"
#include "common/number_text.h"
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/trial_state.h"
#include "engine/search/searcher.h"

namespace cairn {

namespace {

// Units the searcher plans in all: every trial's max_length for a sweep (or `single`); for
// hyperband and asha each rung's expected trials times the units it adds to them.
std::optional<int64_t> planned_units(const Json& view, int64_t max_length,
                                     std::optional<int> total) {
  const Json brackets = view.value("brackets", Json::array());
  if (brackets.is_array() && !brackets.empty()) {
    int64_t units = 0;
    for (const Json& bracket : brackets) {
      int64_t previous = 0;
      for (const Json& rung : bracket.value("rungs", Json::array())) {
        const int64_t length = rung.value("length", int64_t{0});
        units += rung.value("expected", int64_t{0}) * std::max<int64_t>(length - previous, 0);
        previous = length;
      }
    }
    return units;
  }
  if (total) return *total * max_length;
  return std::nullopt;
}

// kSilenceShownAfter; tests shorten it (CAIRN_TEST_SILENCE_AFTER, seconds).
double silence_shown_after() {
  static const double seconds = [] {
    const char* text = std::getenv("CAIRN_TEST_SILENCE_AFTER");
    return text && std::atof(text) > 0 ? std::atof(text) : kSilenceShownAfter;
  }();
  return seconds;
}

}  // namespace

void Coordinator::update_status() {
  if (!terminal_.status_due()) return;
  StatusFacts facts;
  const Json view = searcher_->describe();
  if (view.contains("trials_planned") && view["trials_planned"].is_number_integer())
    facts.total = view["trials_planned"].get<int>();
  else if (config_.searcher.name == "single")
    facts.total = 1;
  facts.units_planned = planned_units(view, config_.searcher.max_length, facts.total);
  const auto now = Clock::now();
  const std::string& metric = config_.searcher.metric;
  const MetricOrder order(config_.searcher.smaller_is_better);
  std::optional<double> best;
  std::string best_id;
  for (const auto& [index, trial] : trials_) {
    facts.units_done += trial->record.value("steps_completed", int64_t{0});
    const Json& validated = trial->record["best_validation"];
    if (validated.is_object() && validated.contains(metric) && validated[metric].is_number()) {
      const double v = validated[metric].get<double>();
      if (!best || order.better(v, *best)) {
        best = v;
        best_id = trial_id(index);
      }
    }
    if (trial->finished) {
      ++facts.done;
    } else if (trial->running()) {
      ++facts.running;
      const double quiet = std::chrono::duration<double>(now - trial->last_heard).count();
      if (quiet > silence_shown_after() && quiet > facts.silent_s) {
        facts.silent_s = quiet;
        facts.silent_trial = trial_id(index);
      }
    } else if (trial->state == schema::TrialState::kPaused) {
      ++facts.paused;
    } else {
      ++facts.queued;
    }
  }
  if (best) facts.best = metric + " " + format_number(*best) + " (" + best_id + ")";
  if (!status_baseline_.units) {
    status_baseline_.units = facts.units_done;
    status_baseline_.done = facts.done;
  }
  facts.units_since_start = facts.units_done - *status_baseline_.units;
  facts.done_since_start = facts.done - *status_baseline_.done;
  facts.elapsed_s = std::chrono::duration<double>(now - status_baseline_.start).count();
  terminal_.draw_status(facts);
}

}  // namespace cairn
