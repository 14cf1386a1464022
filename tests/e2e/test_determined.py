"""End to end: training scripts written against Determined's Core API (`import determined as
det`) run under the real `cairn run` with nothing installed: cairn writes its `determined`
package beside the SDK (docs/determined.md). Both of Determined's search models (the
pre-0.38 searcher.operations() and 0.38's "train to your own length" under `single` with no
max_length), checkpoints by storage id, `cairn pause`/resume, kill -9 of the coordinator
and resume, a restart within max_restarts, two ranks with allgather/gather/broadcast and a
chief-only checkpoint, the launchers, and det.get_cluster_info() against `cairn show --json`.
"""
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, PYTHON, CairnTestCase, wait_until  # noqa: E402
import cairn_testlib  # noqa: E402

# Shared by the scripts below: what a trial saw goes to $CAIRN_WORKDIR/seen.jsonl, one JSON
# object per line, so a test can compare it with what cairn stored.
PRELUDE = r'''
import json, os, signal, sys, time
import determined as det

def note(**fields):
    with open(os.path.join(os.environ["CAIRN_WORKDIR"], "seen.jsonl"), "a") as f:
        f.write(json.dumps(fields) + "\n")

def info_fields(info):
    return {"trial_id": info.trial.trial_id, "experiment_id": info.trial.experiment_id,
            "hparams": info.trial.hparams, "trial_seed": info.trial.trial_seed,
            "latest_checkpoint": info.latest_checkpoint, "slot_ids": info.slot_ids,
            "container_addrs": info.container_addrs, "container_rank": info.container_rank,
            "task_type": info.task_type}

def slow():
    return os.path.exists(os.path.join(os.environ["CAIRN_WORKDIR"], "slow"))
'''

# Determined's pre-0.38 model: the searcher hands out operations, the script reports the
# searcher metric with op.report_completed(). Checkpoints every 4 steps by storage id.
OPERATIONS = PRELUDE + r'''
info = det.get_cluster_info()
assert isinstance(info.trial.trial_id, int) and isinstance(info.trial.experiment_id, int)
with det.core.init() as core_context:
    steps = 0
    if info.latest_checkpoint is not None:
        with core_context.checkpoint.restore_path(info.latest_checkpoint) as path:
            state = json.loads((path / "state.json").read_text())
        assert state["trial_id"] == info.trial.trial_id, state
        steps = state["steps"]
    note(event="start", steps=steps, **info_fields(info))
    for op in core_context.searcher.operations():
        while steps < op.length:
            steps += 1
            time.sleep(0.3 if slow() else 0.01)
            with open(os.path.join(os.environ["CAIRN_WORKDIR"], "units.txt"), "a") as f:
                f.write("%d %d\n" % (info.trial.trial_id, steps))
            core_context.train.report_training_metrics(steps, {"loss": 1.0 / steps})
            op.report_progress(steps)
            crashed = os.path.join(os.environ["CAIRN_WORKDIR"], "crashed")
            if steps == info.trial.hparams.get("crash_at") and not os.path.exists(crashed):
                open(crashed, "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
            if steps % 4 == 0:
                with core_context.checkpoint.store_path({"steps_completed": steps}) as (path, uuid):
                    (path / "state.json").write_text(
                        json.dumps({"steps": steps, "trial_id": info.trial.trial_id}))
                note(event="stored", uuid=uuid, steps=steps, trial_id=info.trial.trial_id)
                if core_context.preempt.should_preempt():
                    note(event="preempted", steps=steps)
                    sys.exit(0)
        lr = info.trial.hparams.get("lr", 0.1)
        core_context.train.report_validation_metrics(steps, {"val_loss": lr / steps,
                                                             "val_acc": 1 - lr / steps})
        op.report_completed(lr / steps)
    note(event="done", steps=steps, trial_id=info.trial.trial_id,
         best=core_context.train.get_experiment_best_validation())
'''

# Determined 0.38's model: no operations; the script trains to its own length, reports
# validations and exits 0 when done. Under `single` with no max_length that completes it.
OWN_LENGTH = PRELUDE + r'''
TOTAL = 24
info = det.get_cluster_info()
with det.core.init() as core_context:
    steps = 0
    if info.latest_checkpoint is not None:
        target = os.path.join(os.environ["CAIRN_WORKDIR"], "downloaded")
        core_context.checkpoint.download(info.latest_checkpoint, target)
        with open(os.path.join(target, "state.json")) as f:
            steps = json.load(f)["steps"]
        meta = core_context.checkpoint.get_metadata(info.latest_checkpoint)
        assert meta["steps_completed"] == steps, meta
    note(event="start", steps=steps, **info_fields(info))
    while steps < TOTAL:
        steps += 1
        time.sleep(0.3 if slow() else 0.01)
        with open(os.path.join(os.environ["CAIRN_WORKDIR"], "units.txt"), "a") as f:
            f.write("%d %d\n" % (info.trial.trial_id, steps))
        core_context.train.report_training_metrics(steps, {"loss": 1.0 / steps})
        core_context.train.report_progress(steps / TOTAL)
        if steps % 4 == 0:
            core_context.train.report_validation_metrics(steps, {"val_loss": 1.0 / steps})
            local = os.path.join(os.environ["CAIRN_WORKDIR"], "local_ckpt")
            os.makedirs(local, exist_ok=True)
            with open(os.path.join(local, "state.json"), "w") as f:
                json.dump({"steps": steps}, f)
            uuid = core_context.checkpoint.upload(local, {"steps_completed": steps})
            note(event="stored", uuid=uuid, steps=steps)
            if core_context.preempt.should_preempt():
                note(event="preempted", steps=steps)
                sys.exit(0)
    note(event="done", steps=steps)
'''

# Determined 0.38 under an adaptive search: the script trains to its own length and reports
# the time metric ("batches") in its validations; cairn stops it at a rung and a promotion
# resumes it from its checkpoint.
TIME_METRIC = PRELUDE + r'''
TOTAL = 16
info = det.get_cluster_info()
lr = info.trial.hparams["lr"]
with det.core.init() as core_context:
    steps = 0
    if info.latest_checkpoint is not None:
        with core_context.checkpoint.restore_path(info.latest_checkpoint) as path:
            steps = json.loads((path / "state.json").read_text())["steps"]
    note(event="start", steps=steps, **info_fields(info))
    while steps < TOTAL:
        steps += 1
        with open(os.path.join(os.environ["CAIRN_WORKDIR"], "units.txt"), "a") as f:
            f.write("%d %d\n" % (info.trial.trial_id, steps))
        core_context.train.report_training_metrics(steps, {"loss": lr / steps})
        if steps % 2 == 0:
            core_context.train.report_validation_metrics(
                steps, {"val_loss": lr + 1.0 / steps, "batches": steps})
            with core_context.checkpoint.store_path({"steps_completed": steps}) as (path, uuid):
                (path / "state.json").write_text(json.dumps({"steps": steps}))
            note(event="stored", uuid=uuid, steps=steps, trial_id=info.trial.trial_id)
            if core_context.preempt.should_preempt():
                note(event="preempted", steps=steps, trial_id=info.trial.trial_id)
                sys.exit(0)
    note(event="done", steps=steps, trial_id=info.trial.trial_id)
'''

# The same search as TIME_METRIC written for cairn's own SDK (operations), to compare with.
TIME_METRIC_AS_OPERATIONS = r'''
import cairn
ctx = cairn.init()
lr = ctx.hparams["lr"]
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        step += 1
        ctx.report_training(step, {"loss": lr / step})
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / "step").write_text(str(step))
            if ctx.should_preempt():
                raise SystemExit(0)
    ctx.report_validation(step, {"val_loss": lr + 1.0 / step})
'''

# Two ranks: collectives, a chief-only checkpoint, should_preempt in step on every rank.
TWO_RANKS = PRELUDE + r'''
distributed = det.core.DistributedContext.from_torch_distributed()
info = det.get_cluster_info()
with det.core.init(distributed=distributed) as core_context:
    rank = core_context.distributed.rank
    steps = 0
    if info.latest_checkpoint is not None:
        with core_context.checkpoint.restore_path(info.latest_checkpoint) as path:
            steps = json.loads((path / "state.json").read_text())["steps"]
    everyone = core_context.distributed.allgather({"rank": rank, "pid": os.getpid(),
                                                   "slot_ids": info.slot_ids, "steps": steps})
    gathered = core_context.distributed.gather(rank * 10)
    # Larger than one value of cairn's rendezvous table (64 KiB): sent in pieces.
    big = core_context.distributed.broadcast(list(range(30000)) if rank == 0 else None)
    note(event="start", rank=rank, size=core_context.distributed.size, everyone=everyone,
         gathered=gathered, big_ok=big == list(range(30000)), **info_fields(info))
    for op in core_context.searcher.operations():
        while steps < op.length:
            steps += 1
            time.sleep(0.3 if slow() else 0.02)
            losses = core_context.distributed.allgather(1.0 / (steps + rank))
            if rank == 0:
                core_context.train.report_training_metrics(steps, {"loss": sum(losses)})
                if steps % 4 == 0:
                    with core_context.checkpoint.store_path({"steps_completed": steps}) as (p, u):
                        (p / "state.json").write_text(json.dumps({"steps": steps}))
                    note(event="stored", uuid=u, steps=steps)
            if core_context.preempt.should_preempt():
                note(event="preempted", rank=rank, steps=steps)
                sys.exit(0)
        if rank == 0:
            core_context.train.report_validation_metrics(steps, {"val_loss": 1.0 / steps})
            op.report_completed(1.0 / steps)
    note(event="done", rank=rank, steps=steps)
'''


class DeterminedTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.env = self.cairn_env()

    def start(self, *args):
        proc = subprocess.Popen([CAIRN, *args], cwd=self.dir, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        return proc

    def seen(self, **match):
        path = os.path.join(self.dir, "seen.jsonl")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        return [s for s in lines if all(s.get(k) == v for k, v in match.items())]

    def units(self, trial_number):
        with open(os.path.join(self.dir, "units.txt")) as f:
            return [int(s) for t, s in (line.split() for line in f) if int(t) == trial_number]

    def training_steps(self, trial):
        return [p["step"] for p in self.cairn_json("metrics", trial, "--json")["training"]]

    def run_to_end(self, config, check=0):
        proc = self.cairn("run", config, timeout=300)
        self.assertEqual(proc.returncode, check, proc.stdout + proc.stderr)
        return proc

    def stop_and_resume(self, experiment="1"):
        """Pauses the running experiment once a checkpoint is stored and resumes it."""
        pause = self.cairn("pause", experiment, timeout=120)
        self.assertEqual(pause.returncode, 0, pause.stdout + pause.stderr)
        self.assertEqual(self.cairn_json("show", experiment, "--json")["state"], "PAUSED")
        os.remove(os.path.join(self.dir, "slow"))
        resume = self.cairn("resume", experiment, timeout=300)
        self.assertEqual(resume.returncode, 0, resume.stdout + resume.stderr)

    def test_cluster_info_matches_show_json_across_a_search_and_experiments(self):
        self.write("train.py", OPERATIONS)
        self.write("search.yaml", """entrypoint: /usr/bin/python3 train.py
hyperparameters: {lr: {type: double, minval: 0.01, maxval: 0.5}}
searcher: {name: random, metric: val_loss, max_length: 6, max_trials: 2,
           max_concurrent_trials: 1}
""")
        self.run_to_end("search.yaml")
        self.run_to_end("search.yaml")
        numbers = []
        for experiment in (1, 2):
            exp = self.cairn_json("show", str(experiment), "--json")
            self.assertEqual(exp["state"], "COMPLETED")
            for trial in exp["trials"]:
                shown = self.cairn_json("show", trial["id"], "--json")
                starts = self.seen(event="start", trial_id=shown["number"])
                self.assertEqual(len(starts), 1, (shown, self.seen()))
                info = starts[0]
                self.assertEqual(info["experiment_id"], experiment)
                self.assertEqual(info["hparams"], shown["hparams"])
                self.assertEqual(info["trial_seed"], shown["seed"] % (1 << 31))
                self.assertEqual(info["slot_ids"], shown["slots"])
                self.assertEqual(info["container_addrs"], ["127.0.0.1"])
                self.assertEqual(info["container_rank"], 0)
                self.assertEqual(info["task_type"], "TRIAL")
                self.assertIsNone(info["latest_checkpoint"])
                self.assertEqual(shown["state"], "COMPLETED")
                self.assertEqual(shown["steps_completed"], 6)
                # report_completed merged the searcher metric into the validation at op.length.
                lr = shown["hparams"]["lr"]
                self.assertAlmostEqual(shown["best_validation"]["val_loss"], lr / 6)
                self.assertAlmostEqual(shown["best_validation"]["val_acc"], 1 - lr / 6)
                # A checkpoint the script stored is in cairn's store, its storage id kept.
                stored = self.seen(event="stored", trial_id=shown["number"])
                self.assertEqual([s["steps"] for s in stored], [4])
                self.assertEqual([c["steps_completed"] for c in shown["checkpoints"]][:1], [4])
                self.assertEqual(shown["checkpoints"][0]["metadata"],
                                 {"steps_completed": 4, "determined_storage_id": stored[0]["uuid"]})
                numbers.append(shown["number"])
            # get_experiment_best_validation(): the best of this experiment's trials so far
            # (one trial at a time: the first sees its own, the second the better of both).
            finals = []
            for trial in exp["trials"]:
                shown = self.cairn_json("show", trial["id"], "--json")
                finals.append(shown["best_validation"]["val_loss"])
                done = self.seen(event="done", trial_id=shown["number"])
                self.assertEqual(len(done), 1)
                self.assertAlmostEqual(done[0]["best"], min(finals))
        # Store-wide integers: one per trial, across experiments.
        self.assertEqual(sorted(numbers), [1, 2, 3, 4])

    def test_own_length_script_pauses_resumes_by_storage_id_and_completes(self):
        self.write("train.py", OWN_LENGTH)
        self.write("exp.yaml", """entrypoint: /usr/bin/python3 train.py
searcher: {name: single, metric: val_loss}
""")
        self.write("slow", "")
        run = self.start("run", "exp.yaml")
        wait_until(lambda: self.seen(event="stored"), timeout=120, what="a stored checkpoint")
        self.stop_and_resume()
        self.assertEqual(run.wait(timeout=120), 0)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0)
        preempted = self.seen(event="preempted")
        self.assertEqual(len(preempted), 1, self.seen())
        starts = self.seen(event="start")
        self.assertEqual(len(starts), 2)
        # The resumed trial was handed the storage id the script got when it stored its
        # latest checkpoint, and resumed at that step: nothing trained twice.
        last = [s for s in self.seen(event="stored") if s["steps"] == preempted[0]["steps"]][-1]
        self.assertEqual(starts[1]["latest_checkpoint"], last["uuid"])
        self.assertEqual(starts[1]["steps"], preempted[0]["steps"])
        self.assertEqual(self.units(trial["number"]), list(range(1, 25)))
        self.assertEqual(self.training_steps("1.1"), list(range(1, 25)))
        self.assertTrue(self.seen(event="done"))

    def test_time_metric_search_stops_at_rungs_and_promotes_without_retraining(self):
        self.write("train.py", TIME_METRIC)
        search = """hyperparameters: {lr: {type: double, minval: 0.0, maxval: 1.0}}
searcher: {name: asha, metric: val_loss, %s: 16, max_trials: 4, divisor: 2, max_rungs: 2,
           max_concurrent_trials: 1}
reproducibility: {seed: 3}
"""
        self.write("exp.yaml", "entrypoint: /usr/bin/python3 train.py\n" +
                   search % "time_metric: batches, max_time")
        self.run_to_end("exp.yaml")
        # The same search over cairn's operations decides the same: which trials stop where.
        self.write("ops.py", TIME_METRIC_AS_OPERATIONS)
        self.write("ops.yaml", "entrypoint: /usr/bin/python3 ops.py\n" + search % "max_length")
        self.run_to_end("ops.yaml")

        def outcomes(experiment):
            return [(t["state"], t["steps_completed"], t["hparams"],
                     round(t["best_validation"]["val_loss"], 9))
                    for t in self.cairn_json("show", experiment, "--json")["trials"]]
        self.assertEqual(outcomes("1"), outcomes("2"))
        self.assertIn("STOPPED", [o[0] for o in outcomes("1")])
        exp = self.cairn_json("show", "1", "--json")
        self.assertEqual(exp["state"], "COMPLETED")
        promoted = 0
        for trial in exp["trials"]:
            shown = self.cairn_json("show", trial["id"], "--json")
            number = shown["number"]
            units = self.units(number)
            # Never retrained: each batch once, in order, however often it stopped.
            self.assertEqual(units, list(range(1, len(units) + 1)), (trial["id"], units))
            self.assertEqual(shown["restarts"], 0)
            starts = self.seen(event="start", trial_id=number)
            stops = self.seen(event="preempted", trial_id=number)
            stored = {s["steps"]: s["uuid"] for s in self.seen(event="stored", trial_id=number)}
            # Every start after the first resumed where the trial stopped, by storage id.
            for before, after in zip(stops, starts[1:]):
                self.assertEqual(after["steps"], before["steps"])
                self.assertEqual(after["latest_checkpoint"], stored[before["steps"]])
            promoted += len(starts) - 1
            if units[-1] == 16:
                # At max_time the searcher is done with it: asked to stop there too.
                self.assertEqual(shown["state"], "COMPLETED", shown)
            else:
                self.assertEqual(shown["state"], "STOPPED", shown)
                self.assertEqual(units[-1], 8, "stopped at the rung")
        self.assertGreater(promoted, 0, "some trial was promoted and resumed")

    def test_kill_9_of_the_coordinator_then_resume(self):
        self.write("train.py", OPERATIONS)
        self.write("exp.yaml", """entrypoint: /usr/bin/python3 train.py
searcher: {name: single, metric: val_loss, max_length: 20}
""")
        self.write("slow", "")
        run = self.start("run", "exp.yaml")
        wait_until(lambda: self.seen(event="stored"), timeout=120, what="a stored checkpoint")
        pid = self.cairn_json("show", "1.1", "--json")["pid"]
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=60)
        # The orphaned trial sees cairn gone: should_preempt() becomes true at its next
        # checkpoint and it exits, keeping that checkpoint as an orphan for cairn to adopt.
        wait_until(lambda: not cairn_testlib_alive(pid), timeout=60, what="the orphan to exit")
        os.remove(os.path.join(self.dir, "slow"))
        resume = self.cairn("resume", "1", timeout=300)
        self.assertEqual(resume.returncode, 0, resume.stdout + resume.stderr)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, "an interrupted coordinator is not a failure")
        starts = self.seen(event="start")
        self.assertEqual(len(starts), 2)
        self.assertEqual(starts[1]["steps"], self.seen(event="preempted")[0]["steps"])
        self.assertEqual(starts[0]["trial_id"], starts[1]["trial_id"], "the number stays")
        self.assertEqual(self.units(trial["number"]), list(range(1, 21)))
        self.assertEqual(self.training_steps("1.1"), list(range(1, 21)))

    def test_a_killed_trial_is_restarted_within_max_restarts(self):
        self.write("train.py", OPERATIONS)
        self.write("exp.yaml", """entrypoint: /usr/bin/python3 train.py
hyperparameters: {crash_at: 10}
searcher: {name: single, metric: val_loss, max_length: 16}
max_restarts: 1
""")
        self.run_to_end("exp.yaml")
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 1)
        starts = self.seen(event="start")
        self.assertEqual([s["steps"] for s in starts], [0, 8])
        self.assertEqual(starts[1]["latest_checkpoint"],
                         [s for s in self.seen(event="stored") if s["steps"] == 8][0]["uuid"])
        # Steps 9 and 10 ran twice (after the checkpoint at 8), nothing else.
        self.assertEqual(self.units(trial["number"]), list(range(1, 11)) + list(range(9, 17)))

    def test_two_ranks_allgather_chief_only_checkpoints_pause_and_resume(self):
        self.write("train.py", TWO_RANKS)
        self.write("exp.yaml", """entrypoint: /usr/bin/python3 -m determined.launch.torch_distributed python3 train.py
searcher: {name: single, metric: val_loss, max_length: 16}
resources: {slots_per_trial: 2}
""")
        self.write("slow", "")
        run = self.start("run", "exp.yaml")
        wait_until(lambda: self.seen(event="stored"), timeout=120, what="a chief's checkpoint")
        self.stop_and_resume()
        self.assertEqual(run.wait(timeout=120), 0)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0)
        starts = self.seen(event="start")
        self.assertEqual(len(starts), 4, starts)  # two ranks, two attempts
        for start in starts:
            self.assertEqual(start["size"], 2)
            self.assertEqual([e["rank"] for e in start["everyone"]], [0, 1])
            self.assertEqual(start["gathered"], [0, 10] if start["rank"] == 0 else None)
            self.assertTrue(start["big_ok"])
            self.assertEqual(start["container_rank"], start["rank"])
            self.assertEqual(start["container_addrs"], ["127.0.0.1", "127.0.0.1"])
            self.assertEqual(start["slot_ids"], [trial["slots"][start["rank"]]])
            self.assertEqual(start["trial_id"], trial["number"])
        # Both ranks stopped at the same step (the decision is agreed) and resumed there.
        preempted = self.seen(event="preempted")
        self.assertEqual(sorted(p["rank"] for p in preempted), [0, 1])
        self.assertEqual(len({p["steps"] for p in preempted}), 1, preempted)
        resumed = [s for s in starts if s["latest_checkpoint"] is not None]
        self.assertEqual(len(resumed), 2)
        stored = {s["uuid"]: s["steps"] for s in self.seen(event="stored")}
        self.assertIn(resumed[0]["latest_checkpoint"], stored)
        self.assertEqual({s["everyone"][0]["steps"] for s in resumed},
                         {stored[resumed[0]["latest_checkpoint"]]})
        self.assertEqual(sorted(d["rank"] for d in self.seen(event="done")), [0, 1])
        steps = self.training_steps("1.1")
        self.assertEqual(steps[-1], 16)
        self.assertEqual(sorted(set(steps)), list(range(1, 17)))
        # Every checkpoint is the chief's alone.
        self.assertEqual([c["steps_completed"] for c in trial["checkpoints"]][-1], 16)

    def test_compare_and_reproduce_verify_like_any_trial(self):
        self.write("train.py", OPERATIONS)
        self.write("exp.yaml", """entrypoint: /usr/bin/python3 train.py
hyperparameters: {lr: 0.2}
searcher: {name: single, metric: val_loss, max_length: 8}
reproducibility: {seed: 11}
""")
        self.run_to_end("exp.yaml")
        self.run_to_end("exp.yaml")
        compare = self.cairn("compare", "1.1", "2.1", check=0)
        self.assertIn("best val_loss", compare.stdout)
        self.assertNotIn("seed:", compare.stdout, "one experiment seed: the same trial seed")
        verify = self.cairn("reproduce", "1.1", "--verify", timeout=300)
        self.assertEqual(verify.returncode, 0, verify.stdout + verify.stderr)
        self.assertIn("reproduces 1.1 exactly", verify.stdout + verify.stderr)

    def test_a_determined_config_with_cluster_keys_runs_with_one_warning_each(self):
        self.write("train.py", OPERATIONS + r'''
note(event="env", value=os.environ.get("FROM_DETERMINED"))
''')
        self.write("det.yaml", """name: det-style
description: written for Determined
entrypoint: /usr/bin/python3 train.py
hyperparameters:
  lr: {type: const, val: 0.25}
searcher:
  name: adaptive_asha
  metric: val_loss
  max_length: 12
  max_trials: 1
resources:
  slots_per_trial: 1
  resource_pool: a100
environment:
  image: determinedai/pytorch-ngc:0.38.0
  environment_variables:
    - FROM_DETERMINED=yes
checkpoint_storage:
  type: shared_fs
  host_path: /mnt/checkpoints
  save_trial_latest: 2
bind_mounts:
  - {host_path: /data, container_path: /data}
max_restarts: 2
""")
        proc = self.run_to_end("det.yaml")
        warnings = [line for line in proc.stderr.splitlines() if "cairn: warning:" in line]
        self.assertEqual([w.split(": ")[2:4] for w in warnings],
                         [["det.yaml:2", "description"],
                          ["det.yaml:13", "resources.resource_pool"],
                          ["det.yaml:15", "environment.image"],
                          ["det.yaml:18", "checkpoint_storage"],
                          ["det.yaml:22", "bind_mounts"]], proc.stderr)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED")
        self.assertEqual(trial["hparams"], {"lr": 0.25})
        self.assertEqual(self.seen(event="env")[0]["value"], "yes")
        # save_trial_latest: 2 is checkpoint.keep_trial_latest: of the checkpoints at 4, 8
        # and 12 the latest two are kept (the best is the one at 12 too).
        self.assertEqual([c["steps_completed"] for c in trial["checkpoints"]], [8, 12])
        shown = self.cairn_json("show", "1", "--json")["config"]["checkpoint"]
        self.assertEqual(shown["keep_trial_latest"], 2)

    def test_wrap_rank_unsupported_submodules_and_no_cluster_outside_cairn(self):
        self.write("train.py", PRELUDE + r'''
import determined
note(event="start", file=determined.__file__, **info_fields(det.get_cluster_info()))
try:
    import determined.pytorch
except ImportError as e:
    note(event="refused", message=str(e))
with det.core.init() as core_context:
    for op in core_context.searcher.operations():
        core_context.train.report_validation_metrics(op.length, {"val_loss": 0.5})
''')
        self.write("exp.yaml", """entrypoint: /usr/bin/python3 -m determined.launch.wrap_rank RANK -- python3 train.py
searcher: {name: single, metric: val_loss, max_length: 2}
""")
        self.run_to_end("exp.yaml")
        start = self.seen(event="start")[0]
        # cairn's package, not one installed: the SDK directory is first on PYTHONPATH.
        self.assertIn(os.path.join(".cairn", "sdk", "python", "determined"), start["file"])
        refused = self.seen(event="refused")
        self.assertEqual(len(refused), 1)
        self.assertIn("determined.pytorch", refused[0]["message"])
        self.assertIn("docs/determined.md", refused[0]["message"])
        # Outside a trial there is no cluster: get_cluster_info() is None.
        sdk = os.path.join(self.dir, ".cairn", "sdk", "python")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
        env["PYTHONPATH"] = sdk
        out = subprocess.run([PYTHON, "-c", "import determined as det; "
                              "print(det.get_cluster_info(), det.LOG_FORMAT)"],
                             env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertTrue(out.stdout.startswith("None %(levelname)s"), out.stdout)


def cairn_testlib_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


if __name__ == "__main__":
    cairn_testlib.main()
