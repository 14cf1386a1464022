#include "engine/coordinator/slot_pool.h"

#include <algorithm>
#include <string_view>

namespace cairn {

SlotPool::SlotPool(const std::vector<int>& per_machine) {
  for (int slots : per_machine) owner_.emplace_back(static_cast<size_t>(std::max(0, slots)), 0);
  available_.assign(owner_.size(), true);
}

int SlotPool::size() const {
  int total = 0;
  for (int m = 0; m < machines(); ++m)
    if (available_[static_cast<size_t>(m)]) total += size(m);
  return total;
}

int SlotPool::size(int machine) const {
  if (machine < 0 || machine >= machines()) return 0;
  return static_cast<int>(owner_[static_cast<size_t>(machine)].size());
}

int SlotPool::free() const {
  int total = 0;
  for (int m = 0; m < machines(); ++m) total += free(m);
  return total;
}

int SlotPool::free(int machine) const {
  if (!available(machine)) return 0;
  const auto& owners = owner_[static_cast<size_t>(machine)];
  return static_cast<int>(std::count(owners.begin(), owners.end(), int64_t{0}));
}

std::optional<std::vector<SlotRef>> SlotPool::acquire(int64_t trial, int count,
                                                      const std::vector<int>& preferred) {
  if (count <= 0 || free() < count) return std::nullopt;
  std::vector<int> order;
  for (int m : preferred)
    if (available(m) && std::find(order.begin(), order.end(), m) == order.end()) order.push_back(m);
  std::vector<int> rest;
  for (int m = 0; m < machines(); ++m)
    if (available(m) && std::find(order.begin(), order.end(), m) == order.end()) rest.push_back(m);
  std::stable_sort(rest.begin(), rest.end(), [&](int a, int b) { return free(a) > free(b); });
  order.insert(order.end(), rest.begin(), rest.end());
  std::vector<SlotRef> got;
  for (int m : order) {
    auto& owners = owner_[static_cast<size_t>(m)];
    for (size_t i = 0; i < owners.size() && static_cast<int>(got.size()) < count; ++i) {
      if (owners[i] != 0) continue;
      owners[i] = trial;
      got.push_back({m, static_cast<int>(i)});
    }
  }
  return got;
}

bool SlotPool::take(int64_t trial, const std::vector<SlotRef>& slots) {
  for (size_t i = 0; i < slots.size(); ++i) {
    const SlotRef& s = slots[i];
    if (!available(s.machine) || s.slot < 0 ||
        s.slot >= static_cast<int>(owner_[static_cast<size_t>(s.machine)].size()) ||
        owner_[static_cast<size_t>(s.machine)][static_cast<size_t>(s.slot)] != 0 ||
        std::find(slots.begin(), slots.begin() + static_cast<long>(i), s) !=
            slots.begin() + static_cast<long>(i))
      return false;
  }
  for (const SlotRef& s : slots)
    owner_[static_cast<size_t>(s.machine)][static_cast<size_t>(s.slot)] = trial;
  return true;
}

void SlotPool::release(int64_t trial) {
  for (auto& owners : owner_)
    for (auto& owner : owners)
      if (owner == trial) owner = 0;
}

void SlotPool::set_available(int machine, bool available) {
  if (machine >= 0 && machine < machines()) available_[static_cast<size_t>(machine)] = available;
}

void SlotPool::set_slots(int machine, int slots) {
  if (machine >= 0 && machine < machines())
    owner_[static_cast<size_t>(machine)].assign(static_cast<size_t>(std::max(0, slots)), 0);
}

bool SlotPool::available(int machine) const {
  return machine >= 0 && machine < machines() && available_[static_cast<size_t>(machine)];
}

std::vector<std::string> gpu_names(int device_count, const char* parent_visible) {
  std::vector<std::string> names;
  if (device_count <= 0) return names;
  if (parent_visible != nullptr && *parent_visible != '\0') {
    std::string_view rest(parent_visible);
    while (!rest.empty() && static_cast<int>(names.size()) < device_count) {
      const size_t comma = rest.find(',');
      std::string_view entry = rest.substr(0, comma);
      while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
      while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
      if (!entry.empty()) names.emplace_back(entry);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  // Unset, or fewer entries than the driver reports (it should not happen): plain indices.
  if (names.empty())
    for (int i = 0; i < device_count; ++i) names.push_back(std::to_string(i));
  return names;
}

std::string device_list(const std::vector<int>& slots, const std::vector<std::string>& gpus) {
  std::string out;
  if (gpus.empty()) return out;
  std::vector<size_t> listed;
  for (int s : slots) {
    const size_t gpu = static_cast<size_t>(s) % gpus.size();
    // Two slots of one trial on the same GPU: name it once (CUDA rejects a repeated name).
    if (std::find(listed.begin(), listed.end(), gpu) != listed.end()) continue;
    listed.push_back(gpu);
    if (!out.empty()) out += ',';
    out += gpus[gpu];
  }
  return out;
}

}  // namespace cairn
