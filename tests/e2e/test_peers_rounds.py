"""A data-parallel trial's checkpoint round over machines that share no file system
(docs/peers.md "A checkpoint round over machines"): each `cairn agent` runs in a mount
namespace where the coordinator's project and store directory is an empty tmpfs, so a rank
on an agent can write its part of a checkpoint only on its own machine's disk. The parts
travel to the coordinator's store (manifest plus missing content), the checkpoint is
registered only when every part is there, and a restarted gang gets it restored on every
machine it runs on, with the same state as on one machine; a part that cannot be shipped
leaves no checkpoint at all."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, CairnTestCase, needs, wait_until  # noqa: E402
from test_peers_placement import Agent  # noqa: E402

USERNS, USERNS_WHY = cairn_testlib.userns_mounts()

# Two ranks; each enters every checkpoint and writes its own shard ("step accumulator").
# Restored, every rank checks that it sees both shards — its own machine's and the other's —
# at the restored step, and takes its accumulator back. On the first attempt rank 1 kills
# itself at step 5, so the gang restarts from the checkpoint of step 4. Rank 0 reports
# rank 1's restored accumulator too, so the metrics say what crossed machines.
TRAIN = r"""
import os, sys
import cairn

HIDDEN = sys.argv[1]
MODE = os.environ.get("ROUND_MODE", "")
ctx = cairn.init()
rank = int(os.environ["RANK"])
attempt = os.environ["CAIRN_ATTEMPT"]
print("rank", rank, "store hidden:", not os.path.exists(os.path.join(HIDDEN, ".cairn")),
      flush=True)
step = ctx.steps_completed
acc = 0
other = 0
if ctx.latest_checkpoint:
    ck = ctx.latest_checkpoint
    print("rank", rank, "attempt", attempt, "restored step", step, "files",
          sorted(p.name for p in ck.iterdir()), flush=True)
    shards = {r: (ck / ("shard-%d" % r)).read_text().split() for r in (0, 1)}
    assert all(int(s) == step for s, _ in shards.values()), shards
    acc = int(shards[rank][1])
    other = int(shards[1][1])
for op in ctx.operations():
    while step < op.length:
        step += 1
        acc += (rank + 1) * step
        ctx.report_training(step, {"loss": acc / step, "other": other})
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                print("rank", rank, "writes step", step, "into", path, flush=True)
                (path / ("shard-%d" % rank)).write_text("%d %d" % (step, acc))
                if MODE == "symlink" and rank == 1 and step == 4:
                    os.symlink("/etc/passwd", str(path / "leak"))
        if step == 5 and attempt == "1" and rank == 1 and not MODE:
            os.kill(os.getpid(), 9)
        if ctx.should_preempt():
            sys.exit(0)
    ctx.report_validation(step, {"val_loss": 1.0 / step})
"""

CONFIG = """name: rounds
entrypoint: [/usr/bin/python3, %s, %s]
searcher: {name: single, metric: val_loss, max_length: 8}
resources: {slots_per_trial: 2}
checkpoint: {period: 2, keep_trial_latest: 10}
max_restarts: %d
"""

MLP = """name: mlp-rounds
entrypoint: builtin:mlp
hyperparameters: {dataset: teacher, samples: 512, hidden: 32, batch_size: 64, threads: 1,
                  device: cpu}
searcher: {name: single, metric: val_loss, max_length: 4}
resources: {slots_per_trial: 2}
checkpoint: {period: 1}
reproducibility: {seed: 5, deterministic: true}
max_restarts: 0
"""


class HiddenAgent:
    """A `cairn agent` whose mount namespace hides `hidden` under a tmpfs; its log in a file."""

    def __init__(self, test, name, hidden):
        self.dir = os.path.join(test.outside, name)
        os.makedirs(self.dir)
        self.log = os.path.join(test.outside, name + ".log")
        argv = ["unshare", "-rm", "sh", "-c",
                'mount -t tmpfs -o size=1m tmpfs "$0" && exec "$@"', hidden, CAIRN, "agent",
                "--dir", self.dir, "--key-file", test.key, "--listen", "127.0.0.1:0",
                "--slots", "1"]
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(argv, cwd=test.outside, env=test.cairn_env(test.env()),
                                            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        test.addCleanup(self.kill)
        line = self.wait_log("listening on")
        self.address = re.search(r"listening on (\S*:\d+) ", line).group(1)

    def text(self):
        with open(self.log) as f:
            return f.read()

    def wait_log(self, needle, timeout=60):
        found = []

        def seen():
            found[:] = [l for l in self.text().splitlines() if needle in l]
            return found

        wait_until(seen, timeout=timeout, what="%r in the agent's log" % needle)
        return found[0]

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)


class PeerRoundsCase(CairnTestCase):
    def setUp(self):
        super().setUp()
        # Outside self.dir (hidden on the agents): their directories, the key and the script.
        self.outside = tempfile.mkdtemp(prefix="cairn-e2e-rounds-")
        self.addCleanup(shutil.rmtree, self.outside, True)
        self.home = os.path.join(self.outside, "home")
        os.makedirs(self.home)
        self.key = os.path.join(self.outside, "cluster.key")
        self.cairn("agent", "--new-key", self.key, check=0, env=self.env())
        self.script = os.path.join(self.outside, "train.py")
        with open(self.script, "w") as f:
            f.write(TRAIN)

    def env(self, extra=None):
        base = {"HOME": self.home, "XDG_CONFIG_HOME": None, "XDG_STATE_HOME": None,
                "CAIRN_KEY_FILE": None}
        base.update(extra or {})
        return base

    def run_cairn(self, *args, extra=None):
        return self.cairn(*args, "--key-file", self.key, env=self.env(extra), timeout=300)

    def checkpoints(self, trial):
        out = self.cairn_json("checkpoints", trial, "--json")
        return out if isinstance(out, list) else out.get("checkpoints", [])

    def logs(self, trial, rank):
        return self.cairn("logs", trial, "--rank", str(rank), check=0).stdout


@needs("userns", USERNS, USERNS_WHY)
class PeerRoundsTest(PeerRoundsCase):
    def test_a_gang_over_two_machines_checkpoints_dies_and_restores_on_both(self):
        self.write("exp.yaml", CONFIG % (self.script, self.dir, 1))
        # The reference: both ranks on this machine (one staging directory, shared).
        proc = self.run_cairn("run", "exp.yaml", "--slots", "2")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        alone = self.cairn_json("metrics", "1.1", "--json")
        self.assertIn("restored step 4", self.logs("1.1", 1))
        # Rank 0 on agent a, rank 1 on agent b: neither sees this store.
        a = HiddenAgent(self, "agent-a", self.dir)
        b = HiddenAgent(self, "agent-b", self.dir)
        proc = self.run_cairn("run", "exp.yaml", "--slots", "0", "--peers",
                              a.address + "," + b.address)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        trial = self.cairn_json("show", "2.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(sorted(p["machine"] for p in trial["placement"]),
                         sorted([a.address, b.address]), trial)
        self.assertEqual(trial.get("restarts"), 1, trial)
        for rank in (0, 1):
            out = self.logs("2.1", rank)
            self.assertIn("rank %d store hidden: True" % rank, out)
            # Each rank wrote its part on its own machine, below its agent's directory.
            for path in re.findall(r"writes step \d+ into (\S+)", out):
                self.assertTrue(path.startswith(self.outside), out)
            # Restored on its own machine: both machines' shards, at step 4.
            self.assertRegex(out, r"rank %d attempt 2 restored step 4 files \[.*'shard-0', "
                                  r"'shard-1'.*\]" % rank)
        # Each agent shipped its part of every checkpoint of attempt 1 and received the
        # whole checkpoint back for attempt 2.
        for agent in (a, b):
            log = agent.text()
            self.assertIn("sent checkpoint of trial 2.1 attempt 1", log)
            self.assertIn("received checkpoint of trial 2.1 attempt 2", log)
        # The same state as on one machine: every report, including rank 1's restored
        # accumulator that rank 0 read from the other machine's part.
        split = self.cairn_json("metrics", "2.1", "--json")
        self.assertEqual(split["training"], alone["training"])
        self.assertEqual(split["validation"], alone["validation"])
        # One checkpoint per round: those of the reference's steps.
        self.assertEqual(sorted(c["steps_completed"] for c in self.checkpoints("2.1")),
                         sorted(c["steps_completed"] for c in self.checkpoints("1.1")))

    def test_a_part_that_cannot_be_shipped_leaves_no_checkpoint(self):
        # Rank 1 (on agent b) leaves a symlink in its part of step 4: the agent refuses to
        # list it, so the round fails as a whole — rank 0's part on agent a is not enough.
        self.write("exp.yaml", CONFIG % (self.script, self.dir, 0))
        a = HiddenAgent(self, "agent-a", self.dir)
        b = HiddenAgent(self, "agent-b", self.dir)
        proc = self.run_cairn("run", "exp.yaml", "--slots", "0", "--peers",
                              a.address + "," + b.address, extra={"ROUND_MODE": "symlink"})
        # The SDK warns about a checkpoint that failed and trains on (docs/sdk.md).
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        trial = self.cairn_json("show", "1.1", "--json")
        rank1 = trial["placement"][1]["machine"]
        steps = sorted(c["steps_completed"] for c in self.checkpoints("1.1"))
        self.assertEqual(steps, [2, 6, 8], steps)  # nothing of step 4's round
        log = self.logs("1.1", 0)
        self.assertRegex(log, r"checkpoint at step 4 was not saved: the part written on %s "
                              r"did not arrive: .*symlink" % re.escape(rank1))
        # The checkpoint of step 8 holds both machines' parts, and no link.
        out = os.path.join(self.dir, "exported")
        self.cairn("export", "1.1@latest", out)
        self.assertEqual(sorted(n for n in os.listdir(out) if n.startswith("shard")),
                         ["shard-0", "shard-1"])
        self.assertNotIn("leak", os.listdir(out))
        self.assertIn("refused a checkpoint request", b.text() if rank1 == b.address
                      else a.text())

    def test_a_machine_that_cannot_stage_its_part_fails_every_round_without_hanging(self):
        # Agent b cannot make the trial's checkpoint directory (a file is in the way): its
        # rank's checkpoint_begin is refused, so every round lacks b's part and fails; the
        # gang trains on (the SDK warns) and nothing is registered.
        self.write("exp.yaml", CONFIG % (self.script, self.dir, 0))
        a = HiddenAgent(self, "agent-a", self.dir)
        b = HiddenAgent(self, "agent-b", self.dir)
        os.makedirs(os.path.join(b.dir, "work", "trials", "1.1"))
        with open(os.path.join(b.dir, "work", "trials", "1.1", "checkpoints"), "w") as f:
            f.write("in the way")
        proc = self.run_cairn("run", "exp.yaml", "--slots", "0", "--peers",
                              a.address + "," + b.address, extra={"ROUND_MODE": "nostage"})
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual([p["machine"] for p in trial["placement"]], [a.address, b.address])
        self.assertEqual(self.checkpoints("1.1"), [])
        self.assertRegex(self.logs("1.1", 0), r"checkpoint at step 2 was not saved: its part on "
                                              r"%s could not be staged: " % re.escape(b.address))
        self.assertIn("cairn refused a checkpoint at step 2", self.logs("1.1", 1))
        self.assertIn("refused a checkpoint request", b.text())

    def test_builtin_mlp_split_over_two_machines_is_bit_identical_to_one(self):
        self.write("mlp.yaml", MLP)
        proc = self.run_cairn("run", "mlp.yaml", "--slots", "2")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        alone = self.cairn_json("metrics", "1.1", "--json")
        a = HiddenAgent(self, "agent-a", self.dir)
        b = HiddenAgent(self, "agent-b", self.dir)
        proc = self.run_cairn("run", "mlp.yaml", "--slots", "0", "--peers",
                              a.address + "," + b.address)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        trial = self.cairn_json("show", "2.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(sorted(p["machine"] for p in trial["placement"]),
                         sorted([a.address, b.address]), trial)
        split = self.cairn_json("metrics", "2.1", "--json")
        self.assertEqual(split["training"], alone["training"])
        self.assertEqual(split["validation"], alone["validation"])
        # Every epoch's round reached the store from both machines.
        self.assertEqual(len(self.checkpoints("2.1")), len(self.checkpoints("1.1")))
        for agent in (a, b):
            self.assertIn("sent checkpoint of trial 2.1 attempt 1", agent.text())


class MixedRoundTest(PeerRoundsCase):
    """Without namespaces: rank 0 on this machine, rank 1 on a loopback agent. Rank 0 writes
    into the store's staging directory, rank 1 into its agent's; the parts meet in the store."""

    def test_a_gang_over_this_machine_and_an_agent_checkpoints_dies_and_restores(self):
        self.write("exp.yaml", CONFIG % (self.script, self.dir, 1))
        proc = self.run_cairn("run", "exp.yaml", "--slots", "2")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        alone = self.cairn_json("metrics", "1.1", "--json")
        agent = Agent(self, "agent", 1)
        proc = self.run_cairn("run", "exp.yaml", "--slots", "1", "--peers", agent.address)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        trial = self.cairn_json("show", "2.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual([p["machine"] for p in trial["placement"]], ["local", agent.address])
        self.assertEqual(trial.get("restarts"), 1, trial)
        paths = {r: re.findall(r"writes step \d+ into (\S+)", self.logs("2.1", r))
                 for r in (0, 1)}
        self.assertTrue(paths[0] and paths[1], paths)
        self.assertTrue(all(p.startswith(os.path.join(self.dir, ".cairn")) for p in paths[0]),
                        paths)
        self.assertTrue(all(p.startswith(agent.dir) for p in paths[1]), paths)
        for rank in (0, 1):
            self.assertRegex(self.logs("2.1", rank), r"rank %d attempt 2 restored step 4 files "
                                                     r"\[.*'shard-0', 'shard-1'.*\]" % rank)
        self.assertIn("sent checkpoint of trial 2.1 attempt 1", agent.text())
        split = self.cairn_json("metrics", "2.1", "--json")
        self.assertEqual(split["training"], alone["training"])
        self.assertEqual(split["validation"], alone["validation"])


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
