// The local machine's slots: one per GPU on a GPU machine, one per CPU core otherwise. A
// trial holds `slots_per_trial` of them while it runs; on GPUs their indices become the
// trial's CUDA_VISIBLE_DEVICES, so concurrent trials never share a device.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cairn {

class SlotPool {
 public:
  explicit SlotPool(int slots) : owner_(static_cast<size_t>(slots > 0 ? slots : 1), 0) {}

  int size() const { return static_cast<int>(owner_.size()); }
  int free() const;
  // The lowest `count` free slot indices, now held by `trial`; nullopt when not enough are free.
  std::optional<std::vector<int>> acquire(int64_t trial, int count);
  void release(int64_t trial);

 private:
  std::vector<int64_t> owner_;  // 0: free
};

// "0,1" — the value of CUDA_VISIBLE_DEVICES for these slots.
std::string device_list(const std::vector<int>& slots);

}  // namespace cairn
