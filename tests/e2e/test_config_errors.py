"""End to end: config mistakes stop `cairn run` before anything runs, with exit 2 and one
line naming the file, line and key."""
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CairnTestCase  # noqa: E402

GOOD = """name: ok
entrypoint: /usr/bin/python3 train.py
hyperparameters:
  lr: {type: log, minval: -4, maxval: -1, base: 10}
  hidden: {type: int, minval: 16, maxval: 256}
searcher:
  name: single
  metric: val_loss
  max_length: 3
checkpoint:
  period: 1
"""

# (description, config text, line, key). Each is one mistake a user makes.
MISTAKES = [
    ("unknown top-level key", GOOD + "max_restart: 3\n", 12, "max_restart"),
    ("unknown searcher key", GOOD.replace("  max_length: 3", "  max_lenght: 3"), 9, "searcher.max_lenght"),
    ("missing metric", GOOD.replace("  metric: val_loss\n", ""), 6, "searcher.metric"),
    ("missing entrypoint", GOOD.replace("entrypoint: /usr/bin/python3 train.py\n", ""), 1, "entrypoint"),
    ("max_length zero", GOOD.replace("max_length: 3", "max_length: 0"), 9, "searcher.max_length"),
    ("max_length not a number", GOOD.replace("max_length: 3", "max_length: lots"), 9, "searcher.max_length"),
    ("unknown searcher", GOOD.replace("name: single", "name: bayes"), 7, "searcher.name"),
    ("minval > maxval", GOOD.replace("minval: 16, maxval: 256", "minval: 300, maxval: 256"), 5, "hyperparameters.hidden.minval"),
    ("unknown hparam type", GOOD.replace("type: int", "type: integer"), 5, "hyperparameters.hidden.type"),
    ("int with fractional bound", GOOD.replace("minval: 16,", "minval: 1.5,"), 5, "hyperparameters.hidden.minval"),
    ("negative checkpoint period", GOOD.replace("period: 1", "period: -1"), 11, "checkpoint.period"),
    ("slots_per_trial zero", GOOD + "resources:\n  slots_per_trial: 0\n", 13, "resources.slots_per_trial"),
    ("bad devices", GOOD + "resources:\n  devices: tpu\n", 13, "resources.devices"),
    ("seed negative", GOOD + "reproducibility:\n  seed: -5\n", 13, "reproducibility.seed"),
    ("deterministic not a bool", GOOD + "reproducibility:\n  deterministic: maybe\n", 13, "reproducibility.deterministic"),
    ("environment sets CAIRN_", GOOD + "environment:\n  CAIRN_SEED: '1'\n", 13, "environment.CAIRN_SEED"),
    ("webhook not http", GOOD + "notify:\n  webhook: ftp://x\n", 13, "notify.webhook"),
    ("max_restarts negative", GOOD + "max_restarts: -1\n", 12, "max_restarts"),
    ("permanent exit code 0", GOOD + "permanent_exit_codes: [2, 0]\n", 12, "permanent_exit_codes[1]"),
    ("permanent exit codes not a list", GOOD + "permanent_exit_codes: 2\n", 12, "permanent_exit_codes"),
    ("categorical without vals", GOOD.replace("searcher:\n", "  opt: {type: categorical, vals: []}\nsearcher:\n"), 6, "hyperparameters.opt.vals"),
    ("divisor 1", GOOD.replace("  max_length: 3", "  max_length: 3\n  divisor: 1"), 10, "searcher.divisor"),
    ("workdir missing", GOOD + "workdir: does/not/exist\n", 12, "workdir"),
]


class ConfigErrorsTest(CairnTestCase):
    def test_each_mistake_names_file_line_and_key(self):
        self.write("train.py", "raise SystemExit('must never run')\n")
        for description, text, line, key in MISTAKES:
            with self.subTest(description):
                self.write("exp.yaml", text)
                proc = self.cairn("run", "exp.yaml")
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertEqual(proc.stdout, "", "nothing starts")
                lines = proc.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, proc.stderr)
                self.assertTrue(lines[0].startswith("cairn: error: exp.yaml:%d: %s: " % (line, key)),
                                "%s: %s" % (description, lines[0]))
        self.assertFalse(os.path.exists(os.path.join(self.dir, ".cairn", "experiments", "1")),
                         "no experiment was created for a bad config")

    def test_yaml_syntax_error(self):
        self.write("exp.yaml", GOOD + "searcher: [unclosed\n")
        proc = self.cairn("run", "exp.yaml")
        self.assertEqual(proc.returncode, 2)
        self.assertRegex(proc.stderr, r"^cairn: error: exp\.yaml:\d+: ")

    def test_bad_set_override(self):
        self.write("exp.yaml", GOOD)
        proc = self.cairn("run", "exp.yaml", "--set", "searcher.max_length=abc")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("searcher.max_length", proc.stderr)
        self.assertTrue(proc.stderr.startswith("cairn: error: --set searcher.max_length=abc"))

    def test_set_override_applies(self):
        self.write("train.py", "import cairn\nctx = cairn.init()\nfor op in ctx.operations():\n"
                   "    ctx.report_validation(op.length, {'val_loss': ctx.hparams['lr']})\n")
        self.write("exp.yaml", GOOD)
        self.cairn("run", "exp.yaml", "--set", "searcher.max_length=2", "--set", "hyperparameters.lr=0.25",
                   "--name", "renamed", check=0)
        exp = self.cairn_json("show", "1", "--json")
        self.assertEqual(exp["name"], "renamed")
        self.assertEqual(exp["trials"][0]["hparams"]["lr"], 0.25)
        self.assertEqual(exp["trials"][0]["steps_completed"], 2)

    def test_missing_config_file(self):
        proc = self.cairn("run", "nope.yaml")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("nope.yaml", proc.stderr)

    def test_detach_returns_the_id_and_runs_in_the_background(self):
        self.write("train.py", "import cairn\nctx = cairn.init()\nfor op in ctx.operations():\n"
                   "    ctx.report_validation(op.length, {'val_loss': 1.0})\n")
        self.write("exp.yaml", GOOD)
        proc = self.cairn("run", "--detach", "exp.yaml", check=0)
        self.assertEqual(proc.stdout.strip(), "1")
        from cairn_testlib import wait_until
        wait_until(lambda: self.cairn("show", "1", "--json").returncode == 0 and
                   self.cairn_json("show", "1", "--json")["state"] == "COMPLETED",
                   timeout=60, what="the detached experiment to complete")
        log = os.path.join(self.dir, ".cairn", "experiments", "1", "coordinator.log")
        with open(log) as f:
            self.assertIn("trial 1.1 completed", f.read())


if __name__ == "__main__":
    unittest.main()
