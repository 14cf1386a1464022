#include "gpu/gloo_collective.h"

#include "gpu/gloo_sync_ops.h"
#include "gpu/memory_kv_store.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <net/if.h>
#include <pthread.h>
#include <signal.h>

#include <array>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace cairn {

namespace {

using Clock = std::chrono::steady_clock;

// Blocks SIGPIPE in the calling thread while alive (threads started meanwhile inherit the
// mask); on the way out it discards a SIGPIPE a failed write left pending, so unblocking
// cannot deliver it.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlock() {
    if (sigismember(&old_, SIGPIPE)) return;  // was blocked already: leave it as it was
    sigset_t pending;
    sigemptyset(&pending);
    if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
      const timespec zero{};
      sigtimedwait(&pipe_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
};

// Gloo's messages start with "[file:line] "; users need the rest, on one line.
std::string gloo_message(const char* what) {
  std::string msg = what;
  if (!msg.empty() && msg[0] == '[') {
    const auto end = msg.find("] ");
    if (end != std::string::npos) msg.erase(0, end + 2);
  }
  for (char& c : msg)
    if (c == '\n' || c == '\r') c = ' ';
  return msg;
}

// Runs fn, turning every exception into a Status: nothing Gloo throws leaves this file.
Status guarded(const char* what, const std::function<void()>& fn) {
  SigpipeBlock block;
  try {
    fn();
    return Status::Ok();
  } catch (const ::gloo::Exception& e) {
    return Status::Failed(std::string("gloo ") + what + ": " + gloo_message(e.what()));
  } catch (const std::exception& e) {
    return Status::Failed(std::string("gloo ") + what + ": " + e.what());
  } catch (...) {
    return Status::Failed(std::string("gloo ") + what + ": unknown error");
  }
}

void sum_float_fn(void* out, const void* a, const void* b, size_t n) {
  gloo_sync::add_floats(static_cast<float*>(out), static_cast<const float*>(a),
                        static_cast<const float*>(b), n);
}

std::string to_hex(const std::vector<char>& data) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(data.size() * 2);
  for (char ch : data) {
    const auto c = static_cast<unsigned char>(ch);
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

bool from_hex(const std::string& text, std::vector<char>& out) {
  if (text.size() % 2 != 0) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  out.resize(text.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<char>(hi << 4 | lo);
  }
  return true;
}

// Gloo's rendezvous, over cairn's KeyValueStore. Gloo stores binary addresses; they are
// hex-encoded so that the store only ever carries printable text. Gloo expects failures
// as exceptions; they are caught again in guarded().
class StoreAdapter final : public ::gloo::rendezvous::Store {
 public:
  StoreAdapter(KeyValueStore& kv, std::string prefix, std::chrono::milliseconds timeout)
      : kv_(kv), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Status st = kv_.set(prefix_ + "/" + key, to_hex(data));
    if (!st.ok()) throw ::gloo::IoException("rendezvous store: " + st.message());
  }

  std::vector<char> get(const std::string& key) override {
    fetch(key, Clock::now() + timeout_);
    return values_.at(key);
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    const auto deadline = Clock::now() + timeout;
    for (const auto& key : keys) fetch(key, deadline);
  }

 private:
  void fetch(const std::string& key, Clock::time_point deadline) {
    if (values_.count(key)) return;
    // Rounded up: truncating would end the wait up to a millisecond before the deadline.
    const auto left =
        std::max(std::chrono::milliseconds(0),
                 std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()));
    Result<std::string> value = kv_.wait_get(prefix_ + "/" + key, left);
    if (!value.ok()) throw ::gloo::IoException("rendezvous: " + value.status().message());
    std::vector<char> bytes;
    if (!from_hex(*value, bytes))
      throw ::gloo::IoException("rendezvous: malformed value under '" + prefix_ + "/" + key + "'");
    values_[key] = std::move(bytes);
  }

  KeyValueStore& kv_;
  const std::string prefix_;
  const std::chrono::milliseconds timeout_;
  std::map<std::string, std::vector<char>> values_;
};

// World size 1: nothing to exchange.
class SoloCollective final : public Collective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* backend() const override { return "gloo"; }
  Status allreduce_sum(float*, size_t) override { return Status::Ok(); }
  std::unique_ptr<PendingReduce> allreduce_sum_async(float*, size_t) override {
    return std::make_unique<CompletedReduce>(Status::Ok());
  }
  Status broadcast(void*, size_t, int root) override {
    return root == 0 ? Status::Ok() : Status::BadInput("broadcast root out of range");
  }
  Status barrier() override { return Status::Ok(); }
};

class GlooCollective final : public Collective {
 public:
  GlooCollective(std::shared_ptr<::gloo::rendezvous::Context> context, const GlooOptions& options,
                 size_t piece_bytes)
      : context_(std::move(context)),
        options_(options),
        synchronous_(options.algorithm == GlooAlgorithm::kRing),
        piece_bytes_(piece_bytes) {
    // Started while the creator blocks SIGPIPE (make_gloo_collective), so this thread
    // inherits the blocked mask.
    thread_ = std::thread([this] { communication_loop(); });
  }

  ~GlooCollective() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();  // after the queued calls ran: their buffers are the caller's promise
  }

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  const char* backend() const override { return "gloo"; }

  Status allreduce_sum(float* data, size_t count) override {
    if (count == 0) return Status::Ok();
    return run_now("allreduce", [=, this] { allreduce(data, count); });
  }

  std::unique_ptr<PendingReduce> allreduce_sum_async(float* data, size_t count) override {
    if (count == 0) return std::make_unique<CompletedReduce>(Status::Ok());
    auto job = std::make_shared<Job>();
    job->fn = [=, this] { allreduce(data, count); };
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(job);
    }
    cv_.notify_all();
    return std::make_unique<Pending>(std::move(job));
  }

  Status broadcast(void* data, size_t bytes, int root) override {
    if (root < 0 || root >= size()) return Status::BadInput("broadcast root out of range");
    if (bytes == 0) return Status::Ok();
    return run_now("broadcast", [=, this] {
      if (synchronous_)
        return gloo_sync::broadcast(*context_, data, bytes, root, piece_bytes(), next_tag_++);
      ::gloo::BroadcastOptions opts(context_);
      opts.setOutput(static_cast<uint8_t*>(data), bytes);
      opts.setRoot(root);
      opts.setTag(next_tag_++);
      opts.setTimeout(options_.timeout);
      ::gloo::broadcast(opts);
    });
  }

  Status barrier() override {
    return run_now("barrier", [this] {
      if (synchronous_) return gloo_sync::barrier(*context_, next_tag_++, scratch_);
      ::gloo::BarrierOptions opts(context_);
      opts.setTag(next_tag_++);
      opts.setTimeout(options_.timeout);
      ::gloo::barrier(opts);
    });
  }

 private:
  struct Job {
    std::function<void()> fn;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Status status;
  };

  class Pending final : public PendingReduce {
   public:
    explicit Pending(std::shared_ptr<Job> job) : job_(std::move(job)) {}
    ~Pending() override { wait(); }
    Status wait() override {
      std::unique_lock<std::mutex> lock(job_->mu);
      job_->cv.wait(lock, [&] { return job_->done; });
      return job_->status;
    }

   private:
    std::shared_ptr<Job> job_;
  };

  // Runs on the calling thread. Every call carries its own tag (the same sequence on every
  // rank), so a rank that issues a different call than its peers gets an error (or, with
  // Gloo's algorithms, times out) instead of mixing its bytes into another collective.
  void allreduce(float* data, size_t count) {
    if (synchronous_)
      return gloo_sync::allreduce_sum(*context_, data, count, piece_bytes(), next_tag_++, scratch_);
    ::gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, count);
    opts.setReduceFunction(&sum_float_fn);
    opts.setAlgorithm(options_.algorithm == GlooAlgorithm::kGlooBcube
                          ? ::gloo::AllreduceOptions::Algorithm::BCUBE
                          : ::gloo::AllreduceOptions::Algorithm::RING);
    if (options_.segment_bytes > 0) opts.setMaxSegmentSize(options_.segment_bytes);
    opts.setTag(next_tag_++);
    opts.setTimeout(options_.timeout);
    ::gloo::allreduce(opts);
  }

  // A synchronous call: waits for the queue to drain, then runs here.
  Status run_now(const char* what, const std::function<void()>& fn) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
      if (!failed_.ok()) return failed_;
      busy_ = true;
    }
    Status st = guarded(what, fn);
    finish(st);
    return st;
  }

  void finish(const Status& st) {
    // Closing the connections makes the peers' pending calls fail now rather than at
    // their timeout, and stops late messages from landing in our buffers.
    if (!st.ok()) guarded("close", [this] { context_->closeConnections(); });
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
      if (!st.ok() && failed_.ok()) failed_ = st;
    }
    cv_.notify_all();
  }

  void communication_loop() {
    for (;;) {
      std::shared_ptr<Job> job;
      Status earlier;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return (stop_ && queue_.empty()) || (!queue_.empty() && !busy_); });
        if (queue_.empty()) return;
        job = queue_.front();
        queue_.pop_front();
        busy_ = true;
        earlier = failed_;
      }
      Status st = earlier.ok() ? guarded("allreduce", job->fn) : earlier;
      finish(earlier.ok() ? st : Status::Ok());
      {
        std::lock_guard<std::mutex> lock(job->mu);
        job->status = st;
        job->done = true;
      }
      job->cv.notify_all();
    }
  }

  size_t piece_bytes() const { return piece_bytes_; }

  std::shared_ptr<::gloo::rendezvous::Context> context_;
  const GlooOptions options_;
  const bool synchronous_;      // pairs in synchronous mode, collectives from gloo_sync_ops
  const size_t piece_bytes_;    // the same on every rank
  std::vector<float> scratch_;  // for gloo_sync; like next_tag_, owned by the running call
  uint32_t next_tag_ = 0;       // only touched by the thread running a call (busy_)

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool busy_ = false;  // a call is running (on the caller's thread or ours)
  bool stop_ = false;
  Status failed_;
  std::thread thread_;
};

// Every rank publishes `mine` under prefix/<rank>; returns the smallest of all ranks'.
Result<size_t> agree_on_minimum(KeyValueStore& kv, const std::string& prefix, int rank, int size,
                                size_t mine, std::chrono::milliseconds timeout) {
  if (Status st = kv.set(prefix + "/" + std::to_string(rank), std::to_string(mine)); !st.ok())
    return Status::Failed("gloo rendezvous: " + st.message());
  const auto deadline = Clock::now() + timeout;
  size_t least = mine;
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    // Rounded up: truncating would end the wait up to a millisecond before the deadline.
    const auto left =
        std::max(std::chrono::milliseconds(0),
                 std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()));
    Result<std::string> value = kv.wait_get(prefix + "/" + std::to_string(r), left);
    if (!value.ok()) return Status::Failed("gloo rendezvous: " + value.status().message());
    char* end = nullptr;
    const unsigned long long theirs = std::strtoull(value->c_str(), &end, 10);
    if (value->empty() || *end != '\0' || theirs == 0)
      return Status::Failed("gloo rendezvous: malformed value under '" + prefix + "/" +
                            std::to_string(r) + "'");
    least = std::min<size_t>(least, theirs);
  }
  return least;
}

}  // namespace

Result<std::unique_ptr<Collective>> make_gloo_collective(KeyValueStore& kv, int rank, int size,
                                                         const GlooOptions& options) {
  if (size < 1 || rank < 0 || rank >= size)
    return Status::BadInput("gloo: rank " + std::to_string(rank) + " of " + std::to_string(size) +
                            " is out of range");
  if (size == 1) return std::unique_ptr<Collective>(std::make_unique<SoloCollective>());

  // The ring's piece size must be the same on every rank and safe on each (wmem_max may
  // differ between machines): the smallest of the ranks' safe sizes.
  size_t piece = 0;
  if (options.algorithm == GlooAlgorithm::kRing) {
    Result<size_t> agreed =
        agree_on_minimum(kv, options.key_prefix + "/piece", rank, size,
                         gloo_sync::safe_piece_bytes(options.segment_bytes), options.timeout);
    if (!agreed.ok()) return agreed.status();
    piece = *agreed;
  }

  // Threads started below (Gloo's event loop, the communication thread) inherit this.
  SigpipeBlock block;
  std::shared_ptr<::gloo::rendezvous::Context> context;
  std::unique_ptr<Collective> collective;
  Status st = guarded("rendezvous", [&] {
    ::gloo::transport::tcp::attr attr;
    if (!options.host.empty() && ::if_nametoindex(options.host.c_str()) != 0)
      attr.iface = options.host;
    else
      attr.hostname = options.host.empty() ? "127.0.0.1" : options.host;
    auto device = ::gloo::transport::tcp::CreateDevice(attr);
    context = std::make_shared<::gloo::rendezvous::Context>(rank, size);
    context->setTimeout(options.timeout);
    StoreAdapter store(kv, options.key_prefix, options.timeout);
    context->connectFullMesh(store, device);
    if (options.algorithm == GlooAlgorithm::kRing)
      gloo_sync::make_synchronous(*context, options.busy_poll);
    collective = std::make_unique<GlooCollective>(context, options, piece);
  });
  if (!st.ok()) return st;
  return collective;
}

Result<std::unique_ptr<Collective>> make_gloo_collective(KeyValueStore& kv, int rank, int size,
                                                         const std::string& interface_or_host,
                                                         std::chrono::milliseconds timeout) {
  GlooOptions options;
  options.host = interface_or_host;
  options.timeout = timeout;
  return make_gloo_collective(kv, rank, size, options);
}

Status gloo_loopback_check(std::chrono::milliseconds timeout) {
  MemoryKeyValueStore kv;
  std::array<Status, 2> outcome;
  std::array<std::array<float, 3>, 2> data = {{{1, 2, 3}, {10, 20, 30}}};
  auto rank_main = [&](int rank) {
    auto collective = make_gloo_collective(kv, rank, 2, "127.0.0.1", timeout);
    if (!collective.ok()) {
      outcome[rank] = collective.status();
      return;
    }
    outcome[rank] = (*collective)->allreduce_sum(data[rank].data(), data[rank].size());
  };
  std::thread peer(rank_main, 1);
  rank_main(0);
  peer.join();
  for (const Status& st : outcome)
    if (!st.ok()) return st;
  for (const auto& d : data)
    if (d != std::array<float, 3>{11, 22, 33})
      return Status::Failed("gloo: the loopback all-reduce gave a wrong sum");
  return Status::Ok();
}

}  // namespace cairn
