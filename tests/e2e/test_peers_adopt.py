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
from peer_testlib import alive  # noqa: E402
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
                if step == int(os.environ.get("HOLD_CHECKPOINT", "0")):
                    # Held inside checkpoint(step) until the test says so (a marker file).
                    hold = os.path.join(os.environ["STEPS_DIR"], "hold")
                    open(hold + ".in", "w").close()
                    deadline = time.monotonic() + 120
                    while not os.path.exists(hold + ".go") and time.monotonic() < deadline:
                        time.sleep(0.01)
                    open(hold + ".left", "w").close()  # checkpoint_end goes out next
            if step == int(os.environ.get("HOLD_CHECKPOINT", "0")):
                open(os.path.join(os.environ["STEPS_DIR"], "hold.ended"), "w").close()
        if ctx.should_preempt():
            sys.exit(0)
    ctx.report_validation(step, {"val_loss": 1.0 / (step + 1)})
"""

CONFIG = """name: adopt
entrypoint: /usr/bin/python3 %s
searcher: {name: single, metric: val_loss, max_length: %d}
resources: {slots_per_trial: %d}
checkpoint: {period: 2, keep_trial_latest: 100}
max_restarts: 0
reattach_window: 600
"""


class AdoptTest(PlacementCase):
    LENGTH = 40

    def setUp(self):
        super().setUp()
        self.write("train.py", TRAIN)
        self.steps_dir = os.path.join(self.dir, "steps")
        os.makedirs(self.steps_dir)

    def run_env(self, extra=None):
        env = {"STEP_SECONDS": "0.2", "STEPS_DIR": self.steps_dir, "CAIRN_KEY_FILE": self.key}
        env.update(extra or {})
        return self.env(env)

    def start_run(self, peers, ranks=1, env=None):
        self.write("exp.yaml", CONFIG % (os.path.join(self.dir, "train.py"), self.LENGTH, ranks))
        self.run_out = os.path.join(self.dir, "run.out")
        out = open(self.run_out, "w")
        self.addCleanup(out.close)
        run = subprocess.Popen([CAIRN, "run", "exp.yaml", "--slots", "0", "--peers", peers],
                               cwd=self.dir, env=self.cairn_env(self.run_env(env)), stdout=out,
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
        # Every checkpoint once, those the adopted process took after the resume included.
        steps = sorted(c["steps_completed"] for c in trial["checkpoints"])
        self.assertEqual(steps, list(range(2, self.LENGTH + 1, 2)), (at_kill, steps))
        # Its output while cairn was away reached the trial's log once.
        log = self.cairn("logs", "1.1").stdout
        for step in range(1, self.LENGTH + 1):
            self.assertEqual(log.count("step %d\n" % step), 1, (step, log))

    def test_a_checkpoint_ended_while_cairn_was_killed_is_registered_after_the_resume(self):
        # The trial is inside checkpoint(6) when cairn stops answering (SIGSTOP) and then
        # dies (SIGKILL): its checkpoint_end, for the directory the dead coordinator staged
        # on the agent, reaches the resumed one, which registers it and acknowledges.
        a = Agent(self, "agent-a", 1)
        hold = os.path.join(self.steps_dir, "hold")
        run = self.start_run(a.address, env={"HOLD_CHECKPOINT": "6"})
        wait_until(lambda: os.path.exists(hold + ".in"), timeout=90, what="checkpoint(6)")
        pid = self.pids(self.run_output())[0][0]
        self.kill_later(pid)
        run.send_signal(signal.SIGSTOP)
        open(hold + ".go", "w").close()
        # Its checkpoint_end goes out as the block ends, to a coordinator that reads nothing;
        # the trial then waits for the ack. (Should the kill come before the agent relayed
        # it, the request reaches the resumed coordinator after the replay instead: the
        # same outcome.)
        wait_until(lambda: os.path.exists(hold + ".left"), timeout=30, what="the block's end")
        run.kill()
        run.wait(timeout=30)
        a.wait_log("kept 1 ranks of")
        self.assertFalse(os.path.exists(hold + ".ended"))  # no ack: still waiting
        text = self.resume()
        self.assertIn("adopted its rank on %s (pid %d)" % (a.address, pid), text)
        self.assertTrue(os.path.exists(hold + ".ended"))
        self.assertNotIn("was not saved", text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        steps = sorted(c["steps_completed"] for c in trial["checkpoints"])
        self.assertEqual(steps, list(range(2, self.LENGTH + 1, 2)), trial)
        self.assert_ran_once([pid], 1)
        metrics = self.cairn_json("metrics", "1.1", "--json")
        self.assertEqual([p["step"] for p in metrics["training"]],
                         list(range(1, self.LENGTH + 1)))

    def test_resume_adopts_a_gang_over_two_agents(self):
        a = Agent(self, "agent-a", 1)
        b = Agent(self, "agent-b", 1)
        run = self.start_run(a.address + "," + b.address, ranks=2)
        pids = self.kill_coordinator(run, [a, b], 2)
        at_kill = len(self.steps_run(0))
        text = self.resume()
        self.assertEqual(len(re.findall(r"trial 1\.1:\d: adopted its rank on", text)), 2, text)
        self.assertEqual(self.pids(text), [], text)  # nothing started
        for agent in (a, b):
            agent.wait_log("adopted rank")
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        ran = {}
        for rank in (0, 1):
            ran[rank] = self.steps_run(rank)
            self.assertEqual([s for _, s in ran[rank]], list(range(1, self.LENGTH + 1)), ran)
            self.assertEqual(len({p for p, _ in ran[rank]}), 1, ran)
        self.assertEqual(sorted(p for r in ran.values() for p, _ in r[:1]), sorted(pids))
        metrics = self.cairn_json("metrics", "1.1", "--json")
        self.assertEqual([p["step"] for p in metrics["training"]],
                         list(range(1, self.LENGTH + 1)))
        self.assertEqual([p["step"] for p in metrics["validation"]], [self.LENGTH])
        # Checkpoint rounds after the resume are registered, each once. (One the gang was
        # in when cairn was killed is rebuilt from the agents' replay and registered too,
        # unless its parts were lost: docs/peers.md "A round the kill split";
        # test_peers_adopt_rounds.py lands the kill in each window on purpose.)
        steps = [c["steps_completed"] for c in trial["checkpoints"]]
        self.assertEqual(len(steps), len(set(steps)), steps)
        self.assertTrue(set(steps) <= set(range(2, self.LENGTH + 1, 2)), steps)
        self.assertTrue(any(s > at_kill + 2 for s in steps), (at_kill, steps))

    def test_a_gang_that_lost_a_rank_while_cairn_was_away_restarts_from_its_checkpoint(self):
        a = Agent(self, "agent-a", 1)
        b = Agent(self, "agent-b", 1)
        run = self.start_run(a.address + "," + b.address, ranks=2)
        pids = self.kill_coordinator(run, [a, b], 2)
        rank1 = self.steps_run(1)[0][0]
        rank0 = self.steps_run(0)[0][0]
        os.kill(rank1, signal.SIGKILL)
        wait_until(lambda: not alive(rank1), timeout=30, what="rank 1 gone")
        text = self.resume()
        self.assertIn("rank 1 on", text)
        self.assertIn("ended while cairn was away; the trial restarts from its latest "
                      "checkpoint", text)
        self.assertNotIn("adopted its rank", text)
        # Ended, not orphaned, and the note says why (docs/peers.md "Why the ranks a resume
        # does not adopt are ended, not orphaned").
        self.assertIn("1 rank it kept could not be adopted; it ends them (a gang's ranks are "
                      "a checkpoint only together", text)
        wait_until(lambda: not alive(rank0), timeout=30, what="the kept rank 0 ended")
        self.assertTrue(any("its new coordinator did not adopt it" in agent.text()
                            for agent in (a, b)))
        starts = self.pids(text)
        self.assertEqual(len(starts), 2, text)
        self.assertTrue(all(s >= 2 and p not in pids for p, s in starts), text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)  # cairn's absence is not the trial's
        metrics = self.cairn_json("metrics", "1.1", "--json")
        self.assertEqual([p["step"] for p in metrics["training"]],
                         list(range(1, self.LENGTH + 1)))


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
