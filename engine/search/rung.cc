#include "engine/search/rung.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace cairn {

Json metric_json(double metric) {
  return std::isfinite(metric) ? Json(metric) : Json(nullptr);
}

namespace {

bool ranks_before(const RungEntry& a, const RungEntry& b) {
  const bool a_errored = a.state == RungEntry::State::kErrored;
  const bool b_errored = b.state == RungEntry::State::kErrored;
  return std::tie(a_errored, a.loss, a.trial) < std::tie(b_errored, b.loss, b.trial);
}

const char* state_name(RungEntry::State state) {
  switch (state) {
    case RungEntry::State::kWaiting:
      return "waiting";
    case RungEntry::State::kPromoted:
      return "promoted";
    case RungEntry::State::kClosed:
      return "closed";
    case RungEntry::State::kErrored:
      return "errored";
  }
  return "";
}

}  // namespace

void Rung::insert(RungEntry entry) {
  auto at = std::upper_bound(ranked_.begin(), ranked_.end(), entry, ranks_before);
  ranked_.insert(at, entry);
}

RungEntry* Rung::find(int64_t trial) {
  for (RungEntry& entry : ranked_)
    if (entry.trial == trial) return &entry;
  return nullptr;
}

void Rung::add(int64_t trial, double metric, double loss) {
  insert(RungEntry{trial, metric, loss, RungEntry::State::kWaiting});
}

void Rung::add_errored(int64_t trial) {
  insert(RungEntry{trial, NAN, HUGE_VAL, RungEntry::State::kErrored});
}

void Rung::mark_errored(int64_t trial) {
  RungEntry* entry = find(trial);
  if (entry == nullptr || entry->state == RungEntry::State::kErrored) return;
  RungEntry moved = *entry;
  moved.state = RungEntry::State::kErrored;
  ranked_.erase(ranked_.begin() + (entry - ranked_.data()));
  insert(moved);
}

void Rung::mark_closed(int64_t trial) {
  if (RungEntry* entry = find(trial); entry && entry->state == RungEntry::State::kWaiting)
    entry->state = RungEntry::State::kClosed;
}

std::vector<int64_t> Rung::promote_best(int64_t count) {
  std::vector<int64_t> promoted;
  const auto top = std::min<int64_t>(std::max<int64_t>(count, 0), size());
  for (int64_t i = 0; i < top; ++i) {
    RungEntry& entry = ranked_[i];
    if (entry.state != RungEntry::State::kWaiting) continue;
    entry.state = RungEntry::State::kPromoted;
    promoted.push_back(entry.trial);
    promoted_.push_back(entry.trial);
  }
  return promoted;
}

std::vector<int64_t> Rung::close_waiting() {
  std::vector<int64_t> closed;
  for (RungEntry& entry : ranked_) {
    if (entry.state != RungEntry::State::kWaiting) continue;
    entry.state = RungEntry::State::kClosed;
    closed.push_back(entry.trial);
  }
  return closed;
}

Json Rung::describe() const {
  Json results = Json::array();
  for (const RungEntry& entry : ranked_) {
    results.push_back(Json{{"trial", entry.trial},
                           {"metric", metric_json(entry.metric)},
                           {"state", state_name(entry.state)}});
  }
  return Json{{"length", length_},
              {"completed", size()},
              {"results", std::move(results)},
              {"promoted", promoted_}};
}

void BestValidation::offer(int64_t trial, int64_t length, double metric, double loss) {
  // Lower loss first; on a tie the longer length (the better-established result), then the
  // lower trial index.
  auto key = [](const Entry& e) { return std::make_tuple(e.loss, -e.length, e.trial); };
  const Entry offered{trial, length, metric, loss};
  if (!best_ || key(offered) < key(*best_)) best_ = offered;
}

Json BestValidation::describe() const {
  if (!best_) return nullptr;
  return Json{
      {"trial", best_->trial}, {"length", best_->length}, {"metric", metric_json(best_->metric)}};
}

}  // namespace cairn
