"""End to end: examples/pytorch (a real PyTorch trial) runs under cairn to completion,
reports what it should, and leaves a checkpoint that torch can load."""
import importlib.util
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import PYTHON, SOURCE, CairnTestCase  # noqa: E402
import cairn_testlib  # noqa: E402

EXAMPLE = os.path.join(SOURCE, "examples", "pytorch")


def _torch_available():
    probe = subprocess.run([PYTHON, "-c", "import torch, sklearn"], capture_output=True,
                           text=True, timeout=120)
    return probe.returncode == 0, probe.stderr.strip().splitlines()[-1:] or [""]


class PytorchExampleTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        for name in ("train.py", "digits.yaml"):
            shutil.copy(os.path.join(EXAMPLE, name), self.dir)

    def test_digits_trains_to_completion_with_a_loadable_checkpoint(self):
        run = self.cairn("run", "digits.yaml", timeout=120)
        self.assertEqual(run.returncode, 0,
                         "cairn run failed\nstdout:\n%s\nstderr:\n%s\nlogs:\n%s" %
                         (run.stdout, run.stderr, self.cairn("logs", "1.1").stdout))
        self.assertTrue(os.path.isdir(os.path.join(self.dir, ".cairn")))

        experiment = self.cairn_json("show", "1", "--json")
        self.assertEqual(experiment["state"], "COMPLETED")
        max_length = experiment["config"]["searcher"]["max_length"]
        [trial] = experiment["trials"]
        self.assertEqual(trial["state"], "COMPLETED")
        self.assertEqual(trial["steps_completed"], max_length)

        metrics = self.cairn_json("metrics", "1.1", "--json")
        self.assertEqual([r["step"] for r in metrics["training"]],
                         list(range(1, max_length + 1)))
        final = metrics["validation"][-1]
        self.assertEqual(final["step"], max_length)
        self.assertGreater(final["metrics"]["val_accuracy"], 0.8)
        self.assertIn("val_loss", final["metrics"])

        checkpoints = self.cairn_json("checkpoints", "1.1", "--json")
        self.assertTrue(checkpoints, "the trial left no checkpoint")
        self.assertEqual(max(c["steps_completed"] for c in checkpoints), max_length)

        out = os.path.join(self.dir, "exported")
        self.cairn("export", "1.1@latest", out, check=0)
        self.assertEqual(self._exported_accuracy(out, trial["seed"], max_length),
                         final["metrics"]["val_accuracy"])

    def _exported_accuracy(self, out, seed, step):
        """Loads the exported files with torch and evaluates the model on the trial's
        validation split: the checkpoint must be the model that was reported on."""
        import torch
        sys.path.insert(0, os.path.join(SOURCE, "sdk", "python"))  # train.py imports cairn
        spec = importlib.util.spec_from_file_location("digits_train",
                                                      os.path.join(self.dir, "train.py"))
        train = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(train)

        state = torch.load(os.path.join(out, "model.pt"))
        optimizer_state = torch.load(os.path.join(out, "optimizer.pt"))
        self.assertIn("state", optimizer_state)
        with open(os.path.join(out, "step.txt")) as f:
            self.assertEqual(int(f.read()), step)

        config = self.cairn_json("show", "1", "--json")["config"]
        hp = {**train.DEFAULTS, **config["hyperparameters"]}
        _, val = train.split_digits(seed, float(hp["val_fraction"]))
        model = train.build_model(hp, val[0].shape[1], 10)
        model.load_state_dict(state)
        return train.evaluate(model, val)["val_accuracy"]


if __name__ == "__main__":
    available, reason = _torch_available()
    if not available:
        print("skipped: %s cannot import torch and sklearn (%s)" % (PYTHON, reason[0]))
        sys.exit(77)
    sys.exit(cairn_testlib.main())
