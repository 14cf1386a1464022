"""`cairn resume` adopts the ranks an agent kept after its coordinator was killed (issue 17
item 8, docs/peers.md "Adoption"): real `cairn agent`s on loopback, a `cairn run --slots 0`
killed with SIGKILL mid-trial, and a `cairn resume` within the reattach window that goes on
with the SAME rank processes: no restart counted, no step run twice, every training metric
stored once, and the validations and checkpoints made after the resume registered. A gang
over two agents is adopted the same way; a gang that lost a rank while cairn was away is
not, and restarts from its latest checkpoint as before adoption existed."""
import json
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, wait_until  # noqa: E402
from test_peers_placement import Agent, PlacementCase  # noqa: E402

# Says its pid, appends every step it runs to $STEPS_DIR/rank<RANK> (so a step run twice
# shows), checkpoints every 2 units and resumes from its checkpoint.
TRAIN = r"""
import os, sys, time
import cairn

ctx = cairn.init()
rank = int(os.environ.get("RANK", "0"))
print("pid", os.getpid(), "starts at", ctx.steps_completed, flush=True)
steps = open(os.path.join(os.environ["STEPS_DIR"], "rank%d" % rank), "a")
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        time.sleep(float(os.environ.get("STEP_SECONDS", "0.05")))
        step += 1
        steps.write("%d %d\n" % (os.getpid(), step))
        steps.flush()
        ctx.report_training(step, {"loss": 1.0 / step})
        print("step", step, flush=True)
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / ("step%d" % rank)).write_text(str(step))
        if ctx.should_preempt():
            sys.exit(0)
    ctx.report_validation(step, {"val_loss": 1.0 / (step + 1)})
"""

CONFIG = """name: adopt
entrypoint: /usr/bin/python3 %s
searcher: {name: single, metric: val_loss, max_length: %d}
resources: {slots_per_trial: %d}
checkpoint: {period: 2}
max_restarts: 0
reattach_window: 600
"""


def alive(pid):
    """Whether `pid` runs (a zombie does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"
    except OSError:
        return False


class AdoptTest(PlacementCase):
    LENGTH = 40

    def setUp(self):
        super().setUp()
        self.write("train.py", TRAIN)
        self.steps_dir = os.path.join(self.dir, "steps")
        os.makedirs(self.steps_dir)

    def run_env(self):
        return self.env({"STEP_SECONDS": "0.2", "STEPS_DIR": self.steps_dir,
                         "CAIRN_KEY_FILE": self.key})

    def start_run(self, peers, ranks=1):
        self.write("exp.yaml", CONFIG % (os.path.join(self.dir, "train.py"), self.LENGTH, ranks))
        self.run_out = os.path.join(self.dir, "run.out")
        out = open(self.run_out, "w")
        self.addCleanup(out.close)
        run = subprocess.Popen([CAIRN, "run", "exp.yaml", "--slots", "0", "--peers", peers],
                               cwd=self.dir, env=self.cairn_env(self.run_env()), stdout=out,
                               stderr=subprocess.STDOUT)
        self.addCleanup(lambda: run.poll() is None and (run.kill(), run.wait()))
        return run

    def run_output(self):
        with open(self.run_out) as f:
            return f.read()

    def pids(self, text):
        """The rank processes that started, in order: (pid, units done at its start)."""
        return [(int(p), int(s)) for p, s in
                re.findall(r"\[1\.1(?::\d)?\] pid (\d+) starts at (\d+)", text)]

    def steps_run(self, rank=0):
        with open(os.path.join(self.steps_dir, "rank%d" % rank)) as f:
            return [tuple(int(x) for x in line.split()) for line in f if line.strip()]

    def kill_later(self, pid):
        self.addCleanup(lambda: alive(pid) and os.kill(pid, signal.SIGKILL))

    def checkpoints(self):
        shown = self.cairn("show", "1.1", "--json")
        return json.loads(shown.stdout)["checkpoints"] if shown.returncode == 0 else None

    def kill_coordinator(self, run, agents, ranks):
        """Kills `cairn run` once the trial has a registered checkpoint and has gone on past
        it; returns the ranks' pids (rank order) and the step the trial was at."""
        wait_until(lambda: re.search(r"\[1\.1(:\d)?\] step 5\n", self.run_output()),
                   timeout=90, what="step 5")
        wait_until(self.checkpoints, timeout=60, what="a registered checkpoint")
        wait_until(lambda: len(self.pids(self.run_output())) >= ranks, timeout=30,
                   what="every rank's pid line")
        pids = [p for p, _ in self.pids(self.run_output())]
        for pid in pids:
            self.kill_later(pid)
        run.kill()
        run.wait(timeout=30)
        for agent in agents:
            agent.wait_log("kept 1 ranks of")
        return pids

    def resume(self):
        proc = self.cairn("resume", "1", env=self.run_env(), timeout=240)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        return proc.stdout + proc.stderr

    def assert_ran_once(self, pids, ranks):
        for rank in range(ranks):
            ran = self.steps_run(rank)
            steps = [s for _, s in ran]
            self.assertEqual(steps, list(range(1, self.LENGTH + 1)), ran)  # none twice
            self.assertEqual({p for p, _ in ran}, {pids[rank]}, ran)       # one process

    def test_resume_adopts_a_single_rank_and_runs_nothing_twice(self):
        a = Agent(self, "agent-a", 1)
        run = self.start_run(a.address)
        pids = self.kill_coordinator(run, [a], 1)
        at_kill = len(self.steps_run())
        self.assertTrue(alive(pids[0]))
        text = self.resume()
        if os.environ.get("ADOPT_DEBUG"):
            print(text, a.text(), self.cairn("show", "1.1", "--json").stdout, file=sys.stderr)
        self.assertIn("trial 1.1: adopted its rank on %s (pid %d), left running while cairn "
                      "was away" % (a.address, pids[0]), text)
        self.assertEqual(self.pids(text), [], text)  # nothing started
        a.wait_log("adopted rank")
        self.assertNotIn("did not resume it", a.text())
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        self.assert_ran_once(pids, 1)
        metrics = self.cairn_json("metrics", "1.1", "--json")
        self.assertEqual([p["step"] for p in metrics["training"]],
                         list(range(1, self.LENGTH + 1)))
        self.assertEqual([p["step"] for p in metrics["validation"]], [self.LENGTH])
        # Checkpoints the adopted process took after the resume are registered.
        steps = [c["steps_completed"] for c in trial["checkpoints"]]
        self.assertTrue(any(s > at_kill for s in steps), (at_kill, steps))
        # Its output while cairn was away reached the trial's log once.
        log = self.cairn("logs", "1.1").stdout
        for step in range(1, self.LENGTH + 1):
            self.assertEqual(log.count("step %d\n" % step), 1, (step, log))


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
