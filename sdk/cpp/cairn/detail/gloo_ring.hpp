// Collectives on Gloo's TCP pairs in synchronous mode: the calling thread itself writes to
// and reads from the sockets (optionally busy-polling), with no hand-off to Gloo's event
// loop thread. Used by cairn/gloo.hpp (C++ trials) and by cairn's own builtin:mlp
// (collective/gloo_collective.cc): one ring for both. Header-only, as the rest of the SDK.
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
// a message for another call); callers catch them (sdk_detail::gloo_guarded).
#pragma once

#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace cairn::gloo_ring {

// 208 KiB, the stock net.core.wmem_max. Larger pieces are slower even where the kernel
// allows them: a rank writes a whole piece before it reads its peer's, so the two stop
// overlapping (1 MiB pieces: 0.7-0.85x the speed of 208 KiB ones at 1-16 MB, 2026-11-25,
// bench/RESULTS.md). Smaller ones pay more wake-ups.
constexpr size_t kDefaultPieceBytes = 208 << 10;
constexpr size_t kMinPieceBytes = 4 << 10;
constexpr size_t kMaxPieceBytes = 16 << 20;

namespace detail {

enum Kind { kReduce = 1, kGather = 2, kBroadcast = 3 };

// The slot of a call's buffers: a hash of (size, sequence number) with the kind in the
// low bits, in [2^30, 2^31), far above the slots Gloo hands out (nextSlot()). A message
// sent for one call and read during another finds no buffer at its slot: an error.
inline int slot_for(Kind kind, uint64_t size, uint64_t seq) {
  const uint64_t h = size * 0x9E3779B97F4A7C15ull ^ (seq + 1) * 0xC2B2AE3D27D4EB4Full;
  return static_cast<int>(0x40000000u | ((h >> 32) & 0x3FFFFFFCu) | kind);
}

// Gloo's synchronous read reports a message for an unknown slot as a failed internal
// check; say what it means.
template <typename Fn>
void explain_mismatch(Fn&& fn) {
  try {
    fn();
  } catch (const ::gloo::EnforceNotMet& e) {
    if (std::strstr(e.what(), "read() returned false in sync mode") == nullptr) throw;
    throw ::gloo::IoException(
        "a peer sent data for another call: the ranks' calls differ (size or order)");
  }
}

using Buffer = std::unique_ptr<::gloo::transport::Buffer>;

inline size_t piece_elems(size_t piece_bytes, size_t elem_size = sizeof(float)) {
  const size_t bytes = std::clamp<size_t>(piece_bytes, kMinPieceBytes, kMaxPieceBytes);
  return bytes / elem_size;
}

// The ring's layout: chunk c of the buffer, and piece j of a chunk.
struct Layout {
  size_t count;
  size_t chunk;   // elements per chunk (the last ones may be shorter or empty)
  size_t piece;   // elements per piece
  size_t pieces;  // pieces per chunk, the same for every chunk so both ends agree

  Layout(size_t count, int ranks, size_t piece_bytes, size_t elem_size)
      : count(count),
        chunk((count + ranks - 1) / ranks),
        piece(piece_elems(piece_bytes, elem_size)) {
    pieces = std::max<size_t>(1, (chunk + piece - 1) / piece);
  }
  // [begin, begin + length) of piece j of chunk c; length 0 when it falls past the end.
  std::pair<size_t, size_t> span(int c, size_t j) const {
    const size_t chunk_end = std::min(count, (c + 1) * chunk);
    const size_t begin = std::min(chunk_end, c * chunk + j * piece);
    const size_t end = std::min(chunk_end, begin + piece);
    return {begin, end - begin};
  }
};

inline int mod(int a, int n) {
  return ((a % n) + n) % n;
}

using Float4 = float __attribute__((vector_size(16)));

}  // namespace detail

// out[i] = a[i] + b[i]; out may be a. Vectorised, yet each lane is one IEEE addition, so
// the bits are those of the scalar loop.
inline void add_floats(float* out, const float* a, const float* b, size_t n) {
  using detail::Float4;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    Float4 x[4], y[4];
    std::memcpy(x, a + i, sizeof(x));
    std::memcpy(y, b + i, sizeof(y));
    for (int k = 0; k < 4; ++k) x[k] += y[k];
    std::memcpy(out + i, x, sizeof(x));
  }
  for (; i < n; ++i) out[i] = a[i] + b[i];
}

// The piece size this machine can use without risking a deadlock: `wanted` (0: the
// default) capped by net.core.wmem_max (208 KiB on a stock kernel), in whole 4 KiB. Every
// rank of a collective must use the same size: take the minimum over the ranks.
inline size_t safe_piece_bytes(size_t wanted) {
  size_t limit = 212992;  // the kernel's default, if /proc cannot say
  if (std::FILE* f = std::fopen("/proc/sys/net/core/wmem_max", "r")) {
    unsigned long long v = 0;
    if (std::fscanf(f, "%llu", &v) == 1 && v > 0) limit = v;
    std::fclose(f);
  }
  size_t piece = std::min(wanted == 0 ? kDefaultPieceBytes : wanted, limit);
  piece = std::clamp(piece, kMinPieceBytes, kMaxPieceBytes);
  return piece / kMinPieceBytes * kMinPieceBytes;
}

// Puts every pair of `context` in synchronous mode. Irreversible: Gloo's own (unbound
// buffer) algorithms no longer work on this context afterwards.
inline void make_synchronous(::gloo::Context& context, bool busy_poll) {
  for (int i = 0; i < context.size; ++i)
    if (i != context.rank) context.getPair(i)->setSync(true, busy_poll);
}

// In place: data[i] becomes the sum over the ranks. T: float (vectorised adds), double or an
// integer type. `scratch` receives the pieces to add (grown to one piece when smaller);
// keeping it from call to call saves an allocation and its page faults per call.
template <typename T>
void allreduce_sum(::gloo::Context& context, T* data, size_t count, size_t piece_bytes,
                   uint64_t seq, std::vector<T>& scratch) {
  using namespace detail;  // the ring's layout and slots
  const int n = context.size, r = context.rank;
  if (n == 1 || count == 0) return;
  const int reduce_slot = slot_for(kReduce, count, seq),
            gather_slot = slot_for(kGather, count, seq);
  const Layout layout(count, n, piece_bytes, sizeof(T));
  const size_t bytes = count * sizeof(T);
  auto& right = context.getPair(mod(r + 1, n));
  auto& left = context.getPair(mod(r - 1, n));

  if (scratch.size() < layout.piece) scratch.resize(layout.piece);
  Buffer reduce_out = right->createSendBuffer(reduce_slot, data, bytes);
  Buffer reduce_in = left->createRecvBuffer(reduce_slot, scratch.data(), layout.piece * sizeof(T));
  Buffer gather_out = right->createSendBuffer(gather_slot, data, bytes);
  Buffer gather_in = left->createRecvBuffer(gather_slot, data, bytes);
  explain_mismatch([&] {
    // Reduce-scatter: at step s, chunk r−s goes right and chunk r−s−1 comes from the left
    // and is added in; after n−1 steps this rank holds the full sum of chunk r+1.
    for (int s = 0; s < n - 1; ++s) {
      const int send_chunk = mod(r - s, n), recv_chunk = mod(r - s - 1, n);
      for (size_t j = 0; j < layout.pieces; ++j) {
        const auto [sb, sl] = layout.span(send_chunk, j);
        if (sl > 0) {
          reduce_out->send(sb * sizeof(T), sl * sizeof(T), 0);
          reduce_out->waitSend();
        }
        const auto [rb, rl] = layout.span(recv_chunk, j);
        if (rl > 0) {
          reduce_in->waitRecv();
          if constexpr (std::is_same_v<T, float>) {
            add_floats(data + rb, data + rb, scratch.data(), rl);
          } else {
            for (size_t i = 0; i < rl; ++i) data[rb + i] += scratch[i];
          }
        }
      }
    }
    // All-gather: the finished chunks travel round the ring, straight into `data`.
    for (int s = 0; s < n - 1; ++s) {
      const int send_chunk = mod(r + 1 - s, n), recv_chunk = mod(r - s, n);
      for (size_t j = 0; j < layout.pieces; ++j) {
        const auto [sb, sl] = layout.span(send_chunk, j);
        if (sl > 0) {
          gather_out->send(sb * sizeof(T), sl * sizeof(T), sb * sizeof(T));
          gather_out->waitSend();
        }
        const auto [rb, rl] = layout.span(recv_chunk, j);
        if (rl > 0) gather_in->waitRecv();
      }
    }
  });
}

inline void broadcast(::gloo::Context& context, void* data, size_t bytes, int root,
                      size_t piece_bytes, uint64_t seq) {
  using namespace detail;  // the ring's layout and slots
  const int n = context.size, r = context.rank;
  if (n == 1 || bytes == 0) return;
  const int slot = slot_for(kBroadcast, bytes, seq);
  const size_t piece = piece_elems(piece_bytes) * sizeof(float);
  const size_t pieces = (bytes + piece - 1) / piece;
  if (r == root) {
    for (int k = 1; k < n; ++k) {
      Buffer out = context.getPair(mod(root + k, n))->createSendBuffer(slot, data, bytes);
      for (size_t j = 0; j < pieces; ++j) {
        const size_t begin = j * piece, length = std::min(piece, bytes - begin);
        out->send(begin, length, begin);
        out->waitSend();
      }
    }
  } else {
    Buffer in = context.getPair(root)->createRecvBuffer(slot, data, bytes);
    explain_mismatch([&] {
      for (size_t j = 0; j < pieces; ++j) in->waitRecv();
    });
  }
}

inline void barrier(::gloo::Context& context, uint64_t seq, std::vector<float>& scratch) {
  // One element per rank: every rank's last receive depends on every rank having sent.
  std::vector<float> token(context.size, 0.0f);
  allreduce_sum(context, token.data(), token.size(), kMinPieceBytes, seq, scratch);
}

}  // namespace cairn::gloo_ring
