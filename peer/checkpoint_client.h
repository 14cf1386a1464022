// The coordinator's side of checkpoints over the wire (docs/peers.md "Checkpoints over the
// wire"; the agent's side is agent_checkpoints.h). Each call opens its own connection to the
// agent, so it can run on a thread of its own while the connection that runs ranks goes on.
//
// Thread-safety: the functions may run on several threads at once (a TlsContext is shared).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "peer/checkpoint_manifest.h"
#include "peer/peer_address.h"
#include "peer/peer_connection.h"
#include "peer/tls_session.h"

namespace cairn {

// Where an agent is and how to authenticate to it.
struct AgentEndpoint {
  PeerAddress address;
  std::shared_ptr<TlsContext> tls;
};

// A connection of its own to `agent`, within `timeout` (connection and handshake).
Result<std::unique_ptr<PeerConnection>> connect_endpoint(const AgentEndpoint& agent,
                                                         std::chrono::milliseconds timeout);
// The agent's next frame, which must be of type `expected`; its refusal ({"type": "error",
// "reason"}) or anything else is an error naming the agent (one line).
Result<Json> agent_answer(PeerConnection& peer, const AgentEndpoint& agent,
                          const std::string& expected);

// A fresh directory on the agent for a checkpoint of `trial`'s `attempt`: its absolute path
// there.
Result<std::string> stage_checkpoint(const AgentEndpoint& agent, const std::string& trial,
                                     int64_t attempt, std::chrono::milliseconds timeout);

struct FetchedContent {
  std::string sha256;
  uint64_t size = 0;
  std::filesystem::path file;  // where it was written (below `into`)
};

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
    const std::function<Status(const FetchedCheckpoint&)>& keep);

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
                                         std::chrono::milliseconds connect_timeout);

}  // namespace cairn
