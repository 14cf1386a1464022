#include "engine/slot_pool.h"

#include <algorithm>

namespace cairn {

int SlotPool::free() const {
  return static_cast<int>(std::count(owner_.begin(), owner_.end(), int64_t{0}));
}

std::optional<std::vector<int>> SlotPool::acquire(int64_t trial, int count) {
  if (count <= 0 || free() < count) return std::nullopt;
  std::vector<int> got;
  for (size_t i = 0; i < owner_.size() && static_cast<int>(got.size()) < count; ++i) {
    if (owner_[i] != 0) continue;
    owner_[i] = trial;
    got.push_back(static_cast<int>(i));
  }
  return got;
}

void SlotPool::release(int64_t trial) {
  for (auto& owner : owner_)
    if (owner == trial) owner = 0;
}

std::string device_list(const std::vector<int>& slots) {
  std::string out;
  for (int s : slots) out += (out.empty() ? "" : ",") + std::to_string(s);
  return out;
}

}  // namespace cairn
