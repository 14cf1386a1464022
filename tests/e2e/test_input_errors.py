"""End to end: mistakes on the command line and a damaged store, as a user meets them: a
short one-line `cairn: error:`, the right exit status, and nothing hidden or lost."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CairnTestCase  # noqa: E402
import cairn_testlib  # noqa: E402

MLP = """entrypoint: builtin:mlp
hyperparameters: {lr: 0.1}
searcher: {name: single, metric: val_loss, max_length: 1}
reproducibility: {seed: 3}
"""


class CommandLineMistakesTest(CairnTestCase):
    def assert_one_line_error(self, proc, status, starts):
        self.assertEqual(proc.returncode, status, proc.stdout + proc.stderr)
        first = proc.stderr.splitlines()[0]
        self.assertTrue(first.startswith("cairn: error: " + starts), first)
        self.assertLess(len(first), 200, "a short line, not a 300-digit range: " + first)

    def test_a_negative_rank_or_tail(self):
        self.cairn("init", check=0)
        for option in ("--rank", "--tail"):
            with self.subTest(option):
                proc = self.cairn("logs", "1.1", option, "-1")
                self.assert_one_line_error(proc, 2, option + ": ")

    def test_a_name_of_two_lines(self):
        self.write("exp.yaml", MLP)
        proc = self.cairn("run", "exp.yaml", "--name", "two\nlines")
        self.assert_one_line_error(proc, 2, "--name: must be one line")
        self.assertEqual(proc.stdout, "", "nothing starts")

    def test_a_misspelt_latest_is_named_before_the_trial_is_looked_up(self):
        self.cairn("init", check=0)
        proc = self.cairn("export", "1.1@lastest", "out")
        self.assert_one_line_error(proc, 2, "'1.1@lastest': expected @latest or @best")

    def test_export_to_an_empty_dir_name(self):
        self.write("exp.yaml", MLP)
        self.cairn("run", "exp.yaml", check=0)
        proc = self.cairn("export", "1.1@latest", "")
        self.assert_one_line_error(proc, 2, "DIR is empty")


class DamagedExperimentTest(CairnTestCase):
    """An experiment whose database cannot be read is reported by the commands that walk
    every experiment, instead of being left out as if it did not exist."""

    def test_ls_and_resume_all_name_an_unreadable_experiment(self):
        self.write("exp.yaml", MLP)
        self.cairn("run", "exp.yaml", check=0)
        self.cairn("run", "exp.yaml", check=0)
        db = os.path.join(self.dir, ".cairn", "experiments", "1", "db")
        with open(os.path.join(db, "CURRENT"), "w") as f:
            f.write("garbage\n")

        for args in (["ls"], ["ls", "--json"], ["resume", "--all"]):
            with self.subTest(" ".join(args)):
                proc = self.cairn(*args)
                self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
                self.assertIn("cairn: error: cannot read %s: store corrupt" % db, proc.stderr)
        # The readable one is still listed, and --json still prints one document.
        proc = self.cairn("ls", "--json")
        import json
        self.assertEqual([e["id"] for e in json.loads(proc.stdout)], [2])

    def test_a_lost_current_file_is_corrupt_and_gc_keeps_its_checkpoints(self):
        self.write("exp.yaml", MLP)
        self.cairn("run", "exp.yaml", check=0)
        objects = os.path.join(self.dir, ".cairn", "objects")
        before = sorted(os.path.join(d, f) for d, _, files in os.walk(objects) for f in files)
        os.remove(os.path.join(self.dir, ".cairn", "experiments", "1", "db", "CURRENT"))

        proc = self.cairn("show", "1")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("CURRENT file is missing", proc.stderr)
        proc = self.cairn("gc")
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        after = sorted(os.path.join(d, f) for d, _, files in os.walk(objects) for f in files)
        self.assertEqual(before, after, "nothing of the damaged experiment was collected")
        self.assertFalse(os.path.exists(os.path.join(self.dir, ".cairn", "experiments", "1", "db",
                                                     "CURRENT")), "no empty database made over it")


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
