#include "engine/coordinator/agent_shipping.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <set>

#include "common/file_util.h"
#include "common/sha256.h"
#include "engine/coordinator/agent_gc.h"
#include "peer/agent_log.h"
#include "peer/chunk_stream.h"
#include "store/code_pack.h"
#include "store/data_fingerprint.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

// Far above what a snapshot (or the data kept with it) holds; a peer cannot announce more.
constexpr uint64_t kMaxPackBytes = 16ull << 30;
constexpr uint64_t kMaxDataBytes = 256ull << 30;
constexpr size_t kMaxListed = 1'000'000;
constexpr auto kChunkTime = std::chrono::seconds(60);
constexpr size_t kTips = 32;

struct Shipping {
  fs::path dir;
  std::string refusal;
};

// The cache, the data store, the hash cache and the run directories change under it.
std::mutex& shipping_mutex() {
  static std::mutex mutex;
  return mutex;
}

Json error_reply(const std::string& why) {
  return Json{{"type", "error"}, {"reason", why.substr(0, 1000)}};
}

bool is_hex(const Json& value, size_t size) {
  if (!value.is_string()) return false;
  const std::string& s = value.get_ref<const std::string&>();
  if (s.size() != size) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string short_id(const std::string& id) {
  return id.substr(0, 12);
}

// Reads and drops the bytes announced after a request that is refused before they come.
void drain(PeerConnection& peer, uint64_t size) {
  (void)receive_chunks(
      peer, size, [](std::string_view) { return Status::Ok(); }, kChunkTime);
}

uint64_t announced(const Json& request, const char* field) {
  const Json v = request.value(field, Json());
  return v.is_number_unsigned()                          ? v.get<uint64_t>()
         : v.is_number_integer() && v.get<int64_t>() > 0 ? static_cast<uint64_t>(v.get<int64_t>())
                                                         : 0;
}

std::string some(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 3; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 3) out += " and " + std::to_string(names.size() - 3) + " more";
  return out;
}

// Makes the parents of `rel` below `root` as real directories: a path through a link, or
// through a file, is refused (a run directory's data never goes where a link leads).
Status make_parents(const fs::path& root, const fs::path& rel) {
  fs::path at = root;
  for (auto it = rel.begin(); it != rel.end() && std::next(it) != rel.end(); ++it) {
    at /= *it;
    struct stat st;
    if (::lstat(at.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        return Status::BadInput(rel.generic_string() + " lies under " +
                                at.lexically_relative(root).generic_string() +
                                ", which is not a directory of the checkout");
      continue;
    }
    if (::mkdir(at.c_str(), 0755) != 0) return Status::Io("cannot create " + at.string());
  }
  return Status::Ok();
}

Json code_have(Shipping& s, const Json& request) {
  if (!is_hex(request.value("tree", Json()), 40)) return error_reply("code_have: no tree id");
  const std::string tree = request["tree"].get<std::string>();
  std::lock_guard lock(shipping_mutex());
  auto cache = CodeCache::open(s.dir);
  if (!cache.ok()) return error_reply(cache.status().message());
  const bool has = (*cache)->has_checkout(tree);
  if (has) mark_agent_entry_used(s.dir / "code" / tree);  // agent_gc.h: age from its last use
  return Json{{"type", "code_have"}, {"tree", tree}, {"has", has}, {"tips", (*cache)->tips(kTips)}};
}

Json code_pack(Shipping& s, const Json& request, PeerConnection& peer, const std::string& name) {
  const uint64_t bytes = announced(request, "bytes");
  auto refused = [&](const std::string& why) {
    agent_log("refused code from " + name + ": " + why);
    return error_reply(why);
  };
  if (bytes > kMaxPackBytes) {
    drain(peer, bytes);  // read and dropped, so the connection stays in step
    return refused("a code pack of " + std::to_string(bytes) + " bytes is over the bound");
  }
  if (!is_hex(request.value("tree", Json()), 40)) {
    drain(peer, bytes);
    return refused("code_pack: no tree id");
  }
  const std::string tree = request["tree"].get<std::string>();
  auto cache = CodeCache::open(s.dir);
  if (!cache.ok()) {
    drain(peer, bytes);
    return refused(cache.status().message());
  }
  uint64_t objects = 0;
  if (bytes > 0) {
    auto receiver = (*cache)->receive_pack();
    if (!receiver.ok()) {
      drain(peer, bytes);
      return refused(receiver.status().message());
    }
    Status got = receive_chunks(
        peer, bytes, [&](std::string_view piece) { return (*receiver)->append(piece); },
        kChunkTime);
    if (!got.ok()) return refused(got.message());
    std::lock_guard lock(shipping_mutex());
    auto indexed = (*receiver)->finish();
    if (!indexed.ok()) return refused(indexed.status().message());
    objects = *indexed;
  }
  std::lock_guard lock(shipping_mutex());
  Status checked_out = (*cache)->checkout(tree);
  if (!checked_out.ok()) return refused(checked_out.message());
  agent_log("received code " + short_id(tree) + " from " + name + ": " + std::to_string(objects) +
            " objects, " + std::to_string(bytes) + " bytes");
  return Json{{"type", "code_ready"}, {"tree", tree}, {"objects", objects}, {"bytes", bytes}};
}

Json data_have(Shipping& s, const Json& request) {
  const Json list = request.value("sha256", Json());
  if (!list.is_array() || list.size() > kMaxListed) return error_reply("data_have: no sha256 list");
  Json missing = Json::array();
  std::lock_guard lock(shipping_mutex());  // against a collection (agent_gc.h)
  for (const Json& h : list) {
    if (!is_hex(h, 64)) return error_reply("data_have: a sha256 is not 64 hex digits");
    std::error_code ec;
    const fs::path file = s.dir / "data" / h.get<std::string>();
    if (!fs::exists(file, ec))
      missing.push_back(h);
    else
      mark_agent_entry_used(file);
  }
  return Json{{"type", "data_have"}, {"missing", missing}};
}

Json data_put(Shipping& s, const Json& request, PeerConnection& peer, const std::string& name) {
  const uint64_t size = announced(request, "size");
  auto refused = [&](const std::string& why) {
    agent_log("refused data from " + name + ": " + why);
    return error_reply(why);
  };
  if (size > kMaxDataBytes) {
    drain(peer, size);
    return refused("a data file of " + std::to_string(size) + " bytes is over the bound");
  }
  if (!is_hex(request.value("sha256", Json()), 64)) {
    drain(peer, size);
    return refused("data_put: no sha256");
  }
  const std::string hash = request["sha256"].get<std::string>();
  const fs::path store = s.dir / "data";
  std::error_code ec;
  fs::create_directories(store, ec);
  static std::atomic<uint64_t> counter{0};
  const fs::path incoming =
      store / (".incoming-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
  UniqueFd fd(::open(incoming.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) {
    drain(peer, size);
    return refused("cannot create " + incoming.string() + ": " + errno_text());
  }
  Sha256 hasher;
  Status got = receive_chunks(
      peer, size,
      [&](std::string_view piece) {
        hasher.update(piece.data(), piece.size());
        return write_all(fd.get(), piece);
      },
      kChunkTime);
  const std::string actual = hasher.hex_digest();
  if (got.ok() && actual != hash)
    got = Status::Corrupt("data " + short_id(hash) + " arrived with another content (sha256 " +
                          short_id(actual) + ")");
  if (got.ok() && ::fsync(fd.get()) != 0) got = Status::Io("fsync: " + errno_text());
  fd.reset();
  if (!got.ok()) {
    fs::remove(incoming, ec);
    return refused(got.message());
  }
  ::chmod(incoming.c_str(), 0444);
  fs::rename(incoming, store / hash, ec);
  if (ec) {
    fs::remove(incoming, ec);
    return refused("cannot store data " + short_id(hash));
  }
  agent_log("received data " + short_id(hash) + " from " + name + ": " + std::to_string(size) +
            " bytes");
  return Json{{"type", "data_stored"}, {"sha256", hash}};
}

Result<std::vector<DataFile>> parse_files(const Json& files, bool absolute) {
  if (!files.is_array() || files.size() > kMaxListed) return Status::BadInput("no file list");
  std::vector<DataFile> out;
  for (const Json& f : files) {
    if (!f.is_object() || !f.value("path", Json()).is_string() ||
        !is_hex(f.value("sha256", Json()), 64) || !f.value("size", Json()).is_number_integer() ||
        f["size"].get<int64_t>() < 0)
      return Status::BadInput("a file is not {path, sha256, size}");
    DataFile file{f["path"].get<std::string>(), f["sha256"].get<std::string>(),
                  f["size"].get<uint64_t>()};
    if (file.path.find('\0') != std::string::npos ||
        (absolute ? file.path.empty() || file.path[0] != '/' : !stays_below(file.path)))
      return Status::BadInput("data path '" + file.path.substr(0, 200) + "' is not " +
                              (absolute ? "absolute" : "below the run directory"));
    out.push_back(std::move(file));
  }
  return out;
}

Status check_locked(const fs::path& dir, const Json& check) {
  const Json entries = check.value("entries", Json());
  if (!entries.is_array() || entries.size() > kMaxListed)
    return Status::BadInput("data check: no entries");
  std::vector<std::string> paths;
  for (const Json& e : entries) {
    if (!e.is_string() || e.get<std::string>().empty() || e.get<std::string>()[0] != '/' ||
        e.get<std::string>().find('\0') != std::string::npos)
      return Status::BadInput("data check: an entry is not an absolute path");
    paths.push_back(e.get<std::string>());
  }
  auto files = parse_files(check.value("files", Json()), true);
  if (!files.ok()) return Status::BadInput("data check: " + files.status().message());
  if (paths.empty()) return Status::Ok();
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!fs::exists(path, ec))
      return Status::Failed("data " + path +
                            " is not on this machine (data too large to ship must be at the "
                            "same path as on the coordinator)");
  }
  std::error_code ec;
  fs::create_directories(dir / "hashes" / "cache", ec);
  auto now = hash_data(StoreLayout(dir / "hashes"), "/", paths);
  if (!now.ok()) return Status::Failed("cannot fingerprint the data: " + now.status().message());
  DataFingerprint recorded;
  recorded.files = std::move(*files);
  const DataChanges changes = compare_data(recorded, *now);
  if (changes.empty()) return Status::Ok();
  std::string why;
  auto add = [&](const std::vector<std::string>& names, const char* kind) {
    if (names.empty()) return;
    why += (why.empty() ? "" : ", ") + std::to_string(names.size()) + " " + kind + " (" +
           some(names) + ")";
  };
  add(changes.changed, "changed");
  add(changes.removed, "missing");
  add(changes.added, "added");
  return Status::Failed("data " + some(paths) + " on this machine is not what the experiment " +
                        "recorded: " + why);
}

Json data_check(Shipping& s, const Json& request, const std::string& name) {
  std::lock_guard lock(shipping_mutex());
  Status st = check_locked(s.dir, request);
  if (st.kind() == ErrorKind::kBadInput) return error_reply(st.message());
  if (!st.ok()) agent_log("data refused for " + name + ": " + st.message());
  Json reply{{"type", "data_check"}, {"ok", st.ok()}};
  if (!st.ok()) reply["reason"] = st.message();
  return reply;
}

Status build_run(const fs::path& dir, const std::string& tree, const std::vector<DataFile>& files,
                 const std::vector<std::pair<std::string, std::string>>& links,
                 const fs::path& dest) {
  auto stage = make_unique_dir(dest.parent_path(), ".stage-");
  if (!stage.ok()) return stage.status();
  ScopedDirRemover cleanup(*stage);
  const fs::path run = *stage / "run";
  Status st = copy_checkout(dir / "code" / tree, run);
  if (!st.ok()) return st;
  for (const DataFile& f : files) {
    const fs::path rel = fs::path(f.path).lexically_normal();
    st = make_parents(run, rel);
    if (!st.ok()) return st;
    const fs::path from = dir / "data" / f.sha256;
    UniqueFd in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
    if (!in) return Status::Failed("data " + short_id(f.sha256) + " (" + f.path + ") was not sent");
    UniqueFd out(
        ::open((run / rel).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!out) return Status::BadInput("cannot write data " + f.path + ": " + errno_text());
    char* buffer = thread_io_buffer();
    for (;;) {
      const ssize_t n = ::read(in.get(), buffer, kIoBufferSize);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::Io("read " + from.string() + ": " + errno_text());
      if (n == 0) break;
      st = write_all(out.get(), std::string_view(buffer, static_cast<size_t>(n)));
      if (!st.ok()) return st;
    }
  }
  for (const auto& [path, target] : links) {
    const fs::path rel = fs::path(path).lexically_normal();
    st = make_parents(run, rel);
    if (!st.ok()) return st;
    if (::symlink(target.c_str(), (run / rel).c_str()) != 0)
      return Status::BadInput("cannot link data " + path + ": " + errno_text());
  }
  std::error_code ec;
  fs::rename(run, dest, ec);
  if (ec) return Status::Io("cannot create " + dest.string() + ": " + ec.message());
  return Status::Ok();
}

Json prepare_run(Shipping& s, const Json& request, const std::string& name) {
  auto refused = [&](const std::string& why) {
    agent_log("refused a run from " + name + ": " + why);
    return error_reply(why);
  };
  if (!is_hex(request.value("run", Json()), 16)) return refused("prepare_run: no run id");
  if (!is_hex(request.value("tree", Json()), 40)) return refused("prepare_run: no tree id");
  const std::string run = request["run"].get<std::string>();
  const std::string tree = request["tree"].get<std::string>();
  auto files = parse_files(request.value("files", Json()), false);
  if (!files.ok()) return refused("prepare_run: " + files.status().message());
  const Json links_json = request.value("links", Json());
  if (!links_json.is_array() || links_json.size() > kMaxListed)
    return refused("prepare_run: no links");
  std::vector<std::pair<std::string, std::string>> links;
  for (const Json& l : links_json) {
    if (!l.is_object() || !l.value("path", Json()).is_string() ||
        !l.value("target", Json()).is_string())
      return refused("prepare_run: a link is not {path, target}");
    const std::string path = l["path"].get<std::string>();
    const std::string target = l["target"].get<std::string>();
    if (!stays_below(path) || path.find('\0') != std::string::npos || target.empty() ||
        target[0] != '/' || target.find('\0') != std::string::npos)
      return refused(
          "prepare_run: a data link is not below the run directory to an absolute "
          "path");
    links.emplace_back(path, target);
  }
  std::lock_guard lock(shipping_mutex());
  // Never a run on other data: what must already be here is checked every time.
  Status checked = check_locked(s.dir, request.value("check", Json::object()));
  if (!checked.ok()) return refused(checked.message());
  const fs::path dest = s.dir / "work" / "runs" / run;
  const std::string cwd = "runs/" + run;
  std::error_code ec;
  if (fs::is_directory(dest, ec)) {
    mark_agent_entry_used(dest);
    agent_log("prepared run " + run + " for " + name + ": already here");
    return Json{{"type", "run_ready"}, {"run", run}, {"cwd", cwd}};
  }
  auto cache = CodeCache::open(s.dir);
  if (!cache.ok()) return refused(cache.status().message());
  if (!(*cache)->has_checkout(tree)) return refused("code " + short_id(tree) + " was not sent");
  Status built = build_run(s.dir, tree, *files, links, dest);
  if (!built.ok()) return refused(built.message());
  agent_log("prepared run " + run + " for " + name + ": code " + short_id(tree) + ", " +
            std::to_string(files->size()) + " data files, " + std::to_string(links.size()) +
            " data links");
  return Json{{"type", "run_ready"}, {"run", run}, {"cwd", cwd}};
}

}  // namespace

std::mutex& agent_shipping_lock() {
  return shipping_mutex();
}

Status check_agent_data(const fs::path& dir, const Json& check) {
  std::lock_guard lock(shipping_mutex());
  return check_locked(dir, check);
}

AgentRequestHandler make_shipping_handler(const fs::path& dir, std::string refusal) {
  auto s = std::make_shared<Shipping>();
  s->dir = dir;
  s->refusal = std::move(refusal);
  return [s](const Json& request, PeerConnection& peer,
             const std::string& name) -> std::optional<Json> {
    const std::string type = request["type"].get<std::string>();
    static const std::set<std::string> kTypes = {"code_have", "code_pack",  "data_have",
                                                 "data_put",  "data_check", "prepare_run"};
    if (!kTypes.count(type)) return std::nullopt;
    if (!s->refusal.empty()) {
      if (type == "code_pack") drain(peer, announced(request, "bytes"));
      if (type == "data_put") drain(peer, announced(request, "size"));
      agent_log("refused a " + type + " request from " + name + ": " + s->refusal);
      return error_reply(s->refusal);
    }
    if (type == "code_have") return code_have(*s, request);
    if (type == "code_pack") return code_pack(*s, request, peer, name);
    if (type == "data_have") return data_have(*s, request);
    if (type == "data_put") return data_put(*s, request, peer, name);
    if (type == "data_check") return data_check(*s, request, name);
    return prepare_run(*s, request, name);
  };
}

}  // namespace cairn
