// The local machine's slots: one per GPU on a GPU machine, one per CPU core otherwise. A
// trial holds `slots_per_trial` of them while it runs; on GPUs they become the trial's
// CUDA_VISIBLE_DEVICES (device_list), so concurrent trials never share a device.
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

// The GPUs the slots stand for, as CUDA_VISIBLE_DEVICES names them. A child process
// reads CUDA_VISIBLE_DEVICES against the machine's whole device list, not against its
// parent's: when cairn itself runs with CUDA_VISIBLE_DEVICES=2,3 its two devices are
// "2" and "3", and a trial must be given those names, never "0" and "1". So: the entries
// of `parent_visible` (cairn's own CUDA_VISIBLE_DEVICES; indices, UUIDs or MIG names are
// passed through as written) when it is set, else "0" … "device_count - 1"; at most
// `device_count` of them (the driver ignores entries after an invalid one).
std::vector<std::string> gpu_names(int device_count, const char* parent_visible);

// The value of CUDA_VISIBLE_DEVICES for these slots: "2,3". Slot k is gpus[k % size], so
// `--slots` above the number of GPUs puts several slots on one GPU (the user asked for it;
// docs/config.md); a GPU two of the slots share is named once.
std::string device_list(const std::vector<int>& slots, const std::vector<std::string>& gpus);

}  // namespace cairn
