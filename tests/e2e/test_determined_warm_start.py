"""End to end: Determined's warm starts under the real `cairn run` (docs/determined.md).
A Core API script's `checkpoint.restore_path(storage_id)` and `download()` reach any
checkpoint stored in the store — another experiment's, by its storage id or cairn's id —
as a fresh copy the block removes; `searcher.source_trial_id` and `source_checkpoint_uuid`
start every trial from that checkpoint (det.get_cluster_info().latest_checkpoint) until it
has one of its own, restarts included; a source that does not exist, or that retention
deleted, is a config error naming file, line and key.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CairnTestCase  # noqa: E402
import cairn_testlib  # noqa: E402
from test_determined import DeterminedTest  # noqa: E402
from test_peers import Agent, PeersTest  # noqa: E402

PRELUDE = r'''
import json, os, pathlib, signal, sys
import determined as det

def note(**fields):
    # SEEN_FILE: where the test reads it when the trial runs in an agent's directory.
    seen = os.environ.get("SEEN_FILE") or os.path.join(os.environ["CAIRN_WORKDIR"], "seen.jsonl")
    with open(seen, "a") as f:
        f.write(json.dumps(fields) + "\n")
'''

# Stores its weights (w = the hparam `w`) at steps 3 and 6, by storage id.
SOURCE = PRELUDE + r'''
info = det.get_cluster_info()
with det.core.init() as core:
    for steps in (3, 6):
        core.train.report_validation_metrics(steps, {"val_loss": 1.0 / steps})
        with core.checkpoint.store_path({"steps_completed": steps}) as (path, uuid):
            (path / "state.json").write_text(json.dumps({"w": info.trial.hparams["w"] + steps}))
        note(event="stored", uuid=uuid, steps=steps, trial=info.trial.trial_id)
'''

# Starts from its latest checkpoint when it has one (a warm start's source, or its own),
# restores the checkpoint its hparam `other` names, crashes once when `crash` is set (before
# its own first checkpoint), and trains to step 8, checkpointing at multiples of 4.
WARM = PRELUDE + r'''
info = det.get_cluster_info()
hp = info.trial.hparams
with det.core.init() as core:
    w, steps = None, 0
    if info.latest_checkpoint is not None:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            w = json.loads((path / "state.json").read_text())["w"]
        steps = core.checkpoint.get_metadata(info.latest_checkpoint).get("steps_completed", 0)
    note(event="start", latest=info.latest_checkpoint, w=w, steps=steps)
    if hp.get("other"):
        with core.checkpoint.restore_path(hp["other"]) as path:
            other = json.loads((path / "state.json").read_text())["w"]
            kept = str(path)
        note(event="fetched", ref=hp["other"], w=other, path=kept, gone=not os.path.exists(kept))
        target = os.path.join(os.environ["CAIRN_WORKDIR"], "downloaded")
        core.checkpoint.download(hp["other"], target)
        note(event="downloaded", w=json.loads(open(os.path.join(target, "state.json")).read())["w"])
        for missing in ("00000000-0000-4000-8000-000000000000", "99.1@latest"):
            try:
                with core.checkpoint.restore_path(missing) as path:
                    note(event="found", ref=missing)
            except FileNotFoundError as e:
                note(event="missing", ref=missing, message=str(e))
    crashed = os.path.join(os.environ["CAIRN_WORKDIR"], "crashed")
    if hp.get("crash") and not os.path.exists(crashed):
        open(crashed, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    while steps < 8:
        steps += 1
        if steps % 4 == 0:
            with core.checkpoint.store_path({"steps_completed": steps}) as (path, uuid):
                (path / "state.json").write_text(json.dumps({"w": (w or 0) + 100}))
    core.train.report_validation_metrics(steps, {"val_loss": 1.0 / (1 + (w or 0))})
    note(event="done", steps=steps)
'''


class WarmStartTest(CairnTestCase):
    seen = DeterminedTest.seen  # what the scripts noted in seen.jsonl

    def run_source(self):
        """Experiment 1: one trial whose checkpoints hold w = 10 + steps; only the latest
        (step 6) is kept."""
        self.write("source.py", SOURCE)
        self.write("source.yaml", """entrypoint: /usr/bin/python3 source.py
hyperparameters: {w: 10}
searcher: {name: single, metric: val_loss}
checkpoint: {keep_trial_latest: 1, keep_trial_best: 0}
""")
        self.cairn("run", "source.yaml", check=0)
        stored = self.seen(event="stored")
        self.assertEqual([s["steps"] for s in stored], [3, 6])
        return stored

    def test_restore_path_reaches_another_experiments_checkpoint_by_storage_id(self):
        stored = self.run_source()
        self.write("train.py", WARM)
        self.write("exp.yaml", """entrypoint: /usr/bin/python3 train.py
hyperparameters: {other: "%s"}
searcher: {name: single, metric: val_loss}
""" % stored[1]["uuid"])
        self.cairn("run", "exp.yaml", check=0)
        fetched = self.seen(event="fetched")
        self.assertEqual(len(fetched), 1, self.seen())
        self.assertEqual(fetched[0]["w"], 16)
        # A copy below the trial's work directory, removed when the block ended.
        self.assertIn(os.path.join(self.dir, ".cairn"), fetched[0]["path"])
        self.assertTrue(fetched[0]["gone"], fetched[0])
        self.assertEqual(self.seen(event="downloaded")[0]["w"], 16)
        missing = {m["ref"]: m["message"] for m in self.seen(event="missing")}
        self.assertIn("no checkpoint with storage id", missing["00000000-0000-4000-8000-000000000000"])
        self.assertIn("99", missing["99.1@latest"])
        self.assertFalse(self.seen(event="found"))
        # The trial's own start was cold: no warm start was configured.
        self.assertIsNone(self.seen(event="start")[0]["latest"])
        # cairn's own ids work too (here TRIAL@latest).
        self.write("exp2.yaml", """entrypoint: /usr/bin/python3 train.py
hyperparameters: {other: "1.1@latest"}
searcher: {name: single, metric: val_loss}
""")
        self.cairn("run", "exp2.yaml", check=0)
        self.assertEqual([f["w"] for f in self.seen(event="fetched")], [16, 16])

    def test_restore_path_of_a_corrupt_checkpoint_is_refused_with_the_reason(self):
        stored = self.run_source()
        # The step-6 checkpoint's one file, changed in the object store (same length).
        objects = os.path.join(self.dir, ".cairn", "objects")
        hit = []
        for root, _, files in os.walk(objects):
            for name in files:
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    if f.read() == b'{"w": 16}':
                        hit.append(path)
        self.assertEqual(len(hit), 1, hit)
        os.chmod(hit[0], 0o644)
        with open(hit[0], "wb") as f:
            f.write(b'{"w": 99}')
        self.write("train.py", PRELUDE + r'''
with det.core.init() as core:
    try:
        with core.checkpoint.restore_path(det.get_cluster_info().trial.hparams["other"]) as p:
            note(event="found", w=json.loads((p / "state.json").read_text())["w"])
    except FileNotFoundError as e:
        note(event="refused", message=str(e))
    core.train.report_validation_metrics(1, {"val_loss": 1.0})
''')
        self.write("exp.yaml", """entrypoint: /usr/bin/python3 train.py
hyperparameters: {other: "%s"}
searcher: {name: single, metric: val_loss}
""" % stored[1]["uuid"])
        self.cairn("run", "exp.yaml", check=0)
        self.assertFalse(self.seen(event="found"), self.seen())
        refused = self.seen(event="refused")
        self.assertEqual(len(refused), 1, self.seen())
        self.assertIn("checkpoint ", refused[0]["message"])
        self.assertRegex(refused[0]["message"], r"corrupt|does not match|hash")
        # Nothing of the refused copy is left below the trial's work directory.
        fetched = os.path.join(self.dir, ".cairn", "work", "2", "1", "fetched")
        self.assertEqual(os.listdir(fetched) if os.path.isdir(fetched) else [], [])

    def test_source_trial_id_starts_every_trial_and_restart_from_the_source(self):
        stored = self.run_source()
        number = self.cairn_json("show", "1.1", "--json")["number"]
        self.write("train.py", WARM)
        self.write("exp.yaml", """entrypoint: /usr/bin/python3 train.py
hyperparameters: {crash: 1}
searcher: {name: single, metric: val_loss, source_trial_id: %d}
max_restarts: 1
""" % number)
        run = self.cairn("run", "exp.yaml", check=0)
        starts = self.seen(event="start")
        # The first start and the restart (it crashed before its own checkpoint) both began
        # from the source's latest checkpoint, by its storage id.
        self.assertEqual(len(starts), 2, self.seen())
        for s in starts:
            self.assertEqual(s["latest"], stored[1]["uuid"])
            self.assertEqual(s["w"], 16)
            self.assertEqual(s["steps"], 6)
        shown = self.cairn_json("show", "2", "--json")
        self.assertEqual(shown["warm_start"]["trial"], "1.1")
        self.assertEqual(shown["warm_start"]["storage_id"], stored[1]["uuid"])
        self.assertEqual(shown["trials"][0]["restarts"], 1)
        text = self.cairn("show", "2", check=0).stdout
        self.assertIn("warm start  checkpoint", text)
        self.assertIn("of trial 1.1 (step 6; searcher.source_trial_id %d)" % number, text)
        self.assertIn("Determined", run.stdout + run.stderr + text)  # its defaults, stated

    def test_source_checkpoint_uuid_and_sources_that_cannot_start(self):
        stored = self.run_source()
        self.write("train.py", WARM)
        config = """entrypoint: /usr/bin/python3 train.py
environment: {SEEN_FILE: %s}
searcher:
  name: single
  metric: val_loss
  %%s
""" % os.path.join(self.dir, "seen.jsonl")
        self.write("exp.yaml", config % ("source_checkpoint_uuid: " + stored[1]["uuid"]))
        self.cairn("run", "exp.yaml", check=0)
        self.assertEqual([s["w"] for s in self.seen(event="start")], [16])
        # A re-run starts from the checkpoint the experiment recorded, and gets its results.
        again = self.cairn("reproduce", "2.1", "--verify")
        self.assertEqual(again.returncode, 0, again.stdout + again.stderr)
        self.assertEqual([s["latest"] for s in self.seen(event="start")], [stored[1]["uuid"]] * 2)
        self.assertEqual(self.cairn_json("show", "3", "--json")["warm_start"]["checkpoint"],
                         self.cairn_json("show", "2", "--json")["warm_start"]["checkpoint"])
        # Retention deleted the step-3 checkpoint; trial 99 was never numbered; both keys.
        for line, expected in (
                ("source_checkpoint_uuid: " + stored[0]["uuid"], "deleted by the retention policy"),
                ("source_trial_id: 99", "no trial numbered 99"),
                ("source_trial_id: 1\n  source_checkpoint_uuid: x", "not both")):
            self.write("bad.yaml", config % line)
            proc = self.cairn("run", "bad.yaml")
            self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
            err = proc.stderr.strip().splitlines()
            self.assertEqual(len(err), 1, proc.stderr)
            self.assertRegex(err[0], r"bad\.yaml:\d+: searcher\.source_")
            self.assertIn(expected, err[0])
        # Nothing was created for the refused configs.
        self.assertEqual(len(self.cairn_json("ls", "--json")), 3)


class RemoteRestorePathTest(WarmStartTest):
    """restore_path() of another checkpoint from a rank on a real `cairn agent` (loopback):
    the copy is written in the agent's directory, not the coordinator's store."""

    def setUp(self):
        WarmStartTest.setUp(self)
        self.agents = []
        self.addCleanup(self.kill_agents)
        self.home = os.path.join(self.dir, "home")
        os.makedirs(self.home)

    kill_agents = PeersTest.kill_agents
    agent_env = PeersTest.agent_env
    new_key = PeersTest.new_key

    # WarmStartTest's tests are not run again here.
    test_restore_path_reaches_another_experiments_checkpoint_by_storage_id = None
    test_source_trial_id_starts_every_trial_and_restart_from_the_source = None
    test_source_checkpoint_uuid_and_sources_that_cannot_start = None

    def test_restore_path_on_an_agent_is_a_copy_in_the_agents_directory(self):
        stored = self.run_source()
        key, _ = self.new_key("cluster.key")
        agent = Agent(self, "--key-file", key)
        self.write("train.py", WARM)
        self.write("exp.yaml", """entrypoint: [/usr/bin/python3, %s]
hyperparameters: {other: "%s"}
searcher: {name: single, metric: val_loss}
environment: {SEEN_FILE: %s}
""" % (os.path.join(self.dir, "train.py"), stored[1]["uuid"],
       os.path.join(self.dir, "seen.jsonl")))
        proc = self.cairn("run", "exp.yaml", "--peers", agent.address, "--key-file", key,
                          "--slots", "0", env=self.agent_env(), timeout=180)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        fetched = self.seen(event="fetched")
        self.assertEqual(len(fetched), 1, self.seen())
        self.assertEqual(fetched[0]["w"], 16)
        self.assertTrue(fetched[0]["path"].startswith(agent.dir + "/"), fetched[0])
        self.assertTrue(fetched[0]["gone"], fetched[0])
        self.assertEqual(self.seen(event="downloaded")[0]["w"], 16)
        self.assertTrue(self.seen(event="missing"))
        # Nothing of it was left below the coordinator's trial directory either.
        local = os.path.join(self.dir, ".cairn", "experiments", "2", "trials")
        left = [os.path.join(r, f) for r, _, fs in os.walk(local) for f in fs if "fetched" in r]
        self.assertEqual(left, [])


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
