// Collective communication between the ranks of a data-parallel trial: what builtin:mlp
// and C++ trials use to all-reduce gradients. Two implementations: Gloo over TCP for CPU
// buffers (collective/gloo_collective.h) and NCCL for GPU buffers (collective/nccl_collective.h).
//
// Rules every implementation keeps:
// - Every rank issues the same calls in the same order (the same sizes, the same roots),
//   from one thread. Calls execute in issue order, async ones included, so the i-th call
//   on one rank meets the i-th call on every other rank.
// - Every call is bounded by the timeout given at creation: a rank that never arrives
//   makes the others fail with a Status, never hang (the trial then exits and cairn
//   restarts all its ranks from the latest checkpoint, SPEC §7).
// - After one call failed, the collective is broken: its connections are closed (so the
//   other ranks fail fast instead of waiting out their timeout), every later call returns
//   the same error, and the contents of the buffers involved are undefined.
// - No exception leaves the module.
//
// Determinism. A sum's rounding depends on the order its terms are added. The algorithms
// used here add in an order fixed by (world size, element count) only, never by timing, and
// every rank ends with a copy of the same result (the reduced pieces are copied around, not
// recomputed). So for a given world size and bucket layout the result is bit-identical on
// every rank and in every run: with 2 ranks each element is a+b (== b+a); with N ranks each
// element is a chain ((x_i + x_i+1) + …) starting at a rank that depends on the element's
// position. Changing the world size or the bucket boundaries changes the rounding.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "common/status.h"

namespace cairn {

// An all-reduce in flight. wait() returns once the buffer holds the sum (or the call
// failed); the buffer must stay alive and untouched until then. Destroying a PendingReduce
// that was not waited for waits. It must not outlive the Collective that made it.
class PendingReduce {
 public:
  virtual ~PendingReduce() = default;
  virtual Status wait() = 0;
};

class Collective {
 public:
  virtual ~Collective() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend() const = 0;  // "gloo" or "nccl"

  // In place: data[i] becomes the sum of data[i] over all ranks. `data` is host memory for
  // Gloo, device memory for NCCL. count 0 is a no-op (on every rank alike).
  virtual Status allreduce_sum(float* data, size_t count) = 0;

  // The same, returning at once; the call is queued behind the ones issued before it. For
  // gradient buckets: issue each bucket as the backward pass finishes it, wait for all
  // before the optimizer step. Never null.
  virtual std::unique_ptr<PendingReduce> allreduce_sum_async(float* data, size_t count) = 0;

  // Copies `bytes` bytes at `data` on rank `root` into `data` on every rank.
  virtual Status broadcast(void* data, size_t bytes, int root) = 0;

  // Returns once every rank has called it.
  virtual Status barrier() = 0;
};

// A PendingReduce that is already finished, with this outcome.
class CompletedReduce final : public PendingReduce {
 public:
  explicit CompletedReduce(Status status) : status_(std::move(status)) {}
  Status wait() override { return status_; }

 private:
  Status status_;
};

}  // namespace cairn
