"""End to end: config mistakes stop `cairn run` before anything runs, with exit 2 and one
line naming the file, line and key."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, CairnTestCase, wait_until  # noqa: E402
import cairn_testlib  # noqa: E402

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
    ("range without a type", GOOD.replace("{type: int, minval: 16", "{minval: 16"), 5, "hyperparameters.hidden"),
    ("int with fractional bound", GOOD.replace("minval: 16,", "minval: 1.5,"), 5, "hyperparameters.hidden.minval"),
    ("negative checkpoint period", GOOD.replace("period: 1", "period: -1"), 11, "checkpoint.period"),
    ("slots_per_trial zero", GOOD + "resources:\n  slots_per_trial: 0\n", 13, "resources.slots_per_trial"),
    ("bad devices", GOOD + "resources:\n  devices: tpu\n", 13, "resources.devices"),
    ("seed negative", GOOD + "reproducibility:\n  seed: -5\n", 13, "reproducibility.seed"),
    ("deterministic not a bool", GOOD + "reproducibility:\n  deterministic: maybe\n", 13, "reproducibility.deterministic"),
    ("environment sets CAIRN_", GOOD + "environment:\n  CAIRN_SEED: '1'\n", 13, "environment.CAIRN_SEED"),
    ("webhook not http", GOOD + "notify:\n  webhook: ftp://x\n", 13, "notify.webhook"),
    ("notify event unknown", GOOD + "notify:\n  webhook: https://h/x\n  on: [end, done]\n", 14,
     "notify.on[1]"),
    ("notify secret_env not a name", GOOD + "notify:\n  webhook: https://h/x\n  secret_env: a-b\n",
     14, "notify.secret_env"),
    ("max_restarts negative", GOOD + "max_restarts: -1\n", 12, "max_restarts"),
    ("permanent exit code 0", GOOD + "permanent_exit_codes: [2, 0]\n", 12, "permanent_exit_codes[1]"),
    ("permanent exit codes not a list", GOOD + "permanent_exit_codes: 2\n", 12, "permanent_exit_codes"),
    ("categorical without vals", GOOD.replace("searcher:\n", "  opt: {type: categorical, vals: []}\nsearcher:\n"), 6, "hyperparameters.opt.vals"),
    ("divisor 1", GOOD.replace("  max_length: 3", "  max_length: 3\n  divisor: 1"), 10, "searcher.divisor"),
    ("unknown sampler", GOOD.replace("name: single", "name: asha\n  max_trials: 4\n  sampler: bayes"), 9, "searcher.sampler"),
    ("tpe with grid", GOOD.replace("name: single", "name: grid\n  sampler: tpe"), 8, "searcher.sampler"),
    ("tpe gamma out of range", GOOD.replace("name: single", "name: tpe\n  max_trials: 4\n  tpe:\n    gamma: 0"),
     10, "searcher.tpe.gamma"),
    ("tpe candidates out of range", GOOD.replace("name: single", "name: tpe\n  max_trials: 4\n  tpe:\n    n_ei_candidates: 100000"),
     10, "searcher.tpe.n_ei_candidates"),
    ("workdir missing", GOOD + "workdir: does/not/exist\n", 12, "workdir"),
    ("data path missing", GOOD + "data: [train.py, no/such/dir]\n", 12, "data[1]"),
    # What only the searcher judges is named at `searcher:`, like the rest.
    ("hyperband with too many trials", GOOD.replace("name: single", "name: hyperband")
     .replace("max_length: 3", "max_length: 2147483647"), 6, "searcher.max_trials"),
    # An escape sequence in a value is shown, not sent to the terminal.
    ("an escape in a value", GOOD.replace("name: single", 'name: "\\e[31msingle"'), 7, "searcher.name"),
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
                self.assertNotIn("\x1b", proc.stderr)
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


# A trial that trains slowly and checkpoints, so that its experiment can be paused.
PAUSABLE_TRAIN = r"""
import sys, time
import cairn

ctx = cairn.init()
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        time.sleep(0.1)
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / "step").write_text(str(step))
            if ctx.should_preempt():
                sys.exit(0)
    ctx.report_validation(step, {"val_loss": 1.0 / step})
"""


class MachineResourcesTest(CairnTestCase):
    """What only the machine can judge (a GPU, enough slots) is checked before the
    experiment is created: a refused config leaves no experiment behind that would stay
    ACTIVE and that `cairn resume --all` would try again and again."""

    CONFIG = ("entrypoint: builtin:mlp\n"
              "searcher: {name: single, metric: val_loss, max_length: 1}\n"
              "resources:\n"
              "  %s\n")

    def setUp(self):
        super().setUp()
        self.cairn("init", check=0)

    def assert_refused_and_nothing_created(self, proc, prefix):
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertEqual(proc.stdout, "", "no experiment id is printed")
        lines = proc.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertTrue(lines[0].startswith("cairn: error: " + prefix), lines[0])
        self.assertEqual(self.cairn_json("ls", "--all", "--json"), [], "no experiment was created")
        self.assertFalse(os.path.exists(os.path.join(self.dir, ".cairn", "experiments", "1")))
        resume_all = self.cairn("resume", "--all", check=0)
        self.assertEqual(resume_all.stdout, "", "nothing for resume --all to retry")

    def gpu_free_env(self, with_fake_driver):
        """An environment in which cairn sees no GPU, or None when that cannot be had."""
        env = {"CUDA_VISIBLE_DEVICES": ""}  # hides a real GPU from the real driver too
        if with_fake_driver:
            fake = os.path.join(os.path.dirname(os.path.abspath(CAIRN)), "fake_cuda")
            if not os.path.isdir(fake):
                return None
            env["LD_LIBRARY_PATH"] = fake + ":" + os.environ.get("LD_LIBRARY_PATH", "")
        cuda = self.cairn_json_env(env, "version", "--json")["cuda"]
        if with_fake_driver and not cuda["driver"]:
            return None
        return env if cuda["devices"] == 0 else None

    def cairn_json_env(self, env, *args):
        proc = self.cairn(*args, env=env, check=0)
        import json
        return json.loads(proc.stdout)

    def test_devices_gpu_without_a_gpu(self):
        self.write("gpu.yaml", self.CONFIG % "devices: gpu")
        for description, with_fake_driver in [("no driver or no device", False),
                                              ("a driver without a device", True)]:
            with self.subTest(description):
                env = self.gpu_free_env(with_fake_driver)
                # CUDA_VISIBLE_DEVICES="" hides any GPU, and build/fake_cuda is built with
                # the tests: not getting such an environment is a failure, not a skip.
                self.assertIsNotNone(env, "cannot hide this machine's GPU from cairn")
                proc = self.cairn("run", "gpu.yaml", env=env)
                self.assert_refused_and_nothing_created(proc, "gpu.yaml:4: resources.devices: gpu, ")

    def test_slots_per_trial_beyond_the_machines_slots(self):
        self.write("wide.yaml", self.CONFIG % "slots_per_trial: 2")
        proc = self.cairn("run", "wide.yaml", "--slots", "1")
        self.assert_refused_and_nothing_created(proc, "wide.yaml:4: resources.slots_per_trial: 2 ")
        self.assertIn("more than the 1 slots", proc.stderr)
        proc = self.cairn("run", "wide.yaml", "--slots", "2", "--set", "resources.slots_per_trial=3")
        self.assert_refused_and_nothing_created(
            proc, "--set resources.slots_per_trial=3: resources.slots_per_trial: 3 ")

    def test_resume_takes_the_slots_of_the_run(self):
        # A trial wider than this machine's default slots (its cores): created with --slots,
        # paused, then resumed with no --slots: the run's, recorded, still hold. (Resuming
        # on a machine that truly lacks the slots is refused by the same check as `run`.)
        width = (os.cpu_count() or 1) + 1
        self.write("train.py", PAUSABLE_TRAIN)
        self.write("wide.yaml", "entrypoint: /usr/bin/python3 train.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 600}\n"
                   "checkpoint: {period: 2}\n"
                   "resources: {slots_per_trial: %d, devices: cpu}\n" % width)
        run = self.cairn("run", "--detach", "--slots", str(width), "wide.yaml", check=0)
        self.assertEqual(run.stdout.strip(), "1")

        def trained():
            proc = self.cairn("metrics", "1.1", "--json")
            import json
            return proc.returncode == 0 and len(json.loads(proc.stdout)["training"]) >= 2
        wait_until(trained, timeout=120, what="the wide trial to train")
        self.cairn("pause", "1", check=0, timeout=120)
        wait_until(lambda: self.cairn_json("show", "1", "--json")["state"] == "PAUSED",
                   timeout=60, what="the experiment to be paused")

        proc = self.cairn("resume", "1")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "COMPLETED")

MLP = """entrypoint: builtin:mlp
searcher:
  name: random
  metric: val_loss
  max_length: 3
  max_trials: 2
hyperparameters:
  lr: 0.1
"""

# builtin:mlp's hyperparameters and lengths: what its trials used to refuse one by one,
# ending the experiment in ERROR, is refused with the config. (description, text, line, key)
MLP_MISTAKES = [
    ("unknown optimizer", MLP + "  optimizer: rmsprop\n", 9, "hyperparameters.optimizer"),
    ("negative lr", MLP.replace("lr: 0.1", "lr: -1"), 8, "hyperparameters.lr"),
    ("hidden 0", MLP + "  hidden: 0\n", 9, "hyperparameters.hidden"),
    ("a categorical with an unknown optimizer",
     MLP + "  optimizer: {type: categorical, vals: [sgd, rmsprop]}\n", 9, "hyperparameters.optimizer"),
    ("an int range for hidden that includes 0",
     MLP + "  hidden: {type: int, minval: 0, maxval: 64}\n", 9, "hyperparameters.hidden"),
    ("a typo in a key", MLP + "  hiden: 64\n", 9, "hyperparameters.hiden"),
    # Many searched keys (above the product the check once took in full): features must still
    # be checked against every dataset.
    ("features that do not suit one of the datasets, with many keys searched",
     MLP + "  dataset: {type: categorical, vals: [teacher, spirals]}\n"
     "  features: {type: int, minval: 2, maxval: 20}\n" +
     "".join("  %s: {type: double, minval: 0.01, maxval: 0.1}\n" % k
             for k in ("momentum", "weight_decay", "noise", "val_fraction")) +
     "".join("  %s: {type: int, minval: 1, maxval: 2}\n" % k
             for k in ("hidden", "layers", "batch_size", "threads")), 10, "hyperparameters.features"),
    ("max_length in batches", MLP.replace("max_length: 3", "max_length: {batches: 500}"), 5,
     "searcher.max_length.batches"),
    ("max_length in records", MLP.replace("max_length: 3", "max_length: {records: 500}"), 5,
     "searcher.max_length.records"),
]


class BuiltinMlpConfigTest(CairnTestCase):
    def test_each_mistake_is_refused_before_anything_runs(self):
        self.cairn("init", check=0)
        for description, text, line, key in MLP_MISTAKES:
            with self.subTest(description):
                self.write("mlp.yaml", text)
                proc = self.cairn("run", "mlp.yaml")
                self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
                self.assertEqual(proc.stdout, "", "nothing starts")
                lines = proc.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, proc.stderr)
                self.assertTrue(lines[0].startswith("cairn: error: mlp.yaml:%d: %s: " % (line, key)),
                                "%s: %s" % (description, lines[0]))
        self.assertEqual(self.cairn_json("ls", "--all", "--json"), [], "no experiment was created")

    def test_what_builtin_mlp_takes_runs(self):
        # Softmax regression (layers: 0, docs/builtin-mlp.md) and a length in epochs.
        self.write("mlp.yaml", MLP.replace("max_length: 3", "max_length: {epochs: 1}") +
                   "  layers: {type: int, minval: 0, maxval: 1}\n"
                   # No random draw reaches maxval 1, which momentum refuses.
                   "  momentum: {type: double, minval: 0.5, maxval: 1.0}\n")
        self.cairn("run", "mlp.yaml", check=0)
        trials = self.cairn_json("show", "1", "--json")["trials"]
        self.assertEqual([t["state"] for t in trials], ["COMPLETED", "COMPLETED"])


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
