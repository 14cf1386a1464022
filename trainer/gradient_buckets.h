// Gradient all-reduce for a data-parallel trainer, in buckets: consecutive layers'
// gradients (contiguous in the model's flat buffer) grouped until a bucket holds at least
// `bucket_bytes`, walking from the output layer back, the order in which the backward pass
// finishes them. With `overlap`, a bucket's all-reduce starts the moment its last layer is
// final, while the backward pass goes on with the layers below; otherwise every bucket is
// reduced after the backward pass. The layout is the same in both modes and on every rank,
// so both modes issue the same calls and give the same bits (collective/collective.h,
// "Determinism"), and only the timing differs.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "collective/collective.h"
#include "common/status.h"

namespace cairn {

class GradientBuckets {
 public:
  // layer_sizes[l]: the number of gradient floats of layer l, whose gradients follow layer
  // l−1's in memory. `collective` must outlive this object.
  GradientBuckets(Collective& collective, std::vector<size_t> layer_sizes, size_t bucket_bytes,
                  bool overlap);
  ~GradientBuckets();  // waits for reductions still in flight
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // Called by the backward pass once layer `layer`'s gradients are final; `gradients` is that
  // layer's span of the flat buffer. Layers arrive from the last to the first.
  void layer_ready(int layer, std::span<float> gradients);

  // After the backward pass: reduces what was not reduced yet, waits for everything, and
  // scales nothing (the trainer already divided by the global batch). An error means the
  // collective broke (a rank died or timed out); the gradients are then undefined.
  Status finish();

  size_t bucket_count() const { return buckets_.size(); }

 private:
  struct Bucket {
    int first_layer;  // the lowest layer: the last one the backward pass finishes
    int last_layer;
    size_t floats;
  };
  void issue(const Bucket& bucket, float* start);

  Collective& collective_;
  bool overlap_;
  std::vector<Bucket> buckets_;        // in the order the backward pass completes them
  std::vector<int> bucket_closed_by_;  // per layer: the bucket it completes, or −1
  std::vector<float*> layer_start_;    // per layer: where its gradients are, this step
  std::vector<std::unique_ptr<PendingReduce>> in_flight_;
  Status first_error_;
};

}  // namespace cairn
