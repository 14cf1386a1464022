"""`cairn resume` adopts a gang whatever round its coordinator's `kill -9` fell in (issue 17
item 8, docs/peers.md "Adoption"): a gang of 2 ranks on two real `cairn agent`s on
loopback, and a `cairn run --slots 0` that the test hook CAIRN_TEST_ONE_ANSWER
(engine/coordinator/one_answer_hook.h) makes answer one rank of a round only and then serve
nothing, so that the kill lands exactly between the answers:

- a checkpoint round in which one rank had its staging directory and the other not yet:
  the resumed coordinator rebuilds the round from what the agents replay (the first rank's
  `checkpoint_begin`, marked answered, with the directory it was given), stages the other
  rank's directory, and registers the checkpoint once, with both ranks' files;
- a checkpoint round registered and acknowledged to one rank only: the other rank's
  `checkpoint_end` is acknowledged with that checkpoint, not fetched or registered again;
- a `sync` answered to one rank only: the resumed coordinator learns from the replay that
  the first rank had its answer, answers the other alike, and the gang goes on (before, it
  waited for a sync the first rank never sends again, and failed);
- the same while the rank that had its answer reports more than the agent's 192 KiB of
  replayable lines before the kill: the answered sync is kept apart from that bound;
- a `next_operation` answered to one rank only: the resumed coordinator learns from the
  agents (session_adopted) which operations each rank was given, answers the other's with the
  same one, and gives the first its next one (before, the new coordinator numbered the gang's
  operations from 0 again: the first rank was given, as its second, the operation it had
  done, and trained it a second time: an operation of no steps and a second validation).

Each time: the trial is adopted (nothing started), every step runs once on each rank, each
rank is given the one operation once, every training metric is stored once, every checkpoint
is registered once, and the experiment completes."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, wait_until  # noqa: E402
from peer_testlib import alive  # noqa: E402
from test_peers_placement import Agent, PlacementCase  # noqa: E402

# Says its pid, appends every step it runs to $STEPS_DIR/rank<RANK> (so a step run twice
# shows) and every operation it is given to $STEPS_DIR/ops<RANK>, checkpoints every 2 units
# (each rank writes its own file, and leaves a marker "in<RANK>.<STEP>" once it has its
# directory), and resumes from its checkpoint. At step $HEAVY_STEP it sends $HEAVY_KIB KiB of
# training reports, then leaves the marker "heavy<RANK>".
TRAIN = r"""
import os, sys, time
import cairn

ctx = cairn.init()
rank = int(os.environ.get("RANK", "0"))
where = os.environ["STEPS_DIR"]
heavy_step = int(os.environ.get("HEAVY_STEP", "0"))
print("pid", os.getpid(), "starts at", ctx.steps_completed, flush=True)
with open(os.path.join(where, "pid%d" % rank), "a") as f:
    f.write("%d\n" % os.getpid())
if os.environ.get("WAIT_FOR_RANKS"):  # every rank welcomed before any asks for work
    until = time.time() + 60
    while time.time() < until and not all(os.path.exists(os.path.join(where, "pid%d" % r))
                                          for r in range(int(os.environ["WORLD_SIZE"]))):
        time.sleep(0.02)
steps = open(os.path.join(where, "rank%d" % rank), "a")
ops = open(os.path.join(where, "ops%d" % rank), "a")
step = ctx.steps_completed
for op in ctx.operations():
    ops.write("%d %d\n" % (os.getpid(), op.length))
    ops.flush()
    while step < op.length:
        time.sleep(float(os.environ.get("STEP_SECONDS", "0.05")))
        step += 1
        steps.write("%d %d\n" % (os.getpid(), step))
        steps.flush()
        ctx.report_training(step, {"loss": 1.0 / step})
        if step == heavy_step:
            pad = {"m%03d" % i: 0.5 for i in range(100)}  # about 1 KiB a report
            for _ in range(int(os.environ["HEAVY_KIB"])):
                ctx.report_training(step, dict(pad, loss=1.0 / step))
            ctx._channel.flush()
            open(os.path.join(where, "heavy%d" % rank), "w").close()
        print("step", step, flush=True)
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / ("step%d" % rank)).write_text(str(step))
                open(os.path.join(where, "in%d.%d" % (rank, step)), "w").close()
        if ctx.should_preempt():
            sys.exit(0)
    ctx.report_validation(step, {"val_loss": 1.0 / (step + 1)})
"""

CONFIG = """name: adopt-rounds
entrypoint: /usr/bin/python3 %s
searcher: {name: single, metric: val_loss, max_length: %d}
resources: {slots_per_trial: %d}
checkpoint: {period: 2, keep_trial_latest: 100}
max_restarts: 0
reattach_window: 600
rank_wait_timeout: 60
"""


class AdoptRoundsTest(PlacementCase):
    LENGTH = 30

    def setUp(self):
        super().setUp()
        self.write("train.py", TRAIN)
        self.steps_dir = os.path.join(self.dir, "steps")
        os.makedirs(self.steps_dir)

    def start_agents(self, slots):
        """Agents with these slots each (a gang of 2 over two agents: [1, 1])."""
        self.agent_list = [Agent(self, "agent-%d" % i, n) for i, n in enumerate(slots)]

    def run_env(self, extra=None):
        env = {"STEP_SECONDS": "0.1", "STEPS_DIR": self.steps_dir, "CAIRN_KEY_FILE": self.key}
        env.update(extra or {})
        return self.env(env)

    def start_run(self, hook, slots=(1, 1), ranks=2, extra_env=None):
        self.start_agents(slots)
        self.ranks = ranks
        self.write("exp.yaml", CONFIG % (os.path.join(self.dir, "train.py"), self.LENGTH, ranks))
        self.run_out = os.path.join(self.dir, "run.out")
        out = open(self.run_out, "w")
        self.addCleanup(out.close)
        env = {"CAIRN_TEST_ONE_ANSWER": hook}
        env.update(extra_env or {})
        run = subprocess.Popen(
            [CAIRN, "run", "exp.yaml", "--slots", "0", "--peers",
             ",".join(a.address for a in self.agent_list)],
            cwd=self.dir, env=self.cairn_env(self.run_env(env)),
            stdout=out, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: run.poll() is None and (run.kill(), run.wait()))
        return run

    def run_output(self):
        with open(self.run_out) as f:
            return f.read()

    def pids(self, text):
        return [int(p) for p in re.findall(r"\[1\.1(?::\d)?\] pid (\d+) starts at", text)]

    def steps_run(self, rank):
        try:
            with open(os.path.join(self.steps_dir, "rank%d" % rank)) as f:
                return [tuple(int(x) for x in line.split()) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def rank_pids(self):
        pids = []
        for rank in range(self.ranks):
            try:
                with open(os.path.join(self.steps_dir, "pid%d" % rank)) as f:
                    pids += [int(p) for p in f.read().split()]
            except FileNotFoundError:
                pass
        return pids

    def ops_given(self, rank):
        try:
            with open(os.path.join(self.steps_dir, "ops%d" % rank)) as f:
                return [tuple(int(x) for x in line.split()) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def last_step(self, rank):
        ran = self.steps_run(rank)
        return ran[-1][1] if ran else 0

    def held(self, run, what):
        """Waits for the hook's line, and for every rank's pid line."""
        line = "cairn: test hook: answered one rank's %s; waiting to be killed" % what
        try:
            wait_until(lambda: line in self.run_output() or run.poll() is not None,
                       timeout=120, what="the hook's line")
        except AssertionError:
            self.fail("no hook line: " + self.run_output()[-3000:])
        self.assertIn(line, self.run_output(), self.run_output()[-3000:])
        # From the ranks' files: the held coordinator may not have shown every rank's output.
        wait_until(lambda: len(self.rank_pids()) >= self.ranks, timeout=30,
                   what="every rank's pid")
        pids = self.rank_pids()
        for pid in pids:
            self.addCleanup(lambda p=pid: alive(p) and os.kill(p, 9))
        return pids

    def kill(self, run):
        run.kill()
        run.wait(timeout=30)
        for agent in self.agent_list:
            wait_until(lambda: re.search(r"kept \d+ ranks of", agent.text()), timeout=30,
                       what="the agent keeping its ranks")
        self.assertEqual(sum(int(re.search(r"kept (\d+) ranks of", a.text()).group(1))
                             for a in self.agent_list), self.ranks)

    def resume(self):
        proc = self.cairn("resume", "1", env=self.run_env(), timeout=240)
        text = proc.stdout + proc.stderr
        if os.environ.get("ADOPT_DEBUG"):
            print(text, *(a.text() for a in self.agent_list), self.cairn("logs", "1.1").stdout,
                  file=sys.stderr)
        self.assertEqual(proc.returncode, 0, text)
        return text

    def assert_went_on(self, text, pids):
        """Adopted, nothing started, each step once per rank in one process, each training
        metric once, each checkpoint once, completed."""
        self.assertEqual(len(re.findall(r"trial 1\.1(:\d)?: adopted its rank on", text)),
                         self.ranks, text)
        # Nothing started: no process but the held ones ever ran (a first line the killed
        # coordinator never showed may be shown now).
        self.assertEqual(sorted(self.rank_pids()), sorted(pids))
        for pid in self.pids(text):
            self.assertIn(pid, pids, text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        for rank in range(self.ranks):
            ran = self.steps_run(rank)
            self.assertEqual([s for _, s in ran], list(range(1, self.LENGTH + 1)), ran)
            self.assertEqual(len({p for p, _ in ran}), 1, ran)
            self.assertIn(ran[0][0], pids)
        # The gang was given one sequence of operations: each rank the same, in its one
        # process, the first of the searcher's (single) length. (The same length may come
        # again, to every rank alike, when rank 1 asks for its next operation before rank 0's
        # validation is stored: an operation of no steps.)
        given = [self.ops_given(rank) for rank in range(self.ranks)]
        for rank in range(self.ranks):
            self.assertEqual([length for _, length in given[rank]],
                             [length for _, length in given[0]], given)
            self.assertEqual({p for p, _ in given[rank]}, {self.steps_run(rank)[0][0]}, given)
        self.assertEqual(given[0][0][1], self.LENGTH, given)
        self.assertEqual({length for _, length in given[0]}, {self.LENGTH}, given)
        metrics = self.cairn_json("metrics", "1.1", "--json")
        self.assertEqual([p["step"] for p in metrics["training"]],
                         list(range(1, self.LENGTH + 1)))
        self.assertEqual([p["step"] for p in metrics["validation"]], [self.LENGTH])
        steps = sorted(c["steps_completed"] for c in trial["checkpoints"])
        self.assertEqual(steps, list(range(2, self.LENGTH + 1, 2)), trial["checkpoints"])
        for rank in range(self.ranks):
            log = self.cairn("logs", "1.1", "--rank", str(rank)).stdout
            self.assertNotIn("was not saved", log)
            self.assertNotIn("checkpoint at step", log)  # the SDK's "… failed: …" warning
        return trial

    def exported(self, trial, step):
        """The files of the trial's checkpoint of `step`, as `cairn export` writes them."""
        ckpt = [c for c in trial["checkpoints"] if c["steps_completed"] == step]
        self.assertEqual(len(ckpt), 1, trial["checkpoints"])
        dest = os.path.join(self.dir, "export-%d" % step)
        self.cairn("export", ckpt[0]["id"][:12], dest)
        return {name: open(os.path.join(dest, name)).read() for name in os.listdir(dest)
                if name.startswith("step")}

    def test_a_checkpoint_round_one_rank_had_begun_is_registered_once_after_the_resume(self):
        self.split_checkpoint_round(slots=(1, 1))

    def test_the_same_with_both_ranks_on_one_agent(self):
        # Rank 0 and rank 1 share their agent's part: one of them has the directory the dead
        # coordinator staged; the other gets that one, or a new one that is fetched too.
        self.split_checkpoint_round(slots=(2,))

    def split_checkpoint_round(self, slots):
        step = 6
        run = self.start_run("checkpoint_dir:%d" % step, slots=slots)
        pids = self.held(run, "checkpoint_dir at step %d" % step)
        # One rank has its directory and writes into it (then waits for its ack); the other
        # still waits for its directory.
        began = wait_until(lambda: [r for r in (0, 1)
                                    if os.path.exists(os.path.join(self.steps_dir,
                                                                   "in%d.%d" % (r, step)))],
                           timeout=60, what="one rank inside checkpoint(%d)" % step)
        self.assertEqual(len(began), 1, began)
        self.kill(run)
        other = 1 - began[0]
        self.assertFalse(os.path.exists(os.path.join(self.steps_dir, "in%d.%d" % (other, step))))
        self.assertEqual(self.last_step(other), step)
        text = self.resume()
        trial = self.assert_went_on(text, pids)
        # The round's checkpoint holds both ranks' parts: each rank's file from its own agent.
        self.assertEqual(self.exported(trial, step), {"step0": str(step), "step1": str(step)})
        self.assertEqual(self.exported(trial, self.LENGTH),
                         {"step0": str(self.LENGTH), "step1": str(self.LENGTH)})

    def test_a_sync_answered_to_one_rank_only_is_answered_alike_to_the_other(self):
        step = 7
        run = self.start_run("sync:%d" % step)
        pids = self.held(run, "sync at step %d" % step)
        # The rank that had its answer trains on (and waits in the next sync); the other
        # waits for its answer to the sync of `step`.
        ahead = wait_until(lambda: [r for r in (0, 1) if self.last_step(r) > step],
                           timeout=60, what="one rank past step %d" % step)
        self.assertEqual(len(ahead), 1, ahead)
        self.kill(run)
        self.assertEqual(self.last_step(1 - ahead[0]), step)
        text = self.resume()
        self.assertNotIn("rank_wait_timeout", text)
        trial = self.assert_went_on(text, pids)
        self.assertEqual(self.exported(trial, 8), {"step0": "8", "step1": "8"})

    def test_a_sync_answered_before_heavy_reports_is_still_answered_alike(self):
        # The rank that had its answer sends 400 KiB of reports at the next step before the
        # kill: more than the agent's 192 KiB of replayable lines. The answered sync is kept
        # apart from that bound (before, it was dropped first, and the gang failed).
        step = 7
        run = self.start_run("sync:%d" % step,
                             extra_env={"HEAVY_STEP": str(step + 1), "HEAVY_KIB": "400"})
        pids = self.held(run, "sync at step %d" % step)
        ahead = wait_until(lambda: [r for r in (0, 1) if os.path.exists(
            os.path.join(self.steps_dir, "heavy%d" % r))], timeout=60,
            what="one rank past its heavy reports")
        self.assertEqual(len(ahead), 1, ahead)
        self.kill(run)
        self.assertEqual(self.last_step(1 - ahead[0]), step)
        text = self.resume()
        self.assertNotIn("rank_wait_timeout", text)
        self.assertNotIn("deadlocked", text)
        self.assert_went_on(text, pids)

    def test_an_operation_answered_to_one_rank_only_is_given_alike_to_the_other(self):
        run = self.start_run("next_operation:1", extra_env={"WAIT_FOR_RANKS": "1"})
        pids = self.held(run, "next_operation 1")
        # The rank that had its operation runs its first step and waits in its sync; the
        # other still waits for its operation.
        ahead = wait_until(lambda: [r for r in (0, 1) if self.last_step(r) >= 1],
                           timeout=60, what="one rank's first step")
        self.assertEqual(len(ahead), 1, ahead)
        self.kill(run)
        self.assertEqual(self.ops_given(1 - ahead[0]), [])
        self.assertEqual(self.last_step(1 - ahead[0]), 0)
        text = self.resume()
        self.assert_went_on(text, pids)

    def test_a_checkpoint_acknowledged_to_one_rank_only_is_acknowledged_to_the_other(self):
        # Registered (and committed) by the killed coordinator, which acknowledged one rank
        # only: the other's replayed checkpoint_end is acknowledged with the same checkpoint,
        # which is neither fetched again nor registered twice.
        step = 6
        run = self.start_run("checkpoint_ack:%d" % step)
        pids = self.held(run, "checkpoint_ack at step %d" % step)
        ahead = wait_until(lambda: [r for r in (0, 1) if self.last_step(r) > step],
                           timeout=60, what="one rank past step %d" % step)
        self.assertEqual(len(ahead), 1, ahead)
        self.kill(run)
        self.assertEqual(self.last_step(1 - ahead[0]), step)
        before = self.cairn_json("show", "1.1", "--json")["checkpoints"]
        self.assertIn(step, [c["steps_completed"] for c in before])
        text = self.resume()
        trial = self.assert_went_on(text, pids)
        ids = [c["id"] for c in trial["checkpoints"] if c["steps_completed"] == step]
        self.assertEqual(ids, [c["id"] for c in before if c["steps_completed"] == step])
        self.assertEqual(self.exported(trial, step), {"step0": str(step), "step1": str(step)})

    def test_a_single_rank_checkpoint_registered_but_not_acknowledged_is_acknowledged(self):
        # A trial of one rank: its checkpoint was registered (committed) by the killed
        # coordinator, which died before the ack went out; the replayed checkpoint_end is
        # acknowledged with that checkpoint, not refused (the agent dropped the directory).
        step = 6
        run = self.start_run("checkpoint_ack:%d" % step, slots=(1,), ranks=1)
        pids = self.held(run, "checkpoint_ack at step %d" % step)
        wait_until(lambda: os.path.exists(os.path.join(self.steps_dir, "in0.%d" % step)),
                   timeout=30, what="inside checkpoint(%d)" % step)
        self.kill(run)
        self.assertEqual(self.last_step(0), step)  # still waiting for its ack
        before = self.cairn_json("show", "1.1", "--json")["checkpoints"]
        text = self.resume()
        trial = self.assert_went_on(text, pids)
        ids = [c["id"] for c in trial["checkpoints"] if c["steps_completed"] == step]
        self.assertEqual(ids, [c["id"] for c in before if c["steps_completed"] == step])
        self.assertEqual(self.exported(trial, step), {"step0": str(step)})

    def checkpoint_fetched_not_registered(self, slots, ranks):
        # Every part of the checkpoint fetched into the store, each agent's copy removed on
        # the coordinator's word, and the coordinator killed before the registration: the
        # replayed checkpoint_end gets the manifest the agent kept of the removed directory,
        # nothing crosses again, and the checkpoint is registered once.
        step = 6
        run = self.start_run("checkpoint_fetched:%d" % step, slots=slots, ranks=ranks)
        # Held once the fetch has ended: each agent has answered checkpoint_dropped.
        pids = self.held(run, "checkpoint_fetched at step %d" % step)
        self.kill(run)
        before = self.cairn_json("show", "1.1", "--json")["checkpoints"]
        self.assertEqual([c for c in before if c["steps_completed"] == step], [], before)
        text = self.resume()
        self.assertNotIn("was not saved", self.cairn("logs", "1.1").stdout)
        trial = self.assert_went_on(text, pids)
        ids = [c["id"] for c in trial["checkpoints"] if c["steps_completed"] == step]
        self.assertEqual(len(ids), 1, trial["checkpoints"])
        self.assertEqual(self.exported(trial, step),
                         {"step%d" % r: str(step) for r in range(ranks)})
        for agent in self.agent_list:
            self.assertIn("again (its files were removed once it was confirmed): ", agent.text())

    def test_a_checkpoint_fetched_but_not_registered_is_registered_after_the_resume(self):
        self.checkpoint_fetched_not_registered(slots=(1,), ranks=1)

    def test_a_gang_checkpoint_fetched_but_not_registered_is_registered_after_the_resume(self):
        self.checkpoint_fetched_not_registered(slots=(1, 1), ranks=2)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
