"""End to end: a corrupt checkpoint is detected on restore and the previous one used; a
checkpoint that cannot be written (disk full) loses nothing."""
import json
import os
import subprocess
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, CairnTestCase, needs, read_line_until, wait_until  # noqa: E402
import cairn_testlib  # noqa: E402

USERNS, USERNS_WHY = cairn_testlib.userns_mounts()

# Crashes once at CRASH_AT, after waiting for the test's go-ahead, so the test can tamper
# with the store in between. Checkpoint payloads differ per step (no shared objects).
TRAIN = r'''
import json, os, random, sys, time
import cairn

ctx = cairn.init()
out = os.environ["CAIRN_WORKDIR"]  # trials run in a checkout; markers go where the test looks
step = ctx.steps_completed
print("resumed-from", step, flush=True)
if ctx.latest_checkpoint:
    assert (ctx.latest_checkpoint / "weights.bin").read_bytes() == random.Random(step).randbytes(20000)
    filler = os.environ.get("FILLER") and os.path.join(out, os.environ["FILLER"])
    if filler and os.path.exists(filler):
        os.remove(filler)  # the operator freed some disk
crash_at = int(os.environ.get("CRASH_AT", "0"))
for op in ctx.operations():
    while step < op.length:
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        if step == crash_at and not os.path.exists(os.path.join(out, "crashed.marker")):
            open(os.path.join(out, "crashed.marker"), "w").close()
            open(os.path.join(out, "ready.marker"), "w").close()
            held = time.monotonic() + 120  # never outlives a test that failed before "go"
            while not os.path.exists(os.path.join(out, "go.marker")) and time.monotonic() < held:
                time.sleep(0.02)
            os._exit(7)
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / "weights.bin").write_bytes(random.Random(step).randbytes(20000))
                size = int(os.environ.get("BIG_AT_%d" % step, "0"))
                if size:
                    (path / "big.bin").write_bytes(b"x" * size)
            if ctx.should_preempt():
                sys.exit(0)
    ctx.report_validation(step, {"val_loss": 1.0 / step})
'''


class CheckpointIntegrityTest(CairnTestCase):
    def test_period_zero_checkpoints_only_at_decision_points(self):
        # checkpoint.period: 0 is what the protocol already meant by a period below 1: no
        # periodic checkpoints, only where the searcher decides (the end of an operation).
        self.write("due.py", r"""
import os
import cairn

ctx = cairn.init()
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / "step").write_text(str(step))
            with open(os.path.join(os.environ["CAIRN_WORKDIR"], "due.txt"), "a") as f:
                f.write("%d\n" % step)
    ctx.report_validation(step, {"val_loss": 1.0 / step})
""")
        for period, expected in [(0, [6]), (2, [2, 4, 6])]:
            with self.subTest(period=period):
                due = os.path.join(self.dir, "due.txt")
                if os.path.exists(due):
                    os.remove(due)
                self.write("due.yaml", "entrypoint: /usr/bin/python3 due.py\n"
                           "searcher: {name: single, metric: val_loss, max_length: 6}\n"
                           "checkpoint: {period: %d}\n" % period)
                run = self.cairn("run", "due.yaml", timeout=120)
                self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
                with open(due) as f:
                    self.assertEqual([int(line) for line in f], expected)

    def test_flipped_byte_is_detected_and_the_previous_checkpoint_used(self):
        self.write("train.py", TRAIN)
        self.write("exp.yaml", "entrypoint: /usr/bin/python3 train.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 8}\n"
                   "checkpoint: {period: 2, keep_trial_latest: 3}\nmax_restarts: 2\nenvironment: {CRASH_AT: '5'}\n")
        env = dict(os.environ, NO_COLOR="1")
        proc = subprocess.Popen([CAIRN, "run", "exp.yaml"], cwd=self.dir, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(proc.kill)
        wait_until(lambda: os.path.exists(os.path.join(self.dir, "ready.marker")), what="the trial at step 5")
        ckpts = self.cairn_json("checkpoints", "1.1", "--json")
        self.assertEqual([c["steps_completed"] for c in ckpts], [2, 4])
        objects = os.path.join(self.dir, ".cairn", "objects")
        obj = lambda h: os.path.join(objects, h[:2], h[2:])
        with open(obj(ckpts[-1]["id"])) as f:
            manifest = json.load(f)
        weights = [e for e in manifest["files"] if e["path"] == "weights.bin"][0]["sha256"]
        os.chmod(obj(weights), 0o644)
        with open(obj(weights), "r+b") as f:
            f.seek(100)
            byte = f.read(1)
            f.seek(100)
            f.write(bytes([byte[0] ^ 0xFF]))
        open(os.path.join(self.dir, "go.marker"), "w").close()
        out, _ = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 0, out)
        self.assertIn("is corrupt", out)
        self.assertIn("falling back to the previous checkpoint", out)
        self.assertIn("[1.1] resumed-from 2", out, "restored from the checkpoint before the corrupt one")
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED")
        steps = [p["step"] for p in self.cairn_json("metrics", "1.1", "--json")["training"]]
        self.assertEqual(steps, list(range(1, 9)))
        # The corrupt checkpoint is never offered again.
        export = self.cairn("export", ckpts[-1]["id"][:12], os.path.join(self.dir, "out"))
        self.assertNotEqual(export.returncode, 0)
        self.assertIn("corrupt", export.stderr)

    @needs("userns", USERNS, USERNS_WHY)
    def test_disk_full_during_a_checkpoint_loses_nothing(self):
        # A small file system of our own: a tmpfs in a user+mount namespace (no root needed).
        self.write("train.py", TRAIN)
        script = textwrap.dedent("""\
            set -e
            mkdir -p small && mount -t tmpfs -o size=4m tmpfs small
            cp train.py small/ && cd small
            cat > exp.yaml <<'EOF'
            entrypoint: /usr/bin/python3 train.py
            searcher: {name: single, metric: val_loss, max_length: 6}
            checkpoint: {period: 2, keep_trial_latest: 3}
            max_restarts: 2
            environment: {BIG_AT_4: '3000000', FILLER: filler.bin}
            EOF
            "$CAIRN" run exp.yaml > ../run.out 2>&1 || echo "run exited $?" >> ../run.out
            "$CAIRN" show 1.1 --json > ../show.json
            "$CAIRN" metrics 1.1 --json > ../metrics.json
            "$CAIRN" export 1.1@latest ../exported > /dev/null
            """)
        # Fill the disk so the step-4 checkpoint (3 MB) does not fit; the trial frees the
        # filler when it restarts, as an operator would.
        script = script.replace("cp train.py small/ && cd small",
                                "cp train.py small/ && cd small && head -c 1500000 /dev/zero > filler.bin"
                                " && echo filler.bin > .cairnignore")  # not code: no copy in the snapshot
        proc = subprocess.run(["unshare", "-rm", "bash", "-c", script], cwd=self.dir,
                              env=dict(os.environ, CAIRN=CAIRN, NO_COLOR="1"), capture_output=True,
                              text=True, timeout=300)
        with open(os.path.join(self.dir, "run.out")) as f:
            out = f.read()
        self.assertEqual(proc.returncode, 0, proc.stderr + out)
        self.assertIn("No space left on device", out, "the failure is reported")
        self.assertIn("[1.1] resumed-from 2", out, "training goes on from the last good checkpoint")
        with open(os.path.join(self.dir, "show.json")) as f:
            trial = json.load(f)
        self.assertEqual(trial["state"], "COMPLETED")
        self.assertEqual(trial["restarts"], 1)
        self.assertEqual([c["steps_completed"] for c in trial["checkpoints"]], [2, 4, 6])
        with open(os.path.join(self.dir, "metrics.json")) as f:
            steps = [p["step"] for p in json.load(f)["training"]]
        self.assertEqual(steps, list(range(1, 7)))
        self.assertTrue(os.path.exists(os.path.join(self.dir, "exported", "weights.bin")))

    def in_namespace_with_a_full_disk(self, script):
        """Runs `script` (bash, in the test directory) where `full/` is a tmpfs with no space
        left; returns the CompletedProcess. Skips where no tmpfs can be mounted."""
        prologue = ("set -e\nmkdir -p full && mount -t tmpfs -o size=1m tmpfs full\n"
                    "head -c 2000000 /dev/zero > full/filler 2>/dev/null || true\nset +e\n")
        return subprocess.run(["unshare", "-rm", "bash", "-c", prologue + script], cwd=self.dir,
                              env=dict(os.environ, CAIRN=CAIRN, NO_COLOR="1"), capture_output=True,
                              text=True, timeout=120)

    @needs("userns", USERNS, USERNS_WHY)
    def test_the_store_stays_readable_on_a_full_disk(self):
        self.write("train.py", TRAIN)
        self.write("exp.yaml", "entrypoint: /usr/bin/python3 train.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 2}\n")
        self.cairn("run", "exp.yaml", check=0)
        # Readers write their scratch in .cairn/tmp: put it on the full disk. RocksDB's log
        # writer aborted every reader there (an assertion), so the store could not be read.
        proc = self.in_namespace_with_a_full_disk(textwrap.dedent("""\
            mkdir full/tmp && rm -rf .cairn/tmp && ln -s ../full/tmp .cairn/tmp
            for cmd in ls "show 1" "show 1.1" "checkpoints 1" "metrics 1.1"; do
              "$CAIRN" $cmd > /dev/null || echo "cairn $cmd exited $?"
            done
            """))
        self.assertEqual((proc.stdout, proc.returncode), ("", 0), proc.stderr)

    @needs("userns", USERNS, USERNS_WHY)
    def test_a_checkpoint_that_cannot_be_restored_for_space_leaves_the_experiment_resumable(self):
        self.write("train.py", TRAIN)
        self.write("exp.yaml", "entrypoint: /usr/bin/python3 train.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 6}\n"
                   "checkpoint: {period: 2}\nenvironment: {CRASH_AT: '3'}\n")
        env = dict(os.environ, NO_COLOR="1")
        proc = subprocess.Popen([CAIRN, "run", "exp.yaml"], cwd=self.dir, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(proc.kill)
        wait_until(lambda: os.path.exists(os.path.join(self.dir, "ready.marker")), what="the trial at step 3")
        # Paused while it waits at step 3; let go, it exits (status 7, but asked to stop).
        pause = subprocess.Popen([CAIRN, "pause", "1"], cwd=self.dir, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(pause.kill)
        read_line_until(proc.stdout, lambda line: "pausing" in line, timeout=60,
                        what="the coordinator saying it is pausing")
        open(os.path.join(self.dir, "go.marker"), "w").close()
        proc.communicate(timeout=60)
        self.assertEqual(pause.wait(timeout=60), 0)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "PAUSED")
        # Its restore directory on the full disk: the checkpoint cannot be copied out. That
        # is the disk's failure, not the trial's: it used to make the trial and the
        # experiment ERROR, for good.
        proc = self.in_namespace_with_a_full_disk(textwrap.dedent("""\
            mkdir full/work && rm -rf .cairn/work && ln -s ../full/work .cairn/work
            "$CAIRN" resume 1
            echo "resume exited $?"
            """))
        self.assertIn("cairn: error: trial 1.1 cannot start: ", proc.stderr)
        self.assertIn("No space left on device", proc.stderr)
        self.assertIn("resume exited 1", proc.stdout)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "ACTIVE")
        self.assertNotEqual(self.cairn_json("show", "1.1", "--json")["state"], "ERROR")
        # With room again, it goes on.
        os.remove(os.path.join(self.dir, ".cairn", "work"))
        os.mkdir(os.path.join(self.dir, ".cairn", "work"))
        resumed = self.cairn("resume", "1", check=0)
        self.assertRegex(resumed.stdout, r"trial 1\.1 started \(pid \d+\) from checkpoint \w+ \(2 units done\)")
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "COMPLETED")

    def test_checkpoints_with_identical_files_each_keep_their_own_record(self):
        # A trial whose state stops changing (here: always the same bytes) still has one
        # checkpoint per save, each restorable, the bytes stored once.
        self.write("same.py", """
import cairn
ctx = cairn.init()
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        step += 1
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / "weights.bin").write_bytes(b"w" * 50000)
    ctx.report_validation(step, {"val_loss": 1.0})
""")
        self.write("exp.yaml", "entrypoint: /usr/bin/python3 same.py\n"
                   "searcher: {name: grid, metric: val_loss, max_length: 6}\n"
                   "hyperparameters: {x: {type: categorical, vals: [1, 2]}}\n"
                   "checkpoint: {period: 2, keep_trial_latest: 10}\n")
        self.cairn("run", "exp.yaml", check=0)
        for trial in ("1.1", "1.2"):
            ckpts = self.cairn_json("checkpoints", trial, "--json")
            self.assertEqual([c["steps_completed"] for c in ckpts], [2, 4, 6], trial)
            self.assertEqual(len({c["id"] for c in ckpts}), 3, trial)
        first = self.cairn_json("checkpoints", "1.1", "--json")
        second = self.cairn_json("checkpoints", "1.2", "--json")
        # weights.bin is stored once, by whichever trial's first checkpoint was registered
        # first (the two run at once); the SDK's small random-state file may differ per save
        storing = [c for c in first + second if c["new_bytes"] >= 50000]
        self.assertEqual(len(storing), 1, "weights.bin is stored exactly once")
        self.assertIn(storing[0]["id"], (first[0]["id"], second[0]["id"]))
        for c in first + second:
            dest = os.path.join(self.dir, "export-" + c["id"][:12])
            self.cairn("export", c["id"][:12], dest, check=0)
            with open(os.path.join(dest, "weights.bin"), "rb") as f:
                self.assertEqual(f.read(), b"w" * 50000)


# Saves step 2 four times, then fails once: the restart must get the last of them.
SAVE_TWICE = r'''
import os, sys
import cairn
ctx = cairn.init()
if ctx.latest_checkpoint is None:
    for version in range(4):
        with ctx.checkpoint(2) as path:
            (path / "model.txt").write_text("version %d" % version)
    sys.exit(3)
with open(os.path.join(os.environ["CAIRN_WORKDIR"], "restored.txt"), "w") as f:
    f.write((ctx.latest_checkpoint / "model.txt").read_text())
for op in ctx.operations():
    ctx.report_validation(op.length, {"val_loss": 1.0})
'''


class SameStep(CairnTestCase):
    def test_a_step_saved_twice_resumes_from_the_checkpoint_saved_last(self):
        self.write("train.py", SAVE_TWICE)
        self.write("exp.yaml", "entrypoint: /usr/bin/python3 train.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 2}\n"
                   "max_restarts: 1\n"
                   "reproducibility: {seed: 5}\n")
        self.cairn("run", "exp.yaml", check=0)
        with open(os.path.join(self.dir, "restored.txt")) as f:
            self.assertEqual(f.read(), "version 3")

    def test_retention_keeps_the_save_of_the_last_step_the_trial_registered_last(self):
        # keep_trial_latest kept the smallest id among a finished trial's saves of its last
        # step, deleting the one it had registered last (its latest_checkpoint).
        self.write("train.py", SAVE_TWICE)
        self.write("exp.yaml", "entrypoint: /usr/bin/python3 train.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 2}\n"
                   "max_restarts: 1\n"
                   "checkpoint: {keep_trial_latest: 1, keep_trial_best: 0}\n"
                   "reproducibility: {seed: 5}\n")
        self.cairn("run", "exp.yaml", check=0)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED")
        kept = self.cairn_json("checkpoints", "1.1", "--json")
        self.assertEqual([c["id"] for c in kept], [trial["latest_checkpoint"]])
        dest = os.path.join(self.dir, "export-latest")
        self.cairn("export", "1.1@latest", dest, check=0)
        with open(os.path.join(dest, "model.txt")) as f:
            self.assertEqual(f.read(), "version 3")

    def test_trial_at_latest_is_the_save_the_trial_registered_last(self):
        # With every save kept, TRIAL@latest took any of the saves of the last step.
        self.write("train.py", SAVE_TWICE)
        self.write("exp.yaml", "entrypoint: /usr/bin/python3 train.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 2}\n"
                   "max_restarts: 1\n"
                   "checkpoint: {keep_trial_latest: 4, keep_trial_best: 0}\n"
                   "reproducibility: {seed: 5}\n")
        self.cairn("run", "exp.yaml", check=0)
        self.assertEqual(len(self.cairn_json("checkpoints", "1.1", "--json")), 4)
        dest = os.path.join(self.dir, "export-latest")
        self.cairn("export", "1.1@latest", dest, check=0)
        with open(os.path.join(dest, "model.txt")) as f:
            self.assertEqual(f.read(), "version 3")


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
