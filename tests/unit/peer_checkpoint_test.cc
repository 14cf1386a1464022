// Checkpoints over the wire (docs/peers.md): the manifest's checks of untrusted input, and
// real transfers — stage, fetch only what is lacking, restore only what the agent's cache
// lacks — against an agent server in this process (loopback TCP, TLS 1.3 with a test key).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "common/file_util.h"
#include "common/sha256.h"
#include "engine/coordinator/checkpoint_transfers.h"
#include "peer/agent_server.h"
#include "peer/checkpoint_client.h"
#include "peer/checkpoint_manifest.h"
#include "peer/checkpoint_wire.h"
#include "peer/kept_scans.h"
#include "peer/peer_address.h"
#include "tests/unit/test_agent.h"
#include "tests/unit/test_dir.h"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using testing::TestDir;
using Clock = std::chrono::steady_clock;

const std::string kDigest(64, 'a');

Json entry(const std::string& path, Json size = 1, Json mode = 0644, Json sha = kDigest) {
  return Json{{"path", path}, {"size", size}, {"mode", mode}, {"sha256", sha}};
}

std::string refusal(const std::vector<Json>& entries) {
  Json files = Json::array();
  for (const Json& e : entries) files.push_back(e);
  auto m = parse_wire_manifest(Json{{"files", files}});
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().message().find('\n') == std::string::npos);
  return m.status().message();
}

TEST_CASE("checkpoint manifest: a good one parses, sorted, and reads back the same") {
  Json files = Json::array();
  for (const Json& e : {entry("z.bin", 5, 0600), entry("a/b.pt", 7, 0644), entry("..w", 1)})
    files.push_back(e);
  auto m = parse_wire_manifest(Json{{"files", files}});
  REQUIRE(m.ok());
  REQUIRE(m->files.size() == 3);
  CHECK(m->files[0].path == "..w");  // a name that starts with dots stays below
  CHECK(m->files[1].path == "a/b.pt");
  CHECK(m->files[2].mode == 0600);
  CHECK(m->bytes == 13);
  auto again = parse_wire_manifest(m->to_json());
  REQUIRE(again.ok());
  CHECK(again->to_json() == m->to_json());
  CHECK(parse_wire_manifest(Json{{"files", Json::array()}}).ok());
}

TEST_CASE("checkpoint manifest: untrusted entries are refused with one line") {
  CHECK(refusal({entry("../x")}).find("climbs out") != std::string::npos);
  CHECK(refusal({entry("a/../../x")}).find("climbs out") != std::string::npos);
  CHECK(refusal({entry("a/..")}).find("climbs out") != std::string::npos);
  CHECK(refusal({entry("/etc/passwd")}).find("absolute") != std::string::npos);
  CHECK(refusal({entry("")}).find("empty path") != std::string::npos);
  CHECK(refusal({entry("a//b")}).find("empty part") != std::string::npos);
  CHECK(refusal({entry("a/")}).find("empty part") != std::string::npos);
  CHECK(refusal({entry("./a")}).find("'.' part") != std::string::npos);
  CHECK(refusal({entry(std::string("a\0b", 3))}).find("NUL") != std::string::npos);
  CHECK(refusal({entry(std::string(1100, 'a'))}).find("longer than") != std::string::npos);
  CHECK(refusal({entry(std::string(300, 'a'))}).find("part longer") != std::string::npos);
  std::string deep;
  for (int i = 0; i < 70; ++i) deep += "d/";
  CHECK(refusal({entry(deep + "f")}).find("deeper") != std::string::npos);
  CHECK(refusal({entry("a"), entry("a")}).find("listed twice") != std::string::npos);
  CHECK(refusal({entry("a"), entry("a/b")}).find("both a file and a directory") !=
        std::string::npos);
  CHECK(refusal({entry("a", -1)}).find("no size") != std::string::npos);
  CHECK(refusal({entry("a", "1")}).find("no size") != std::string::npos);
  CHECK(refusal({entry("a", (uint64_t{1} << 40) + 1)}).find("over 1 TiB") != std::string::npos);
  CHECK(refusal({entry("a", 1, 04755)}).find("no mode") != std::string::npos);
  CHECK(refusal({entry("a", 1, -1)}).find("no mode") != std::string::npos);
  CHECK(refusal({entry("a", 1, 0644, std::string(64, 'A'))}).find("sha256") != std::string::npos);
  CHECK(refusal({entry("a", 1, 0644, std::string(63, 'a'))}).find("sha256") != std::string::npos);
  CHECK(refusal({entry("a", 1, 0644, std::string(64, 'g'))}).find("sha256") != std::string::npos);
  Json extra = entry("a");
  extra["owner"] = "root";
  CHECK(refusal({extra}).find("not {path, size, mode, sha256}") != std::string::npos);
  CHECK(refusal({Json("a")}).find("not {path") != std::string::npos);
  std::vector<Json> many;
  for (size_t i = 0; i <= kMaxManifestFiles; ++i) many.push_back(entry("f" + std::to_string(i)));
  CHECK(refusal(many).find("more than 10000 files") != std::string::npos);
  CHECK_FALSE(parse_wire_manifest(Json::array()).ok());
  CHECK_FALSE(parse_wire_manifest(Json{{"files", "x"}}).ok());
}

TEST_CASE("checkpoint manifest: trial ids are one plain path component") {
  CHECK(check_trial_name("1.12").ok());
  CHECK(check_trial_name("exp-3_a.1").ok());
  for (const char* bad : {"", ".", "..", "../x", "a/b", "a b", "a\nb"})
    CHECK_FALSE(check_trial_name(bad).ok());
  CHECK_FALSE(check_trial_name(std::string(65, 'a')).ok());
}

TEST_CASE("checkpoint manifest: a directory's scan hashes files and refuses links out") {
  TestDir dir;
  fs::create_directories(dir / "ckpt/sub");
  REQUIRE(write_file_atomic(dir / "ckpt/sub/w.bin", "weights").ok());
  REQUIRE(write_file_atomic(dir / "ckpt/a.txt", "").ok());
  ::chmod((dir / "ckpt/sub/w.bin").c_str(), 0600);
  auto m = scan_checkpoint_dir(dir / "ckpt");
  REQUIRE(m.ok());
  REQUIRE(m->files.size() == 2);
  CHECK(m->files[0].path == "a.txt");
  CHECK(m->files[0].size == 0);
  CHECK(m->files[0].sha256 == sha256_hex(""));
  CHECK(m->files[1].path == "sub/w.bin");
  CHECK(m->files[1].mode == 0600);
  CHECK(m->files[1].sha256 == sha256_hex("weights"));
  fs::create_symlink("/etc/passwd", dir / "ckpt/sub/out");
  auto linked = scan_checkpoint_dir(dir / "ckpt");
  REQUIRE_FALSE(linked.ok());
  CHECK(linked.status().message().find("symlink: sub/out") != std::string::npos);
  fs::create_directory_symlink(dir / "ckpt", dir / "link");
  CHECK_FALSE(scan_checkpoint_dir(dir / "link").ok());  // the directory itself a link
  // Opening below a directory never goes through a link, wherever it is on the way.
  CHECK(open_beneath(dir / "ckpt", "sub/w.bin"));
  fs::create_directory_symlink("/etc", dir / "ckpt/etc");
  CHECK_FALSE(open_beneath(dir / "ckpt", "etc/passwd"));
  CHECK_FALSE(open_beneath(dir / "ckpt", "sub/out"));
  CHECK_FALSE(open_beneath(dir / "ckpt", "../ckpt/a.txt"));
}

// Sleeps past the clock tick that stamped the files just written, so that their digests may
// be kept (ScanCache).
void settle() {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

// Rewrites `file` with `text` of the same size and gives it back its mtime: only its ctime
// says it changed.
void rewrite_keeping_mtime(const fs::path& file, const std::string& text) {
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  UniqueFd fd(::open(file.c_str(), O_WRONLY | O_CLOEXEC));
  REQUIRE(fd);
  REQUIRE(::pwrite(fd.get(), text.data(), text.size(), 0) == static_cast<ssize_t>(text.size()));
  const timespec times[2] = {st.st_atim, st.st_mtim};
  REQUIRE(::futimens(fd.get(), times) == 0);
  struct stat now {};
  REQUIRE(::fstat(fd.get(), &now) == 0);
  REQUIRE(now.st_size == st.st_size);
  REQUIRE(now.st_mtim.tv_sec == st.st_mtim.tv_sec);
  REQUIRE(now.st_mtim.tv_nsec == st.st_mtim.tv_nsec);
}

TEST_CASE("checkpoint manifest: a scan again reuses the digests of the files unchanged since") {
  TestDir dir;
  fs::create_directories(dir / "ckpt/sub");
  REQUIRE(write_file_atomic(dir / "ckpt/sub/w.bin", "weights").ok());
  REQUIRE(write_file_atomic(dir / "ckpt/a.txt", "adam").ok());
  settle();
  ScanCache cache;
  ScanCounts first;
  auto m = scan_checkpoint_dir(dir / "ckpt", cache, &first);
  REQUIRE(m.ok());
  CHECK(first.hashed == 2);
  CHECK(first.reused == 0);
  CHECK(cache.files.size() == 2);
  // Nothing changed: nothing is read again, and the manifest is the same.
  ScanCounts second;
  auto again = scan_checkpoint_dir(dir / "ckpt", cache, &second);
  REQUIRE(again.ok());
  CHECK(second.hashed == 0);
  CHECK(second.reused == 2);
  CHECK(again->to_json() == m->to_json());
  // A file rewritten in place with its size and mtime kept (utimes can set mtime back): its
  // ctime tells, and its new digest is in the manifest, never the old one.
  rewrite_keeping_mtime(dir / "ckpt/sub/w.bin", "WEIGHTS");
  ScanCounts third;
  auto changed = scan_checkpoint_dir(dir / "ckpt", cache, &third);
  REQUIRE(changed.ok());
  CHECK(third.hashed == 1);
  CHECK(third.reused == 1);
  CHECK(changed->files[1].sha256 == sha256_hex("WEIGHTS"));
  // A file replaced by another (a new inode), and a file removed.
  REQUIRE(write_file_atomic(dir / "ckpt/a.txt", "sgd!").ok());
  fs::remove(dir / "ckpt/sub/w.bin");
  ScanCounts fourth;
  auto replaced = scan_checkpoint_dir(dir / "ckpt", cache, &fourth);
  REQUIRE(replaced.ok());
  REQUIRE(replaced->files.size() == 1);
  CHECK(replaced->files[0].sha256 == sha256_hex("sgd!"));
  CHECK(fourth.hashed == 1);
  CHECK(cache.files.size() <= 1);
}

TEST_CASE(
    "checkpoint manifest: a digest read within a clock tick of its file's ctime is not kept") {
  constexpr int64_t ms = 1000000;
  const int64_t now = 1795000000LL * 1000000000 + 123456789;  // nanoseconds not whole ms
  CHECK_FALSE(scan_may_keep_digest(now, now));
  CHECK_FALSE(scan_may_keep_digest(now, now + 1));  // the same tick: a write may go unseen
  CHECK(scan_may_keep_digest(now, now + 100 * ms));
  CHECK_FALSE(scan_may_keep_digest(now, now - 100 * ms));  // a ctime after the read began
  // A time in whole milliseconds may come from a file system of a coarser grain (1 s, 2 s).
  const int64_t coarse = 1795000000LL * 1000000000;
  CHECK_FALSE(scan_may_keep_digest(coarse, coarse + 1500 * ms));
  CHECK(scan_may_keep_digest(coarse, coarse + 3000 * ms));
}

TEST_CASE("kept scans: the directories listed last, each forgotten when asked") {
  KeptScans scans(2);
  ScanCache one;
  one.files["w.bin"] = {FileIdentity{1, 2, 3, 4, 5}, kDigest};
  scans.keep("/a", one);
  scans.keep("/b", one);
  CHECK(scans.of("/a").files.size() == 1);
  scans.keep("/c", one);  // past two: the one listed longest ago goes
  CHECK(scans.of("/a").files.empty());
  CHECK(scans.of("/b").files.size() == 1);
  scans.forget("/b");
  CHECK(scans.of("/b").files.empty());
  CHECK(scans.of("/c").files.at("w.bin").sha256 == kDigest);
}

// An agent that keeps checkpoints under `dir` and runs no ranks.
class CheckpointAgent : public testing::TestAgent {
 public:
  CheckpointAgent(const ClusterKey& key, const fs::path& dir) : TestAgent(key, info(dir)) {}

 private:
  static AgentInfo info(const fs::path& dir) {
    AgentInfo info;
    info.dir = dir;
    return info;
  }
};

struct Fixture {
  Fixture() : key{std::string(32, 'k'), cluster_key_id(std::string(32, 'k'))} {
    ::signal(SIGPIPE, SIG_IGN);
    fs::create_directories(dir / "agent");
    agent = std::make_unique<CheckpointAgent>(key, dir / "agent");
    auto tls = TlsContext::make(TlsContext::Side::kClient, key);
    REQUIRE(tls.ok());
    endpoint = AgentEndpoint{agent->address(), *tls};
  }
  TestDir dir;
  ClusterKey key;
  std::unique_ptr<CheckpointAgent> agent;
  AgentEndpoint endpoint;
};

std::string big_content(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7 + i / 1000);
  return s;
}

TEST_CASE("checkpoint transfer: fetch moves only the contents this side lacks") {
  Fixture f;
  const std::string weights = big_content(kChunkBytes * 2 + 100, 'w');  // three chunks
  auto staged = stage_checkpoint(f.endpoint, "1.1", 2, std::chrono::seconds(10));
  REQUIRE(staged.ok());
  CHECK(lies_inside(*staged, fs::weakly_canonical(f.dir / "agent/work/trials/1.1/checkpoints")));
  fs::create_directories(fs::path(*staged) / "sub");
  REQUIRE(write_file_atomic(fs::path(*staged) / "sub/w.bin", weights).ok());
  REQUIRE(write_file_atomic(fs::path(*staged) / "empty", "").ok());
  REQUIRE(write_file_atomic(fs::path(*staged) / "copy.bin", weights).ok());  // same content

  fs::create_directories(f.dir / "in");
  bool kept = false;
  auto fetched = fetch_checkpoint(
      f.endpoint, "1.1", 2, *staged, [](const std::string&) { return true; }, f.dir / "in",
      [&](const FetchedCheckpoint&) {
        kept = true;
        return Status::Ok();
      });
  REQUIRE(fetched.ok());
  CHECK(kept);
  CHECK(fetched->manifest.files.size() == 3);
  CHECK(fetched->received.size() == 2);  // identical files travel once
  CHECK(fetched->content_bytes == weights.size());
  for (const FetchedContent& c : fetched->received) {
    auto bytes = read_file(c.file);
    REQUIRE(bytes.ok());
    CHECK(sha256_hex(*bytes) == c.sha256);
  }
  // The agent dropped its copy once kept: it answers first, then removes the directory.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (fs::exists(*staged) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK_FALSE(fs::exists(*staged));

  // The same checkpoint again, with everything already here: no content travels.
  auto again = stage_checkpoint(f.endpoint, "1.1", 2, std::chrono::seconds(10));
  REQUIRE(again.ok());
  REQUIRE(write_file_atomic(fs::path(*again) / "w.bin", weights).ok());
  fs::create_directories(f.dir / "in2");
  auto nothing = fetch_checkpoint(
      f.endpoint, "1.1", 2, *again, [](const std::string&) { return false; }, f.dir / "in2",
      [](const FetchedCheckpoint&) { return Status::Ok(); });
  REQUIRE(nothing.ok());
  CHECK(nothing->content_bytes == 0);
  CHECK(nothing->received.empty());
}

TEST_CASE("checkpoint transfer: another attempt, a path outside, a failed keep") {
  Fixture f;
  auto staged = stage_checkpoint(f.endpoint, "1.1", 2, std::chrono::seconds(10));
  REQUIRE(staged.ok());
  REQUIRE(write_file_atomic(fs::path(*staged) / "w.bin", "w").ok());
  fs::create_directories(f.dir / "in");
  auto all = [](const std::string&) { return true; };
  auto ok = [](const FetchedCheckpoint&) { return Status::Ok(); };
  auto stale = fetch_checkpoint(f.endpoint, "1.1", 3, *staged, all, f.dir / "in", ok);
  REQUIRE_FALSE(stale.ok());
  CHECK(stale.status().message().find("no checkpoint of trial 1.1 attempt 3 is staged") !=
        std::string::npos);
  auto other = fetch_checkpoint(f.endpoint, "1.2", 2, *staged, all, f.dir / "in", ok);
  CHECK_FALSE(other.ok());
  auto outside =
      fetch_checkpoint(f.endpoint, "1.1", 2, (f.dir / "in").string(), all, f.dir / "in", ok);
  REQUIRE_FALSE(outside.ok());
  CHECK(outside.status().message().find("outside the agent's directory") != std::string::npos);
  auto climbing =
      fetch_checkpoint(f.endpoint, "1.1", 2, *staged + "/../../../../..", all, f.dir / "in", ok);
  CHECK_FALSE(climbing.ok());
  // Not kept here: the agent keeps its copy (it is staged still, and can be fetched again).
  auto failed = fetch_checkpoint(f.endpoint, "1.1", 2, *staged, all, f.dir / "in",
                                 [](const FetchedCheckpoint&) { return Status::Io("disk full"); });
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message() == "disk full");
  CHECK(fs::exists(fs::path(*staged) / "w.bin"));
  fs::create_directories(f.dir / "in3");
  auto retried = fetch_checkpoint(f.endpoint, "1.1", 2, *staged, all, f.dir / "in3", ok);
  CHECK(retried.ok());
}

TEST_CASE("checkpoint transfer: a directory fetched and removed is listed again, contents not") {
  // A coordinator killed between its checkpoint_done and the registration: the resumed one
  // fetches the removed directory again, and gets its manifest (agent_checkpoints.h).
  Fixture f;
  const std::string weights = big_content(1000, 'd');
  auto staged = stage_checkpoint(f.endpoint, "1.1", 2, std::chrono::seconds(10));
  REQUIRE(staged.ok());
  REQUIRE(write_file_atomic(fs::path(*staged) / "w.bin", weights).ok());
  auto all = [](const std::string&) { return true; };
  auto none = [](const std::string&) { return false; };
  auto ok = [](const FetchedCheckpoint&) { return Status::Ok(); };
  fs::create_directories(f.dir / "in");
  auto first = fetch_checkpoint(f.endpoint, "1.1", 2, *staged, all, f.dir / "in", ok);
  REQUIRE(first.ok());
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (fs::exists(*staged) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE_FALSE(fs::exists(*staged));
  // The store has everything: the same manifest, nothing on the wire.
  fs::create_directories(f.dir / "in2");
  auto again = fetch_checkpoint(f.endpoint, "1.1", 2, *staged, none, f.dir / "in2", ok);
  REQUIRE_MESSAGE(again.ok(), again.status().message());
  CHECK(again->manifest.to_json() == first->manifest.to_json());
  CHECK(again->content_bytes == 0);
  // Only to the trial and attempt that staged it.
  auto stale = fetch_checkpoint(f.endpoint, "1.1", 3, *staged, none, f.dir / "in2", ok);
  REQUIRE_FALSE(stale.ok());
  CHECK(stale.status().message().find("no checkpoint of trial 1.1 attempt 3 is staged") !=
        std::string::npos);
  // A content the store lacks is gone: an error, not a hang or a made-up file.
  fs::create_directories(f.dir / "in3");
  auto lacking = fetch_checkpoint(f.endpoint, "1.1", 2, *staged, all, f.dir / "in3", ok);
  CHECK_FALSE(lacking.ok());
}

TEST_CASE("checkpoint transfer: a file changed after a fetch's listing is listed anew") {
  // The agent keeps the digests of a staged directory's listing for a fetch tried again; a
  // file changed in between (its size and mtime kept) is sent under its new digest, never
  // under the old one (the coordinator would refuse its bytes, or keep the old content).
  Fixture f;
  auto staged = stage_checkpoint(f.endpoint, "1.1", 2, std::chrono::seconds(10));
  REQUIRE(staged.ok());
  const std::string weights = big_content(kChunkBytes + 100, 'w');
  const fs::path w = fs::path(*staged) / "w.bin";
  REQUIRE(write_file_atomic(w, weights).ok());
  REQUIRE(write_file_atomic(fs::path(*staged) / "a.bin", "adam").ok());
  settle();
  auto all = [](const std::string&) { return true; };
  fs::create_directories(f.dir / "in");
  auto failed = fetch_checkpoint(f.endpoint, "1.1", 2, *staged, all, f.dir / "in",
                                 [](const FetchedCheckpoint&) { return Status::Io("disk full"); });
  REQUIRE_FALSE(failed.ok());
  std::string changed = weights;
  changed[kChunkBytes + 50] ^= 1;
  rewrite_keeping_mtime(w, changed);
  fs::create_directories(f.dir / "in2");
  std::string listed;
  auto again = fetch_checkpoint(f.endpoint, "1.1", 2, *staged, all, f.dir / "in2",
                                [&](const FetchedCheckpoint& got) {
                                  for (const WireFile& file : got.manifest.files)
                                    if (file.path == "w.bin") listed = file.sha256;
                                  return Status::Ok();
                                });
  REQUIRE(again.ok());
  CHECK(listed == sha256_hex(changed));
  CHECK(read_file(f.dir / "in2" / listed).value_or("") == changed);
}

TEST_CASE("checkpoint transfer: a restore sends only what the agent's cache lacks") {
  Fixture f;
  const std::string weights = big_content(kChunkBytes + 1, 'r');
  fs::create_directories(f.dir / "local/sub");
  REQUIRE(write_file_atomic(f.dir / "local/sub/w.bin", weights).ok());
  REQUIRE(write_file_atomic(f.dir / "local/rng", "rng").ok());
  ::chmod((f.dir / "local/rng").c_str(), 0600);
  auto pushed = push_checkpoint(f.endpoint, "1.1", 5, f.dir / "local", std::chrono::seconds(10));
  REQUIRE(pushed.ok());
  CHECK(pushed->content_bytes == weights.size() + 3);
  CHECK(pushed->files == 2);
  const fs::path restored = pushed->path;
  CHECK(restored.parent_path() == fs::weakly_canonical(f.dir / "agent/work/trials/1.1"));
  CHECK(restored.filename().string().rfind("restore-5-", 0) == 0);
  CHECK(*read_file(restored / "sub/w.bin") == weights);
  struct stat st {};
  REQUIRE(::stat((restored / "rng").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(fs::exists(f.dir / "agent/objects" / sha256_hex(weights).substr(0, 2) /
                   sha256_hex(weights).substr(2)));
  // The next attempt restores the same checkpoint: nothing travels.
  auto again = push_checkpoint(f.endpoint, "1.1", 6, f.dir / "local", std::chrono::seconds(10));
  REQUIRE(again.ok());
  CHECK(again->content_bytes == 0);
  CHECK(*read_file(fs::path(again->path) / "sub/w.bin") == weights);
}

TEST_CASE("checkpoint transfers: a fetch job lands in the object store, durable, off the loop") {
  struct sigaction old {};
  ::sigaction(SIGCHLD, nullptr, &old);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;  // the job wakes the loop with SIGCHLD: ignored here
  ::sigaction(SIGCHLD, &dfl, nullptr);
  Fixture f;
  ObjectStore objects(f.dir / "store/objects");
  auto staged = stage_checkpoint(f.endpoint, "1.1", 2, std::chrono::seconds(10));
  REQUIRE(staged.ok());
  REQUIRE(write_file_atomic(fs::path(*staged) / "w.bin", "weights").ok());
  REQUIRE(write_file_atomic(fs::path(*staged) / "old.bin", "old").ok());
  uint64_t size = 0;
  bool added = false;
  REQUIRE(write_file_atomic(f.dir / "old", "old").ok());
  REQUIRE(objects.copy_in(f.dir / "old", &size, &added).ok());  // the store has one already
  std::vector<CheckpointJobResult> results;
  {
    CheckpointTransfers transfers(objects, f.dir / "store/staging");
    CheckpointJob job;
    job.kind = CheckpointJob::Kind::kFetch;
    job.agent = f.endpoint;
    job.trial = "1.1";
    job.attempt = 2;
    job.path = *staged;
    job.step = 7;
    transfers.start(job);
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (results.empty() && Clock::now() < deadline) {
      results = transfers.take();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  ::sigaction(SIGCHLD, &old, nullptr);
  REQUIRE(results.size() == 1);
  REQUIRE(results[0].status.ok());
  CHECK(results[0].content_bytes == 7);  // "weights" only
  CHECK(results[0].new_bytes == 7);
  auto manifest = load_manifest(objects, results[0].manifest.id);
  REQUIRE(manifest.ok());
  CHECK(manifest->origin.step == 7);
  REQUIRE(manifest->files.size() == 2);
  CHECK(manifest->files[1].path == "w.bin");
  CHECK(objects.verify(sha256_hex("weights")).ok());
  CHECK(fs::is_empty(f.dir / "store/staging"));  // the received files went into the store
}

}  // namespace
}  // namespace cairn
