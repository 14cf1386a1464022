"""End to end: what README.md promises that no other test checked (issue 23 §6) — `cairn
watch` live on a terminal and piped, colour on a terminal and NO_COLOR, `best --checkpoint`,
`resume --all` over several experiments (paused ones stay paused), a second Ctrl-C,
`compare` naming a dependency and a config difference and `--diff` printing a patch that
applies, `ls --all`, the rung table of `show` for hyperband and asha, and `run --detach`
returning while the experiment runs. Real trials, a real store, the real binary."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, CairnTestCase, read_line_until, wait_until  # noqa: E402
import cairn_testlib  # noqa: E402

# A trial whose validation loss depends on its hyperparameter x and its length, so that the
# searchers' decisions are worked out from its own records. While a file `hold-TRIAL` exists
# in the workdir it waits before each unit (answering a pause; never for more than 120 s,
# so it does not outlive a failed test); while `stubborn` exists it stops answering cairn
# altogether once it has checkpointed at step 2 (only a kill ends it early).
TRAIN = r'''
import os, sys, time
import cairn

ctx = cairn.init()
work = os.environ["CAIRN_WORKDIR"]
x = float(ctx.hparams.get("x", 1.0))
step = ctx.steps_completed
if ctx.latest_checkpoint:
    assert int((ctx.latest_checkpoint / "step").read_text()) == step
print("start", step, flush=True)
hold = os.path.join(work, "hold-" + os.environ["CAIRN_TRIAL_ID"])
held_until = time.monotonic() + 120
for op in ctx.operations():
    while step < op.length:
        while os.path.exists(hold) and time.monotonic() < held_until and not ctx.should_preempt():
            time.sleep(0.05)
        step += 1
        ctx.report_training(step, {"loss": x / step})
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / "step").write_text(str(step))
            if ctx.should_preempt():
                print("preempted", step, flush=True)
                sys.exit(0)
        if step == 2 and os.path.exists(os.path.join(work, "stubborn")):
            open(os.path.join(work, "stubborn-%d" % os.getpid()), "w").close()
            while os.path.exists(os.path.join(work, "stubborn")) and time.monotonic() < held_until:
                time.sleep(0.05)
    ctx.report_validation(step, {"val_loss": (x - 2.0) ** 2 + 1.0 / step})
'''

SINGLE = """entrypoint: /usr/bin/python3 train.py
hyperparameters: {x: 1.5}
searcher: {name: single, metric: val_loss, max_length: LENGTH}
checkpoint: {period: 1}
reproducibility: {seed: 5}
"""

# Two trials, one at a time.
GRID = """name: two
entrypoint: /usr/bin/python3 train.py
hyperparameters:
  x: {type: int, minval: 1, maxval: 2, count: 2}
searcher: {name: grid, metric: val_loss, max_length: 3, max_concurrent_trials: 1}
"""

# SPEC §3 with R = 9, η = 3: s_max = 2, brackets 9@1 3@3 1@9 / 5@3 1@9 / 3@9.
HYPERBAND = """name: hb
entrypoint: /usr/bin/python3 train.py
hyperparameters:
  x: {type: double, minval: 0, maxval: 4}
searcher: {name: hyperband, metric: val_loss, max_length: 9, divisor: 3, max_concurrent_trials: 2}
reproducibility: {seed: 3}
"""
HYPERBAND_EXPECTED = {(1, 1): 9, (1, 3): 3, (1, 9): 1, (2, 3): 5, (2, 9): 1, (3, 9): 3}

ASHA = """name: asha
entrypoint: /usr/bin/python3 train.py
hyperparameters:
  x: {type: double, minval: 0, maxval: 4}
searcher: {name: asha, metric: val_loss, max_length: 9, divisor: 3, max_trials: 9,
           max_rungs: 3, mode: standard, max_concurrent_trials: 1}
reproducibility: {seed: 3}
"""

ESCAPE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # control characters but tab and newline


def alive(pid):
    """True while `pid` runs (a zombie has ended)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def table_rows(text, header):
    """The rows (lists of cells) of the table whose header line starts with `header`."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith(header):
            rows = []
            for row in lines[i + 1:]:
                if not row.strip():
                    break
                rows.append(re.split(r"\s{2,}", row.strip()))
            return rows
    raise AssertionError("no table headed %r in:\n%s" % (header, text))


class ReadmePromises(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.write("train.py", TRAIN)

    def path(self, *names):
        return os.path.join(self.dir, *names)

    def touch(self, name):
        open(self.path(name), "w").close()

    def start(self, *args, env=None, **popen):
        """`cairn ARGS` in the background, its output (stdout and stderr) in a pipe."""
        proc = subprocess.Popen([CAIRN, *map(str, args)], cwd=self.dir, env=self.cairn_env(env),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                **popen)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        self.addCleanup(proc.stdout.close)
        return proc

    def state(self, ref):
        proc = self.cairn("show", ref, "--json")
        return json.loads(proc.stdout)["state"] if proc.returncode == 0 else None

    def wait_state(self, ref, wanted, timeout=60):
        wait_until(lambda: self.state(ref) == wanted, timeout=timeout,
                   what="%s to be %s (it is %s)" % (ref, wanted, self.state(ref)))

    def training_steps(self, trial):
        return [p["step"] for p in self.cairn_json("metrics", trial, "--json")["training"]]

    # -- cairn watch ----------------------------------------------------------------------

    def test_watch_redraws_live_on_a_terminal_until_the_experiment_ends(self):
        self.write("two.yaml", GRID)
        self.touch("hold-1.1")
        run = self.start("run", "two.yaml")
        self.wait_state("1.1", "RUNNING")
        watch = self.on_pty([CAIRN, "watch", "1", "--interval", "0.1"])
        clear = "\x1b[H\x1b[2J"

        def frames(text):
            return [f.replace("\r\n", "\n") for f in text.split(clear)[1:]]

        def showing(pattern):
            return lambda text: any(re.search(pattern, f, re.M) for f in frames(text)[:-1])

        # Frames are whole once the next one starts: the last may still be arriving.
        watch.read_until(showing(r"^1\.1\s+RUNNING\s+0\s+-$"), what="trial 1.1 running")
        first = frames(watch.text)[0]
        self.assertIn("experiment 1  two  ACTIVE\n", first)
        # The grid creates its second trial when the first is done.
        self.assertIn("trials      1  RUNNING 1\n"
                      "search      1 of 2 trials created, 0 closed\n", first)
        # What happens next shows without running watch again: 1.1 completes, 1.2 runs.
        self.touch("hold-1.2")
        os.remove(self.path("hold-1.1"))
        watch.read_until(showing(r"^1\.2\s+RUNNING\s"), what="trial 1.2 running")
        later = [f for f in frames(watch.text)[:-1] if re.search(r"^1\.2\s+RUNNING\s", f, re.M)][0]
        self.assertIn("trials      2  COMPLETED 1  RUNNING 1\n", later)
        self.assertNotRegex(later, r"^1\.1\s", "a completed trial leaves the running table")
        # When no cairn process drives the experiment any more, watch draws it once more and
        # exits by itself.
        os.remove(self.path("hold-1.2"))
        self.assertEqual(run.wait(timeout=60), 0)
        self.assertEqual(watch.read_to_end(timeout=30), 0, watch.text)
        last = frames(watch.text)[-1]
        self.assertIn("experiment 1  two  COMPLETED\n", last)
        self.assertIn("trials      2  COMPLETED 2\n", last)
        self.assertGreaterEqual(len(frames(watch.text)), 3)

    def test_watch_piped_prints_one_plain_snapshot_while_the_experiment_runs(self):
        self.write("two.yaml", GRID)
        self.touch("hold-1.1")
        run = self.start("run", "two.yaml")
        self.wait_state("1.1", "RUNNING")
        # Piped (here through `cat`), it prints one snapshot and exits though the
        # experiment is still running.
        proc = subprocess.run(["sh", "-c", '"$0" watch 1 --interval 0.1 | cat', CAIRN],
                              cwd=self.dir, env=self.cairn_env({"NO_COLOR": None}),
                              capture_output=True, text=True, timeout=30)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIsNone(run.poll(), "the experiment was still running")
        self.assertIsNone(ESCAPE.search(proc.stdout), repr(proc.stdout))
        self.assertTrue(proc.stdout.startswith("experiment 1  two  ACTIVE\n"), proc.stdout)
        self.assertEqual(proc.stdout.count("experiment 1 "), 1, "one snapshot")
        self.assertIn("trials      1  RUNNING 1\nsearch      1 of 2 trials created, 0 closed\n",
                      proc.stdout)
        self.assertEqual(table_rows(proc.stdout, "TRIAL  STATE"), [["1.1", "RUNNING", "0", "-"]])
        os.remove(self.path("hold-1.1"))
        self.assertEqual(run.wait(timeout=60), 0)

    # -- colour ---------------------------------------------------------------------------

    def test_colour_on_a_terminal_and_none_with_no_color_or_piped(self):
        self.write("exp.yaml", SINGLE.replace("LENGTH", "2"))
        coloured = self.on_pty([CAIRN, "run", "exp.yaml"], env=self.cairn_env({"NO_COLOR": None}))
        self.assertEqual(coloured.read_to_end(timeout=60), 0, coloured.text)
        self.assertIn("\x1b[1mcairn:\x1b[0m experiment 1 ", coloured.text)
        self.assertIn("\x1b[36m[1.1] \x1b[0mstart 0\r\n", coloured.text)
        # NO_COLOR set to anything turns it off on the same terminal.
        plain = self.on_pty([CAIRN, "run", "exp.yaml"], env=self.cairn_env({"NO_COLOR": "yes"}))
        self.assertEqual(plain.read_to_end(timeout=60), 0, plain.text)
        self.assertIn("cairn: experiment 2 ", plain.text)
        self.assertIn("[2.1] start 0\r\n", plain.text)
        # No colour; the status line's own clears stay (tests/e2e/test_status_line.py).
        self.assertIsNone(re.search(r"\x1b\[[0-9;]*m", plain.text), repr(plain.text))
        # Piped, plain lines without NO_COLOR.
        piped = self.cairn("run", "exp.yaml", env={"NO_COLOR": None}, check=0, timeout=60)
        self.assertIn("[3.1] start 0\n", piped.stdout)
        self.assertIsNone(ESCAPE.search(piped.stdout + piped.stderr), repr(piped.stdout))

    # -- cairn best --checkpoint ----------------------------------------------------------

    def test_best_checkpoint_exports_the_best_trials_best_checkpoint_once(self):
        # Validation is best at step 2 of 4, so the best checkpoint is not the latest; x = 2
        # is the best trial.
        self.write("best.py", r'''
import cairn
ctx = cairn.init()
x = ctx.hparams["x"]
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        step += 1
        ctx.report_training(step, {"loss": 1.0})
        with ctx.checkpoint(step) as path:
            (path / "weights.txt").write_text("x=%d step=%d\n" % (x, step))
            (path / "optimizer").mkdir()
            (path / "optimizer" / "state.bin").write_bytes(bytes(range(10 * step)))
        ctx.report_validation(step, {"val_loss": (x - 2) ** 2 + (step - 2) ** 2})
''')
        self.write("best.yaml", "entrypoint: /usr/bin/python3 best.py\n"
                   "hyperparameters: {x: {type: int, minval: 1, maxval: 3, count: 3}}\n"
                   "searcher: {name: grid, metric: val_loss, max_length: 4}\n")
        self.cairn("run", "best.yaml", check=0, timeout=120)
        self.assertEqual(self.cairn("best", "1", check=0).stdout, "1.2\n")
        out = self.cairn("best", "1", "--checkpoint", check=0).stdout
        self.assertEqual(out.count("\n"), 1, "one line, for scripts")
        path = out.strip()
        best = [c for c in self.cairn_json("checkpoints", "1.2", "--json")
                if c["steps_completed"] == 2]
        self.assertEqual(len(best), 1)
        self.assertEqual(path, os.path.join(os.path.realpath(self.dir), ".cairn", "exports",
                                            best[0]["id"]))
        with open(os.path.join(path, "weights.txt")) as f:
            self.assertEqual(f.read(), "x=2 step=2\n")
        with open(os.path.join(path, "optimizer", "state.bin"), "rb") as f:
            self.assertEqual(f.read(), bytes(range(20)))
        # The same files as `cairn export 1.2@best`.
        self.cairn("export", "1.2@best", "out", check=0)
        for name in ("weights.txt", os.path.join("optimizer", "state.bin")):
            with open(os.path.join(path, name), "rb") as a, open(self.path("out", name), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)
        # Exported once: asked again, the same directory, not written again.
        before = os.stat(os.path.join(path, "weights.txt"))
        self.assertEqual(self.cairn("best", "1", "--checkpoint", check=0).stdout, out)
        after = os.stat(os.path.join(path, "weights.txt"))
        self.assertEqual((before.st_ino, before.st_mtime_ns), (after.st_ino, after.st_mtime_ns))
        self.assertEqual(os.listdir(self.path(".cairn", "exports")), [best[0]["id"]])
        # README's line for scripts.
        line = 'cp -R "$("$0" best 1 --checkpoint)" model/ && cat model/weights.txt'
        shell = subprocess.run(["bash", "-c", line, CAIRN], cwd=self.dir, env=self.cairn_env(),
                               capture_output=True, text=True, timeout=60)
        self.assertEqual((shell.returncode, shell.stdout), (0, "x=2 step=2\n"), shell.stderr)

    # -- cairn resume --all ---------------------------------------------------------------

    def test_resume_all_resumes_the_interrupted_and_leaves_the_paused_and_ended(self):
        self.write("long.yaml", SINGLE.replace("LENGTH", "6"))
        self.write("short.yaml", SINGLE.replace("LENGTH", "2"))
        # 1: interrupted by kill -9 of its cairn.
        self.touch("hold-1.1")
        run = self.start("run", "long.yaml")
        wait_until(lambda: self.state("1.1") == "RUNNING", what="1.1 to run")
        pid = self.cairn_json("show", "1.1", "--json")["pid"]
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=60)
        # Its trial notices, checkpoints and exits by itself.
        wait_until(lambda: not alive(pid), timeout=30, what="the orphaned trial to exit")
        # 2: paused on purpose (Ctrl-C).
        self.touch("hold-2.1")
        run = self.start("run", "long.yaml")
        wait_until(lambda: self.state("2.1") == "RUNNING", what="2.1 to run")
        run.send_signal(signal.SIGINT)
        self.assertEqual(run.wait(timeout=60), 0)
        self.assertEqual(self.state("2"), "PAUSED")
        # 3: completed. 4: interrupted by SIGTERM (a shutdown). 5: killed (CANCELED).
        self.cairn("run", "short.yaml", check=0, timeout=60)
        self.touch("hold-4.1")
        run = self.start("run", "long.yaml")
        wait_until(lambda: self.state("4.1") == "RUNNING", what="4.1 to run")
        run.send_signal(signal.SIGTERM)
        self.assertEqual(run.wait(timeout=60), 0)
        self.touch("hold-5.1")
        run = self.start("run", "long.yaml")
        wait_until(lambda: self.state("5.1") == "RUNNING", what="5.1 to run")
        self.cairn("kill", "5", check=0, timeout=60)
        run.wait(timeout=60)
        states = {e["id"]: e["state"] for e in self.cairn_json("ls", "--all", "--json")}
        self.assertEqual(states, {1: "ACTIVE", 2: "PAUSED", 3: "COMPLETED", 4: "ACTIVE",
                                  5: "CANCELED"})
        paused_steps = self.training_steps("2.1")

        for name in ("hold-1.1", "hold-2.1", "hold-4.1"):
            os.remove(self.path(name))
        resumed = self.cairn("resume", "--all", check=0, timeout=60)
        self.assertEqual(resumed.stdout.split("\n"), ["1", "4", ""],
                         "the ids it resumes, one a line")
        self.assertIn("resumed 2 interrupted experiment(s) in the background", resumed.stderr)
        # Resumed in the background: they complete with nothing more from the test.
        self.wait_state("1", "COMPLETED", timeout=120)
        self.wait_state("4", "COMPLETED", timeout=120)
        for trial in ("1.1", "4.1"):
            record = self.cairn_json("show", trial, "--json")
            self.assertEqual((record["state"], record["restarts"]), ("COMPLETED", 0), trial)
            self.assertEqual(sorted(set(self.training_steps(trial))), list(range(1, 7)), trial)
        # The paused one stays paused, untouched; the ended ones too.
        self.assertEqual(self.state("2"), "PAUSED")
        self.assertEqual(self.state("2.1"), "PAUSED")
        self.assertEqual(self.training_steps("2.1"), paused_steps)
        self.assertEqual(self.state("3"), "COMPLETED")
        self.assertEqual(self.state("5"), "CANCELED")
        # Nothing left to resume: a second run resumes none.
        again = self.cairn("resume", "--all", check=0, timeout=60)
        self.assertEqual(again.stdout, "")
        self.assertIn("resumed 0 interrupted experiment(s)", again.stderr)
        # The paused one resumes when asked.
        self.cairn("resume", "2", check=0, timeout=120)
        self.assertEqual(self.state("2.1"), "COMPLETED")

    # -- a second Ctrl-C ------------------------------------------------------------------

    def test_a_second_ctrl_c_stops_the_trials_at_once_and_the_experiment_resumes(self):
        self.write("exp.yaml", SINGLE.replace("LENGTH", "4"))
        self.touch("stubborn")
        # Ctrl-C reaches the terminal's foreground process group: cairn in its own group
        # here, as a shell's job is; its trials run in groups of their own.
        run = self.start("run", "exp.yaml", start_new_session=True)
        wait_until(lambda: any(n.startswith("stubborn-") for n in os.listdir(self.dir)),
                   timeout=60, what="the trial to checkpoint at step 2 and stop answering")
        pid = int([n for n in os.listdir(self.dir) if n.startswith("stubborn-")][0].split("-")[1])
        os.killpg(run.pid, signal.SIGINT)
        read_line_until(run.stdout, lambda l: "press Ctrl-C again to stop at once" in l,
                        timeout=30, what="cairn to say it is pausing")
        self.assertIsNone(run.poll(), "the first Ctrl-C waits for the trial")
        self.assertTrue(alive(pid))
        os.killpg(run.pid, signal.SIGINT)
        # The trial would hold for 120 s: cairn ends long before, having killed it.
        out, _ = run.communicate(timeout=30)
        self.assertEqual(run.returncode, 0, out)
        self.assertIn("stopping at once", out)
        wait_until(lambda: not alive(pid), timeout=10, what="the trial to be gone")
        self.assertEqual(self.state("1"), "PAUSED")
        os.remove(self.path("stubborn"))
        resumed = self.cairn("resume", "1", check=0, timeout=120)
        self.assertRegex(resumed.stdout,
                         r"trial 1\.1 started \(pid \d+\) from checkpoint \w+ \(2 units done\)")
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual((trial["state"], trial["restarts"]), ("COMPLETED", 0),
                         "a kill the user asked for is not a failure")
        self.assertEqual(self.training_steps("1.1"), [1, 2, 3, 4])

    # -- cairn compare --------------------------------------------------------------------

    def test_compare_names_a_dependency_and_a_config_difference_and_diff_is_a_patch(self):
        self.write("exp.yaml", SINGLE.replace("LENGTH", "2") + "data: [data/]\n")
        self.write("model.py", "WIDTH = 8\n")
        self.write("old_helper.py", "def helper():\n    return 1\n")
        self.write("data/rows.csv", "1\n2\n")
        # An installed Python distribution, as pip leaves one, outside the workdir.
        site = tempfile.mkdtemp(prefix="cairn-site-")
        self.addCleanup(shutil.rmtree, site, True)

        def install(version):
            for old in os.listdir(site):
                shutil.rmtree(os.path.join(site, old))
            info = os.path.join(site, "cairnfakedep-%s.dist-info" % version)
            os.makedirs(info)
            with open(os.path.join(info, "METADATA"), "w") as f:
                f.write("Metadata-Version: 2.1\nName: cairnfakedep\nVersion: %s\n" % version)

        install("1.0")
        self.cairn("run", "exp.yaml", env={"PYTHONPATH": site}, check=0, timeout=120)
        before = shutil.copytree(self.dir, tempfile.mkdtemp(prefix="cairn-before-") + "/tree",
                                 ignore=shutil.ignore_patterns(".cairn"))
        self.addCleanup(shutil.rmtree, os.path.dirname(before), True)
        # The code, the data, a dependency and the config change.
        install("1.1")
        self.write("model.py", "WIDTH = 16\nDEPTH = 2\n")
        os.remove(self.path("old_helper.py"))
        self.write("new_helper.py", "def helper():\n    return 2\n")
        self.write("data/rows.csv", "1\n2\n3\n")
        self.cairn("run", "exp.yaml", "--set", "checkpoint.period=2", env={"PYTHONPATH": site},
                   check=0, timeout=120)

        text = self.cairn("compare", "1.1", "2.1", check=0).stdout
        self.assertIn("dependency cairnfakedep: 1.0 → 1.1\n", text)
        self.assertIn("config checkpoint.period: 1 → 2\n", text)
        self.assertIn("data: data/rows.csv changed\n", text)
        self.assertIn("code: 3 files changed", text)
        doc = self.cairn_json("compare", "1.1", "2.1", "--json")
        found = {(d["category"], d["what"]): d["values"] for d in doc["differences"]}
        self.assertEqual(found[("dependency", "cairnfakedep")], ["1.0", "1.1"])
        self.assertEqual(found[("config", "checkpoint.period")], [1, 2])
        self.assertEqual(sorted(w for c, w in found if c == "code"),
                         ["model.py", "new_helper.py", "old_helper.py"])
        self.assertNotIn(("hparam", "x"), found)

        # --diff: the code changes as a patch, of code files only (data is not code), that
        # turns the first run's workdir into the second's.
        out = self.cairn("compare", "1.1", "2.1", "--diff", check=0).stdout
        patch = out[out.index("diff --git"):]
        touched = sorted(set(re.findall(r"^diff --git a/(\S+) b/", patch, re.M)))
        self.assertEqual(touched, ["model.py", "new_helper.py", "old_helper.py"])
        self.write("change.patch", patch)
        check = subprocess.run(["git", "apply", "--check", "-v", self.path("change.patch")],
                               cwd=before, capture_output=True, text=True, timeout=60)
        self.assertEqual(check.returncode, 0, check.stderr + patch)
        applied = subprocess.run(["git", "apply", self.path("change.patch")],
                                 cwd=before, capture_output=True, text=True, timeout=60)
        self.assertEqual(applied.returncode, 0, applied.stdout + applied.stderr)
        for name in ("model.py", "new_helper.py"):
            with open(os.path.join(before, name)) as a, open(self.path(name)) as b:
                self.assertEqual(a.read(), b.read(), name)
        self.assertFalse(os.path.exists(os.path.join(before, "old_helper.py")))
        with open(os.path.join(before, "data", "rows.csv")) as f:
            self.assertEqual(f.read(), "1\n2\n", "the patch leaves data alone")

    # -- cairn ls --all -------------------------------------------------------------------

    def test_ls_lists_canceled_experiments_only_with_all(self):
        self.write("short.yaml", SINGLE.replace("LENGTH", "2"))
        self.write("long.yaml", SINGLE.replace("LENGTH", "6"))
        self.cairn("run", "short.yaml", "--name", "done", check=0, timeout=60)
        self.touch("hold-2.1")
        run = self.start("run", "long.yaml", "--name", "gone")
        self.wait_state("2.1", "RUNNING")
        self.cairn("kill", "2", check=0, timeout=60)
        run.wait(timeout=60)
        self.touch("hold-3.1")
        run = self.start("run", "long.yaml", "--name", "waiting")
        self.wait_state("3.1", "RUNNING")
        self.cairn("pause", "3", check=0, timeout=60)
        run.wait(timeout=60)

        def listed(*flags):
            return [(e["id"], e["name"], e["state"])
                    for e in self.cairn_json("ls", *flags, "--json")]

        self.assertEqual(listed(), [(1, "done", "COMPLETED"), (3, "waiting", "PAUSED")])
        self.assertEqual(listed("--all"), [(1, "done", "COMPLETED"), (2, "gone", "CANCELED"),
                                           (3, "waiting", "PAUSED")])
        rows = table_rows(self.cairn("ls", check=0).stdout, "ID  NAME")
        self.assertEqual([r[:3] for r in rows],
                         [["1", "done", "COMPLETED"], ["3", "waiting", "PAUSED"]])
        rows = table_rows(self.cairn("ls", "--all", check=0).stdout, "ID  NAME")
        self.assertEqual([r[:4] for r in rows], [["1", "done", "COMPLETED", "single"],
                                                 ["2", "gone", "CANCELED", "single"],
                                                 ["3", "waiting", "PAUSED", "single"]])

    # -- the rung table of show -----------------------------------------------------------

    def assert_rung_table(self, exp, expected=None):
        """Checks show's rung table against the trials' own records: at each rung, the
        trials of its bracket that validated at its length, those of them that went on to
        the next rung, and the best of them."""
        text = self.cairn("show", exp, check=0).stdout
        rows = table_rows(text, "BRACKET  RUNG")
        record = self.cairn_json("show", exp, "--json")
        validations = {}
        for trial in record["trials"]:
            series = self.cairn_json("metrics", trial["id"], "--json")["validation"]
            validations[trial["id"]] = {v["step"]: v["metrics"]["val_loss"] for v in series}
        brackets = {}
        for b in record["searcher_state"]["brackets"]:
            first = b["rungs"][0]["results"]
            brackets[b["bracket"]] = ["%s.%d" % (exp, r["trial"]) for r in first]
        lengths = {}
        for row in rows:
            lengths.setdefault(int(row[0]), []).append(int(row[1].lstrip("@")))
        self.assertEqual(sorted(lengths), sorted(brackets))
        table = {}
        for row in rows:
            bracket, length = int(row[0]), int(row[1].lstrip("@"))
            table[(bracket, length)] = row[2:]
            members = brackets[bracket]
            here = [t for t in members if length in validations[t]]
            later = [n for n in lengths[bracket] if n > length]
            promoted = [t for t in here if later and later[0] in validations[t]]
            if here:
                best = min(here, key=lambda t: validations[t][length])
                best_cell = "%s (%s)" % (best, format(validations[best][length], ".6g"))
            else:
                best_cell = "-"
            with self.subTest(bracket=bracket, rung=length):
                self.assertEqual(row[3:], ["0", str(len(here)), str(len(promoted)), best_cell])
        if expected is not None:
            self.assertEqual({k: int(v[0]) for k, v in table.items()}, expected)
        return text

    def test_show_has_the_rung_table_of_hyperband(self):
        self.write("hb.yaml", HYPERBAND)
        self.cairn("run", "hb.yaml", check=0, timeout=120)
        text = self.assert_rung_table("1", HYPERBAND_EXPECTED)
        self.assertIn("search      17 of 17 trials created, 17 closed; best at a rung 1.", text)
        # watch, piped, shows the same table.
        watched = self.cairn("watch", "1", check=0).stdout
        self.assertEqual(table_rows(watched, "BRACKET  RUNG"), table_rows(text, "BRACKET  RUNG"))

    def test_show_has_the_rung_table_of_asha(self):
        self.write("asha.yaml", ASHA)
        self.cairn("run", "asha.yaml", check=0, timeout=120)
        self.assert_rung_table("1")

    # -- cairn run --detach ---------------------------------------------------------------

    def test_detach_returns_while_the_experiment_still_runs(self):
        self.write("exp.yaml", SINGLE.replace("LENGTH", "3"))
        self.touch("hold-1.1")
        detached = self.cairn("run", "exp.yaml", "--detach", check=0, timeout=30)
        self.assertEqual(detached.stdout, "1\n")
        # It returned with the trial held: the experiment goes on without it.
        self.wait_state("1.1", "RUNNING")
        self.assertEqual(self.state("1"), "ACTIVE")
        listed = self.cairn_json("ls", "--json")
        self.assertEqual([(e["id"], e["state"]) for e in listed], [(1, "ACTIVE")])
        os.remove(self.path("hold-1.1"))
        self.wait_state("1", "COMPLETED", timeout=60)
        self.assertEqual(self.training_steps("1.1"), [1, 2, 3])
        # Its output goes to coordinator.log; the last line comes after the state is stored.
        log = self.path(".cairn", "experiments", "1", "coordinator.log")
        wait_until(lambda: "experiment 1 COMPLETED" in open(log).read(), timeout=30,
                   what="the detached cairn's last line in coordinator.log")
        self.assertIn("[1.1] start 0", open(log).read())


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
