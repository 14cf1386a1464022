#include "engine/coordinator/status_line.h"

#include <cmath>
#include <cstdio>
#include <vector>

namespace cairn {

std::optional<double> eta_seconds(const StatusFacts& f) {
  if (f.elapsed_s <= 0) return std::nullopt;
  if (f.units_planned && *f.units_planned > 0) {
    if (f.units_since_start <= 0) return std::nullopt;
    const double rate = static_cast<double>(f.units_since_start) / f.elapsed_s;
    const double left = static_cast<double>(std::max<int64_t>(*f.units_planned - f.units_done, 0));
    return left / rate;
  }
  if (f.total && *f.total > 0 && f.done_since_start > 0) {
    const double rate = f.done_since_start / f.elapsed_s;
    return std::max(*f.total - f.done, 0) / rate;
  }
  return std::nullopt;
}

std::string format_duration(double seconds) {
  const int64_t s = static_cast<int64_t>(std::max(0.0, std::floor(seconds)));
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  else if (s < 86400)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  else
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s % 86400 / 3600));
  return buf;
}

namespace {

std::string counts(const StatusFacts& f, bool words) {
  std::string out = "trials " + std::to_string(f.done);
  if (f.total) out += "/" + std::to_string(*f.total);
  if (words) {
    out += " done, " + std::to_string(f.running) + " running";
    if (f.paused) out += ", " + std::to_string(f.paused) + " paused";
    if (f.queued) out += ", " + std::to_string(f.queued) + " queued";
  } else {
    out += " " + std::to_string(f.running) + "R";
    if (f.paused) out += " " + std::to_string(f.paused) + "P";
    if (f.queued) out += " " + std::to_string(f.queued) + "Q";
  }
  return out;
}

}  // namespace

std::string render_status_line(const StatusFacts& f, int width) {
  const size_t limit = static_cast<size_t>(std::max(width - 1, 0));
  const std::string time = format_duration(f.elapsed_s) + [&] {
    auto eta = eta_seconds(f);
    return eta ? ", ~" + format_duration(*eta) + " left" : std::string();
  }();
  const std::string time_short = format_duration(f.elapsed_s);
  std::string units;
  if (f.units_planned)
    units = "units " + std::to_string(f.units_done) + "/" + std::to_string(*f.units_planned);
  const std::string best = f.best.empty() ? "" : "best " + f.best;
  const std::string silence =
      f.silent_trial.empty() ? "" : f.silent_trial + " silent " + format_duration(f.silent_s);
  // From the fullest line to the barest; the first that fits is drawn.
  struct Parts {
    bool words, units, best, eta;
  };
  for (Parts p : {Parts{true, true, true, true}, Parts{true, false, true, true},
                  Parts{true, false, false, true}, Parts{true, false, false, false},
                  Parts{false, false, false, false}}) {
    std::vector<std::string> parts{counts(f, p.words)};
    if (p.units && !units.empty()) parts.push_back(units);
    if (p.best && !best.empty()) parts.push_back(best);
    parts.push_back(p.eta ? time : time_short);
    if (!silence.empty()) parts.push_back(silence);
    std::string line;
    for (const std::string& part : parts) line += (line.empty() ? "" : " | ") + part;
    if (line.size() <= limit) return line;
    if (!p.words) return line.substr(0, limit);
  }
  return "";
}

}  // namespace cairn
