"""End to end: `cairn run` drives real Python SDK trials; show/metrics/checkpoints/export/logs
report what the trials did."""
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, CairnTestCase, needs, wait_until  # noqa: E402
import cairn_testlib  # noqa: E402

USERNS, USERNS_WHY = cairn_testlib.userns_mounts()

# A trial whose metrics are a known function of the step and lr, and whose checkpoint holds
# seed-derived bytes it also keeps a copy of, so tests can check values and bytes exactly.
TRAIN = r'''
import json, os, random, sys
import cairn

ctx = cairn.init()
step = ctx.steps_completed
print("resumed-from", step, flush=True)
lr = ctx.hparams["lr"]
crash_at = int(os.environ.get("CRASH_AT", "0"))
for op in ctx.operations():
    while step < op.length:
        step += 1
        ctx.report_training(step, {"loss": lr / step, "step_sq": step * step})
        marker = os.path.join(os.environ["CAIRN_WORKDIR"], "crashed.marker")
        if crash_at and step == crash_at and not os.path.exists(marker):
            open(marker, "w").close()
            print("crashing now", flush=True)
            os._exit(7)
        if ctx.checkpoint_due(step):
            payload = random.Random(ctx.seed * 1000 + step).randbytes(50000)
            with ctx.checkpoint(step) as path:
                (path / "weights.bin").write_bytes(payload)
                (path / "sub").mkdir()
                (path / "sub" / "meta.json").write_text(json.dumps({"step": step}))
            with open(os.path.join(os.environ["CAIRN_WORKDIR"], "expected-%d.bin" % step), "wb") as f:
                f.write(payload)
            print("checkpointed", ctx.latest_checkpoint_id, flush=True)
            if ctx.should_preempt():
                sys.exit(0)
    ctx.report_validation(step, {"val_loss": lr / (step + 1), "val_accuracy": step / 100.0})
'''

CONFIG = '''name: e2e
entrypoint: [/usr/bin/python3, train.py]
hyperparameters:
  lr: 0.5
searcher:
  name: single
  metric: val_loss
  max_length: 6
checkpoint:
  period: 2
  keep_trial_latest: 10
max_restarts: %d
reproducibility:
  seed: 42
environment:
  CRASH_AT: "%d"
'''


class RunTest(CairnTestCase):
    def setUpTrial(self, max_restarts=0, crash_at=0):
        self.write("train.py", TRAIN)
        self.write("exp.yaml", CONFIG % (max_restarts, crash_at))

    def test_python_trial_is_tracked_exactly(self):
        self.setUpTrial()
        run = self.cairn("run", "exp.yaml", check=0)
        self.assertEqual(run.stdout.splitlines()[0], "1", "the first line is the experiment id")
        self.assertIn("[1.1] resumed-from 0", run.stdout)

        exp = self.cairn_json("show", "1", "--json")
        self.assertEqual(exp["id"], 1)
        self.assertEqual(exp["name"], "e2e")
        self.assertEqual(exp["state"], "COMPLETED")
        self.assertEqual(exp["searcher"], "single")
        self.assertEqual(exp["seed"], 42)
        self.assertEqual(exp["best_trial"], "1.1")
        self.assertEqual(exp["config"]["searcher"]["max_length"], 6)
        trial = exp["trials"][0]
        self.assertEqual(trial["id"], "1.1")
        self.assertEqual(trial["state"], "COMPLETED")
        self.assertEqual(trial["hparams"], {"lr": 0.5})
        self.assertIsInstance(trial["seed"], int)
        self.assertEqual(trial["steps_completed"], 6)
        self.assertEqual(trial["restarts"], 0)
        self.assertAlmostEqual(trial["best_validation"]["val_loss"], 0.5 / 7)
        self.assertEqual(trial["best_validation"]["val_accuracy"], 0.06)

        metrics = self.cairn_json("metrics", "1.1", "--json")
        self.assertEqual(metrics["trial"], "1.1")
        self.assertEqual([p["step"] for p in metrics["training"]], [1, 2, 3, 4, 5, 6])
        for p in metrics["training"]:
            self.assertAlmostEqual(p["metrics"]["loss"], 0.5 / p["step"])
            self.assertEqual(p["metrics"]["step_sq"], p["step"] ** 2)
        self.assertEqual([p["step"] for p in metrics["validation"]], [6])

        csv = self.cairn("metrics", "1.1", "--csv", check=0).stdout.splitlines()
        self.assertEqual(csv[0], "kind,step,loss,step_sq,val_accuracy,val_loss")
        self.assertEqual(len(csv), 1 + 6 + 1)

        ls = self.cairn_json("ls", "--json")
        self.assertEqual(ls, [{**ls[0], "id": 1, "name": "e2e", "state": "COMPLETED", "trials": 1,
                               "best_trial": "1.1"}])

        logs = self.cairn("logs", "1.1", check=0).stdout
        self.assertIn("resumed-from 0", logs)
        self.assertNotIn("[1.1]", logs, "logs hold the trial's own output, unprefixed")

    def test_checkpoints_are_registered_and_export_byte_for_byte(self):
        self.setUpTrial()
        self.cairn("run", "exp.yaml", check=0)
        ckpts = self.cairn_json("checkpoints", "1.1", "--json")
        self.assertEqual([c["steps_completed"] for c in ckpts], [2, 4, 6])
        for c in ckpts:
            self.assertEqual(c["trial"], "1.1")
            self.assertRegex(c["id"], "^[0-9a-f]{64}$")
            self.assertGreater(c["bytes"], 50000)
        self.assertAlmostEqual(ckpts[-1]["metrics"]["val_loss"], 0.5 / 7,
                               msg="the checkpoint at the validated step carries its metrics")
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["latest_checkpoint"], ckpts[-1]["id"])
        self.assertEqual([c["id"] for c in trial["checkpoints"]], [c["id"] for c in ckpts])

        for ref, step in (("1.1@latest", 6), (ckpts[0]["id"][:10], 2), ("1.1@best", 6)):
            out = os.path.join(self.dir, "export-%s" % ref.replace("@", "-"))
            self.cairn("export", ref, out, check=0)
            self.assertTrue(filecmp.cmp(os.path.join(out, "weights.bin"),
                                        os.path.join(self.dir, "expected-%d.bin" % step), shallow=False))
            with open(os.path.join(out, "sub", "meta.json")) as f:
                self.assertEqual(json.load(f), {"step": step})

        # Identical content is stored once: a second experiment with the same seed writes the
        # same checkpoint bytes, and the object store does not grow by their size.
        objects = os.path.join(self.dir, ".cairn", "objects")
        count = lambda: sum(len(files) for _, _, files in os.walk(objects))
        before = count()
        self.cairn("run", "exp.yaml", check=0)
        self.assertEqual(self.cairn_json("show", "2", "--json")["state"], "COMPLETED")
        # Only the files that differ (none of the payloads; the RNG state file may) are new.
        self.assertLess(count() - before, 3 * 3)

        # Export refuses to overwrite a directory with files in it.
        bad = self.cairn("export", "1.1@latest", os.path.join(self.dir, "export-1.1-latest"))
        self.assertEqual(bad.returncode, 2)
        self.assertIn("not an empty directory", bad.stderr)
        onto_a_file = self.cairn("export", "1.1@latest", os.path.join(self.dir, "train.py"))
        self.assertEqual(onto_a_file.returncode, 2)
        self.assertIn("train.py is a file: give a new or empty directory", onto_a_file.stderr)

    def test_an_aborted_checkpoint_leaves_nothing_in_the_store(self):
        # The real coordinator's checkpoint_abort (the SDK sends it when saving raises):
        # the staging directory it handed out is removed and no checkpoint is recorded.
        # The trial then commits a checkpoint, whose answer comes after cairn has handled
        # the abort (one control connection, handled in order), and looks for the directory.
        self.write("abort.py", """\
import json, os
import cairn

ctx = cairn.init()
for op in ctx.operations():
    try:
        with ctx.checkpoint(1) as path:
            staged = str(path)
            (path / "half.bin").write_bytes(b"x" * 1000)
            raise RuntimeError("disk on fire")
    except RuntimeError:
        pass
    ctx.report_training(2, {"loss": 0.5})
    with ctx.checkpoint(2) as path:
        (path / "whole.bin").write_bytes(b"y")
    with open(os.path.join(os.environ["CAIRN_WORKDIR"], "staged.json"), "w") as f:
        json.dump({"path": staged, "exists_after_commit": os.path.exists(staged)}, f)
    ctx.report_validation(2, {"val_loss": 0.25})
""")
        self.write("abort.yaml", "entrypoint: /usr/bin/python3 abort.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 2}\nmax_restarts: 0\n")
        self.cairn("run", "abort.yaml", check=0, timeout=120)
        with open(os.path.join(self.dir, "staged.json")) as f:
            staged = json.load(f)
        store = os.path.realpath(os.path.join(self.dir, ".cairn"))
        self.assertTrue(os.path.realpath(staged["path"]).startswith(store + os.sep), staged)
        self.assertFalse(staged["exists_after_commit"], staged)
        self.assertFalse(os.path.exists(staged["path"]))
        ckpts = self.cairn_json("checkpoints", "1.1", "--json")
        self.assertEqual([c["steps_completed"] for c in ckpts], [2])
        self.assertEqual(self.cairn_json("show", "1.1", "--json")["state"], "COMPLETED")

    def test_failing_trial_is_reported_with_status_and_log_tail(self):
        self.write("fail.py", "import cairn\nctx = cairn.init()\nprint('about to fail', flush=True)\nraise SystemExit(3)\n")
        self.write("exp.yaml", "entrypoint: /usr/bin/python3 fail.py\nsearcher: {name: single, metric: val_loss, max_length: 2}\nmax_restarts: 0\n")
        run = self.cairn("run", "exp.yaml")
        self.assertEqual(run.returncode, 1, "an experiment whose trials all errored exits non-zero")
        self.assertIn("trial 1.1 failed: exited with status 3", run.stderr)
        self.assertIn("about to fail", run.stderr, "the tail of the trial's log is shown")
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "ERROR")
        self.assertEqual(trial["exit"]["code"], 3)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "ERROR")
        best = self.cairn("best", "1")
        self.assertEqual(best.returncode, 1)
        self.assertEqual(best.stderr.splitlines()[0],
                         "cairn: error: experiment 1 ended ERROR with no trial that validated val_loss")

    def test_permanent_exit_codes_spend_no_restart_and_others_do(self):
        # The trial exits with hparams['code']; each trial counts its attempts in a file.
        self.write("fail.py", "import os, sys, cairn\nctx = cairn.init()\n"
                   "tries = os.path.join(%r, 'tries-%%s' %% ctx.hparams['code'])\n" % self.dir +
                   "open(tries, 'a').write('x')\n"
                   "print('bad input', flush=True)\nsys.exit(ctx.hparams['code'])\n")
        config = ("entrypoint: /usr/bin/python3 fail.py\n"
                  "hyperparameters: {code: {type: categorical, vals: [2, 3]}}\n"
                  "searcher: {name: grid, metric: val_loss, max_length: 2}\n"
                  "max_restarts: 1\n")

        def attempts():
            out = {}
            for code in (2, 3):
                path = os.path.join(self.dir, "tries-%d" % code)
                with open(path) as f:
                    out[code] = len(f.read())
                os.remove(path)
            return out

        # By default every failure is retried (SPEC §5), status 2 included: `make` exits 2
        # when a recipe fails, and that may pass.
        self.write("exp.yaml", config)
        run = self.cairn("run", "exp.yaml")
        self.assertEqual(run.returncode, 1, run.stderr)
        self.assertEqual(attempts(), {2: 2, 3: 2})

        # Declared permanent: run once, ERROR at once, no restart spent.
        self.write("exp.yaml", config + "permanent_exit_codes: [2]\n")
        run = self.cairn("run", "exp.yaml")
        self.assertEqual(run.returncode, 1, run.stderr)
        self.assertEqual(attempts(), {2: 1, 3: 2})
        by_code = {t["hparams"]["code"]: t for t in self.cairn_json("show", "2", "--json")["trials"]}
        self.assertEqual((by_code[2]["state"], by_code[2]["restarts"]), ("ERROR", 0))
        self.assertEqual((by_code[3]["state"], by_code[3]["restarts"]), ("ERROR", 1))
        self.assertIn("exited with status 2, a failure it declares permanent: not restarted",
                      run.stdout + run.stderr)

    def test_crashed_trial_restarts_from_its_latest_checkpoint(self):
        self.setUpTrial(max_restarts=1, crash_at=5)
        run = self.cairn("run", "exp.yaml", check=0)
        self.assertIn("[1.1] crashing now", run.stdout)
        self.assertIn("[1.1] resumed-from 4", run.stdout)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED")
        self.assertEqual(trial["restarts"], 1)
        metrics = self.cairn_json("metrics", "1.1", "--json")
        self.assertEqual([p["step"] for p in metrics["training"]], [1, 2, 3, 4, 5, 6],
                         "every step is recorded exactly once across the restart")

    def test_silent_trial_is_killed_after_liveness_timeout(self):
        self.write("hang.py", "import cairn, time\nctx = cairn.init()\nprint('hanging', flush=True)\ntime.sleep(3600)\n")
        self.write("exp.yaml", "entrypoint: /usr/bin/python3 hang.py\nsearcher: {name: single, metric: m, max_length: 1}\n"
                   "max_restarts: 0\nliveness_timeout: 1\n")
        run = self.cairn("run", "exp.yaml", timeout=60)
        self.assertEqual(run.returncode, 1)
        self.assertIn("liveness_timeout", run.stderr)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "ERROR")
        self.assertIn("liveness_timeout", self.cairn("logs", "1.1", check=0).stdout)

    def test_a_failure_report_shows_only_that_attempts_last_lines(self):
        self.write("fail.py", "import os\n"
                   "p = os.path.join(os.environ['CAIRN_WORKDIR'], 'attempts')\n"
                   "n = len(open(p).read()) if os.path.exists(p) else 0\n"
                   "open(p, 'a').write('x')\n"
                   "print('boom from attempt', n + 1, flush=True)\n"
                   "raise SystemExit(3)\n")
        self.write("exp.yaml", "entrypoint: [/usr/bin/python3, fail.py]\n"
                   "searcher: {name: single, metric: m, max_length: 1}\nmax_restarts: 2\n")
        run = self.cairn("run", "exp.yaml")
        self.assertEqual(run.returncode, 1)
        tails = re.findall(r"^cairn:   boom from attempt (\d)$",
                           run.stdout + run.stderr, re.M)
        self.assertEqual(tails, ["1", "2", "3"], run.stdout + run.stderr)

    def test_a_failure_after_the_searcher_closed_the_trial_ends_it(self):
        # Validates at its final length (the searcher closes it), then crashes on the way out.
        self.write("t.py", "import sys, cairn\nctx = cairn.init()\n"
                   "for op in ctx.operations():\n"
                   "    ctx.report_validation(op.length, {'val_loss': 0.5})\n"
                   "sys.exit(3)\n")
        self.write("exp.yaml", "entrypoint: /usr/bin/python3 t.py\n"
                   "searcher: {name: random, metric: val_loss, max_length: 2, max_trials: 1}\n"
                   "max_restarts: 2\n")
        run = self.cairn("run", "exp.yaml", timeout=60)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("trial 1.1 exited with status 3 after its work was done; its results stand",
                      run.stderr)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual((trial["state"], trial["restarts"], trial["exit"]["code"]),
                         ("COMPLETED", 0, 3))
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "COMPLETED")

    def test_missing_entrypoint_program_or_script_is_a_config_error(self):
        for entrypoint, message in (
                ("no-such-program-xyz --flag",
                 "exp.yaml:1: entrypoint: program 'no-such-program-xyz' not found on PATH"),
                ("[/usr/bin/python3, -u, trian.py]",
                 "exp.yaml:1: entrypoint: python script 'trian.py' not found in " + self.dir)):
            self.write("exp.yaml", "entrypoint: %s\nsearcher: {name: single, metric: m, "
                       "max_length: 1}\n" % entrypoint)
            run = self.cairn("run", "exp.yaml")
            self.assertEqual(run.returncode, 2)
            self.assertEqual(run.stderr, "cairn: error: %s\n" % message)
            self.assertEqual(run.stdout, "", "no experiment was created")
        # A directory with __main__.py is a script Python runs.
        os.makedirs(os.path.join(self.dir, "app"))
        self.write("app/__main__.py", "import cairn\nctx = cairn.init()\n"
                   "for op in ctx.operations():\n"
                   "    ctx.report_validation(op.length, {'m': 1.0})\n")
        self.write("app.yaml", "entrypoint: /usr/bin/python3 app\n"
                   "searcher: {name: single, metric: m, max_length: 1}\n")
        self.cairn("run", "app.yaml", check=0)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "COMPLETED")
        # `python3 -m module` names no script: nothing to check before it runs.
        self.write("exp.yaml", "entrypoint: /usr/bin/python3 -m no_such_module_xyz\n"
                   "searcher: {name: single, metric: m, max_length: 1}\nmax_restarts: 0\n")
        self.assertEqual(self.cairn("run", "exp.yaml").returncode, 1)
        self.assertEqual(self.cairn_json("show", "2.1", "--json")["state"], "ERROR")

    def test_two_runs_on_one_store_with_readers_beside_them(self):
        self.setUpTrial()
        self.write("slow.py", TRAIN.replace("step += 1", "step += 1; __import__('time').sleep(0.2)"))
        self.write("slow.yaml", (CONFIG % (0, 0)).replace("train.py", "slow.py"))
        self.cairn("init", check=0)
        env = dict(os.environ, NO_COLOR="1")
        procs = [subprocess.Popen([CAIRN, "run", "slow.yaml"], cwd=self.dir, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        # While both run, readers work and see both experiments.
        wait_until(lambda: len(self.cairn_json("ls", "--json")) == 2, what="two experiments listed")
        wait_until(lambda: all(self.cairn("show", str(i), "--json").returncode == 0 for i in (1, 2)),
                   what="both experiments readable")
        outs = [p.communicate(timeout=120) for p in procs]
        self.assertEqual([p.returncode for p in procs], [0, 0], outs)
        ids = sorted(int(out.splitlines()[0]) for out, _ in outs)
        self.assertEqual(ids, [1, 2])
        for exp in self.cairn_json("ls", "--json"):
            self.assertEqual(exp["state"], "COMPLETED")

    def test_first_runs_of_a_project_started_at_once_share_one_new_store(self):
        # No store yet: each run makes one. A store made in place was seen by the others
        # without its FORMAT ("not a cairn store"); it now appears whole.
        self.write("t.py", "import cairn\nctx = cairn.init()\nfor op in ctx.operations():\n"
                   "    ctx.report_validation(op.length, {'m': 1.0})\n")
        self.write("exp.yaml", "entrypoint: /usr/bin/python3 t.py\n"
                   "searcher: {name: single, metric: m, max_length: 1}\n")
        # Started by one shell, as close together as it can.
        script = 'for i in 1 2 3 4; do "$0" run exp.yaml > out$i 2>&1 & done; wait'
        subprocess.run(["bash", "-c", script, CAIRN], cwd=self.dir, timeout=120,
                       env=dict(os.environ, NO_COLOR="1"), check=True)
        outs = []
        for i in range(1, 5):
            with open(os.path.join(self.dir, "out%d" % i)) as f:
                outs.append(f.read())
        self.assertTrue(all("COMPLETED" in out for out in outs), outs)
        self.assertEqual(sorted(int(out.splitlines()[0]) for out in outs), [1, 2, 3, 4])
        self.assertEqual([e for e in os.listdir(self.dir) if e.startswith(".cairn")], [".cairn"])

    def test_logs_follow_streams_a_running_trial(self):
        self.write("slow.py", "import cairn, time\nctx = cairn.init()\nfor op in ctx.operations():\n"
                   "    for i in range(op.length):\n        print('tick', i, flush=True); time.sleep(0.3)\n"
                   "    ctx.report_validation(op.length, {'m': 1.0})\n")
        self.write("exp.yaml", "entrypoint: /usr/bin/python3 slow.py\nsearcher: {name: single, metric: m, max_length: 8}\n")
        run = subprocess.Popen([CAIRN, "run", "exp.yaml"], cwd=self.dir, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        self.addCleanup(run.kill)
        wait_until(lambda: self.cairn("logs", "1.1").returncode == 0, what="trial 1.1 exists")
        follow = self.cairn("logs", "1.1", "-f", timeout=60)
        self.assertEqual(follow.returncode, 0)
        self.assertEqual([l for l in follow.stdout.splitlines() if l.startswith("tick")],
                         ["tick %d" % i for i in range(8)])
        self.assertEqual(run.wait(timeout=60), 0)

    def test_doctor_checks_the_store_devices_and_the_python_sdk(self):
        checks = {c["check"]: c for c in self.cairn_json("doctor", "--json")}
        self.assertEqual(set(checks), {"store", "git", "cpu", "gpu", "nccl", "cublas", "nvrtc",
                                       "gloo", "python", "blas", "pyblas"})
        # The kernels cairn's OpenBLAS and Python's run (tests/e2e/test_blas_kernels.py checks
        # what they say): reported, never a failure of the machine.
        for lib in ("blas", "pyblas"):
            self.assertIn(checks[lib]["status"], ("ok", "warn"), checks[lib])
        # builtin:mlp's GPU libraries, loaded at run time: found or not, never a failure.
        # `cairn version` does not load them (it stays cheap) and says so under their keys;
        # the driver and NCCL it reports as doctor does.
        version = self.cairn_json("version", "--json")
        for lib in ("cublas", "nvrtc"):
            self.assertIn(checks[lib]["status"], ("ok", "warn"), checks[lib])
            self.assertIs(version[lib]["checked"], False, version[lib])
        self.assertIs(version["cuda"]["loaded_at_run_time"], True)
        self.assertEqual(version["cuda"]["usable"], checks["gpu"]["detail"].startswith("CUDA driver")
                         and checks["gpu"]["status"] == "ok", (version["cuda"], checks["gpu"]))
        # `found` says libnccl loaded, `usable` that cairn's collective can use it.
        self.assertEqual(version["nccl"]["usable"], checks["nccl"]["detail"].startswith("libnccl"),
                         (version["nccl"], checks["nccl"]))
        if version["nccl"]["usable"]:
            self.assertIs(version["nccl"]["found"], True)
            self.assertRegex(checks["nccl"]["detail"], r"^libnccl\.so\.2 \d+\.\d+\.\d+$")
        self.assertEqual(checks["python"]["status"], "ok", checks["python"])
        self.assertIn("the SDK imports", checks["python"]["detail"])
        self.assertEqual(checks["gloo"]["status"], "ok", checks["gloo"])
        self.assertIn("all-reduced over TCP", checks["gloo"]["detail"])
        self.cairn("init", check=0)
        checks = {c["check"]: c for c in self.cairn_json("doctor", "--json")}
        self.assertIn(os.path.join(self.dir, ".cairn"), checks["store"]["detail"])
        # An unwritable store that root cannot write either (CI runs as root, which ignores
        # permission bits): a file where the store's tmp/ directory must be.
        tmp = os.path.join(self.dir, ".cairn", "tmp")
        shutil.rmtree(tmp)
        with open(tmp, "w") as f:
            f.write("not a directory\n")
        proc = self.cairn("doctor")
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertRegex(proc.stdout, r"FAIL  store .* is not writable")

    @needs("userns", USERNS, USERNS_WHY)
    def test_doctor_fails_on_a_read_only_store(self):
        # A read-only bind mount of the store in a user and mount namespace: root obeys it.
        self.cairn("init", check=0)
        store = os.path.join(self.dir, ".cairn")
        proc = subprocess.run(["unshare", "-rm", "sh", "-c",
                               'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" && '
                               'cd "$2" && exec "$3" doctor', "sh", store, self.dir, CAIRN],
                              capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, NO_COLOR="1"))
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertRegex(proc.stdout, r"FAIL  store .* is not writable")

    def test_store_discovery(self):
        self.setUpTrial()
        # `cairn run sub/exp.yaml` makes the store in sub/: from the directory above, the
        # error names it.
        top = self.dir
        os.makedirs(os.path.join(top, "sub"))
        self.cairn("init", os.path.join(top, "sub"), check=0)
        near = subprocess.run([CAIRN, "ls"], cwd=top, capture_output=True, text=True,
                              env={k: v for k, v in os.environ.items() if k != "CAIRN_DIR"}, timeout=120)
        self.assertEqual(near.returncode, 2)
        self.assertIn("; there is one in sub/: `cd sub` or `--store sub/.cairn`", near.stderr)
        shutil.rmtree(os.path.join(top, "sub"))
        os.makedirs(os.path.join(self.dir, "deep", "er"))
        self.cairn("run", "exp.yaml", check=0)
        sub = os.path.join(self.dir, "deep", "er")
        found = subprocess.run([CAIRN, "ls", "--json"], cwd=sub, capture_output=True, text=True, timeout=120)
        self.assertEqual(found.returncode, 0, found.stderr)
        self.assertEqual(len(json.loads(found.stdout)), 1)
        elsewhere = subprocess.run([CAIRN, "ls"], cwd="/", capture_output=True, text=True,
                                   env=dict(os.environ, CAIRN_DIR=os.path.join(self.dir, ".cairn")), timeout=120)
        self.assertEqual(elsewhere.returncode, 0, elsewhere.stderr)
        none = subprocess.run([CAIRN, "ls"], cwd="/", capture_output=True, text=True,
                              env={k: v for k, v in os.environ.items() if k != "CAIRN_DIR"}, timeout=120)
        self.assertEqual(none.returncode, 2)
        self.assertRegex(none.stderr, r"^cairn: error: no cairn store")

    def test_bad_ids_are_usage_errors(self):
        self.setUpTrial()
        self.cairn("run", "exp.yaml", check=0)
        for args in (["show", "abc"], ["show", "9"], ["show", "1.9"], ["metrics", "1"],
                     ["logs", "x.y"], ["export", "zz", "out"], ["export", "1.1@worst", "out"],
                     ["checkpoints", "1.5"]):
            proc = self.cairn(*args)
            self.assertEqual(proc.returncode, 2, args)
            self.assertTrue(proc.stderr.startswith("cairn: error: "), proc.stderr)
            self.assertEqual(proc.stdout, "")

    def test_retention_deleted_checkpoints_are_gone_from_show_and_export(self):
        self.setUpTrial()
        self.write("exp.yaml", (CONFIG % (0, 0)).replace("keep_trial_latest: 10",
                                                         "keep_trial_latest: 1\n  keep_trial_best: 0"))
        self.cairn("run", "exp.yaml", check=0)
        kept = self.cairn_json("checkpoints", "1.1", "--json")
        self.assertEqual([c["steps_completed"] for c in kept], [6])
        shown = self.cairn_json("show", "1.1", "--json")["checkpoints"]
        self.assertEqual([c["id"] for c in shown], [kept[0]["id"]])
        text = self.cairn("show", "1.1", check=0).stdout
        self.assertIn(kept[0]["id"][:12], text)
        # The deleted ones are still known by id (the trial printed them): export says why
        # they cannot be exported instead of reporting a missing manifest.
        ids = re.findall(r"checkpointed ([0-9a-f]{64})", self.cairn("logs", "1.1", check=0).stdout)
        self.assertEqual(len(ids), 3)
        gone = [i for i in ids if i != kept[0]["id"]]
        self.assertEqual(len(gone), 2)
        proc = self.cairn("export", gone[0][:12], os.path.join(self.dir, "out"))
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertRegex(proc.stderr, r"^cairn: error: checkpoint %s of trial 1\.1 was deleted by "
                         r"the retention policy \(checkpoint\.keep_\*\)" % gone[0][:12])
        self.assertFalse(os.path.exists(os.path.join(self.dir, "out")))

    def test_help_unknown_commands_and_bad_options(self):
        listing = self.cairn("help", check=0).stdout
        self.assertIn("Usage: cairn [OPTIONS] SUBCOMMAND", listing)
        for command in ("run", "resume", "show", "logs", "gc", "reproduce", "doctor"):
            self.assertRegex(listing, r"\n  %s " % command)
        self.assertIn("Usage: cairn run [OPTIONS] config", self.cairn("help", "run", check=0).stdout)
        for args in (["bogus"], ["--store", self.dir, "lss"]):
            proc = self.cairn(*args)
            self.assertEqual(proc.returncode, 2)
            self.assertEqual(proc.stderr.splitlines()[0], "cairn: error: no command '%s'" % args[-1])
        self.setUpTrial()
        for slots in ("0", "-1"):
            proc = self.cairn("run", "exp.yaml", "--slots", slots)
            self.assertEqual(proc.returncode, 2)
            self.assertIn("--slots", proc.stderr.splitlines()[0])
        self.assertFalse(os.path.exists(os.path.join(self.dir, ".cairn")), "nothing was created")

    def test_a_listed_peer_that_does_not_answer_creates_nothing(self):
        # resources.peers is built (docs/peers.md, "Placement"): a peer that does not answer
        # is one line and exit status 2 before the experiment exists.
        self.setUpTrial()
        self.write("exp.yaml", CONFIG % (0, 0) + 'resources: {peers: ["127.0.0.1:1"]}\n')
        proc = self.cairn("run", "exp.yaml")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("cannot connect to 127.0.0.1:1", proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        # One line that reads as a sentence (it was "error: peer cannot connect to …").
        self.assertRegex(proc.stderr, r"^cairn: error: cannot connect to 127\.0\.0\.1:1: ")
        self.assertFalse(os.path.exists(os.path.join(self.dir, ".cairn", "experiments", "1")))

    def test_the_best_trial_is_the_same_everywhere_while_the_experiment_runs(self):
        # Grid over lr: trials 1.1, 1.2, 1.3 validate val_loss = lr each step; 1.3 holds
        # after its first validation until the test releases it.
        self.write("grid.py", "import os, time\nimport cairn\nctx = cairn.init()\n"
                   "hold = os.path.join(os.environ['CAIRN_WORKDIR'], 'release')\n"
                   "for step in (1, 2):\n"
                   "    ctx.report_validation(step, {'val_loss': ctx.hparams['lr'] * step})\n"
                   "    while ctx.trial_id.endswith('.3') and not os.path.exists(hold):\n"
                   "        time.sleep(0.02)\n")
        self.write("exp.yaml", "entrypoint: [/usr/bin/python3, grid.py]\n"
                   "hyperparameters: {lr: {type: categorical, vals: [0.3, 0.1, 0.2]}}\n"
                   "searcher: {name: grid, metric: val_loss, max_length: 2, "
                   "max_concurrent_trials: 1}\n")
        proc = subprocess.Popen([CAIRN, "run", "exp.yaml"], cwd=self.dir,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(proc.kill)
        wait_until(lambda: (self.cairn("show", "1.3", "--json").returncode == 0 and
                            self.cairn_json("show", "1.3", "--json")["best_validation"]),
                   what="trial 1.3 to validate and hold")
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "ACTIVE")
        self.assertEqual(self.cairn("best", "1", check=0).stdout, "1.2\n")
        self.assertEqual(self.cairn_json("ls", "--json")[0]["best_trial"], "1.2")
        self.assertEqual(self.cairn_json("show", "1", "--json")["best_trial"], "1.2")
        self.assertIn("\nbest trial  1.2\n", self.cairn("show", "1", check=0).stdout)
        self.write("release", "")
        self.assertEqual(proc.wait(timeout=60), 0)
        self.assertEqual(self.cairn_json("ls", "--json")[0]["best_trial"], "1.2")

    def test_show_names_the_overrides_of_the_run(self):
        self.setUpTrial()
        self.cairn("run", "exp.yaml", "--set", "hyperparameters.lr=0.25", "--set",
                   "searcher.max_length=4", check=0)
        text = self.cairn("show", "1", check=0).stdout
        self.assertIn("\noverrides   --set hyperparameters.lr=0.25 --set searcher.max_length=4\n", text)
        self.assertEqual(self.cairn_json("show", "1.1", "--json")["hparams"], {"lr": 0.25})

    def test_logs_of_a_rank_the_trial_does_not_have(self):
        self.setUpTrial()
        self.cairn("run", "exp.yaml", check=0)
        self.assertIn("resumed-from 0", self.cairn("logs", "1.1", "--rank", "0", check=0).stdout)
        proc = self.cairn("logs", "1.1", "--rank", "1")
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stderr.splitlines()[0],
                         "cairn: error: --rank 1: trial 1.1 has one rank (0)")

    def test_a_second_connection_as_a_connected_rank_is_refused_and_the_trial_goes_on(self):
        # A process started by the trial with its environment (here without the Python
        # SDK's CAIRN_SDK_OWNER guard, as a script in another language would be) that
        # connects as the trial's rank: cairn took its hello for the rank's connection, and
        # the trial, whose answers went to the other process, waited for ever.
        self.write("dup.py", r"""
import json, os, socket, subprocess, sys
import cairn

ctx = cairn.init()
env = dict(os.environ)
env.pop("CAIRN_SDK_OWNER", None)
child = subprocess.run([sys.executable, "-c", "import cairn; cairn.init(); print('connected')"],
                       env=env, capture_output=True, text=True, timeout=120)
# A raw client too, which stays connected while the trial works.
raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
raw.connect(os.environ["CAIRN_CONTROL"][len("unix:"):])
raw.sendall(json.dumps({"type": "hello", "protocol": 1, "trial": ctx.trial_id,
                        "rank": 0}).encode() + b"\n")
answer = raw.makefile().readline()
with open(os.path.join(os.environ["CAIRN_WORKDIR"], "dup.json"), "w") as f:
    json.dump({"code": child.returncode, "stdout": child.stdout, "stderr": child.stderr,
               "raw": json.loads(answer)}, f)
for op in ctx.operations():
    ctx.report_validation(op.length, {"val_loss": 1.0})
raw.close()
""")
        self.write("dup.yaml", "entrypoint: /usr/bin/python3 dup.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 2}\n"
                   "max_restarts: 0\nliveness_timeout: 10\n")
        run = self.cairn("run", "dup.yaml", timeout=120)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertEqual(self.cairn_json("show", "1.1", "--json")["state"], "COMPLETED")
        with open(os.path.join(self.dir, "dup.json")) as f:
            dup = json.load(f)
        self.assertEqual(dup["code"], 1, dup)
        self.assertEqual(dup["stdout"], "")
        self.assertRegex(dup["stderr"], r"^cairn: error: cairn refused the trial: rank 0 of "
                         r"trial 1\.1 is already connected \(process \d+\); [^\n]*\n$")
        self.assertEqual(dup["raw"]["type"], "error")
        self.assertIn("rank 0 of trial 1.1 is already connected", dup["raw"]["message"])

    def test_a_process_of_an_ended_attempt_speaks_for_nothing(self):
        # Attempt 1 fails; attempt 2 first says hello as attempt 1 would (a process its
        # lost machine left running), then as itself.
        self.write("stale.py", r"""
import json, os, socket, sys
attempt = int(os.environ["CAIRN_ATTEMPT"])
if attempt == 1:
    sys.exit(3)
raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
raw.connect(os.environ["CAIRN_CONTROL"][len("unix:"):])
raw.sendall(json.dumps({"type": "hello", "protocol": 1, "trial": os.environ["CAIRN_TRIAL_ID"],
                        "rank": 0, "attempt": 1}).encode() + b"\n")
answer = json.loads(raw.makefile().readline())
raw.close()
with open(os.path.join(os.environ["CAIRN_WORKDIR"], "stale.json"), "w") as f:
    json.dump({"attempt": attempt, "answer": answer}, f)
import cairn
ctx = cairn.init()
for op in ctx.operations():
    ctx.report_validation(op.length, {"val_loss": 1.0})
""")
        self.write("stale.yaml", "entrypoint: /usr/bin/python3 stale.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 2}\n"
                   "max_restarts: 1\n")
        run = self.cairn("run", "stale.yaml", timeout=120)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        with open(os.path.join(self.dir, "stale.json")) as f:
            stale = json.load(f)
        self.assertEqual(stale["attempt"], 2)
        self.assertEqual(stale["answer"], {
            "type": "error",
            "message": "attempt 1 of trial 1.1 has ended (the trial is at attempt 2)"})
        self.assertEqual(self.cairn_json("show", "1.1", "--json")["state"], "COMPLETED")

    def test_a_repeated_failure_is_recognised_across_a_kill_and_resume(self):
        # Attempt 1 fails with "boom"; attempt 2 kills cairn (kill -9) before it fails the same
        # way; after `cairn resume`, attempt 3's "boom" is the second failure in a row with
        # that line: not restarted again. Remembered in memory only, it would be restarted.
        self.write("boom.py", "import os, sys, time\n"
                   "if os.environ['CAIRN_ATTEMPT'] == '2':\n"
                   "    os.kill(os.getppid(), 9)\n"
                   "    time.sleep(0.5)\n"
                   "print('boom', flush=True)\n"
                   "sys.exit(1)\n")
        self.write("boom.yaml", "entrypoint: /usr/bin/python3 boom.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 2}\n"
                   "max_restarts: 5\n")
        run = self.cairn("run", "boom.yaml", timeout=120)
        self.assertEqual(run.returncode, -9, run.stdout + run.stderr)
        resume = self.cairn("resume", "1", timeout=120)
        self.assertIn("trial 1.1 not restarted: it failed twice in a row with the same last line",
                      resume.stderr + resume.stdout)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "ERROR", trial)
        self.assertEqual(trial["restarts"], 1, trial)

    def test_a_rank_that_closed_its_connection_may_connect_again(self):
        # The refusal above is for a rank whose connection is open: a process that closed
        # its connection (cairn may not have read the close yet) and connects again is welcome.
        self.write("again.py", r"""
import json, os, socket
import cairn

raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
raw.connect(os.environ["CAIRN_CONTROL"][len("unix:"):])
raw.sendall(json.dumps({"type": "hello", "protocol": 1, "trial": os.environ["CAIRN_TRIAL_ID"],
                        "rank": 0}).encode() + b"\n")
answers = raw.makefile()
assert json.loads(answers.readline())["type"] == "welcome"
# One connection speaks for one rank: a second hello on it is refused.
raw.sendall(json.dumps({"type": "hello", "protocol": 1, "trial": os.environ["CAIRN_TRIAL_ID"],
                        "rank": 0}).encode() + b"\n")
again = json.loads(answers.readline())
assert again["type"] == "error", again
assert again["message"] == ("this connection already said hello, as rank 0 of trial "
                            + os.environ["CAIRN_TRIAL_ID"]), again
answers.close()  # the socket's file descriptor stays open while a makefile() object does
raw.close()
ctx = cairn.init()
for op in ctx.operations():
    ctx.report_validation(op.length, {"val_loss": 1.0})
""")
        self.write("again.yaml", "entrypoint: /usr/bin/python3 again.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 2}\n"
                   "max_restarts: 0\nliveness_timeout: 10\n")
        run = self.cairn("run", "again.yaml", timeout=120)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertEqual(self.cairn_json("show", "1.1", "--json")["state"], "COMPLETED")

    def test_welcome_is_the_handshake_only_settings_come_from_the_environment(self):
        # checkpoint_period and deterministic reach a trial once, as CAIRN_* variables;
        # `welcome` no longer repeats them (docs/protocol.md), and the SDK still sees them.
        self.write("settings.py", r"""
import json, os, socket
import cairn

raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
raw.connect(os.environ["CAIRN_CONTROL"][len("unix:"):])
raw.sendall(json.dumps({"type": "hello", "protocol": 1, "trial": os.environ["CAIRN_TRIAL_ID"],
                        "rank": 0}).encode() + b"\n")
answers = raw.makefile()
welcome = json.loads(answers.readline())
assert welcome == {"type": "welcome", "protocol": 1}, welcome
answers.close()
raw.close()
assert os.environ["CAIRN_CHECKPOINT_PERIOD"] == "3", os.environ["CAIRN_CHECKPOINT_PERIOD"]
assert os.environ["CAIRN_DETERMINISTIC"] == "1", os.environ["CAIRN_DETERMINISTIC"]
ctx = cairn.init()
assert ctx.checkpoint_period == 3, ctx.checkpoint_period
assert ctx.deterministic is True, ctx.deterministic
for op in ctx.operations():
    ctx.report_validation(op.length, {"val_loss": 1.0})
""")
        self.write("settings.yaml", "entrypoint: /usr/bin/python3 settings.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 2}\n"
                   "checkpoint: {period: 3}\n"
                   "reproducibility: {deterministic: true}\n"
                   "environment: {PYTHONHASHSEED: '0'}\n"
                   "max_restarts: 0\nliveness_timeout: 10\n")
        run = self.cairn("run", "settings.yaml", timeout=120)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertEqual(self.cairn_json("show", "1.1", "--json")["state"], "COMPLETED")

    def test_deeply_nested_messages_are_refused_not_a_crash(self):
        # nlohmann's serializer recurses once per level: a checkpoint's metadata 100,000
        # levels deep, stored as sent, crashed `cairn run` (SIGSEGV). Every message is
        # refused above 64 levels, with a line saying so, and the trial carries on.
        self.write("deep.py", r"""
import json, os, socket
import cairn

deep = "[" * 100000 + "]" * 100000
raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
raw.connect(os.environ["CAIRN_CONTROL"][len("unix:"):])
answers = raw.makefile()
def ask(message):
    raw.sendall(message.encode() + b"\n")
    return json.loads(answers.readline())
assert ask(json.dumps({"type": "hello", "protocol": 1, "trial": os.environ["CAIRN_TRIAL_ID"],
                       "rank": 0}))["type"] == "welcome"
staging = ask('{"type":"checkpoint_begin","seq":1,"step":1}')["path"]
open(os.path.join(staging, "w"), "w").write("1")
for i, line in enumerate([
        '{"type":"checkpoint_end","seq":2,"step":1,"path":%s,"metadata":{"a":%s}}'
        % (json.dumps(staging), deep),
        deep,
        '{"type":"validation","seq":3,"step":1,"metrics":{"val_loss":%s}}' % deep,
        '{"type":"training","reports":[{"step":1,"metrics":{"loss":1},"x":%s}]}' % deep]):
    answer = ask(line)
    assert answer["type"] == "error", (i, answer)
    assert "nested deeper than 64 levels" in answer["message"], (i, answer["message"][:300])
print("all refused", flush=True)
answers.close()
raw.close()
ctx = cairn.init()
for op in ctx.operations():
    ctx.report_validation(op.length, {"val_loss": 1.0})
""")
        self.write("deep.yaml", "entrypoint: /usr/bin/python3 deep.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 1}\n"
                   "max_restarts: 0\nliveness_timeout: 30\n")
        run = self.cairn("run", "deep.yaml", timeout=120)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr[-2000:])
        self.assertEqual(self.cairn_json("show", "1.1", "--json")["state"], "COMPLETED")
        self.assertIn("all refused", self.cairn("logs", "1.1", check=0).stdout)

    def test_a_line_longer_than_16_mib_is_dropped_not_kept(self):
        # A trial that writes without ever ending its line made the coordinator buffer it
        # all. Past 16 MiB the line is dropped up to its newline, the trial is told, and the
        # connection goes on.
        self.write("long.py", r"""
import json, os, socket
import cairn

raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
raw.connect(os.environ["CAIRN_CONTROL"][len("unix:"):])
answers = raw.makefile()
raw.sendall(json.dumps({"type": "hello", "protocol": 1, "trial": os.environ["CAIRN_TRIAL_ID"],
                        "rank": 0}).encode() + b"\n")
assert json.loads(answers.readline())["type"] == "welcome"
raw.sendall(b'{"type":"kv_set","key":"' + b"x" * (20 << 20) + b'"}\n')
raw.sendall(b'{"type":"kv_set","seq":1,"key":"k","value":"v"}\n')
got = [json.loads(answers.readline()) for _ in range(2)]
errors = [a for a in got if a["type"] == "error"]
assert len(errors) == 1 and "message longer than 16 MiB: dropped" in errors[0]["message"], got
assert any(a.get("re") == 1 and a["type"] != "error" for a in got), got
print("long line dropped", flush=True)
answers.close()
raw.close()
ctx = cairn.init()
for op in ctx.operations():
    ctx.report_validation(op.length, {"val_loss": 1.0})
""")
        self.write("long.yaml", "entrypoint: /usr/bin/python3 long.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 1}\n"
                   "max_restarts: 0\nliveness_timeout: 60\n")
        run = self.cairn("run", "long.yaml", timeout=120)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr[-2000:])
        self.assertIn("long line dropped", self.cairn("logs", "1.1", check=0).stdout)

    def test_output_after_output_log_was_removed_or_truncated_is_kept(self):
        # cairn follows output.log from the offset it had read up to. A new attempt of a
        # trial whose output.log was removed (someone cleaned .cairn/work) or a file
        # truncated while the trial ran (to reclaim its space: it is a copy of what the
        # store holds) was read from that old offset: everything before it was never seen.
        self.write("trunc.py", r"""
import os, subprocess, sys, time
import cairn

ctx = cairn.init()
log = os.path.join(os.path.dirname(os.environ["CAIRN_ORPHAN_DIR"]), "output.log")
if ctx.steps_completed == 0:
    for i in range(200):
        print("first attempt line", i, flush=True)
    with ctx.checkpoint(1) as path:
        (path / "w").write_text("1")
    os.remove(log)  # this process writes on into the removed file
    print("first attempt after the removal", flush=True)
    sys.exit(3)
print("second attempt", flush=True)
for op in ctx.operations():
    for i in range(200):
        print("second attempt line", i, flush=True)
    # Truncated once cairn has stored all of it (truncating unread output loses it).
    deadline = time.monotonic() + 60
    while "second attempt line 199" not in subprocess.run(
            [os.environ["E2E_CAIRN"], "logs", ctx.trial_id], capture_output=True,
            text=True, timeout=120).stdout:
        assert time.monotonic() < deadline, "cairn did not store the output"
        time.sleep(0.05)
    os.truncate(log, 0)
    print("after the truncation", flush=True)
    ctx.report_validation(op.length, {"val_loss": 1.0})
""")
        self.write("trunc.yaml", "entrypoint: /usr/bin/python3 trunc.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 2}\n"
                   "max_restarts: 1\n"
                   "environment: {E2E_CAIRN: %s}\n" % json.dumps(os.path.abspath(CAIRN)))
        run = self.cairn("run", "trunc.yaml", check=0)
        for line in ("first attempt line 199", "first attempt after the removal",
                     "second attempt", "second attempt line 199", "after the truncation"):
            self.assertIn("[1.1] %s\n" % line, run.stdout)
        logs = self.cairn("logs", "1.1", check=0).stdout
        self.assertEqual(logs.count("after the truncation\n"), 1, logs[-2000:])
        self.assertEqual(logs.count("second attempt\n"), 1)
        self.assertEqual(logs.count("second attempt line 0\n"), 1)
        self.assertEqual(logs.count("first attempt line 0\n"), 1)

    @needs("git", os.path.isdir(os.path.join(os.environ.get("CAIRN_SOURCE_DIR", "."), ".git")) or
           os.path.isfile(os.path.join(os.environ.get("CAIRN_SOURCE_DIR", "."), ".git")),
           "the source is not a git checkout")
    def test_version_names_the_commit_built_from(self):
        source = os.environ.get("CAIRN_SOURCE_DIR", ".")
        head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], capture_output=True,
                              text=True, cwd=source, timeout=120)
        self.assertEqual(head.returncode, 0, head.stderr)
        git = self.cairn_json("version", "--json")["git"]
        built = git[:-len("-dirty")] if git.endswith("-dirty") else git
        if built != head.stdout.strip():
            # Built before a later commit: fine if that commit touched nothing the binary is
            # made of (a developer committing notes or tests after building), not otherwise.
            changed = subprocess.run(["git", "diff", "--name-only", built, "HEAD"],
                                     capture_output=True, text=True, cwd=source, timeout=120).stdout.split()
            in_binary = [f for f in changed if not (f.endswith(".md") or
                                                    f.startswith(("tests/", "bench/", "docs/")))]
            self.assertEqual(in_binary, [], "cairn was built from %s, not HEAD" % git)
            # Built from an earlier commit whose later ones change only docs, tests or
            # benchmarks: the check above is the test.


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
