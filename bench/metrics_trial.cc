// Benchmark trial: how much does reporting training metrics through cairn cost a C++
// trial? It reports N training points (one metric, "loss", per step) and times its own
// reporting loop, either through the C++ SDK (under `cairn run`) or, as the baseline,
// by writing the same points as JSON lines to a local file.
//
//   metrics_trial cairn  RESULT.json [N]   under cairn run
//   metrics_trial jsonl  RESULT.json [N]   standalone; writes RESULT.json.jsonl
//
// RESULT.json gets {"mode", "points", "loop_s", "total_s", "cpu_s"}: loop_s is the loop
// alone, total_s also counts until every point is delivered (the file closed, or cairn's
// ack of the validation that follows the last training batch), cpu_s is the CPU time the
// process used in that span (all its threads). bench/metrics_bench.py runs both and prints
// the ratios.
#include <cairn/trial.hpp>

#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double process_cpu_seconds() {
  timespec now{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// Wall and CPU time from construction on.
class Stopwatch {
 public:
  double wall_s() const { return seconds_since(wall_); }
  double cpu_s() const { return process_cpu_seconds() - cpu_; }

 private:
  Clock::time_point wall_ = Clock::now();
  double cpu_ = process_cpu_seconds();
};

// The trial's metric at `step`: cheap, and a double with a full-length decimal form, as
// real losses have.
double loss_at(int64_t step) {
  return 2.5 / (1.0 + 1e-3 * static_cast<double>(step));
}

// What a trial without cairn would do: JSON lines, formatted like the SDK formats them,
// through a buffered stdio stream.
class JsonLinesFile {
 public:
  explicit JsonLinesFile(const std::string& path) : file_(std::fopen(path.c_str(), "w")) {}
  bool ok() const { return file_ != nullptr; }
  void write(int64_t step, const cairn::Metrics& metrics) {
    line_.clear();
    cairn::sdk_detail::append_report(line_, step, metrics);
    line_ += '\n';
    std::fwrite(line_.data(), 1, line_.size(), file_.get());
  }
  bool close() { return std::fclose(file_.release()) == 0; }

 private:
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Closer> file_;
  std::string line_;
};

bool write_result(const std::string& path, const char* mode, int64_t points, double loop_s,
                  const Stopwatch& since_start) {
  const double total_s = since_start.wall_s();
  const double cpu_s = since_start.cpu_s();
  std::FILE* out = std::fopen(path.c_str(), "w");
  if (out == nullptr) return false;
  std::fprintf(out,
               "{\"mode\": \"%s\", \"points\": %lld, \"loop_s\": %.6f, \"total_s\": %.6f, "
               "\"cpu_s\": %.6f}\n",
               mode, static_cast<long long>(points), loop_s, total_s, cpu_s);
  return std::fclose(out) == 0;
}

int run_jsonl(const std::string& result, int64_t points) {
  JsonLinesFile file(result + ".jsonl");
  if (!file.ok()) return 1;
  const Stopwatch stopwatch;
  for (int64_t step = 1; step <= points; ++step) file.write(step, {{"loss", loss_at(step)}});
  const double loop_s = stopwatch.wall_s();
  if (!file.close()) return 1;
  return write_result(result, "jsonl", points, loop_s, stopwatch) ? 0 : 1;
}

int run_cairn(const std::string& result, int64_t points) {
  std::string error;
  auto ctx = cairn::Context::init(&error);
  if (!ctx) {
    std::fprintf(stderr, "metrics_trial: %s\n", error.c_str());
    return 1;
  }
  int64_t step = ctx->steps_completed();
  while (auto op = ctx->next_operation()) {
    // The whole budget in the first operation; any later one has nothing left to do.
    const Stopwatch stopwatch;
    for (; step < points; ++step) ctx->report_training(step + 1, {{"loss", loss_at(step + 1)}});
    const double loop_s = stopwatch.wall_s();
    // The validation's ack comes after cairn has stored everything sent before it.
    if (!ctx->report_validation(op->length, {{"val_loss", 1.0}})) return 1;
    if (!write_result(result, "cairn", points, loop_s, stopwatch)) return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s cairn|jsonl RESULT.json [POINTS]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const int64_t points = argc > 3 ? std::atoll(argv[3]) : 1'000'000;
  if (mode == "jsonl") return run_jsonl(argv[2], points);
  if (mode == "cairn") return run_cairn(argv[2], points);
  std::fprintf(stderr, "metrics_trial: unknown mode %s\n", mode.c_str());
  return 2;
}
