// All-reduce between the ranks of a data-parallel trial on CPUs, over Gloo's TCP
// transport, for C++ trials. Header-only like the rest of the SDK; the program links Gloo
// (Debian: libgloo-dev; `-lgloo`).
//
//   auto ctx = cairn::Context::init(&error);
//   auto group = cairn::GlooGroup::connect(*ctx, {}, &error);   // every rank
//   group->allreduce_sum(grad.data(), grad.size(), &error);     // every rank, same order
//
// The ranks find each other through the trial's rendezvous table in cairn (kv_set/kv_get),
// not through a shared file system or a fixed port: each rank listens on an ephemeral port
// and publishes its address there. The table belongs to one attempt of the trial, so the
// ranks of a restarted trial cannot pick up a dead attempt's addresses.
//
// Gloo's own algorithms do the work (gloo::allreduce, gloo::broadcast, gloo::barrier);
// context() hands out the Gloo context for any other Gloo collective. Every call is bounded
// by the timeout: a rank that died or never arrives makes the others fail within it (and
// the trial then exits and cairn restarts all its ranks from the latest checkpoint) rather
// than hang. Failures come back as false with a one-line *error; no exception leaves these
// functions. After a failure the group is unusable: exit the trial.
#pragma once

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <net/if.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "cairn/detail/gloo_guard.hpp"
#include "cairn/gloo_store.hpp"
#include "cairn/trial.hpp"

namespace cairn {

struct GlooConnectOptions {
  // Where this rank listens and what it advertises: an IP address, a host name or a
  // network interface ("eth0"). Empty: $MASTER_ADDR, else 127.0.0.1.
  std::string host;
  // Namespace of the rendezvous keys: two groups in one trial need different prefixes.
  std::string key_prefix = "gloo";
  // Bound on the rendezvous and on every call.
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
};

class GlooGroup {
 public:
  // Blocks until every rank of the trial has called it (with the same prefix), or the
  // timeout passes: nullptr and *error then. A single-rank trial (or one run without
  // cairn) gets a group of one, whose calls leave the data as it is.
  static std::unique_ptr<GlooGroup> connect(Context& ctx, const GlooConnectOptions& options = {},
                                            std::string* error = nullptr) {
    const int rank = ctx.rank(), size = ctx.world_size();
    std::string host = options.host;
    if (host.empty()) {
      const char* master = std::getenv("MASTER_ADDR");
      host = master && *master ? master : "127.0.0.1";
    }
    std::shared_ptr<::gloo::rendezvous::Context> context;
    const bool ok = sdk_detail::gloo_guarded(
        "rendezvous",
        [&] {
          ::gloo::transport::tcp::attr attr;
          if (::if_nametoindex(host.c_str()) != 0)
            attr.iface = host;
          else
            attr.hostname = host;
          auto device = ::gloo::transport::tcp::CreateDevice(attr);
          context = std::make_shared<::gloo::rendezvous::Context>(rank, size);
          context->setTimeout(options.timeout);
          GlooStore store([&ctx](const std::string& key, const std::string& value,
                                 std::string* err) { return ctx.kv_set(key, value, err); },
                          [&ctx](const std::string& key, std::chrono::milliseconds timeout,
                                 std::string* err) { return ctx.kv_get(key, timeout, err); },
                          options.key_prefix, options.timeout);
          context->connectFullMesh(store, device);
        },
        error);
    if (!ok) return nullptr;
    return std::unique_ptr<GlooGroup>(new GlooGroup(std::move(context), options.timeout));
  }

  int rank() const { return context_->rank; }
  int size() const { return context_->size; }
  // For Gloo's other collectives. Give each call its own tag from next_tag().
  const std::shared_ptr<::gloo::Context>& context() const { return context_; }
  uint32_t next_tag() { return next_tag_++; }

  // In place: data[i] becomes the sum of data[i] over all ranks. T: float, double or an
  // integer type. Every rank gets the same bits.
  template <typename T>
  bool allreduce_sum(T* data, size_t count, std::string* error = nullptr) {
    if (count == 0 || size() == 1) return true;
    return sdk_detail::gloo_guarded(
        "allreduce",
        [&] {
          ::gloo::AllreduceOptions opts(context_);
          opts.setOutput(data, count);
          opts.setReduceFunction([](void* out, const void* a, const void* b, size_t n) {
            auto* o = static_cast<T*>(out);
            const auto* x = static_cast<const T*>(a);
            const auto* y = static_cast<const T*>(b);
            for (size_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
          });
          opts.setTag(next_tag());
          opts.setTimeout(timeout_);
          ::gloo::allreduce(opts);
        },
        error);
  }

  // Copies `bytes` bytes at `data` on rank `root` into `data` on every rank.
  bool broadcast(void* data, size_t bytes, int root, std::string* error = nullptr) {
    if (bytes == 0 || size() == 1) return true;
    return sdk_detail::gloo_guarded(
        "broadcast",
        [&] {
          ::gloo::BroadcastOptions opts(context_);
          opts.setOutput(static_cast<uint8_t*>(data), bytes);
          opts.setRoot(root);
          opts.setTag(next_tag());
          opts.setTimeout(timeout_);
          ::gloo::broadcast(opts);
        },
        error);
  }

  // Returns once every rank has called it.
  bool barrier(std::string* error = nullptr) {
    if (size() == 1) return true;
    return sdk_detail::gloo_guarded(
        "barrier",
        [&] {
          ::gloo::BarrierOptions opts(context_);
          opts.setTag(next_tag());
          opts.setTimeout(timeout_);
          ::gloo::barrier(opts);
        },
        error);
  }

 private:
  GlooGroup(std::shared_ptr<::gloo::Context> context, std::chrono::milliseconds timeout)
      : context_(std::move(context)), timeout_(timeout) {}

  std::shared_ptr<::gloo::Context> context_;
  std::chrono::milliseconds timeout_;
  uint32_t next_tag_ = 0;
};

}  // namespace cairn
