"""End to end: `cairn gc` applies checkpoint.keep_* to a finished experiment, frees exactly
the space of what it deleted (content shared between checkpoints stays), leaves what remains
exportable, and leaves experiments that are being driven to their coordinators."""
import filecmp
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, CairnTestCase, wait_until  # noqa: E402
import cairn_testlib  # noqa: E402

# Validates and checkpoints every step. val_loss is best at step 3. Every checkpoint holds
# step-specific weights and the same vocabulary file (stored once, shared by all of them).
# With HOLD_AT set, the trial waits after that step until the file "release" exists.
TRAIN = r'''
import json, os, random, time
import cairn

ctx = cairn.init()
step = ctx.steps_completed
hold_at = int(os.environ.get("HOLD_AT", "0"))
vocab = random.Random(7).randbytes(30000)
for op in ctx.operations():
    while step < op.length:
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        ctx.report_validation(step, {"val_loss": (step - 3) ** 2 + 0.1})
        if ctx.checkpoint_due(step):
            weights = random.Random(ctx.seed * 1000 + step).randbytes(50000)
            with ctx.checkpoint(step) as path:
                (path / "weights.bin").write_bytes(weights)
                (path / "vocab.bin").write_bytes(vocab)
            with open(os.path.join(os.environ["CAIRN_WORKDIR"], "expected-%d.bin" % step), "wb") as f:
                f.write(weights)
        while hold_at and step >= hold_at and not os.path.exists(os.path.join(os.environ["CAIRN_WORKDIR"], "release")):
            time.sleep(0.05)
'''

CONFIG = '''name: gc
entrypoint: [/usr/bin/python3, train.py]
hyperparameters:
  lr: 0.5
searcher:
  name: single
  metric: val_loss
  max_length: 6
checkpoint:
  period: 1
  keep_trial_latest: 1
  keep_trial_best: 1
reproducibility:
  seed: 42
environment:
  HOLD_AT: "%d"
'''


def tree_bytes(root):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(root) for f in files)


class GcTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.write("train.py", TRAIN)
        self.write("exp.yaml", CONFIG % 0)
        self.write("held.yaml", CONFIG % 2)
        self.objects = os.path.join(self.dir, ".cairn", "objects")

    def steps(self, trial):
        return [c["steps_completed"] for c in self.cairn_json("checkpoints", trial, "--json")]

    def assert_export(self, ref, step):
        out = os.path.join(self.dir, "export-%s" % ref.replace("@", "-"))
        self.cairn("export", ref, out, check=0)
        self.assertTrue(filecmp.cmp(os.path.join(out, "weights.bin"),
                                    os.path.join(self.dir, "expected-%d.bin" % step), shallow=False))
        self.assertEqual(os.path.getsize(os.path.join(out, "vocab.bin")), 30000)

    def crashed_experiment(self):
        """An experiment whose coordinator died before it applied retention: the run is
        held after step 6, then cairn and the trial are killed. Retention runs at most every
        10 s while an experiment runs, so checkpoints 2-6 are all still there."""
        env = dict(os.environ, NO_COLOR="1")
        env.pop("CAIRN_DIR", None)
        self.write("crash.yaml", CONFIG % 6)
        run = subprocess.Popen([CAIRN, "run", "crash.yaml"], cwd=self.dir, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: run.poll() is None and run.kill())
        wait_until(lambda: self.cairn("checkpoints", "1.1", "--json").returncode == 0
                   and len(self.steps("1.1")) == 6, what="six checkpoints")
        pid = self.cairn_json("show", "1.1", "--json")["pid"]
        run.kill()
        run.wait(timeout=120)
        os.kill(pid, 9)
        wait_until(lambda: not os.path.exists("/proc/%d/cmdline" % pid) or
                   open("/proc/%d/cmdline" % pid).read() == "", what="the trial to die")

    def test_gc_keeps_latest_and_best_and_reclaims_the_rest(self):
        self.crashed_experiment()
        self.assertEqual(self.steps("1.1"), [1, 2, 3, 4, 5, 6],
                         "until retention is applied, every checkpoint is kept")
        before = tree_bytes(self.objects)

        report = self.cairn_json("gc", "--json")
        self.assertEqual([(e["id"], e["deleted"]) for e in report["experiments"]], [(1, 4)])
        reclaimed = report["bytes_reclaimed"]
        self.assertEqual(reclaimed, report["experiments"][0]["bytes_reclaimed"]
                         + report["unreferenced"]["bytes_reclaimed"])
        # Four checkpoints' own weights went; their shared vocabulary did not.
        self.assertGreaterEqual(reclaimed, 4 * 50000)
        self.assertLess(reclaimed, 4 * 50000 + 30000)
        self.assertEqual(before - tree_bytes(self.objects), reclaimed,
                         "the object store shrank by exactly what gc reported")

        self.assertEqual(self.steps("1.1"), [3, 6], "the trial's best (step 3) and latest remain")
        self.assert_export("1.1@latest", 6)
        self.assert_export("1.1@best", 3)

        again = self.cairn("gc", check=0).stdout
        self.assertIn("experiment 1: deleted 0 checkpoints, reclaimed 0 B", again)
        self.assertIn("total: reclaimed 0 B", again)
        self.assertEqual(self.steps("1.1"), [3, 6])

    def test_a_running_experiment_is_left_to_its_coordinator(self):
        self.crashed_experiment()
        env = dict(os.environ, NO_COLOR="1")
        env.pop("CAIRN_DIR", None)
        held = subprocess.Popen([CAIRN, "run", "held.yaml"], cwd=self.dir, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        def stop_held():
            if held.poll() is None:
                held.kill()
            held.communicate(timeout=120)
        self.addCleanup(stop_held)
        wait_until(lambda: self.cairn("checkpoints", "2.1", "--json").returncode == 0
                   and len(self.steps("2.1")) >= 2, what="experiment 2's first checkpoints")

        # Experiment 1's checkpoints at steps 1, 2, 4 and 5 are withdrawn at once, but their
        # files wait while experiment 2 may be ingesting (same seed, same bytes: the weights
        # of steps 1 and 2 are experiment 2's too; each checkpoint's manifest is its own).
        out = self.cairn("gc", check=0).stdout
        self.assertIn("experiment 1: deleted 0 checkpoints, reclaimed 0 B (4 more once no "
                      "other experiment is running", out)
        self.assertEqual(self.steps("1.1"), [3, 6])
        self.assertIn("experiment 2 is running; its coordinator applies retention as "
                      "checkpoints arrive", out)
        self.assertEqual(self.steps("2.1")[:2], [1, 2])

        self.write("release", "")
        _, err = held.communicate(timeout=120)
        self.assertEqual(held.returncode, 0, err)
        # Its coordinator applied the policy when it finished.
        self.assertEqual(self.steps("2.1"), [3, 6])
        before = tree_bytes(self.objects)
        report = self.cairn_json("gc", "--json")
        # Experiment 1's four waiting deletions finish; experiment 2 has nothing left to delete.
        self.assertEqual([(e["id"], e["deleted"], e.get("pending", 0))
                          for e in report["experiments"]], [(1, 4, 0), (2, 0, 0)])
        self.assertEqual(before - tree_bytes(self.objects), report["bytes_reclaimed"])
        self.assert_export("2.1@latest", 6)
        self.assert_export("1.1@best", 3)

    def test_bad_experiment_ids_are_bad_input(self):
        self.crashed_experiment()
        for bad in ("1.1", "99", "abc"):
            proc = self.cairn("gc", bad)
            self.assertEqual(proc.returncode, 2, bad)
            self.assertTrue(proc.stderr.startswith("cairn: error: "), proc.stderr)
        self.assertEqual(self.steps("1.1"), [1, 2, 3, 4, 5, 6], "nothing was collected")


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
