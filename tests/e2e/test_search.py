"""End to end: hyperparameter search with real trial processes — golden Hyperband, grid,
random determinism, ASHA, NaN metrics, a search killed with kill -9 and resumed, and
TPE and BOHB making the same trials for a seed, killed and resumed or not."""
import collections
import os
import random
import signal
import subprocess
import time
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, CairnTestCase  # noqa: E402
import cairn_testlib  # noqa: E402

# An instant trial: each unit it trains appends a line to units.txt, so tests count what
# trials actually trained, not what cairn says. Its metric is a fixed function of x and step.
INSTANT = r'''
import math, os, sys
import cairn

ctx = cairn.init()
step = ctx.steps_completed
if ctx.latest_checkpoint:
    assert int((ctx.latest_checkpoint / "step").read_text()) == step
x = ctx.hparams.get("x", 0.5)
for op in ctx.operations():
    while step < op.length:
        step += 1
        with open(os.path.join(os.environ["CAIRN_WORKDIR"], "units.txt"), "a") as f:
            f.write("%s %d\n" % (ctx.trial_id, step))
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / "step").write_text(str(step))
            if ctx.should_preempt():
                sys.exit(0)
    value = (x - 0.3) ** 2 + 1.0 / step
    if ctx.hparams.get("nan") == 1:
        value = float("nan")
    ctx.report_validation(step, {"val_loss": value})
'''

HYPERBAND = """name: hb
entrypoint: /usr/bin/python3 instant.py
hyperparameters:
  x: {type: double, minval: 0, maxval: 1}
searcher: {name: hyperband, metric: val_loss, max_length: %d, divisor: 3}
checkpoint: {period: 1000}
reproducibility: {seed: 5}
"""


class SearchTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.write("instant.py", INSTANT)

    def units(self):
        with open(os.path.join(self.dir, "units.txt")) as f:
            return [tuple(line.split()) for line in f]

    def test_hyperband_golden_r81_eta3(self):
        self.write("hb.yaml", HYPERBAND % 81)
        self.cairn("run", "hb.yaml", check=0, timeout=600)
        units = self.units()
        self.assertEqual(len(units), 1581, "units actually trained: resumed, never retrained")
        self.assertEqual(len(set(units)), 1581, "no unit trained twice")
        # Each trial trained steps 1..n contiguously across its pauses and promotions.
        per_trial = collections.defaultdict(list)
        for trial, step in units:
            per_trial[trial].append(int(step))
        for trial, steps in per_trial.items():
            self.assertEqual(sorted(steps), list(range(1, len(steps) + 1)), trial)
        exp = self.cairn_json("show", "1", "--json")
        self.assertEqual(exp["state"], "COMPLETED")
        self.assertEqual(len(exp["trials"]), 143)
        rungs = [[(r["length"], r["completed"]) for r in b["rungs"]] for b in exp["searcher_state"]["brackets"]]
        self.assertEqual(rungs, [
            [(1, 81), (3, 27), (9, 9), (27, 3), (81, 1)],
            [(3, 34), (9, 11), (27, 3), (81, 1)],
            [(9, 15), (27, 5), (81, 1)],
            [(27, 8), (81, 2)],
            [(81, 5)],
        ])
        states = collections.Counter(t["state"] for t in exp["trials"])
        self.assertEqual(states, {"COMPLETED": 10, "STOPPED": 133})
        # The best trial is the one with x closest to 0.3 among those that reached 81.
        finalists = [t for t in exp["trials"] if t["state"] == "COMPLETED"]
        best = min(finalists, key=lambda t: abs(t["hparams"]["x"] - 0.3))
        self.assertEqual(exp["best_trial"], best["id"])
        self.assertEqual(self.cairn("best", "1", check=0).stdout.strip(), best["id"])

    def test_grid_is_the_cartesian_product(self):
        self.write("grid.yaml", """entrypoint: /usr/bin/python3 instant.py
hyperparameters:
  x: {type: double, minval: 0, maxval: 1, count: 3}
  opt: {type: categorical, vals: [a, b]}
  depth: {type: int, minval: 1, maxval: 2}
searcher: {name: grid, metric: val_loss, max_length: 2}
""")
        self.cairn("run", "grid.yaml", check=0)
        exp = self.cairn_json("show", "1", "--json")
        got = sorted((t["hparams"]["x"], t["hparams"]["opt"], t["hparams"]["depth"]) for t in exp["trials"])
        want = sorted((x, o, d) for x in (0.0, 0.5, 1.0) for o in ("a", "b") for d in (1, 2))
        self.assertEqual(got, want)
        self.assertTrue(all(t["state"] == "COMPLETED" and t["steps_completed"] == 2 for t in exp["trials"]))
        self.assertEqual(len(self.units()), 12 * 2)

    def test_random_is_deterministic_for_a_seed(self):
        self.write("random.yaml", """entrypoint: /usr/bin/python3 instant.py
hyperparameters:
  x: {type: double, minval: 0, maxval: 1}
  lr: {type: log, minval: -4, maxval: -1}
searcher: {name: random, metric: val_loss, max_length: 1, max_trials: 6}
reproducibility: {seed: 99}
""")
        self.cairn("run", "random.yaml", check=0)
        self.cairn("run", "random.yaml", check=0)
        self.cairn("run", "random.yaml", "--set", "reproducibility.seed=100", check=0)
        trials = [[(t["hparams"], t["seed"]) for t in self.cairn_json("show", str(i), "--json")["trials"]]
                  for i in (1, 2, 3)]
        self.assertEqual(len(trials[0]), 6)
        self.assertEqual(trials[0], trials[1])
        self.assertNotEqual(trials[0], trials[2])

    def test_asha_completes_and_nan_is_worst(self):
        self.write("asha.yaml", """entrypoint: /usr/bin/python3 instant.py
hyperparameters:
  x: {type: double, minval: 0, maxval: 1}
  nan: {type: categorical, vals: [0, 0, 0, 1]}
searcher: {name: asha, metric: val_loss, max_length: 9, max_trials: 12, divisor: 3, max_rungs: 3, mode: aggressive}
checkpoint: {period: 1000}
reproducibility: {seed: 3}
""")
        self.cairn("run", "asha.yaml", check=0)
        exp = self.cairn_json("show", "1", "--json")
        self.assertEqual(exp["state"], "COMPLETED")
        self.assertEqual(len(exp["trials"]), 12)
        self.assertTrue(all(t["state"] in ("COMPLETED", "STOPPED") for t in exp["trials"]))
        nan_trials = [t for t in exp["trials"] if t["hparams"]["nan"] == 1]
        self.assertTrue(nan_trials, "the seed gives some NaN trials")
        for t in nan_trials:
            self.assertEqual(t["state"], "STOPPED", "a NaN metric is the worst: never promoted")
            log = self.cairn("logs", t["id"], check=0).stdout
            self.assertIn("no finite 'val_loss'", log)
        self.assertNotIn(exp["best_trial"], [t["id"] for t in nan_trials])
        self.assertGreater(sum(1 for t in exp["trials"] if t["steps_completed"] == 9), 0)

    def test_search_killed_at_random_moments_makes_the_same_decisions(self):
        self.write("hb.yaml", HYPERBAND % 27)
        self.cairn("run", "hb.yaml", check=0)
        straight = self.cairn_json("show", "1", "--json")
        straight_units = len(self.units())
        os.remove(os.path.join(self.dir, "units.txt"))

        rng = random.Random(1234)
        env = dict(os.environ, NO_COLOR="1")
        log = open(os.path.join(self.dir, "driver.log"), "w")
        self.addCleanup(log.close)
        proc = subprocess.Popen([CAIRN, "run", "hb.yaml"], cwd=self.dir, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
        kills = 0
        # Bounded: at most 20 kills, then the last resume gets 120 s to finish, so a resume
        # that never ends fails the test instead of looping until ctest's limit.
        while kills < 20:
            try:
                proc.wait(timeout=rng.uniform(0.2, 0.8))
                break
            except subprocess.TimeoutExpired:
                if kills == 0:
                    self.wait_recorded(2, proc)
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=30)
                kills += 1
                proc = subprocess.Popen([CAIRN, "resume", "2"], cwd=self.dir, env=env, stdout=log,
                                        stderr=subprocess.STDOUT)
        else:
            proc.wait(timeout=120)
        log.flush()
        with open(os.path.join(self.dir, "driver.log")) as f:
            out = f.read()
        self.assertEqual(proc.returncode, 0, out)
        self.assertGreaterEqual(kills, 2, "the run was interrupted several times")
        resumed = self.cairn_json("show", "2", "--json")
        self.assertEqual(resumed["state"], "COMPLETED")
        key = lambda exp: [(t["id"].split(".")[1], t["hparams"], t["seed"], t["state"], t["steps_completed"])
                           for t in exp["trials"]]
        self.assertEqual(key(resumed), key(straight))
        self.assertEqual(resumed["searcher_state"]["brackets"], straight["searcher_state"]["brackets"])
        self.assertEqual(resumed["best_trial"].split(".")[1], straight["best_trial"].split(".")[1])
        # Units actually trained: trials checkpoint at each rung, so a kill costs at most the
        # units of one rung (27 - 9 here) per trial it interrupts; with 2 slots, 2 trials.
        trained = len(self.units())
        self.assertGreaterEqual(trained, straight_units)
        self.assertLessEqual(trained, straight_units + kills * 2 * 18)

    def wait_recorded(self, exp_id, proc):
        """Waits (bounded) until `cairn run` has recorded experiment exp_id: a kill before
        that leaves nothing to resume (test_lifecycle covers it), so the first kill of a
        run waits for it; on a loaded machine creating the database can take longer than
        the first random moment."""
        deadline = time.monotonic() + 60
        while self.cairn("show", str(exp_id), "--json", check=None).returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                self.fail("experiment %d was not recorded within 60 s" % exp_id)
            time.sleep(0.02)

    def run_killed_at_random_moments(self, config, exp_id, seed, max_kills=20):
        """Runs `cairn run CONFIG`, kills it with SIGKILL at random moments and resumes it
        (experiment `exp_id`) until it finishes; returns the number of kills."""
        rng = random.Random(seed)
        env = dict(os.environ, NO_COLOR="1")
        log = open(os.path.join(self.dir, "driver.log"), "a")
        self.addCleanup(log.close)
        proc = subprocess.Popen([CAIRN, "run", config], cwd=self.dir, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
        kills = 0
        # Bounded: at most max_kills kills, then the last resume gets 120 s to finish.
        while kills < max_kills:
            try:
                proc.wait(timeout=rng.uniform(0.2, 0.6))
                break
            except subprocess.TimeoutExpired:
                if kills == 0:
                    self.wait_recorded(exp_id, proc)
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=30)
                kills += 1
                proc = subprocess.Popen([CAIRN, "resume", str(exp_id)], cwd=self.dir, env=env,
                                        stdout=log, stderr=subprocess.STDOUT)
        else:
            proc.wait(timeout=120)
        log.flush()
        with open(os.path.join(self.dir, "driver.log")) as f:
            self.assertEqual(proc.returncode, 0, f.read())
        return kills

    def test_tpe_and_bohb_same_trials_for_a_seed_and_after_kill_and_resume(self):
        # One trial at a time, so each sample depends on the config and seed alone: a
        # second run creates the same trials, and so does a run killed with kill -9 at
        # random moments and resumed each time (the model is refitted from the event log).
        space = """entrypoint: /usr/bin/python3 instant.py
hyperparameters:
  x: {type: double, minval: 0, maxval: 1}
  k: {type: int, minval: 1, maxval: 5}
  opt: {type: categorical, vals: [a, b, c]}
checkpoint: {period: 1000}
reproducibility: {seed: 11}
"""
        configs = {
            "tpe": "searcher: {name: tpe, metric: val_loss, max_length: 2, max_trials: 14, "
                   "max_concurrent_trials: 1, tpe: {n_startup_trials: 4}}\n",
            "bohb": "searcher: {name: asha, sampler: tpe, metric: val_loss, max_length: 9, "
                    "max_rungs: 3, max_trials: 14, max_concurrent_trials: 1, "
                    "tpe: {n_startup_trials: 4}}\n",
        }
        exp = 0
        for name, searcher in configs.items():
            with self.subTest(searcher=name):
                self.write(name + ".yaml", space + searcher)
                self.cairn("run", name + ".yaml", check=0)
                self.cairn("run", name + ".yaml", check=0)
                kills = self.run_killed_at_random_moments(name + ".yaml", exp + 3, seed=exp + 7)
                runs = [self.cairn_json("show", str(exp + i), "--json") for i in (1, 2, 3)]
                exp += 3
                key = lambda e: [(t["id"].split(".")[1], t["hparams"], t["seed"], t["state"],
                                  t["steps_completed"]) for t in e["trials"]]
                self.assertEqual(len(runs[0]["trials"]), 14)
                self.assertEqual(key(runs[1]), key(runs[0]))
                self.assertEqual(key(runs[2]), key(runs[0]), "after %d kills" % kills)
                self.assertGreaterEqual(kills, 1, "the run was interrupted")
                for run in runs:
                    state = run["searcher_state"]
                    self.assertEqual(state["sampler"], "tpe")
                    self.assertGreater(state["tpe"]["model_trials"], 0)
                    self.assertEqual(state["tpe"], runs[0]["searcher_state"]["tpe"])
                # The model's trials differ from what random sampling gives the same seed.
                self.cairn("run", name + ".yaml", "--set", "searcher.sampler=random",
                           *(["--set", "searcher.name=random"] if name == "tpe" else []), check=0)
                exp += 1
                plain = self.cairn_json("show", str(exp), "--json")
                self.assertEqual(plain["searcher_state"]["sampler"], "random")
                self.assertEqual([t["hparams"] for t in plain["trials"]][:4],
                                 [t["hparams"] for t in runs[0]["trials"]][:4],
                                 "the startup trials are random search's")
                self.assertNotEqual([t["hparams"] for t in plain["trials"]],
                                    [t["hparams"] for t in runs[0]["trials"]])
                for command in ("show", "watch"):
                    shown = self.cairn(command, str(exp - 1), check=0).stdout
                    self.assertRegex(shown, r"sampler +tpe: \d+ trials from the model, \d+ at random; "
                                            r"the last model: \d+ observations at length \d+ \(for trial %d\.\d+\)"
                                     % (exp - 1), command)

    def test_invalid_searcher_configs_name_the_key(self):
        base = "entrypoint: /usr/bin/python3 instant.py\nhyperparameters:\n  x: {type: double, minval: 0, maxval: 1}\n"
        cases = [
            ("searcher: {name: hyperband, metric: m, max_length: 9, divisor: 1}\n", "searcher.divisor"),
            ("searcher: {name: asha, metric: m, max_length: 0, max_trials: 4}\n", "searcher.max_length"),
            ("searcher: {name: grid, metric: m, max_length: 3}\n", "hyperparameters.x"),
            ("searcher: {name: bayesian, metric: m, max_length: 3}\n", "searcher.name"),
            ("searcher: {name: random, metric: m, max_length: 3}\n", "searcher.max_trials"),
            ("searcher: {name: asha, metric: m, max_length: 9, max_trials: 4, mode: wild}\n", "searcher.mode"),
            ("searcher: {name: asha, metric: m, max_length: 9, max_trials: 4, sampler: bayes}\n",
             "searcher.sampler"),
            ("searcher: {name: tpe, metric: m, max_length: 9, max_trials: 4, tpe: {gamma: 2}}\n",
             "searcher.tpe.gamma"),
            ("searcher: {name: tpe, metric: m, max_length: 9, max_trials: 4, tpe: {n_ei_candidates: 0}}\n",
             "searcher.tpe.n_ei_candidates"),
            ("searcher: {name: grid, metric: m, max_length: 9, sampler: tpe}\n", "searcher.sampler"),
        ]
        for text, key in cases:
            with self.subTest(key=key, text=text):
                self.write("bad.yaml", base + text)
                proc = self.cairn("run", "bad.yaml")
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertRegex(proc.stderr, r"^cairn: error: bad\.yaml:\d+: %s" % key.replace(".", r"\."))


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
