#include "engine/coordinator/remote_orphans.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "common/file_util.h"
#include "engine/coordinator/agent_gc.h"
#include "engine/coordinator/orphan_messages.h"
#include "peer/agent_client.h"
#include "peer/agent_log.h"
#include "peer/checkpoint_manifest.h"
#include "peer/checkpoint_retry.h"
#include "peer/checkpoint_send.h"
#include "peer/checkpoint_wire.h"
#include "peer/frame.h"
#include "peer/kept_scans.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

bool is_real_dir(const fs::path& p) {
  std::error_code ec;
  return fs::symlink_status(p, ec).type() == fs::file_type::directory;
}

// A directory name that is a step as the SDK writes it: decimal digits.
bool step_name(const std::string& name, int64_t* step) {
  if (name.empty() || name.size() > 15) return false;
  int64_t n = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + (c - '0');
  }
  *step = n;
  return std::to_string(n) == name;  // no leading zeros: one directory per step
}

// Whether some rank left its marker in `dir` (cairn_orphan.json, cairn_orphan.rankN.json).
bool has_marker(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("cairn_orphan") && name.ends_with(".json") &&
        entry.symlink_status(ec).type() == fs::file_type::regular)
      return true;
  }
  return false;
}

Json refusal(const std::string& name, const std::string& type, const std::string& why) {
  agent_log("refused an " + type + " from " + name + ": " + why);
  return Json{{"type", "error"}, {"reason", why}};
}

// DIR/orphans/<owner>/<trial>, when it is a real directory below DIR (no link on the way).
std::optional<fs::path> trial_orphans(const fs::path& dir, const OrphanRequest& asked) {
  const fs::path base = dir / "orphans";
  const fs::path owner = base / orphan_owner_dir(asked.owner);
  if (!is_real_dir(base) || !is_real_dir(owner) || !is_real_dir(owner / asked.trial))
    return std::nullopt;
  return owner / asked.trial;
}

bool still_running(const OrphanRequest& asked) {
  return AgentInUse::trial_has_running_rank(orphan_trial_key(asked.owner, asked.trial));
}

// An attempt's directory name as the agent makes it ("attempt-<N>", orphan_attempt_dir).
bool attempt_name(const std::string& name, int64_t* attempt) {
  return name.starts_with("attempt-") && step_name(name.substr(8), attempt);
}

Json answer_list(const fs::path& dir, const OrphanRequest& asked) {
  const std::string& trial = asked.trial;
  std::vector<OrphanStep> found;
  if (auto orphans = trial_orphans(dir, asked)) {
    // The agent's GC counts the orphans' age from here: the resume that asked fetches them
    // well within the hour the GC never takes what was used in (agent_gc.h).
    mark_agent_entry_used(*orphans);
    std::error_code ec;
    for (const auto& a : fs::directory_iterator(*orphans, ec)) {
      int64_t attempt = 0;
      if (!attempt_name(a.path().filename().string(), &attempt) || !is_real_dir(a.path())) continue;
      std::error_code ec2;
      for (const auto& entry : fs::directory_iterator(a.path(), ec2)) {
        int64_t step = 0;
        if (step_name(entry.path().filename().string(), &step) && is_real_dir(entry.path()) &&
            has_marker(entry.path()))
          found.push_back({attempt, step});
      }
    }
  }
  std::sort(found.begin(), found.end());
  if (found.size() > kMaxOrphanSteps)
    found.erase(found.begin(), found.end() - static_cast<ptrdiff_t>(kMaxOrphanSteps));
  Json listed = Json::array();
  for (const OrphanStep& o : found) listed.push_back({{"attempt", o.attempt}, {"step", o.step}});
  return Json{{"type", "orphan_list"},
              {"trial", trial},
              {"running", still_running(asked)},
              {"orphans", listed}};
}

Json answer_fetch(const fs::path& dir, const OrphanRequest& asked, PeerConnection& peer,
                  const std::string& name, KeptScans& scans) {
  const std::string& trial = asked.trial;
  const int64_t step = asked.step;
  // Never collected by the agent's GC while this sends it (taken before it is looked at).
  const AgentInUse::Token fetching =
      AgentInUse::hold_orphans(orphan_trial_key(asked.owner, asked.trial));
  auto orphans = trial_orphans(dir, asked);
  if (orphans) mark_agent_entry_used(*orphans);
  const fs::path attempt = orphans ? *orphans / orphan_attempt_dir(asked.attempt) : fs::path();
  const fs::path path = orphans ? attempt / std::to_string(step) : fs::path();
  if (!orphans || !is_real_dir(attempt) || !is_real_dir(path))
    return refusal(name, "orphan_fetch",
                   "no orphaned checkpoint of trial " + trial + " attempt " +
                       std::to_string(asked.attempt) + " at step " + std::to_string(step));
  const auto started = Clock::now();
  // A fetch tried again after a dropped link does not read the unchanged files again.
  ScanCounts counts;
  auto manifest = scan_again(scans, path, &counts);
  if (!manifest.ok()) return refusal(name, "orphan_fetch", manifest.status().message());
  Json listed{{"type", "orphan_manifest"},
              {"trial", trial},
              {"attempt", asked.attempt},
              {"step", step},
              {"manifest", manifest->to_json()}};
  if (!encode_frame(listed).ok())
    return refusal(name, "orphan_fetch",
                   "the orphan's manifest (" + std::to_string(manifest->files.size()) +
                       " files) does not fit in one frame");
  if (!peer.send(listed, Clock::now() + kChunkTime).ok())
    return Json{{"type", "error"}, {"reason", "connection broke"}};
  // The contents the coordinator's store lacks, each from the offset it asks: what an earlier
  // try cut in the middle left of it there (checkpoint_send.h, as for a staged checkpoint).
  SentContents sent;
  if (Status s = send_wanted_contents(peer, *manifest, path, &sent); !s.ok())
    return refusal(name, "orphan_fetch", s.message());
  const uint64_t content = sent.content_bytes;
  agent_log(
      "sent the orphaned checkpoint of trial " + trial + " at step " + std::to_string(step) +
      " to " + name + ": " + std::to_string(manifest->files.size()) + " files (" +
      std::to_string(manifest->bytes) + " bytes), " + std::to_string(sent.wanted) + " wanted, " +
      std::to_string(content) + " content bytes on the wire" +
      resumed_text(sent.resumed, sent.kept) + kept_digests_text(counts.reused) + ", in " +
      std::to_string(
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count()) +
      " ms");
  return Json{{"type", "checkpoint_sent"}, {"bytes", content}};
}

Json answer_drop(const fs::path& dir, const OrphanRequest& asked, const std::string& name) {
  const std::string& trial = asked.trial;
  if (still_running(asked))
    return refusal(name, "orphan_drop", "ranks of trial " + trial + " still run here");
  auto orphans = trial_orphans(dir, asked);
  std::error_code ec;
  if (orphans) fs::remove_all(*orphans, ec);
  if (ec)
    return refusal(name, "orphan_drop", "cannot remove " + orphans->string() + ": " + ec.message());
  if (orphans)
    agent_log("removed the orphaned checkpoints of trial " + trial + ": " + name + " holds them");
  return Json{{"type", "orphan_dropped"}, {"trial", trial}};
}

constexpr auto kConnectTime = std::chrono::seconds(10);

Status write_mode(const fs::path& file, uint32_t mode) {
  // The owner can always read and remove what it fetched.
  if (::chmod(file.c_str(), (mode & 0777) | 0600) != 0)
    return Status::Io("cannot chmod " + file.string() + ": " + errno_text());
  return Status::Ok();
}

Status fsync_file(const fs::path& file) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd || ::fsync(fd.get()) != 0)
    return Status::Io("cannot sync " + file.string() + ": " + errno_text());
  return Status::Ok();
}

// Moves the received (and fsynced) `from` to `to`, which must not exist yet; a copy, fsynced,
// where they lie on different file systems.
Status move_new_file(const fs::path& from, const fs::path& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0)
    return Status::Ok();
  if (errno != EXDEV) return Status::Io("cannot write " + to.string() + ": " + errno_text());
  std::error_code ec;
  if (!fs::copy_file(from, to, ec) || ec)
    return Status::Io("cannot copy to " + to.string() + ": " + ec.message());
  fs::remove(from, ec);
  return fsync_file(to);
}

}  // namespace

AgentRequestHandler with_orphan_requests(fs::path dir, AgentRequestHandler next) {
  // The digests of the orphan directories listed last, for a fetch tried again.
  auto scans = std::make_shared<KeptScans>();
  return [dir = std::move(dir), next = std::move(next), scans](
             const Json& request, PeerConnection& peer,
             const std::string& name) -> std::optional<Json> {
    const std::string type = request["type"].get<std::string>();
    if (type != "orphan_list" && type != "orphan_fetch" && type != "orphan_drop")
      return next ? next(request, peer, name) : std::nullopt;
    OrphanRequest asked;
    if (Status st = parse_orphan_request(request, type == "orphan_fetch", &asked); !st.ok())
      return refusal(name, type, st.message());
    if (type == "orphan_list") return answer_list(dir, asked);
    if (type == "orphan_fetch") return answer_fetch(dir, asked, peer, name, *scans);
    return answer_drop(dir, asked, name);
  };
}

Result<OrphanListing> list_remote_orphans(const AgentEndpoint& agent, const std::string& owner,
                                          const std::string& trial,
                                          std::chrono::milliseconds timeout) {
  auto peer = connect_endpoint(agent, timeout);
  if (!peer.ok()) return peer.status();
  if (Status s = (*peer)->send(Json{{"type", "orphan_list"}, {"owner", owner}, {"trial", trial}},
                               Clock::now() + timeout);
      !s.ok())
    return Status::Failed(agent.address.text() + ": " + s.message());
  auto m = receive_frame(**peer);
  if (!m.ok()) return Status::Failed(agent.address.text() + ": " + m.status().message());
  auto listing = parse_orphan_listing(*m, trial);
  if (!listing.ok())
    return listing.status().kind() == ErrorKind::kFailed
               ? Status::Failed(agent.address.text() + " " + listing.status().message())
               : Status::BadInput(agent.address.text() + ": " + listing.status().message());
  (*peer)->close(Clock::now() + std::chrono::seconds(1));
  return listing;
}

namespace {

// One try of fetch_remote_orphan (remote_orphans.h); `t` (when given) says whether a failure
// was the link's (checkpoint_retry.h), and `arrived` (when given) counts the contents received
// whole, which stay in `into` when a later step fails (a try again keeps them). Each content
// is received into `partial` (named by its digest; a try cut in the middle of it leaves its
// start there, which the next try asks the rest of), then moved to its place in `into`.
Result<FetchedOrphan> fetch_orphan_once(const AgentEndpoint& agent, const std::string& owner,
                                        const std::string& trial, const OrphanStep& orphan,
                                        const fs::path& into, const fs::path& partial,
                                        const ObjectStore& objects, TransferTry* t,
                                        FetchedOrphan* arrived) {
  const int64_t step = orphan.step;
  auto connected =
      t ? connect_for_try(agent, kConnectTime, t) : connect_endpoint(agent, kConnectTime);
  if (!connected.ok()) return connected.status();
  PeerConnection& peer = **connected;
  auto broken = [&](const Status& s) {
    return Status::Failed(agent.address.text() + ": " + s.message());
  };
  // A call on the connection that failed: the link's, unless the agent went off the protocol.
  auto link = [&](const Status& s) {
    if (t && s.kind() != ErrorKind::kBadInput) t->link_failed = true;
    return broken(s);
  };
  bool* link_failed = t ? &t->link_failed : nullptr;
  if (Status s = peer.send(Json{{"type", "orphan_fetch"},
                                {"owner", owner},
                                {"trial", trial},
                                {"attempt", orphan.attempt},
                                {"step", step}},
                           Clock::now() + kChunkTime);
      !s.ok())
    return link(s);
  auto listed = agent_answer(peer, agent, "orphan_manifest", link_failed);
  if (!listed.ok()) return listed.status();
  if (listed->value("trial", Json()) != trial || listed->value("step", Json()) != step ||
      listed->value("attempt", Json()) != orphan.attempt)
    return broken(Status::Failed("a manifest for another trial, attempt or step"));
  auto manifest = parse_wire_manifest(listed->value("manifest", Json()));
  if (!manifest.ok()) return broken(manifest.status());
  std::error_code ec;
  fs::create_directories(into, ec);
  if (ec) return Status::Io("cannot create " + into.string() + ": " + ec.message());
  // What to write: each file `into` lacks, from the store when it has the content, else from
  // the wire (each digest once; its other files are copies of the first).
  FetchedOrphan fetched;
  std::vector<const WireFile*> writing;
  std::map<std::string, const WireFile*> wanted;  // digest -> the file it is received into
  std::set<fs::path> made_dirs;
  // Contents `into` holds already, verified (another agent's rank's files, or what an earlier
  // try received whole): copied from there, never asked for again.
  std::map<std::string, fs::path> here;
  for (const WireFile& f : manifest->files)
    if (fs::symlink_status(into / f.path, ec).type() == fs::file_type::regular)
      here.emplace(f.sha256, into / f.path);
  for (const WireFile& f : manifest->files) {
    const fs::path dest = into / f.path;
    if (fs::symlink_status(dest, ec).type() != fs::file_type::not_found) {
      ++fetched.kept;
      continue;
    }
    fs::create_directories(dest.parent_path(), ec);
    if (ec)
      return broken(
          Status::Failed("cannot create " + dest.parent_path().string() + ": " + ec.message()));
    for (fs::path p = dest.parent_path(); p != into && lies_inside(p, into); p = p.parent_path())
      made_dirs.insert(p);
    writing.push_back(&f);
    if (!objects.contains(f.sha256) && !here.count(f.sha256)) wanted.emplace(f.sha256, &f);
  }
  // Each content the store lacks, into `partial` first, from what an earlier try left of it
  // there (receive_contents, checkpoint_client.h: the live fetch's code), then to its file.
  std::vector<FetchedContent> receiving;
  for (const auto& [digest, f] : wanted) receiving.push_back({digest, f->size, partial / digest});
  if (!receiving.empty()) {
    fs::create_directories(partial, ec);
    if (ec) return Status::Io("cannot create " + partial.string() + ": " + ec.message());
  }
  const uint64_t before = fetched.content_bytes;
  Status got = receive_contents(peer, agent, receiving, /*sync=*/true, t, &fetched.content_bytes,
                                [&](const FetchedContent& c) -> Status {
                                  const WireFile* f = wanted.at(c.sha256);
                                  const fs::path dest = into / f->path;
                                  if (Status moved = move_new_file(c.file, dest); !moved.ok())
                                    return moved;
                                  if (Status mode = write_mode(dest, f->mode); !mode.ok())
                                    return mode;
                                  if (arrived) ++arrived->files;
                                  return Status::Ok();
                                });
  if (arrived) arrived->content_bytes += fetched.content_bytes - before;
  if (!got.ok()) return got;
  auto sent = agent_answer(peer, agent, "checkpoint_sent", link_failed);
  if (!sent.ok()) return sent.status();
  peer.close(Clock::now() + std::chrono::seconds(1));
  for (const WireFile* f : writing) {
    const fs::path dest = into / f->path;
    auto first = wanted.find(f->sha256);
    if (first == wanted.end() || first->second != f) {
      // From the store, or another file of the same content received above.
      Status copied = Status::Ok();
      if (first == wanted.end() && here.count(f->sha256)) {
        if (fs::copy_file(here[f->sha256], dest, ec); ec)
          copied = Status::Io("cannot copy to " + dest.string() + ": " + ec.message());
      } else if (first == wanted.end()) {
        copied = objects.copy_out(f->sha256, dest);
      } else if (fs::copy_file(into / first->second->path, dest, ec); ec) {
        copied = Status::Io("cannot copy to " + dest.string() + ": " + ec.message());
      }
      if (!copied.ok()) return copied;
      if (Status synced = fsync_file(dest); !synced.ok()) return synced;
    }
    if (Status mode = write_mode(dest, f->mode); !mode.ok()) return mode;
    ++fetched.files;
  }
  for (const fs::path& d : made_dirs) (void)fsync_dir(d);
  if (Status st = fsync_dir(into); !st.ok()) return st;
  return fetched;
}

// The questions to one agent (ask_remote_orphans), on one connection.
void ask_one_agent(OrphanQuestions& q, const std::string& owner,
                   std::chrono::milliseconds timeout) {
  q.answers.clear();
  auto fail_rest = [&](const Status& s) {
    while (q.answers.size() < q.trials.size()) q.answers.push_back(s);
  };
  auto peer = connect_endpoint(*q.agent, timeout);
  if (!peer.ok()) return fail_rest(peer.status());
  const std::string address = q.agent->address.text();
  for (const std::string& trial : q.trials) {
    if (Status s = (*peer)->send(Json{{"type", "orphan_list"}, {"owner", owner}, {"trial", trial}},
                                 Clock::now() + timeout);
        !s.ok())
      return fail_rest(Status::Failed(address + ": " + s.message()));
    auto m = (*peer)->receive(Clock::now() + timeout);
    if (!m.ok()) return fail_rest(Status::Failed(address + ": " + m.status().message()));
    if (!m->has_value())
      return fail_rest(Status::Failed(address + ": the agent closed the connection"));
    auto listing = parse_orphan_listing(**m, trial);
    if (!listing.ok()) {
      // Off the protocol: what follows on this connection cannot be trusted either.
      const Status bad = listing.status().kind() == ErrorKind::kFailed
                             ? Status::Failed(address + " " + listing.status().message())
                             : Status::BadInput(address + ": " + listing.status().message());
      if (listing.status().kind() == ErrorKind::kFailed) {
        q.answers.push_back(bad);  // a refusal of this trial: the others are still asked
        continue;
      }
      return fail_rest(bad);
    }
    q.answers.push_back(std::move(*listing));
  }
  (*peer)->close(Clock::now() + std::chrono::seconds(1));
}

// A directory of its own below `staging` for the contents a fetch receives (removed with it).
Result<fs::path> partial_dir(const fs::path& staging, const std::string& trial,
                             const OrphanStep& orphan) {
  std::error_code ec;
  fs::create_directories(staging, ec);
  if (ec) return Status::Io("cannot create " + staging.string() + ": " + ec.message());
  return make_unique_dir(staging, trial + "-orphan-" + std::to_string(orphan.step) + "-");
}

}  // namespace

Result<FetchedOrphan> fetch_remote_orphan(const AgentEndpoint& agent, const std::string& owner,
                                          const std::string& trial, const OrphanStep& orphan,
                                          const fs::path& into, const ObjectStore& objects,
                                          const fs::path& staging) {
  auto partial = partial_dir(staging, trial, orphan);
  if (!partial.ok()) return partial.status();
  ScopedDirRemover cleanup(*partial);
  return fetch_orphan_once(agent, owner, trial, orphan, into, *partial, objects, nullptr, nullptr);
}

Result<FetchedOrphan> fetch_remote_orphan_retrying(const AgentEndpoint& agent,
                                                   const std::string& owner,
                                                   const std::string& trial,
                                                   const OrphanStep& orphan, const fs::path& into,
                                                   const ObjectStore& objects,
                                                   const fs::path& staging) {
  // What the tries cut in the middle kept of a content, for the next: gone with the fetch.
  auto partial = partial_dir(staging, trial, orphan);
  if (!partial.ok()) return partial.status();
  ScopedDirRemover cleanup(*partial);
  // What earlier tries received: the contents whole in `into` now, counted as fetched, not as
  // kept, and the bytes of one cut in the middle.
  FetchedOrphan earlier;
  auto result = with_link_retries<FetchedOrphan>(
      agent,
      "the fetch of trial " + trial + "'s orphaned checkpoint at step " +
          std::to_string(orphan.step),
      [&](TransferTry& t) {
        FetchedOrphan arrived;
        auto got =
            fetch_orphan_once(agent, owner, trial, orphan, into, *partial, objects, &t, &arrived);
        if (!got.ok()) {
          earlier.files += arrived.files;
          earlier.content_bytes += arrived.content_bytes;
        }
        return got;
      });
  if (!result.ok()) return result;
  result->files += earlier.files;
  result->kept -= std::min(result->kept, earlier.files);
  result->content_bytes += earlier.content_bytes;
  return result;
}

void ask_remote_orphans(std::vector<OrphanQuestions>& questions, const std::string& owner,
                        std::chrono::milliseconds timeout) {
  std::vector<std::thread> asking;
  asking.reserve(questions.size());
  for (OrphanQuestions& q : questions)
    asking.emplace_back([&q, &owner, timeout] { ask_one_agent(q, owner, timeout); });
  for (std::thread& t : asking) t.join();
}

Status drop_remote_orphans(const AgentEndpoint& agent, const std::string& owner,
                           const std::string& trial) {
  auto peer = connect_endpoint(agent, kConnectTime);
  if (!peer.ok()) return peer.status();
  if (Status s = (*peer)->send(Json{{"type", "orphan_drop"}, {"owner", owner}, {"trial", trial}},
                               Clock::now() + kChunkTime);
      !s.ok())
    return Status::Failed(agent.address.text() + ": " + s.message());
  auto dropped = agent_answer(**peer, agent, "orphan_dropped");
  if (!dropped.ok()) return dropped.status();
  (*peer)->close(Clock::now() + std::chrono::seconds(1));
  return Status::Ok();
}

}  // namespace cairn
