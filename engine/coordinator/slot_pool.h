// The slots trials run in: one per GPU on a GPU machine, one per CPU core otherwise, on this
// machine and on each peer (docs/peers.md "Placement"). A trial holds `slots_per_trial` of
// them while it runs; on GPUs they become each rank's CUDA_VISIBLE_DEVICES (device_list), so
// concurrent trials never share a device.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cairn {

// A slot: which machine (0 is this one, 1… the peers in the order they were listed) and its
// index among that machine's slots.
struct SlotRef {
  int machine = 0;
  int slot = 0;
  bool operator==(const SlotRef& other) const {
    return machine == other.machine && slot == other.slot;
  }
};

// The slots of every machine an experiment runs on. A machine can be set unavailable (its
// agent is unreachable): its free slots are not offered, and what trials held there is given
// back by release() as usual.
//
// Placement (acquire): a trial's slots are taken machine by machine, as many as each has free,
// first on the machines the caller prefers, in its order (the one holding the trial's
// checkpoint), then on the others from the one with the most free slots (ties: lower index,
// so this machine first). So a gang lands on as few machines as the free slots allow, split
// unevenly where it must be (3 + 1), and single-slot trials spread over the machines.
//
// Not thread-safe: the coordinator's loop owns it.
class SlotPool {
 public:
  explicit SlotPool(int slots) : SlotPool(std::vector<int>{slots > 0 ? slots : 1}) {}
  explicit SlotPool(const std::vector<int>& per_machine);

  int machines() const { return static_cast<int>(owner_.size()); }
  // Slots of the available machines; of one machine (available or not).
  int size() const;
  int size(int machine) const;
  // Free slots of the available machines; of one machine (0 when it is unavailable).
  int free() const;
  int free(int machine) const;
  // `count` free slots, now held by `trial`, placed as above; nullopt when fewer are free.
  std::optional<std::vector<SlotRef>> acquire(int64_t trial, int count,
                                              const std::vector<int>& preferred = {});
  void release(int64_t trial);
  // Exactly `slots`, held by `trial` from now on, when every one is free on an available
  // machine (a `cairn resume` adopting ranks that still run there); else false, nothing taken.
  bool take(int64_t trial, const std::vector<SlotRef>& slots);
  void set_available(int machine, bool available);
  // Gives `machine` `slots` slots, all free (an agent that came back, perhaps with another
  // count). The caller has released every trial held there.
  void set_slots(int machine, int slots);
  bool available(int machine) const;

 private:
  std::vector<std::vector<int64_t>> owner_;  // per machine, per slot: the trial; 0: free
  std::vector<bool> available_;
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
