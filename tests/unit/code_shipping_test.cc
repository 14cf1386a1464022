// Code and data shipping to an agent (docs/peers.md "Code and data on a peer"): packs of
// what the agent lacks, the agent's cache indexing and checking them out, hostile trees
// and damaged packs refused with nothing written outside the agent's directory, the data
// plan and the agent's fingerprint check.
#include <doctest/doctest.h>
#include <git2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fcntl.h>
#include <signal.h>

#include <fstream>
#include <thread>

#include "common/file_util.h"
#include "common/sha256.h"
#include "engine/coordinator/agent_shipping.h"
#include "engine/coordinator/run_shipping.h"
#include "peer/agent_client.h"
#include "peer/agent_server.h"
#include "peer/chunk_stream.h"
#include "peer/peer_address.h"
#include "store/code_pack.h"
#include "store/code_snapshot.h"
#include "tests/unit/test_agent.h"
#include "tests/unit/test_dir.h"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using testing::TestDir;

void put(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

std::string slurp(const fs::path& file) {
  auto text = read_file(file);
  REQUIRE(text.ok());
  return *text;
}

// Read-only checkouts are made writable again so the test directory can be removed by a
// user who is not root.
struct Writable {
  fs::path dir;
  ~Writable() {
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (!it->is_symlink(ec)) ::chmod(it->path().c_str(), 0755);
  }
};

std::string snapshot(const fs::path& store, const fs::path& workdir,
                     std::vector<fs::path> exclude = {}) {
  auto repo = CodeRepository::open(store);
  REQUIRE(repo.ok());
  SnapshotOptions options;
  options.exclude = std::move(exclude);  // what `cairn run` leaves out: the data
  auto snap = repo->snapshot(workdir, options, "test");
  REQUIRE_MESSAGE(snap.ok(), snap.status().message());
  return snap->tree;
}

// Indexes `pack` into the cache in pieces of `piece` bytes.
Result<uint64_t> deliver(CodeCache& cache, const std::string& pack, size_t piece = 7) {
  auto receiver = cache.receive_pack();
  if (!receiver.ok()) return receiver.status();
  for (size_t at = 0; at < pack.size(); at += piece) {
    Status st = (*receiver)->append(std::string_view(pack).substr(at, piece));
    if (!st.ok()) return st;
  }
  return (*receiver)->finish();
}

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.push_back(it->path().lexically_relative(dir).generic_string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST_CASE("code pack: the tree's objects minus what the agent has; the agent checks it out") {
  TestDir dir;
  Writable writable{dir.path()};
  const fs::path store = dir / "store", work = dir / "work", agent = dir / "agent";
  put(work / "train.py", "print('v1')\n");
  put(work / "lib" / "util.py", "X = 1\n");
  fs::create_symlink("../train.py", work / "lib" / "link.py");
  REQUIRE(::chmod((work / "train.py").c_str(), 0755) == 0);
  const std::string first = snapshot(store, work);

  auto pack = build_code_pack(store, first, {});
  REQUIRE(pack.ok());
  CHECK(pack->objects == 5);  // two trees, two files, one link
  auto cache = CodeCache::open(agent);
  REQUIRE(cache.ok());
  CHECK_FALSE((*cache)->has_checkout(first));
  auto indexed = deliver(**cache, pack->bytes);
  REQUIRE_MESSAGE(indexed.ok(), indexed.status().message());
  CHECK(*indexed == 5);
  REQUIRE((*cache)->checkout(first).ok());
  const fs::path out = (*cache)->checkout_dir(first);
  CHECK(out == agent / "code" / first);
  CHECK(slurp(out / "train.py") == "print('v1')\n");
  CHECK(slurp(out / "lib" / "util.py") == "X = 1\n");
  CHECK(fs::read_symlink(out / "lib" / "link.py") == "../train.py");
  struct stat st;
  REQUIRE(::stat((out / "train.py").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0555);
  REQUIRE(::stat((out / "lib" / "util.py").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0444);
  REQUIRE(::stat((out / "lib").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0555);
  CHECK((*cache)->tips(8) == std::vector<std::string>{first});
  // Checked out once: a second checkout of the same tree changes nothing.
  CHECK((*cache)->checkout(first).ok());

  // One file changed: the new root tree and the new blob only.
  put(work / "train.py", "print('v2')\n");
  const std::string second = snapshot(store, work);
  auto delta = build_code_pack(store, second, (*cache)->tips(8));
  REQUIRE(delta.ok());
  CHECK(delta->objects == 2);
  // A have this store does not know (another coordinator's) is ignored.
  auto with_unknown = build_code_pack(store, second, {std::string(40, 'a'), "not an id", first});
  REQUIRE(with_unknown.ok());
  CHECK(with_unknown->objects == 2);
  indexed = deliver(**cache, delta->bytes, 4096);
  REQUIRE(indexed.ok());
  CHECK(*indexed == 2);
  REQUIRE((*cache)->checkout(second).ok());
  CHECK(slurp((*cache)->checkout_dir(second) / "train.py") == "print('v2')\n");
  CHECK(slurp((*cache)->checkout_dir(second) / "lib" / "util.py") == "X = 1\n");

  // Nothing to send when the agent has the tree.
  auto none = build_code_pack(store, second, {second});
  REQUIRE(none.ok());
  CHECK(none->objects == 0);
  CHECK(none->bytes.empty());
  // A tree the store does not have.
  CHECK(build_code_pack(store, std::string(40, 'b'), {}).status().kind() == ErrorKind::kNotFound);

  // A run's copy of a checkout is writable.
  REQUIRE(copy_checkout(out, dir / "run").ok());
  REQUIRE(::stat((dir / "run" / "lib").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0755);
  REQUIRE(::stat((dir / "run" / "train.py").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0755);
  CHECK(fs::read_symlink(dir / "run" / "lib" / "link.py") == "../train.py");
}

TEST_CASE("code pack: a damaged pack is refused and leaves nothing behind") {
  TestDir dir;
  Writable writable{dir.path()};
  put(dir / "work" / "a.txt", std::string(10000, 'a'));
  put(dir / "work" / "b.txt", "b\n");
  const std::string tree = snapshot(dir / "store", dir / "work");
  auto pack = build_code_pack(dir / "store", tree, {});
  REQUIRE(pack.ok());
  auto cache = CodeCache::open(dir / "agent");
  REQUIRE(cache.ok());
  const fs::path packs = dir / "agent" / "code-cache.git" / "objects" / "pack";
  for (size_t at : {size_t{20}, pack->bytes.size() / 2, pack->bytes.size() - 3}) {
    CAPTURE(at);
    std::string damaged = pack->bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x5a);
    auto indexed = deliver(**cache, damaged);
    CHECK_FALSE(indexed.ok());
    CHECK(indexed.status().kind() == ErrorKind::kCorrupt);
    CHECK(listing(packs).empty());
  }
  // Cut short.
  CHECK_FALSE(deliver(**cache, pack->bytes.substr(0, pack->bytes.size() - 30)).ok());
  CHECK(listing(packs).empty());
  // Without the objects, no checkout either.
  CHECK((*cache)->checkout(tree).kind() == ErrorKind::kCorrupt);
  CHECK_FALSE((*cache)->has_checkout(tree));
  CHECK(listing(dir / "agent" / "code").empty());
}

// A tree object written as given: names and link targets no git tool would write.
struct RawEntry {
  std::string mode, name;
  git_oid oid;
};

git_oid write_object(git_odb* odb, const std::string& content, git_object_t type) {
  git_oid oid;
  REQUIRE(git_odb_write(&oid, odb, content.data(), content.size(), type) == 0);
  return oid;
}

git_oid write_raw_tree(git_odb* odb, const std::vector<RawEntry>& entries) {
  std::string content;
  for (const RawEntry& e : entries) {
    content += e.mode + " " + e.name;
    content.push_back('\0');
    content.append(reinterpret_cast<const char*>(e.oid.id), GIT_OID_RAWSZ);
  }
  return write_object(odb, content, GIT_OBJECT_TREE);
}

TEST_CASE("code cache: hostile trees are refused with one line, nothing written outside") {
  TestDir dir;
  Writable writable{dir.path()};
  const fs::path store = dir / "store";
  put(dir / "work" / "ok.txt", "fine\n");
  snapshot(store, dir / "work");  // makes code.git
  git_repository* repo = nullptr;
  REQUIRE(git_repository_open_bare(&repo, (store / "code.git").c_str()) == 0);
  git_odb* odb = nullptr;
  REQUIRE(git_repository_odb(&odb, repo) == 0);
  const git_oid blob = write_object(odb, "owned\n", GIT_OBJECT_BLOB);
  auto link = [&](const std::string& target) { return write_object(odb, target, GIT_OBJECT_BLOB); };
  const git_oid inner = write_raw_tree(odb, {{"100644", "x", blob}});
  const git_oid climbing = write_raw_tree(odb, {{"120000", "l", link("../../outside")}});
  struct Case {
    const char* what;
    git_oid tree;
    const char* says;
  } cases[] = {
      {"an entry named ..", write_raw_tree(odb, {{"100644", "..", blob}}), "'..'"},
      {"a directory named ..", write_raw_tree(odb, {{"40000", "..", inner}}), "'..'"},
      {"an absolute name", write_raw_tree(odb, {{"100644", "/tmp/owned", blob}}), "/tmp/owned"},
      {"a name with a slash", write_raw_tree(odb, {{"100644", "a/../../owned", blob}}), "a/.."},
      {"an entry named .", write_raw_tree(odb, {{"40000", ".", inner}}), "'.'"},
      {"a link to an absolute path", write_raw_tree(odb, {{"120000", "l", link("/etc")}}),
       "leads outside"},
      {"a link climbing out", write_raw_tree(odb, {{"120000", "l", link("../x")}}),
       "leads outside"},
      {"a link climbing out from below", write_raw_tree(odb, {{"40000", "d", climbing}}),
       "leads outside"},
      {"a link climbing after a name", write_raw_tree(odb, {{"120000", "l", link("d/../../x")}}),
       "leads outside"},
      {"a name twice", write_raw_tree(odb, {{"100644", "a", blob}, {"100644", "a", blob}}),
       "appears twice"},
      {"a link and a directory of one name",
       write_raw_tree(odb, {{"40000", "a", inner}, {"120000", "a", link("b")}}), "appears twice"},
  };
  auto outside_agent = [&] {
    std::vector<std::string> out;
    for (const std::string& path : listing(dir.path()))
      if (path.rfind("agent", 0) != 0) out.push_back(path);
    return out;
  };
  const std::vector<std::string> before = outside_agent();
  auto cache = CodeCache::open(dir / "agent");
  REQUIRE(cache.ok());
  for (const Case& c : cases) {
    const std::string what = c.what;
    CAPTURE(what);
    const std::string tree = git_oid_tostr_s(&c.tree);
    auto pack = build_code_pack(store, tree, {});
    REQUIRE_MESSAGE(pack.ok(), pack.status().message());
    auto indexed = deliver(**cache, pack->bytes, 1 << 20);
    REQUIRE_MESSAGE(indexed.ok(), indexed.status().message());
    Status st = (*cache)->checkout(tree);
    CHECK(st.kind() == ErrorKind::kBadInput);
    CHECK(st.message().find('\n') == std::string::npos);
    CHECK_MESSAGE(st.message().find(c.says) != std::string::npos, st.message());
    CHECK_FALSE((*cache)->has_checkout(tree));
    CHECK(listing(dir / "agent" / "code").empty());  // no stage left either
  }
  // Nothing was written beside the agent's directory or at the absolute name.
  CHECK(outside_agent() == before);
  CHECK_FALSE(fs::exists(dir / "owned"));
  CHECK_FALSE(fs::exists("/tmp/owned"));
  CHECK_FALSE(fs::exists(dir / "agent" / "owned"));
  // A link that climbs only as far as its own depth is fine.
  const git_oid sub = write_raw_tree(odb, {{"120000", "l", link("../ok.txt")}});
  const git_oid good = write_raw_tree(odb, {{"100644", "ok.txt", blob}, {"40000", "d", sub}});
  const std::string tree = git_oid_tostr_s(&good);
  auto pack = build_code_pack(store, tree, {});
  REQUIRE(pack.ok());
  REQUIRE(deliver(**cache, pack->bytes).ok());
  REQUIRE((*cache)->checkout(tree).ok());
  CHECK(slurp((*cache)->checkout_dir(tree) / "d" / "l") == "owned\n");
  git_odb_free(odb);
  git_repository_free(repo);
}

TEST_CASE("chunks: base64 both ways, strictly") {
  for (const std::string& bytes : {std::string(), std::string("a"), std::string("ab"),
                                   std::string("abc"), std::string("\0\xff\x10z", 4)}) {
    auto back = base64_decode(base64_encode(bytes));
    REQUIRE(back.ok());
    CHECK(*back == bytes);
  }
  CHECK_FALSE(base64_decode("abc").ok());
  CHECK_FALSE(base64_decode("ab=c").ok());
  CHECK_FALSE(base64_decode("a$cd").ok());
}

TEST_CASE("data plan: kept data is shipped, larger data is checked where it is and linked") {
  RunSource source;
  source.workdir = "/proj";
  source.data_entries = {"data/", "/srv/big"};
  source.data.files = {{"/srv/big/x.bin", std::string(64, '1'), 10},
                       {"data/a.csv", std::string(64, '2'), 3},
                       {"data/sub/b.csv", std::string(64, '3'), 4}};
  source.data.stored = true;
  DataPlan stored = plan_data(source);
  REQUIRE(stored.ship.size() == 2);
  CHECK(stored.ship[0].path == "data/a.csv");
  CHECK(stored.links.empty());
  CHECK(stored.check_entries == std::vector<std::string>{"/srv/big"});
  REQUIRE(stored.check_files.size() == 1);
  CHECK(stored.check_files[0].path == "/srv/big/x.bin");

  source.data.stored = false;
  DataPlan larger = plan_data(source);
  CHECK(larger.ship.empty());
  CHECK(larger.links == std::vector<std::pair<std::string, std::string>>{{"data", "/proj/data"}});
  CHECK(larger.check_entries == std::vector<std::string>{"/proj/data", "/srv/big"});
  REQUIRE(larger.check_files.size() == 3);
  CHECK(larger.check_files[1].path == "/proj/data/a.csv");
}

TEST_CASE("data plan: a reproduce checkout's data link is checked and linked where it leads") {
  // The checkout lies in the store and its data entry is a link to the project's data: the
  // agent has the data at the project's path, never the coordinator's store.
  TestDir dir;
  const fs::path project = fs::weakly_canonical(dir.path());
  put(project / "data" / "a.csv", "1\n");
  const fs::path checkout = project / ".cairn" / "reproduce" / "1.1-x";
  fs::create_directories(checkout);
  fs::create_symlink("../../../data", checkout / "data");
  RunSource source;
  source.store_root = project / ".cairn";
  source.workdir = checkout;
  source.data_entries = {"data/", "elsewhere"};
  source.data.files = {{"data/a.csv", std::string(64, '2'), 2},
                       {"elsewhere/b.csv", std::string(64, '3'), 3}};
  source.data.stored = false;
  DataPlan plan = plan_data(source);
  const std::string data = (project / "data").string();
  const std::string elsewhere = (checkout / "elsewhere").string();  // no link: as given
  CHECK(plan.links ==
        std::vector<std::pair<std::string, std::string>>{{"data", data}, {"elsewhere", elsewhere}});
  CHECK(plan.check_entries == std::vector<std::string>{data, elsewhere});
  REQUIRE(plan.check_files.size() == 2);
  CHECK(plan.check_files[0].path == data + "/a.csv");
  CHECK(plan.check_files[1].path == elsewhere + "/b.csv");
}

TEST_CASE("agent data check: the same fingerprint at the same path, or one line saying why") {
  TestDir dir;
  put(dir / "data" / "a.csv", "1,2\n");
  put(dir / "data" / "b.csv", "3,4\n");
  const std::string root = (dir / "data").string();
  auto check = [&](const std::string& a_hash) {
    return Json{{"entries", {root}},
                {"files",
                 {{{"path", root + "/a.csv"}, {"sha256", a_hash}, {"size", 4}},
                  {{"path", root + "/b.csv"}, {"sha256", sha256_hex("3,4\n")}, {"size", 4}}}}};
  };
  CHECK(check_agent_data(dir / "agent", check(sha256_hex("1,2\n"))).ok());
  Status changed = check_agent_data(dir / "agent", check(sha256_hex("other")));
  CHECK(changed.kind() == ErrorKind::kFailed);
  CHECK(changed.message() == "data " + root + " on this machine is not what the experiment " +
                                 "recorded: 1 changed (" + root + "/a.csv)");
  fs::remove(dir / "data" / "b.csv");
  Status missing = check_agent_data(dir / "agent", check(sha256_hex("1,2\n")));
  CHECK(missing.message().find("1 missing (" + root + "/b.csv)") != std::string::npos);
  fs::remove_all(dir / "data");
  Status gone = check_agent_data(dir / "agent", check(sha256_hex("1,2\n")));
  CHECK(gone.message() == "data " + root +
                              " is not on this machine (data too large to ship must be at the "
                              "same path as on the coordinator)");
  // Paths that are not absolute are not looked at.
  CHECK(check_agent_data(dir / "agent", Json{{"entries", {"data"}}, {"files", Json::array()}})
            .kind() == ErrorKind::kBadInput);
}

// An agent that takes code and data shipments under `dir` and runs no ranks.
class ShippingAgent : public testing::TestAgent {
 public:
  ShippingAgent(const ClusterKey& key, const fs::path& dir)
      : TestAgent(key, AgentInfo{}, {}, [dir](AgentServer& server) {
          server.set_request_handler(make_shipping_handler(dir));
        }) {}
};

TEST_CASE("shipping over the wire: counted, nothing twice, data checked before a run") {
  ::signal(SIGPIPE, SIG_IGN);
  TestDir dir;
  Writable writable{dir.path()};
  const fs::path work = dir / "work", store_root = dir / "store";
  put(work / "train.py", "print('hi')\n");
  put(work / "data" / "a.csv", "1,2\n");
  // Several chunks' worth, bytes of every value.
  std::string big(kShipChunkBytes * 2 + 12345, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  put(work / "data" / "big.bin", big);
  auto store = init_store(dir.path());
  REQUIRE(store.ok());
  RunSource source;
  source.store_root = store->root();
  source.tree = snapshot(store->root(), work, {work / "data"});
  source.data_entries = {"data/"};
  source.workdir = work;
  auto data = fingerprint_data(*store, work, source.data_entries, 8 << 20);
  REQUIRE(data.ok());
  REQUIRE(data->stored);
  source.data = *data;
  source.run = "0123456789abcdef";

  const ClusterKey key{std::string(32, 'k'), cluster_key_id(std::string(32, 'k'))};
  ShippingAgent agent(key, dir / "agent");
  auto client = TlsContext::make(TlsContext::Side::kClient, key);
  REQUIRE(client.ok());
  auto ship = [&](ShipStats* stats) {
    PeerFailure failure;
    auto peer =
        connect_to_agent(agent.address(), *client,
                         std::chrono::steady_clock::now() + std::chrono::seconds(10), &failure);
    REQUIRE(peer.ok());
    return ship_run(**peer, source, std::chrono::steady_clock::now() + std::chrono::seconds(30),
                    stats);
  };
  ShipStats first;
  auto cwd = ship(&first);
  REQUIRE_MESSAGE(cwd.ok(), cwd.status().message());
  CHECK(*cwd == "runs/0123456789abcdef");
  CHECK(first.objects == 2);  // the tree and train.py: the data is not code
  CHECK(first.pack_bytes > 0);
  CHECK(first.data_files == 2);
  CHECK(first.data_bytes == 4 + big.size());
  const fs::path run = dir / "agent" / "work" / "runs" / "0123456789abcdef";
  CHECK(slurp(run / "train.py") == "print('hi')\n");
  CHECK(slurp(run / "data" / "a.csv") == "1,2\n");
  CHECK(slurp(run / "data" / "big.bin") == big);
  ShipStats second;
  REQUIRE(ship(&second).ok());
  CHECK(second.objects == 0);
  CHECK(second.pack_bytes == 0);
  CHECK(second.data_files == 0);

  // An agent whose cache lost its objects but kept its checkouts: the pack minus its tips
  // cannot be checked out, so everything is sent once more.
  {
    auto ship_tree = [&](const std::string& text, const std::string& run, ShipStats* stats) {
      RunSource changed = source;
      put(work / "train.py", text);
      changed.tree = snapshot(store->root(), work, {work / "data"});
      changed.run = run;
      PeerFailure failure;
      auto peer =
          connect_to_agent(agent.address(), *client,
                           std::chrono::steady_clock::now() + std::chrono::seconds(10), &failure);
      REQUIRE(peer.ok());
      return ship_run(**peer, changed, std::chrono::steady_clock::now() + std::chrono::seconds(30),
                      stats);
    };
    put(work / "lib.py", "shared = True\n");
    ShipStats with_lib;
    REQUIRE(ship_tree("print('a')\n", "00000000000000c1", &with_lib).ok());
    CHECK(with_lib.objects == 3);  // the tree, train.py, lib.py
    for (const auto& entry :
         fs::directory_iterator(dir / "agent" / "code-cache.git" / "objects" / "pack"))
      fs::remove(entry.path());
    ShipStats again;
    auto shipped = ship_tree("print('b')\n", "00000000000000c2", &again);
    REQUIRE_MESSAGE(shipped.ok(), shipped.status().message());
    CHECK(again.objects == 2 + 3);  // minus the tip (no lib.py), then everything
    CHECK(slurp(dir / "agent" / "work" / "runs" / "00000000000000c2" / "lib.py") ==
          "shared = True\n");
    fs::remove(work / "lib.py");
    put(work / "train.py", "print('hi')\n");
  }

  // In the background: prefetch() ships, prepare() takes its answer.
  {
    RunSource later = source;
    later.run = "00000000000000aa";
    RunShipper shipper(agent.address(), *client);
    shipper.prefetch(std::make_shared<const RunSource>(later));
    auto shipped = shipper.prepare(later);
    REQUIRE_MESSAGE(shipped.ok(), shipped.status().message());
    CHECK(*shipped == "runs/00000000000000aa");
    CHECK(fs::is_directory(dir / "agent" / "work" / "runs" / "00000000000000aa"));
    CHECK(*shipper.prepare(later) == "runs/00000000000000aa");
    // A shipment still under way when the shipper goes is ended, not waited for.
    later.run = "00000000000000bb";
    shipper.prefetch(std::make_shared<const RunSource>(later));
  }

  // Data too large to keep: checked where it is, by the same fingerprint.
  source.data.stored = false;
  source.run = "fedcba9876543210";
  CHECK(check_data_on_agent(agent.address(), *client, source,
                            std::chrono::steady_clock::now() + std::chrono::seconds(10))
            .ok());
  put(work / "data" / "a.csv", "9,9\n");
  Status refused = check_data_on_agent(agent.address(), *client, source,
                                       std::chrono::steady_clock::now() + std::chrono::seconds(10));
  CHECK(refused.kind() == ErrorKind::kFailed);
  CHECK(refused.message() == agent.address().text() + ": data " + (work / "data").string() +
                                 " on this machine is not what the experiment recorded: 1 " +
                                 "changed (" + (work / "data" / "a.csv").string() + ")");
  // And the run is refused with it: no run directory.
  auto other = ship(nullptr);
  CHECK_FALSE(other.ok());
  CHECK(other.status().message().find("1 changed") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "agent" / "work" / "runs" / "fedcba9876543210"));
}

}  // namespace
}  // namespace cairn
