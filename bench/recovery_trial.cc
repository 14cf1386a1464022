// Benchmark trial for bench/recovery_bench.py --trial cpp: bench/recovery_trial.py in C++
// (the C++ SDK). It takes one training step every RECOVERY_STEP_S seconds (default 0.05),
// reports a training metric per step, checkpoints a tiny file whenever cairn says a
// checkpoint is due, and appends a timestamped line per event to $RECOVERY_EVENTS, in the
// Python trial's format, so the driver reads both the same way:
//
//   <unix time> <pid> start              main() entered (before the SDK's handshake)
//   <unix time> <pid> init               Context::init returned (handshake done)
//   <unix time> <pid> restored <step>    the checkpoint was read (step 0: none)
//   <unix time> <pid> step <step>        a training step was completed and reported
//   <unix time> <pid> checkpoint <step>  cairn acknowledged a checkpoint
//   <unix time> <pid> exit <step>        the operations ended (done, paused or orphaned)
//
// Standalone (no CAIRN_CONTROL) it trains from $CAIRN_LATEST_CHECKPOINT to
// $CAIRN_MAX_LENGTH, which is how the driver measures the trial's own start-up and restore
// time. The driver compiles it with g++ against sdk/cpp.
#include <cairn/trial.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// One line per event, written with one write(2) on an O_APPEND file: a line is in the file
// the moment it is recorded, so a kill -9 loses nothing recorded before it.
class Events {
 public:
  explicit Events(const char* path) : file_(path ? std::fopen(path, "a") : nullptr) {
    if (file_) std::setvbuf(file_, nullptr, _IONBF, 0);
  }
  ~Events() {
    if (file_) std::fclose(file_);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;

  bool ok() const { return file_ != nullptr; }
  void record(const std::string& what, double when = 0) {
    char line[128];
    const int n = std::snprintf(line, sizeof line, "%.6f %d %s\n", when ? when : unix_now(),
                                static_cast<int>(::getpid()), what.c_str());
    std::fwrite(line, 1, static_cast<size_t>(n), file_);
  }

 private:
  std::FILE* file_;
};

int64_t restore(const cairn::Context& ctx) {
  if (!ctx.latest_checkpoint()) return 0;
  std::ifstream in(*ctx.latest_checkpoint() / "state.txt");
  int64_t step = 0;
  in >> step;
  return step;
}

}  // namespace

int main() {
  const double start = unix_now();
  Events events(std::getenv("RECOVERY_EVENTS"));
  if (!events.ok()) {
    std::fprintf(stderr, "recovery_trial: cannot open $RECOVERY_EVENTS\n");
    return 1;
  }
  events.record("start", start);
  const char* step_s = std::getenv("RECOVERY_STEP_S");
  const auto period = std::chrono::duration<double>(step_s ? std::atof(step_s) : 0.05);

  std::string error;
  auto ctx = cairn::Context::init(&error);
  if (!ctx) {
    std::fprintf(stderr, "recovery_trial: %s\n", error.c_str());
    return 1;
  }
  events.record("init");
  int64_t step = restore(*ctx);
  events.record("restored " + std::to_string(step));
  while (auto op = ctx->next_operation()) {
    while (step < op->length) {
      std::this_thread::sleep_for(period);
      ++step;
      ctx->report_training(step, {{"loss", 1.0 / static_cast<double>(step)}});
      events.record("step " + std::to_string(step));
      if (ctx->checkpoint_due(step)) {
        auto writer = ctx->checkpoint(step);
        std::ofstream(writer.path() / "state.txt") << step;
        if (!writer.commit()) {
          std::fprintf(stderr, "recovery_trial: checkpoint: %s\n", writer.error().c_str());
          return 1;
        }
        events.record("checkpoint " + std::to_string(step));
        if (ctx->should_preempt()) {
          events.record("exit " + std::to_string(step));
          return 0;
        }
      }
    }
    if (!ctx->report_validation(step, {{"val_loss", 1.0 / static_cast<double>(step)}})) return 1;
  }
  events.record("exit " + std::to_string(step));
  return 0;
}
