"""End to end: a multi-rank trial never hangs silently (issue 16 §3, docs/protocol.md,
"Multi-rank trials"). Ranks all blocked in cairn on calls that cannot be answered fail the
attempt at once with one line naming each rank's call; a rank that stays in its own code
while another waits in cairn is bounded by rank_wait_timeout. Both restart like any failure
(here max_restarts: 1, so the trial ends in ERROR after the second attempt). Plain SDK
scripts, no torch: quick."""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CairnTestCase  # noqa: E402

# MODE=deadlock: at step 4 rank 0 checkpoints without calling checkpoint_due(4), while rank 1
# calls checkpoint_due(4): each waits for the other, in cairn.
# MODE=away: at step 3 rank 1 stays in its own code (for up to 60 s) while rank 0 waits in
# checkpoint_due(3).
# MODE=chief: the chief-only idiom without torch, for the record of what rank 1 sends.
RANKS = r'''
import os, sys, time
import cairn

ctx = cairn.init()
rank = int(os.environ["RANK"])
mode = os.environ["MODE"]
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        if mode == "deadlock" and step == 4 and rank == 0:
            with ctx.checkpoint(step) as path:
                (path / "step").write_text(str(step))
            continue
        if mode == "away" and step == 3 and rank == 1:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                time.sleep(0.05)
        if ctx.checkpoint_due(step):
            if rank == 0:
                with ctx.checkpoint(step) as path:
                    (path / "step").write_text(str(step))
            if ctx.should_preempt():
                sys.exit(0)
    ctx.report_validation(step, {"val_loss": 1.0 / step})
'''

CONFIG = """name: waits
entrypoint: /usr/bin/python3 ranks.py
searcher: {name: single, metric: val_loss, max_length: 8}
resources: {slots_per_trial: 2}
checkpoint: {period: 1}
max_restarts: 1
environment: {MODE: %s}
"""


class RankWaitTest(CairnTestCase):
    def run_mode(self, mode, extra=""):
        self.write("ranks.py", RANKS)
        self.write("exp.yaml", CONFIG % mode + extra)
        started = time.monotonic()
        run = self.cairn("run", "exp.yaml", "--slots", "2", timeout=120)
        return run, time.monotonic() - started

    def test_ranks_blocked_on_each_other_fail_at_once_with_one_line(self):
        run, took = self.run_mode("deadlock")
        self.assertEqual(run.returncode, 1, run.stdout + run.stderr)
        line = "trial 1.1: ranks deadlocked: rank 0 in checkpoint(4), rank 1 in checkpoint_due(4)"
        self.assertEqual(run.stderr.count(line), 2, run.stderr)  # the attempt and its restart
        self.assertIn("restarting trial 1.1", run.stdout + run.stderr)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "ERROR")
        self.assertIn("ranks deadlocked", trial["error"])
        self.assertIn("ranks deadlocked", self.cairn("logs", "1.1", timeout=30).stdout)
        self.assertLess(took, 60, "at once, not after a timeout")

    def test_a_rank_away_from_cairn_is_bounded_by_rank_wait_timeout(self):
        run, took = self.run_mode("away", "rank_wait_timeout: 2\n")
        self.assertEqual(run.returncode, 1, run.stdout + run.stderr)
        self.assertIn("trial 1.1: rank 0 waited 2 s in checkpoint_due(3) while rank 1 stayed "
                      "outside cairn (rank_wait_timeout)", run.stderr)
        self.assertEqual(self.cairn_json("show", "1.1", "--json")["state"], "ERROR")
        self.assertLess(took, 50, "bounded by rank_wait_timeout, not by the rank's 60 s")

    def test_chief_only_checkpoints_complete_without_torch(self):
        run, _ = self.run_mode("chief")
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED")
        self.assertEqual(max(c["steps_completed"] for c in trial["checkpoints"]), 8)
        steps = [p["step"] for p in self.cairn_json("metrics", "1.1", "--json")["training"]]
        self.assertEqual(steps, list(range(1, 9)))

    def test_rank_wait_timeout_is_checked_like_the_other_keys(self):
        self.write("ranks.py", RANKS)
        self.write("exp.yaml", CONFIG % "chief" + "rank_wait_timeout: -1\n")
        run = self.cairn("run", "exp.yaml", timeout=60)
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertRegex(run.stderr, r"exp\.yaml:\d+.*rank_wait_timeout")

    def test_a_rank_ahead_of_rank_0_waits_for_its_operation_not_a_repeat(self):
        # Rank 1 validates and asks for its next operation while rank 0 still trains: only
        # rank 0's request, sent once its validation is stored, decides what comes next.
        # Decided at rank 1's request, the gang got the same length again (an operation of no
        # steps, validated a second time). Rank 0 also connects late, after rank 1 has asked:
        # rank 1 waits for it then too (deciding without it, rank 1 made operation after
        # operation, which rank 0 had to run through, a second each).
        self.write("ops.py", r"""
import os, time
rank = int(os.environ["RANK"])
if rank == 0:
    time.sleep(1.5)
import cairn

ctx = cairn.init()
got = []
for op in ctx.operations():
    got.append(op.length)
    if rank == 0:
        time.sleep(1.0)
    ctx.report_validation(op.length, {"val_loss": 1.0})
print("rank %d operations %s" % (rank, got), flush=True)
""")
        self.write("exp.yaml", """name: ops
entrypoint: /usr/bin/python3 ops.py
searcher: {name: single, metric: val_loss, max_length: 2}
resources: {slots_per_trial: 2}
max_restarts: 0
""")
        run = self.cairn("run", "exp.yaml", "--slots", "2", timeout=120)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn("rank 0 operations [2]", run.stdout)
        self.assertIn("rank 1 operations [2]", run.stdout)


if __name__ == "__main__":
    unittest.main()
