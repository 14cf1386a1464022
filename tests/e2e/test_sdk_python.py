"""The Python SDK (sdk/python/cairn.py) against a scripted stand-in for cairn
(fake_control.py): handshake, operations, metrics, checkpoints, random-generator
restore, stop requests, a coordinator that dies, standalone mode.

Trials run as real subprocesses of /usr/bin/python3 with PYTHONPATH pointing at the
SDK, exactly as cairn starts them.
"""

import csv
import io
import json
import os
import pathlib
import pickle
import shutil
import signal
import subprocess
import sys
import textwrap
import unittest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from fake_control import FakeControl, socket_directory  # noqa: E402
from cairn_testlib import CairnTestCase  # noqa: E402
import cairn_testlib  # noqa: E402

SOURCE_DIR = pathlib.Path(os.environ.get("CAIRN_SOURCE_DIR", HERE.parent.parent))
SDK_DIR = SOURCE_DIR / "sdk" / "python"
PYTHON = sys.executable

# A trial that follows the pattern of SPEC §4 and writes what it saw to $TRIAL_OUT.
PATTERN_TRIAL = """
import json, os, sys
import cairn

ctx = cairn.init()
seen = {"hparams": ctx.hparams, "seed": ctx.seed, "trial_id": ctx.trial_id,
        "experiment_id": ctx.experiment_id, "steps_completed": ctx.steps_completed,
        "latest_checkpoint": str(ctx.latest_checkpoint) if ctx.latest_checkpoint else None,
        "rank": ctx.rank, "world_size": ctx.world_size, "deterministic": ctx.deterministic,
        "operations": [], "checkpoints": [], "validations": [], "preempted": False}

def finish():
    with open(os.environ["TRIAL_OUT"], "w") as f:
        json.dump(seen, f)

step = ctx.steps_completed
for op in ctx.operations():
    seen["operations"].append(op.length)
    while step < op.length:
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step, {"epoch": step}) as path:
                seen["checkpoints"].append([step, sorted(os.listdir(path))])
                (path / "model.txt").write_text(str(step))
            seen["checkpoint_id"] = ctx.latest_checkpoint_id
            if ctx.should_preempt():
                seen["preempted"] = True
                finish()
                sys.exit(0)
    seen["validations"].append(ctx.report_validation(step, {"val_loss": 1.0 / step}))
finish()
"""


# What the SDK puts in a single-rank orphan checkpoint besides the trial's files.
ORPHAN_FILES = ["cairn_orphan.json", "cairn_orphan_metrics.jsonl",
                "cairn_orphan_validations.jsonl", "cairn_rng_state.pkl"]


def json_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


class TrialTestCase(unittest.TestCase):
    def setUp(self):
        self.tmp = pathlib.Path(socket_directory())
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.out = self.tmp / "out.json"

    def fake(self, **kwargs):
        fake = FakeControl(self.tmp, **kwargs)
        self.addCleanup(fake.close)
        return fake

    def env(self, fake=None, **extra):
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
        env.update(PYTHONPATH=str(SDK_DIR), TRIAL_OUT=str(self.out), PYTHONDONTWRITEBYTECODE="1",
                   CAIRN_TRIAL_ID="7.3", CAIRN_EXPERIMENT_ID="7", CAIRN_SEED="17",
                   CAIRN_HPARAMS='{"lr": 0.1, "arch": {"depth": 2}}')
        if fake is not None:
            env["CAIRN_CONTROL"] = fake.address
        env.update({k: str(v) for k, v in extra.items()})
        return {k: v for k, v in env.items() if v != "None"}

    def write_trial(self, source):
        path = self.tmp / "trial.py"
        path.write_text(textwrap.dedent(source))
        return path

    def run_trial(self, source, env, expect_rc=0):
        result = subprocess.run([PYTHON, str(self.write_trial(source))], env=env, cwd=self.tmp,
                                capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, expect_rc, result.stderr)
        return result

    def seen(self):
        return json.loads(self.out.read_text())


class HandshakeAndOperations(TrialTestCase):
    def test_hello_carries_the_trial_and_context_the_environment(self):
        fake = self.fake(operations=[2])
        env = self.env(fake, CAIRN_STEPS_COMPLETED=0, RANK=0, WORLD_SIZE=1)
        self.run_trial(PATTERN_TRIAL, env)
        hello = fake.of_type("hello")[0]
        self.assertEqual(hello["protocol"], 1)
        self.assertEqual(hello["trial"], "7.3")
        self.assertEqual(hello["experiment"], 7)
        self.assertEqual(hello["rank"], 0)
        self.assertEqual(hello["world_size"], 1)
        self.assertTrue(hello["sdk"].startswith("python/"))
        self.assertIsInstance(hello["pid"], int)
        seen = self.seen()
        self.assertEqual(seen["hparams"], {"lr": 0.1, "arch": {"depth": 2}})
        self.assertEqual(seen["seed"], 17)
        self.assertEqual(seen["trial_id"], "7.3")
        self.assertEqual(seen["experiment_id"], 7)
        self.assertEqual(seen["steps_completed"], 0)
        self.assertIsNone(seen["latest_checkpoint"])
        self.assertFalse(seen["deterministic"])

    def test_operations_follow_the_searcher_and_end_on_done(self):
        fake = self.fake(operations=[2, 5], checkpoint_period=2)
        self.run_trial(PATTERN_TRIAL, self.env(fake))
        seen = self.seen()
        self.assertEqual(seen["operations"], [2, 5])
        # Period 2, plus the decision point at 5.
        self.assertEqual([c[0] for c in seen["checkpoints"]], [2, 4, 5])
        self.assertEqual(seen["validations"], [True, True])
        self.assertEqual(len(fake.of_type("next_operation")), 3)
        self.assertEqual([v["step"] for v in fake.of_type("validation")], [2, 5])
        self.assertEqual([r["step"] for r in fake.training_reports()], [1, 2, 3, 4, 5])

    def test_a_refused_handshake_exits_1_with_one_line(self):
        def refuse(fake, connection, message):
            connection.send({"type": "error", "message": "unknown trial"})
            connection.close()
            return True
        fake = self.fake(on_message=refuse)
        result = self.run_trial(PATTERN_TRIAL, self.env(fake), expect_rc=1)
        self.assertEqual(result.stderr.strip().splitlines(),
                         ["cairn: error: cairn refused the trial: unknown trial"])

    def test_an_unreachable_cairn_exits_1_with_one_line(self):
        env = self.env(CAIRN_CONTROL="unix:" + str(self.tmp / "nobody-listens.sock"))
        result = self.run_trial(PATTERN_TRIAL, env, expect_rc=1)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertTrue(lines[0].startswith("cairn: error: cannot reach cairn at CAIRN_CONTROL="),
                        lines[0])


class Metrics(TrialTestCase):
    def test_ten_thousand_training_reports_arrive_complete_in_batches_and_in_order(self):
        fake = self.fake(operations=[1])
        self.run_trial("""
            import cairn
            ctx = cairn.init()
            for op in ctx.operations():
                for step in range(1, 10001):
                    loss = float("nan") if step == 77 else float("inf") if step == 78 else step / 2
                    ctx.report_training(step, {"loss": loss, "lr": 0.5})
                ctx.report_validation(10000, {"val_loss": 0.25})
            """, self.env(fake))
        reports = fake.training_reports()
        self.assertEqual([r["step"] for r in reports], list(range(1, 10001)))
        self.assertEqual(reports[9]["metrics"], {"loss": 5.0, "lr": 0.5})
        self.assertIsNone(reports[76]["metrics"]["loss"])
        self.assertIsNone(reports[77]["metrics"]["loss"])
        batches = fake.of_type("training")
        self.assertGreaterEqual(len(batches), 10)
        self.assertTrue(all(len(b["reports"]) <= 1000 for b in batches))
        # Every training report precedes the validation that followed it in the trial.
        types = fake.types()
        self.assertEqual(types.index("validation"), len(types) - 2)  # then next_operation

    def test_a_lone_training_report_is_sent_without_waiting_for_more(self):
        fake = self.fake(operations=[1])
        release = self.tmp / "release"
        trial = subprocess.Popen([PYTHON, str(self.write_trial("""
            import os, time, cairn
            ctx = cairn.init()
            for op in ctx.operations():
                ctx.report_training(1, {"loss": 0.5})
                deadline = time.monotonic() + 60
                while not os.path.exists(%r) and time.monotonic() < deadline:
                    time.sleep(0.01)
            """ % str(release)))], env=self.env(fake), cwd=self.tmp)
        try:
            fake.wait_for(fake.training_reports, timeout=20)
            self.assertIsNone(trial.poll(), "the report must arrive while the trial runs")
        finally:
            release.touch()
            self.assertEqual(trial.wait(timeout=60), 0)

    def test_validation_waits_for_the_ack_and_reports_rejection(self):
        fake = self.fake(operations=[1], reject_validation=True)
        result = self.run_trial(PATTERN_TRIAL, self.env(fake))
        self.assertEqual(self.seen()["validations"], [False])
        self.assertIn("rejected: no metric", result.stderr)


# Reports metric values that are not numbers, then numbers of other types, and writes the
# TypeError messages (or "accepted") to $TRIAL_OUT.
METRIC_TYPES_TRIAL = """
import json, os, cairn
ctx = cairn.init()
seen = []
for op in ctx.operations():
    for report, metrics in ((ctx.report_training, {"loss": "0.5"}),
                            (ctx.report_training, {"ok": 1.0, "acc": [1, 2]}),
                            (ctx.report_training, {"flag": True}),
                            (ctx.report_validation, {"val_loss": "0.25"})):
        try:
            report(1, metrics)
            seen.append("accepted")
        except TypeError as e:
            seen.append(str(e))
    numbers = {"f": 0.5, "i": 3, "none": None}
    try:
        import numpy
        numbers.update(np32=numpy.float32(0.25), np64=numpy.int64(7))
    except ImportError:
        pass
    try:
        import torch
        numbers["torch"] = torch.tensor(1.5)
    except ImportError:
        pass
    ctx.report_training(2, numbers)
    ctx.report_validation(2, {"val_loss": 0.125})
    seen.append(sorted(numbers))
with open(os.environ["TRIAL_OUT"], "w") as f:
    json.dump(seen, f)
"""

REFUSALS = ["cairn: metric 'loss' must be a number, got str '0.5'",
            "cairn: metric 'acc' must be a number, got list [1, 2]",
            "cairn: metric 'flag' must be a number, got bool True",
            "cairn: metric 'val_loss' must be a number, got str '0.25'"]


class MetricTypes(TrialTestCase):
    def test_under_cairn_a_value_that_is_not_a_number_raises_and_is_never_sent(self):
        fake = self.fake(operations=[1])
        self.run_trial(METRIC_TYPES_TRIAL, self.env(fake))
        seen = self.seen()
        self.assertEqual(seen[:4], REFUSALS)
        # Only step 2's numbers reached cairn, all as JSON numbers (None as null).
        reports = fake.training_reports()
        self.assertEqual([r["step"] for r in reports], [2])
        values = reports[0]["metrics"]
        self.assertEqual(sorted(values), seen[4])
        self.assertEqual(values["f"], 0.5)
        self.assertIsNone(values["none"])
        for name in set(values) - {"none"}:
            self.assertIsInstance(values[name], (int, float), name)
        self.assertEqual([v["metrics"] for v in fake.of_type("validation")],
                         [{"val_loss": 0.125}])

    def test_standalone_the_same_values_raise_the_same_errors(self):
        result = self.run_trial(METRIC_TYPES_TRIAL, self.env(CAIRN_TRIAL_ID=None))
        seen = self.seen()
        self.assertEqual(seen[:4], REFUSALS)
        self.assertIn("cairn: step 2 training: f=0.5 i=3 none=null", result.stderr)
        self.assertNotIn("step 1", result.stderr)


# A trial that speaks the control protocol itself (docs/protocol.md), as a client in another
# language would, and sends metric values that are not numbers. It writes cairn's answers
# to the two validations to answers.json.
RAW_TRIAL = r"""
import json, os, socket
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(os.environ["CAIRN_CONTROL"].split(":", 1)[1])
inbox = sock.makefile("r")
def send(message):
    sock.sendall((json.dumps(message, separators=(",", ":")) + "\n").encode())
def answer(seq):
    while True:
        message = json.loads(inbox.readline())
        if message.get("re") == seq:
            return message
send({"type": "hello", "protocol": 1, "trial": os.environ["CAIRN_TRIAL_ID"], "rank": 0,
      "world_size": 1})
while json.loads(inbox.readline()).get("type") != "welcome":
    pass
send({"type": "next_operation", "seq": 1})
assert answer(1)["type"] == "operation"
# As the SDKs send it ("type" first) and with "type" last: both ways into the store.
send({"type": "training", "reports": [
    {"step": 1, "metrics": {"loss": "0.5", "acc": [1, 2], "ok": 0.5, "a,b": 1}},
    {"step": 2, "metrics": {"loss": 0.25, "flag": True}}]})
send({"reports": [{"step": 3, "metrics": {"loss": "0.125", "ok": 3}}], "type": "training"})
send({"type": "validation", "seq": 2, "step": 3, "metrics": {"val_loss": "0.25"}})
refused = answer(2)
send({"type": "validation", "seq": 3, "step": 3, "metrics": {"val_loss": 0.25}})
accepted = answer(3)
send({"type": "next_operation", "seq": 4})
answer(4)
with open(os.path.join(os.environ["CAIRN_WORKDIR"], "answers.json"), "w") as f:
    json.dump([refused, accepted], f)
"""


class CoordinatorMetricValues(CairnTestCase):
    def test_cairn_stores_only_numbers_from_a_raw_client_and_says_what_it_dropped(self):
        self.write("raw.py", RAW_TRIAL)
        self.write("exp.yaml", "entrypoint: /usr/bin/python3 raw.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 3}\n")
        self.cairn("run", "exp.yaml", check=0)
        metrics = self.cairn_json("metrics", "1.1", "--json")
        self.assertEqual([p["metrics"] for p in metrics["training"]],
                         [{"ok": 0.5, "a,b": 1}, {"loss": 0.25}, {"ok": 3}])
        # The string was refused, not converted: only the number is the validation.
        self.assertEqual(metrics["validation"], [{"step": 3, "metrics": {"val_loss": 0.25}}])
        logs = self.cairn("logs", "1.1", check=0).stdout
        self.assertIn("training metric values dropped (metric values must be numbers): "
                      "'loss' is a string, 'acc' is a list", logs)
        self.assertIn("'flag' is a boolean", logs)
        self.assertEqual(logs.count("'loss' is a string"), 1, logs)  # once per metric
        refused, accepted = json.loads((pathlib.Path(self.dir) / "answers.json").read_text())
        self.assertEqual(refused["type"], "error")
        self.assertEqual(refused["message"],
                         "validation metric values must be numbers: 'val_loss' is a string")
        self.assertEqual(accepted["type"], "ack")
        # RFC 4180: the name with a comma is one quoted field.
        rows = list(csv.reader(io.StringIO(self.cairn("metrics", "1.1", "--csv",
                                                      check=0).stdout)))
        self.assertEqual(rows[0], ["kind", "step", "a,b", "loss", "ok", "val_loss"])
        self.assertEqual(rows[1], ["training", "1", "1", "", "0.5", ""])
        self.assertTrue(all(len(r) == 6 for r in rows), rows)


class Checkpoints(TrialTestCase):
    def test_commit_sends_the_staging_path_metadata_and_the_rng_state(self):
        fake = self.fake(operations=[1])
        self.run_trial(PATTERN_TRIAL, self.env(fake))
        seen = self.seen()
        self.assertEqual(seen["checkpoints"], [[1, []]], "the directory starts empty")
        self.assertEqual(seen["checkpoint_id"], "fake0")
        begin, = fake.of_type("checkpoint_begin")
        end, = fake.of_type("checkpoint_end")
        self.assertEqual(begin["step"], 1)
        self.assertEqual(end["step"], 1)
        self.assertEqual(end["metadata"], {"epoch": 1})
        staging = pathlib.Path(end["path"])
        self.assertEqual(staging, fake.staging_dirs[0])
        self.assertEqual(sorted(os.listdir(staging)), ["cairn_rng_state.pkl", "model.txt"])
        with open(staging / "cairn_rng_state.pkl", "rb") as f:
            self.assertIn("python", pickle.load(f))

    def test_an_exception_while_saving_aborts_the_checkpoint(self):
        fake = self.fake()
        self.run_trial("""
            import cairn
            ctx = cairn.init()
            try:
                with ctx.checkpoint(3) as path:
                    (path / "half.bin").write_bytes(b"x")
                    raise RuntimeError("disk on fire")
            except RuntimeError:
                pass
            """, self.env(fake))
        abort, = fake.of_type("checkpoint_abort")
        self.assertEqual(abort["path"], str(fake.staging_dirs[0]))
        self.assertEqual(fake.of_type("checkpoint_end"), [])
        self.assertFalse(fake.staging_dirs[0].exists())

    def test_a_failed_commit_warns_and_training_goes_on(self):
        fake = self.fake(operations=[2], fail_checkpoint_end=True)
        result = self.run_trial(PATTERN_TRIAL, self.env(fake))
        self.assertEqual(self.seen()["validations"], [True])
        self.assertIsNone(self.seen()["checkpoint_id"])
        self.assertIn("checkpoint at step 1 failed: disk full", result.stderr)


RNG_TRIAL = """
import json, os, random, sys
import cairn
ctx = cairn.init()
try:
    import numpy
except ImportError:
    numpy = None
try:
    import torch
except ImportError:
    torch = None
random.random(), numpy and numpy.random.rand(), torch and torch.rand(1)  # "model init"
draws = {}
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        step += 1
        draws[step] = [random.random(), numpy and float(numpy.random.rand()),
                       torch and float(torch.rand(1))]
        ctx.report_training(step, {"loss": 0.0})
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                pass
with open(os.environ["TRIAL_OUT"], "w") as f:
    json.dump({"draws": draws, "numpy": numpy is not None, "torch": torch is not None}, f)
"""


class RandomGenerators(TrialTestCase):
    def test_a_resumed_trial_draws_what_an_uninterrupted_one_would(self):
        fake = self.fake(operations=[4])
        self.run_trial(RNG_TRIAL, self.env(fake))
        uninterrupted = self.seen()

        fake.operations = [2]
        self.run_trial(RNG_TRIAL, self.env(fake))
        checkpoint_at_2 = fake.committed["fake5"]  # 4 from the first run, then 1, 2

        fake.operations = [4]
        self.run_trial(RNG_TRIAL, self.env(fake, CAIRN_LATEST_CHECKPOINT=checkpoint_at_2,
                                           CAIRN_STEPS_COMPLETED=2))
        resumed = self.seen()
        self.assertEqual(list(resumed["draws"]), ["3", "4"])
        for step in ("3", "4"):
            self.assertEqual(resumed["draws"][step], uninterrupted["draws"][step])
        if not resumed["numpy"] or not resumed["torch"]:
            print("note: numpy or torch not importable; checked what is", file=sys.stderr)

    def test_numpy_imported_after_init_is_seeded_even_after_a_find_spec_probe(self):
        reference = subprocess.run(
            [PYTHON, "-c", "import numpy; numpy.random.seed(17); print(numpy.random.rand())"],
            capture_output=True, text=True, timeout=120)
        # ./install.sh --test installs python3-numpy: missing is a failure, not a skip.
        self.assertEqual(reference.returncode, 0, "numpy is not importable")
        result = self.run_trial("""
            import importlib.util, cairn
            ctx = cairn.init()
            assert importlib.util.find_spec("numpy") is not None
            import numpy
            print(numpy.random.rand())
            """, self.env(CAIRN_SEED=17))
        self.assertEqual(result.stdout, reference.stdout)

    def test_deterministic_mode_configures_torch(self):
        # ./install.sh --test installs python3-torch: missing is a failure, not a skip.
        self.assertEqual(subprocess.run([PYTHON, "-c", "import torch"], capture_output=True, timeout=120).returncode,
                         0, "torch is not importable")
        fake = self.fake(deterministic=True)
        result = self.run_trial("""
            import torch, cairn
            ctx = cairn.init()
            print(ctx.deterministic, torch.are_deterministic_algorithms_enabled(),
                  torch.get_num_threads(), torch.backends.cudnn.benchmark)
            """, self.env(fake, PYTHONHASHSEED=0))
        self.assertEqual(result.stdout.split(), ["True", "True", "1", "False"])
        self.assertNotIn("warning", result.stderr)


class Stopping(TrialTestCase):
    def test_a_stop_makes_the_trial_checkpoint_and_exit(self):
        def stop_at_validation(fake, connection, message):
            if message["type"] == "validation":
                connection.send({"type": "stop", "reason": "pause"})
        fake = self.fake(operations=[3, 9], checkpoint_period=100, on_message=stop_at_validation)
        self.run_trial("""
            import cairn, json, os
            ctx = cairn.init()
            seen = []
            step = 0
            for op in ctx.operations():
                while step < op.length:
                    step += 1
                    if ctx.checkpoint_due(step):
                        seen.append(["due", step, ctx.should_preempt()])
                ctx.report_validation(step, {"v": 1})
                seen.append(["after validation", ctx.checkpoint_due(step), ctx.should_preempt()])
            json.dump(seen, open(os.environ["TRIAL_OUT"], "w"))
            """, self.env(fake))
        self.assertEqual(self.seen(), [["due", 3, False], ["after validation", True, True]])
        self.assertEqual(len(fake.of_type("next_operation")), 1, "no more work asked for")

    def test_a_closed_channel_becomes_a_stop_and_an_orphan_checkpoint(self):
        def die_at_validation(fake, connection, message):
            if message["type"] == "validation":
                connection.close()
                return True
        fake = self.fake(operations=[5], checkpoint_period=100, on_message=die_at_validation)
        orphans = self.tmp / "orphans"
        self.run_trial("""
            import cairn, json, os
            ctx = cairn.init()
            seen = {}
            step = 0
            for op in ctx.operations():
                while step < op.length:
                    step += 1
                    ctx.report_training(step, {"loss": 1.0})
                    if step == 2:
                        seen["validation delivered"] = ctx.report_validation(2, {"v": 1})
                    if ctx.checkpoint_due(step):
                        with ctx.checkpoint(step, {"why": "orphan"}) as path:
                            (path / "model.txt").write_text("weights")
                        seen["preempt"] = ctx.should_preempt()
                        break
            seen["step"] = step
            json.dump(seen, open(os.environ["TRIAL_OUT"], "w"))
            """, self.env(fake, CAIRN_ORPHAN_DIR=orphans))
        self.assertEqual(self.seen(), {"validation delivered": False, "preempt": True, "step": 2})
        orphan = orphans / "2"
        self.assertEqual(sorted(os.listdir(orphan)), ORPHAN_FILES + ["model.txt"])
        marker = json.loads((orphan / "cairn_orphan.json").read_text())
        self.assertEqual((marker["step"], marker["trial"], marker["metadata"]),
                         (2, "7.3", {"why": "orphan"}))
        self.assertIs(marker["metrics_complete"], True)
        # Both were sent but never acknowledged: cairn may not have stored them.
        self.assertEqual(json_lines(orphan / "cairn_orphan_metrics.jsonl"),
                         [{"step": 1, "metrics": {"loss": 1.0}},
                          {"step": 2, "metrics": {"loss": 1.0}}])
        self.assertEqual(json_lines(orphan / "cairn_orphan_validations.jsonl"),
                         [{"step": 2, "metrics": {"v": 1.0}}])

    def test_without_an_orphan_dir_the_checkpoint_is_skipped_with_a_warning(self):
        def die_on_hello(fake, connection, message):
            if message["type"] == "next_operation":
                connection.close()
                return True
        fake = self.fake(on_message=die_on_hello)
        result = self.run_trial("""
            import cairn
            ctx = cairn.init()
            assert list(ctx.operations()) == []
            assert ctx.checkpoint_due(1) and ctx.should_preempt()
            with ctx.checkpoint(1) as path:
                (path / "model.txt").write_text("weights")
            """, self.env(fake))
        self.assertIn("CAIRN_ORPHAN_DIR is unset", result.stderr)

    def test_cairn_dying_during_a_commit_turns_the_staging_dir_into_an_orphan(self):
        def die_at_commit(fake, connection, message):
            if message["type"] == "checkpoint_end":
                connection.close()
                return True
        fake = self.fake(operations=[3], on_message=die_at_commit)
        orphans = self.tmp / "orphans"
        self.run_trial(PATTERN_TRIAL, self.env(fake, CAIRN_ORPHAN_DIR=orphans))
        self.assertTrue(self.seen()["preempted"])
        self.assertEqual(sorted(os.listdir(orphans / "1")), ORPHAN_FILES + ["model.txt"])
        self.assertFalse(fake.staging_dirs[0].exists())
        self.assertEqual(json_lines(orphans / "1" / "cairn_orphan_metrics.jsonl"),
                         [{"step": 1, "metrics": {"loss": 1.0}}])
        self.assertEqual(json_lines(orphans / "1" / "cairn_orphan_validations.jsonl"), [])

    def test_ctrl_c_asks_the_trial_to_checkpoint_and_exit_cleanly(self):
        fake = self.fake(operations=[10 ** 9], checkpoint_period=0)
        trial = subprocess.Popen([PYTHON, str(self.write_trial(PATTERN_TRIAL.replace(
            'ctx.report_training(step, {"loss": 1.0 / step})',
            'ctx.report_training(step, {"loss": 1.0 / step}); __import__("time").sleep(0.001)')))],
            env=self.env(fake), cwd=self.tmp, stderr=subprocess.PIPE, text=True)
        try:
            fake.wait_for(fake.training_reports, timeout=30)
            trial.send_signal(signal.SIGINT)
            _, stderr = trial.communicate(timeout=60)
        finally:
            if trial.poll() is None:
                trial.kill()
        self.assertEqual(trial.returncode, 0, stderr)
        self.assertTrue(self.seen()["preempted"])
        self.assertEqual(len(fake.of_type("checkpoint_end")), 1)
        self.assertNotIn("Traceback", stderr)

    def test_ranks_stop_at_the_step_cairn_answers_to_sync(self):
        def agree_at_step_3(fake, connection, message):
            if message["type"] == "hello":
                fake._answer(connection, message)
                connection.send({"type": "stop", "reason": "pause"})  # must not act alone
                return True
            if message["type"] == "sync" and message["step"] == 3:
                fake.sync_stop = "pause"
        fake = self.fake(operations=[10], checkpoint_period=100, on_message=agree_at_step_3)
        self.run_trial(PATTERN_TRIAL, self.env(fake, RANK=1, WORLD_SIZE=2))
        seen = self.seen()
        self.assertTrue(seen["preempted"])
        self.assertEqual([c[0] for c in seen["checkpoints"]], [3])
        self.assertEqual([m["step"] for m in fake.of_type("sync")], [1, 2, 3])
        staging = pathlib.Path(fake.of_type("checkpoint_end")[0]["path"])
        self.assertEqual(sorted(os.listdir(staging)), ["cairn_rng_state.rank1.pkl", "model.txt"])

    def test_ranks_fall_back_to_a_bare_stop_when_cairn_does_not_know_sync(self):
        def stop_before_answering(fake, connection, message):
            if message["type"] == "sync":
                connection.send({"type": "stop", "reason": "pause"})
        fake = self.fake(operations=[10], checkpoint_period=100, on_message=stop_before_answering)
        fake.knows_sync = False
        self.run_trial(PATTERN_TRIAL, self.env(fake, RANK=1, WORLD_SIZE=2))
        self.assertEqual([c[0] for c in self.seen()["checkpoints"]], [1])
        self.assertTrue(self.seen()["preempted"])
        self.assertEqual([m["step"] for m in fake.of_type("sync")], [1], "asked once only")


    def test_a_rank_that_does_not_enter_the_checkpoint_says_so_with_its_generators(self):
        chief_only = PATTERN_TRIAL.replace(
            "with ctx.checkpoint(step, {\"epoch\": step}) as path:",
            "for path in ([] if ctx.rank else [0]):")
        fake = self.fake(operations=[4], checkpoint_period=2)
        self.run_trial(chief_only, self.env(fake, RANK=1, WORLD_SIZE=2))
        skips = fake.of_type("checkpoint_skip")
        self.assertEqual([(m["step"], m["call"]) for m in skips],
                         [(2, "should_preempt"), (4, "should_preempt")])
        self.assertEqual(fake.of_type("checkpoint_begin"), [])
        self.assertEqual(skips[0]["rng"]["name"], "cairn_rng_state.rank1.pkl")
        state = pickle.loads(bytes.fromhex(skips[0]["rng"]["hex"]))
        self.assertEqual(state["version"], 1)
        self.assertIn("python", state)

    def test_a_cairn_without_checkpoint_skip_is_asked_once(self):
        chief_only = PATTERN_TRIAL.replace(
            "with ctx.checkpoint(step, {\"epoch\": step}) as path:",
            "for path in ([] if ctx.rank else [0]):")
        fake = self.fake(operations=[4], checkpoint_period=1)
        fake.knows_skip = False
        self.run_trial(chief_only, self.env(fake, RANK=1, WORLD_SIZE=2))
        self.assertEqual(len(fake.of_type("checkpoint_skip")), 1)
        self.assertEqual(self.seen()["validations"], [True])

# Reports every step until it notices cairn is gone (optionally validating at step
# $VALIDATED, which cairn acks, and waiting at step $WAIT_AT until cairn is gone, so that
# it goes at exactly that step), then two more steps, a validation that cannot be
# delivered and a report beyond the step it then checkpoints at. Records what the orphan
# directory held when its marker was renamed into place.
ORPHAN_METRICS_TRIAL = """
import json, os, time
import cairn
if os.environ.get("UNACKED_LIMIT"):
    cairn._UNACKED_REPORTS = int(os.environ["UNACKED_LIMIT"])
validated = int(os.environ.get("VALIDATED", "0"))
wait_at = int(os.environ.get("WAIT_AT", "0"))

before_marker = {}
real_rename = os.rename
def rename(source, target):
    if os.path.basename(target) == "cairn_orphan.json":
        directory = os.path.dirname(target)
        before_marker.update({name: os.path.getsize(os.path.join(directory, name))
                              for name in os.listdir(directory)})
    return real_rename(source, target)
os.rename = rename

def metrics(step):
    if step == 1700:  # a name that looks like the boundary between two reports
        return {"loss": step / 2, 'odd},{"step":1}': 1.0}
    return {"loss": float("nan") if step == 1600 else step / 2}

ctx = cairn.init()
step = 0
for op in ctx.operations():
    while True:
        step += 1
        assert step < 10 ** 8, "cairn never went away"
        ctx.report_training(step, metrics(step))
        if step == validated:
            assert ctx.report_validation(step, {"val": 1.0})
        deadline = time.monotonic() + 60
        while step == wait_at and not ctx.should_preempt():  # the batch leaves after 0.2 s
            assert time.monotonic() < deadline, "cairn never went away"
            time.sleep(0.01)
        if ctx.checkpoint_due(step):
            break
    break
eof_step = step
ctx.report_training(step + 1, metrics(step + 1))
ctx.report_training(step + 2, metrics(step + 2))
delivered = ctx.report_validation(step + 2, {"val": 0.5})
ctx.report_training(step + 3, {"loss": 0.0})
with ctx.checkpoint(step + 2) as path:
    (path / "model.txt").write_text("weights")
with open(os.environ["TRIAL_OUT"], "w") as f:
    json.dump({"eof_step": eof_step, "delivered": delivered, "before_marker": before_marker}, f)
"""


def orphan_metrics(step):
    if step == 1700:
        return {"loss": step / 2, 'odd},{"step":1}': 1.0}
    return {"loss": None if step == 1600 else step / 2}


class OrphanMetrics(TrialTestCase):
    def run_until_cairn_dies(self, die_after, **env):
        fake = self.fake(operations=[10 ** 9], checkpoint_period=0,
                         die_after_training_step=die_after)
        orphans = self.tmp / "orphans"
        self.run_trial(ORPHAN_METRICS_TRIAL, self.env(fake, CAIRN_ORPHAN_DIR=orphans, **env))
        seen = self.seen()
        self.assertGreaterEqual(seen["eof_step"], die_after)
        self.assertFalse(seen["delivered"])
        orphan = orphans / str(seen["eof_step"] + 2)
        return fake, seen, orphan

    def test_an_orphan_keeps_the_reports_since_the_last_ack_and_after_eof(self):
        fake, seen, orphan = self.run_until_cairn_dies(2500, VALIDATED=1500)
        checkpoint_step = seen["eof_step"] + 2
        self.assertEqual(fake.of_type("validation")[0]["step"], 1500)
        self.assertGreaterEqual(fake.training_reports()[-1]["step"], 2500)  # read, never acked
        training = json_lines(orphan / "cairn_orphan_metrics.jsonl")
        self.assertEqual(training, [{"step": s, "metrics": orphan_metrics(s)}
                                    for s in range(1501, checkpoint_step + 1)])
        self.assertEqual(json_lines(orphan / "cairn_orphan_validations.jsonl"),
                         [{"step": checkpoint_step, "metrics": {"val": 0.5}}])
        marker = json.loads((orphan / "cairn_orphan.json").read_text())
        self.assertEqual((marker["step"], marker["metrics_complete"]), (checkpoint_step, True))
        # The marker came last: the metrics were complete on disk when it appeared.
        before_marker = seen["before_marker"]
        self.assertNotIn("cairn_orphan.json", before_marker)
        for name in ("cairn_orphan_metrics.jsonl", "cairn_orphan_validations.jsonl"):
            self.assertEqual(before_marker.get(name), (orphan / name).stat().st_size, name)

    def test_beyond_the_memory_bound_the_oldest_reports_go_and_the_marker_says_so(self):
        _, seen, orphan = self.run_until_cairn_dies(4000, UNACKED_LIMIT=1500)
        checkpoint_step = seen["eof_step"] + 2
        steps = [r["step"] for r in json_lines(orphan / "cairn_orphan_metrics.jsonl")]
        self.assertEqual(steps, list(range(steps[0], checkpoint_step + 1)))
        self.assertGreater(steps[0], 1)
        self.assertLessEqual(len(steps), 1500 + 1000 + 2)  # the bound, one batch, after EOF
        marker = json.loads((orphan / "cairn_orphan.json").read_text())
        self.assertIs(marker["metrics_complete"], False)

    def test_an_ack_after_dropping_reports_makes_the_record_complete_again(self):
        # cairn goes at step 4000 exactly: no more than the bound is kept after the ack.
        _, seen, orphan = self.run_until_cairn_dies(4000, UNACKED_LIMIT=1500, VALIDATED=3000,
                                                    WAIT_AT=4000)
        self.assertEqual(seen["eof_step"], 4000)
        steps = [r["step"] for r in json_lines(orphan / "cairn_orphan_metrics.jsonl")]
        self.assertEqual(steps, list(range(3001, 4003)))
        marker = json.loads((orphan / "cairn_orphan.json").read_text())
        self.assertIs(marker["metrics_complete"], True)

    def test_ranks_other_than_0_keep_no_metrics(self):
        def die_at_next_operation(fake, connection, message):
            if message["type"] == "next_operation":
                connection.close()
                return True
        fake = self.fake(on_message=die_at_next_operation)
        orphans = self.tmp / "orphans"
        self.run_trial("""
            import cairn
            ctx = cairn.init()
            ctx.report_training(1, {"loss": 1.0})
            assert list(ctx.operations()) == []
            with ctx.checkpoint(1) as path:
                (path / "model.txt").write_text("weights")
            """, self.env(fake, CAIRN_ORPHAN_DIR=orphans, RANK=1, WORLD_SIZE=2))
        self.assertEqual(sorted(os.listdir(orphans / "1")),
                         ["cairn_orphan.rank1.json", "cairn_rng_state.rank1.pkl", "model.txt"])
        marker = json.loads((orphans / "1" / "cairn_orphan.rank1.json").read_text())
        self.assertNotIn("metrics_complete", marker)

    def test_a_rank_that_does_not_enter_an_orphan_checkpoint_leaves_its_part(self):
        def die_at_next_operation(fake, connection, message):
            if message["type"] == "next_operation":
                connection.close()
                return True
        fake = self.fake(on_message=die_at_next_operation)
        orphans = self.tmp / "orphans"
        self.run_trial("""
            import cairn
            ctx = cairn.init()
            assert list(ctx.operations()) == []
            assert ctx.checkpoint_due(3)  # cairn is gone: due, and rank 1 leaves it to rank 0
            assert ctx.should_preempt()
            """, self.env(fake, CAIRN_ORPHAN_DIR=orphans, RANK=1, WORLD_SIZE=2))
        self.assertEqual(sorted(os.listdir(orphans / "3")),
                         ["cairn_orphan.rank1.json", "cairn_rng_state.rank1.pkl"])
        marker = json.loads((orphans / "3" / "cairn_orphan.rank1.json").read_text())
        self.assertEqual((marker["step"], marker["rank"], marker["entered"]), (3, 1, False))


class Standalone(TrialTestCase):
    def test_without_cairn_the_trial_runs_one_operation_and_keeps_checkpoints_locally(self):
        result = self.run_trial(PATTERN_TRIAL, self.env(CAIRN_MAX_LENGTH=3, CAIRN_TRIAL_ID=None))
        seen = self.seen()
        self.assertEqual(seen["operations"], [3])
        self.assertEqual(seen["hparams"], {"lr": 0.1, "arch": {"depth": 2}})
        self.assertEqual(seen["seed"], 17)
        self.assertIsNone(seen["trial_id"])
        self.assertEqual(seen["validations"], [True])
        checkpoints = self.tmp / "checkpoints"
        # By default only the latest is kept; .gitignore keeps them out of git and out of
        # the next `cairn run`'s code snapshot.
        self.assertEqual(sorted(os.listdir(checkpoints)), [".gitignore", "3"])
        self.assertIn("*", (checkpoints / ".gitignore").read_text().splitlines())
        self.assertEqual(sorted(os.listdir(checkpoints / "3")),
                         ["cairn_rng_state.pkl", "model.txt"])
        self.assertIn("cairn: step 3 training: loss=0.333333", result.stderr)
        self.assertIn("cairn: step 3 validation: val_loss=0.333333", result.stderr)

    def test_retention_keeps_the_latest_this_run_committed_and_nothing_else_is_touched(self):
        checkpoints = self.tmp / "checkpoints"
        (checkpoints / "99").mkdir(parents=True)  # an earlier run's: not this run's to delete
        (checkpoints / ".gitignore").write_text("# mine\n")
        self.run_trial(PATTERN_TRIAL, self.env(CAIRN_MAX_LENGTH=5, CAIRN_KEEP_LATEST=2))
        self.assertEqual(sorted(os.listdir(checkpoints)), [".gitignore", "4", "5", "99"])
        self.assertEqual((checkpoints / ".gitignore").read_text(), "# mine\n")
        self.run_trial(PATTERN_TRIAL, self.env(CAIRN_MAX_LENGTH=3, CAIRN_KEEP_LATEST=0,
                                               CAIRN_CHECKPOINT_PERIOD=2))
        self.assertEqual(sorted(os.listdir(checkpoints)), [".gitignore", "2", "3", "4", "5", "99"])

    def test_checkpoints_of_one_step_open_at_once_keep_their_own_files(self):
        self.run_trial("""
            import cairn
            ctx = cairn.init()
            with ctx.checkpoint(2) as first:
                (first / "a.txt").write_text("a")
                with ctx.checkpoint(2) as second:  # used to empty the first one's directory
                    (second / "b.txt").write_text("b")
                    print(sorted(p.name for p in first.iterdir()))
                print(sorted(p.name for p in (first.parent / "2").iterdir()))
            """, self.env(CAIRN_KEEP_LATEST=0))
        checkpoints = self.tmp / "checkpoints"
        # The later commit of the step replaces the earlier: the outer one, with its files.
        self.assertEqual(sorted(os.listdir(checkpoints)), [".gitignore", "2"])
        self.assertEqual(sorted(os.listdir(checkpoints / "2")), ["a.txt", "cairn_rng_state.pkl"])

    def test_defaults_without_any_cairn_variable(self):
        env = self.env(CAIRN_TRIAL_ID=None, CAIRN_EXPERIMENT_ID=None, CAIRN_SEED=None,
                       CAIRN_HPARAMS=None)
        self.run_trial(PATTERN_TRIAL, env)
        seen = self.seen()
        self.assertEqual((seen["operations"], seen["hparams"], seen["seed"]), ([1], {}, 0))



class Threads(TrialTestCase):
    def test_a_validation_from_a_thread_while_the_main_thread_checkpoints_does_not_hang(self):
        # Both threads wait for answers on one socket: one of them used to read both
        # answers while the other blocked in recv() for good.
        fake = self.fake()
        try:
            self.run_trial_within(20, """
                import threading
                import cairn
                ctx = cairn.init()
                def evaluate():
                    for step in range(200):
                        assert ctx.report_validation(step, {"val_loss": 1.0})
                        ctx.report_training(step, {"loss": 1.0})
                thread = threading.Thread(target=evaluate)
                thread.start()
                for step in range(200):
                    with ctx.checkpoint(step) as path:
                        (path / "model.txt").write_text(str(step))
                    assert ctx.latest_checkpoint_id is not None
                    ctx.should_preempt()
                thread.join()
                """, self.env(fake))
        except subprocess.TimeoutExpired:
            self.fail("the trial hung")
        self.assertEqual(len(fake.of_type("validation")), 200)
        self.assertEqual(len(fake.of_type("checkpoint_end")), 200)
        seqs = [m["seq"] for m in fake.of_type("validation") + fake.of_type("checkpoint_begin") +
                fake.of_type("checkpoint_end")]
        self.assertEqual(sorted(seqs), list(range(1, 601)))

    def run_trial_within(self, seconds, source, env):
        result = subprocess.run([PYTHON, str(self.write_trial(source))], env=env, cwd=self.tmp,
                                capture_output=True, text=True, timeout=seconds)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result


class ChildProcesses(TrialTestCase):
    def test_a_forked_child_sends_nothing_even_at_exit_and_its_calls_raise(self):
        fake = self.fake(operations=[2])
        self.run_trial("""
            import os, sys
            import cairn
            ctx = cairn.init()
            ctx.report_training(1, {"loss": 1.0})  # buffered when the child is forked
            pid = os.fork()
            if pid == 0:
                try:
                    ctx.report_training(9, {"loss": 9.0})
                except RuntimeError as e:
                    sys.stderr.write("child: %s\\n" % e)
                sys.exit(0)  # a normal exit: atexit runs in the child
            os.waitpid(pid, 0)
            ctx.report_training(2, {"loss": 2.0})
            for op in ctx.operations():
                ctx.report_validation(2, {"val_loss": 1.0})
            """, self.env(fake))
        self.assertEqual([r["step"] for r in fake.training_reports()], [1, 2])
        self.assertEqual(len(fake.connections), 1)

    def test_a_forked_childs_call_names_the_misuse_in_one_line(self):
        result = self.run_trial("""
            import os, sys
            import cairn
            ctx = cairn.init()
            pid = os.fork()
            if pid == 0:
                try:
                    ctx.checkpoint_due(1)
                except RuntimeError as e:
                    sys.stderr.write("child: %s\\n" % e)
                    os._exit(0)
                os._exit(1)
            _, status = os.waitpid(pid, 0)
            sys.exit(os.waitstatus_to_exitcode(status))
            """, self.env())
        self.assertRegex(result.stderr, r"child: cairn: checkpoint_due\(\) called in process "
                         r"\d+, a child of the trial's process \d+: only the process that "
                         r"called cairn.init\(\) talks to cairn\n")

    def test_a_spawned_child_that_calls_init_does_not_connect_as_the_trial(self):
        # cairn takes a second hello as the same rank for the trial's connection: the
        # trial's own answers then went to the child, and the trial waited forever.
        fake = self.fake(operations=[1])
        self.run_trial("""
            import multiprocessing
            import cairn
            ctx = cairn.init()  # at the top: spawn workers import this module again
            def double(x):
                return (cairn.init().hparams["lr"], 2 * x)
            if __name__ == "__main__":
                with multiprocessing.get_context("spawn").Pool(2) as pool:
                    assert pool.map(double, [1, 2]) == [(0.1, 2), (0.1, 4)]
                for op in ctx.operations():
                    ctx.report_validation(1, {"val_loss": 1.0})
            """, self.env(fake))
        self.assertEqual(len(fake.of_type("hello")), 1)
        self.assertEqual(len(fake.of_type("validation")), 1)

    def test_a_workers_terminate_stops_it_at_once(self):
        # Pool.terminate() and Process.terminate() send SIGTERM; a forked worker that had
        # inherited the trial's stop handler took it for a stop request and lived on.
        result = self.run_trial("""
            import multiprocessing, sys, time
            import cairn
            ctx = cairn.init()
            worker = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,))
            worker.start()
            time.sleep(0.2)
            worker.terminate()
            worker.join(10)
            print(worker.exitcode)
            """, self.env())
        self.assertEqual(result.stdout.strip(), str(-signal.SIGTERM))

if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
