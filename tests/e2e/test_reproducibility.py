"""End to end: what cairn records of every run (code snapshot, data and dependency
fingerprints, seeds), `cairn compare` naming what changed, `cairn reproduce --verify`,
and the user's git repository left exactly as it was (SPEC §5, issue 5)."""
import json
import os
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, PYTHON, SOURCE, CairnTestCase, wait_until  # noqa: E402
import cairn_testlib  # noqa: E402

# A deterministic Python trial: its loss depends on the data file, lr and the seed (through
# the `random` module, which the SDK seeds). NOISE is replaced to make it non-deterministic.
TRAIN = r'''
import os, random, sys
import cairn

ctx = cairn.init()
rows = [float(line) for line in open(os.path.join("data", "train.csv"))]
lr = ctx.hparams["lr"]
w = 0.0
step = ctx.steps_completed
if ctx.latest_checkpoint:
    w = float((ctx.latest_checkpoint / "w").read_text())
for op in ctx.operations():
    while step < op.length:
        step += 1
        for x in rows:
            w += lr * (x - w) * random.random()
        w += NOISE
        ctx.report_training(step, {"loss": (w - 2.0) ** 2})
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / "w").write_text(repr(w))
            if ctx.should_preempt():
                sys.exit(0)
    ctx.report_validation(step, {"val_loss": (w - 2.5) ** 2})
'''

CONFIG = """name: six-months
entrypoint: /usr/bin/python3 train.py
hyperparameters:
  lr: 0.01
searcher: {name: single, metric: val_loss, max_length: 3}
reproducibility: {seed: 17}
data: [data/]
"""


class ReproducibilityTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.write("train.py", TRAIN.replace("NOISE", "0.0"))
        self.write("data/train.csv", "1\n2\n3\n")
        self.write("exp.yaml", CONFIG)

    def differences(self, *ids):
        doc = self.cairn_json("compare", *ids, "--json")
        return sorted((d["category"], d["what"]) for d in doc["differences"]), doc

    def test_six_months_later_compare_names_each_change_and_reproduce_verifies(self):
        self.cairn("run", "exp.yaml", check=0)
        # Six months later: new data, lr from the command line, an edited script, a new seed.
        self.write("data/train.csv", "1\n2\n4\n")
        self.write("train.py", TRAIN.replace("NOISE", "0.0") + "# tidied up\n")
        self.cairn("run", "exp.yaml", "--set", "hyperparameters.lr=0.1",
                   "--set", "reproducibility.seed=42", check=0)

        diffs, doc = self.differences("1.1", "2.1")
        self.assertEqual(diffs, [("code", "train.py"), ("data", "data/train.csv"),
                                 ("hparam", "lr"), ("seed", "seed")], json.dumps(doc, indent=1))
        by_category = {d["category"]: d for d in doc["differences"]}
        self.assertEqual(by_category["hparam"]["values"], [0.01, 0.1])
        seeds = [t["seed"] for t in doc["trials"]]
        self.assertEqual(by_category["seed"]["values"], seeds)
        self.assertNotEqual(seeds[0], seeds[1])
        text = self.cairn("compare", "1.1", "2.1", check=0).stdout
        for line in ("code: 1 file changed (train.py)\n", "data: data/train.csv changed",
                     "hparam lr: 0.01 → 0.1", "seed: %d → %d" % tuple(seeds)):
            self.assertIn(line, text)
        patch = self.cairn("compare", "1.1", "2.1", "--diff", check=0).stdout
        self.assertIn("+# tidied up", patch)

        # The working tree, the data and the config have all moved on; reproduce re-runs
        # what was recorded, and matches it step for step.
        self.write("exp.yaml", CONFIG.replace("lr: 0.01", "lr: 0.5"))
        proc = self.cairn("reproduce", "1.1", "--verify", check=0)
        self.assertIn("verified", proc.stdout)
        again = self.cairn_json("show", "3", "--json")
        self.assertEqual(again["reproduces"]["trial"], "1.1")
        self.assertEqual(again["trials"][0]["hparams"], {"lr": 0.01})
        diffs, doc = self.differences("1.1", "3.1")
        self.assertEqual(diffs, [], json.dumps(doc, indent=1))
        original = self.cairn_json("metrics", "1.1", "--json")
        replayed = self.cairn_json("metrics", "3.1", "--json")
        self.assertEqual(original["training"], replayed["training"])
        self.assertEqual(original["validation"], replayed["validation"])

    def test_gc_removes_an_ended_reproduce_workdir_and_a_later_reproduce_still_works(self):
        self.cairn("run", "exp.yaml", check=0)
        self.cairn("reproduce", "1.1", "--verify", check=0)
        reproduce_dir = os.path.join(self.dir, ".cairn", "reproduce")
        (checkout,) = os.listdir(reproduce_dir)
        checkout = os.path.join(reproduce_dir, checkout)
        self.assertTrue(os.path.isfile(os.path.join(checkout, "train.py")))

        report = self.cairn_json("gc", "--json")
        by_id = {e["id"]: e for e in report["experiments"]}
        self.assertNotIn("reproduce_workdir", by_id[1], "the user's own workdir is not touched")
        removed = by_id[2]["reproduce_workdir"]
        self.assertNotIn("kept", removed)
        self.assertEqual(removed["path"], os.path.realpath(checkout))
        self.assertGreater(removed["bytes_reclaimed"], 0)
        self.assertGreaterEqual(report["bytes_reclaimed"], removed["bytes_reclaimed"])
        self.assertFalse(os.path.exists(checkout))
        self.assertEqual(os.listdir(reproduce_dir), [])
        self.assertTrue(os.path.isfile(os.path.join(self.dir, "train.py")))
        self.assertTrue(os.path.isfile(os.path.join(self.dir, "data", "train.csv")))

        # The re-run's record is intact: it can itself be reproduced, from the store, and
        # that re-run's checkout goes the same way.
        proc = self.cairn("reproduce", "2.1", "--verify", check=0)
        self.assertIn("verified", proc.stdout)
        (second,) = os.listdir(reproduce_dir)
        self.assertTrue(second.startswith("2.1-"), second)
        self.assertIn("removed its reproduce checkout", self.cairn("gc", "3", check=0).stdout)
        self.assertEqual(os.listdir(reproduce_dir), [])

    def test_gc_keeps_a_reproduce_checkout_its_trials_wrote_into(self):
        # A trial that leaves a report in its workdir, as docs/protocol.md invites it to.
        self.write("train.py", TRAIN.replace("NOISE", "0.0") +
                   "open(os.path.join(os.environ['CAIRN_WORKDIR'], 'report.txt'), 'w')"
                   ".write(repr(w))\n")
        self.cairn("run", "exp.yaml", check=0)
        self.cairn("reproduce", "1.1", "--verify", check=0)
        reproduce_dir = os.path.join(self.dir, ".cairn", "reproduce")
        (checkout,) = os.listdir(reproduce_dir)
        report = os.path.join(reproduce_dir, checkout, "report.txt")
        self.assertTrue(os.path.isfile(report))
        out = self.cairn("gc", "2", check=0).stdout
        self.assertIn("kept its reproduce checkout", out)
        self.assertIn("changed since the checkout", out)
        self.assertTrue(os.path.isfile(report), "the re-run's output is never thrown away")
        entry = self.cairn_json("gc", "2", "--json")["experiments"][0]
        self.assertIn("changed since the checkout", entry["reproduce_workdir"]["kept"])

    def test_reproduce_needs_nothing_of_a_project_that_was_moved_away(self):
        self.cairn("run", "exp.yaml", check=0)
        store = os.path.join(self.dir, ".cairn")
        moved = self.dir + "-moved"
        os.rename(self.dir, moved)
        try:
            proc = subprocess.run([CAIRN, "--store", os.path.join(moved, ".cairn"), "reproduce",
                                   "1.1", "--verify"], cwd="/", capture_output=True, text=True,
                                  timeout=300)
        finally:
            os.rename(moved, self.dir)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("verified", proc.stdout)
        self.assertTrue(os.path.isdir(store))

    def run_with_data_too_large_to_keep(self):
        """A first run whose data (2.5 MB) is over its 1 MB snapshot limit: fingerprinted only."""
        self.write("exp.yaml", CONFIG.replace("seed: 17}", "seed: 17, snapshot_limit_mb: 1}"))
        with open(os.path.join(self.dir, "data", "big.bin"), "wb") as f:
            f.write(b"\1" * (5 << 19))
        self.cairn("run", "exp.yaml", check=0)
        self.assertFalse(self.cairn_json("show", "1", "--json")["data"]["stored"])

    def test_reproduce_verifies_unchanged_data_too_large_to_keep(self):
        self.run_with_data_too_large_to_keep()
        proc = self.cairn("reproduce", "1.1", "--verify")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("cairn: data verified: the recorded data (2 files, too large to keep in "
                      "the store) is unchanged", proc.stdout)
        self.assertIn("verified: 2.1 reproduces 1.1", proc.stdout)
        self.assertNotIn("warning", proc.stderr)

    def test_reproduce_refuses_changed_data_too_large_to_keep_naming_what_changed(self):
        self.run_with_data_too_large_to_keep()
        self.write("data/train.csv", "1\n2\n4\n")
        os.remove(os.path.join(self.dir, "data", "big.bin"))
        for i in range(1, 5):
            self.write("data/new%d.csv" % i, "5\n")
        proc = self.cairn("reproduce", "1.1", "--verify")
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertRegex(proc.stderr, r"^cairn: error: the data at .* is not what trial 1\.1 "
                                      r"recorded \(it was too large to keep in the store\): "
                                      r"1 changed \(data/train\.csv\), 1 removed \(data/big\.bin\), "
                                      r"4 added \(data/new1\.csv, data/new2\.csv, data/new3\.csv "
                                      r"and 1 more\)\n")
        self.assertIn("--allow-data-change", proc.stderr)
        self.assertEqual([e["id"] for e in self.cairn_json("ls", "--json")], [1])
        self.assertEqual(os.listdir(os.path.join(self.dir, ".cairn", "reproduce")), [])

        # Accepted explicitly: the re-run goes on, the change still named, and the record of
        # the re-run shows the data it read.
        proc = self.cairn("reproduce", "1.1", "--allow-data-change")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertRegex(proc.stderr, r"cairn: warning: the data at .* is not what trial 1\.1 "
                                      r"recorded .*1 changed \(data/train\.csv\)")
        diffs, doc = self.differences("1.1", "2.1")
        self.assertIn(("data", "data/train.csv"), diffs, json.dumps(doc, indent=1))

    def test_a_reruns_data_link_leads_to_the_data_not_through_the_reproduce_checkout(self):
        # The re-run runs from its checkout, whose data entry is itself a link to the project's
        # data; the re-run's run directory must link to the data, not to that link. Only the
        # store's links are followed: the project's `data` is the user's own link, and stays
        # what the run directory links to.
        self.run_with_data_too_large_to_keep()
        os.rename(os.path.join(self.dir, "data"), os.path.join(self.dir, "real-data"))
        os.symlink("real-data", os.path.join(self.dir, "data"))
        self.cairn("reproduce", "1.1", check=0)
        link = os.path.join(self.dir, ".cairn", "experiments", "2", "code", "data")
        self.assertTrue(os.path.islink(link))
        held = os.readlink(link)
        self.assertFalse(os.path.isabs(held), held)  # both ends in the project: relative
        self.assertNotIn("reproduce", held)
        project = os.path.realpath(self.dir)
        self.assertEqual(os.path.normpath(os.path.join(os.path.realpath(os.path.dirname(link)),
                                                       held)),
                         os.path.join(project, "data"))
        # The checkout gone (gc keeps this one, a user may not): the run directory still finds
        # the data.
        reproduce_dir = os.path.join(self.dir, ".cairn", "reproduce")
        for name in os.listdir(reproduce_dir):
            shutil.rmtree(os.path.join(reproduce_dir, name))
        self.assertTrue(os.path.isfile(os.path.join(link, "big.bin")))

    def test_reproduce_of_a_moved_project_verifies_its_data_too_large_to_keep_at_the_new_place(self):
        self.run_with_data_too_large_to_keep()
        moved = self.dir + "-moved"
        os.rename(self.dir, moved)
        try:
            proc = subprocess.run([CAIRN, "--store", os.path.join(moved, ".cairn"), "reproduce",
                                   "1.1", "--verify"], cwd="/", capture_output=True, text=True,
                                  env=dict(os.environ, NO_COLOR="1"), timeout=300)
        finally:
            os.rename(moved, self.dir)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("the project moved", proc.stdout)
        self.assertIn("cairn: data verified", proc.stdout)
        self.assertIn("verified: 2.1 reproduces 1.1", proc.stdout)

    def cairn_from(self, project, *args):
        """cairn run from `project` (the test directory, moved), with its store."""
        return subprocess.run([CAIRN, "--store", os.path.join(project, ".cairn")] + list(args),
                              cwd=project, capture_output=True, text=True,
                              env=dict(os.environ, NO_COLOR="1"), timeout=300)

    def test_reproduce_of_a_rerun_after_the_project_moved_finds_its_data_too_large_to_keep(self):
        # The re-run's workdir is its checkout in the store, whose data links must follow the
        # project when it moves with its store.
        self.run_with_data_too_large_to_keep()
        self.cairn("reproduce", "1.1", check=0)
        self.assertEqual(self.differences("1.1", "2.1")[0], [])  # the links are not code
        moved = self.dir + "-moved"
        os.rename(self.dir, moved)
        try:
            proc = self.cairn_from(moved, "reproduce", "2.1", "--verify")
            cache = open(os.path.join(moved, ".cairn", "cache", "hashes"), "rb").read()
        finally:
            os.rename(moved, self.dir)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("cairn: data verified", proc.stdout)
        self.assertIn("is unchanged where the re-run reads it (%s)" % os.path.join(moved, "data"),
                      proc.stdout)
        self.assertIn("verified: 3.1 reproduces 2.1", proc.stdout)
        # Hashed once, where it really is: never through a checkout's links.
        self.assertIn(os.path.join(moved, "data", "big.bin").encode(), cache)
        self.assertNotIn(b"/.cairn/", cache)

    def test_reproduce_checks_absolute_data_outside_the_project_and_names_where_it_is(self):
        outside = self.dir + "-outside"
        self.addCleanup(shutil.rmtree, outside, True)
        os.makedirs(outside)
        with open(os.path.join(outside, "big.bin"), "wb") as f:
            f.write(b"\1" * (5 << 19))
        self.write("exp.yaml", CONFIG.replace("seed: 17}", "seed: 17, snapshot_limit_mb: 1}")
                   .replace("data: [data/]", "data: [data/, %s]" % outside))
        self.cairn("run", "exp.yaml", check=0)
        big = os.path.join(outside, "big.bin")
        self.assertIn(big, [f["path"] for f in self.cairn_json("show", "1", "--json")["data"]["files"]])

        # Moved with its store, the project's data is read at its new place; the data outside
        # it where it is.
        moved = self.dir + "-moved"
        os.rename(self.dir, moved)
        try:
            proc = self.cairn_from(moved, "reproduce", "1.1", "--verify")
        finally:
            os.rename(moved, self.dir)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("is unchanged where the re-run reads it (%s, %s)"
                      % (os.path.join(moved, "data"), outside), proc.stdout)

        with open(big, "ab") as f:
            f.write(b"\2")
        proc = self.cairn("reproduce", "1.1")
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertIn("cairn: error: the data at %s, %s is not what trial 1.1 recorded (it was "
                      "too large to keep in the store): 1 changed (%s)"
                      % (os.path.join(self.dir, "data"), outside, big), proc.stderr)
        self.assertEqual([e["id"] for e in self.cairn_json("ls", "--json")], [1, 2])

    def test_reproduce_allow_data_change_runs_without_a_data_entry_that_is_gone(self):
        # A second `data:` entry, which the trial does not read, too large to keep; then gone.
        self.write("exp.yaml", CONFIG.replace("seed: 17}", "seed: 17, snapshot_limit_mb: 1}")
                   .replace("data: [data/]", "data: [data/, extra/]"))
        self.write("extra/a.txt", "a\n")
        with open(os.path.join(self.dir, "extra", "big.bin"), "wb") as f:
            f.write(b"\1" * (5 << 19))
        self.cairn("run", "exp.yaml", check=0)
        shutil.rmtree(os.path.join(self.dir, "extra"))
        proc = self.cairn("reproduce", "1.1")
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertIn("2 removed (extra/a.txt, extra/big.bin)", proc.stderr)

        proc = self.cairn("reproduce", "1.1", "--allow-data-change")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("cairn: warning: the data at %s, %s is not what trial 1.1 recorded (it was "
                      "too large to keep in the store): 2 removed (extra/a.txt, extra/big.bin); "
                      "re-running on it as it is now"
                      % (os.path.join(self.dir, "data"), os.path.join(self.dir, "extra")),
                      proc.stderr)
        self.assertEqual([f["path"] for f in self.cairn_json("show", "2", "--json")["data"]["files"]],
                         ["data/train.csv"])
        proc = self.cairn("compare", "1.1", "2.1", check=0)
        self.assertIn("data: extra/big.bin removed", proc.stdout)

    def test_a_reproduce_that_fails_before_its_experiment_exists_leaves_no_workdir(self):
        self.cairn("run", "exp.yaml", check=0)
        objects = os.path.join(self.dir, ".cairn", "code.git", "objects")
        shutil.rmtree(objects)  # the recorded snapshot is gone: reproduce must say so
        os.mkdir(objects)
        proc = self.cairn("reproduce", "1.1")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("is not in the store", proc.stderr)
        self.assertEqual(os.listdir(os.path.join(self.dir, ".cairn", "reproduce")), [])
        self.assertEqual([e["id"] for e in self.cairn_json("ls", "--json")], [1])

    def test_reproduce_verify_fails_on_a_nondeterministic_trial_naming_the_step(self):
        self.write("train.py", TRAIN.replace("NOISE", "random.SystemRandom().random() * 1e-3"))
        self.cairn("run", "exp.yaml", check=0)
        proc = self.cairn("reproduce", "1.1", "--verify")
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertRegex(proc.stderr, r"cairn: error: --verify: 2\.1 does not reproduce 1\.1: "
                                      r"first difference at step 1 \(training\): loss ")

    def test_a_data_link_never_replaces_files_outside_the_store(self):
        # `data: ../../../../sub` seen from the run directory (.cairn/experiments/1/code)
        # lands on proj/sub, a directory of the user's; the data itself is 4 levels above.
        proj = os.path.join(self.dir, "a", "b", "c", "proj")
        os.makedirs(os.path.join(proj, "sub"))
        with open(os.path.join(proj, "sub", "precious.txt"), "w") as f:
            f.write("mine")
        os.makedirs(os.path.join(self.dir, "sub"))
        with open(os.path.join(self.dir, "sub", "big.bin"), "wb") as f:
            f.write(os.urandom(1500000))
        with open(os.path.join(proj, "t.py"), "w") as f:
            f.write("import cairn\nctx = cairn.init()\nfor op in ctx.operations():\n"
                    "    ctx.report_validation(op.length, {'m': 1.0})\n")
        with open(os.path.join(proj, "e.yaml"), "w") as f:
            f.write("entrypoint: /usr/bin/python3 t.py\n"
                    "searcher: {name: single, metric: m, max_length: 1}\n"
                    "reproducibility: {snapshot_limit_mb: 1}\ndata: [../../../../sub]\n")
        run = subprocess.run([CAIRN, "run", "e.yaml"], cwd=proj, capture_output=True, text=True,
                             env={k: v for k, v in os.environ.items() if k != "CAIRN_DIR"}, timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(os.listdir(os.path.join(proj, "sub")), ["precious.txt"])
        self.assertFalse(os.path.islink(os.path.join(proj, "sub")))

    def test_an_interrupted_verify_says_not_verified(self):
        self.write("slow.py", "import time\nimport cairn\nctx = cairn.init()\n"
                   "step = ctx.steps_completed\n"
                   "for op in ctx.operations():\n"
                   "    while step < op.length:\n"
                   "        step += 1\n"
                   "        time.sleep(0.05)\n"
                   "        ctx.report_training(step, {'loss': 1.0 / step})\n"
                   "        if ctx.checkpoint_due(step):\n"
                   "            with ctx.checkpoint(step) as path:\n"
                   "                (path / 's').write_text(str(step))\n"
                   "            if ctx.should_preempt():\n"
                   "                raise SystemExit(0)\n"
                   "    ctx.report_validation(step, {'val_loss': 1.0 / step})\n")
        self.write("slow.yaml", "entrypoint: /usr/bin/python3 slow.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 60}\n")
        self.cairn("run", "slow.yaml", check=0)
        env = dict(os.environ, NO_COLOR="1")
        env.pop("CAIRN_DIR", None)
        proc = subprocess.Popen([CAIRN, "reproduce", "1.1", "--verify"], cwd=self.dir, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(proc.kill)
        wait_until(lambda: self.cairn("show", "2.1", "--json").returncode == 0 and
                   self.cairn_json("show", "2.1", "--json")["state"] == "RUNNING",
                   what="the re-run to train")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 130, err)
        self.assertIn("cairn: the re-run 2 was interrupted (PAUSED): not verified; "
                      "`cairn resume 2` finishes it", err)
        self.assertNotIn("does not reproduce", err)

    def test_reproduce_verify_fails_when_the_rerun_reports_more(self):
        # The same values as recorded, plus (in the re-run only) a metric, or a step.
        report = '        ctx.report_training(step, {"loss": (w - 2.0) ** 2})\n'
        rerun = 'os.environ["CAIRN_EXPERIMENT_ID"] != "1"'
        for replacement, message in (
                ('        ctx.report_training(step, dict({"loss": (w - 2.0) ** 2}, **({"extra": 1.0} if %s else {})))\n' % rerun,
                 r"first difference at step 1 \(training\): extra is reported by the re-run only"),
                (report + '        if %s and step == 2: ctx.report_validation(step, {"val_loss": 1.0})\n' % rerun,
                 r"step 2 \(validation\) is in the re-run only")):
            with self.subTest(replacement=replacement):
                self.write("train.py", TRAIN.replace("NOISE", "0.0").replace(report, replacement))
                shutil.rmtree(os.path.join(self.dir, ".cairn"), ignore_errors=True)
                self.cairn("run", "exp.yaml", check=0)
                proc = self.cairn("reproduce", "1.1", "--verify")
                self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
                self.assertRegex(proc.stderr, message)

    def test_reproduce_of_a_trial_that_stopped_early_trains_to_where_it_stopped(self):
        # The trial fails for good at step 5 of the 6 it was asked for (no restarts). With
        # validations every 2 steps, the re-run trains to step 4, its last validation; with
        # none, to its last recorded training step, and the re-run's closing validation there,
        # which the original never reached, is not compared.
        report = '        ctx.report_training(step, {"loss": (w - 2.0) ** 2})\n'
        validate = ('        if step % 2 == 0:\n'
                    '            ctx.report_validation(step, {"val_loss": (w - 2.5) ** 2})\n')
        crash = '        if step == 5 and os.environ["CAIRN_EXPERIMENT_ID"] == "1": sys.exit(3)\n'
        for validates in (True, False):
            with self.subTest(validates=validates):
                shutil.rmtree(os.path.join(self.dir, ".cairn"), ignore_errors=True)
                self.write("train.py", TRAIN.replace("NOISE", "0.0").replace(
                    report, report + (validate if validates else "") + crash))
                self.write("exp.yaml", CONFIG.replace("max_length: 3", "max_length: 6") +
                           "max_restarts: 0\n")
                self.cairn("run", "exp.yaml")
                original = self.cairn_json("show", "1.1", "--json")
                self.assertEqual(original["state"], "ERROR")
                metrics = self.cairn_json("metrics", "1.1", "--json")
                stopped = (metrics["validation"][-1]["step"] if validates
                           else metrics["training"][-1]["step"])
                if validates:
                    self.assertEqual(stopped, 4)
                proc = self.cairn("reproduce", "1.1", "--verify")
                self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
                self.assertIn("cairn: trial 1.1 (ERROR) stopped before the 6 steps it was to "
                              "train: the re-run trains to step %d, where it last %s"
                              % (stopped, "validated" if validates else "reported training"),
                              proc.stdout)
                self.assertIn("verified: 2.1 reproduces 1.1 exactly", proc.stdout)
                self.assertIn("up to step %d, where 1.1 stopped" % stopped, proc.stdout)
                self.assertEqual(self.cairn_json("show", "2", "--json")["reproduces"]["lengths"],
                                 [stopped])
                replayed = self.cairn_json("metrics", "2.1", "--json")
                self.assertEqual(replayed["training"][-1]["step"], stopped)
                self.assertEqual(replayed["training"],
                                 [p for p in metrics["training"] if p["step"] <= stopped])

    def test_builtin_mlp_asha_trial_reproduces_bit_exact(self):
        self.write("mlp.yaml", """name: mlp
entrypoint: builtin:mlp
hyperparameters:
  hidden: 16
  layers: 1
  batch_size: 32
  samples: 600
  lr: {type: log, minval: -2, maxval: -0.3}
searcher: {name: asha, metric: val_loss, max_length: 4, divisor: 2, max_trials: 4, max_rungs: 3,
           mode: aggressive, max_concurrent_trials: 2}
reproducibility: {seed: 3, deterministic: true}
""")
        self.cairn("run", "mlp.yaml", check=0)
        exp = self.cairn_json("show", "1", "--json")
        # The built-in trainer is cairn itself: its dynamically linked Gloo is recorded.
        self.assertRegex(exp["dependencies"].get("libgloo.so.0", ""), r"^\d+\.\d+")
        promoted = [t["id"] for t in exp["trials"] if t["steps_completed"] == 4]
        self.assertTrue(promoted, "some trial went through every rung")
        best = promoted[0]
        proc = self.cairn("reproduce", best, "--verify", check=0)
        self.assertIn("verified", proc.stdout)
        again = self.cairn_json("show", "2", "--json")
        self.assertEqual(again["reproduces"]["lengths"], [1, 2, 4])
        self.assertEqual(self.cairn_json("metrics", best, "--json")["validation"],
                         self.cairn_json("metrics", "2.1", "--json")["validation"])

    def test_a_standalone_run_and_an_export_do_not_hide_the_code_edit_in_compare(self):
        self.cairn("run", "exp.yaml", check=0)
        # The script run by hand, without cairn (5 steps at the default period 1), then the
        # best checkpoint exported into the project, then an edit.
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
        env.update(PYTHONPATH=os.path.join(SOURCE, "sdk", "python"), CAIRN_MAX_LENGTH="5",
                   CAIRN_HPARAMS='{"lr": 0.01}', PYTHONDONTWRITEBYTECODE="1")
        subprocess.run([PYTHON, "train.py"], cwd=self.dir, env=env, check=True,
                       capture_output=True, timeout=120)
        checkpoints = os.path.join(self.dir, "checkpoints")
        self.assertEqual(sorted(os.listdir(checkpoints)), [".gitignore", "5"])
        self.cairn("export", "1.1@best", "out/", check=0)
        exported = sorted(os.listdir(os.path.join(self.dir, "out")))
        self.write("train.py", TRAIN.replace("NOISE", "0.0") + "# edited\n")
        self.cairn("run", "exp.yaml", check=0)

        diffs, doc = self.differences("1.1", "2.1")
        self.assertEqual(diffs, sorted([("code", "train.py")] +
                                       [("code", "out/" + f) for f in exported]),
                         json.dumps(doc, indent=1))
        text = self.cairn("compare", "1.1", "2.1", check=0).stdout
        self.assertIn("code: %d files changed (train.py, %s): 1 modified, %d added" %
                      (len(exported) + 1, ", ".join("out/" + f for f in exported), len(exported)),
                      text)

    def test_trials_run_from_the_snapshot_not_the_live_workdir(self):
        self.write("marker.py", r'''
import os, time
import cairn
MARKER = 1.0
ctx = cairn.init()
if ctx.hparams["i"] == 1:
    go = os.path.join(os.environ["CAIRN_WORKDIR"], "go")
    deadline = time.time() + 120
    while not os.path.exists(go) and time.time() < deadline:
        time.sleep(0.05)
for op in ctx.operations():
    ctx.report_validation(op.length, {"val_loss": MARKER})
''')
        self.write("grid.yaml", """entrypoint: /usr/bin/python3 marker.py
hyperparameters:
  i: {type: categorical, vals: [1, 2]}
searcher: {name: grid, metric: val_loss, max_length: 1, max_concurrent_trials: 1}
""")
        exp_id = self.cairn("run", "--detach", "grid.yaml", check=0).stdout.split()[0]
        def first_running():
            shown = self.cairn("show", exp_id, "--json")  # fails until the record exists
            return shown.returncode == 0 and any(t["state"] == "RUNNING"
                                                 for t in json.loads(shown.stdout)["trials"])
        wait_until(first_running, what="the first trial to run")
        self.write("marker.py", open(os.path.join(self.dir, "marker.py")).read()
                   .replace("MARKER = 1.0", "MARKER = 2.0"))
        self.write("go", "")
        wait_until(lambda: self.cairn_json("show", exp_id, "--json")["state"] == "COMPLETED",
                   timeout=120, what="the experiment to complete")
        trials = self.cairn_json("show", exp_id, "--json")["trials"]
        self.assertEqual([t["best_validation"]["val_loss"] for t in trials], [1.0, 1.0])

    def test_workdir_over_the_snapshot_limit_is_refused_naming_its_largest_files(self):
        self.write("exp.yaml", CONFIG.replace("seed: 17}", "seed: 17, snapshot_limit_mb: 1}"))
        with open(os.path.join(self.dir, "weights.bin"), "wb") as f:
            f.write(b"\0" * (3 << 20))
        proc = self.cairn("run", "exp.yaml")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertRegex(proc.stderr, r"^cairn: error: .*over the 1 MB snapshot limit.*weights\.bin")
        self.assertEqual(self.cairn_json("ls", "--json"), [])

    def test_reproduce_in_a_git_project_with_its_store_inside(self):
        # The usual layout: .cairn/ inside a git checkout. The re-run's checkout lies in
        # .cairn/reproduce/, below the project's repository, yet belongs to none of it (the
        # store's own .gitignore says `*`): its snapshot must still hold every file.
        subprocess.run(["git", "init", "-q"], cwd=self.dir, check=True, timeout=120)
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit",
                        "-q", "--allow-empty", "-m", "first"], cwd=self.dir, check=True, timeout=120)
        self.write("exp.yaml", CONFIG.replace("reproducibility: {seed: 17}\n", ""))
        self.cairn("run", "exp.yaml", check=0)
        proc = self.cairn("reproduce", "1.1", "--verify")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("verified", proc.stdout)
        diffs, doc = self.differences("1.1", "2.1")
        self.assertEqual(diffs, [], json.dumps(doc, indent=1))

    def test_users_git_repository_is_left_byte_identical(self):
        repo = os.path.join(self.dir, "repo")
        os.makedirs(repo)

        def git(*args):
            return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com",
                                   *args], cwd=repo, check=True, capture_output=True,
                                  text=True, timeout=120).stdout

        git("init", "-q", "-b", "main")
        self.write("repo/train.py", TRAIN.replace("NOISE", "0.0"))
        self.write("repo/data/train.csv", "1\n2\n3\n")
        self.write("repo/exp.yaml", CONFIG)
        self.write("repo/notes.txt", "v1\n")
        self.write("repo/.gitignore", "*.log\n")
        git("add", "-A")
        git("commit", "-q", "-m", "first")
        self.write("repo/notes.txt", "v2 staged\n")
        git("add", "notes.txt")
        self.write("repo/notes.txt", "v3 unstaged\n")
        self.write("repo/new.txt", "untracked\n")
        self.write("repo/run.log", "ignored\n")

        def state():
            files = {}
            for root, _, names in os.walk(os.path.join(repo, ".git")):
                for name in names:
                    path = os.path.join(root, name)
                    st = os.lstat(path)
                    with open(path, "rb") as f:
                        files[os.path.relpath(path, repo)] = (f.read(), st.st_mtime_ns, st.st_mode)
            tree = {}
            for name in ("train.py", "notes.txt", "new.txt", "run.log", "exp.yaml"):
                with open(os.path.join(repo, name), "rb") as f:
                    tree[name] = (f.read(), os.stat(os.path.join(repo, name)).st_mtime_ns)
            return files, tree, git("--no-optional-locks", "status", "--porcelain=v1", "-uall")

        before = state()
        proc = subprocess.run([CAIRN, "run", "exp.yaml"], cwd=repo, capture_output=True, text=True,
                              env=dict(os.environ, NO_COLOR="1"), timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        after = state()
        self.assertEqual(before[2], after[2])
        self.assertEqual(before[1], after[1])
        self.assertEqual(sorted(before[0]), sorted(after[0]))
        for name in before[0]:
            self.assertEqual(before[0][name], after[0][name], name)

        exp = json.loads(subprocess.run([CAIRN, "show", "1", "--json"], cwd=repo, check=True,
                                        capture_output=True, text=True, timeout=120).stdout)
        self.assertEqual(exp["code"]["git"]["head"], git("rev-parse", "HEAD").strip())
        self.assertEqual(exp["code"]["git"]["branch"], "main")
        self.assertTrue(exp["code"]["git"]["dirty"])
        store_git = ["git", "--git-dir", os.path.join(repo, ".cairn", "code.git")]
        listed = subprocess.run(store_git + ["ls-tree", "-r", "--name-only", exp["code"]["commit"]],
                                check=True, capture_output=True, text=True, timeout=120).stdout.split()
        self.assertEqual(sorted(listed), [".gitignore", "exp.yaml", "new.txt", "notes.txt",
                                          "train.py"])
        notes = subprocess.run(store_git + ["show", exp["code"]["commit"] + ":notes.txt"],
                               check=True, capture_output=True, text=True, timeout=120).stdout
        self.assertEqual(notes, "v3 unstaged\n", "the snapshot holds the working tree")
        self.assertEqual([f["path"] for f in exp["data"]["files"]], ["data/train.csv"])


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
