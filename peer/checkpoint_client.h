// The coordinator's side of checkpoints over the wire (docs/peers.md "Checkpoints over the
// wire"; the agent's side is agent_checkpoints.h). Each call opens its own connection to the
// agent, so it can run on a thread of its own while the connection that runs ranks goes on.
//
// Thread-safety: the functions may run on several threads at once (a TlsContext is shared).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "peer/checkpoint_manifest.h"
#include "peer/link_watch.h"
#include "peer/peer_address.h"
#include "peer/peer_connection.h"
#include "peer/tls_session.h"

namespace cairn {

// Where an agent is and how to authenticate to it.
struct AgentEndpoint {
  PeerAddress address;
  std::shared_ptr<TlsContext> tls;
  // How long a checkpoint transfer whose link dropped goes on trying on new connections
  // (checkpoint_retry.h): the heartbeat timeout, within which the agent's session is resumed
  // too (a RemoteLauncher sets both). 0: a transfer is tried once.
  std::chrono::milliseconds link_window{0};
  // Set once the agent is counted lost (or its launcher ends): tries stop then. May be null.
  std::shared_ptr<std::atomic<bool>> lost;
  // Lets go of the transfers' connections when the agent's session finds the link silent
  // (link_watch.h). May be null.
  std::shared_ptr<LinkWatch> link_watch;
  // The coordinator's session on the agent ("" when none): named in each transfer request,
  // so the agent lets go of its side of the transfer when that session's connection ends
  // (agent_sessions.h watch_transfer) rather than at the wire's 60 s timeout.
  std::string session;
};

struct FetchedContent;

// One try of a transfer, for a caller that tries again on a new connection when the link
// dropped (checkpoint_retry.h). Optional everywhere: nullptr, tried once as before.
struct TransferTry {
  // Set when the try failed because of the link: the connection could not be made (nothing
  // answers; not a key or version mismatch), or it broke, closed or timed out mid-exchange.
  // A refusal by the agent, an answer off the protocol, content that does not hash to its
  // digest, or this side's failure to keep what it received is not the link's. (A local
  // read or write error in the middle of a content counts as the link's: the try cannot tell
  // it from the connection's; a try again fails the same way, within the window.)
  bool link_failed = false;
  // Whether the connection was made, and whether the try made progress: a content crossed
  // whole (received and verified by a fetch; sent by a push), or, for a fetch, a chunk of a
  // content cut in the middle was received and written (the next try goes on after it).
  bool connected = false;
  bool progressed = false;
  // fetch_checkpoint: the content bytes this try received, a content cut in the middle
  // included (a try again asks only for its rest).
  uint64_t content_bytes = 0;
  // When set, connecting gives up by then (within the transfer's own timeout).
  std::optional<std::chrono::steady_clock::time_point> connect_by;
  // The try's connection's registration with the agent's LinkWatch (outlives the connection).
  std::unique_ptr<LinkWatch::Registration> release;
  // fetch_checkpoint: called with each content once it is complete and verified (written
  // under `into`, not yet durable).
  std::function<void(const FetchedContent&)> received;
  // push_checkpoint: the offset the agent asked each content from in the tries so far (kept
  // by the caller across tries). An agent that asks from further on than before kept what
  // the earlier try sent of it: progress, which this try reports (a try again of a restore
  // cannot otherwise tell bytes the agent wrote from bytes lost in the socket).
  std::map<std::string, uint64_t>* asked_from = nullptr;
};

// A try's connection (checkpoint_retry.h): its failure is the link's (t->link_failed) when
// nothing answered; within `timeout`, and by the try's connect_by; a lost agent lets it go at
// once (the try's LinkWatch registration).
Result<std::unique_ptr<PeerConnection>> connect_for_try(const AgentEndpoint& agent,
                                                        std::chrono::milliseconds timeout,
                                                        TransferTry* t);

// A connection of its own to `agent`, within `timeout` (connection and handshake). `failure`
// (when given) says which kind of failure (peer_connection.h).
Result<std::unique_ptr<PeerConnection>> connect_endpoint(const AgentEndpoint& agent,
                                                         std::chrono::milliseconds timeout,
                                                         PeerFailure* failure = nullptr);
// The agent's next frame, which must be of type `expected`; its refusal ({"type": "error",
// "reason"}) or anything else is an error naming the agent (one line). `link_failed` (when
// given) is set when no frame came (the connection broke, closed or timed out).
Result<Json> agent_answer(PeerConnection& peer, const AgentEndpoint& agent,
                          const std::string& expected, bool* link_failed = nullptr);

// A fresh directory on the agent for a checkpoint of `trial`'s `attempt`: its absolute path
// there.
Result<std::string> stage_checkpoint(const AgentEndpoint& agent, const std::string& trial,
                                     int64_t attempt, std::chrono::milliseconds timeout,
                                     TransferTry* try_state = nullptr);

struct FetchedContent {
  std::string sha256;
  uint64_t size = 0;
  std::filesystem::path file;  // where it was written (below `into`)
};

// The receiving side of a fetch once the agent's manifest arrived: a staged checkpoint's
// (fetch_checkpoint) and an orphan's by a `cairn resume` (engine/coordinator/remote_orphans.h)
// are this one piece of code, so both go on from the bytes an earlier try kept. Asks `agent`
// for `contents` (checkpoint_want), each from what its `file` holds already — the start of it
// that an earlier try of the same transfer wrote before its connection broke ("offsets",
// checkpoint_want.h) — and receives them in order, each into its file and verified against
// its SHA-256 as a whole, kept bytes included (fsynced with `sync`). `each` (when given) is
// called with every content once it is verified; its error ends the call. Adds the content
// bytes that crossed the wire to *counted, and sets `t` (when given) as a fetch's try sets it
// (link_failed, progressed, content_bytes = *counted). A content whose bytes are in doubt
// (a chunk off the protocol, a digest that does not match) is removed; one the link cut stays
// for the next try.
Status receive_contents(PeerConnection& peer, const AgentEndpoint& agent,
                        const std::vector<FetchedContent>& contents, bool sync, TransferTry* t,
                        uint64_t* counted,
                        const std::function<Status(const FetchedContent&)>& each = {});

struct FetchedCheckpoint {
  WireManifest manifest;                 // checked (checkpoint_manifest.h)
  std::vector<FetchedContent> received;  // only what `lacks` asked for, each digest once
  uint64_t content_bytes = 0;            // content bytes that crossed the wire
};

// Fetches the checkpoint the agent staged at `path` for `trial`'s `attempt`: receives its
// manifest, asks for the contents `lacks` says this side needs, writes each to a new file
// under `into` (verified against its SHA-256), then calls `keep` with the result. Only when
// `keep` succeeds (the caller made it durable) is the agent told it may remove its copy.
Result<FetchedCheckpoint> fetch_checkpoint(
    const AgentEndpoint& agent, const std::string& trial, int64_t attempt, const std::string& path,
    const std::function<bool(const std::string&)>& lacks, const std::filesystem::path& into,
    const std::function<Status(const FetchedCheckpoint&)>& keep, TransferTry* try_state = nullptr);

struct PushedCheckpoint {
  std::string path;  // the checkpoint directory on the agent
  size_t files = 0;
  uint64_t content_bytes = 0;  // content bytes that crossed the wire
};

// Restores the checkpoint in the local directory `dir` on the agent for `trial`'s `attempt`:
// sends its manifest, then only the contents the agent's cache lacks.
Result<PushedCheckpoint> push_checkpoint(const AgentEndpoint& agent, const std::string& trial,
                                         int64_t attempt, const std::filesystem::path& dir,
                                         std::chrono::milliseconds connect_timeout);
// The same with `manifest`, the scan of `dir` made already (scan_checkpoint_dir), for a
// checkpoint restored on several agents and hashed once.
Result<PushedCheckpoint> push_checkpoint(const AgentEndpoint& agent, const std::string& trial,
                                         int64_t attempt, const std::filesystem::path& dir,
                                         const WireManifest& manifest,
                                         std::chrono::milliseconds connect_timeout,
                                         TransferTry* try_state = nullptr);

}  // namespace cairn
