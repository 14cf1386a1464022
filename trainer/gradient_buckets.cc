#include "trainer/gradient_buckets.h"

namespace cairn {

GradientBuckets::GradientBuckets(Collective& collective, std::vector<size_t> layer_sizes,
                                 size_t bucket_bytes, bool overlap)
    : collective_(collective),
      overlap_(overlap),
      bucket_closed_by_(layer_sizes.size(), -1),
      layer_start_(layer_sizes.size(), nullptr) {
  const int layers = static_cast<int>(layer_sizes.size());
  size_t floats = 0;
  int top = layers - 1;
  for (int l = layers - 1; l >= 0; --l) {
    floats += layer_sizes[static_cast<size_t>(l)];
    if (floats * sizeof(float) >= bucket_bytes || l == 0) {
      bucket_closed_by_[static_cast<size_t>(l)] = static_cast<int>(buckets_.size());
      buckets_.push_back(Bucket{l, top, floats});
      floats = 0;
      top = l - 1;
    }
  }
}

GradientBuckets::~GradientBuckets() {
  for (auto& pending : in_flight_) pending->wait();
}

void GradientBuckets::issue(const Bucket& bucket, float* start) {
  if (!first_error_.ok()) return;
  if (overlap_) {
    in_flight_.push_back(collective_.allreduce_sum_async(start, bucket.floats));
  } else {
    first_error_ = collective_.allreduce_sum(start, bucket.floats);
  }
}

void GradientBuckets::layer_ready(int layer, std::span<float> gradients) {
  layer_start_[static_cast<size_t>(layer)] = gradients.data();
  const int closes = bucket_closed_by_[static_cast<size_t>(layer)];
  // The bucket starts at its lowest layer's gradients, which come first in memory.
  if (overlap_ && closes >= 0) issue(buckets_[static_cast<size_t>(closes)], gradients.data());
}

Status GradientBuckets::finish() {
  if (!overlap_) {
    for (const Bucket& bucket : buckets_)
      issue(bucket, layer_start_[static_cast<size_t>(bucket.first_layer)]);
  }
  for (auto& pending : in_flight_) {
    Status st = pending->wait();
    if (first_error_.ok() && !st.ok()) first_error_ = st;
  }
  in_flight_.clear();
  return first_error_;
}

}  // namespace cairn
