"""Smaller pieces of issue 17 on a real `cairn agent` (docs/peers.md): builtin:mlp runs the
agent's own cairn binary; placement asks an agent whether it has the data before a trial
is placed there; the agent's directory is garbage-collected."""
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, CairnTestCase, needs, wait_until  # noqa: E402
from peer_testlib import agent_env, peer_home  # noqa: E402

USERNS, USERNS_WHY = cairn_testlib.userns_mounts()

TRAIN = r"""
import os
import cairn

ctx = cairn.init()
print("attempt", os.environ["CAIRN_ATTEMPT"], flush=True)
print("data", open("big/x.bin").read(4), flush=True)
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
    ctx.report_validation(step, {"val_loss": 1.0 / (step + 1)})
"""

DATA_CONFIG = """name: data-check
entrypoint: [python3, train.py]
data: [big/]
hyperparameters: {x: {type: categorical, vals: [1, 2, 3, 4]}}
searcher: {name: grid, metric: val_loss, max_length: 1}
max_restarts: 0
reproducibility: {snapshot_limit_mb: 1}
"""

MLP = """name: mlp-remote
entrypoint: builtin:mlp
hyperparameters: {dataset: teacher, samples: 256, hidden: 16, batch_size: 64, threads: 1,
                  device: cpu}
searcher: {name: single, metric: val_loss, max_length: 2}
reproducibility: {seed: 5, deterministic: true}
max_restarts: 0
"""


class Agent:
    """A `cairn agent` on loopback, from `binary`, with its log in a file."""

    def __init__(self, test, name, slots, *extra, binary=CAIRN, wrap=(), env=None):
        self.dir = os.path.join(test.dir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.log = os.path.join(test.dir, name + ".log")
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(
                list(wrap) + [binary, "agent", "--dir", self.dir, "--slots", str(slots), "--key-file",
                 test.key, "--listen", "127.0.0.1:0", "--no-announce"] + list(extra),
                cwd=test.dir, env=test.cairn_env(test.env(env)), stdin=subprocess.DEVNULL,
                stdout=log, stderr=log)
        test.addCleanup(self.kill)
        line = self.wait_log("listening on")
        self.address = re.search(r"listening on (\S*:\d+) ", line).group(1)

    def text(self):
        with open(self.log) as f:
            return f.read()

    def lines(self, needle):
        return [l for l in self.text().splitlines() if needle in l]

    def wait_log(self, needle, timeout=60):
        wait_until(lambda: self.lines(needle), timeout=timeout,
                   what="%r in the agent's log" % needle)
        return self.lines(needle)[0]

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)


class AgentOpsCase(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.key = peer_home(self)

    def env(self, extra=None):
        return agent_env(self, extra)

    def copy_binary(self, folder):
        path = os.path.join(self.dir, folder, "cairn")
        os.makedirs(os.path.dirname(path))
        shutil.copy2(CAIRN, path)
        return path


class BuiltinOnAgentTest(AgentOpsCase):
    def test_builtin_mlp_runs_the_agents_own_cairn_binary(self):
        agent_bin = self.copy_binary("agent-install")
        coordinator_bin = self.copy_binary("coordinator-install")
        agent = Agent(self, "agent", 1, binary=agent_bin)
        self.write("mlp.yaml", MLP)
        self.write(".cairnignore", "agent-install/\ncoordinator-install/\n")
        log = open(os.path.join(self.dir, "run.log"), "w")
        self.addCleanup(log.close)
        run = subprocess.Popen(
            [coordinator_bin, "run", "mlp.yaml", "--slots", "0", "--peers", agent.address,
             "--key-file", self.key], cwd=self.dir, env=self.cairn_env(self.env()),
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: run.poll() is None and run.kill())
        # Once the coordinator runs its image, its binary's path goes away: the agent cannot
        # run the coordinator's cairn by that path, only its own.
        wait_until(lambda: os.readlink("/proc/%d/exe" % run.pid) == coordinator_bin,
                   what="the coordinator's exec")
        os.unlink(coordinator_bin)
        self.assertEqual(run.wait(timeout=240), 0, open(os.path.join(self.dir, "run.log")).read())
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["placement"][0]["machine"], agent.address, trial)
        started = agent.lines("started rank")
        self.assertEqual(len(started), 1, agent.text())
        self.assertIn(": %s in work/" % agent_bin, started[0])
        self.assertTrue(self.cairn_json("metrics", "1.1", "--json")["validation"])


class DataCheckBeforePlacementTest(AgentOpsCase):
    @needs("userns", USERNS, USERNS_WHY)
    def test_an_agent_without_the_data_gets_no_trial_and_no_start_is_spent(self):
        # Data over the snapshot limit (1 MiB) is not shipped: each agent must have it at
        # the same path. One agent sees other bytes there (a mount namespace of its own).
        big = os.path.join(self.dir, "big")
        self.write("big/x.bin", "x" * (1536 * 1024))
        self.write("train.py", TRAIN)
        self.write("exp.yaml", DATA_CONFIG)
        self.write(".cairnignore", "*.log\nhome/\nother/\nlacking/\ngood/\ncluster.key\n")
        other = os.path.join(self.dir, "other")
        os.makedirs(other)
        with open(os.path.join(other, "x.bin"), "w") as f:
            f.write("y" * (1536 * 1024))
        lacking = Agent(self, "lacking", 2, wrap=[
            "unshare", "-rm", "sh", "-c", 'mount --bind "$0" "$1" && shift && exec "$@"',
            other, big])
        good = Agent(self, "good", 1)
        # The agent that lacks the data is listed first and has more slots: placement
        # would pick it first.
        proc = self.cairn("run", "exp.yaml", "--slots", "0", "--peers",
                          lacking.address + "," + good.address, "--key-file", self.key,
                          env=self.env(), timeout=240)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        why = ("data %s on this machine is not what the experiment recorded: 1 changed "
               "(%s/x.bin)" % (big, big))
        warning = ("warning: agent %s cannot run this experiment (%s: %s); its slots are not "
                   "used" % (lacking.address, lacking.address, why))
        self.assertEqual(proc.stderr.count(warning), 1, proc.stderr)
        trials = self.cairn_json("show", "1", "--json")["trials"]
        self.assertEqual([t["state"] for t in trials], ["COMPLETED"] * 4, trials)
        for t in trials:
            record = self.cairn_json("show", t["id"], "--json")
            self.assertEqual(record["placement"][0]["machine"], good.address, record)
            # Started once: no start was spent on the agent that lacks the data.
            self.assertIn("[%s] attempt 1\n" % t["id"], proc.stdout)
            self.assertIn("[%s] data xxxx\n" % t["id"], proc.stdout)
        self.assertNotIn("attempt 2", proc.stdout)
        # It was asked (data_check) and never launched anything.
        self.assertTrue(lacking.lines("data refused for"), lacking.text())
        self.assertFalse(lacking.lines("started rank"), lacking.text())
        self.assertFalse(lacking.lines("refused a launch"), lacking.text())
        self.assertEqual(len(good.lines("started rank")), 4, good.text())


WAITING = r"""
import os, time
import cairn

ctx = cairn.init()
print("running in", os.getcwd(), flush=True)
deadline = time.monotonic() + 120
while not os.path.exists(os.environ["GO_FILE"]) and time.monotonic() < deadline:
    time.sleep(0.05)
for op in ctx.operations():
    ctx.report_validation(op.length, {"val_loss": 0.5})
"""


def aged(path, days):
    t = time.time() - days * 86400
    os.utime(path, (t, t), follow_symlinks=False)


class AgentGarbageCollectionTest(AgentOpsCase):
    def test_unused_entries_go_at_start_and_periodically_a_live_runs_stay(self):
        d = os.path.join(self.dir, "gc-agent")
        old = {
            "code": os.path.join(d, "code", "a" * 40),
            "data": os.path.join(d, "data", "c" * 64),
            "run": os.path.join(d, "work", "runs", "00000000000000aa"),
            "object": os.path.join(d, "objects", "ab", "e" * 62),
            "stage": os.path.join(d, "work", "runs", ".stage-k1"),
            "checkpoint": os.path.join(d, "work", "trials", "9.9", "checkpoints", "attempt-1-x"),
        }
        for path in old.values():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if path.endswith("e" * 62) or path.endswith("c" * 64):
                with open(path, "w") as f:
                    f.write("x" * 100)
            else:
                os.makedirs(path)
                with open(os.path.join(path, "f"), "w") as f:
                    f.write("x")
        os.chmod(old["code"], 0o555)  # checkouts are read-only
        young = os.path.join(d, "data", "d" * 64)
        with open(young, "w") as f:
            f.write("y")
        for path in old.values():
            aged(path, 30)
        agent = Agent(self, "gc-agent", 1, "--keep-days", "7",
                      env={"CAIRN_AGENT_GC_INTERVAL": "1"})
        line = agent.wait_log("collected " + d + ": ")
        self.assertIn("removed 1 code checkout, 1 data file, 1 run directory, 1 checkpoint "
                      "object, 2 staging leftovers (", line)
        for kind, path in old.items():
            self.assertFalse(os.path.exists(path), kind)
        self.assertTrue(os.path.exists(young))
        self.assertEqual(os.listdir(os.path.join(d, ".trash")), [])

        # A run in use stays, however old it looks, while its coordinator is connected.
        go = os.path.join(self.dir, "go")
        self.write("train.py", WAITING)
        self.write("exp.yaml", """name: gc
entrypoint: [python3, train.py]
searcher: {name: single, metric: val_loss, max_length: 1}
max_restarts: 0
""")
        self.write(".cairnignore", "*.log\nhome/\ngc-agent/\ncluster.key\n")
        log = open(os.path.join(self.dir, "run.log"), "w")
        self.addCleanup(log.close)
        run = subprocess.Popen(
            [CAIRN, "run", "exp.yaml", "--slots", "0", "--peers", agent.address, "--key-file",
             self.key], cwd=self.dir, env=self.cairn_env(self.env({"GO_FILE": go})),
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: run.poll() is None and run.kill())
        agent.wait_log("started rank")
        runs = os.path.join(d, "work", "runs")
        run_dir = os.path.join(runs, [n for n in os.listdir(runs) if not n.startswith(".")][0])
        aged(run_dir, 30)
        seen = len(agent.lines("collected "))
        wait_until(lambda: len(agent.lines("collected ")) >= seen + 2, timeout=30,
                   what="two more collections")
        self.assertTrue(os.path.isdir(run_dir))
        self.assertIn("1 directory in use", agent.lines("collected ")[-1])
        with open(go, "w"):
            pass
        self.assertEqual(run.wait(timeout=120), 0, open(os.path.join(self.dir, "run.log")).read())
        # The coordinator is gone: its run directory, not used for 30 days, goes next.
        wait_until(lambda: not os.path.exists(run_dir), timeout=30,
                   what="the run directory collected")
        self.assertTrue(any("1 run directory" in l for l in agent.lines("collected ")))


if __name__ == "__main__":
    from cairn_testlib import main
    main()
