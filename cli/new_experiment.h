// Creating an experiment and driving it: what `cairn run` and `cairn reproduce` share.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "engine/config/config.h"
#include "store/data_fingerprint.h"
#include "store/store_location.h"

namespace cairn::cli {

struct NewExperiment {
  std::string config_file;        // absolute; names the config in messages and on resume
  std::string config_text;        // what resume parses again, with `sets`
  std::vector<std::string> sets;  // --set overrides, in order
  Json extra = Json::object();    // more fields for the experiment record
  // The data fingerprint, when the caller has taken it already (capture_provenance()).
  std::optional<DataFingerprint> data;
  bool detach = false;
  int slots = 0;                   // 0: the default
  bool run_locally = true;         // false: --slots 0
  std::vector<std::string> peers;  // --peers / resources.peers (docs/peers.md "Placement")
  std::string key_file;            // --key-file
  bool quiet = false;              // no "cairn: experiment N …" line
};

// Records the code snapshot and fingerprints, allocates the id (printed alone on the first
// line), stores the record and runs the coordinator. Returns the exit status; *id_out gets
// the experiment id once its record is stored (0 before).
int create_and_drive(const StoreLayout& store, ExperimentConfig config, const NewExperiment& what,
                     int64_t* id_out = nullptr);

}  // namespace cairn::cli
