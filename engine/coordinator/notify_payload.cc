#include "engine/coordinator/notify_payload.h"

#include <unistd.h>

#include "common/number_text.h"

namespace cairn {

namespace {

Json experiment_fields(const NotifyExperiment& exp) {
  return Json{{"id", exp.id}, {"name", exp.name}, {"state", exp.state}};
}

std::string experiment_words(const NotifyExperiment& exp) {
  std::string out = "experiment " + std::to_string(exp.id);
  if (!exp.name.empty()) out += " '" + exp.name + "'";
  return out;
}

Json base(const char* event, const NotifyExperiment& exp, std::string text) {
  const std::string hint = "cairn show " + std::to_string(exp.id);
  return Json{{"text", std::move(text)},
              {"event", event},
              {"experiment", experiment_fields(exp)},
              {"host", exp.host},
              {"hint", hint},
              {"timestamp", static_cast<int64_t>(std::time(nullptr))}};
}

Json best_fields(const NotifyBest& best) {
  return Json{{"trial", best.trial}, {"metric", best.metric}, {"value", best.value}};
}

std::string best_words(const NotifyBest& best) {
  return "best trial " + best.trial + " (" + best.metric + " " + format_number(best.value) + ")";
}

}  // namespace

Json experiment_end_payload(const NotifyExperiment& exp, const NotifyCounts& counts,
                            const std::optional<NotifyBest>& best) {
  std::string text = "cairn: " + experiment_words(exp) + " " + exp.state;
  if (!exp.host.empty()) text += " on " + exp.host;
  text += ": " + std::to_string(counts.completed) + " of " + std::to_string(counts.total) +
          " trials completed";
  if (counts.errored > 0) text += ", " + std::to_string(counts.errored) + " errored";
  if (best) text += "; " + best_words(*best);
  text += " (cairn show " + std::to_string(exp.id) + ")";
  Json out = base(notify_event_name(NotifyEvent::kEnd), exp, std::move(text));
  out["trials"] =
      Json{{"total", counts.total}, {"completed", counts.completed}, {"errored", counts.errored}};
  out["best"] = best ? best_fields(*best) : Json(nullptr);
  return out;
}

Json trial_error_payload(const NotifyExperiment& exp, const std::string& trial,
                         const std::string& why, int restarts) {
  std::string text = "cairn: trial " + trial + " of " + experiment_words(exp);
  if (!exp.host.empty()) text += " on " + exp.host;
  text += " failed: " + why;
  if (restarts > 0) text += " (after " + std::to_string(restarts) + " restarts)";
  text += " (cairn logs " + trial + ")";
  Json out = base(notify_event_name(NotifyEvent::kTrialError), exp, std::move(text));
  out["trial"] = Json{{"id", trial}, {"error", why}, {"restarts", restarts}};
  return out;
}

Json best_improved_payload(const NotifyExperiment& exp, const NotifyBest& best) {
  std::string text = "cairn: " + experiment_words(exp) + ": new " + best_words(best);
  Json out = base(notify_event_name(NotifyEvent::kBestImproved), exp, std::move(text));
  out["best"] = best_fields(best);
  return out;
}

const char* notify_event_name(NotifyEvent event) {
  switch (event) {
    case NotifyEvent::kEnd:
      return "experiment_end";
    case NotifyEvent::kTrialError:
      return "trial_error";
    case NotifyEvent::kBestImproved:
      return "best_improved";
  }
  return "unknown";
}

std::string notify_host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

}  // namespace cairn
