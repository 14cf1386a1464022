// The KeyValueStore of collective/kv_store.h over the C++ SDK's rendezvous calls (Context::kv_set,
// Context::kv_get): the table lives in the coordinator, per trial attempt, and is reached
// over the control channel. This is how builtin:mlp's ranks (and a C++ trial linked with
// cairn's collectives) find each other.
#pragma once

#include <cairn/trial.hpp>

#include <chrono>
#include <string>

#include "collective/kv_store.h"

namespace cairn {

class SdkKeyValueStore final : public KeyValueStore {
 public:
  explicit SdkKeyValueStore(Context& context) : context_(context) {}

  Status set(const std::string& key, const std::string& value) override {
    std::string error;
    if (!context_.kv_set(key, value, &error)) return Status::Failed(error);
    return Status::Ok();
  }

  Result<std::string> wait_get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::string error;
    auto value = context_.kv_get(key, timeout, &error);
    if (!value) return Status::Failed(error);
    return *value;
  }

 private:
  Context& context_;
};

}  // namespace cairn
