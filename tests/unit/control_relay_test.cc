// The control channel relayed through an agent (peer/control_relay.h): the frames and their
// checks, a real rank on an in-process agent talking to a control socket of this process
// through the remote launcher (lines both ways, lines far over the window, closes in both
// directions, the paths the agent fills in), and a coordinator-side relay fed frames that
// name nothing or are malformed (refused with a log line; the relay goes on).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "common/build_info.h"
#include "common/file_util.h"
#include "engine/coordinator/agent_rank_host.h"
#include "engine/coordinator/control_channel.h"
#include "engine/coordinator/orphan_messages.h"
#include "engine/coordinator/remote_launcher.h"
#include "engine/coordinator/remote_paths.h"
#include "engine/coordinator/remote_session.h"
#include "engine/coordinator/trial_process.h"
#include "peer/agent_client.h"
#include "peer/agent_server.h"
#include "peer/control_frames.h"
#include "peer/control_relay.h"
#include "peer/peer_address.h"
#include "peer/route_probe.h"
#include "tests/unit/test_agent.h"
#include "tests/unit/test_dir.h"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using testing::TestDir;
using Clock = std::chrono::steady_clock;

const ClusterKey kKey{std::string(32, 'k'), cluster_key_id(std::string(32, 'k'))};

// An agent with 4 slots that runs ranks under `dir`.
class RelayTestAgent : public testing::TestAgent {
 public:
  explicit RelayTestAgent(const fs::path& dir)
      : TestAgent(kKey, info(dir), [dir] { return make_agent_rank_host(dir); }) {}

 private:
  static AgentInfo info(const fs::path& dir) {
    AgentInfo info;
    info.slots_total = 4;
    info.dir = dir;
    return info;
  }
};

// Reads from `c` until `line` lines arrived or the deadline.
std::vector<std::string> read_lines(ControlConnection& c, size_t count) {
  std::vector<std::string> lines;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (lines.size() < count && Clock::now() < deadline) {
    pollfd p{c.fd(), POLLIN, 0};
    ::poll(&p, 1, 50);
    if (!c.read_available()) break;
    for (std::string& l : c.take_lines()) lines.push_back(std::move(l));
  }
  return lines;
}

UniqueFd accept_one(ControlListener& listener) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    pollfd p{listener.fd(), POLLIN, 0};
    ::poll(&p, 1, 50);
    auto fds = listener.accept_all();
    if (!fds.empty()) return std::move(fds[0]);
  }
  return UniqueFd();
}

bool flush_all(ControlConnection& c) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (c.wants_write() && Clock::now() < deadline) {
    if (!c.flush()) return false;
    pollfd p{c.fd(), POLLOUT, 0};
    ::poll(&p, 1, 50);
  }
  return !c.wants_write();
}

TEST_CASE("control frames: built frames parse back; malformed ones are refused") {
  for (std::string bytes : {std::string(), std::string("a"), std::string("ab"), std::string("abc"),
                            std::string("\0\xff\n", 3)}) {
    auto back = base64_decode(base64_encode(bytes));
    REQUIRE(back.ok());
    CHECK(*back == bytes);
  }
  CHECK(base64_encode("hello\n") == "aGVsbG8K");
  CHECK_FALSE(base64_decode("aGVsbG8").ok());   // not 4k
  CHECK_FALSE(base64_decode("aGV*bG8K").ok());  // not the alphabet
  CHECK_FALSE(base64_decode("aR==").ok());      // not canonical
  CHECK_FALSE(base64_decode("a=GV").ok());      // padding inside

  auto data = parse_control_frame(control_data_message(3, "line\n"));
  REQUIRE(data.ok());
  CHECK(data->kind == ControlFrame::Kind::kData);
  CHECK(data->stream == 3);
  CHECK(data->data == "line\n");
  auto open = parse_control_frame(control_open_message(1, 7));
  REQUIRE(open.ok());
  CHECK(open->rank == 7);
  CHECK(parse_control_frame(control_ack_message(2, 10))->bytes == 10);
  CHECK(parse_control_frame(control_close_message(2))->kind == ControlFrame::Kind::kClose);

  for (const Json& bad : {Json{{"type", "control_data"}, {"stream", 0}, {"data", "YQ=="}},
                          Json{{"type", "control_data"}, {"stream", -4}, {"data", "YQ=="}},
                          Json{{"type", "control_data"}, {"stream", "1"}, {"data", "YQ=="}},
                          Json{{"type", "control_data"}, {"stream", 1}},
                          Json{{"type", "control_data"}, {"stream", 1}, {"data", ""}},
                          Json{{"type", "control_data"}, {"stream", 1}, {"data", "!!!!"}},
                          Json{{"type", "control_data"},
                               {"stream", 1},
                               {"data", base64_encode(std::string(kControlChunkBytes + 1, 'x'))}},
                          Json{{"type", "control_ack"}, {"stream", 1}, {"bytes", 0}},
                          Json{{"type", "control_ack"},
                               {"stream", 1},
                               {"bytes", static_cast<int64_t>(kControlWindowBytes) + 1}},
                          Json{{"type", "control_open"}, {"stream", 1}},
                          Json{{"type", "control_open"}, {"stream", 1}, {"rank", -1}},
                          Json{{"type", "control_nope"}, {"stream", 1}}}) {
    auto parsed = parse_control_frame(bad);
    CHECK_FALSE(parsed.ok());
    if (!parsed.ok()) CHECK(parsed.status().message().find("bad control frame: ") == 0);
  }
}

TEST_CASE("remote paths: path variables travel as kinds and the agent fills its own") {
  TestDir dir;
  std::map<std::string, std::string> env{{"CAIRN_CONTROL", "unix:/coord/control.sock"},
                                         {"CAIRN_WORKDIR", "/coord/project"},
                                         {"CAIRN_ORPHAN_DIR", "/coord/store/orphans"},
                                         {"CAIRN_KERNEL_CACHE", "/coord/store/kernels"},
                                         {"PYTHONPATH", "/coord/store/sdk/python:/user/lib"},
                                         {"CAIRN_TRIAL_ID", "3.4"},
                                         {"HOME", "/home/u"}};
  RemoteLaunch launch;
  launch.rank = 2;
  launch.argv = {"/bin/true"};
  launch.cwd = "trials/3.4/rank-0";
  launch.env = env;
  mark_remote_paths(launch.env, launch.paths);
  CHECK(launch.paths == std::map<std::string, std::string>{{"CAIRN_CONTROL", "control"},
                                                           {"CAIRN_WORKDIR", "workdir"},
                                                           {"CAIRN_ORPHAN_DIR", "orphans"},
                                                           {"CAIRN_KERNEL_CACHE", "kernel_cache"},
                                                           {"PYTHONPATH", "python_sdk"}});
  for (const auto& [name, value] : launch.env) CHECK(value.find("/coord") == std::string::npos);
  CHECK(launch.env["PYTHONPATH"] == "/user/lib");

  // The launch message carries the kinds and parses back; an unknown kind is refused.
  auto parsed = parse_launch(launch_message(launch));
  REQUIRE(parsed.ok());
  CHECK(parsed->paths == launch.paths);
  Json odd = launch_message(launch);
  odd["paths"]["HOME"] = "somewhere";
  CHECK(parse_launch(odd).status().message().find("unknown kind 'somewhere'") != std::string::npos);

  // Whatever the coordinator puts in the values, the agent's own paths win.
  parsed->env["CAIRN_WORKDIR"] = "/etc";
  parsed->env["CAIRN_TRIAL_ID"] = "../../x";
  parsed->owner = "gpu1:/store#3";  // the agent's session's (never from the launch)
  REQUIRE(resolve_agent_paths(dir.path(), *parsed).ok());
  CHECK(parsed->env["CAIRN_WORKDIR"] == (dir / "work" / "trials/3.4/rank-0").string());
  const fs::path orphans =
      dir / "orphans" / orphan_owner_dir("gpu1:/store#3") / "unnamed" / "attempt-0";
  CHECK(parsed->env["CAIRN_ORPHAN_DIR"] == orphans.string());
  // Made only when the rank is asked for an orphan (agent_orphans.h), not per launch.
  CHECK_FALSE(fs::exists(orphans.parent_path()));
  REQUIRE(make_orphan_dir(orphans).ok());
  CHECK(fs::is_directory(orphans));
  CHECK(parsed->env["CAIRN_KERNEL_CACHE"] == (dir / "cache" / "kernels").string());
  const fs::path sdk = dir / "sdk" / CAIRN_VERSION / "python";
  CHECK(parsed->env["PYTHONPATH"] == sdk.string() + ":/user/lib");
  CHECK(fs::exists(sdk / "cairn.py"));
  CHECK(fs::exists(sdk / "determined" / "__init__.py"));
  CHECK(parsed->env["HOME"] == "/home/u");
}

// A Python rank that speaks a line protocol over CAIRN_CONTROL: says hello, echoes a long
// line back as its length, sends a long line of its own, then prints what it was given.
constexpr const char* kEchoRank = R"PY(
import os, socket, sys
addr = os.environ["CAIRN_CONTROL"]
assert addr.startswith("unix:"), addr
s = socket.socket(socket.AF_UNIX); s.connect(addr[5:])
f = s.makefile("rwb")
f.write(b"hello\n"); f.flush()
line = f.readline()
f.write(b"got %d\n" % len(line)); f.write(b"y" * 3000000 + b"\n"); f.flush()
last = f.readline()
print("last:", last.decode().strip())
for name in ("CAIRN_CONTROL", "CAIRN_WORKDIR", "CAIRN_ORPHAN_DIR", "PYTHONPATH"):
    print(name + "=" + os.environ.get(name, ""))
import cairn, determined
print("sdk:", os.path.dirname(cairn.__file__))
s2 = socket.socket(socket.AF_UNIX); s2.connect(addr[5:])
print("eof:", s2.recv(10) == b"")
)PY";

TEST_CASE("control relay: a rank on an agent talks to the coordinator's control socket") {
  ::signal(SIGPIPE, SIG_IGN);
  struct sigaction old {};
  ::sigaction(SIGCHLD, nullptr, &old);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGCHLD, &dfl, nullptr);
  TestDir dir;
  const fs::path agent_dir = dir / "agent";
  RelayTestAgent agent(agent_dir);
  auto client = TlsContext::make(TlsContext::Side::kClient, kKey);
  REQUIRE(client.ok());
  auto launcher = RemoteLauncher::connect(agent.address(), *client, std::chrono::seconds(10),
                                          /*reap_local_children=*/false);
  REQUIRE(launcher.ok());
  auto listener = ControlListener::listen(dir / "coord", "control.sock");
  REQUIRE(listener.ok());
  REQUIRE(write_file_atomic(dir / "rank.py", kEchoRank).ok());

  RankLaunch launch;
  launch.argv = {"/usr/bin/python3", (dir / "rank.py").string()};
  launch.env = {{"PATH", "/usr/bin:/bin"},
                {"CAIRN_TRIAL_ID", "1.1"},
                {"RANK", "0"},
                {"CAIRN_CONTROL", listener->address()},
                {"CAIRN_WORKDIR", (dir / "coord").string()},
                {"CAIRN_ORPHAN_DIR", (dir / "coord" / "orphans").string()},
                {"PYTHONPATH", (dir / "coord" / "sdk").string()}};
  launch.cwd = dir.path();
  launch.output = dir / "1.1.out";
  auto started = (*launcher)->start(launch);
  REQUIRE(started.ok());

  UniqueFd fd = accept_one(*listener);
  REQUIRE(fd);
  ControlConnection c(std::move(fd));
  auto lines = read_lines(c, 1);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "hello");
  // 2 MB one way and 3 MB the other: many times the window, so credit must flow.
  c.send(Json(std::string(2000000, 'x')));
  REQUIRE(flush_all(c));
  lines = read_lines(c, 2);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "got 2000003");  // the JSON string's quotes and its newline
  CHECK(lines[1] == std::string(3000000, 'y'));
  c.send(Json("bye"));
  REQUIRE(flush_all(c));
  // The rank's second connection: this side closes it at once, and the rank sees the end.
  UniqueFd second = accept_one(*listener);
  REQUIRE(second);
  second.reset();

  std::vector<RankExit> exits;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (exits.empty() && Clock::now() < deadline) {
    exits = (*launcher)->take_exits();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(exits.size() == 1);
  const std::string output = *read_file(launch.output);
  INFO(output);
  CHECK(exits[0].info.code == 0);
  CHECK(output.find("last: \"bye\"") != std::string::npos);
  CHECK(output.find("CAIRN_CONTROL=unix:" + (agent_dir / "control").string()) != std::string::npos);
  CHECK(output.find("CAIRN_WORKDIR=" + (agent_dir / "work" / "trials/1.1/rank-0").string()) !=
        std::string::npos);
  CHECK(output.find("CAIRN_ORPHAN_DIR=" +
                    (agent_dir / "orphans" / orphan_owner_dir(remote_session_options().owner) /
                     "1.1" / "attempt-0")
                        .string()) != std::string::npos);
  CHECK(output.find("sdk: " + (agent_dir / "sdk" / CAIRN_VERSION / "python").string()) !=
        std::string::npos);
  CHECK(output.find("eof: True") != std::string::npos);
  // The rank's end closes its stream: the coordinator's side sees the end of its socket.
  const auto closed_by = Clock::now() + std::chrono::seconds(10);
  bool closed = false;
  while (!closed && Clock::now() < closed_by) {
    pollfd p{c.fd(), POLLIN, 0};
    ::poll(&p, 1, 50);
    closed = !c.read_available();
  }
  CHECK(closed);
  // The connection's socket (every rank's) stays while the connection lasts, and goes with
  // it.
  CHECK_FALSE(fs::is_empty(agent_dir / "control"));
  launcher->reset();
  const auto gone_by = Clock::now() + std::chrono::seconds(10);
  while (!fs::is_empty(agent_dir / "control") && Clock::now() < gone_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(fs::is_empty(agent_dir / "control"));
  ::sigaction(SIGCHLD, &old, nullptr);
}

// Two ends of an authenticated connection in this process.
struct PeerPair {
  std::unique_ptr<PeerConnection> agent, coordinator;
  PeerPair() {
    auto listener = listen_on(PeerAddress{"127.0.0.1", 0});
    REQUIRE(listener.ok());
    const uint16_t port = local_port(listener->get());
    auto server = TlsContext::make(TlsContext::Side::kServer, kKey);
    auto client = TlsContext::make(TlsContext::Side::kClient, kKey);
    std::thread connecting([&] {
      auto c = PeerConnection::connect(PeerAddress{"127.0.0.1", port}, *client,
                                       Clock::now() + std::chrono::seconds(10));
      REQUIRE(c.ok());
      coordinator = std::move(*c);
    });
    UniqueFd fd;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!fd && Clock::now() < deadline) {
      pollfd p{listener->get(), POLLIN, 0};
      ::poll(&p, 1, 50);
      fd.reset(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    }
    REQUIRE(fd);
    auto a =
        PeerConnection::accept(std::move(fd), *server, Clock::now() + std::chrono::seconds(10));
    connecting.join();
    REQUIRE(a.ok());
    agent = std::move(*a);
  }
};

TEST_CASE("control relay: frames that name nothing or are malformed are refused, one line each") {
  ::signal(SIGPIPE, SIG_IGN);
  TestDir dir;
  auto listener = ControlListener::listen(dir.path(), "control.sock");
  REQUIRE(listener.ok());
  PeerPair pair;
  std::mutex mutex;
  std::vector<std::string> logged;
  auto relay = ControlRelay::for_coordinator(
      [&](int64_t rank) { return rank == 5 ? listener->address() : std::string(); },
      [&](const std::string& line) {
        std::lock_guard lock(mutex);
        logged.push_back(line);
      });
  auto send = [&](const Json& m) {
    REQUIRE(pair.agent->send(m, Clock::now() + std::chrono::seconds(5)).ok());
  };
  send(control_data_message(9, "nobody\n"));                         // never opened
  send(Json{{"type", "control_data"}, {"stream", 1}, {"data", 7}});  // malformed
  send(Json{{"type", "control_ack"}, {"stream", "x"}});              // malformed
  send(control_open_message(2, 4));                                  // not a running rank
  send(control_open_message(3, 5));                                  // a good one
  send(control_data_message(3, "hello\n"));
  send(control_open_message(3, 5));  // the same id again
  send(Json{{"type", "status"}});    // not a control frame
  auto message = relay->receive(*pair.coordinator, Clock::now() + std::chrono::seconds(10));
  REQUIRE(message.ok());
  REQUIRE(message->has_value());
  CHECK((**message)["type"] == "status");
  CHECK(relay->open_streams() == 1);
  {
    std::lock_guard lock(mutex);
    REQUIRE(logged.size() == 5);
    CHECK(logged[0] == "refused a control_data: stream 9 was never opened");
    CHECK(logged[1].find("refused a frame: bad control frame: no string \"data\"") == 0);
    CHECK(logged[2].find("refused a frame: bad control frame:") == 0);
    CHECK(logged[3].find("rank 4 is not running on this connection") != std::string::npos);
    CHECK(logged[4].find("stream 3 was opened before") != std::string::npos);
  }
  // The refused open was answered with a close; the good stream reached the socket.
  UniqueFd fd = accept_one(*listener);
  REQUIRE(fd);
  ControlConnection c(std::move(fd));
  auto lines = read_lines(c, 1);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "hello");
  // The refused open's close comes back; the 6 bytes written are not acknowledged yet (acks
  // go per quarter window, so a small message costs no frame back).
  auto m = pair.agent->receive(Clock::now() + std::chrono::seconds(10));
  REQUIRE(m.ok());
  REQUIRE(m->has_value());
  CHECK(**m == control_close_message(2));
  // A quarter window more (one chunk; the socket's buffer takes it unread): one ack for all
  // of it, the 6 bytes included.
  static_assert(kControlChunkBytes == kControlWindowBytes / 4);
  send(control_data_message(3, std::string(kControlChunkBytes, 'q')));
  std::optional<Json> ack;
  const auto ack_by = Clock::now() + std::chrono::seconds(10);
  while (!ack && Clock::now() < ack_by) {
    (void)relay->receive(*pair.coordinator, Clock::now() + std::chrono::milliseconds(20));
    auto got = pair.agent->receive(Clock::now() + std::chrono::milliseconds(20));
    if (got.ok() && got->has_value()) ack = **got;
  }
  REQUIRE(ack.has_value());
  CHECK(*ack == control_ack_message(3, static_cast<int64_t>(kControlChunkBytes) + 6));
  // Data beyond the window (no acks awaited, nobody reading the socket here, far more than
  // the kernel buffers) closes the stream, with one line; the other end is told.
  for (int i = 0; i < 40; ++i) send(control_data_message(3, std::string(kControlChunkBytes, 'a')));
  send(Json{{"type", "status"}});
  message = relay->receive(*pair.coordinator, Clock::now() + std::chrono::seconds(10));
  REQUIRE(message.ok());
  REQUIRE(message->has_value());
  CHECK((**message)["type"] == "status");
  CHECK(relay->open_streams() == 0);
  {
    std::lock_guard lock(mutex);
    REQUIRE(logged.size() == 6);
    CHECK(logged[5] ==
          "refused control_data for stream 3: over the window of 262144 bytes; stream closed");
  }
  bool closed = false;
  for (int i = 0; i < 50 && !closed; ++i) {
    auto m = pair.agent->receive(Clock::now() + std::chrono::seconds(10));
    REQUIRE(m.ok());
    REQUIRE(m->has_value());
    closed = **m == control_close_message(3);
  }
  CHECK(closed);
}

// A rank that connects to its control channel, then starts a child in a session of its own
// (out of its process group) that connects too; both wait until their channel closes.
constexpr const char* kRankWithChild = R"PY(
import os, socket, subprocess, sys
addr = os.environ["CAIRN_CONTROL"][5:]
s = socket.socket(socket.AF_UNIX); s.connect(addr); s.sendall(b"rank\n")
child = subprocess.Popen([sys.executable, "-c", """
import os, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b"child in its own group: %d\\n" % (os.getpgid(0) == os.getpid()))
s.recv(1)
""", addr], start_new_session=True)
s.recv(1)
child.wait()
)PY";

// Connects to the Unix socket `address` ("unix:/path") from this process.
UniqueFd connect_unix(const std::string& address) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, address.c_str() + 5, sizeof(addr.sun_path) - 1);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return UniqueFd();
  return fd;
}

TEST_CASE("control relay: a connection is the rank's its process belongs to; others are refused") {
  ::signal(SIGPIPE, SIG_IGN);
  TestDir dir;
  PeerPair pair;
  std::vector<std::string> logged;
  auto relay =
      ControlRelay::for_agent(dir / "control", [&](const std::string& l) { logged.push_back(l); });
  RemoteLaunch launch;
  launch.rank = 7;
  launch.paths = {{"CAIRN_CONTROL", "control"}};
  REQUIRE(relay->give_control(launch).ok());
  const std::string address = launch.env["CAIRN_CONTROL"];
  REQUIRE(write_file_atomic(dir / "rank.py", kRankWithChild).ok());
  // Its own process group, as an agent's rank has (trial_process.h).
  auto rank =
      TrialProcess::spawn(ProcessSpec{{"/usr/bin/python3", (dir / "rank.py").string()},
                                      dir.path(),
                                      {{"PATH", "/usr/bin:/bin"}, {"CAIRN_CONTROL", address}},
                                      dir / "rank.out"});
  REQUIRE(rank.ok());
  relay->rank_started(7, rank->pid());
  struct Reap {
    pid_t pid;
    ~Reap() {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } reap{rank->pid()};

  // This process is no rank's (the rank's parent is not its descendant).
  UniqueFd outsider = connect_unix(address);
  REQUIRE(outsider);
  // Another user, where this process may become one (CI runs as root): refused too, although
  // only this user reaches the socket's directory (opened here for the check).
  pid_t other_user = -1;
  if (::geteuid() == 0) {
    fs::permissions(address.substr(5), fs::perms::all);
    fs::permissions(fs::path(address.substr(5)).parent_path(), fs::perms::all);
    other_user = ::fork();
    if (other_user == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
      UniqueFd fd = connect_unix(address);
      ::_exit(fd ? 0 : 4);
    }
    REQUIRE(other_user > 0);
  }

  // The rank's two connections become its streams; what they send arrives on the other side.
  std::map<int64_t, std::string> data;  // by stream
  std::set<int64_t> opened;
  const size_t refusals = other_user > 0 ? 2 : 1;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while ((data.size() < 2 || logged.size() < refusals) && Clock::now() < deadline) {
    (void)relay->receive(*pair.agent, Clock::now() + std::chrono::milliseconds(20));
    for (;;) {
      auto m = pair.coordinator->receive(Clock::now());
      if (!m.ok() || !m->has_value()) break;
      auto frame = parse_control_frame(**m);
      REQUIRE(frame.ok());
      if (frame->kind == ControlFrame::Kind::kOpen) {
        CHECK(frame->rank == 7);
        opened.insert(frame->stream);
      } else if (frame->kind == ControlFrame::Kind::kData) {
        data[frame->stream] += frame->data;
      }
    }
  }
  CHECK(opened.size() == 2);
  std::multiset<std::string> lines;
  for (const auto& [stream, bytes] : data) lines.insert(bytes);
  CHECK(lines == std::multiset<std::string>{"rank\n", "child in its own group: 1\n"});
  REQUIRE(logged.size() == refusals);
  CHECK(logged[0] == "refused a control connection from process " + std::to_string(::getpid()) +
                         ": not a rank running on this connection, nor started by one");
  if (other_user > 0) {
    int status = 0;
    REQUIRE(::waitpid(other_user, &status, 0) == other_user);
    CHECK(WEXITSTATUS(status) == 0);  // it connected, and was refused
    CHECK(logged[1] == "refused a control connection from process " + std::to_string(other_user) +
                           ": another user's (uid 65534)");
  }
  // The outsider's connection was closed at once.
  char byte = 0;
  pollfd p{outsider.get(), POLLIN, 0};
  REQUIRE(::poll(&p, 1, 10000) == 1);
  CHECK(::recv(outsider.get(), &byte, 1, 0) == 0);

  // Closing the relay's streams ends the rank and its child (their channel closed).
  relay->close_all();
  int status = 0;
  const auto ended_by = Clock::now() + std::chrono::seconds(30);
  pid_t got = 0;
  while ((got = ::waitpid(reap.pid, &status, WNOHANG)) == 0 && Clock::now() < ended_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(got == reap.pid);
  CHECK_FALSE(fs::exists(address.substr(5)));
}

TEST_CASE("control relay: a rank's operations are counted across its connections") {
  // What session_adopted says of a kept rank (peer/session_adoption.h AnsweredOperations):
  // every next_operation answer relayed to the rank, on whichever of its connections.
  ::signal(SIGPIPE, SIG_IGN);
  TestDir dir;
  PeerPair pair;
  auto relay = ControlRelay::for_agent(dir / "control", [](const std::string&) {});
  RemoteLaunch launch;
  launch.rank = 7;
  launch.paths = {{"CAIRN_CONTROL", "control"}};
  REQUIRE(relay->give_control(launch).ok());
  const std::string address = launch.env["CAIRN_CONTROL"];
  relay->rank_started(7, ::getpid());   // this process speaks as the rank
  std::map<int64_t, std::string> data;  // what reached the coordinator's side, by stream
  auto pump_until = [&](const std::function<bool()>& done) {
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (!done() && Clock::now() < deadline) {
      (void)relay->receive(*pair.agent, Clock::now() + std::chrono::milliseconds(20));
      for (;;) {
        auto m = pair.coordinator->receive(Clock::now());
        if (!m.ok() || !m->has_value()) break;
        auto frame = parse_control_frame(**m);
        REQUIRE(frame.ok());
        if (frame->kind == ControlFrame::Kind::kOpen) data[frame->stream];
        if (frame->kind == ControlFrame::Kind::kData) data[frame->stream] += frame->data;
      }
    }
    return done();
  };
  // One connection: asks, gets `answer` on its stream, returns what it read.
  auto ask = [&](UniqueFd& fd, const std::string& answer) {
    const std::string request = "{\"type\":\"hello\"}\n{\"type\":\"next_operation\",\"seq\":1}\n";
    REQUIRE(::send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(request.size()));
    int64_t stream = -1;
    REQUIRE(pump_until([&] {
      for (const auto& [id, bytes] : data)
        if (bytes == request) stream = id;
      return stream >= 0;
    }));
    data.erase(stream);
    const std::string line =
        "{\"type\":\"welcome\"}\n{\"type\":\"operation\",\"re\":1," + answer + "}\n";
    REQUIRE(pair.coordinator
                ->send(control_data_message(stream, line), Clock::now() + std::chrono::seconds(5))
                .ok());
    std::string got;
    REQUIRE(pump_until([&] {
      char buffer[4096];
      const ssize_t n = ::recv(fd.get(), buffer, sizeof buffer, MSG_DONTWAIT);
      if (n > 0) got.append(buffer, static_cast<size_t>(n));
      return got.size() >= line.size();
    }));
    CHECK(got == line);
  };
  UniqueFd first = connect_unix(address);
  REQUIRE(first);
  ask(first, "\"length\":5");
  CHECK(relay->operations_of(7).to_json() == Json::parse(R"({"count":1,"latest":[{"length":5}]})"));
  first.reset();  // the rank closes its connection and connects again: counted on
  REQUIRE(pump_until([&] { return relay->open_streams() == 0; }));
  CHECK(relay->operations_of(7).count == 1);
  UniqueFd second = connect_unix(address);
  REQUIRE(second);
  ask(second, "\"done\":true");
  CHECK(relay->operations_of(7).to_json() ==
        Json::parse(R"({"count":2,"latest":[{"length":5},{"done":true}]})"));
  CHECK(relay->operations_of(8).count == 0);
  // Its end forgets them with its streams.
  relay->rank_ended(7);
  second.reset();
  REQUIRE(pump_until([&] { return relay->open_streams() == 0; }));
  CHECK(relay->operations_of(7).count == 0);
}

TEST_CASE("control relay: a socket path too long for a Unix address falls back to /tmp") {
  TestDir dir;
  const fs::path deep = dir / std::string(120, 'd');
  std::string dropped;
  auto relay = ControlRelay::for_agent(deep, [&](const std::string& l) { dropped = l; });
  auto address = relay->listen();
  REQUIRE(address.ok());
  CHECK(address->rfind("unix:/tmp/cairn-", 0) == 0);
  CHECK(*relay->listen() == *address);  // one listener per connection, every rank's
  RemoteLaunch launch;
  launch.rank = 4;
  launch.paths = {{"CAIRN_CONTROL", "control"}};
  REQUIRE(relay->give_control(launch).ok());
  CHECK(launch.env["CAIRN_CONTROL"] == *address);
  CHECK(launch.paths.empty());
  launch.paths = {{"CAIRN_CONTROL", "control"}};
  CHECK(relay->give_control(launch).message() == "rank 4 is already running");
  const fs::path socket = address->substr(5);
  CHECK(fs::exists(socket));
  relay.reset();  // its directory goes with it
  CHECK_FALSE(fs::exists(socket.parent_path()));
}

TEST_CASE("route probe: the route to loopback is lo; a probe says what it reached") {
  auto route = route_to("127.0.0.1");
  REQUIRE(route.ok());
  CHECK(route->local_address == "127.0.0.1");
  CHECK(route->interface == "lo");
  CHECK_FALSE(route_to("no-such-host.invalid").ok());

  auto listener = listen_on(PeerAddress{"127.0.0.1", 0});
  REQUIRE(listener.ok());
  const int port = local_port(listener->get());
  Json reply = probe_reply(Json{{"type", "probe"}, {"host", "127.0.0.1"}, {"port", port}});
  CHECK(reply["reachable"] == true);
  CHECK(reply["local_address"] == "127.0.0.1");
  CHECK(reply["interface"] == "lo");
  listener->reset();  // nobody listens there now
  reply = probe_reply(Json{{"type", "probe"}, {"host", "127.0.0.1"}, {"port", port}});
  CHECK(reply["reachable"] == false);
  CHECK(reply["error"].get<std::string>().find("refused") != std::string::npos);
  reply = probe_reply(Json{{"type", "probe"}, {"host", 5}, {"port", 0}});
  CHECK(reply["reachable"] == false);
  CHECK(reply["error"].get<std::string>().find("needs a host") != std::string::npos);
}

TEST_CASE("route probe: an agent answers a probe request from its machine") {
  ::signal(SIGPIPE, SIG_IGN);
  TestDir dir;
  RelayTestAgent agent(dir / "agent");
  auto client = TlsContext::make(TlsContext::Side::kClient, kKey);
  PeerFailure failure;
  auto peer =
      connect_to_agent(agent.address(), *client, Clock::now() + std::chrono::seconds(10), &failure);
  REQUIRE(peer.ok());
  // The agent's own port is one it can reach.
  REQUIRE((*peer)
              ->send(Json{{"type", "probe"}, {"host", "127.0.0.1"}, {"port", agent.address().port}},
                     Clock::now() + std::chrono::seconds(5))
              .ok());
  auto reply = (*peer)->receive(Clock::now() + std::chrono::seconds(10));
  REQUIRE(reply.ok());
  REQUIRE(reply->has_value());
  CHECK((**reply)["type"] == "probe");
  CHECK((**reply)["reachable"] == true);
  CHECK((**reply)["interface"] == "lo");
  CHECK((**reply)["local_address"] == "127.0.0.1");
}

}  // namespace
}  // namespace cairn
