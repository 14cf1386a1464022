#include "peer/checkpoint_client.h"

#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <set>

#include "common/file_util.h"
#include "peer/agent_client.h"
#include "peer/checkpoint_wire.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kConnectTime = std::chrono::seconds(10);

Json owner(const std::string& type, const std::string& trial, int64_t attempt) {
  return Json{{"type", type}, {"trial", trial}, {"attempt", attempt}};
}

}  // namespace

Result<std::unique_ptr<PeerConnection>> connect_endpoint(const AgentEndpoint& agent,
                                                         std::chrono::milliseconds timeout) {
  PeerFailure failure;
  return connect_to_agent(agent.address, agent.tls, Clock::now() + timeout, &failure);
}

Result<Json> agent_answer(PeerConnection& peer, const AgentEndpoint& agent,
                          const std::string& expected) {
  auto m = receive_frame(peer);
  if (!m.ok()) return Status::Failed(agent.address.text() + ": " + m.status().message());
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
                                     int64_t attempt, std::chrono::milliseconds timeout) {
  auto peer = connect_endpoint(agent, timeout);
  if (!peer.ok()) return peer.status();
  if (Status s = (*peer)->send(owner("checkpoint_stage", trial, attempt), Clock::now() + timeout);
      !s.ok())
    return Status::Failed(agent.address.text() + ": " + s.message());
  auto staged = agent_answer(**peer, agent, "checkpoint_staged");
  if (!staged.ok()) return staged.status();
  const Json path = staged->value("path", Json());
  if (!path.is_string() || !fs::path(path.get<std::string>()).is_absolute())
    return Status::Failed(agent.address.text() + ": staged no absolute path");
  (*peer)->close(Clock::now() + std::chrono::seconds(1));
  return path.get<std::string>();
}

Result<FetchedCheckpoint> fetch_checkpoint(
    const AgentEndpoint& agent, const std::string& trial, int64_t attempt, const std::string& path,
    const std::function<bool(const std::string&)>& lacks, const fs::path& into,
    const std::function<Status(const FetchedCheckpoint&)>& keep) {
  auto connected = connect_endpoint(agent, kConnectTime);
  if (!connected.ok()) return connected.status();
  PeerConnection& peer = **connected;
  auto broken = [&](const Status& s) {
    return Status::Failed(agent.address.text() + ": " + s.message());
  };
  Json request = owner("checkpoint_fetch", trial, attempt);
  request["path"] = path;
  if (Status s = peer.send(request, Clock::now() + kChunkTime); !s.ok()) return broken(s);
  auto listed = agent_answer(peer, agent, "checkpoint_manifest");
  if (!listed.ok()) return listed.status();
  if (listed->value("trial", Json()) != trial || listed->value("attempt", Json()) != attempt)
    return Status::Failed(agent.address.text() + ": a manifest for another trial or attempt");
  auto manifest = parse_wire_manifest(listed->value("manifest", Json()));
  if (!manifest.ok()) return broken(manifest.status());
  FetchedCheckpoint fetched;
  fetched.manifest = std::move(*manifest);
  std::set<std::string> asked;
  Json digests = Json::array();
  for (const WireFile& f : fetched.manifest.files) {
    if (asked.count(f.sha256) || !lacks(f.sha256)) continue;
    asked.insert(f.sha256);
    digests.push_back(f.sha256);
    fetched.received.push_back({f.sha256, f.size, into / f.sha256});
  }
  if (Status s = peer.send(Json{{"type", "checkpoint_want"}, {"digests", digests}},
                           Clock::now() + kChunkTime);
      !s.ok())
    return broken(s);
  for (const FetchedContent& c : fetched.received) {
    UniqueFd fd(::open(c.file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd) return Status::Io("cannot create " + c.file.string() + ": " + errno_text());
    // Not fsynced here: the caller's keep() makes everything durable in one go.
    Status got =
        receive_content(peer, c.sha256, c.size, fd.get(), /*sync=*/false, &fetched.content_bytes);
    if (!got.ok()) return broken(got);
  }
  auto sent = agent_answer(peer, agent, "checkpoint_sent");
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
                                         std::chrono::milliseconds connect_timeout) {
  auto connected = connect_endpoint(agent, connect_timeout);
  if (!connected.ok()) return connected.status();
  PeerConnection& peer = **connected;
  auto broken = [&](const Status& s) {
    return Status::Failed(agent.address.text() + ": " + s.message());
  };
  Json offer = owner("checkpoint_offer", trial, attempt);
  offer["manifest"] = manifest.to_json();
  if (Status s = peer.send(offer, Clock::now() + kChunkTime); !s.ok()) return broken(s);
  auto want = agent_answer(peer, agent, "checkpoint_want");
  if (!want.ok()) return want.status();
  std::map<std::string, const WireFile*> by_digest;
  for (const WireFile& f : manifest.files) by_digest.emplace(f.sha256, &f);
  PushedCheckpoint pushed;
  pushed.files = manifest.files.size();
  const Json digests = want->value("digests", Json());
  if (!digests.is_array()) return broken(Status::Failed("checkpoint_want without digests"));
  std::set<std::string> sent_once;
  for (const Json& d : digests) {
    if (!d.is_string() || !by_digest.count(d.get<std::string>()) ||
        !sent_once.insert(d.get<std::string>()).second)
      return broken(Status::Failed("asked for a digest the manifest does not name"));
    const WireFile& f = *by_digest[d.get<std::string>()];
    UniqueFd fd = open_beneath(dir, f.path);
    if (!fd) return Status::Io("cannot open " + (dir / f.path).string() + ": " + errno_text());
    if (Status s = send_content(peer, fd.get(), f.sha256, f.size, &pushed.content_bytes); !s.ok())
      return broken(s);
  }
  if (Status s = peer.send(Json{{"type", "checkpoint_sent"}, {"bytes", pushed.content_bytes}},
                           Clock::now() + kChunkTime);
      !s.ok())
    return broken(s);
  auto restored = agent_answer(peer, agent, "checkpoint_restored");
  if (!restored.ok()) return restored.status();
  const Json path = restored->value("path", Json());
  if (!path.is_string()) return broken(Status::Failed("restored without a path"));
  pushed.path = path.get<std::string>();
  peer.close(Clock::now() + std::chrono::seconds(1));
  return pushed;
}

}  // namespace cairn
