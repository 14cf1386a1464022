#include "engine/coordinator/run_shipping.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "common/file_util.h"
#include "common/sha256.h"
#include "engine/coordinator/store_links.h"
#include "peer/agent_client.h"
#include "peer/chunk_stream.h"
#include "store/code_pack.h"
#include "store/object_store.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kConnectTime = std::chrono::seconds(10);
// A whole shipment (a first snapshot of up to the snapshot limit, and its data).
constexpr auto kShipTime = std::chrono::minutes(10);

std::string label_of(const std::string& entry) {
  std::string label = fs::path(entry).lexically_normal().generic_string();
  while (label.size() > 1 && label.back() == '/') label.pop_back();
  return label;
}

bool under(const std::string& path, const std::string& label) {
  return path == label ||
         (path.size() > label.size() && path.compare(0, label.size(), label) == 0 &&
          (label.back() == '/' || path[label.size()] == '/'));
}

Json file_json(const DataFile& f) {
  return Json{{"path", f.path}, {"sha256", f.sha256}, {"size", f.size}};
}

// The answer to a request, which must be of `type`; an "error" answer is its reason.
Result<Json> answer(PeerConnection& peer, const std::string& request, const std::string& type,
                    Deadline deadline) {
  auto reply = peer.receive(deadline);
  if (!reply.ok()) return reply.status();
  if (!reply->has_value()) return Status::Failed("the agent closed the connection");
  const Json& m = **reply;
  if (m["type"] == type) return m;
  if (m["type"] == "error")
    return Status::Failed(m.value("reason", std::string("refused")).substr(0, 1000));
  return Status::Failed("answered " + request + " with a " +
                        m["type"].get<std::string>().substr(0, 64));
}

Result<Json> ask(PeerConnection& peer, const Json& request, const std::string& type,
                 Deadline deadline) {
  Status sent = peer.send(request, deadline);
  if (!sent.ok()) return sent;
  return answer(peer, request["type"].get<std::string>(), type, deadline);
}

}  // namespace

Result<std::shared_ptr<const RunSource>> make_run_source(const StoreLayout& store,
                                                         const Json& experiment,
                                                         const ExperimentConfig& config,
                                                         const fs::path& local_run_dir) {
  const Json code = experiment.value("code", Json());
  if (!code.is_object() || !code.value("tree", Json()).is_string())
    return std::shared_ptr<const RunSource>();
  auto source = std::make_shared<RunSource>();
  source->store_root = store.root();
  source->tree = code["tree"].get<std::string>();
  auto data = data_fingerprint_from_json(experiment.value("data", Json::object()));
  if (data.ok())
    source->data = std::move(*data);
  else
    source->data_damaged = data.status();
  source->data_entries = config.data;
  source->workdir = config.workdir;
  const std::string key = local_run_dir.string() + '\0' + source->tree + '\0' + source->data.digest;
  source->run = sha256_hex(key).substr(0, 16);
  return std::shared_ptr<const RunSource>(std::move(source));
}

Json DataPlan::check_json() const {
  Json files = Json::array();
  for (const DataFile& f : check_files) files.push_back(file_json(f));
  return Json{{"entries", check_entries}, {"files", files}};
}

namespace {

// The absolute path of a data entry or file on this machine: below the workdir when relative.
std::string absolute_data(const RunSource& source, const std::string& path) {
  return label_of(
      (fs::path(path).is_absolute() ? fs::path(path) : source.workdir / path).generic_string());
}

// Where an entry's data really is, when the entry is a link cairn made in the store (a
// `cairn reproduce` checkout's, whose workdir lies in the store): the store is on this machine
// only, the data must be on the agent where it is here. "" for any other entry, which the
// agent finds at the same path (a link of the user's included).
std::string leads_to(const RunSource& source, const std::string& absolute) {
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(source.store_root, ec);
  if (ec) return "";
  const fs::path resolved = resolve_parents(absolute, ec);
  if (ec || !lies_inside(resolved, root)) return "";
  const fs::path to = through_store_links(root, resolved);
  return to == resolved ? "" : label_of(to.generic_string());
}

}  // namespace

DataPlan plan_data(const RunSource& source) {
  DataPlan plan;
  std::vector<std::string> checked;  // labels of the entries checked on the agent
  // (absolute path of an entry, where it leads) for the entries that are links in the store.
  std::vector<std::pair<std::string, std::string>> moved;
  for (const std::string& entry : source.data_entries) {
    const std::string label = label_of(entry);
    const bool below = stays_below(label);
    std::string absolute = absolute_data(source, entry);
    if (source.data.stored && below) continue;  // shipped file by file
    if (std::string to = leads_to(source, absolute); !to.empty()) {
      moved.emplace_back(absolute, to);
      absolute = std::move(to);
    }
    checked.push_back(label);
    plan.check_entries.push_back(absolute);
    if (!source.data.stored && below) plan.links.emplace_back(label, absolute);
  }
  for (const DataFile& f : source.data.files) {
    bool check = false;
    for (const std::string& label : checked) check = check || under(f.path, label);
    if (!check && source.data.stored && stays_below(f.path)) {
      plan.ship.push_back(f);
    } else {
      DataFile abs = f;
      abs.path = absolute_data(source, f.path);
      for (const auto& [from, to] : moved)
        if (under(abs.path, from)) {
          abs.path = to + abs.path.substr(from.size());
          break;
        }
      plan.check_files.push_back(std::move(abs));
    }
  }
  return plan;
}

Result<std::string> ship_run(PeerConnection& peer, const RunSource& source, Deadline deadline,
                             ShipStats* stats) {
  ShipStats local;
  ShipStats& s = stats ? *stats : local;
  if (!source.data_damaged.ok())
    return Status::Corrupt(
        "the experiment's data record is damaged, so what its trials read "
        "cannot be checked on a peer: " +
        source.data_damaged.message());
  // Code: what the agent lacks of the tree.
  auto have = ask(peer, Json{{"type", "code_have"}, {"tree", source.tree}}, "code_have", deadline);
  if (!have.ok()) return have.status();
  std::vector<std::string> tips;
  const Json tips_json = have->value("tips", Json::array());
  if (tips_json.is_array())
    for (const Json& t : tips_json)
      if (t.is_string()) tips.push_back(t.get<std::string>());
  auto send_pack = [&](const std::vector<std::string>& haves) -> Result<Json> {
    CodePack pack;
    if (!have->value("has", false)) {
      auto built = build_code_pack(source.store_root, source.tree, haves);
      if (!built.ok()) return built.status();
      pack = std::move(*built);
    }
    Status sent = peer.send(Json{{"type", "code_pack"},
                                 {"tree", source.tree},
                                 {"bytes", pack.bytes.size()},
                                 {"objects", pack.objects}},
                            deadline);
    if (sent.ok()) sent = send_chunks(peer, pack.bytes, deadline);
    if (!sent.ok()) return sent;
    s.objects += pack.objects;
    s.pack_bytes += pack.bytes.size();
    return answer(peer, "code_pack", "code_ready", deadline);
  };
  auto ready = send_pack(tips);
  // Refused although the agent said it had the tips (its cache lost objects its checkouts
  // still show: "packfile is missing 1 objects"): once more, with everything; whatever else
  // was wrong is refused again.
  if (!ready.ok() && !tips.empty() && !have->value("has", false)) ready = send_pack({});
  if (!ready.ok()) return ready.status();

  // Data: the stored files the agent lacks, by content.
  const DataPlan plan = plan_data(source);
  std::set<std::string> hashes;
  for (const DataFile& f : plan.ship) hashes.insert(f.sha256);
  if (!hashes.empty()) {
    auto missing =
        ask(peer, Json{{"type", "data_have"}, {"sha256", hashes}}, "data_have", deadline);
    if (!missing.ok()) return missing.status();
    const Json list = missing->value("missing", Json::array());
    const ObjectStore objects(source.store_root / "objects");
    for (const Json& h : list) {
      if (!h.is_string() || !hashes.count(h.get<std::string>())) continue;
      const std::string hash = h.get<std::string>();
      UniqueFd fd(::open(objects.path_of(hash).c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd)
        return Status::Io("cannot read stored data " + hash.substr(0, 12) + ": " + errno_text());
      struct stat st;
      if (::fstat(fd.get(), &st) != 0) return Status::Io("stat: " + errno_text());
      const uint64_t size = static_cast<uint64_t>(st.st_size);
      Status sent =
          peer.send(Json{{"type", "data_put"}, {"sha256", hash}, {"size", size}}, deadline);
      if (sent.ok()) sent = send_file_chunks(peer, fd.get(), size, deadline);
      if (!sent.ok()) return sent;
      auto stored = answer(peer, "data_put", "data_stored", deadline);
      if (!stored.ok()) return stored.status();
      ++s.data_files;
      s.data_bytes += size;
    }
  }

  // The run directory, once the agent has checked the data it must already have.
  Json files = Json::array(), links = Json::array();
  for (const DataFile& f : plan.ship) files.push_back(file_json(f));
  for (const auto& [path, target] : plan.links)
    links.push_back(Json{{"path", path}, {"target", target}});
  auto run = ask(peer,
                 Json{{"type", "prepare_run"},
                      {"run", source.run},
                      {"tree", source.tree},
                      {"files", files},
                      {"links", links},
                      {"check", plan.check_json()}},
                 "run_ready", deadline);
  if (!run.ok()) return run.status();
  const Json cwd = run->value("cwd", Json());
  if (!cwd.is_string()) return Status::Failed("the agent named no run directory");
  return cwd.get<std::string>();
}

Status check_data_on_agent(const PeerAddress& address, std::shared_ptr<TlsContext> client,
                           const RunSource& source, Deadline deadline) {
  if (!source.data_damaged.ok()) return source.data_damaged;
  PeerFailure failure;
  auto peer = connect_to_agent(address, std::move(client), deadline, &failure);
  if (!peer.ok()) return Status::Io(address.text() + ": " + peer.status().message());
  const DataPlan plan = plan_data(source);
  Json request = plan.check_json();
  request["type"] = "data_check";
  auto checked = ask(**peer, request, "data_check", deadline);
  (*peer)->close(Clock::now() + std::chrono::seconds(1));
  if (!checked.ok()) return Status::Io(address.text() + ": " + checked.status().message());
  if (!checked->value("ok", false))
    return Status::Failed(address.text() + ": " +
                          checked->value("reason", std::string("data refused")).substr(0, 1000));
  return Status::Ok();
}

RunShipper::RunShipper(PeerAddress address, std::shared_ptr<TlsContext> client)
    : address_(std::move(address)), client_(std::move(client)) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
    stop_read_.reset(fds[0]);
    stop_write_.reset(fds[1]);
  }
}

RunShipper::~RunShipper() {
  if (stop_write_) {
    const char byte = 1;
    (void)!::write(stop_write_.get(), &byte, 1);
  }
  for (auto& [run, job] : under_way_)
    if (job.valid()) job.wait();
}

Result<std::string> RunShipper::ship(const RunSource& source) {
  PeerFailure failure;
  auto peer = connect_to_agent(address_, client_, Clock::now() + kConnectTime, &failure);
  // Failed, whatever went wrong: a peer's trouble, never the store's (kIo would stop the
  // experiment as a failing disk does).
  if (!peer.ok()) return Status::Failed(peer.status().message());
  (*peer)->set_stop_fd(stop_read_.get());
  auto cwd = ship_run(**peer, source, Clock::now() + kShipTime);
  (*peer)->close(Clock::now() + std::chrono::seconds(1));
  if (!cwd.ok()) return Status::Failed(address_.text() + ": " + cwd.status().message());
  return cwd;
}

void RunShipper::prefetch(std::shared_ptr<const RunSource> source) {
  if (!source || cwd_.count(source->run) || under_way_.count(source->run)) return;
  const std::string run = source->run;
  under_way_[run] =
      std::async(std::launch::async, [this, source = std::move(source)] { return ship(*source); });
}

Result<std::string> RunShipper::prepare(const RunSource& source) {
  auto known = cwd_.find(source.run);
  if (known != cwd_.end()) return known->second;
  Result<std::string> cwd = Status::Failed("not shipped");
  auto job = under_way_.find(source.run);
  if (job != under_way_.end()) {
    cwd = job->second.get();
    under_way_.erase(job);
  } else {
    cwd = ship(source);
  }
  if (cwd.ok()) cwd_[source.run] = *cwd;
  return cwd;
}

}  // namespace cairn
