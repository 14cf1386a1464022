"""End to end: population-based training (searcher.name: pbt) with real trial processes.
Clones start from their parent's checkpoint with perturbed hyperparameters, every trial keeps
one set of hyperparameters, the lineage is recorded, and a search killed with kill -9 and
resumed makes the same decisions."""
import json
import os
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, CairnTestCase, wait_until  # noqa: E402

# Each unit trained appends "trial step x value" to units.txt; the model's state is one
# number, `value`, that moves toward x each unit, saved in the checkpoint with the step and
# the x that produced it: a clone resumes its parent's value with its own x.
TRIAL = r'''
import os, sys, time
import cairn

ctx = cairn.init()
step = ctx.steps_completed
value = 0.0
if ctx.latest_checkpoint:
    saved = (ctx.latest_checkpoint / "state").read_text().split()
    assert int(saved[0]) == step, (saved, step)
    value = float(saved[1])
    with open(os.path.join(os.environ["CAIRN_WORKDIR"], "restores.txt"), "a") as f:
        f.write("%s %d %s\n" % (ctx.trial_id, step, saved[2]))
x = ctx.hparams["x"]
for op in ctx.operations():
    while step < op.length:
        step += 1
        value += x
        if os.path.exists(os.path.join(os.environ["CAIRN_WORKDIR"], "slow")):
            time.sleep(0.3)  # so that a test can kill cairn mid-search
        with open(os.path.join(os.environ["CAIRN_WORKDIR"], "units.txt"), "a") as f:
            f.write("%s %d %r %r\n" % (ctx.trial_id, step, x, value))
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / "state").write_text("%d %r %s" % (step, value, ctx.trial_id))
            if ctx.should_preempt():
                sys.exit(0)
    ctx.report_validation(step, {"score": value})
'''

CONFIG = """name: pbt
entrypoint: /usr/bin/python3 trial.py
hyperparameters:
  x: {type: double, minval: 0.1, maxval: 1.0}
  depth: 3
searcher:
  name: pbt
  metric: score
  smaller_is_better: false
  max_length: 8
  population_size: 4
  perturbation_interval: 2
  quantile_fraction: 0.25
checkpoint: {period: 1000}
reproducibility: {seed: 11}
"""


class PbtTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.write("trial.py", TRIAL)
        self.write("pbt.yaml", CONFIG)

    def lines(self, name):
        path = os.path.join(self.dir, name)
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [line.split() for line in f]

    def check_search(self, exp):
        self.assertEqual(exp["state"], "COMPLETED")
        trials = {t["id"]: t for t in exp["trials"]}
        # 4 members, one replaced in each of the 3 generations before max_length.
        self.assertEqual(len(trials), 7)
        clones = {i: t for i, t in trials.items() if t.get("parent")}
        self.assertEqual(len(clones), 3)
        units = self.lines("units.txt")
        restores = {(r[0], int(r[1])): r[2] for r in self.lines("restores.txt")}
        for tid, t in clones.items():
            parent = trials[t["parent"]["trial"]]
            at = t["parent"]["step"]
            self.assertIn(at, (2, 4, 6))
            # It started from its parent's checkpoint at that step: the parent wrote it.
            self.assertEqual(restores.get((tid, at)), parent["id"], tid)
            # Its own hyperparameters: x perturbed by 0.8 or 1.2 (kept in range), the constant
            # kept; every unit it trained used them.
            px, cx = parent["hparams"]["x"], t["hparams"]["x"]
            self.assertTrue(any(abs(cx - min(max(px * f, 0.1), 1.0)) < 1e-9 for f in (0.8, 1.2)),
                            (px, cx))
            self.assertEqual(t["hparams"]["depth"], 3)
            mine = [u for u in units if u[0] == tid]
            self.assertEqual([int(u[1]) for u in mine], list(range(at + 1, 9)), tid)
            self.assertTrue(all(float(u[2]) == cx for u in mine))
            self.assertEqual(t["state"], "COMPLETED")
        stopped = [t for t in trials.values() if t["state"] == "STOPPED"]
        self.assertEqual(len(stopped), 3, "each generation's worst member was replaced")
        # No unit trained twice by one trial.
        self.assertEqual(len({(u[0], u[1]) for u in units}), len(units))
        lineage = exp["searcher_state"]["lineage"]
        self.assertEqual(len(lineage), 3)
        return sorted((t["id"], json.dumps(t["hparams"], sort_keys=True), t["state"],
                       json.dumps(t.get("parent"), sort_keys=True)) for t in trials.values())

    def test_clones_start_from_their_parents_checkpoints_with_their_own_hparams(self):
        self.cairn("run", "pbt.yaml", check=0, timeout=300)
        exp = self.cairn_json("show", "1", "--json")
        self.check_search(exp)
        # `show` and `watch` print the lineage: each clone, its parent and the step, and the
        # generation numbered as docs/search.md does (the last, 4, trains to 4 × 2 units).
        clones = [t for t in exp["trials"] if t.get("parent")]
        # Nothing copied in the store: each clone's record points at a checkpoint its parent
        # committed at the clone step, and no checkpoint of the clone's own is at that step.
        checkpoints = self.cairn_json("checkpoints", "1", "--json")
        for t in clones:
            (source,) = [c for c in checkpoints if c["id"] == t["parent"]["checkpoint"]]
            self.assertEqual((source["trial"], source["steps_completed"]),
                             (t["parent"]["trial"], t["parent"]["step"]))
            self.assertFalse([c for c in checkpoints if c["trial"] == t["id"]
                              and c["steps_completed"] <= t["parent"]["step"]], t["id"])
        for command in ("show", "watch"):
            with self.subTest(command=command):
                out = self.cairn(command, "1", check=0, timeout=60).stdout
                self.assertRegex(out, r"(?m)^search +pbt generation 4 \(to 8 units\), 7 trials created")
                self.assertRegex(out, r"(?m)^TRIAL +CLONED FROM +AT$")
                for t in clones:
                    self.assertRegex(out, r"(?m)^%s +%s +%d$" % (
                        t["id"].replace(".", r"\."), t["parent"]["trial"].replace(".", r"\."),
                        t["parent"]["step"]))

    def test_killed_and_resumed_search_makes_the_same_decisions(self):
        self.cairn("run", "pbt.yaml", check=0, timeout=300)
        clean = self.check_search(self.cairn_json("show", "1", "--json"))
        for name in ("units.txt", "restores.txt"):
            os.rename(os.path.join(self.dir, name), os.path.join(self.dir, "first-" + name))
        self.write("slow", "")
        run = subprocess.Popen([CAIRN, "run", "pbt.yaml"], cwd=self.dir, env=self.cairn_env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
        self.addCleanup(lambda: run.poll() is None and run.kill())
        # Killed once a clone exists (the second generation has begun).
        wait_until(lambda: any(u[0].endswith(".5") for u in self.lines("units.txt")), 120,
                   what="a clone trains")
        os.kill(run.pid, signal.SIGKILL)  # cairn alone: its trials checkpoint and exit
        run.wait(timeout=30)
        self.assertEqual(self.cairn_json("show", "2", "--json")["state"], "ACTIVE",
                         "killed mid-search")
        os.remove(os.path.join(self.dir, "slow"))
        self.cairn("resume", "2", check=0, timeout=300)
        resumed = self.check_search(self.cairn_json("show", "2", "--json"))
        strip = lambda rows: [(r[0].split(".")[1],) + r[1:3] for r in rows]  # noqa: E731
        self.assertEqual(strip(resumed), strip(clean))

    def test_reproduce_of_a_clone_restarts_from_its_parents_checkpoint(self):
        # Retention keeps only each trial's latest checkpoint: the parent checkpoint a clone
        # started from (older than its parent's latest) survives `cairn gc` only because the
        # clone refers to it.
        self.write("pbt.yaml", CONFIG.replace(
            "checkpoint: {period: 1000}",
            "checkpoint: {period: 1000, keep_trial_latest: 1, keep_trial_best: 0}"))
        self.cairn("run", "pbt.yaml", check=0, timeout=300)
        self.cairn("gc", "1", check=0, timeout=120)
        exp = self.cairn_json("show", "1", "--json")
        trials = {t["id"]: t for t in exp["trials"]}
        clone = next(t for t in exp["trials"] if t.get("parent"))
        at = clone["parent"]["step"]
        checkpoint = clone["parent"]["checkpoint"]
        parent_latest = trials[clone["parent"]["trial"]]["latest_checkpoint"]
        self.assertNotEqual(checkpoint, parent_latest, "the parent trained on past the clone")
        kept = self.cairn("checkpoints", clone["parent"]["trial"], check=0).stdout
        self.assertIn(checkpoint[:12], kept, "retention kept the checkpoint the clone refers to")

        proc = self.cairn("reproduce", clone["id"], "--verify", check=0, timeout=300)
        self.assertIn("is a clone of %s" % clone["parent"]["trial"], proc.stdout)
        self.assertIn("verified: 2.1 reproduces %s exactly" % clone["id"], proc.stdout)
        again = self.cairn_json("show", "2", "--json")["trials"][0]
        # It restored the very checkpoint the clone started from, at the step it was made at,
        # and trained only the clone's own units, with the clone's hyperparameters.
        self.assertEqual(again["parent"], clone["parent"])
        self.assertEqual(again["hparams"], clone["hparams"])
        (checkout,) = os.listdir(os.path.join(self.dir, ".cairn", "reproduce"))
        workdir = os.path.join(self.dir, ".cairn", "reproduce", checkout)
        with open(os.path.join(workdir, "units.txt")) as f:
            units = [line.split() for line in f]
        self.assertEqual([int(u[1]) for u in units], list(range(at + 1, 9)))
        with open(os.path.join(workdir, "restores.txt")) as f:
            self.assertEqual(f.read().split(), ["2.1", str(at), clone["parent"]["trial"]])

    def test_builtin_mlp_clones_continue_across_a_perturbed_optimizer(self):
        # Every clone draws its optimizer afresh: those that got the other one load the
        # parent's weights and start that optimizer from fresh state, and none errors.
        self.write("mlp.yaml", """entrypoint: builtin:mlp
hyperparameters:
  lr: {type: log, minval: -3, maxval: -1, base: 10}
  optimizer: {type: categorical, vals: [sgd, adam]}
  hidden: 8
  samples: 200
searcher:
  name: pbt
  metric: val_loss
  max_length: 8
  population_size: 4
  perturbation_interval: 2
  perturbations: {optimizer: {resample_probability: 1}}
reproducibility: {seed: 4}
""")
        self.cairn("run", "mlp.yaml", check=0, timeout=300)
        exp = self.cairn_json("show", "1", "--json")
        trials = {t["id"]: t for t in exp["trials"]}
        clones = [t for t in trials.values() if t.get("parent")]
        self.assertEqual(len(clones), 3)
        self.assertNotIn("ERROR", [t["state"] for t in trials.values()])
        switched = [t for t in clones
                    if t["hparams"]["optimizer"] != trials[t["parent"]["trial"]]["hparams"]["optimizer"]]
        self.assertTrue(switched, "seed 4 gives some clone the other optimizer")
        for t in switched:
            log = self.cairn("logs", t["id"], check=0).stdout
            self.assertIn("builtin:mlp: the checkpoint holds %s's state; %s starts from fresh state"
                          % (trials[t["parent"]["trial"]]["hparams"]["optimizer"],
                             t["hparams"]["optimizer"]), log)


class PbtConfigTest(CairnTestCase):
    def bad(self, searcher_lines, hparams="  x: {type: double, minval: 0.1, maxval: 1.0}\n  depth: 3\n"):
        self.write("bad.yaml", "name: bad\nentrypoint: /usr/bin/python3 trial.py\nhyperparameters:\n"
                   + hparams + "searcher:\n  name: pbt\n  metric: score\n  max_length: 8\n"
                   + searcher_lines)
        proc = self.cairn("run", "bad.yaml", check=2)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        return proc.stderr

    def test_bad_pbt_configs_name_file_line_and_key(self):
        err = self.bad("  perturbation_interval: 2\n")
        self.assertIn("bad.yaml:", err)
        self.assertIn("searcher.population_size", err)
        err = self.bad("  population_size: 4\n  perturbation_interval: 2\n  quantile_fraction: 0.2\n")
        self.assertIn("bad.yaml:12: searcher.quantile_fraction", err)
        self.assertIn("leaves no trial to replace", err)
        err = self.bad("  population_size: 4\n  perturbation_interval: 9\n")
        self.assertIn("bad.yaml:11: searcher.perturbation_interval", err)
        err = self.bad("  population_size: 4\n  perturbation_interval: 2\n"
                       "  perturbations:\n    depth: {factors: [0.5, 2]}\n")
        self.assertIn("bad.yaml:13: searcher.perturbations.depth", err)
        self.assertIn("is a constant", err)
        err = self.bad("  population_size: 4\n  perturbation_interval: 2\n"
                       "  perturbations:\n    x: {factors: [0.5, -2]}\n")
        self.assertIn("searcher.perturbations.x.factors", err)
        err = self.bad("  population_size: 4\n  perturbation_interval: 2\n"
                       "  perturbations:\n    x: {resample_probability: 1.5}\n")
        self.assertIn("searcher.perturbations.x.resample_probability", err)
        # A categorical value is kept or resampled, never multiplied: factors for one would
        # be silently ignored, so they are refused.
        err = self.bad("  population_size: 4\n  perturbation_interval: 2\n"
                       "  perturbations:\n    opt: {factors: [0.5, 2]}\n",
                       hparams="  x: {type: double, minval: 0.1, maxval: 1.0}\n"
                               "  opt: {type: categorical, vals: [a, b]}\n")
        self.assertIn("bad.yaml:13: searcher.perturbations.opt.factors: is categorical", err)


if __name__ == "__main__":
    unittest.main()
