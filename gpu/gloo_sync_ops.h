// Collectives on Gloo's TCP pairs in synchronous mode: the calling thread itself writes to
// and reads from the sockets (optionally busy-polling), with no hand-off to Gloo's event
// loop thread. Internal to gpu/gloo_collective.cc.
//
// Why not Gloo's own algorithms: its current ones (gloo::allreduce) run on "unbound
// buffers", which need the event loop thread: every segment costs a notification round
// trip and two thread wake-ups, which on a small or busy machine dominate up to tens of
// megabytes (bench/allreduce_bench.py). Its older algorithms (AllreduceRing, …) can run
// in synchronous mode but bind to one buffer at construction (so they would have to be
// cached per pointer, which the ranks cannot agree on without a message) and send whole
// chunks with blocking writes, which deadlocks once a chunk exceeds the socket buffers.
//
// So this is a ring all-reduce (reduce-scatter, then all-gather) moving pieces of at most
// `piece_bytes`, in lock step: send one piece to the right, receive one from the left. A
// blocking write of one piece completes as soon as it fits in the socket's send buffer,
// which Gloo sizes to the message (up to net.core.wmem_max, 208 KiB × 2 on a stock
// kernel), so pieces up to 256 KiB cannot deadlock. Each element is summed in a fixed
// order along the ring and the all-gather copies the finished sums: every rank gets the
// same bits.
//
// Every message names the buffer it is for by a slot derived from the call's kind, size and
// sequence number `seq` (the same on every rank for the same call), so ranks whose calls
// diverge (another size, another order) get an error rather than a wrong sum.
//
// Every function throws Gloo's exceptions (a read or write timeout, a closed connection,
// a message for another call); the caller turns them into a Status.
#pragma once

#include <gloo/context.h>

#include <cstddef>
#include <cstdint>

namespace cairn::gloo_sync {

// Largest piece that is safe with a stock kernel's socket buffer limits (see above).
constexpr size_t kMaxPieceBytes = 256 << 10;

// Puts every pair of `context` in synchronous mode. Irreversible: Gloo's own (unbound
// buffer) algorithms no longer work on this context afterwards.
void make_synchronous(::gloo::Context& context, bool busy_poll);

void allreduce_sum(::gloo::Context& context, float* data, size_t count, size_t piece_bytes,
                   uint64_t seq);
void broadcast(::gloo::Context& context, void* data, size_t bytes, int root, size_t piece_bytes,
               uint64_t seq);
void barrier(::gloo::Context& context, uint64_t seq);

// out[i] = a[i] + b[i]; out may be a. Vectorised, yet each lane is one IEEE addition, so
// the bits are those of the scalar loop.
void add_floats(float* out, const float* a, const float* b, size_t n);

}  // namespace cairn::gloo_sync
