// A KeyValueStore in memory, for ranks that are threads of one process (`cairn doctor`'s
// loopback check of Gloo).
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>

#include "collective/kv_store.h"

namespace cairn {

class MemoryKeyValueStore final : public KeyValueStore {
 public:
  Status set(const std::string& key, const std::string& value) override {
    {
      std::lock_guard lock(mutex_);
      values_[key] = value;
    }
    changed_.notify_all();
    return Status::Ok();
  }

  Result<std::string> wait_get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, timeout, [&] { return values_.count(key) > 0; }))
      return Status::Failed("no rank set " + key + " in time");
    return values_[key];
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

}  // namespace cairn
