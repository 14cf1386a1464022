// The key/value store through which the ranks of one data-parallel trial find each other:
// the Gloo rendezvous (each rank's listening addresses) and the NCCL unique id go through
// it. In cairn it is the coordinator's per-trial table, reached over the control channel,
// so no shared file system is needed between machines (SPEC §7). collective/file_kv_store.h has a
// directory-backed one for tests and benchmarks.
#pragma once

#include <chrono>
#include <string>

#include "common/status.h"

namespace cairn {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;

  // Publishes `value` under `key` for every rank of the trial; setting a key again replaces
  // the value. The collectives only ever pass printable ASCII keys and values (binary data
  // is hex-encoded first), so an implementation may carry them in JSON strings.
  virtual Status set(const std::string& key, const std::string& value) = 0;

  // The value under `key`, waiting until some rank has set it. An error (not a hang) once
  // `timeout` has passed without it.
  virtual Result<std::string> wait_get(const std::string& key,
                                       std::chrono::milliseconds timeout) = 0;
};

}  // namespace cairn
