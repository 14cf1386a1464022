// Checkpoint transfers that outlive a dropped link (docs/peers.md "Reattach: links that drop",
// issue 17 item 8). The transfers of checkpoint_client.h each run on a connection of their own,
// not on the agent's session connection, so the session's resume does not carry them; these
// wrappers do the same for them: a try that fails because of the link (TransferTry) is tried
// again on a new connection, at once and then every 200 ms, until the agent's link window
// (AgentEndpoint::link_window, the heartbeat timeout) has passed since the link failed — a
// try that moved a content whole and then broke starts the window anew, as a resumed session
// does, and so does a fetch's try that received and wrote a chunk of a content it did not
// finish, since the next try goes on after it (for a restore, a try whose agent asks a content
// from further on than the try before: it kept what that try sent; a try that fails at the
// same place each time does neither) — or
// until the agent is counted lost (AgentEndpoint::lost). Then the last error stands, as it did
// when transfers were tried once: a lost agent loses what it had not sent. A link gone silent
// (no end either side can see) ends a try when the agent's session finds it silent and
// replaces its own connection (AgentEndpoint::link_watch, link_watch.h), not only at the
// wire's 60 s timeout.
//
// What each try again relies on:
// - stage: an empty directory staged by a try whose answer was lost stays on the agent until
//   its garbage collection.
// - fetch: the agent keeps the staged directory (and its claim by trial and attempt) until a
//   fetch ends with checkpoint_done, so a new checkpoint_fetch lists it again. The contents
//   that earlier tries received completely and verified stay in `into` and are not asked for
//   again, and the content a try was receiving when it broke stays there as far as it was
//   written: the next try asks for it from that offset (checkpoint_want's "offsets") and
//   hashes the bytes kept with the rest, so nothing is kept that does not match its SHA-256
//   as a whole (an older agent sends it whole instead); `keep` sees all of them together, once,
//   when every content is here — so the checkpoint is still made durable and registered only when
//   every file is, and the caller's acknowledgement still comes once (the caller's job ends once).
// - push (a restore): the agent moves every content into its cache as soon as it is verified
//   and fsynced, so the new offer's checkpoint_want omits what arrived before the drop, and
//   keeps what arrived of the content cut in the middle (DIR/objects/tmp-partial-<digest>),
//   so it asks for the rest only.
//
// One line on stderr when a transfer loses its link, one when a try again succeeds.
//
// Thread-safety: as checkpoint_client.h; the functions block (bounded by the window and the
// wire's timeouts) and are meant for transfer threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "common/status.h"
#include "peer/checkpoint_client.h"

namespace cairn {

// The retry itself, for other transfers over a connection of their own (an orphan's fetch by
// a resume, engine/coordinator/remote_orphans.h): runs `once` until it succeeds, fails for
// another reason than the link (TransferTry::link_failed unset), or the link stays down past
// the agent's window, with the lines above (`what` names the transfer in them). `once` sees a
// fresh TransferTry each time and sets it as the transfers above do.
Status retry_over_link(const AgentEndpoint& agent, const std::string& what,
                       const std::function<Status(TransferTry&)>& once);

// The same for a transfer with a result: the last try's.
template <typename T>
Result<T> with_link_retries(const AgentEndpoint& agent, const std::string& what,
                            const std::function<Result<T>(TransferTry&)>& once) {
  std::optional<Result<T>> last;
  Status done = retry_over_link(agent, what, [&](TransferTry& t) {
    last.emplace(once(t));
    return last->ok() ? Status::Ok() : last->status();
  });
  if (!done.ok()) return done;
  return std::move(*last);
}

Result<std::string> stage_checkpoint_retrying(const AgentEndpoint& agent, const std::string& trial,
                                              int64_t attempt, std::chrono::milliseconds timeout);

// content_bytes counts the content bytes every try received (a content cut in the middle too).
Result<FetchedCheckpoint> fetch_checkpoint_retrying(
    const AgentEndpoint& agent, const std::string& trial, int64_t attempt, const std::string& path,
    const std::function<bool(const std::string&)>& lacks, const std::filesystem::path& into,
    const std::function<Status(const FetchedCheckpoint&)>& keep);

Result<PushedCheckpoint> push_checkpoint_retrying(const AgentEndpoint& agent,
                                                  const std::string& trial, int64_t attempt,
                                                  const std::filesystem::path& dir,
                                                  const WireManifest& manifest,
                                                  std::chrono::milliseconds connect_timeout);
// The same, scanning `dir` first (scan_checkpoint_dir).
Result<PushedCheckpoint> push_checkpoint_retrying(const AgentEndpoint& agent,
                                                  const std::string& trial, int64_t attempt,
                                                  const std::filesystem::path& dir,
                                                  std::chrono::milliseconds connect_timeout);

}  // namespace cairn
