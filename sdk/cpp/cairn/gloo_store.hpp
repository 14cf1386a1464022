// Gloo's rendezvous store (gloo::rendezvous::Store) over a key/value table with blocking
// reads: the trial's rendezvous table in cairn (Context::kv_set/kv_get) or any other.
//
// Gloo stores binary addresses; they are hex-encoded so that the table only ever carries
// printable strings. Gloo expects failures as exceptions (gloo::IoException); whoever calls
// connectFullMesh must catch them. Needs Gloo's headers (Debian: libgloo-dev).
#pragma once

#include <gloo/common/error.h>
#include <gloo/rendezvous/store.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cairn/detail/hex.hpp"

namespace cairn {

class GlooStore final : public ::gloo::rendezvous::Store {
 public:
  // Publish `value` under `key`; false with *error when that failed.
  using SetFn =
      std::function<bool(const std::string& key, const std::string& value, std::string* error)>;
  // The value under `key`, waiting up to `timeout` for some rank to set it; nullopt with
  // *error on timeout or failure.
  using GetFn = std::function<std::optional<std::string>(
      const std::string& key, std::chrono::milliseconds timeout, std::string* error)>;

  // Every key is stored as "<prefix>/<gloo's key>": two collectives sharing one table need
  // different prefixes. `timeout` bounds every wait Gloo does not bound itself.
  GlooStore(SetFn set, GetFn get, std::string prefix, std::chrono::milliseconds timeout)
      : set_(std::move(set)), get_(std::move(get)), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    std::string error;
    if (!set_(prefix_ + "/" + key, sdk_detail::to_hex(data.data(), data.size()), &error))
      throw ::gloo::IoException("rendezvous store: " + error);
  }

  std::vector<char> get(const std::string& key) override {
    fetch(key, Clock::now() + timeout_);
    return values_.at(key);
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    const auto deadline = Clock::now() + timeout;
    for (const auto& key : keys) fetch(key, deadline);
  }

 private:
  using Clock = std::chrono::steady_clock;

  // Values are cached: Gloo waits for a key and then reads it, which would otherwise be
  // two round trips to cairn.
  void fetch(const std::string& key, Clock::time_point deadline) {
    if (values_.count(key)) return;
    // Rounded up: truncating would end the wait up to a millisecond before the deadline.
    const auto left =
        std::max(std::chrono::milliseconds(0),
                 std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()));
    std::string error;
    std::optional<std::string> value = get_(prefix_ + "/" + key, left, &error);
    if (!value) throw ::gloo::IoException("rendezvous: " + error);
    std::vector<char> bytes;
    if (!sdk_detail::from_hex(*value, bytes))
      throw ::gloo::IoException("rendezvous: malformed value under '" + prefix_ + "/" + key + "'");
    values_[key] = std::move(bytes);
  }

  SetFn set_;
  GetFn get_;
  const std::string prefix_;
  const std::chrono::milliseconds timeout_;
  std::map<std::string, std::vector<char>> values_;
};

}  // namespace cairn
