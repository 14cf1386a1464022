"""Kept ranks that no coordinator adopts become orphans (issue 17 item 8, docs/peers.md
"Orphans on an agent"): when a killed coordinator's reattach window ends on a real `cairn
agent` with no `cairn resume` to adopt its ranks (test_peers_adopt.py), the agent closes the
ranks' control channels instead of killing them; each rank checkpoints into its orphan
directory on the agent and exits, and `cairn resume` waits for that, fetches the orphan and
adopts it: the trial goes on from the orphan's step, with the training metrics of the steps
it made while cairn was away, and no restart counted. A gang over two agents is adopted only
when every rank's part is there.

The trial holds at a step (after that step's checkpoint is registered) until the test
releases it, so the step the orphan is taken at is known: the one after the hold."""
import glob
import json
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, wait_until  # noqa: E402
from peer_testlib import alive  # noqa: E402
from test_peers_placement import Agent, PlacementCase  # noqa: E402

TRAIN = r"""
import os, sys, time
import cairn

ctx = cairn.init()
print("pid", os.getpid(), "starts at", ctx.steps_completed, flush=True)
# Trial x=2 of a grid (test_a_trial_waited_for_holds_no_other_trial_back) never holds, at
# its own pace.
other = ctx.hparams.get("x") == 2
hold_at = -1 if other else int(os.environ.get("HOLD_AT", "-1"))
step_seconds = os.environ.get("OTHER_STEP_SECONDS" if other else "STEP_SECONDS", "0.05")
release = os.environ.get("RELEASE", "")
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        if step == hold_at and release and not os.path.exists(release):
            # Held before the next step, past the checkpoint of this one: the channel's end
            # is seen at the next step's report or checkpoint_due, which checkpoints then.
            open(os.environ["HELD"] + ".%d" % ctx.rank, "w").close()
            while not os.path.exists(release):
                time.sleep(0.02)
        time.sleep(float(step_seconds))
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        print("step", step, flush=True)
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / ("rank%d" % ctx.rank)).write_text(str(step))
        if ctx.should_preempt():
            sys.exit(0)
    ctx.report_validation(step, {"val_loss": 1.0 / (step + 1)})
"""

CONFIG = """name: orphans
entrypoint: /usr/bin/python3 %s
searcher: {name: single, metric: val_loss, max_length: %d}
checkpoint: {period: 2}
max_restarts: 0
reattach_window: %d
resources: {slots_per_trial: %d}
"""

HOLD_AT = 6
LENGTH = 16


def orphans_of(agent_dir, trial="1.1", attempt=1):
    """The agent's orphan directory of `trial`'s `attempt` for this test's store:
    DIR/orphans/<owner>/<trial>/attempt-<N>, <owner> a hash of the coordinator's HOST:STORE#ID
    (one store per test)."""
    found = glob.glob(os.path.join(agent_dir, "orphans", "o*", trial))
    assert len(found) <= 1, found
    return os.path.join(found[0] if found else os.path.join(agent_dir, "orphans", "none", trial),
                        "attempt-%d" % attempt)


class OrphanTest(PlacementCase):
    def setUp(self):
        super().setUp()
        self.write("orphan_train.py", TRAIN)
        self.release = os.path.join(self.dir, "release")
        self.held = os.path.join(self.dir, "held")

    def cairn_env(self, env=None):
        # The store of the commands (CAIRN_DIR): the test directory's own, unless a test sets
        # self.store to another.
        full = super().cairn_env(env)
        if getattr(self, "store", None):
            full["CAIRN_DIR"] = self.store
        return full

    def start_run(self, agents, window, ranks=1):
        config = getattr(self, "config", CONFIG)
        self.write("exp.yaml", config % (os.path.join(self.dir, "orphan_train.py"), LENGTH, window,
                                         ranks))
        self.run_out = os.path.join(self.dir, "run.out")
        out = open(self.run_out, "w")
        self.addCleanup(out.close)
        env = {"HOLD_AT": str(HOLD_AT), "RELEASE": self.release, "HELD": self.held,
               "STEP_SECONDS": "0.05", "OTHER_STEP_SECONDS": "1.5"}
        run = subprocess.Popen([CAIRN, "run", "exp.yaml", "--slots", "0", "--peers",
                                ",".join(a.address for a in agents), "--key-file", self.key],
                               cwd=self.dir, env=self.cairn_env(self.env(env)), stdout=out,
                               stderr=subprocess.STDOUT)
        self.addCleanup(lambda: run.poll() is None and (run.kill(), run.wait()))
        # Whatever happens, the held ranks are let go when the test ends.
        self.addCleanup(lambda: open(self.release, "a").close())
        return run

    def output(self):
        with open(self.run_out) as f:
            return f.read()

    def rank_pids(self, text):
        return [int(p) for p in re.findall(r"pid (\d+) starts at \d+", text)]

    def kill_later(self, pid):
        self.addCleanup(lambda: alive(pid) and os.kill(pid, signal.SIGKILL))

    def held_then_killed(self, agents, window, ranks=1):
        """Runs the trial on `agents` until every rank holds after step HOLD_AT with that
        step's checkpoint registered, then kills `cairn run` with SIGKILL; returns the ranks'
        pids."""
        run = self.start_run(agents, window, ranks)
        try:
            wait_until(lambda: all(os.path.exists("%s.%d" % (self.held, r)) for r in range(ranks)),
                       timeout=120, what="every rank held after step %d" % HOLD_AT)
        except AssertionError as e:
            raise AssertionError("%s; cairn run wrote:\n%s" % (e, self.output())) from None

        def checkpointed():
            shown = self.cairn("show", "1.1", "--json")
            if shown.returncode != 0:
                return False
            steps = [c["steps_completed"] for c in json.loads(shown.stdout)["checkpoints"]]
            return HOLD_AT in steps

        wait_until(checkpointed, timeout=60, what="the checkpoint of step %d registered" % HOLD_AT)
        pids = wait_until(lambda: self.rank_pids(self.output()), timeout=30,
                          what="the ranks' pids")
        for pid in pids:
            self.kill_later(pid)
        placed = {p["machine"] for p in self.cairn_json("show", "1.1", "--json")["placement"]}
        run.kill()
        run.wait(timeout=30)
        for a in agents:
            if a.address in placed:
                a.wait_log("kept 1 ranks of")
        return pids

    def release_and_wait_for_orphans(self, agents, pids):
        open(self.release, "w").close()
        for a in agents:
            a.wait_log("its orphaned ranks exited")
        for pid in pids:
            wait_until(lambda: not alive(pid), timeout=30, what="the orphaned rank exited")

    def resume(self):
        return self.cairn("resume", "1", env=self.env({"CAIRN_KEY_FILE": self.key}), timeout=240)

    def resume_in_background(self):
        """`cairn resume` in the background: the process and its log file (resume.log)."""
        log = open(os.path.join(self.dir, "resume.log"), "w+")
        self.addCleanup(log.close)
        resume = subprocess.Popen([CAIRN, "resume", "1"], cwd=self.dir,
                                  env=self.cairn_env(self.env({"CAIRN_KEY_FILE": self.key})),
                                  stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: resume.poll() is None and (resume.kill(), resume.wait()))
        return resume, log

    def resume_waiting_for(self, agent):
        """`cairn resume` in the background, once it says it waits for the orphaned rank on
        `agent`: the process, its log file and that note."""
        resume, log = self.resume_in_background()
        note = "trial 1.1: waiting for its ranks on agent %s" % agent.address
        wait_until(lambda: note in open(log.name).read(), timeout=60,
                   what="resume waiting for the orphaned rank")
        return resume, log, note

    def assert_went_on_from_the_orphan(self, text, agents):
        step = HOLD_AT + 1  # the checkpoint the ranks took once their channel closed
        self.assertIn("trial 1.1: adopted the checkpoint it took at step %d while cairn was away"
                      % step, text)
        self.assertRegex(text, r"trial 1\.1: fetched the checkpoint it took at step %d while "
                         r"cairn was away from agent " % step)
        starts = [int(s) for s in re.findall(r"pid \d+ starts at (\d+)", text)]
        self.assertTrue(starts, text)
        self.assertTrue(all(s == step for s in starts), text)  # not from step HOLD_AT
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        # Step HOLD_AT + 1 was reported while no coordinator listened: the orphan kept it.
        metrics = self.cairn_json("metrics", "1.1", "--json")
        self.assertEqual([p["step"] for p in metrics["training"]], list(range(1, LENGTH + 1)))
        for a in agents:
            a.wait_log("removed the orphaned checkpoints of trial 1.1")
            # (The trial's next start there made its orphan directory again, empty.)
            self.assertFalse(os.path.exists(os.path.join(orphans_of(a.dir), str(step))))

    def test_ranks_past_the_window_checkpoint_as_orphans_and_resume_adopts_them(self):
        a = Agent(self, "agent-a", 1)
        pids = self.held_then_killed([a], window=2)
        line = a.wait_log("to checkpoint as orphans and exit")
        self.assertIn("asked 1 rank of session", line)
        # The window is at least the heartbeat timeout (10 s), whatever the config says.
        self.assertRegex(line, r"no coordinator resumed it within its reattach window of \d+ s")
        self.assertTrue(alive(pids[0]), "asked to checkpoint, not killed")
        self.release_and_wait_for_orphans([a], pids)
        orphan = os.path.join(orphans_of(a.dir), str(HOLD_AT + 1))
        self.assertTrue(os.path.exists(os.path.join(orphan, "cairn_orphan.json")))
        with open(os.path.join(orphan, "rank0")) as f:
            self.assertEqual(f.read(), str(HOLD_AT + 1))
        proc = self.resume()
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assert_went_on_from_the_orphan(proc.stdout + proc.stderr, [a])

    def test_resume_while_the_orphaned_rank_still_checkpoints_waits_for_it(self):
        # (A resume within the window adopts the kept rank instead: test_peers_adopt.py.)
        a = Agent(self, "agent-a", 1)
        pids = self.held_then_killed([a], window=2)
        line = a.wait_log("to checkpoint as orphans and exit")
        self.assertIn("no coordinator resumed it within its reattach window", line)
        resume, log, note = self.resume_waiting_for(a)
        self.assertTrue(alive(pids[0]))
        self.release_and_wait_for_orphans([a], pids)
        self.assertEqual(resume.wait(timeout=240), 0, open(log.name).read())
        text = open(log.name).read()
        self.assertLess(text.index(note), text.index("adopted the checkpoint"))
        self.assert_went_on_from_the_orphan(text, [a])

    def test_a_trial_waited_for_holds_no_other_trial_back(self):
        # Two trials on two agents: 1.1's rank holds (orphaned, still running there), 1.2's
        # goes on at 1.5 s a step, checkpoints as an orphan when the window ends and exits.
        # The resume waits for 1.1's rank, and runs 1.2 from its orphan to its end meanwhile.
        self.config = CONFIG.replace(
            "searcher: {name: single, metric: val_loss, max_length: %d}",
            "searcher: {name: grid, metric: val_loss, max_length: %d}\n"
            "hyperparameters: {x: {type: categorical, vals: [1, 2]}}")
        agents = [Agent(self, "agent-a", 1), Agent(self, "agent-b", 1)]
        pids = self.held_then_killed(agents, window=2)
        machine = self.cairn_json("show", "1.1", "--json")["placement"][0]["machine"]
        ran = [a for a in agents if a.address == machine][0]
        ran.wait_log("to checkpoint as orphans and exit")
        resume, log, note = self.resume_waiting_for(ran)

        def other_done():
            return self.cairn_json("show", "1.2", "--json")["state"] == "COMPLETED"

        wait_until(other_done, timeout=120,
                   what="trial 1.2 run to its end while 1.1's orphaned rank still runs")
        held = [p for p in pids if alive(p)]
        self.assertEqual(len(held), 1, "1.1's orphaned rank still held")
        text = open(log.name).read()
        self.assertIn("trial 1.2: adopted the checkpoint it took at step", text)
        # 1.1 was not recovered (it never started beside its own rank).
        self.assertNotIn("trial 1.1: adopted", text)
        self.release_and_wait_for_orphans([ran], held)
        self.assertEqual(resume.wait(timeout=240), 0, open(log.name).read())
        text = open(log.name).read()
        self.assertIn("trial 1.1: adopted the checkpoint it took at step %d while cairn was away"
                      % (HOLD_AT + 1), text)
        self.assertLess(text.index("trial 1.2: adopted"), text.index("trial 1.1: adopted"))
        for t in ("1.1", "1.2"):
            trial = self.cairn_json("show", t, "--json")
            self.assertEqual(trial["state"], "COMPLETED", trial)
            self.assertEqual(trial["restarts"], 0, trial)

    def test_ctrl_c_while_resume_waits_leaves_the_orphan_for_the_next_resume(self):
        a = Agent(self, "agent-a", 1)
        pids = self.held_then_killed([a], window=2)
        a.wait_log("to checkpoint as orphans and exit")
        resume, log, note = self.resume_waiting_for(a)
        resume.send_signal(signal.SIGINT)
        resume.wait(timeout=30)  # answered at once, not after the rank's 300 s
        text = open(log.name).read()
        self.assertIn("trial 1.1: stopped waiting for its ranks on agent %s (interrupted)"
                      % a.address, text)
        self.assertNotIn("starts at", text)  # nothing started beside the old rank
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "PAUSED")
        self.assertTrue(alive(pids[0]))
        self.release_and_wait_for_orphans([a], pids)
        proc = self.resume()
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assert_went_on_from_the_orphan(proc.stdout + proc.stderr, [a])

    def test_an_agent_that_cannot_be_reached_costs_only_its_orphan(self):
        agents = [Agent(self, "agent-a", 1), Agent(self, "agent-b", 1)]
        pids = self.held_then_killed(agents, window=2)
        machine = self.cairn_json("show", "1.1", "--json")["placement"][0]["machine"]
        ran, other = sorted(agents, key=lambda x: x.address != machine)
        ran.wait_log("to checkpoint as orphans and exit")
        self.release_and_wait_for_orphans([ran], pids)
        ran.kill()  # with its orphan in its directory
        self.assertTrue(os.path.isdir(os.path.join(orphans_of(ran.dir), str(HOLD_AT + 1))))
        proc = self.resume()
        text = proc.stdout + proc.stderr
        self.assertEqual(proc.returncode, 0, text)
        warning = ("warning: trial 1.1: agent %s cannot be reached; what its ranks checkpointed "
                   "there while cairn was away is not adopted" % ran.address)
        self.assertEqual(text.count(warning), 1, text)
        # Said once that it does not answer (the resume's check and its coordinator both
        # said it before).
        self.assertEqual(text.count("cannot connect to %s" % ran.address), 1, text)
        self.assertNotIn("adopted the checkpoint it took", text)
        # It goes on on the other agent from its latest registered checkpoint.
        starts = [int(s) for s in re.findall(r"pid \d+ starts at (\d+)", text)]
        self.assertEqual(starts, [HOLD_AT], text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        self.assertEqual(trial["placement"][0]["machine"], other.address)

    def test_an_orphan_of_an_earlier_attempt_is_dropped_never_adopted(self):
        # An attempt given up while its agent was cut off leaves its orphan on that agent: the
        # resume adopts only the trial's latest attempt's (here 1), and drops the other with
        # one line. (Made here by hand, as attempt 0, at a later step than the real orphan.)
        a = Agent(self, "agent-a", 1)
        pids = self.held_then_killed([a], window=2)
        a.wait_log("to checkpoint as orphans and exit")
        self.release_and_wait_for_orphans([a], pids)
        real = os.path.join(orphans_of(a.dir), str(HOLD_AT + 1))
        stale = os.path.join(orphans_of(a.dir, attempt=0), "9")
        os.makedirs(stale)
        with open(os.path.join(stale, "rank0"), "w") as f:
            f.write("9")
        with open(os.path.join(real, "cairn_orphan.json")) as f:
            marker = json.load(f)
        marker["step"] = 9
        with open(os.path.join(stale, "cairn_orphan.json"), "w") as f:
            json.dump(marker, f)
        proc = self.resume()
        text = proc.stdout + proc.stderr
        self.assertEqual(proc.returncode, 0, text)
        line = ("trial 1.1: dropping the orphaned checkpoints of attempt 0 at step 9 on agent %s: "
                "not of its latest attempt (1), never adopted" % a.address)
        self.assertEqual(text.count(line), 1, text)
        self.assertNotIn("step 9 while cairn was away", text)
        self.assert_went_on_from_the_orphan(text, [a])
        steps = [c["steps_completed"] for c in self.cairn_json("show", "1.1", "--json")["checkpoints"]]
        self.assertNotIn(9, steps)  # (period 2: the trial's own are even)
        self.assertFalse(os.path.exists(stale))

    def test_an_earlier_attempts_orphan_on_another_agent_is_dropped_too(self):
        # Every agent the resume reaches is asked, not only those of the trial's last
        # placement: another one can hold an earlier attempt's orphan only (an attempt given up
        # while that agent was cut off), which is dropped with one line, never adopted.
        agents = [Agent(self, "agent-a", 1), Agent(self, "agent-b", 1)]
        pids = self.held_then_killed(agents, window=2)
        machine = self.cairn_json("show", "1.1", "--json")["placement"][0]["machine"]
        ran, other = sorted(agents, key=lambda x: x.address != machine)
        ran.wait_log("to checkpoint as orphans and exit")
        self.release_and_wait_for_orphans([ran], pids)
        # The other agent's orphan of this store (the same owner directory) from attempt 0.
        owner = os.path.basename(os.path.dirname(os.path.dirname(orphans_of(ran.dir))))
        stale = os.path.join(other.dir, "orphans", owner, "1.1", "attempt-0", "9")
        os.makedirs(stale)
        with open(os.path.join(stale, "rank0"), "w") as f:
            f.write("9")
        with open(os.path.join(stale, "cairn_orphan.json"), "w") as f:
            json.dump({"step": 9, "world_size": 1}, f)
        proc = self.resume()
        text = proc.stdout + proc.stderr
        self.assertEqual(proc.returncode, 0, text)
        line = ("trial 1.1: dropping the orphaned checkpoints of attempt 0 at step 9 on agent %s: "
                "not of its latest attempt (1), never adopted" % other.address)
        self.assertEqual(text.count(line), 1, text)
        self.assertNotIn("step 9 while cairn was away", text)
        self.assert_went_on_from_the_orphan(text, [ran])
        other.wait_log("removed the orphaned checkpoints of trial 1.1")
        self.assertFalse(os.path.exists(stale))

    def test_two_stores_with_the_same_experiment_id_keep_their_orphans_apart(self):
        # Two stores whose experiments are both 1 use one agent: each store's orphan of trial
        # 1.1 is its own (per owner on the agent), and a resume of one neither waits for the
        # other's rank still running there, nor fetches or drops the other's orphan.
        a = Agent(self, "agent-a", 2)
        x_pids = self.held_then_killed([a], window=2)
        wait_until(lambda: a.text().count("to checkpoint as orphans and exit") >= 1, timeout=60,
                   what="store X's rank asked to checkpoint")
        x_trial = os.path.dirname(orphans_of(a.dir))  # the only owner so far
        # Store Y: its own directory, its own release (X's rank stays held, running).
        x_release = self.release
        self.store = os.path.join(self.dir, "store-y")
        self.cairn("init", self.store, check=0)
        self.release = os.path.join(self.dir, "release-y")
        self.held = os.path.join(self.dir, "held-y")
        y_pids = self.held_then_killed([a], window=2)
        wait_until(lambda: a.text().count("to checkpoint as orphans and exit") >= 2, timeout=60,
                   what="store Y's rank asked to checkpoint")
        open(self.release, "w").close()
        for pid in y_pids:
            wait_until(lambda: not alive(pid), timeout=30, what="store Y's orphaned rank exited")
        owners = glob.glob(os.path.join(a.dir, "orphans", "o*", "1.1"))
        self.assertEqual(len(owners), 2, owners)
        y_trial = next(o for o in owners if o != x_trial)
        step = str(HOLD_AT + 1)
        self.assertTrue(os.path.exists(os.path.join(y_trial, "attempt-1", step, "rank0")))
        self.assertTrue(all(alive(p) for p in x_pids))
        self.assertFalse(os.path.exists(os.path.join(x_trial, "attempt-1", step)))

        proc = self.resume()  # store Y's
        text = proc.stdout + proc.stderr
        self.assertEqual(proc.returncode, 0, text)
        self.assertNotIn("waiting for its ranks", text)  # X's rank is not Y's
        self.assertIn("trial 1.1: adopted the checkpoint it took at step %s while cairn was away"
                      % step, text)
        self.assertEqual(self.cairn_json("show", "1.1", "--json")["state"], "COMPLETED")
        self.assertTrue(os.path.isdir(x_trial))

        # Store X's rank checkpoints now; its resume adopts its own orphan.
        self.store, self.release = None, x_release
        self.release_and_wait_for_orphans([a], x_pids)
        self.assertTrue(os.path.exists(os.path.join(x_trial, "attempt-1", step, "rank0")))
        proc = self.resume()
        text = proc.stdout + proc.stderr
        self.assertEqual(proc.returncode, 0, text)
        self.assertIn("trial 1.1: adopted the checkpoint it took at step %s while cairn was away"
                      % step, text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)

    def gang_orphans(self):
        a = Agent(self, "agent-a", 1)
        b = Agent(self, "agent-b", 1)
        pids = self.held_then_killed([a, b], window=2, ranks=2)
        for agent in (a, b):
            agent.wait_log("to checkpoint as orphans and exit")
        self.release_and_wait_for_orphans([a, b], pids)
        placement = self.cairn_json("show", "1.1", "--json")["placement"]
        by_rank = {p["rank"]: next(x for x in (a, b) if x.address == p["machine"])
                   for p in placement}
        self.assertNotEqual(by_rank[0].address, by_rank[1].address, placement)
        step = str(HOLD_AT + 1)
        for rank, marker in ((0, "cairn_orphan.json"), (1, "cairn_orphan.rank1.json")):
            self.assertTrue(os.path.exists(
                os.path.join(orphans_of(by_rank[rank].dir), step, marker)))
        return a, b, by_rank

    def test_a_gang_over_two_agents_is_adopted_with_every_ranks_part(self):
        a, b, _ = self.gang_orphans()
        proc = self.resume()
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        text = proc.stdout + proc.stderr
        self.assertRegex(text, r"fetched the checkpoint it took at step %d while cairn was away "
                         r"from agent \S+, \S+ " % (HOLD_AT + 1))
        self.assert_went_on_from_the_orphan(text, [a, b])
        exported = os.path.join(self.dir, "export")
        self.cairn("export", "1.1@latest", exported, check=0)
        self.assertTrue(os.path.exists(os.path.join(exported, "rank0")))

    def test_a_gang_orphan_missing_a_ranks_marker_is_not_adopted(self):
        a, b, by_rank = self.gang_orphans()
        os.remove(os.path.join(orphans_of(by_rank[1].dir), str(HOLD_AT + 1),
                               "cairn_orphan.rank1.json"))
        proc = self.resume()
        text = proc.stdout + proc.stderr
        self.assertEqual(proc.returncode, 0, text)
        self.assertIn("orphaned checkpoint remote-%d not adopted: rank 1 of 2 did not finish "
                      "writing it" % (HOLD_AT + 1), text)
        self.assertNotIn("adopted the checkpoint it took", text)
        starts = [int(s) for s in re.findall(r"pid \d+ starts at (\d+)", text)]
        self.assertTrue(starts and all(s == HOLD_AT for s in starts), text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
