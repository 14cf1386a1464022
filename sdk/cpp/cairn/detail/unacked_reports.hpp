// Training reports that cairn may not have stored yet, kept as the JSON text they were
// sent as, so that an orphan checkpoint can carry them (docs/protocol.md, "The channel
// closing is a stop request").
//
// cairn stores every training report it read before a validation or checkpoint_end in
// the same durable batch as that request, and only then acks it: an ack makes all the
// reports sent before its request durable. A request always follows a whole training
// batch (the batch is flushed first), so whole batches are the unit that is kept and
// released: keeping costs one offset per report and no copy, releasing is O(1) per batch.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/detail/metrics_json.hpp"

namespace cairn::sdk_detail {

// The text of one `training` message, built report by report, remembering where each
// report starts so the reports can later be written out one per line.
class TrainingBatch {
 public:
  bool empty() const { return starts_.empty(); }
  size_t reports() const { return starts_.size(); }
  size_t bytes() const { return text_.size(); }

  void add(int64_t step, const std::map<std::string, double>& metrics) {
    if (starts_.empty()) {
      text_ = R"({"type":"training","reports":[)";
    } else {
      text_ += ',';
    }
    starts_.push_back(static_cast<uint32_t>(text_.size()));
    append_report(text_, step, metrics);
  }

  // Hands the whole message line to `write`; the batch itself stays as it was.
  template <class Write>
  void write_line(Write&& write) {
    text_ += "]}\n";
    write(std::string_view(text_));
    text_.resize(text_.size() - 3);
  }

  // Report `i` as it was sent: {"step":S,"metrics":{…}}.
  std::string_view report(size_t i) const {
    size_t end = i + 1 < starts_.size() ? starts_[i + 1] - 1 : text_.size();
    return std::string_view(text_).substr(starts_[i], end - starts_[i]);
  }

  void reserve(size_t bytes, size_t reports) {
    text_.reserve(bytes);
    starts_.reserve(reports);
  }

  // Empties the batch, keeping its memory for the next one.
  void clear() {
    text_.clear();
    starts_.clear();
  }

 private:
  std::string text_;
  // Where each report starts. A batch stays far below 4 GiB (64 KiB plus one report), and
  // a million reports kept cost 4 MB less than with size_t.
  std::vector<uint32_t> starts_;
};

// The step of a report written by append_report: {"step":S,…}.
inline int64_t report_step(std::string_view report) {
  constexpr std::string_view kPrefix = R"({"step":)";
  int64_t step = 0;
  if (report.substr(0, kPrefix.size()) == kPrefix) {
    std::from_chars(report.data() + kPrefix.size(), report.data() + report.size(), step);
  }
  return step;
}

// Appends the reports of `batch` with step <= max_step, one per line.
inline void append_report_lines(std::string& out, const TrainingBatch& batch, int64_t max_step) {
  for (size_t i = 0; i < batch.reports(); ++i) {
    std::string_view report = batch.report(i);
    if (report_step(report) > max_step) continue;
    out += report;
    out += '\n';
  }
}

class UnackedReports {
 public:
  // More than `limit` reports unacknowledged: the oldest batches are dropped (memory
  // bound), and the record stays incomplete until an ack covers them.
  explicit UnackedReports(size_t limit) : limit_(limit) {}

  // Keeps a batch that was sent (or could not be, cairn being gone).
  void add(TrainingBatch batch) {
    count_ += batch.reports();
    batches_.push_back(std::move(batch));
    while (count_ > limit_ && batches_.size() > 1) {
      release_front();
      lost_until_ = first_;
    }
  }

  // Identifies "everything kept so far"; pass it to acknowledge() when cairn acks a
  // request sent right after.
  uint64_t mark() const { return first_ + batches_.size(); }

  void acknowledge(uint64_t mark) {
    while (!batches_.empty() && first_ < mark) release_front();
    acknowledged_ = std::max(acknowledged_, mark);
  }

  // False while reports were dropped for memory and no ack has made them durable since.
  bool complete() const { return lost_until_ <= acknowledged_; }

  // An empty batch to build the next one in, reusing a released one's memory, or sized
  // like the last one (growing a string report by report would copy it again and again).
  TrainingBatch recycled() {
    if (spare_.empty()) {
      TrainingBatch batch;
      if (!batches_.empty()) {
        batch.reserve(batches_.back().bytes() + 3, batches_.back().reports());
      }
      return batch;
    }
    TrainingBatch batch = std::move(spare_.back());
    spare_.pop_back();
    return batch;
  }

  // The kept reports with step <= max_step, one per line, in the order they were made.
  void append_lines(std::string& out, int64_t max_step) const {
    for (const auto& batch : batches_) append_report_lines(out, batch, max_step);
  }

 private:
  static constexpr size_t kSpareBatches = 2;

  void release_front() {
    count_ -= batches_.front().reports();
    if (spare_.size() < kSpareBatches) {
      batches_.front().clear();
      spare_.push_back(std::move(batches_.front()));
    }
    batches_.pop_front();
    ++first_;
  }

  size_t limit_;
  std::deque<TrainingBatch> batches_;
  size_t count_ = 0;           // reports in batches_
  uint64_t first_ = 0;         // the number of batches ever released: batches_[0]'s index
  uint64_t lost_until_ = 0;    // batches before this index were dropped unacknowledged
  uint64_t acknowledged_ = 0;  // the highest mark cairn acknowledged
  std::vector<TrainingBatch> spare_;
};

}  // namespace cairn::sdk_detail
