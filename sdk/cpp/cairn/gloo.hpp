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
// Two meshes of connections. allreduce_sum of floats, broadcast and barrier run cairn's
// own ring (cairn/detail/gloo_ring.hpp, the one builtin:mlp uses) on connections in Gloo's
// synchronous mode: the calling thread does the socket I/O, 2–5× faster than Gloo's own
// event-loop-driven algorithms on small machines (bench/RESULTS.md). Synchronous mode rules
// those algorithms out on that mesh, so context() is a second mesh, in Gloo's usual mode,
// for any other Gloo collective; allreduce_sum of other types (double, integers) runs
// gloo::allreduce on it. Every call is bounded by the timeout: a rank that died or never
// arrives makes the others fail within it (and the trial then exits and cairn restarts all
// its ranks from the latest checkpoint) rather than hang. Failures come back as false with
// a one-line *error; no exception leaves these functions. After a failure the group is
// unusable: exit the trial.
#pragma once

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <net/if.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cairn/detail/gloo_guard.hpp"
#include "cairn/detail/gloo_ring.hpp"
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
    // The ring's piece size must be the same on every rank and safe on each (wmem_max may
    // differ between machines): the smallest of the ranks' safe sizes.
    size_t piece = gloo_ring::safe_piece_bytes(0);
    if (size > 1 && !agree_on_minimum(ctx, options, &piece, error)) return nullptr;
    std::shared_ptr<::gloo::rendezvous::Context> ring, context;
    const bool ok = sdk_detail::gloo_guarded(
        "rendezvous",
        [&] {
          ::gloo::transport::tcp::attr attr;
          if (::if_nametoindex(host.c_str()) != 0)
            attr.iface = host;
          else
            attr.hostname = host;
          auto device = ::gloo::transport::tcp::CreateDevice(attr);
          auto mesh = [&](const std::string& prefix) {
            auto c = std::make_shared<::gloo::rendezvous::Context>(rank, size);
            c->setTimeout(options.timeout);
            GlooStore store([&ctx](const std::string& key, const std::string& value,
                                   std::string* err) { return ctx.kv_set(key, value, err); },
                            [&ctx](const std::string& key, std::chrono::milliseconds timeout,
                                   std::string* err) { return ctx.kv_get(key, timeout, err); },
                            prefix, options.timeout);
            c->connectFullMesh(store, device);
            return c;
          };
          ring = mesh(options.key_prefix + "/ring");
          gloo_ring::make_synchronous(*ring, /*busy_poll=*/false);
          context = mesh(options.key_prefix);
        },
        error);
    if (!ok) return nullptr;
    return std::unique_ptr<GlooGroup>(new GlooGroup(std::move(ring), std::move(context), piece));
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
    static_assert(std::is_arithmetic_v<T>, "allreduce_sum adds numbers");
    if (count == 0 || size() == 1) return true;
    return sdk_detail::gloo_guarded(
        "allreduce",
        [&] {
          // The piece the ring receives into, kept from call to call for the usual types.
          if constexpr (std::is_same_v<T, float>) {
            gloo_ring::allreduce_sum(*ring_, data, count, piece_, ring_seq_++, scratch_);
          } else if constexpr (std::is_same_v<T, double>) {
            gloo_ring::allreduce_sum(*ring_, data, count, piece_, ring_seq_++, scratch_double_);
          } else {
            std::vector<T> scratch;
            gloo_ring::allreduce_sum(*ring_, data, count, piece_, ring_seq_++, scratch);
          }
        },
        error);
  }

  // Copies `bytes` bytes at `data` on rank `root` into `data` on every rank.
  bool broadcast(void* data, size_t bytes, int root, std::string* error = nullptr) {
    if (bytes == 0 || size() == 1) return true;
    if (root < 0 || root >= size()) {
      if (error) *error = "gloo broadcast: root " + std::to_string(root) + " is not a rank";
      return false;
    }
    return sdk_detail::gloo_guarded(
        "broadcast", [&] { gloo_ring::broadcast(*ring_, data, bytes, root, piece_, ring_seq_++); },
        error);
  }

  // Returns once every rank has called it.
  bool barrier(std::string* error = nullptr) {
    if (size() == 1) return true;
    return sdk_detail::gloo_guarded(
        "barrier", [&] { gloo_ring::barrier(*ring_, ring_seq_++, scratch_); }, error);
  }

 private:
  GlooGroup(std::shared_ptr<::gloo::Context> ring, std::shared_ptr<::gloo::Context> context,
            size_t piece)
      : ring_(std::move(ring)), context_(std::move(context)), piece_(piece) {}

  // Every rank publishes its safe piece size and takes the smallest of all.
  static bool agree_on_minimum(Context& ctx, const GlooConnectOptions& options, size_t* piece,
                               std::string* error) {
    const std::string prefix = options.key_prefix + "/piece/";
    if (!ctx.kv_set(prefix + std::to_string(ctx.rank()), std::to_string(*piece), error))
      return false;
    for (int r = 0; r < ctx.world_size(); ++r) {
      std::optional<std::string> theirs =
          ctx.kv_get(prefix + std::to_string(r), options.timeout, error);
      if (!theirs) return false;
      char* end = nullptr;
      const unsigned long long value = std::strtoull(theirs->c_str(), &end, 10);
      if (theirs->empty() || *end != '\0' || value == 0) {
        if (error) *error = "gloo rendezvous: malformed piece size from rank " + std::to_string(r);
        return false;
      }
      *piece = std::min<size_t>(*piece, value);
    }
    return true;
  }

  std::shared_ptr<::gloo::Context> ring_;     // synchronous mode: cairn's ring
  std::shared_ptr<::gloo::Context> context_;  // Gloo's usual mode: its own algorithms
  size_t piece_;
  uint64_t ring_seq_ = 0;       // the same on every rank for the same call
  std::vector<float> scratch_;  // the ring's receive piece (and the barrier's)
  std::vector<double> scratch_double_;
  uint32_t next_tag_ = 0;
};

}  // namespace cairn
