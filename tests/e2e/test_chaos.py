"""Chaos end to end: kill -9 at random moments, to trial processes and to `cairn run` itself
(each followed by `cairn resume`), at least 20 times per test; then nothing is lost: the
experiment completes, every step is in the metric series exactly once, little work is
redone, and builtin:mlp ends bit-identical to an uninterrupted run."""
import json
import os
import random
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, CairnTestCase  # noqa: E402
import cairn_testlib  # noqa: E402

PYTHON_TRIAL = r'''
import os, sys, time
import cairn

ctx = cairn.init()
step = ctx.steps_completed
if ctx.latest_checkpoint:
    assert int((ctx.latest_checkpoint / "step").read_text()) == step
for op in ctx.operations():
    while step < op.length:
        time.sleep(0.03)
        step += 1
        with open(os.path.join(os.environ["CAIRN_WORKDIR"], "units.txt"), "a") as f:
            f.write("%d\n" % step)
        ctx.report_training(step, {"loss": 1.0 / step})
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / "step").write_text(str(step))
            if ctx.should_preempt():
                sys.exit(0)
    ctx.report_validation(step, {"val_loss": 1.0 / step})
'''

MLP_CONFIG = """name: chaos-mlp
entrypoint: builtin:mlp
hyperparameters:
  dataset: teacher
  features: 32
  classes: 4
  samples: 60000
  hidden: 64
  layers: 2
  batch_size: 64
  optimizer: adam
  lr: 0.003
searcher: {name: single, metric: val_loss, max_length: %d}
checkpoint: {period: %d}
max_restarts: 100
reproducibility: {seed: 11, deterministic: true}
"""

KILLS = 20


class ChaosTest(CairnTestCase):
    def run_with_chaos(self, config_name, kills, seed, pause=(0.1, 0.4)):
        """Drives an experiment to the end while killing things, one kill after each pause
        (seconds, drawn uniformly from `pause`); returns the kills done."""
        rng = random.Random(seed)
        env = dict(os.environ, NO_COLOR="1")
        log = open(os.path.join(self.dir, "chaos.log"), "w")
        self.addCleanup(log.close)
        proc = subprocess.Popen([CAIRN, "run", config_name], cwd=self.dir, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        done = {"trial": 0, "cairn": 0}
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            try:
                proc.wait(timeout=rng.uniform(*pause))
                if proc.returncode == 0 and self.cairn_json("show", "1", "--json")["state"] == "COMPLETED":
                    return done
                self.fail("cairn exited %d before completing; see %s" % (proc.returncode, log.name))
            except subprocess.TimeoutExpired:
                pass
            if sum(done.values()) >= kills:
                continue
            if self.cairn("show", "1", "--json").returncode != 0:
                continue  # killed before it exists, there is no experiment to resume
            trial = self.cairn("show", "1.1", "--json")
            pid = json.loads(trial.stdout).get("pid") if trial.returncode == 0 else None
            if pid and rng.random() < 0.5:
                try:
                    os.kill(pid, signal.SIGKILL)
                    done["trial"] += 1
                except ProcessLookupError:
                    pass
            else:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=120)
                done["cairn"] += 1
                proc = subprocess.Popen([CAIRN, "resume", "1"], cwd=self.dir, env=env, stdout=log,
                                        stderr=subprocess.STDOUT)
        self.fail("the experiment did not complete in time")

    def test_python_trial_survives_chaos(self):
        self.write("train.py", PYTHON_TRIAL)
        self.write("exp.yaml", "entrypoint: /usr/bin/python3 train.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 300}\n"
                   "checkpoint: {period: 5}\nmax_restarts: 100\n")
        done = self.run_with_chaos("exp.yaml", KILLS, seed=7)
        kills = sum(done.values())
        self.assertGreaterEqual(kills, KILLS, done)
        self.assertGreater(done["cairn"], 3, done)
        self.assertGreater(done["trial"], 3, done)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED")
        steps = [p["step"] for p in self.cairn_json("metrics", "1.1", "--json")["training"]]
        self.assertEqual(steps, list(range(1, 301)), "every step exactly once")
        self.assertLessEqual(trial["restarts"], done["trial"], "coordinator kills are not the trial's failures")
        with open(os.path.join(self.dir, "units.txt")) as f:
            trained = len(f.read().split())
        self.assertLessEqual(trained, 300 + kills * 5, "at most one checkpoint period lost per kill")

    def test_builtin_mlp_survives_chaos_bit_exact(self):
        # The uninterrupted reference lives in its own store.
        ref_dir = os.path.join(self.dir, "reference")
        os.makedirs(ref_dir)
        with open(os.path.join(ref_dir, "mlp.yaml"), "w") as f:
            f.write(MLP_CONFIG % (60, 2))
        started = time.monotonic()
        ref = subprocess.run([CAIRN, "run", "mlp.yaml"], cwd=ref_dir, capture_output=True, text=True, timeout=300)
        self.assertEqual(ref.returncode, 0, ref.stderr)
        # Training time depends on the machine: pace the kills so that all of them land
        # within about two thirds of an uninterrupted run, however fast it is.
        longest = min(0.4, max(0.02, (time.monotonic() - started) / (1.5 * KILLS)))
        ref_store = ["--store", os.path.join(ref_dir, ".cairn")]
        reference = self.cairn_json(*ref_store, "checkpoints", "1.1", "--json")

        self.write("mlp.yaml", MLP_CONFIG % (60, 2))
        done = self.run_with_chaos("mlp.yaml", KILLS, seed=3, pause=(longest / 4, longest))
        self.assertGreaterEqual(sum(done.values()), KILLS, done)
        final = self.cairn_json("checkpoints", "1.1", "--json")
        self.assertEqual(final[-1]["steps_completed"], 60)
        self.assertEqual(final[-1]["id"], reference[-1]["id"], "final weights bit-identical")
        steps = [p["step"] for p in self.cairn_json("metrics", "1.1", "--json")["training"]]
        self.assertEqual(steps, list(range(1, 61)))
        self.assertEqual(self.cairn_json("metrics", "1.1", "--json")["training"],
                         self.cairn_json(*ref_store, "metrics", "1.1", "--json")["training"])


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
