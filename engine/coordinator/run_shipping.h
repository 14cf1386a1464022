// What a rank on a peer runs from, and getting it there (docs/peers.md "Code and data on a
// peer"). A local rank runs in the experiment's run directory, a checkout of its snapshot
// with its stored data restored and its unstored data linked (provenance.h); a rank on an
// agent runs in the agent's copy of the same: DIR/work/runs/<run>, made by the agent from
// its cached checkout of the snapshot's tree (DIR/code/<tree>), the stored data files it
// was sent by content (DIR/data/<sha256>), and links to unstored data, which must already
// be at the same absolute path on the agent and give the recorded fingerprint there.
//
// The shipping uses a connection of its own (not the launcher's, whose thread relays the
// ranks), once per run and agent:
//   code_have {tree}                 → code_have {has, tips}       (trees the agent holds)
//   code_pack {tree, bytes} + chunks → code_ready {objects, bytes} (what we packed: the
//                                      tree's objects minus the tips'; bytes 0 when none)
//   data_have {sha256: […]}          → data_have {missing: […]}
//   data_put {sha256, size} + chunks → data_stored {sha256}        (per missing file)
//   prepare_run {run, tree, files, links, check} → run_ready {cwd}
// and, for placement, on its own: data_check {entries, files} → data_check {ok, reason}.
//
// Thread-safety: RunShipper is used by one thread (a launcher's caller); the functions are
// pure over their arguments.
#pragma once

#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "common/json.h"
#include "common/status.h"
#include "engine/config/config.h"
#include "peer/peer_address.h"
#include "peer/peer_connection.h"
#include "peer/tls_session.h"
#include "store/data_fingerprint.h"
#include "store/store_location.h"

namespace cairn {

struct RunSource {
  std::filesystem::path store_root;       // the `.cairn` directory (code.git, objects/)
  std::string tree;                       // the snapshot's tree
  DataFingerprint data;                   // as recorded
  Status data_damaged;                    // the record cannot be read: nothing is shipped
  std::vector<std::string> data_entries;  // the config's `data:`
  std::filesystem::path workdir;          // absolute: where relative data entries lie
  std::string run;  // the agent's name for the run directory: one per experiment, as locally
};

// The experiment's RunSource, or null when it has no snapshot (recorded before snapshots
// existed: its ranks run in the live workdir locally, and on a peer from what argv names).
// `local_run_dir` is the experiment's run directory here (prepare_run_directory()). A
// damaged data record does not fail it (local ranks do not need it): ship_run refuses.
Result<std::shared_ptr<const RunSource>> make_run_source(
    const StoreLayout& store, const Json& experiment, const ExperimentConfig& config,
    const std::filesystem::path& local_run_dir);

// What the agent must do with the data: files to ship (stored, with paths below the run
// directory), links to make in the run directory (relative entries of data too large to
// keep → the same absolute path), and what must already be on the agent, with its
// fingerprint (absolute paths; entries of unstored data, and stored data that lies outside
// the workdir). An entry that is a link cairn made in the store (a `cairn reproduce`
// checkout's) is named by where it leads (store_links.h): the agent has the data, not the
// store.
struct DataPlan {
  std::vector<DataFile> ship;
  std::vector<std::pair<std::string, std::string>> links;  // path in the run dir → target
  std::vector<std::string> check_entries;
  std::vector<DataFile> check_files;
  Json check_json() const;  // {"entries": […], "files": [{"path", "sha256", "size"}]}
};
DataPlan plan_data(const RunSource& source);

// What one shipment cost: objects and bytes on the wire (the agent logs the same).
struct ShipStats {
  uint64_t objects = 0, pack_bytes = 0, data_files = 0, data_bytes = 0;
};

// Ships `source` over `peer` (an agent that said hello) and has it prepare the run
// directory. Returns the ranks' cwd, relative to the agent's DIR/work. The error is one
// line: a refused tree, data missing or different there, a broken connection.
Result<std::string> ship_run(PeerConnection& peer, const RunSource& source, Deadline deadline,
                             ShipStats* stats = nullptr);

// Whether the agent has the data `source` cannot ship at the same absolute path with the
// recorded fingerprint: Ok, or Failed with the agent's one line (what is missing or
// different) — what placement asks before putting a trial there. Io when the question could
// not be asked or answered (no connection, an error reply): nothing is known then.
Status check_data_on_agent(const PeerAddress& address, std::shared_ptr<TlsContext> client,
                           const RunSource& source, Deadline deadline);

// One agent's shipments: each run is shipped once, over a connection of its own, and its
// cwd remembered. prefetch() starts shipping on a thread of its own, so that the first
// launch finds it done (or waits only for the rest of it).
class RunShipper {
 public:
  RunShipper(PeerAddress address, std::shared_ptr<TlsContext> client);
  // Ends a shipment under way and joins its thread: at once once it is connected, else
  // within the connect timeout (10 s).
  ~RunShipper();
  RunShipper(const RunShipper&) = delete;
  RunShipper& operator=(const RunShipper&) = delete;

  // Starts shipping `source` unless it is shipped or under way. Never blocks.
  void prefetch(std::shared_ptr<const RunSource> source);
  // The run's cwd on the agent: what a prefetch got (waiting for it), else shipped now. A
  // failed shipment is tried again by the next call.
  Result<std::string> prepare(const RunSource& source);

 private:
  Result<std::string> ship(const RunSource& source);
  PeerAddress address_;
  std::shared_ptr<TlsContext> client_;
  UniqueFd stop_read_, stop_write_;         // readable once the shipper is destroyed
  std::map<std::string, std::string> cwd_;  // run → cwd on the agent
  std::map<std::string, std::future<Result<std::string>>> under_way_;
};

}  // namespace cairn
