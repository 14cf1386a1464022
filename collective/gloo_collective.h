// All-reduce of CPU buffers over Gloo's TCP transport.
//
// Rendezvous: each rank publishes its listening addresses in the KeyValueStore (under
// `key_prefix`, hex-encoded) and reads the others', then every pair of ranks holds one TCP
// connection. The store is only used during make_gloo_collective; it need not outlive it.
//
// Algorithm. By default the pairs are put in Gloo's synchronous mode and the collectives
// of sdk/cpp/cairn/detail/gloo_ring.hpp run on them: the calling thread does all socket I/O itself,
// which was 2–5× faster than Gloo's own gloo::allreduce from 4 KB to 256 MB on this project's
// 2-core machine (bench/allreduce_bench.py). kGlooRing / kGlooBcube select gloo::allreduce.
//
// Threads. Gloo's collectives are synchronous: the calling thread drives the transfer and
// the reduction. To overlap gradient all-reduce with the backward pass, async calls go to
// one communication thread per collective, which runs them one at a time from a FIFO
// queue. One thread and one queue, not one thread per bucket: the ranks must run buckets
// in the same order (the messages of one call are matched only with the same call on the
// peers, and a synchronous-mode pair may be used by one thread at a time), and a FIFO fed
// in issue order gives the same order on every rank for free, which also keeps each
// bucket's summation order, hence its bits, fixed. A synchronous call waits until the
// queue has drained and then runs on the caller's thread (no hand-off when nothing is
// queued).
//
// Timeouts. Every wait is bounded by `timeout`: in synchronous mode each socket read and
// write (SO_RCVTIMEO/SO_SNDTIMEO), with Gloo's algorithms the whole call.
//
// Gloo's TCP transport writes to sockets without MSG_NOSIGNAL, so a peer that died could
// kill this process with SIGPIPE: the collective blocks SIGPIPE in the threads that write
// (its own, Gloo's event loop, and the caller for the duration of a call) and turns the
// write error into a Status.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "collective/collective.h"
#include "collective/kv_store.h"
#include "common/status.h"

namespace cairn {

enum class GlooAlgorithm {
  // Ring all-reduce in pieces on Gloo's pairs in synchronous mode: the calling thread does
  // all socket I/O (sdk/cpp/cairn/detail/gloo_ring.hpp). The fastest measured here; the default.
  kRing,
  // Gloo's own gloo::allreduce (unbound buffers; Gloo's event loop thread does the reads).
  kGlooRing,
  kGlooBcube,
};

struct GlooOptions {
  // Where this rank listens and what it advertises to the others: an IP address or host
  // name, or the name of a network interface ("eth0"), whose address is then used.
  std::string host = "127.0.0.1";
  // Namespace of the rendezvous keys in the store. Must differ between two collectives
  // that use the same store (e.g. include the restart count), or a rank could read an
  // address left by an earlier attempt.
  std::string key_prefix = "gloo";
  // Bound on the rendezvous and on every call.
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  GlooAlgorithm algorithm = GlooAlgorithm::kRing;
  // kRing: bytes per piece (0: gloo_ring::kDefaultPieceBytes, 208 KiB), capped by
  // net.core.wmem_max so that no write can deadlock; the ranks use the smallest of their sizes.
  // kGloo*: Gloo's maximum segment size (0: Gloo's default, 1 MiB).
  size_t segment_bytes = 0;
  // kRing: spin on the socket while waiting for a peer rather than sleep in recv(). Off by
  // default: spinning wins a few microseconds per message on idle cores, but takes a core
  // from the trainer's own threads while it waits, and on an oversubscribed machine it
  // collapsed to 0.07 GB/s where sleeping gave 1.4 GB/s (bench/allreduce_bench.py).
  bool busy_poll = false;
};

// Blocks until all `size` ranks have called it with the same store and prefix, or the
// timeout passes. size 1 needs no store and no network: every call is then a no-op.
Result<std::unique_ptr<Collective>> make_gloo_collective(KeyValueStore& kv, int rank, int size,
                                                         const GlooOptions& options);

// The same with default options but these.
Result<std::unique_ptr<Collective>> make_gloo_collective(
    KeyValueStore& kv, int rank, int size, const std::string& interface_or_host = "127.0.0.1",
    std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Two ranks, threads of this process, connect over TCP on 127.0.0.1 and all-reduce a small
// buffer: what `cairn doctor` runs to show that Gloo works here.
Status gloo_loopback_check(std::chrono::milliseconds timeout);

}  // namespace cairn
