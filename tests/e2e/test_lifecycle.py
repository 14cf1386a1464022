"""End to end: pause, Ctrl-C, kill, and resume (one experiment, and --all after kill -9); a
closed stdout (`cairn run x.yaml | head -1`) and a resume of a search that never started."""
import os
import re
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, CairnTestCase, needs, wait_until  # noqa: E402
import cairn_testlib  # noqa: E402

TRAIN = r'''
import os, sys, time
import cairn

ctx = cairn.init()
step = ctx.steps_completed
if ctx.latest_checkpoint:
    assert int((ctx.latest_checkpoint / "step").read_text()) == step
print("start", step, flush=True)
for op in ctx.operations():
    while step < op.length:
        time.sleep(0.1)
        step += 1
        with open(os.path.join(os.environ["CAIRN_WORKDIR"], "units.txt"), "a") as f:
            f.write("%d\n" % step)
        ctx.report_training(step, {"loss": 1.0 / step})
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / "step").write_text(str(step))
            if ctx.should_preempt():
                print("preempted", step, flush=True)
                sys.exit(0)
    ctx.report_validation(step, {"val_loss": 1.0 / step})
'''

CONFIG = """entrypoint: /usr/bin/python3 train.py
searcher: {name: single, metric: val_loss, max_length: 30}
checkpoint: {period: 4}
"""


# A small ASHA search over the built-in trainer, one trial at a time so that its decisions do
# not depend on which of two trials happens to report first: two runs of it are comparable.
ASHA = """name: piped
entrypoint: builtin:mlp
hyperparameters:
  dataset: spirals
  lr: {type: log, minval: -3, maxval: -1, base: 10}
  hidden: {type: int, minval: 8, maxval: 32}
searcher: {name: asha, metric: val_loss, max_length: 9, max_trials: 5, divisor: 3,
           max_rungs: 3, max_concurrent_trials: 1}
checkpoint: {period: 3}
reproducibility: {seed: 77, deterministic: true}
"""

# One data-parallel trial (two ranks): `--slots 1` cannot start it, a plain resume can.
TWO_RANKS = """name: two-ranks
entrypoint: builtin:mlp
hyperparameters: {lr: 0.05, hidden: 16, dataset: spirals}
searcher: {name: single, metric: val_loss, max_length: 3}
resources: {slots_per_trial: 2}
reproducibility: {seed: 5, deterministic: true}
"""


# Starts a child in its own process group that would outlive it, and notes its pid and each
# attempt's life (start and end times) in the workdir. A step takes 2 s while `slow` exists
# there, 0.05 s otherwise.
PARENT = r'''
import atexit, os, subprocess, sys, time
import cairn

out = os.environ["CAIRN_WORKDIR"]
def note(name, text):
    with open(os.path.join(out, name), "a") as f:
        f.write(text + "\n")
note("attempts.txt", "start %f %d" % (time.time(), os.getpid()))
atexit.register(lambda: note("attempts.txt", "end %f %d" % (time.time(), os.getpid())))
note("children.txt", str(subprocess.Popen(["sleep", "1000"]).pid))
ctx = cairn.init()
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        time.sleep(2 if os.path.exists(os.path.join(out, "slow")) else 0.05)
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / "step").write_text(str(step))
            if ctx.should_preempt():
                sys.exit(0)
    ctx.report_validation(step, {"val_loss": 1.0 / step})
'''


def alive(pid):
    """True while `pid` runs (a zombie has ended)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def trial_outcomes(experiment):
    """What a search decided and what its trials did, without ids, times and pids."""
    return [(t["id"].split(".")[1], t["state"], t["hparams"], t["seed"], t["steps_completed"],
             t["best_validation"]) for t in experiment["trials"]]


class LifecycleTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.write("train.py", TRAIN)
        self.write("exp.yaml", CONFIG)
        self.env = dict(os.environ, NO_COLOR="1")

    def start(self, *args):
        proc = subprocess.Popen([CAIRN, *args], cwd=self.dir, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        return proc

    def steps_reported(self):
        proc = self.cairn("metrics", "1.1", "--json")
        if proc.returncode != 0:
            return 0
        import json
        return len(json.loads(proc.stdout)["training"])

    def assert_completed_exactly_once(self):
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED")
        self.assertEqual(trial["restarts"], 0, "pauses and interruptions are not failures")
        steps = [p["step"] for p in self.cairn_json("metrics", "1.1", "--json")["training"]]
        self.assertEqual(steps, list(range(1, 31)))

    def test_pause_then_resume(self):
        run = self.start("run", "exp.yaml")
        wait_until(lambda: self.steps_reported() >= 3, what="training to start")
        pause = self.cairn("pause", "1", timeout=120)
        self.assertEqual(pause.returncode, 0, pause.stdout + pause.stderr)
        out, _ = run.communicate(timeout=60)
        self.assertEqual(run.returncode, 0, out)
        self.assertIn("paused", out)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "PAUSED")
        self.assertEqual(self.cairn_json("show", "1.1", "--json")["state"], "PAUSED")
        resumed = self.cairn("resume", "1", check=0, timeout=120)
        self.assertIn("[1.1] start", resumed.stdout)
        self.assertNotIn("[1.1] start 0", resumed.stdout, "resumed from its checkpoint")
        self.assert_completed_exactly_once()
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "COMPLETED")

    def test_a_project_moved_with_its_store_resumes_at_its_new_place(self):
        # With data too large to keep in the store, which its trials read through the run
        # directory's links: they must find it at the new place too.
        self.write("exp.yaml", CONFIG + "data: [data/]\nreproducibility: {snapshot_limit_mb: 1}\n")
        self.write("train.py", TRAIN.replace(
            'print("start", step, flush=True)',
            'print("start", step, os.path.getsize(os.path.join("data", "big.bin")), flush=True)'))
        os.makedirs(os.path.join(self.dir, "data"))
        with open(os.path.join(self.dir, "data", "big.bin"), "wb") as f:
            f.write(b"\1" * (5 << 19))
        run = self.start("run", "exp.yaml")
        wait_until(lambda: self.steps_reported() >= 3, what="training to start")
        self.assertEqual(self.cairn("pause", "1", timeout=120).returncode, 0)
        run.communicate(timeout=60)
        moved = self.dir + "-moved"
        os.rename(self.dir, moved)
        self.addCleanup(shutil.rmtree, moved, True)
        self.dir = moved
        resumed = self.cairn("resume", "1", timeout=120)
        self.assertEqual(resumed.returncode, 0, resumed.stdout + resumed.stderr)
        self.assertIn("the project moved", resumed.stdout)
        self.assertNotIn("warning", resumed.stderr)
        self.assertIn(" %d\n" % (5 << 19), resumed.stdout)  # the trial read the data
        self.assert_completed_exactly_once()
        # The trial's outputs went to the workdir at its new place (CAIRN_WORKDIR).
        with open(os.path.join(moved, "units.txt")) as f:
            self.assertEqual([int(u) for u in f.read().split()][-1], 30)

    def test_pause_names_the_trials_it_still_waits_for(self):
        # A trial that never calls checkpoint_due() cannot be told to stop: it runs until
        # the test releases it, and `cairn pause` says what it is waiting for meanwhile.
        self.write("busy.py", "import os, time\nimport cairn\nctx = cairn.init()\n"
                   "release = os.path.join(os.environ['CAIRN_WORKDIR'], 'release')\n"
                   "step = 0\n"
                   "held = time.monotonic() + 120  # not past a test that failed\n"
                   "while not os.path.exists(release) and time.monotonic() < held:\n"
                   "    step += 1\n"
                   "    ctx.report_training(step, {'loss': 1.0 / step})\n"
                   "    time.sleep(0.05)\n")
        self.write("busy.yaml", "entrypoint: /usr/bin/python3 busy.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 5}\n")
        run = subprocess.Popen([CAIRN, "run", "busy.yaml"], cwd=self.dir,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(run.kill)
        wait_until(lambda: self.cairn("show", "1.1", "--json").returncode == 0 and
                   self.cairn_json("show", "1.1", "--json")["state"] == "RUNNING",
                   what="trial 1.1 to run")
        out = open(os.path.join(self.dir, "pause.out"), "w+")
        self.addCleanup(out.close)
        pause = subprocess.Popen([CAIRN, "pause", "1"], cwd=self.dir, stdout=out,
                                 stderr=subprocess.STDOUT)
        self.addCleanup(pause.kill)
        note = ("cairn: still waiting for trial 1.1: a trial stops at its next "
                "checkpoint_due(); a second `cairn pause 1` stops it at once (it resumes from "
                "its latest checkpoint)")
        wait_until(lambda: note in open(out.name).read(), timeout=60,
                   what="pause to name the trial it waits for")
        # The advice works: a second pause stops the trial at once, the experiment PAUSED.
        self.assertEqual(self.cairn("pause", "1", timeout=60).returncode, 0)
        self.assertEqual(pause.wait(timeout=60), 0, open(out.name).read())
        self.assertEqual(run.wait(timeout=60), 0)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "PAUSED")

    def test_ctrl_c_pauses_gracefully(self):
        run = self.start("run", "exp.yaml")
        wait_until(lambda: self.steps_reported() >= 3, what="training to start")
        run.send_signal(signal.SIGINT)
        out, _ = run.communicate(timeout=60)
        self.assertEqual(run.returncode, 0, out)
        self.assertIn("[1.1] preempted", out, "the trial checkpointed and exited by itself")
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "PAUSED")
        self.cairn("resume", "1", check=0, timeout=120)
        self.assert_completed_exactly_once()

    def test_sigterm_leaves_it_for_resume_all(self):
        run = self.start("run", "exp.yaml")
        wait_until(lambda: self.steps_reported() >= 3, what="training to start")
        run.send_signal(signal.SIGTERM)
        out, _ = run.communicate(timeout=60)
        self.assertEqual(run.returncode, 0, out)
        self.assertIn("[1.1] preempted", out)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "ACTIVE")
        self.assertEqual(self.cairn("resume", "--all", check=0).stdout.split(), ["1"])
        wait_until(lambda: self.cairn_json("show", "1", "--json")["state"] == "COMPLETED",
                   timeout=120, what="the background resume to complete the experiment")
        self.assert_completed_exactly_once()

    def test_sigterm_kills_trials_that_do_not_stop_within_stop_grace_period(self):
        # A trial that ignores the request to checkpoint and exit (here: it stops calling the
        # SDK and ignores SIGTERM) made a SIGTERMed `cairn run` wait for ever. After
        # stop_grace_period it is killed; cairn exits with the experiment resumable, and the
        # trial resumes from its latest checkpoint, its kill not counted as a failure.
        self.write("stubborn.py", r"""
import os, signal, time
import cairn

ctx = cairn.init()
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        if step == 2 and not ctx.latest_checkpoint:
            with ctx.checkpoint(step) as path:
                (path / "step").write_text(str(step))
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            open(os.path.join(os.environ["CAIRN_WORKDIR"], "stubborn"), "w").close()
            deadline = time.monotonic() + 120  # never outlives a failed test for long
            while time.monotonic() < deadline:
                time.sleep(0.05)
    ctx.report_validation(step, {"val_loss": 1.0 / step})
""")
        self.write("stubborn.yaml", "entrypoint: /usr/bin/python3 stubborn.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 4}\n"
                   "stop_grace_period: 1\n")
        run = self.start("run", "stubborn.yaml")
        wait_until(lambda: os.path.exists(os.path.join(self.dir, "stubborn")), timeout=60,
                   what="the trial to checkpoint and stop cooperating")
        run.send_signal(signal.SIGTERM)
        out, _ = run.communicate(timeout=60)
        self.assertIn("those still running in 1 s are killed: stop_grace_period", out)
        self.assertIn("stop_grace_period (1 s) passed: killing 1.1, still running", out)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "ACTIVE")
        resumed = self.cairn("resume", "1", timeout=120)
        self.assertEqual(resumed.returncode, 0, resumed.stdout + resumed.stderr)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED")
        self.assertEqual(trial["restarts"], 0, "a kill at shutdown is not a failure")
        steps = [p["step"] for p in self.cairn_json("metrics", "1.1", "--json")["training"]]
        self.assertEqual(steps[-2:], [3, 4], "resumed from the checkpoint at step 2")

    def test_kill_cancels_for_good(self):
        run = self.start("run", "exp.yaml")
        wait_until(lambda: self.steps_reported() >= 2, what="training to start")
        self.cairn("kill", "1", check=0, timeout=60)
        run.communicate(timeout=60)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "CANCELED")
        self.assertEqual(self.cairn_json("show", "1.1", "--json")["state"], "CANCELED")
        again = self.cairn("resume", "1")
        self.assertEqual(again.returncode, 2)
        self.assertIn("cannot be resumed", again.stderr)

    def test_kill_9_then_resume_all(self):
        run = self.start("run", "exp.yaml")
        wait_until(lambda: self.steps_reported() >= 6, what="training past a checkpoint")
        pid = self.cairn_json("show", "1.1", "--json")["pid"]
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=120)
        # The orphaned trial notices that cairn is gone, checkpoints and exits by itself.
        wait_until(lambda: not os.path.exists("/proc/%d" % pid) or
                   open("/proc/%d/stat" % pid).read().split(")")[-1].split()[0] == "Z",
                   timeout=30, what="the orphaned trial to exit")
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "ACTIVE")
        everything = self.cairn("resume", "--all", check=0)
        self.assertEqual(everything.stdout.split(), ["1"])
        wait_until(lambda: self.cairn_json("show", "1", "--json")["state"] == "COMPLETED",
                   timeout=120, what="the background resume to complete the experiment")
        self.assert_completed_exactly_once()
        with open(os.path.join(self.dir, "units.txt")) as f:
            trained = len(f.read().split())
        self.assertLessEqual(trained, 30 + 4, "at most one checkpoint period retrained")
        with open(os.path.join(self.dir, ".cairn", "experiments", "1", "coordinator.log")) as f:
            log = f.read()
        # The orphan checkpointed by itself and the resume started from that step. Usually
        # cairn adopts that checkpoint ("adopted the checkpoint …"); when cairn had already
        # stored the step's checkpoint before the kill (only the ack was lost), the orphan's
        # copy is a duplicate and is dropped. Either way nothing after it is retrained.
        kept = re.search(r"checkpoint for step (\d+) kept in", log)
        self.assertIsNotNone(kept, log)
        started = re.search(r"trial 1\.1 started \(pid \d+\) from checkpoint \w+ \((\d+) units done\)", log)
        self.assertIsNotNone(started, log)
        self.assertEqual(started.group(1), kept.group(1), log)

    def children_left(self):
        with open(os.path.join(self.dir, "children.txt")) as f:
            return [int(p) for p in f.read().split() if alive(int(p))]

    def test_children_a_trial_leaves_running_are_stopped(self):
        self.write("parent.py", PARENT)
        self.write("parent.yaml", "entrypoint: /usr/bin/python3 parent.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 40}\n"
                   "checkpoint: {period: 2}\n")
        self.addCleanup(lambda: [os.kill(p, signal.SIGKILL) for p in self.children_left()])
        open(os.path.join(self.dir, "slow"), "w").close()
        run = self.start("run", "parent.yaml")
        wait_until(lambda: os.path.exists(os.path.join(self.dir, "children.txt")),
                   what="the trial to start its child")
        # Paused: the trial checkpoints and exits; its child must not run on.
        self.cairn("pause", "1", check=0, timeout=120)
        run.communicate(timeout=60)
        wait_until(lambda: not self.children_left(), timeout=10, what="the paused trial's child to stop")
        # Ended: the same.
        os.remove(os.path.join(self.dir, "slow"))
        self.cairn("resume", "1", check=0, timeout=120)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "COMPLETED")
        with open(os.path.join(self.dir, "children.txt")) as f:
            self.assertEqual(len(f.read().split()), 2)
        wait_until(lambda: not self.children_left(), timeout=10, what="the ended trial's child to stop")

    def test_pause_after_kill_9_then_resume_never_runs_a_trial_twice(self):
        self.write("parent.py", PARENT)
        self.write("parent.yaml", "entrypoint: /usr/bin/python3 parent.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 6}\n"
                   "checkpoint: {period: 2}\n")
        self.addCleanup(lambda: [os.kill(p, signal.SIGKILL) for p in self.children_left()])
        open(os.path.join(self.dir, "slow"), "w").close()
        run = self.start("run", "parent.yaml")
        wait_until(lambda: self.steps_reported() >= 1, what="training to start")
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=120)
        # Its trial still runs (a step takes 2 s); the pause marks it QUEUED all the same.
        self.assertEqual(self.cairn("pause", "1", check=0).stdout.strip(), "cairn: experiment 1 PAUSED")
        os.remove(os.path.join(self.dir, "slow"))
        resumed = self.cairn("resume", "1", check=0, timeout=120)
        self.assertIn("waiting for its process", resumed.stdout)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "COMPLETED")
        with open(os.path.join(self.dir, "attempts.txt")) as f:
            events = sorted((float(t), kind, int(pid)) for kind, t, pid in (l.split() for l in f))
        running = 0
        for _, kind, pid in events:
            running += 1 if kind == "start" else -1
            self.assertLessEqual(running, 1, "two processes of trial 1.1 at once: %s" % events)
        wait_until(lambda: not self.children_left(), timeout=10, what="the trials' children to stop")

    def shell(self, script, timeout=300):
        """Runs `script` with bash, $0 being cairn; returns its stdout lines."""
        proc = subprocess.run(["bash", "-c", script, CAIRN], cwd=self.dir, env=self.env,
                              capture_output=True, text=True, timeout=timeout)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        return proc.stdout.split("\n")[:-1], proc.stderr

    def test_a_closed_stdout_does_not_stop_the_search(self):
        self.write("asha.yaml", ASHA)
        # `head` exits after the id: every later write of cairn's meets a closed pipe (SIGPIPE,
        # EPIPE). The pipeline ends when cairn does, so the search has ended by then.
        lines, err = self.shell('"$0" run asha.yaml | head -1; echo "rc=${PIPESTATUS[0]}"')
        self.assertEqual(lines, ["1", "rc=0"], err)
        piped = self.cairn_json("show", "1", "--json")
        self.assertEqual(piped["state"], "COMPLETED")
        self.assertEqual(len(piped["trials"]), 5)
        # The same search with its output read to the end decides and trains exactly the same.
        self.cairn("run", "asha.yaml", check=0)
        self.assertEqual(trial_outcomes(piped), trial_outcomes(self.cairn_json("show", "2", "--json")))

    @needs("two_cores", (os.cpu_count() or 1) >= 2, "a trial of two ranks needs two cores")
    def test_a_search_that_never_started_resumes(self):
        self.write("ranks.yaml", TWO_RANKS)
        # The experiment is recorded, then its coordinator dies before the searcher's first
        # decisions are: the state a kill -9 (or, before, a SIGPIPE) at that moment leaves.
        failed = self.cairn("run", "ranks.yaml", timeout=120,
                            env={"CAIRN_TEST_DIE_AFTER_CREATE": "1"})
        self.assertEqual(failed.returncode, 137)
        before = self.cairn_json("show", "1", "--json")
        self.assertEqual((before["state"], before["trials"]), ("ACTIVE", []))
        # The resume makes those decisions (it used to wait for ever for trials it believed it
        # had created), with its own stdout closed after the first line.
        lines, err = self.shell('timeout 60 "$0" resume 1 | head -1; echo "rc=${PIPESTATUS[0]}"',
                                timeout=90)
        self.assertEqual(lines, ["cairn: resuming experiment 1 'two-ranks' (ACTIVE)", "rc=0"], err)
        resumed = self.cairn_json("show", "1", "--json")
        self.assertEqual(resumed["state"], "COMPLETED")
        self.cairn("run", "ranks.yaml", check=0, timeout=120)
        uninterrupted = self.cairn_json("show", "2", "--json")
        self.assertEqual(trial_outcomes(resumed), trial_outcomes(uninterrupted))
        self.assertEqual(len(resumed["trials"]), 1)

    def test_a_run_stopped_before_it_recorded_anything_is_not_resumed(self):
        self.write("ranks.yaml", TWO_RANKS)
        # Killed between taking the experiment's id and its first commit: nothing recorded.
        failed = self.cairn("run", "ranks.yaml", timeout=120,
                            env={"CAIRN_TEST_DIE_AFTER_CREATE": "id"})
        self.assertEqual(failed.returncode, 137)
        self.assertEqual(self.cairn("ls").stdout.count("two-ranks"), 0)
        resumed = self.cairn("resume", "1", check=None, timeout=60)
        self.assertNotEqual(resumed.returncode, 0)
        self.assertEqual(resumed.stderr.strip().splitlines(), [
            "cairn: error: experiment 1 was stopped before it recorded anything, so none of it "
            "ran: start it again with `cairn run`"])
        # Running it again works, under the next id.
        self.cairn("run", "ranks.yaml", timeout=120)
        self.assertEqual(self.cairn_json("show", "2", "--json")["state"], "COMPLETED")


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
