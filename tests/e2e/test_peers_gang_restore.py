"""A data-parallel trial restored on agents that each host several of its ranks (issue 17
item 6, docs/peers.md "Restoring a gang"): the checkpoint is pushed once per agent per
restore — the first rank's restore sends it, the other ranks on that agent wait for it and
start from the same restored directory — and every rank restores the checkpoint bit for bit.

Four Python SDK ranks over two real `cairn agent`s on loopback (2 slots each): every rank
writes its shard into each checkpoint; on the first attempt rank 3 kills itself at step 5,
so the gang starts again from the checkpoint of step 4 on both agents."""
import hashlib
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from test_peers_placement import Agent, PlacementCase  # noqa: E402

RANKS = 4
FILES = ["shard-%d" % r for r in range(RANKS)] + ["weights.bin"]

# Restored, each rank prints the SHA-256 of the checkpoint it sees (every file's name and
# bytes, in name order) and the directory it was given.
TRAIN = r"""
import hashlib, os, sys
import cairn

ctx = cairn.init()
rank = int(os.environ["RANK"])
attempt = os.environ["CAIRN_ATTEMPT"]
step = ctx.steps_completed
acc = 0
if ctx.latest_checkpoint:
    ck = ctx.latest_checkpoint
    every, ours = hashlib.sha256(), hashlib.sha256()
    for p in sorted(ck.iterdir()):
        every.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
        if not p.name.startswith("cairn_"):  # the SDK's own files (generator states)
            ours.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    print("rank %d attempt %s restored step %d digest %s all %s in %s files %s"
          % (rank, attempt, step, ours.hexdigest(), every.hexdigest(), ck,
             ",".join(sorted(p.name for p in ck.iterdir()))), flush=True)
    acc = int((ck / ("shard-%d" % rank)).read_text().split()[1])
for op in ctx.operations():
    while step < op.length:
        step += 1
        acc += (rank + 1) * step
        ctx.report_training(step, {"loss": acc / step})
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / ("shard-%d" % rank)).write_text("%d %d" % (step, acc))
                # A larger file, the same on every rank: content the agents share.
                (path / "weights.bin").write_bytes(bytes(range(256)) * 4096 * (step // 2))
        if step == 5 and attempt == "1" and rank == 3:
            os.kill(os.getpid(), 9)
        if ctx.should_preempt():
            sys.exit(0)
    ctx.report_validation(step, {"val_loss": 1.0 / step})
"""

CONFIG = """name: gang-restore
entrypoint: [/usr/bin/python3, %s]
searcher: {name: single, metric: val_loss, max_length: 8}
resources: {slots_per_trial: 4}
checkpoint: {period: 2, keep_trial_latest: 10}
max_restarts: 1
"""


def expected_digest(step):
    """The checkpoint of `step` as every rank wrote it."""
    files = {"shard-%d" % r: ("%d %d" % (step, (r + 1) * step * (step + 1) // 2)).encode()
             for r in range(RANKS)}
    files["weights.bin"] = bytes(range(256)) * 4096 * (step // 2)
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name] + b"\0")
    return h.hexdigest()


class GangRestoreTest(PlacementCase):
    def test_a_gang_restores_once_per_agent_and_every_rank_sees_the_checkpoint(self):
        a = Agent(self, "agent-a", 2)
        b = Agent(self, "agent-b", 2)
        self.write("train.py", TRAIN)
        self.write("exp.yaml", CONFIG % os.path.join(self.dir, "train.py"))
        proc = self.run_cairn("run", "exp.yaml", "--slots", "0", "--peers",
                              a.address + "," + b.address)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 1, trial)
        machines = [p["machine"] for p in trial["placement"]]
        self.assertEqual(sorted(machines), sorted([a.address] * 2 + [b.address] * 2), trial)
        # Where each attempt ran, the first included (the record holds the latest's only).
        self.assertEqual([t["attempt"] for t in trial["attempts"]], [1, 2], trial)
        for attempt in trial["attempts"]:
            self.assertEqual(sorted(p["machine"] for p in attempt["placement"]),
                             sorted([a.address] * 2 + [b.address] * 2), attempt)
        self.assertEqual(trial["attempts"][-1]["placement"], trial["placement"])
        shown = self.cairn("show", "1.1").stdout
        self.assertRegex(shown, r"ran on +0: .*\(attempt 2\)\n +0: .*\(attempt 1\)\n", shown)

        # Every rank restored the checkpoint of step 4, bit for bit; the ranks on one agent
        # from the one directory its single push made.
        restored = {}
        alls = set()  # the digest of every file, the SDK's included: one for all ranks
        for rank in range(RANKS):
            logs = self.cairn("logs", "1.1", "--rank", str(rank), check=0).stdout
            found = re.findall(r"rank %d attempt 2 restored step (\d+) digest (\w+) all (\w+) in (\S+) files (\S+)"
                               % rank, logs)
            self.assertEqual(len(found), 1, logs)
            step, digest, every, where, names = found[0]
            self.assertEqual(int(step), 4, logs)
            self.assertEqual([n for n in names.split(",") if not n.startswith("cairn_")], FILES,
                             logs)
            alls.add(every)
            self.assertEqual(digest, expected_digest(4), logs)
            restored[rank] = where
        self.assertEqual(len(alls), 1, alls)
        for agent in (a, b):
            dirs = {restored[r] for r in range(RANKS) if machines[r] == agent.address}
            self.assertEqual(len(dirs), 1, restored)
            self.assertTrue(next(iter(dirs)).startswith(agent.dir), restored)

        # One push per agent for attempt 2: one "received checkpoint" line each, carrying
        # every file of the checkpoint.
        for agent in (a, b):
            pushes = [l for l in agent.text().splitlines()
                      if "received checkpoint of trial 1.1 attempt 2 " in l]
            self.assertEqual(len(pushes), 1, agent.text())
            self.assertIn(": %d files (" % (2 * RANKS + 1), pushes[0])
        # The weights travelled at most once to each agent (each lacked them): the bytes
        # on the wire, as the agents count them.
        weights = 256 * 4096 * 2
        for agent in (a, b):
            line = [l for l in agent.text().splitlines()
                    if "received checkpoint of trial 1.1 attempt 2 " in l][0]
            sent = int(re.search(r"(\d+) content bytes on the wire", line).group(1))
            self.assertGreaterEqual(sent, weights, line)
            self.assertLess(sent, 2 * weights, line)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
