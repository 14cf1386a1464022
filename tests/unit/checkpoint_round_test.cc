// A data-parallel checkpoint round over machines (docs/peers.md "A checkpoint round over
// machines"): the merge of the machines' parts (checkpoint_parts.h), and a round job
// (checkpoint_round_job.cc) against two real agents in this process: every part arrives with
// only the content the store lacks, the union is one manifest; a part that cannot be fetched
// leaves no manifest in the store.
#include <doctest/doctest.h>
#include <signal.h>

#include <thread>

#include "common/file_util.h"
#include "common/sha256.h"
#include "engine/coordinator/checkpoint_parts.h"
#include "engine/coordinator/checkpoint_transfers.h"
#include "peer/checkpoint_client.h"
#include "peer/cluster_key.h"
#include "tests/unit/test_agent.h"
#include "tests/unit/test_dir.h"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using testing::TestDir;
using Clock = std::chrono::steady_clock;

CheckpointFile file(const std::string& path, char c, uint64_t size = 1) {
  return {path, std::string(64, c), size};
}

TEST_CASE("checkpoint parts: the union of distinct files, sorted, each once") {
  auto merged = merge_checkpoint_parts({{"local", {file("mlp.ckpt", 'a'), file("rng.0", 'b')}},
                                        {"10.0.0.2:7070", {file("rng.1", 'c')}},
                                        {"10.0.0.3:7070", {file("shards/2", 'd')}}});
  REQUIRE(merged.ok());
  REQUIRE(merged->size() == 4);
  CHECK((*merged)[0].path == "mlp.ckpt");
  CHECK((*merged)[1].path == "rng.0");
  CHECK((*merged)[2].path == "rng.1");
  CHECK((*merged)[3].path == "shards/2");
  // The same bytes under one name on two machines (every rank wrote the same metadata): once.
  auto same = merge_checkpoint_parts(
      {{"local", {file("metadata.json", 'e', 10)}}, {"b:1", {file("metadata.json", 'e', 10)}}});
  REQUIRE(same.ok());
  CHECK(same->size() == 1);
  // Empty parts (a machine whose ranks wrote nothing) add nothing.
  auto empty = merge_checkpoint_parts({{"local", {}}, {"b:1", {file("x", 'a')}}, {"c:1", {}}});
  REQUIRE(empty.ok());
  CHECK(empty->size() == 1);
  CHECK(merge_checkpoint_parts({})->empty());
}

TEST_CASE("checkpoint parts: one name with two contents, or a file that is a directory") {
  auto differs = merge_checkpoint_parts(
      {{"local", {file("model.pt", 'a')}}, {"10.0.0.2:7070", {file("model.pt", 'b')}}});
  REQUIRE_FALSE(differs.ok());
  CHECK(differs.status().kind() == ErrorKind::kBadInput);
  CHECK(differs.status().message() ==
        "checkpoint file 'model.pt' was written with different content on local and on "
        "10.0.0.2:7070 (ranks on different machines must write distinct files)");
  auto sized = merge_checkpoint_parts(
      {{"local", {file("model.pt", 'a', 1)}}, {"b:1", {file("model.pt", 'a', 2)}}});
  CHECK_FALSE(sized.ok());
  auto dir = merge_checkpoint_parts(
      {{"local", {file("a", 'a'), file("a.txt", 'b')}}, {"b:1", {file("a/b", 'c')}}});
  REQUIRE_FALSE(dir.ok());
  CHECK(dir.status().message() == "checkpoint path 'a' is a file on local and a directory on b:1");
  // "a-b" sorts between "a" and "a/": still found.
  CHECK_FALSE(
      merge_checkpoint_parts({{"x:1", {file("a", 'a'), file("a-b", 'b'), file("a/c", 'c')}}}).ok());
  CHECK(merge_checkpoint_parts({{"x:1", {file("a", 'a'), file("ab/c", 'c')}}}).ok());
}

AgentInfo agent_info(const fs::path& dir) {
  AgentInfo info;
  info.dir = dir;
  return info;
}

struct Round {
  Round() : key{std::string(32, 'k'), cluster_key_id(std::string(32, 'k'))} {
    ::signal(SIGPIPE, SIG_IGN);
    for (const char* name : {"a", "b"}) {
      fs::create_directories(dir / name);
      agents.push_back(std::make_unique<testing::TestAgent>(key, agent_info(dir / name)));
    }
    auto tls = TlsContext::make(TlsContext::Side::kClient, key);
    REQUIRE(tls.ok());
    for (auto& agent : agents) endpoints.push_back(AgentEndpoint{agent->address(), *tls});
  }
  // Runs `job` and returns its result (the job's SIGCHLD is ignored here).
  CheckpointJobResult run(ObjectStore& objects, const CheckpointJob& job) {
    struct sigaction old {};
    ::sigaction(SIGCHLD, nullptr, &old);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGCHLD, &dfl, nullptr);
    std::vector<CheckpointJobResult> results;
    {
      CheckpointTransfers transfers(objects, dir / "store/staging");
      transfers.start(job);
      const auto deadline = Clock::now() + std::chrono::seconds(30);
      while (results.empty() && Clock::now() < deadline) {
        results = transfers.take();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    ::sigaction(SIGCHLD, &old, nullptr);
    REQUIRE(results.size() == 1);
    return results[0];
  }
  TestDir dir;
  ClusterKey key;
  std::vector<std::unique_ptr<testing::TestAgent>> agents;
  std::vector<AgentEndpoint> endpoints;
};

CheckpointJob round_job(const fs::path& local_dir) {
  CheckpointJob job;
  job.kind = CheckpointJob::Kind::kRound;
  job.trial = "3.1";
  job.attempt = 1;
  job.step = 4;
  job.local_dir = local_dir.string();
  return job;
}

TEST_CASE("checkpoint round job: every machine's part, only missing content, one manifest") {
  Round r;
  ObjectStore objects(r.dir / "store/objects");
  fs::create_directories(r.dir / "local");
  REQUIRE(write_file_atomic(r.dir / "local/mlp.ckpt", "weights of rank 0").ok());
  REQUIRE(write_file_atomic(r.dir / "local/cairn_rng_state.txt", "rng 0").ok());
  CheckpointJob job = round_job(r.dir / "local");
  const std::vector<std::pair<std::string, std::string>> written = {
      {"cairn_rng_state.rank1.txt", "rng 1"}, {"shard/2", "weights of rank 0"}};
  // (mlp.ckpt here and shard/2 on agent b hold the same bytes: stored once.)
  for (size_t i = 0; i < 2; ++i) {
    auto staged = stage_checkpoint(r.endpoints[i], "3.1", 1, std::chrono::seconds(10));
    REQUIRE(staged.ok());
    fs::create_directories(fs::path(*staged) / "shard");
    REQUIRE(write_file_atomic(fs::path(*staged) / written[i].first, written[i].second).ok());
    job.parts.push_back({r.endpoints[i].address.text(), r.endpoints[i], *staged});
  }
  // The store holds the shard's bytes already (an earlier checkpoint): they do not travel.
  REQUIRE(write_file_atomic(r.dir / "earlier", "weights of rank 0").ok());
  uint64_t size = 0;
  bool added = false;
  REQUIRE(objects.copy_in(r.dir / "earlier", &size, &added).ok());
  CheckpointJobResult done = r.run(objects, job);
  REQUIRE(done.status.ok());
  CHECK(done.content_bytes == 5);
  CHECK(done.new_bytes == 5 + 5);  // the two generator states; the weights were stored
  auto manifest = load_manifest(objects, done.manifest.id);
  REQUIRE(manifest.ok());
  CHECK(manifest->origin.trial == "3.1");
  CHECK(manifest->origin.step == 4);
  REQUIRE(manifest->files.size() == 4);
  CHECK(manifest->files[0].path == "cairn_rng_state.rank1.txt");
  CHECK(manifest->files[1].path == "cairn_rng_state.txt");
  CHECK(manifest->files[2].path == "mlp.ckpt");
  CHECK(manifest->files[3].path == "shard/2");
  CHECK(manifest->bytes == 5 + 5 + 17 + 17);
  for (const CheckpointFile& f : manifest->files) CHECK(objects.verify(f.sha256).ok());
  // The agents dropped their copies once the store held them.
  for (const char* name : {"a", "b"})
    CHECK(fs::is_empty(r.dir / name / "work/trials/3.1/checkpoints"));
  // A second round of the same files costs no content.
  CheckpointJob again = round_job(r.dir / "local");
  for (size_t i = 0; i < 2; ++i) {
    auto staged = stage_checkpoint(r.endpoints[i], "3.1", 1, std::chrono::seconds(10));
    REQUIRE(staged.ok());
    fs::create_directories(fs::path(*staged) / "shard");
    REQUIRE(write_file_atomic(fs::path(*staged) / written[i].first, written[i].second).ok());
    again.parts.push_back({r.endpoints[i].address.text(), r.endpoints[i], *staged});
  }
  again.step = 6;
  CheckpointJobResult second = r.run(objects, again);
  REQUIRE(second.status.ok());
  CHECK(second.content_bytes == 0);
  CHECK(second.new_bytes == 0);
  CHECK(second.manifest.id != done.manifest.id);  // another step: another checkpoint
}

TEST_CASE("checkpoint round job: a part that does not arrive leaves no manifest") {
  Round r;
  ObjectStore objects(r.dir / "store/objects");
  fs::create_directories(r.dir / "local");
  REQUIRE(write_file_atomic(r.dir / "local/mlp.ckpt", "weights").ok());
  CheckpointJob job = round_job(r.dir / "local");
  auto staged = stage_checkpoint(r.endpoints[0], "3.1", 1, std::chrono::seconds(10));
  REQUIRE(staged.ok());
  REQUIRE(write_file_atomic(fs::path(*staged) / "rng.1", "rng 1").ok());
  job.parts.push_back({r.endpoints[0].address.text(), r.endpoints[0], *staged});
  // Agent b never staged this directory: it refuses the fetch.
  job.parts.push_back({r.endpoints[1].address.text(), r.endpoints[1],
                       (r.dir / "b/work/trials/3.1/checkpoints/attempt-1-forged").string()});
  CheckpointJobResult done = r.run(objects, job);
  REQUIRE_FALSE(done.status.ok());
  CHECK(done.status.message().find("the part written on " + r.endpoints[1].address.text() +
                                   " did not arrive: ") == 0);
  CHECK(done.manifest.id.empty());
  // No manifest of the round is in the store; the contents that came are (unreferenced).
  CheckpointManifest would;
  would.origin = {"3.1", 4};
  would.files = {{"mlp.ckpt", sha256_hex("weights"), 7}, {"rng.1", sha256_hex("rng 1"), 5}};
  would.bytes = 12;
  CHECK_FALSE(objects.contains(sha256_hex(would.to_json().dump())));
  CHECK(objects.contains(sha256_hex("rng 1")));
  // Two parts with one name and different bytes: refused, no manifest either.
  CheckpointJob clash = round_job(r.dir / "local");
  auto other = stage_checkpoint(r.endpoints[1], "3.1", 1, std::chrono::seconds(10));
  REQUIRE(other.ok());
  REQUIRE(write_file_atomic(fs::path(*other) / "mlp.ckpt", "other weights").ok());
  clash.parts.push_back({r.endpoints[1].address.text(), r.endpoints[1], *other});
  CheckpointJobResult refused = r.run(objects, clash);
  REQUIRE_FALSE(refused.status.ok());
  CHECK(refused.status.message().find("written with different content") != std::string::npos);
}

}  // namespace
}  // namespace cairn
