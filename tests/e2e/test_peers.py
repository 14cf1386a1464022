"""cairn agent and cairn peers (issue 17, docs/peers.md): real agents on loopback, each with
its own --dir and a port the system picked, authenticated with real cluster keys over TLS
1.3. Misbehaving peers are played by build/peer_test_client (tests/peer_client/), which
authenticates with a real key and then sends what cairn never sends."""
import json
import os
import re
import socket
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CairnTestCase, read_line_until, wait_until  # noqa: E402
import peer_testlib  # noqa: E402
from peer_testlib import LOG_LINE, TEST_CLIENT, Agent  # noqa: E402

RUN_TRAIN = r"""
import os
import cairn

ctx = cairn.init()
print("running in", os.getcwd(), flush=True)
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
    ctx.report_validation(step, {"val_loss": 1.0 / (step + 1)})
"""

RUN_CONFIG = """name: remote
entrypoint: [/usr/bin/python3, %s]
searcher: {name: single, metric: val_loss, max_length: 3}
max_restarts: 0
"""


class PeersTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.agents = []
        self.addCleanup(self.kill_agents)
        self.home = os.path.join(self.dir, "home")
        os.makedirs(self.home)
        self.assertTrue(os.path.exists(TEST_CLIENT), "build peer_test_client: " + TEST_CLIENT)

    def kill_agents(self):
        for agent in self.agents:
            agent.kill()

    def agent_env(self, env=None):
        # A home of its own: no key is found unless the test puts one there.
        return peer_testlib.agent_env(self, env)

    def new_key(self, name):
        path = os.path.join(self.dir, name)
        proc = self.cairn("agent", "--new-key", path, check=0, env=self.agent_env())
        key_id = re.search(r"key id ([0-9a-f]{16})", proc.stdout).group(1)
        return path, key_id

    def peers(self, *args, check=None, env=None):
        return self.cairn("peers", *args, check=check, env=self.agent_env(env), timeout=60)

    def client(self, address, key, mode):
        proc = subprocess.run([TEST_CLIENT, address, key, mode], capture_output=True, text=True,
                              timeout=60)
        return proc.stdout.splitlines()

    def test_status_of_two_agents_and_an_unreachable_one(self):
        key, key_id = self.new_key("cluster.key")
        a = Agent(self, "--key-file", key, "--slots", "3")
        b = Agent(self, "--key-file", key, "--slots", "5")
        self.assertIn("key id " + key_id, a.listening)
        self.assertIn("3 slots", a.listening)
        self.assertIn("dir " + a.dir, a.listening)
        self.assertTrue(os.path.isdir(a.dir))
        self.assertEqual(stat.S_IMODE(os.stat(a.dir).st_mode), 0o700)
        # A port nothing listens on: bound, then closed.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            closed = "127.0.0.1:%d" % s.getsockname()[1]
        proc = self.peers("--peers", ",".join([a.address, b.address, closed]), "--key-file", key,
                          "--json", check=1)
        doc = json.loads(proc.stdout)
        self.assertEqual([p["address"] for p in doc], [a.address, b.address, closed])
        for peer, slots in ((doc[0], 3), (doc[1], 5)):
            self.assertEqual(peer["status"], "ok", peer)
            self.assertEqual(peer["found_by"], "list")
            self.assertEqual(peer["slots"], {"free": slots, "total": slots})
            self.assertIsInstance(peer["devices"], list)
            self.assertTrue(peer["devices"])
            self.assertEqual(peer["version"], self.cairn("--version", check=0).stdout.split()[1])
            self.assertEqual(set(peer), {"address", "found_by", "slots", "devices", "version",
                                         "status", "agent"})
        # Two agents, two ids; the unreachable one has none.
        self.assertNotEqual(doc[0]["agent"], doc[1]["agent"])
        self.assertEqual(doc[2]["status"], "unreachable")
        self.assertIsNone(doc[2]["slots"])
        self.assertIsNone(doc[2]["agent"])
        self.assertIn("Connection refused", doc[2]["error"])
        for agent in (a, b):
            agent.line(lambda l: "connected 127.0.0.1:" in l and "key id " + key_id in l)
        # All peers ok: exit 0, a table.
        proc = self.peers("--peers", a.address + "," + b.address, "--key-file", key, check=0)
        lines = proc.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["ADDRESS", "FOUND", "SLOTS", "DEVICES", "VERSION",
                                            "STATUS"])
        self.assertEqual(lines[1].split()[:3], [a.address, "list", "3/3"])
        self.assertEqual(lines[1].split()[-1], "ok")
        self.assertEqual(lines[2].split()[2], "5/5")
        # The key comes from CAIRN_KEY_FILE too, and from the default per-user file.
        doc = json.loads(self.peers("--peers", a.address, "--json", check=0,
                                    env={"CAIRN_KEY_FILE": key}).stdout)
        self.assertEqual(doc[0]["status"], "ok")
        os.makedirs(os.path.join(self.home, ".config", "cairn"))
        os.link(key, os.path.join(self.home, ".config", "cairn", "cluster.key"))
        doc = json.loads(self.peers("--peers", a.address, "--json", check=0).stdout)
        self.assertEqual(doc[0]["status"], "ok")
        code, rest = a.stop()
        self.assertEqual(code, 0, rest)

    def test_wrong_and_missing_key_refused_on_both_sides_agent_keeps_serving(self):
        key, key_id = self.new_key("cluster.key")
        other, other_id = self.new_key("other.key")
        agent = Agent(self, "--key-file", key)
        proc = self.peers("--peers", agent.address, "--key-file", other, check=1)
        self.assertRegex(proc.stdout.splitlines()[1], r"key_mismatch\s*$")
        errors = proc.stderr.splitlines()
        self.assertEqual(len(errors), 1, proc.stderr)
        self.assertIn(agent.address, errors[0])
        self.assertIn("key id " + other_id, errors[0])
        line = agent.line(lambda l: "refused" in l, "the refusal")
        self.assertRegex(line, r"refused 127\.0\.0\.1:\d+: key id %s, this agent's is %s$"
                         % (other_id, key_id))
        # No key at all: the home has none and no option or variable names one.
        proc = self.peers("--peers", agent.address, "--json", check=1)
        doc = json.loads(proc.stdout)
        self.assertEqual(doc[0]["status"], "key_mismatch")
        self.assertIn("key id none", doc[0]["error"])
        line = agent.line(lambda l: "refused" in l, "the refusal")
        self.assertRegex(line, r"refused 127\.0\.0\.1:\d+: key id none \(no key file\), "
                         r"this agent's is %s$" % key_id)
        # Never the key itself.
        with open(key, "rb") as f:
            secret = f.read()
        for text in (proc.stdout, proc.stderr, line):
            self.assertNotIn(secret.hex(), text)
        # Still serving.
        doc = json.loads(self.peers("--peers", agent.address, "--key-file", key, "--json",
                                    check=0).stdout)
        self.assertEqual(doc[0]["status"], "ok")
        code, rest = agent.stop()
        self.assertEqual(code, 0)
        self.assertNotIn(secret.hex(), rest)

    def test_a_client_that_is_not_tls_is_refused_with_one_line(self):
        key, _ = self.new_key("cluster.key")
        agent = Agent(self, "--key-file", key)
        with socket.create_connection(("127.0.0.1", agent.port), timeout=30) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            s.settimeout(30)
            try:
                while s.recv(4096):
                    pass
            except ConnectionResetError:
                pass  # the agent's alert may reach a socket with unread data: a reset
        line = agent.line(lambda l: "refused" in l)
        self.assertIn("no cluster key offered", line)
        self.assertEqual(json.loads(self.peers("--peers", agent.address, "--key-file", key,
                                               "--json", check=0).stdout)[0]["status"], "ok")

    def test_version_mismatch_refused_with_one_line(self):
        key, _ = self.new_key("cluster.key")
        agent = Agent(self, "--key-file", key)
        reply = json.loads(self.client(agent.address, key, "protocol=2")[0])
        self.assertEqual(reply["type"], "refused")
        self.assertEqual(reply["code"], "version_mismatch")
        self.assertEqual(reply["protocol"], 1)
        line = agent.line(lambda l: "refused" in l)
        self.assertRegex(line, r"refused 127\.0\.0\.1:\d+: peer protocol version 2 \(cairn "
                         r"[^)]+\), this cairn speaks version 1")
        self.assertEqual(json.loads(self.peers("--peers", agent.address, "--key-file", key,
                                               "--json", check=0).stdout)[0]["status"], "ok")

    def test_cairn_peers_reports_an_agent_of_another_version(self):
        # Fake agents (peer_test_client --serve-…) of protocol 2: one answers with its own
        # hello, as a newer agent may; one refuses ours, as ours refuses theirs.
        key, _ = self.new_key("cluster.key")
        for mode in ("--serve-hello", "--serve-refusal"):
            with self.subTest(mode=mode):
                fake = subprocess.Popen([TEST_CLIENT, mode, "2", key], stdout=subprocess.PIPE,
                                        text=True)
                self.addCleanup(fake.wait, 30)
                self.addCleanup(fake.stdout.close)
                port = int(read_line_until(fake.stdout, lambda l: l.strip().isdigit(),
                                           timeout=30, what="the fake agent's port"))
                proc = self.peers("--peers", "127.0.0.1:%d" % port, "--key-file", key,
                                  "--json", check=1)
                doc = json.loads(proc.stdout)
                self.assertEqual(doc[0]["status"], "version_mismatch", doc)
                self.assertEqual(doc[0]["version"], "9.9.9")
                self.assertIsNone(doc[0]["slots"])
                self.assertIn("version 2 (cairn 9.9.9)", doc[0]["error"])
                self.assertIn("run the same cairn on every machine", doc[0]["error"])
                self.assertEqual(fake.wait(timeout=30), 0)

    def test_bad_frames_end_only_their_connection(self):
        key, _ = self.new_key("cluster.key")
        agent = Agent(self, "--key-file", key)
        cases = {
            "oversized": "frame of 67108864 bytes is over the bound of 1048576",
            "malformed": "malformed frame: not JSON",
            "deep": "malformed frame: nested deeper than 64 levels",
            "untyped": "malformed frame: frame has no string \"type\"",
        }
        for mode, why in cases.items():
            lines = self.client(agent.address, key, mode)
            self.assertEqual(json.loads(lines[0])["type"], "hello", lines)
            refusal = json.loads(lines[1])
            self.assertEqual(refusal, {"type": "refused", "reason": why, "code": "bad_frame"})
            self.assertEqual(lines[2], "closed")
            agent.line(lambda l: "connected" in l)
            line = agent.line(lambda l: "dropped" in l, "the drop of " + mode)
            self.assertRegex(line, r"dropped 127\.0\.0\.1:\d+: %s$" % re.escape(why))
        # An unknown request is answered, and the connection goes on.
        lines = self.client(agent.address, key, "unknown")
        self.assertEqual(json.loads(lines[1]),
                         {"type": "error", "reason": "unknown request type 'launch-the-missiles'"})
        agent.line(lambda l: "unknown type 'launch-the-missiles'" in l)
        # And a real status request still works.
        lines = self.client(agent.address, key, "status")
        self.assertEqual(json.loads(lines[1])["type"], "status")
        self.assertEqual(agent.process.poll(), None)

    def run_rank(self, agent, key, mode, cwd, *argv):
        """Launches rank 7 through peer_test_client; the frames the agent sent back."""
        lines = subprocess.run([TEST_CLIENT, agent.address, key, mode, cwd] + list(argv),
                               capture_output=True, text=True, timeout=60).stdout.splitlines()
        return [json.loads(line) for line in lines]

    def test_a_rank_runs_without_a_shell_under_the_agent_dir_output_and_exit_relayed(self):
        key, _ = self.new_key("cluster.key")
        agent = Agent(self, "--key-file", key)
        frames = self.run_rank(agent, key, "run", "exp/1.1",
                               "/bin/sh", "-c", 'echo "$GREETING"; pwd; echo oops >&2; exit 3')
        self.assertEqual(frames[0]["type"], "hello")
        self.assertEqual(frames[1], {"type": "launched", "rank": 7})
        output = "".join(f["data"] for f in frames if f["type"] == "output")
        self.assertEqual(output, "hello from the agent\n%s\noops\n"
                         % os.path.join(agent.dir, "work", "exp", "1.1"))
        self.assertEqual(frames[-1], {"type": "exit", "rank": 7, "code": 3, "signal": 0})
        agent.line(lambda l: re.search(r"started rank 7 of 127\.0\.0\.1:\d+: /bin/sh in "
                                       r"work/exp/1\.1$", l))
        agent.line(lambda l: "ended (code 3, signal 0)" in l)
        # A signal reaches the rank; its exit says so.
        frames = self.run_rank(agent, key, "run-term", "x", "/bin/sleep", "60")
        self.assertEqual(frames[-1], {"type": "exit", "rank": 7, "code": 0, "signal": 15})
        # Argument vectors go to execve as they are: no shell expands them.
        frames = self.run_rank(agent, key, "run", "x", "/bin/echo", "$HOME", "*")
        self.assertEqual(frames[2]["data"], "$HOME *\n")

    def test_one_rank_per_slot_over_every_connection(self):
        key, _ = self.new_key("cluster.key")
        agent = Agent(self, "--key-file", key, "--slots", "1")
        busy = subprocess.Popen([TEST_CLIENT, agent.address, key, "run", "a", "/bin/sleep", "60"],
                                stdout=subprocess.PIPE, text=True)
        self.addCleanup(busy.stdout.close)
        read_line_until(busy.stdout, lambda l: "launched" in l, timeout=30, what="launched")
        doc = json.loads(self.peers("--peers", agent.address, "--key-file", key, "--json",
                                    check=0).stdout)
        self.assertEqual(doc[0]["slots"], {"free": 0, "total": 1})
        frames = self.run_rank(agent, key, "run", "b", "/bin/true")
        self.assertEqual(frames[1]["reason"], "no free slot (1 of 1 in use)")
        busy.kill()
        busy.wait(timeout=30)
        # Its connection gone, the slot is free again.
        wait_until(lambda: json.loads(self.peers("--peers", agent.address, "--key-file", key,
                                                 "--json", check=0).stdout)[0]["slots"]["free"]
                   == 1, timeout=30, what="the slot freed")
        frames = self.run_rank(agent, key, "run", "b", "/bin/true")
        self.assertEqual(frames[-1]["type"], "exit")

    def test_launches_that_would_leave_the_agent_dir_or_cannot_start_are_refused(self):
        key, _ = self.new_key("cluster.key")
        agent = Agent(self, "--key-file", key)
        outside = os.path.join(self.dir, "outside")
        for cwd in ("../outside", "/tmp", "a/../../outside", ""):
            frames = self.run_rank(agent, key, "run", cwd, "/bin/touch", "made")
            self.assertEqual(frames[1]["type"], "error", frames)
            self.assertIn("is not a relative path below the agent's work directory",
                          frames[1]["reason"])
            agent.line(lambda l: "refused a launch" in l)
        self.assertFalse(os.path.exists(outside))
        frames = self.run_rank(agent, key, "run", "x", "no-such-program")
        self.assertEqual(frames[1]["reason"],
                         "entrypoint: program 'no-such-program' not found on PATH")
        # Still serving.
        frames = self.run_rank(agent, key, "run", "x", "/bin/true")
        self.assertEqual(frames[-1]["type"], "exit")

    def test_a_connection_that_ends_takes_its_ranks_with_it(self):
        key, _ = self.new_key("cluster.key")
        agent = Agent(self, "--key-file", key)
        pid_file = os.path.join(agent.dir, "work", "x", "pid")
        client = subprocess.Popen([TEST_CLIENT, agent.address, key, "run", "x", "/bin/sh", "-c",
                                   'echo $$ > pid; exec sleep 60'], stdout=subprocess.PIPE)
        self.addCleanup(client.stdout.close)
        wait_until(lambda: os.path.exists(pid_file) and open(pid_file).read().strip(),
                   timeout=30, what="the rank's pid")
        pid = int(open(pid_file).read())
        client.kill()
        client.wait(timeout=30)
        wait_until(lambda: not os.path.exists("/proc/%d" % pid) or
                   open("/proc/%d/stat" % pid).read().split(") ")[1][0] == "Z",
                   timeout=30, what="the rank killed with its connection")
        code, rest = agent.stop()
        self.assertEqual(code, 0, rest)

    def test_cairn_run_peers_runs_a_single_slot_trial_on_a_loopback_agent(self):
        key, _ = self.new_key("cluster.key")
        agent = Agent(self, "--key-file", key)
        # The trial reaches this machine's control socket: same machine. It runs in the
        # agent's copy of the run directory (tests/e2e/test_peers_code.py has the shipping).
        self.write("train.py", RUN_TRAIN)
        script = os.path.join(self.dir, "train.py")
        self.write("exp.yaml", RUN_CONFIG % script)
        proc = self.cairn("run", "exp.yaml", "--peers", agent.address, "--key-file", key,
                          "--slots", "0", check=0, env=self.agent_env(), timeout=120)
        self.assertIn("trial 1.1 started on " + agent.address, proc.stdout + proc.stderr)
        runs = os.path.join(agent.dir, "work", "runs")
        self.assertRegex(proc.stdout + proc.stderr,
                         r"\[1\.1\] running in %s/[0-9a-f]{16}\n" % re.escape(runs))
        line = agent.line(lambda l: "started rank" in l, "the rank's start")
        self.assertRegex(line, r"started rank \d+ of 127\.0\.0\.1:\d+: /usr/bin/python3 in "
                         r"work/runs/[0-9a-f]{16}$")
        agent.line(lambda l: "ended (code 0, signal 0)" in l)
        show = json.loads(self.cairn("show", "1.1", "--json", check=0).stdout)
        self.assertEqual(show["state"], "COMPLETED", show)
        metrics = json.loads(self.cairn("metrics", "1.1", "--json", check=0).stdout)
        self.assertEqual([p["step"] for p in metrics["training"]], [1, 2, 3])
        logs = self.cairn("logs", "1.1", check=0).stdout
        self.assertIn("running in " + runs + "/", logs)

    def test_cairn_run_peers_refuses_before_creating_anything(self):
        key, _ = self.new_key("cluster.key")
        other, other_id = self.new_key("other.key")
        agent = Agent(self, "--key-file", key, "--slots", "2")
        self.write("train.py", RUN_TRAIN)
        self.write("exp.yaml", RUN_CONFIG % os.path.join(self.dir, "train.py"))
        proc = self.cairn("run", "exp.yaml", "--peers", agent.address, "--key-file", other,
                          env=self.agent_env())
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        self.assertIn("key id " + other_id, proc.stderr)
        proc = self.cairn("run", "exp.yaml", "--peers", agent.address + ",127.0.0.1:1",
                          "--key-file", key, env=self.agent_env())
        self.assertEqual(proc.returncode, 2)
        self.assertIn("cannot connect to 127.0.0.1:1", proc.stderr)
        # --slots 0 with no agent to run on, and a gang that fits nowhere: refused at once.
        proc = self.cairn("run", "exp.yaml", "--slots", "0", env=self.agent_env())
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("--slots 0 runs nothing on this machine", proc.stderr)
        proc = self.cairn("run", "exp.yaml", "--slots", "0", "--peers", agent.address,
                          "--key-file", key, "--set", "resources.slots_per_trial=3",
                          env=self.agent_env())
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("resources.slots_per_trial: 3 is more than the 2 slots of this machine (0) "
                      "and its peers (%s: 2) together" % agent.address, proc.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, ".cairn", "experiments", "1")))

    def test_sigterm_ends_the_agent_and_its_open_connections(self):
        key, _ = self.new_key("cluster.key")
        agent = Agent(self, "--key-file", key)
        # A connection that stays open (authenticated, saying nothing).
        client = subprocess.Popen([TEST_CLIENT, agent.address, key, "silent"],
                                  stdout=subprocess.PIPE, text=True)
        # A plain TCP connection in the middle of nothing (no handshake yet).
        idle = socket.create_connection(("127.0.0.1", agent.port), timeout=30)
        self.addCleanup(idle.close)
        # And a connection with a rank running.
        pid_file = os.path.join(agent.dir, "work", "x", "pid")
        runner = subprocess.Popen([TEST_CLIENT, agent.address, key, "run", "x", "/bin/sh", "-c",
                                   'echo $$ > pid; exec sleep 60'], stdout=subprocess.PIPE)
        self.addCleanup(runner.stdout.close)
        wait_until(lambda: os.path.exists(pid_file) and open(pid_file).read().strip(),
                   timeout=30, what="the rank's pid")
        rank_pid = int(open(pid_file).read())
        wait_until(lambda: len(self.agent_connections(agent)) >= 3, timeout=30,
                   what="the connections accepted")
        start = time.monotonic()
        code, rest = agent.stop()
        self.assertEqual(code, 0, rest)
        self.assertLess(time.monotonic() - start, 10)
        self.assertRegex(rest.splitlines()[-1], LOG_LINE.pattern + r"stopped \(SIGTERM\)$")
        out, _ = client.communicate(timeout=30)
        self.assertIn(out.strip(), ("closed", "error: connection closed without TLS close_notify"))
        # The agent killed and reaped its rank before it exited.
        self.assertFalse(os.path.exists("/proc/%d" % rank_pid))
        runner.wait(timeout=30)

    def agent_connections(self, agent):
        """The established TCP connections to the agent's port, from /proc/net/tcp."""
        found = []
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(table) as f:
                    next(f)
                    for row in f:
                        fields = row.split()
                        if int(fields[1].split(":")[1], 16) == agent.port and fields[3] == "01":
                            found.append(fields[2])
            except OSError:
                pass
        return found

    def test_without_a_key_loopback_only(self):
        # No key anywhere: the default listen address is loopback, and works without a key.
        agent = Agent(self, "--listen", "127.0.0.1:0")
        self.assertIn("key id none", agent.listening)
        self.assertIn("loopback only", agent.listening)
        doc = json.loads(self.peers("--peers", agent.address, "--json", check=0).stdout)
        self.assertEqual(doc[0]["status"], "ok")
        # Asked for any other address without a key: exit 2, one line.
        for listen in ("0.0.0.0:0", ":0"):
            proc = self.cairn("agent", "--listen", listen, "--dir", os.path.join(self.dir, "x"),
                              env=self.agent_env())
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
            self.assertIn("no cluster key", proc.stderr)
            self.assertIn("--new-key", proc.stderr)
        # A keyless agent runs ranks for its own user only (other users: test_peers_keyless).
        frames = self.run_rank(agent, "none", "run", "x", "/bin/true")
        self.assertEqual(frames[1], {"type": "launched", "rank": 7})
        agent.line(lambda l: "started rank 7 of 127.0.0.1:" in l)
        # A keyed client is refused by a keyless agent too.
        key, key_id = self.new_key("cluster.key")
        doc = json.loads(self.peers("--peers", agent.address, "--key-file", key, "--json",
                                    check=1).stdout)
        self.assertEqual(doc[0]["status"], "key_mismatch")

    def test_an_agent_offers_the_slots_it_is_given_and_refuses_none(self):
        # --slots 0 used to be taken as "not given": the agent offered every core.
        proc = self.cairn("agent", "--slots", "0", "--listen", "127.0.0.1:0", "--dir",
                          os.path.join(self.dir, "zero"), env=self.agent_env(), timeout=10)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("--slots", proc.stderr.strip().splitlines()[0])
        self.assertNotIn("listening", proc.stderr)
        agent = Agent(self, "--listen", "127.0.0.1:0", "--slots", "1")
        self.assertIn("; 1 slot;", agent.listening)
        doc = json.loads(self.peers("--peers", agent.address, "--json", check=0).stdout)
        self.assertEqual(doc[0]["slots"], {"free": 1, "total": 1}, doc)

    def test_key_file_that_others_may_read_is_refused(self):
        key, _ = self.new_key("cluster.key")
        os.chmod(key, 0o644)
        for args in (["agent", "--key-file", key, "--listen", "127.0.0.1:0", "--dir",
                      os.path.join(self.dir, "a")],
                     ["peers", "--peers", "127.0.0.1:1", "--key-file", key]):
            proc = self.cairn(*args, env=self.agent_env())
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertEqual(proc.stderr.strip().splitlines(),
                             ["cairn: error: key file %s has mode 0644: group and others must "
                              "have no access (chmod 600 %s)" % (key, key)])
        # A missing explicit key file is an error, not "no key".
        proc = self.cairn("peers", "--peers", "127.0.0.1:1", "--key-file",
                          os.path.join(self.dir, "nope"), env=self.agent_env())
        self.assertEqual(proc.returncode, 2)
        self.assertIn("does not exist", proc.stderr)

    def test_new_key_is_private_and_never_overwritten(self):
        key, key_id = self.new_key(os.path.join("conf", "cluster.key"))
        self.assertEqual(stat.S_IMODE(os.stat(key).st_mode), 0o600)
        self.assertEqual(os.path.getsize(key), 32)
        with open(key, "rb") as f:
            before = f.read()
        proc = self.cairn("agent", "--new-key", key, env=self.agent_env())
        self.assertEqual(proc.returncode, 2)
        self.assertIn("already exists", proc.stderr)
        with open(key, "rb") as f:
            self.assertEqual(f.read(), before)

    def test_a_silent_listener_is_bounded_by_the_timeout(self):
        # Accepts TCP connections and never answers: the handshake must time out.
        silent = socket.socket()
        self.addCleanup(silent.close)
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = "127.0.0.1:%d" % silent.getsockname()[1]
        start = time.monotonic()
        proc = self.peers("--peers", address, "--timeout", "1", "--json", check=1)
        self.assertLess(time.monotonic() - start, 20)
        doc = json.loads(proc.stdout)
        self.assertEqual(doc[0]["status"], "unreachable")
        self.assertIn("timed out", doc[0]["error"])

    def test_no_peers_and_bad_addresses(self):
        proc = self.peers(check=0)
        self.assertIn("no peers", proc.stderr)
        self.assertEqual(json.loads(self.peers("--json", check=0).stdout), [])
        proc = self.peers("--peers", "a:1,b:x")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("bad peer address 'b:x'", proc.stderr)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
