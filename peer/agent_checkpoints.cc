#include "peer/agent_checkpoints.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "common/file_util.h"
#include "peer/agent_log.h"
#include "peer/checkpoint_manifest.h"
#include "peer/checkpoint_send.h"
#include "peer/checkpoint_want.h"
#include "peer/checkpoint_wire.h"
#include "peer/frame.h"
#include "peer/kept_scans.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// trial and attempt, as every checkpoint request names them.
Status parse_owner(const Json& request, std::string* trial, int64_t* attempt) {
  const Json t = request.value("trial", Json());
  const Json a = request.value("attempt", Json());
  if (!t.is_string()) return Status::BadInput("no trial id");
  if (Status st = check_trial_name(t.get<std::string>()); !st.ok()) return st;
  if (!a.is_number_integer() || a.get<int64_t>() < 0)
    return Status::BadInput("no attempt (a non-negative integer)");
  *trial = t.get<std::string>();
  *attempt = a.get<int64_t>();
  return Status::Ok();
}

std::string owner_text(const std::string& trial, int64_t attempt) {
  return "trial " + trial + " attempt " + std::to_string(attempt);
}

std::string bytes_text(uint64_t n) {
  return std::to_string(n) + " bytes";
}

std::string seconds(Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f s", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace

// The contents whose partial file (objects/tmp-partial-<digest>) this exchange writes: one
// exchange at a time per content, released when the exchange ends.
class AgentCheckpoints::PartialClaims {
 public:
  explicit PartialClaims(AgentCheckpoints& owner) : owner_(owner) {}
  ~PartialClaims() {
    std::lock_guard lock(owner_.mutex_);
    for (const std::string& d : held_) owner_.receiving_.erase(d);
  }
  bool claim(const std::string& digest) {
    std::lock_guard lock(owner_.mutex_);
    if (!owner_.receiving_.insert(digest).second) return false;
    held_.insert(digest);
    return true;
  }
  bool holds(const std::string& digest) const { return held_.count(digest) > 0; }

 private:
  AgentCheckpoints& owner_;
  std::set<std::string> held_;
};

AgentCheckpoints::AgentCheckpoints(fs::path dir) : dir_(std::move(dir)) {
  if (dir_.empty()) return;
  std::error_code ec;
  dir_ = fs::weakly_canonical(dir_, ec);
}

bool AgentCheckpoints::handles(const std::string& type) {
  return type == "checkpoint_stage" || type == "checkpoint_fetch" || type == "checkpoint_offer";
}

bool AgentCheckpoints::refuse(PeerConnection& peer, const std::string& name,
                              const std::string& why) {
  agent_log("refused a checkpoint request from " + name + ": " + why);
  return peer.send(Json{{"type", "error"}, {"reason", why}}, Clock::now() + kChunkTime).ok();
}

bool AgentCheckpoints::serve(PeerConnection& peer, const Json& request, const std::string& name) {
  if (dir_.empty()) return refuse(peer, name, "this agent keeps no checkpoints");
  const std::string type = request["type"].get<std::string>();
  if (type == "checkpoint_stage") return stage(peer, request, name);
  if (type == "checkpoint_fetch") return fetch(peer, request, name);
  return offer(peer, request, name);
}

bool AgentCheckpoints::stage(PeerConnection& peer, const Json& request, const std::string& name) {
  std::string trial;
  int64_t attempt = 0;
  if (Status st = parse_owner(request, &trial, &attempt); !st.ok())
    return refuse(peer, name, st.message());
  const fs::path parent = dir_ / "work" / "trials" / trial / "checkpoints";
  std::error_code ec;
  fs::create_directories(parent, ec);
  auto made = make_unique_dir(parent, "attempt-" + std::to_string(attempt) + "-");
  if (ec || !made.ok())
    return refuse(
        peer, name,
        ec ? "cannot create " + parent.string() + ": " + ec.message() : made.status().message());
  {
    std::lock_guard lock(mutex_);
    staged_[made->string()] = {trial, attempt};
  }
  return peer
      .send(Json{{"type", "checkpoint_staged"},
                 {"trial", trial},
                 {"attempt", attempt},
                 {"path", made->string()}},
            Clock::now() + kChunkTime)
      .ok();
}

bool AgentCheckpoints::fetch(PeerConnection& peer, const Json& request, const std::string& name) {
  std::string trial;
  int64_t attempt = 0;
  if (Status st = parse_owner(request, &trial, &attempt); !st.ok())
    return refuse(peer, name, st.message());
  const Json path_json = request.value("path", Json());
  if (!path_json.is_string() || path_json.get<std::string>().empty() ||
      path_json.get<std::string>().find('\0') != std::string::npos)
    return refuse(peer, name, "no checkpoint path");
  const std::string path = path_json.get<std::string>();
  const std::string shown = path.substr(0, 300);
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(fs::path(path), ec);
  if (ec || !fs::path(path).is_absolute() || !lies_inside(resolved, dir_))
    return refuse(peer, name, shown + " is outside the agent's directory " + dir_.string());
  std::optional<WireManifest> delivered;  // fetched, confirmed and removed before
  {
    std::lock_guard lock(mutex_);
    auto it = staged_.find(path);
    if (it == staged_.end() || it->second != std::make_pair(trial, attempt)) {
      auto was = delivered_.find(path);
      if (was == delivered_.end() || was->second.trial != trial || was->second.attempt != attempt)
        return refuse(peer, name,
                      "no checkpoint of " + owner_text(trial, attempt) + " is staged at " + shown);
      delivered = was->second.manifest;
    }
  }
  const auto started = Clock::now();
  // A fetch of this directory tried again after a dropped link reuses the digests of the files
  // unchanged since the try before (ScanCache, checkpoint_manifest.h).
  ScanCounts counts;
  auto manifest = delivered ? Result<WireManifest>(std::move(*delivered))
                            : scan_again(scans_, fs::path(path), &counts);
  if (!manifest.ok()) return refuse(peer, name, manifest.status().message());
  const auto hashed = Clock::now();
  Json answer{{"type", "checkpoint_manifest"},
              {"trial", trial},
              {"attempt", attempt},
              {"manifest", manifest->to_json()}};
  if (!encode_frame(answer).ok())
    return refuse(peer, name,
                  "the checkpoint's manifest (" + std::to_string(manifest->files.size()) +
                      " files) does not fit in one frame");
  if (!peer.send(answer, Clock::now() + kChunkTime).ok()) return false;

  // The digests the coordinator lacks, each from the offset it asks (checkpoint_send.h).
  auto off_protocol = [&](const std::string& why) {
    agent_log("dropped " + name + ": " + why);
    return false;
  };
  SentContents sent;
  Status sending = send_wanted_contents(peer, *manifest, fs::path(path), &sent);
  sent_ += sent.content_bytes;
  if (sending.kind() == ErrorKind::kBadInput) {
    // Refused with one line; the exchange cannot go on, so neither does the connection.
    refuse(peer, name, sending.message());
    return false;
  }
  if (sending.kind() == ErrorKind::kNotFound) {
    (void)peer.send(Json{{"type", "error"}, {"reason", sending.message()}},
                    Clock::now() + kChunkTime);
    return off_protocol("checkpoint file " + sending.message() + " while it was sent");
  }
  if (!sending.ok()) return off_protocol(sending.message());
  const uint64_t content = sent.content_bytes;
  if (!peer.send(Json{{"type", "checkpoint_sent"}, {"bytes", content}}, Clock::now() + kChunkTime)
           .ok())
    return false;
  agent_log("sent checkpoint of " + owner_text(trial, attempt) + " to " + name +
            (delivered ? " again (its files were removed once it was confirmed)" : "") + ": " +
            std::to_string(manifest->files.size()) + " files (" + bytes_text(manifest->bytes) +
            "), " + std::to_string(sent.wanted) + " wanted, " + std::to_string(content) +
            " content bytes on the wire" + resumed_text(sent.resumed, sent.kept) + " (listed in " +
            seconds(hashed - started) + kept_digests_text(counts.reused) + ", sent in " +
            seconds(Clock::now() - hashed) + ")");
  // The staging directory goes once the coordinator holds the checkpoint durably.
  auto done = receive_frame(peer);
  if (!done.ok() || (*done)["type"] != "checkpoint_done") {
    agent_log("kept " + shown + ": the coordinator did not confirm the checkpoint (" +
              (done.ok() ? std::string("another request") : done.status().message()) + ")");
    return false;
  }
  {
    std::lock_guard lock(mutex_);
    staged_.erase(path);
    keep_delivered(path, Delivered{trial, attempt, *manifest});
  }
  scans_.forget(path);
  // Answered before the directory goes: the coordinator registers and acknowledges the
  // checkpoint once it has this answer, and deleting a freshly written 256 MiB file takes
  // 25-120 ms on the benchmark's machine (bench/RESULTS.md, 2026-11-27), which the trial
  // need not wait for. The directory is already out of the table: nothing serves it again.
  const bool answered =
      peer.send(Json{{"type", "checkpoint_dropped"}}, Clock::now() + kChunkTime).ok();
  fs::remove_all(fs::path(path), ec);
  return answered;
}

void AgentCheckpoints::keep_delivered(const std::string& path, Delivered delivered) {
  delivered.order = ++delivered_order_;
  delivered_[path] = std::move(delivered);
  auto files = [this] {
    size_t n = 0;
    for (const auto& [p, d] : delivered_) n += d.manifest.files.size();
    return n;
  };
  while (delivered_.size() > 1 &&
         (delivered_.size() > kDeliveredKept || files() > kDeliveredFiles)) {
    auto oldest = std::min_element(
        delivered_.begin(), delivered_.end(),
        [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
    delivered_.erase(oldest);
  }
}

bool AgentCheckpoints::offer(PeerConnection& peer, const Json& request, const std::string& name) {
  std::string trial;
  int64_t attempt = 0;
  if (Status st = parse_owner(request, &trial, &attempt); !st.ok())
    return refuse(peer, name, st.message());
  auto manifest = parse_wire_manifest(request.value("manifest", Json()));
  if (!manifest.ok()) return refuse(peer, name, manifest.status().message());
  const fs::path objects = dir_ / "objects";
  auto object_path = [&](const std::string& digest) {
    return objects / digest.substr(0, 2) / digest.substr(2);
  };
  // What the cache lacks, each digest once (identical files travel once), each after what
  // an earlier try cut in the middle left of it (objects/tmp-partial-<digest>): asked from
  // that offset, hashed with the rest before it gets its name. A content another connection
  // is receiving now goes to a file of its own, whole.
  std::vector<const WireFile*> wanted;
  std::vector<WantedContent> asked;
  std::set<std::string> seen;
  PartialClaims claims(*this);
  for (const WireFile& f : manifest->files) {
    if (!seen.insert(f.sha256).second) continue;
    struct stat st {};
    if (::stat(object_path(f.sha256).c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        static_cast<uint64_t>(st.st_size) == f.size)
      continue;
    wanted.push_back(&f);
    uint64_t kept = 0;
    if (claims.claim(f.sha256)) {
      const fs::path partial = objects / ("tmp-partial-" + f.sha256);
      if (::lstat(partial.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          static_cast<uint64_t>(st.st_size) <= f.size)
        kept = static_cast<uint64_t>(st.st_size);
    }
    asked.push_back({f.sha256, kept});
  }
  if (!peer.send(checkpoint_want_message(asked), Clock::now() + kChunkTime).ok()) return false;
  std::error_code ec;
  fs::create_directories(objects, ec);
  uint64_t content = 0, resumed = 0;
  size_t resumed_count = 0;
  auto dropped = [&](const std::string& why) {
    received_ += content;
    agent_log("dropped " + name + ": checkpoint of " + owner_text(trial, attempt) + ": " + why);
    return false;
  };
  std::set<fs::path> changed_dirs;
  for (size_t i = 0; i < wanted.size(); ++i) {
    const WireFile* f = wanted[i];
    std::string tmp;
    UniqueFd fd;
    const bool partial = claims.holds(f->sha256);
    if (partial) {
      tmp = (objects / ("tmp-partial-" + f->sha256)).string();
      fd.reset(::open(tmp.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    } else {
      tmp = (objects / "tmp-XXXXXX").string();
      fd.reset(::mkstemp(tmp.data()));
    }
    if (!fd) return dropped("cannot create a file in " + objects.string() + ": " + errno_text());
    const uint64_t before = content;
    Status got =
        receive_content(peer, f->sha256, f->size, fd.get(), /*sync=*/true, &content, asked[i].from);
    if (!got.ok()) {
      // What arrived of it stays for a try again, unless its bytes are in doubt.
      if (!partial || got.kind() == ErrorKind::kBadInput || got.kind() == ErrorKind::kCorrupt)
        ::unlink(tmp.c_str());
      return dropped(got.message());
    }
    // The sender went on from the offset asked (an older one starts at 0).
    if (asked[i].from > 0 && content - before < f->size) {
      resumed += asked[i].from;
      ++resumed_count;
    }
    const fs::path dest = object_path(f->sha256);
    fs::create_directories(dest.parent_path(), ec);
    if (::rename(tmp.c_str(), dest.c_str()) != 0) {
      ::unlink(tmp.c_str());
      return dropped("cannot store " + dest.string() + ": " + errno_text());
    }
    changed_dirs.insert(dest.parent_path());
  }
  received_ += content;
  for (const fs::path& d : changed_dirs) (void)fsync_dir(d);
  if (!wanted.empty()) (void)fsync_dir(objects);
  auto end = receive_frame(peer);
  if (!end.ok() || (*end)["type"] != "checkpoint_sent")
    return dropped("expected checkpoint_sent after the content");

  // The checkpoint directory the rank gets, from the cache (copies: a trial that writes to
  // its restored files must not change the cache).
  // A directory of its own for each restore: another rank of the same attempt may be
  // reading the one restored before it.
  const fs::path parent = dir_ / "work" / "trials" / trial;
  fs::create_directories(parent, ec);
  auto made = make_unique_dir(parent, "restore-" + std::to_string(attempt) + "-");
  if (!made.ok()) return refuse(peer, name, made.status().message());
  const fs::path dest = *made;
  for (const WireFile& f : manifest->files) {
    const fs::path to = dest / f.path;
    fs::create_directories(to.parent_path(), ec);
    if (ec || !fs::copy_file(object_path(f.sha256), to, fs::copy_options::overwrite_existing, ec))
      return refuse(peer, name, "cannot write " + to.string() + ": " + ec.message());
    ::chmod(to.c_str(), f.mode);
  }
  agent_log("received checkpoint of " + owner_text(trial, attempt) + " from " + name + ": " +
            std::to_string(manifest->files.size()) + " files (" + bytes_text(manifest->bytes) +
            "), " + std::to_string(wanted.size()) + " wanted, " + std::to_string(content) +
            " content bytes on the wire" + resumed_text(resumed_count, resumed) + "; restored in " +
            dest.lexically_relative(dir_).generic_string());
  return peer
      .send(Json{{"type", "checkpoint_restored"}, {"path", dest.string()}, {"bytes", content}},
            Clock::now() + kChunkTime)
      .ok();
}

}  // namespace cairn
