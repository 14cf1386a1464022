#include "peer/checkpoint_retry.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <system_error>
#include <thread>
#include <vector>

namespace cairn {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kRetryEvery = std::chrono::milliseconds(200);

bool lost(const AgentEndpoint& agent) {
  return agent.lost && agent.lost->load();
}

std::string seconds_text(std::chrono::milliseconds d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace

Status retry_over_link(const AgentEndpoint& agent, const std::string& what,
                       const std::function<Status(TransferTry&)>& once) {
  const std::string address = agent.address.text();
  std::optional<Clock::time_point> give_up;
  bool dropped = false;  // since the last try that worked
  for (;;) {
    TransferTry t;
    t.connect_by = give_up;
    Status result = once(t);
    if (result.ok()) {
      if (dropped)
        std::fprintf(stderr, "cairn: agent %s: %s continued on a new connection\n", address.c_str(),
                     what.c_str());
      return result;
    }
    if (!t.link_failed || agent.link_window.count() <= 0) return result;
    const auto now = Clock::now();
    // The window runs from the link's failure; a try that moved contents before it broke had
    // the link back, so its failure starts the window anew. (Not a try that only connected:
    // one that fails at the same place each time — this side's disk full — would go on for
    // ever.)
    if (!give_up || t.progressed) give_up = now + agent.link_window;
    if (!dropped || t.progressed)
      std::fprintf(stderr, "cairn: agent %s: %s lost its connection (%s); trying again\n",
                   address.c_str(), what.c_str(), result.message().c_str());
    dropped = true;
    if (lost(agent)) return Status::Failed(result.message() + " (the agent was lost)");
    if (now >= *give_up)
      return Status::Failed(result.message() + ", and the link was not back within " +
                            seconds_text(agent.link_window));
    // Not past the give-up time; the lost flag is looked at every period.
    std::this_thread::sleep_for(std::min<Clock::duration>(kRetryEvery, *give_up - now));
  }
}

Result<std::string> stage_checkpoint_retrying(const AgentEndpoint& agent, const std::string& trial,
                                              int64_t attempt, std::chrono::milliseconds timeout) {
  return with_link_retries<std::string>(
      agent, "staging a checkpoint of trial " + trial,
      [&](TransferTry& t) { return stage_checkpoint(agent, trial, attempt, timeout, &t); });
}

Result<FetchedCheckpoint> fetch_checkpoint_retrying(
    const AgentEndpoint& agent, const std::string& trial, int64_t attempt, const std::string& path,
    const std::function<bool(const std::string&)>& lacks, const fs::path& into,
    const std::function<Status(const FetchedCheckpoint&)>& keep) {
  // Received whole and verified by the tries so far, by digest: kept in `into`.
  std::map<std::string, FetchedContent> arrived;
  uint64_t earlier_bytes = 0;  // the content bytes earlier tries received
  auto result = with_link_retries<FetchedCheckpoint>(
      agent, "the checkpoint transfer of trial " + trial, [&](TransferTry& t) {
        // A content the try cut in the middle stays in `into` as far as it was written, and
        // the next try asks for the rest (fetch_checkpoint).
        t.received = [&](const FetchedContent& c) { arrived.emplace(c.sha256, c); };
        auto not_here = [&](const std::string& digest) {
          return !arrived.count(digest) && lacks(digest);
        };
        // What `keep` gets: this try's contents and the earlier tries' that the manifest names.
        auto keep_all = [&](const FetchedCheckpoint& fetched) {
          FetchedCheckpoint all = fetched;
          std::set<std::string> listed, here;
          for (const WireFile& f : fetched.manifest.files) listed.insert(f.sha256);
          for (const FetchedContent& c : fetched.received) here.insert(c.sha256);
          for (const auto& [digest, content] : arrived)
            if (listed.count(digest) && !here.count(digest)) all.received.push_back(content);
          return keep(all);
        };
        auto fetched = fetch_checkpoint(agent, trial, attempt, path, not_here, into, keep_all, &t);
        if (!fetched.ok()) earlier_bytes += t.content_bytes;
        return fetched;
      });
  if (result.ok()) result->content_bytes += earlier_bytes;
  return result;
}

Result<PushedCheckpoint> push_checkpoint_retrying(const AgentEndpoint& agent,
                                                  const std::string& trial, int64_t attempt,
                                                  const fs::path& dir, const WireManifest& manifest,
                                                  std::chrono::milliseconds connect_timeout) {
  std::map<std::string, uint64_t> asked_from;  // what the agent kept, by content, so far
  return with_link_retries<PushedCheckpoint>(
      agent, "the restore of trial " + trial + "'s checkpoint", [&](TransferTry& t) {
        t.asked_from = &asked_from;
        return push_checkpoint(agent, trial, attempt, dir, manifest, connect_timeout, &t);
      });
}

Result<PushedCheckpoint> push_checkpoint_retrying(const AgentEndpoint& agent,
                                                  const std::string& trial, int64_t attempt,
                                                  const fs::path& dir,
                                                  std::chrono::milliseconds connect_timeout) {
  auto manifest = scan_checkpoint_dir(dir);
  if (!manifest.ok()) return manifest.status();
  return push_checkpoint_retrying(agent, trial, attempt, dir, *manifest, connect_timeout);
}

}  // namespace cairn
