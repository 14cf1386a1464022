"""End to end: the built-in trainer (builtin:mlp) under cairn: the quickstart, and bit-exact
resume after its process is killed mid-run.

CAIRN_TEST_MLP_DEVICE=cuda (ctest's e2e_test_builtin_mlp_fake, with tests/fake_cuda on
LD_LIBRARY_PATH) runs the same tests with the trainer's `device` hyperparameter set, so
they cover the GPU path too (and `resources.devices=auto`, since the quickstart pins the CPU,
which hides the GPUs); unset, each config's own device is used: the quickstart's `cpu`,
elsewhere the trainer's default, `auto`."""
import json
import os
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, SOURCE, CairnTestCase, read_line_until, wait_until  # noqa: E402
import cairn_testlib  # noqa: E402

DEVICE = os.environ.get("CAIRN_TEST_MLP_DEVICE")
DEVICE_SET = (["--set", "hyperparameters.device=" + DEVICE, "--set", "resources.devices=auto"]
              if DEVICE else [])

# Big enough that an epoch takes a noticeable moment, so the kill lands mid-run.
SLOW_CONFIG = """name: mlp-resume
entrypoint: builtin:mlp
hyperparameters:
  dataset: teacher
  features: 32
  classes: 4
  samples: 40000
  hidden: 128
  layers: 2
  batch_size: 64
  optimizer: %s
  lr: 0.01
  momentum: 0.9
  weight_decay: 0.0001
searcher: {name: single, metric: val_loss, max_length: 8}
checkpoint: {period: 2}
max_restarts: 2
reproducibility: {seed: 7, deterministic: true}
"""


class BuiltinMlpTest(CairnTestCase):
    def test_quickstart(self):
        shutil.copy(os.path.join(SOURCE, "examples", "quickstart.yaml"), self.dir)
        run = self.cairn("run", "quickstart.yaml", *DEVICE_SET, check=0)
        self.assertEqual(run.stdout.splitlines()[0], "1")
        exp = self.cairn_json("show", "1", "--json")
        self.assertEqual(exp["state"], "COMPLETED")
        self.assertEqual(exp["searcher"], "asha")
        # The closing line shows the best metric as `show` does (6 significant digits); the
        # store keeps every digit.
        best = self.cairn_json("show", exp["best_trial"], "--json")["best_validation"]["val_loss"]
        self.assertIn("best trial %s (val_loss %.6g)" % (exp["best_trial"], best),
                      run.stdout + run.stderr)
        self.assertEqual(len(exp["trials"]), exp["config"]["searcher"]["max_trials"])
        self.assertTrue(all(t["state"] in ("COMPLETED", "STOPPED") for t in exp["trials"]))
        max_length = exp["config"]["searcher"]["max_length"]
        best_id = self.cairn("best", "1", check=0).stdout.strip()
        self.assertEqual(best_id, exp["best_trial"])
        trial = [t for t in exp["trials"] if t["id"] == best_id][0]
        self.assertEqual(trial["steps_completed"], max_length, "the best trial was promoted to the end")
        self.assertLess(sum(t["steps_completed"] for t in exp["trials"]),
                        len(exp["trials"]) * max_length / 2, "ASHA stopped most trials early")
        metrics = self.cairn_json("metrics", best_id, "--json")
        self.assertEqual([p["step"] for p in metrics["training"]], list(range(1, max_length + 1)))
        losses = [p["metrics"]["loss"] for p in metrics["training"]]
        self.assertLess(losses[-1], losses[0] / 2, "training loss falls")
        final = metrics["validation"][-1]["metrics"]
        self.assertGreater(final["val_accuracy"], 0.9, "the spirals are learned")
        self.assertEqual(trial["best_validation"]["val_loss"],
                         min(p["metrics"]["val_loss"] for p in metrics["validation"]))
        ckpts = self.cairn_json("checkpoints", best_id, "--json")
        self.assertEqual(ckpts[-1]["steps_completed"], max_length)

    def run_to_end(self, optimizer, kill_after_checkpoint):
        self.write("mlp.yaml", SLOW_CONFIG % optimizer)
        proc = subprocess.Popen([CAIRN, "run", "mlp.yaml"] + DEVICE_SET, cwd=self.dir, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=dict(os.environ, NO_COLOR="1"))
        self.addCleanup(proc.kill)
        exp_id = int(read_line_until(proc.stdout, lambda line: True, timeout=120,
                                     what="the experiment id"))
        trial = "%d.1" % exp_id
        if kill_after_checkpoint:
            wait_until(lambda: self.cairn("checkpoints", trial, "--json").returncode == 0 and
                       len(self.cairn_json("checkpoints", trial, "--json")) >= 1,
                       timeout=120, what="a first checkpoint")
            pid = self.cairn_json("show", trial, "--json").get("pid")
            self.assertIsNotNone(pid, "a running trial shows its pid")
            os.kill(pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=300)
        self.assertEqual(proc.returncode, 0, out)
        return exp_id, trial, out

    def file_hashes(self, checkpoint):
        with open(os.path.join(self.dir, ".cairn", "objects", checkpoint[:2], checkpoint[2:])) as f:
            return {e["path"]: e["sha256"] for e in json.load(f)["files"]}

    def check_bit_exact_resume(self, optimizer):
        _, straight, _ = self.run_to_end(optimizer, kill_after_checkpoint=False)
        _, resumed, out = self.run_to_end(optimizer, kill_after_checkpoint=True)
        self.assertIn("killed by signal 9", out)
        self.assertEqual(self.cairn_json("show", resumed, "--json")["restarts"], 1)
        a = self.cairn_json("checkpoints", straight, "--json")
        b = self.cairn_json("checkpoints", resumed, "--json")
        self.assertEqual(a[-1]["steps_completed"], 8)
        self.assertEqual(b[-1]["steps_completed"], 8)
        # Content-addressed: the same file hashes mean byte-identical weights, optimizer and
        # RNG state (the checkpoint ids differ: they name the trial too).
        self.assertEqual(self.file_hashes(a[-1]["id"]), self.file_hashes(b[-1]["id"]),
                         "resumed training ends bit-identical")
        ma = self.cairn_json("metrics", straight, "--json")
        mb = self.cairn_json("metrics", resumed, "--json")
        self.assertEqual(ma["validation"], mb["validation"])
        self.assertEqual(ma["training"], mb["training"])

    def test_killed_trial_resumes_bit_exact_sgd(self):
        self.check_bit_exact_resume("sgd")

    def test_killed_trial_resumes_bit_exact_adam(self):
        self.check_bit_exact_resume("adam")

    def test_bad_dataset_fails_clearly_and_is_not_restarted(self):
        # builtin:mlp's exit status 2 is permanent: no restart is spent on it. A missing CSV
        # file, since the config check refuses bad hyperparameter values before any trial
        # (test_config_errors.py) and only the trial can look for the file in its checkout.
        self.write("bad.yaml", "entrypoint: builtin:mlp\nhyperparameters: {dataset: missing.csv}\n"
                   "searcher: {name: single, metric: val_loss, max_length: 2}\nmax_restarts: 3\n")
        run = self.cairn("run", "bad.yaml")
        self.assertEqual(run.returncode, 1)
        self.assertIn("missing.csv", run.stderr)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["exit"]["code"], 2)
        self.assertEqual((trial["state"], trial["restarts"]), ("ERROR", 0))
        self.assertEqual(run.stderr.count("trial 1.1 failed"), 1, run.stderr)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
