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
// So this is a ring all-reduce (reduce-scatter, then all-gather) moving pieces in lock
// step: every rank sends one piece to the right, then receives one from the left. Both
// directions of every link carry data at once, which measured 1.5–2× faster than taking
// turns. A blocking write completes as soon as the piece fits in the socket's send buffer,
// which Gloo sizes to the message up to twice net.core.wmem_max: with pieces no larger
// than wmem_max every write completes without its peer reading, so the ranks cannot
// deadlock (safe_piece_bytes). Each element is summed in a fixed order along the ring and
// the all-gather copies the finished sums: every rank gets the same bits.
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
#include <vector>

namespace cairn::gloo_sync {

// 208 KiB, the stock net.core.wmem_max. Larger pieces are slower even where the kernel
// allows them: a rank writes a whole piece before it reads its peer's, so the two stop
// overlapping (1 MiB pieces: 0.7-0.85x the speed of 208 KiB ones at 1-16 MB, 2026-11-25,
// bench/RESULTS.md). Smaller ones pay more wake-ups.
constexpr size_t kDefaultPieceBytes = 208 << 10;
constexpr size_t kMinPieceBytes = 4 << 10;
constexpr size_t kMaxPieceBytes = 16 << 20;

// The piece size this machine can use without risking a deadlock: `wanted` (0: the
// default) capped by net.core.wmem_max (208 KiB on a stock kernel), in whole 4 KiB. Every
// rank of a collective must use the same size: take the minimum over the ranks.
size_t safe_piece_bytes(size_t wanted);

// Puts every pair of `context` in synchronous mode. Irreversible: Gloo's own (unbound
// buffer) algorithms no longer work on this context afterwards.
void make_synchronous(::gloo::Context& context, bool busy_poll);

// `scratch` receives the pieces to add (grown to one piece when smaller); keeping it from
// call to call saves an allocation and its page faults per call.
void allreduce_sum(::gloo::Context& context, float* data, size_t count, size_t piece_bytes,
                   uint64_t seq, std::vector<float>& scratch);
void broadcast(::gloo::Context& context, void* data, size_t bytes, int root, size_t piece_bytes,
               uint64_t seq);
void barrier(::gloo::Context& context, uint64_t seq, std::vector<float>& scratch);

// out[i] = a[i] + b[i]; out may be a. Vectorised, yet each lane is one IEEE addition, so
// the bits are those of the scalar loop.
void add_floats(float* out, const float* a, const float* b, size_t n);

}  // namespace cairn::gloo_sync
