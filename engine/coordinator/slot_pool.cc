#include "engine/coordinator/slot_pool.h"

#include <algorithm>
#include <string_view>

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
