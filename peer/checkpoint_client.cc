#include "peer/checkpoint_client.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/file_util.h"
#include "peer/agent_client.h"
#include "peer/checkpoint_want.h"
#include "peer/checkpoint_wire.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kConnectTime = std::chrono::seconds(10);

Json owner(const AgentEndpoint& agent, const std::string& type, const std::string& trial,
           int64_t attempt) {
  Json m{{"type", type}, {"trial", trial}, {"attempt", attempt}};
  // Optional (an older agent ignores it): the agent's side lets go with this session's link.
  if (!agent.session.empty()) m["session"] = agent.session;
  return m;
}

// A try's connection (TransferTry): its failure is the link's when nothing answered; within
// `timeout`, and by the try's connect_by.
Result<std::unique_ptr<PeerConnection>> connect_try(const AgentEndpoint& agent,
                                                    std::chrono::milliseconds timeout,
                                                    TransferTry* t) {
  auto deadline = Clock::now() + timeout;
  if (t && t->connect_by) deadline = std::min(deadline, *t->connect_by);
  PeerFailure failure = PeerFailure::kNone;
  // Registered before connecting: an agent counted lost while this connects (a stopped
  // one accepts and never answers the handshake) lets go now, not at `deadline`.
  std::unique_ptr<LinkWatch::Registration> release;
  if (t && agent.link_watch) release = LinkWatch::ahead(agent.link_watch);
  const PeerRelease hook = release ? release->release() : PeerRelease{};
  auto peer = connect_to_agent(agent.address, agent.tls, deadline, &failure, nullptr,
                               release ? &hook : nullptr);
  if (t && !peer.ok())
    t->link_failed = failure == PeerFailure::kUnreachable || failure == PeerFailure::kBroken;
  if (t && peer.ok()) {
    t->connected = true;
    t->release = std::move(release);
  }
  return peer;
}

// Marks the try's failure as the link's and returns `s`.
Status link_broke(TransferTry* t, Status s) {
  if (t) t->link_failed = true;
  return s;
}

}  // namespace

Result<std::unique_ptr<PeerConnection>> connect_for_try(const AgentEndpoint& agent,
                                                        std::chrono::milliseconds timeout,
                                                        TransferTry* t) {
  return connect_try(agent, timeout, t);
}

Result<std::unique_ptr<PeerConnection>> connect_endpoint(const AgentEndpoint& agent,
                                                         std::chrono::milliseconds timeout,
                                                         PeerFailure* failure) {
  PeerFailure ignored;
  return connect_to_agent(agent.address, agent.tls, Clock::now() + timeout,
                          failure ? failure : &ignored);
}

Result<Json> agent_answer(PeerConnection& peer, const AgentEndpoint& agent,
                          const std::string& expected, bool* link_failed) {
  auto m = receive_frame(peer);
  if (!m.ok()) {
    // A frame that is not one (kBadInput) is the agent's fault, not the link's.
    if (link_failed && m.status().kind() != ErrorKind::kBadInput) *link_failed = true;
    return Status::Failed(agent.address.text() + ": " + m.status().message());
  }
  if ((*m)["type"] == "error") {
    const Json reason = m->value("reason", Json("no reason given"));
    return Status::Failed(agent.address.text() + " refused: " +
                          (reason.is_string() ? reason.get<std::string>().substr(0, 500) : "?"));
  }
  if ((*m)["type"] != expected)
    return Status::Failed(agent.address.text() + ": expected " + expected + ", got " +
                          (*m)["type"].get<std::string>().substr(0, 64));
  return m;
}

Result<std::string> stage_checkpoint(const AgentEndpoint& agent, const std::string& trial,
                                     int64_t attempt, std::chrono::milliseconds timeout,
                                     TransferTry* t) {
  auto peer = connect_try(agent, timeout, t);
  if (!peer.ok()) return peer.status();
  if (Status s =
          (*peer)->send(owner(agent, "checkpoint_stage", trial, attempt), Clock::now() + timeout);
      !s.ok())
    return link_broke(t, Status::Failed(agent.address.text() + ": " + s.message()));
  auto staged = agent_answer(**peer, agent, "checkpoint_staged", t ? &t->link_failed : nullptr);
  if (!staged.ok()) return staged.status();
  const Json path = staged->value("path", Json());
  if (!path.is_string() || !fs::path(path.get<std::string>()).is_absolute())
    return Status::Failed(agent.address.text() + ": staged no absolute path");
  (*peer)->close(Clock::now() + std::chrono::seconds(1));
  return path.get<std::string>();
}

Status receive_contents(PeerConnection& peer, const AgentEndpoint& agent,
                        const std::vector<FetchedContent>& contents, bool sync, TransferTry* t,
                        uint64_t* counted,
                        const std::function<Status(const FetchedContent&)>& each) {
  // A call on the connection that failed: the link's, unless the agent went off the protocol.
  auto link = [&](const Status& s) {
    const Status named = Status::Failed(agent.address.text() + ": " + s.message());
    return s.kind() == ErrorKind::kBadInput ? named : link_broke(t, named);
  };
  // Each from what its file holds already: an earlier try's start of it.
  std::vector<WantedContent> wanted;
  for (const FetchedContent& c : contents) {
    struct stat st {};
    const bool kept = ::lstat(c.file.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
                      static_cast<uint64_t>(st.st_size) <= c.size;
    wanted.push_back({c.sha256, kept ? static_cast<uint64_t>(st.st_size) : 0});
  }
  if (Status s = peer.send(checkpoint_want_message(wanted), Clock::now() + kChunkTime); !s.ok())
    return link(s);
  for (size_t i = 0; i < contents.size(); ++i) {
    const FetchedContent& c = contents[i];
    UniqueFd fd(::open(c.file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!fd) return Status::Io("cannot create " + c.file.string() + ": " + errno_text());
    Status got = receive_content(peer, c.sha256, c.size, fd.get(), sync, counted, wanted[i].from);
    if (t) t->content_bytes = *counted;
    // Whole chunks received and written before a break are progress too: the next try goes
    // on after them (a content far larger than what one try of a flapping link carries still
    // arrives). A try that fails at the same place each time (this side's disk full) writes
    // no chunk, so it does not count.
    if (t && t->content_bytes > 0) t->progressed = true;
    if (!got.ok()) {
      // A content whose bytes are in doubt is not gone on from.
      if (got.kind() == ErrorKind::kBadInput || got.kind() == ErrorKind::kCorrupt)
        ::unlink(c.file.c_str());
      return link(got);
    }
    if (t) t->progressed = true;
    if (each)
      if (Status done = each(c); !done.ok()) return done;
  }
  return Status::Ok();
}

Result<FetchedCheckpoint> fetch_checkpoint(
    const AgentEndpoint& agent, const std::string& trial, int64_t attempt, const std::string& path,
    const std::function<bool(const std::string&)>& lacks, const fs::path& into,
    const std::function<Status(const FetchedCheckpoint&)>& keep, TransferTry* t) {
  auto connected = connect_try(agent, kConnectTime, t);
  if (!connected.ok()) return connected.status();
  PeerConnection& peer = **connected;
  auto broken = [&](const Status& s) {
    return Status::Failed(agent.address.text() + ": " + s.message());
  };
  // A call on the connection that failed: the link's, unless the agent went off the protocol.
  auto link = [&](const Status& s) {
    return s.kind() == ErrorKind::kBadInput ? broken(s) : link_broke(t, broken(s));
  };
  bool* link_failed = t ? &t->link_failed : nullptr;
  Json request = owner(agent, "checkpoint_fetch", trial, attempt);
  request["path"] = path;
  if (Status s = peer.send(request, Clock::now() + kChunkTime); !s.ok()) return link(s);
  auto listed = agent_answer(peer, agent, "checkpoint_manifest", link_failed);
  if (!listed.ok()) return listed.status();
  if (listed->value("trial", Json()) != trial || listed->value("attempt", Json()) != attempt)
    return Status::Failed(agent.address.text() + ": a manifest for another trial or attempt");
  auto manifest = parse_wire_manifest(listed->value("manifest", Json()));
  if (!manifest.ok()) return broken(manifest.status());
  FetchedCheckpoint fetched;
  fetched.manifest = std::move(*manifest);
  // Each content this side lacks, once, into `into`, where an earlier try of the transfer
  // may have left its start (cut in the middle: checkpoint_retry.h keeps it).
  std::set<std::string> asked;
  for (const WireFile& f : fetched.manifest.files) {
    if (asked.count(f.sha256) || !lacks(f.sha256)) continue;
    asked.insert(f.sha256);
    fetched.received.push_back({f.sha256, f.size, into / f.sha256});
  }
  std::function<Status(const FetchedContent&)> each;
  if (t && t->received)
    each = [t](const FetchedContent& c) {
      t->received(c);
      return Status::Ok();
    };
  // Not fsynced here: the caller's keep() makes everything durable in one go.
  if (Status got = receive_contents(peer, agent, fetched.received, /*sync=*/false, t,
                                    &fetched.content_bytes, each);
      !got.ok())
    return got;
  auto sent = agent_answer(peer, agent, "checkpoint_sent", link_failed);
  if (!sent.ok()) return sent.status();
  if (Status kept = keep(fetched); !kept.ok()) return kept;
  // The checkpoint is ours now: whether the agent manages to drop its copy is its business
  // (it says so in its log), so an error past this point is not the transfer's.
  if (peer.send(Json{{"type", "checkpoint_done"}}, Clock::now() + kChunkTime).ok())
    (void)agent_answer(peer, agent, "checkpoint_dropped");
  peer.close(Clock::now() + std::chrono::seconds(1));
  return fetched;
}

Result<PushedCheckpoint> push_checkpoint(const AgentEndpoint& agent, const std::string& trial,
                                         int64_t attempt, const fs::path& dir,
                                         std::chrono::milliseconds connect_timeout) {
  auto manifest = scan_checkpoint_dir(dir);
  if (!manifest.ok()) return manifest.status();
  return push_checkpoint(agent, trial, attempt, dir, *manifest, connect_timeout);
}

Result<PushedCheckpoint> push_checkpoint(const AgentEndpoint& agent, const std::string& trial,
                                         int64_t attempt, const fs::path& dir,
                                         const WireManifest& manifest,
                                         std::chrono::milliseconds connect_timeout,
                                         TransferTry* t) {
  auto connected = connect_try(agent, connect_timeout, t);
  if (!connected.ok()) return connected.status();
  PeerConnection& peer = **connected;
  auto broken = [&](const Status& s) {
    return Status::Failed(agent.address.text() + ": " + s.message());
  };
  auto link = [&](const Status& s) { return link_broke(t, broken(s)); };
  bool* link_failed = t ? &t->link_failed : nullptr;
  Json offer = owner(agent, "checkpoint_offer", trial, attempt);
  offer["manifest"] = manifest.to_json();
  if (Status s = peer.send(offer, Clock::now() + kChunkTime); !s.ok()) return link(s);
  auto want = agent_answer(peer, agent, "checkpoint_want", link_failed);
  if (!want.ok()) return want.status();
  PushedCheckpoint pushed;
  pushed.files = manifest.files.size();
  // Each content the agent lacks, from the offset it asks (what it kept of a try cut in the
  // middle): checked before any file is read, an offset beyond a content refused.
  auto wanted = parse_checkpoint_want(*want, manifest);
  if (!wanted.ok()) return broken(wanted.status());
  for (const WantedFile& w : *wanted) {
    const WireFile& f = *w.file;
    if (t && t->asked_from) {
      uint64_t& before = (*t->asked_from)[f.sha256];
      if (w.from > before) t->progressed = true;
      before = w.from;
    }
    UniqueFd fd = open_beneath(dir, f.path);
    if (!fd) return Status::Io("cannot open " + (dir / f.path).string() + ": " + errno_text());
    if (Status s = send_content(peer, fd.get(), f.sha256, f.size, &pushed.content_bytes, w.from);
        !s.ok())
      return link(s);
    if (t) t->progressed = true;
  }
  if (Status s = peer.send(Json{{"type", "checkpoint_sent"}, {"bytes", pushed.content_bytes}},
                           Clock::now() + kChunkTime);
      !s.ok())
    return link(s);
  auto restored = agent_answer(peer, agent, "checkpoint_restored", link_failed);
  if (!restored.ok()) return restored.status();
  const Json path = restored->value("path", Json());
  if (!path.is_string()) return broken(Status::Failed("restored without a path"));
  pushed.path = path.get<std::string>();
  peer.close(Clock::now() + std::chrono::seconds(1));
  return pushed;
}

}  // namespace cairn
