"""Failures across "machines" (issue 17 item 8, docs/peers.md "A lost agent"): network
namespaces on one bridge — the coordinator in a (10.80.0.1), agents in b (10.80.0.2) and c
(10.80.0.3), each listening on port 7070 of its own machine. Only their network differs (the
file system is shared), so the test sees every process and file.

- A partition: b's link goes down for longer than the heartbeat timeout while b runs a
  trial. The trial moves to c from its latest checkpoint without spending a restart; the
  rank left running on b (an orphan of an ended attempt) registers nothing; when the link
  is back, b is used again and the orphan is gone.
- A reboot: b's agent and its rank are killed and the agent started again on the same DIR
  and port. Its slots come back, its code cache is reused (0 objects shipped), every trial
  completes. The reboot runs on loopback too (agents on ports of their own): the file's
  entry that needs nothing."""
import json
import os
import re
import signal
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, CairnTestCase, needs, wait_until  # noqa: E402
from peer_testlib import Agent, Network, agent_env, peer_home  # noqa: E402

NETNS, NETNS_WHY = cairn_testlib.netns_available()

# Reports every step and checkpoints every 4, resumes from its checkpoint, and keeps its own trace
# of the steps it trained, per trial and attempt, in TRACE (the file system is shared): the
# test's view of what each process did, whether or not cairn heard it. The loss it reports
# says which attempt reported it (1000 × the attempt, plus a fraction).
TRAIN = r"""
import os, sys, time
import cairn

ctx = cairn.init()
attempt = int(os.environ["CAIRN_ATTEMPT"])
trace = os.path.join(os.environ["TRACE"], "%s-%d" % (os.environ["CAIRN_TRIAL_ID"], attempt))
print("pid", os.getpid(), "attempt", os.environ["CAIRN_ATTEMPT"], "starts at",
      ctx.steps_completed, flush=True)
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        time.sleep(float(os.environ.get("STEP_SECONDS", "0.2")))
        step += 1
        with open(trace, "a") as f:
            f.write("%d\n" % step)
        ctx.report_training(step, {"loss": 1000 * attempt + 1.0 / step})
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / "step").write_text(str(step))
        if ctx.should_preempt():
            sys.exit(0)
    ctx.report_validation(step, {"val_loss": 1.0 / (step + 1)})
"""

# One trial at a time, so where each goes is decided by the placement rule alone: the
# machines that have the code, the freest first, ties to the first listed (b).
CONFIG = """name: failures
entrypoint: /usr/bin/python3 %s
hyperparameters: {x: {type: categorical, vals: [1, 2, 3]}}
searcher: {name: grid, metric: val_loss, max_length: %d, max_concurrent_trials: 1}
checkpoint: {period: 4}
max_restarts: 0
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FailuresCase(CairnTestCase):
    """Agents b and c (self.B, self.C), the coordinator started with self.coordinator
    before its argv."""

    def setUp(self):
        super().setUp()
        self.agents = []
        self.trace = os.path.join(self.dir, "trace")
        os.makedirs(self.trace)
        self.key = peer_home(self)
        self.write("train.py", TRAIN)

    def agent(self, n):
        """Starts machine n's agent (again: the same DIR and address, a reboot)."""
        return Agent(self, key=self.key, slots=1, dir=os.path.join(self.dir, "agent-" + n),
                     ns=self.ns.get(n), listen=self.addresses[n])

    def start_run(self, max_length, extra):
        self.write("exp.yaml", CONFIG % (os.path.join(self.dir, "train.py"), max_length))
        self.out = os.path.join(self.dir, "run.out")
        out = open(self.out, "w")
        self.addCleanup(out.close)
        env = {"TRACE": self.trace}
        env.update(extra)
        return subprocess.Popen(self.coordinator + [CAIRN, "run", "exp.yaml", "--slots", "0",
                                                    "--peers", self.B + "," + self.C,
                                                    "--key-file", self.key],
                                cwd=self.dir, env=agent_env(self, env), stdout=out,
                                stderr=subprocess.STDOUT)

    def output(self):
        with open(self.out, errors="replace") as f:
            return f.read()

    def wait_output(self, pattern, timeout=60):
        return wait_until(lambda: re.search(pattern, self.output()), timeout=timeout,
                          what="%r in the run's output" % pattern)

    def tearDown(self):
        result = self._outcome.result  # on a failure, what the run and the agents said
        if any(test is self for test, _ in result.failures + result.errors):
            print("\n--- run output:\n%s" % (self.output() if hasattr(self, "out") else ""),
                  file=sys.stderr)
            for agent in self.agents:
                print("--- %s:\n%s" % (agent.log, agent.text()), file=sys.stderr)
        super().tearDown()

    def checkpoints(self, trial):
        shown = self.cairn("show", trial, "--json")
        if shown.returncode != 0:
            return []
        return sorted(c["steps_completed"] for c in json.loads(shown.stdout)["checkpoints"])

    def traced(self, trial, attempt):
        try:
            with open(os.path.join(self.trace, "%s-%d" % (trial, attempt))) as f:
                return [int(l) for l in f.read().split()]
        except FileNotFoundError:
            return []

    def finish(self, run):
        self.assertEqual(run.wait(timeout=240), 0, self.output())
        trials = self.cairn_json("show", "1", "--json")["trials"]
        self.assertEqual([t["state"] for t in trials], ["COMPLETED"] * 3, trials)
        for t in trials:
            self.assertEqual(t["restarts"], 0, t)
        return trials

    def an_agent_that_reboots_comes_back_with_its_code_cache(self):
        b = self.agent("b")
        self.agent("c")  # where the trial moves while b is down
        run = self.start_run(25, {"CAIRN_HEARTBEAT_TIMEOUT": "2"})
        shipped = b.wait_log("received code")
        self.assertRegex(shipped, r"received code \S+ from \S+: [1-9]\d* objects")
        wait_until(lambda: self.checkpoints("1.1") and self.checkpoints("1.1")[-1] >= 3,
                   timeout=60, what="trial 1.1's checkpoint on b")
        rank = int(self.wait_output(r"\[1\.1\] pid (\d+) attempt 1 starts at 0").group(1))
        # The machine goes down: its agent and its rank die at once.
        b.process.kill()
        os.kill(rank, signal.SIGKILL)
        b.process.wait(timeout=30)
        self.wait_output(r"lost agent %s" % re.escape(self.B))
        # It comes back: the same DIR, the same address.
        again = self.agent("b")
        self.wait_output(r"agent %s is back \(1 slots?\)" % re.escape(self.B), timeout=60)
        trials = self.finish(run)
        self.assertEqual(trials[0]["placement"][0]["machine"], self.C, trials[0])
        later = [t for t in trials[1:] if t["placement"][0]["machine"] == self.B]
        self.assertTrue(later, trials)
        # Its code cache survived the reboot: nothing shipped again.
        code = again.wait_log("received code")
        self.assertRegex(code, r"received code \S+ from \S+: 0 objects, 0 bytes$")
        self.assertIn("started rank", again.text())


@needs("netns", NETNS, NETNS_WHY)
class NamespaceFailuresTest(FailuresCase):
    def setUp(self):
        super().setUp()
        self.net = Network(self, "cairnf")
        self.net.bridge("sw", "10.80.0", ["a", "b", "c", "d"])
        self.ns = self.net.ns
        self.addresses = {n: self.net.addresses[(n, "eth0")] + ":7070" for n in ("b", "c", "d")}
        self.B, self.C = self.addresses["b"], self.addresses["c"]
        self.coordinator = self.net.run_in("a")

    def test_an_agent_that_reboots_comes_back_with_its_code_cache(self):
        self.an_agent_that_reboots_comes_back_with_its_code_cache()

    def test_a_partition_longer_than_the_heartbeat_timeout_moves_the_trial(self):
        b, c = self.agent("b"), self.agent("c")
        run = self.start_run(25, {"CAIRN_HEARTBEAT_TIMEOUT": "2"})
        b.wait_log("started rank")
        # Cut once the rank has trained past a registered checkpoint (so not while it waits
        # for that checkpoint's answer): it goes on until its next one.
        wait_until(lambda: self.checkpoints("1.1") and
                   max(self.traced("1.1", 1)) > self.checkpoints("1.1")[-1],
                   timeout=60, what="trial 1.1 past its checkpoint on b")
        orphan = int(self.wait_output(r"\[1\.1\] pid (\d+) attempt 1 starts at 0").group(1))
        self.net.link("b", up=False)
        # (2 s or a little more: the check runs every second)
        self.wait_output(r"lost agent %s \(no heartbeat for [2-9] s\)" % re.escape(self.B))
        # The trial starts again on c while b is still cut off.
        c.wait_log("started rank")
        resumed = self.wait_output(r"\[1\.1\] pid \d+ attempt 2 starts at (\d+)")
        # Cut off, the orphan on b trains on past the step attempt 2 resumed from, until its
        # next checkpoint, which waits for an answer that never comes.
        wait_until(lambda: max(self.traced("1.1", 1)) % 4 == 0 and
                   max(self.traced("1.1", 1)) > int(resumed.group(1)), timeout=30,
                   what="the orphan on b training on during the partition")
        self.net.link("b", up=True)
        self.wait_output(r"agent %s is back \(1 slots?\)" % re.escape(self.B), timeout=60)
        # The orphan is ended once b hears its connection is gone.
        wait_until(lambda: not os.path.exists("/proc/%d" % orphan), timeout=60,
                   what="the orphaned rank on b ended")
        trials = self.finish(run)
        text = self.output()
        self.assertIn("trial 1.1 lost its machine", text)
        self.assertGreaterEqual(int(resumed.group(1)), 4, text)
        first = trials[0]
        self.assertEqual(first["placement"][0]["machine"], self.C, first)
        # b was used again after the link came back.
        self.assertIn(self.B, [t["placement"][0]["machine"] for t in trials[1:]], trials)
        # Nothing of the orphan's late steps was registered.
        orphan_steps = self.traced("1.1", 1)
        late = [s for s in orphan_steps if s > int(resumed.group(1))]
        self.assertTrue(late, orphan_steps)
        checkpoints = self.checkpoints("1.1")
        self.assertEqual(checkpoints, sorted(set(checkpoints)), checkpoints)
        self.assertEqual(checkpoints[-1], 25)
        metrics = self.cairn_json("metrics", "1.1", "--json")["training"]
        steps = [p["step"] for p in metrics]
        self.assertEqual(steps, sorted(set(steps)), "no step reported twice: %s" % steps)
        self.assertEqual(steps, list(range(1, 26)), metrics)
        # Each step past the resume point was reported by attempt 2, never by the orphan.
        resumed_at = int(resumed.group(1))
        by = {p["step"]: int(p["metrics"]["loss"] // 1000) for p in metrics}
        self.assertEqual({s: by[s] for s in late}, {s: 2 for s in late}, metrics)
        self.assertEqual(set(by[s] for s in steps if s > resumed_at), {2}, metrics)

    def test_the_only_agent_cut_off_for_long_frees_its_orphans_slot_for_the_next_launch(self):
        # b alone: the trial waits for it. Cut off for longer than the heartbeat timeout, b
        # lets the silent connection go and keeps its session's orphan for reattach_window
        # (docs/peers.md "Reattach"); the coordinator's close may reach it long after it is
        # back, or never. When b is back, the coordinator's new session ends the orphan its
        # old one left, and its launch there must find the slot free, not fail the trial
        # for want of one.
        b = Agent(self, key=self.key, slots=1, dir=os.path.join(self.dir, "agent-b"),
                  ns=self.ns["b"], listen=self.B)
        self.write("exp.yaml", CONFIG.replace("vals: [1, 2, 3]", "vals: [1]")
                   % (os.path.join(self.dir, "train.py"), 25))
        self.out = os.path.join(self.dir, "run.out")
        out = open(self.out, "w")
        self.addCleanup(out.close)
        env = agent_env(self, {"TRACE": self.trace, "CAIRN_HEARTBEAT_TIMEOUT": "2"})
        run = subprocess.Popen(self.coordinator + [CAIRN, "run", "exp.yaml", "--slots", "0",
                                                   "--peers", self.B, "--key-file", self.key],
                               cwd=self.dir, env=env, stdout=out, stderr=subprocess.STDOUT)
        wait_until(lambda: self.checkpoints("1.1") and
                   max(self.traced("1.1", 1)) > self.checkpoints("1.1")[-1],
                   timeout=60, what="trial 1.1 past its checkpoint on b")
        orphan = int(self.wait_output(r"\[1\.1\] pid (\d+) attempt 1 starts at 0").group(1))
        self.net.link("b", up=False)
        self.wait_output(r"lost agent %s" % re.escape(self.B))
        dropped = b.wait_log("nothing heard for")
        self.assertRegex(dropped, r"dropped 10\.80\.0\.1:\d+: nothing heard for \d+ s")
        self.assertTrue(os.path.exists("/proc/%d" % orphan), "the orphan is kept while cut off")
        self.net.link("b", up=True)
        self.wait_output(r"agent %s is back" % re.escape(self.B), timeout=60)
        wait_until(lambda: not os.path.exists("/proc/%d" % orphan), timeout=30,
                   what="the orphaned rank on b ended by the coordinator's new session")
        self.assertEqual(run.wait(timeout=240), 0, self.output())
        self.assertNotIn("no free slot", self.output() + b.text())
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        self.assertEqual(trial["placement"][0]["machine"], self.B)
        resumed = self.wait_output(r"\[1\.1\] pid \d+ attempt 2 starts at (\d+)")
        self.assertGreaterEqual(int(resumed.group(1)), 4)

    def test_a_partition_of_a_gangs_machine_restarts_the_gang_elsewhere_bit_exact(self):
        # builtin:mlp's 2 ranks on b and c (one slot each; d, the third, idle). b is cut off:
        # the gang stops on c too and starts again on c and d from its latest checkpoint,
        # with no restart counted, and ends as the same gang uninterrupted on one machine.
        self.write("mlp.yaml", MLP)
        self.cairn("run", "mlp.yaml", "--slots", "2", check=0, env=agent_env(self), timeout=240)
        alone = self.cairn_json("metrics", "1.1", "--json")
        for name in ("b", "c"):
            self.agent(name)  # the two machines the gang starts on
        d = self.agent("d")
        out = open(os.path.join(self.dir, "run.out"), "w")
        self.addCleanup(out.close)
        self.out = out.name
        run = subprocess.Popen(self.coordinator + [CAIRN, "run", "mlp.yaml", "--slots", "0",
                                                   "--peers", ",".join([self.B, self.C,
                                                                        self.addresses["d"]]),
                                                   "--key-file", self.key],
                               cwd=self.dir, env=agent_env(self, {"CAIRN_HEARTBEAT_TIMEOUT": "2"}),
                               stdout=out, stderr=subprocess.STDOUT)
        self.wait_output(r"trial 2\.1 started on %s ×1, %s ×1" % (re.escape(self.B),
                                                                   re.escape(self.C)))
        wait_until(lambda: self.checkpoints("2.1") and self.checkpoints("2.1")[-1] >= 3,
                   timeout=60, what="trial 2.1's checkpoint")
        self.net.link("b", up=False)
        self.wait_output(r"lost agent %s \(no heartbeat for [2-9] s\)" % re.escape(self.B))
        d.wait_log("started rank")
        self.net.link("b", up=True)
        self.assertEqual(run.wait(timeout=240), 0, self.output())
        trial = self.cairn_json("show", "2.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        self.assertEqual(sorted(p["machine"] for p in trial["placement"]),
                         sorted([self.C, self.addresses["d"]]), trial["placement"])
        self.assertIn("trial 2.1 lost its machine", self.output())
        # The gang stopped because its rank on b was lost, not "killed by signal 9".
        self.assertRegex(self.output(), r"\[2\.1\] cairn: rank \d was lost with agent %s; "
                         r"stopping the other ranks" % re.escape(self.B))
        # Started twice, the second time from a checkpoint past the third epoch.
        starts = [int(e) for e in re.findall(r"\[2\.1\] builtin:mlp: .*epochs completed: (\d+);",
                                             self.output())]
        self.assertEqual(len(starts), 2, self.output())
        self.assertEqual(starts[0], 0)
        self.assertGreaterEqual(starts[1], 3)
        split = self.cairn_json("metrics", "2.1", "--json")
        self.assertEqual(split["validation"], alone["validation"])
        self.assertEqual(split["training"], alone["training"])


MLP = """name: mlp-gang
entrypoint: builtin:mlp
hyperparameters: {dataset: teacher, samples: 65536, hidden: 64, batch_size: 64, threads: 1,
                  device: cpu}
searcher: {name: single, metric: val_loss, max_length: 24}
resources: {slots_per_trial: 2}
checkpoint: {period: 1}
reproducibility: {seed: 5, deterministic: true}
max_restarts: 0
"""


class LoopbackFailuresTest(FailuresCase):
    """The reboot with both agents on loopback, each on a port of its own picked once."""

    def setUp(self):
        super().setUp()
        self.ns = {}
        self.addresses = {n: "127.0.0.1:%d" % free_port() for n in ("b", "c")}
        self.B, self.C = self.addresses["b"], self.addresses["c"]
        self.coordinator = []

    def test_an_agent_that_reboots_comes_back_with_its_code_cache(self):
        self.an_agent_that_reboots_comes_back_with_its_code_cache()


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
