#include "collective/gloo_collective.h"

#include <cairn/detail/gloo_ring.hpp>
#include "collective/memory_kv_store.h"

#include <cairn/detail/gloo_guard.hpp>
#include <cairn/gloo_store.hpp>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
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

// Runs fn, turning every exception into a Status: nothing Gloo throws leaves this file.
Status guarded(const char* what, const std::function<void()>& fn) {
  std::string error;
  if (sdk_detail::gloo_guarded(what, fn, &error)) return Status::Ok();
  return Status::Failed(error);
}

void sum_float_fn(void* out, const void* a, const void* b, size_t n) {
  gloo_ring::add_floats(static_cast<float*>(out), static_cast<const float*>(a),
                        static_cast<const float*>(b), n);
}

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
        return gloo_ring::broadcast(*context_, data, bytes, root, piece_bytes(), next_tag_++);
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
      if (synchronous_) return gloo_ring::barrier(*context_, next_tag_++, scratch_);
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
      return gloo_ring::allreduce_sum(*context_, data, count, piece_bytes(), next_tag_++, scratch_);
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
  const bool
      synchronous_;  // pairs in synchronous mode, collectives from cairn/detail/gloo_ring.hpp
  const size_t piece_bytes_;    // the same on every rank
  std::vector<float> scratch_;  // for gloo_ring; like next_tag_, owned by the running call
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
                         gloo_ring::safe_piece_bytes(options.segment_bytes), options.timeout);
    if (!agreed.ok()) return agreed.status();
    piece = *agreed;
  }

  // Threads started below (Gloo's event loop, the communication thread) inherit this.
  sdk_detail::SigpipeBlock block;
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
    GlooStore store(
        [&kv](const std::string& key, const std::string& value, std::string* error) {
          Status st = kv.set(key, value);
          if (!st.ok() && error) *error = st.message();
          return st.ok();
        },
        [&kv](const std::string& key, std::chrono::milliseconds timeout,
              std::string* error) -> std::optional<std::string> {
          Result<std::string> value = kv.wait_get(key, timeout);
          if (value.ok()) return *value;
          if (error) *error = value.status().message();
          return std::nullopt;
        },
        options.key_prefix, options.timeout);
    context->connectFullMesh(store, device);
    if (options.algorithm == GlooAlgorithm::kRing)
      gloo_ring::make_synchronous(*context, options.busy_poll);
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
