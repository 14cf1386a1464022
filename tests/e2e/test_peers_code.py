"""Code and data on a peer (issue 17 item 5, docs/peers.md "Code and data on a peer"): a real
`cairn agent` on loopback, a project in a git repository whose entrypoint is a relative
script. The rank runs from the agent's copy of the snapshot, never from the live project;
a second experiment of the same code ships no objects; data kept in the store travels by
content; larger data must be at the same path on the agent with the recorded fingerprint,
or the launch is refused with one line."""
import json
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, CairnTestCase, needs  # noqa: E402
import peer_testlib  # noqa: E402
from peer_testlib import TEST_CLIENT, peer_home  # noqa: E402

USERNS, USERNS_WHY = cairn_testlib.userns_mounts()

TRAIN = r"""# version 1
import os
import sys
import time

import cairn

ctx = cairn.init()
print("running in", os.getcwd(), flush=True)
print("script at", os.path.abspath(sys.argv[0]), flush=True)
# Waits for the test to change the live project (until the file argv[1] names exists), then
# reads the script it runs from.
go = sys.argv[1]
deadline = time.monotonic() + 60
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.02)
print("script says", open(sys.argv[0]).readline().strip(), flush=True)
for name in sys.argv[2:]:
    print("data", name, open(name).read().strip()[:20], flush=True)
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
    ctx.report_validation(step, {"val_loss": 1.0 / (step + 1)})
"""

CONFIG = """name: remote-code
entrypoint: [python3, train.py, %(go)s, %(read)s]
data: [%(data)s]
searcher: {name: single, metric: val_loss, max_length: 2}
max_restarts: 0
reproducibility: {snapshot_limit_mb: 1}
"""


def Agent(test, key, wrap=None):
    """A loopback agent with `key` (optionally run under `wrap`, e.g. in a mount namespace)."""
    return peer_testlib.Agent(test, key=key, wrap=wrap)


class PeersCodeTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.agents = []
        self.proj = os.path.join(self.dir, "proj")
        os.makedirs(self.proj)
        self.key = peer_home(self)

    def env(self):
        return peer_testlib.agent_env(self)

    def put(self, name, text):
        path = os.path.join(self.proj, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    def git(self, *args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com"] +
                       list(args), cwd=self.proj, check=True, capture_output=True, timeout=120)

    def project(self, data, read):
        self.put("train.py", TRAIN)
        self.put("exp.yaml", CONFIG % {"data": data, "read": read,
                                       "go": os.path.join(self.proj, "go")})
        self.put(".gitignore", "go\n")
        self.git("init", "-q")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "project")

    def run_on(self, agent, background=False, also=()):
        argv = [CAIRN, "run", "exp.yaml", "--peers",
                ",".join([agent.address] + [a.address for a in also]), "--key-file", self.key,
                "--slots", "0"]  # on the agents only
        if background:
            return subprocess.Popen(argv, cwd=self.proj, env=self.env(), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
        return subprocess.run(argv, cwd=self.proj, env=self.env(), capture_output=True,
                              text=True, timeout=180)

    def test_ranks_run_from_the_agents_copy_of_the_snapshot_and_same_code_ships_nothing(self):
        self.put("data/small.csv", "a,b\n1,2\n")
        self.project("data/small.csv", "data/small.csv")
        agent = Agent(self, self.key)
        run = self.run_on(agent, background=True)
        shipped = agent.lines_until("started rank")
        # The code came as git objects, the kept data by content, before the rank started.
        code = [l for l in shipped if "received code" in l]
        self.assertEqual(len(code), 1, shipped)
        m = re.search(r"received code ([0-9a-f]{12}) from 127\.0\.0\.1:\d+: (\d+) objects, "
                      r"(\d+) bytes$", code[0])
        self.assertIsNotNone(m, code[0])
        tree, objects = m.group(1), int(m.group(2))
        self.assertEqual(objects, 4, code[0])  # the tree, train.py, exp.yaml, .gitignore
        self.assertTrue(any(re.search(r"received data [0-9a-f]{12} from \S+: 8 bytes$", l)
                            for l in shipped), shipped)
        self.assertTrue(any(re.search(r"prepared run [0-9a-f]{16} for \S+: code %s, 1 data "
                                      r"files, 0 data links$" % tree, l) for l in shipped),
                        shipped)
        started = shipped[-1]
        self.assertRegex(started, r"started rank \d+ of \S+: python3 in work/runs/[0-9a-f]{16}$")
        run_dir = os.path.join(agent.dir, "work", started.rsplit("work/", 1)[1])
        # The live project changes while the rank runs: the rank does not see it.
        self.put("train.py", TRAIN.replace("# version 1", "# version 2"))
        self.put("go", "")
        out, _ = run.communicate(timeout=180)
        self.assertEqual(run.returncode, 0, out)
        self.assertIn("[1.1] running in %s\n" % run_dir, out)
        self.assertIn("[1.1] script at %s\n" % os.path.join(run_dir, "train.py"), out)
        self.assertIn("[1.1] script says # version 1\n", out)
        self.assertIn("[1.1] data data/small.csv a,b\n", out)
        self.assertTrue(run_dir.startswith(agent.dir + os.sep))
        # The cached checkout is read-only and holds the snapshot, not the data.
        checkouts = os.listdir(os.path.join(agent.dir, "code"))
        self.assertEqual(len(checkouts), 1, checkouts)
        self.assertTrue(checkouts[0].startswith(tree))
        cached = os.path.join(agent.dir, "code", checkouts[0])
        self.assertEqual(os.stat(os.path.join(cached, "train.py")).st_mode & 0o777, 0o444)
        self.assertFalse(os.path.exists(os.path.join(cached, "data")))
        with open(os.path.join(cached, "train.py")) as f:
            self.assertEqual(f.readline(), "# version 1\n")

        # The same code again (the edit undone): a new experiment, no object shipped, no data.
        self.put("train.py", TRAIN)
        second = self.run_on(agent)
        self.assertEqual(second.returncode, 0, second.stdout + second.stderr)
        again = agent.lines_until("started rank")
        self.assertTrue(any(re.search(r"received code %s from \S+: 0 objects, 0 bytes$" % tree, l)
                            for l in again), again)
        self.assertFalse([l for l in again if "received data" in l], again)
        self.assertIn("[2.1] script says # version 1", second.stdout)
        self.assertIn("[2.1] running in %s" % os.path.join(agent.dir, "work", "runs"),
                      second.stdout)

    def test_a_resumed_experiment_runs_in_the_same_run_directory_on_the_agent(self):
        self.put("data/small.csv", "a,b\n")
        self.project("data/small.csv", "data/small.csv")
        agent = Agent(self, self.key)
        run = self.run_on(agent, background=True)
        started = agent.lines_until("started rank")
        run_dir = started[-1].rsplit(" in work/", 1)[1]
        launcher = re.search(r"started rank \d+ of (\S+):", started[-1]).group(1)
        # The coordinator dies while its rank waits: the agent kills the rank with the
        # connection, the experiment stays ACTIVE.
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=60)
        ended = agent.lines_until(launcher)  # "disconnected" or "dropped", as TCP says
        while not re.search(r"(disconnected|dropped) %s" % re.escape(launcher), ended[-1]):
            ended = agent.lines_until(launcher)
        self.put("go", "")
        resumed = subprocess.run([CAIRN, "resume", "1"], cwd=self.proj, env=self.env(),
                                 capture_output=True, text=True, timeout=180)
        self.assertEqual(resumed.returncode, 0, resumed.stdout + resumed.stderr)
        again = agent.lines_until("started rank")
        run_id = run_dir.split("/")[1]
        self.assertTrue(any(re.search(r"prepared run %s for \S+: already here$" % run_id, l)
                            for l in again), again)
        self.assertTrue(any(re.search(r"received code \S+ from \S+: 0 objects, 0 bytes$", l)
                            for l in again), again)
        self.assertTrue(again[-1].endswith(" in work/" + run_dir), again[-1])
        self.assertIn("[1.1] running in %s\n" % os.path.join(agent.dir, "work", run_dir),
                      resumed.stdout)
        self.assertIn("[1.1] script says # version 1", resumed.stdout)

    def test_larger_data_is_read_where_it_is_on_the_agent_after_its_fingerprint_is_checked(self):
        # Over the snapshot limit (1 MiB): fingerprinted only, so not shipped.
        self.put("big/x.bin", "x" * (1536 * 1024))
        self.project("big/", "big/x.bin")
        self.put("go", "")
        agent = Agent(self, self.key)
        run = self.run_on(agent)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        lines = agent.lines_until("started rank")
        self.assertFalse([l for l in lines if "received data" in l], lines)
        self.assertTrue(any(re.search(r"prepared run \S+ for \S+: code \S+, 0 data files, "
                                      r"1 data links$", l) for l in lines), lines)
        self.assertIn("[1.1] data big/x.bin xxxxxxxxxxxxxxxxxxxx", run.stdout)
        run_dir = re.search(r"running in (\S+)", run.stdout).group(1)
        self.assertEqual(os.readlink(os.path.join(run_dir, "big")),
                         os.path.join(self.proj, "big"))

    @needs("userns", USERNS, USERNS_WHY)
    def test_data_that_differs_on_the_agent_refuses_the_launch_with_one_line(self):
        big = os.path.join(self.proj, "big")
        self.put("big/x.bin", "x" * (1536 * 1024))
        self.project("big/", "big/x.bin")
        self.put("go", "")
        # The agent sees other bytes at the same path: a mount namespace of its own.
        other = os.path.join(self.dir, "other")
        os.makedirs(other)
        with open(os.path.join(other, "x.bin"), "w") as f:
            f.write("y" * (1536 * 1024))
        agent = Agent(self, self.key, wrap=["unshare", "-rm", "sh", "-c",
                                            'mount --bind "$0" "$1" && shift && exec "$@"', other, big])
        run = self.run_on(agent)
        self.assertNotEqual(run.returncode, 0, run.stdout + run.stderr)
        why = ("data %s on this machine is not what the experiment recorded: 1 changed "
               "(%s/x.bin)" % (big, big))
        # Said by the data_check placement asks first, or by the run's preparation.
        refused = agent.lines_until("refused")
        self.assertRegex(refused[-1], r"cairn agent: (refused a run from|data refused for) "
                                      r"127\.0\.0\.1:\d+: ")
        self.assertTrue(refused[-1].endswith(": " + why), refused[-1])
        self.assertFalse([l for l in refused if "started rank" in l], refused)
        said = [l for l in (run.stdout + run.stderr).splitlines() if why in l]
        self.assertEqual(len(said), 1, run.stdout + run.stderr)
        self.assertNotIn("[1.1]", run.stdout)
        self.assertFalse(os.path.exists(os.path.join(agent.dir, "work", "runs")))

        # Beside an agent that has the data: the trial is kept off the one that differs
        # (one warning), runs on the other, and costs no restart.
        good = Agent(self, self.key)
        run = self.run_on(agent, also=[good])
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn("warning: agent %s cannot run this experiment (%s: %s); its slots are "
                      "not used" % (agent.address, agent.address, why), run.stderr)
        trial = json.loads(subprocess.run([CAIRN, "show", "2.1", "--json"], cwd=self.proj,
                                          env=self.env(), capture_output=True, text=True,
                                          timeout=60).stdout)
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        self.assertEqual(trial["placement"][0]["machine"], good.address)

        # An agent where the data's directory is empty: the file is missing there.
        empty = Agent(self, self.key, wrap=["unshare", "-rm", "sh", "-c",
                                            'mount -t tmpfs tmpfs "$0" && exec "$@"', big])
        run = self.run_on(empty)
        self.assertNotEqual(run.returncode, 0, run.stdout + run.stderr)
        why = ("data %s on this machine is not what the experiment recorded: 1 missing "
               "(%s/x.bin)" % (big, big))
        self.assertTrue(empty.lines_until("refused")[-1].endswith(": " + why))
        said = [l for l in (run.stdout + run.stderr).splitlines() if why in l]
        self.assertEqual(len(said), 1, run.stdout + run.stderr)

    def hostile_pack(self, entries):
        """A pack holding a tree of `entries` [(mode, name, content)] written as given (what
        no git tool writes: git hash-object --literally), and that tree's id."""
        repo = os.path.join(self.dir, "hostile.git")
        if not os.path.isdir(repo):
            subprocess.run(["git", "init", "-q", "--bare", repo], check=True, timeout=60)

        def write(kind, data):
            return subprocess.run(["git", "--git-dir", repo, "hash-object", "-w", "--literally",
                                   "-t", kind, "--stdin"], input=data, check=True,
                                  capture_output=True, timeout=60).stdout.decode().strip()
        body, oids = b"", []
        for mode, name, content in entries:
            blob = write("blob", content)
            oids.append(blob)
            body += mode.encode() + b" " + name.encode() + b"\0" + bytes.fromhex(blob)
        tree = write("tree", body)
        pack = subprocess.run(["git", "--git-dir", repo, "pack-objects", "--stdout"],
                              input="\n".join([tree] + oids).encode() + b"\n", check=True,
                              capture_output=True, timeout=60).stdout
        return tree, pack

    def send_pack(self, agent, tree, pack):
        path = os.path.join(self.dir, "hostile.git", "sent.pack")
        with open(path, "wb") as f:
            f.write(pack)
        out = subprocess.run([TEST_CLIENT, agent.address, self.key, "code-pack", tree, path],
                             capture_output=True, text=True, timeout=60).stdout.splitlines()
        self.assertEqual(len(out), 3, out)  # the hello, the answer, the status after it
        return json.loads(out[1]), json.loads(out[2])

    def test_hostile_trees_and_damaged_packs_are_refused_and_the_agent_keeps_serving(self):
        self.assertTrue(os.path.exists(TEST_CLIENT), "build peer_test_client: " + TEST_CLIENT)
        agent = Agent(self, self.key)

        def outside_agent():
            found = set()
            for root, dirs, files in os.walk(self.dir):
                for name in dirs + files:
                    path = os.path.join(root, name)
                    if not path.startswith((agent.dir, os.path.join(self.dir, "hostile.git"))):
                        found.add(path)
            return found
        cases = [
            ("an entry named ..", [("100644", "..", b"owned\n")], "'..' has an entry that"),
            ("an absolute name", [("100644", "/tmp/owned-by-a-peer", b"owned\n")],
             "'/tmp/owned-by-a-peer' has an entry that"),
            ("a link out", [("120000", "escape", b"../../../etc")],
             "escape is a link that leads outside the checkout (../../../etc)"),
            ("an absolute link", [("120000", "escape", b"/etc")],
             "escape is a link that leads outside the checkout (/etc)"),
        ]
        for what, entries, says in cases:
            with self.subTest(what):
                tree, pack = self.hostile_pack(entries)
                before = outside_agent()
                answer, status = self.send_pack(agent, tree, pack)
                self.assertEqual(answer["type"], "error", answer)
                self.assertIn("refused code tree: " + says, answer["reason"])
                self.assertEqual(status["type"], "status", status)
                line = agent.lines_until("refused code from")[-1]
                self.assertTrue(line.endswith(answer["reason"]), line)
                self.assertEqual(os.listdir(os.path.join(agent.dir, "code")), [])
                self.assertEqual(outside_agent() - before, set())
                self.assertFalse(os.path.exists("/tmp/owned-by-a-peer"))
        # A damaged pack: refused, nothing kept.
        tree, pack = self.hostile_pack([("100644", "fine.txt", b"fine\n" * 100)])
        damaged = bytearray(pack)
        damaged[len(pack) // 2] ^= 0x5A
        answer, status = self.send_pack(agent, tree, bytes(damaged))
        self.assertEqual(answer["type"], "error", answer)
        self.assertIn("the code pack is damaged", answer["reason"])
        self.assertEqual(status["type"], "status", status)
        agent.lines_until("refused code from")
        self.assertEqual(os.listdir(os.path.join(agent.dir, "code")), [])
        # The same pack undamaged is taken: the refusals above were about what they held.
        answer, _ = self.send_pack(agent, tree, pack)
        self.assertEqual(answer["type"], "code_ready", answer)
        self.assertEqual(answer["objects"], 2)
        with open(os.path.join(agent.dir, "code", tree, "fine.txt")) as f:
            self.assertEqual(f.read(), "fine\n" * 100)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
