"""A trial whose agent is lost between its placement and its launch (issue 17 item 8,
docs/peers.md "Placement"): a machine loss like any other — the trial starts on other slots,
not counted against max_restarts — never a trial marked ERROR.

The gap is made deterministic with the test hook CAIRN_TEST_LOSE_BEFORE_START=1
(tests/README.md "Test hooks"): `cairn run` says where it placed its first trial and waits,
before launching it, until that agent is lost; the test kills the agent (kill -9) then."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, wait_until  # noqa: E402
from test_peers_placement import Agent, PlacementCase  # noqa: E402

SINGLE = """name: lost-before-start
entrypoint: /usr/bin/python3 %s
searcher: {name: single, metric: val_loss, max_length: 6}
checkpoint: {period: 2}
max_restarts: 0
"""

GANG = """name: lost-before-start-gang
entrypoint: builtin:mlp
hyperparameters: {dataset: teacher, samples: 256, hidden: 16, batch_size: 64, threads: 1,
                  device: cpu}
searcher: {name: single, metric: val_loss, max_length: 2}
resources: {slots_per_trial: 2}
reproducibility: {seed: 5, deterministic: true}
max_restarts: 0
"""

HOOK = re.compile(r"test hook: trial 1\.1 placed on (\S+); waiting until it is lost")


class LostBeforeStartTest(PlacementCase):
    def run_with_hook(self, config, agents):
        self.write("exp.yaml", config)
        out_path = os.path.join(self.dir, "run.out")
        out = open(out_path, "w")
        self.addCleanup(out.close)
        peers = ",".join(a.address for a in agents)
        run = subprocess.Popen(
            [CAIRN, "run", "exp.yaml", "--slots", "0", "--peers", peers, "--key-file", self.key],
            cwd=self.dir, stdout=out, stderr=subprocess.STDOUT,
            env=self.cairn_env(self.env({"CAIRN_TEST_LOSE_BEFORE_START": "1",
                                         "CAIRN_HEARTBEAT_TIMEOUT": "2",
                                         "STEP_SECONDS": "0.05"})))
        self.addCleanup(lambda: run.poll() is None and (run.kill(), run.wait()))

        def output():
            with open(out_path) as f:
                return f.read()

        placed = wait_until(lambda: HOOK.search(output()), timeout=120,
                            what="the trial placed (the test hook's line)").group(1)
        victim = [a for a in agents if a.address == placed]
        self.assertEqual(len(victim), 1, output())
        victim[0].kill()  # kill -9
        self.assertEqual(run.wait(timeout=240), 0, output())
        return placed, output()

    def check_requeued(self, placed, text):
        self.assertIn("warning: lost agent %s" % placed, text)
        self.assertIn("trial 1.1: agent %s was lost before the trial started there" % placed,
                      text)
        self.assertIn("it starts on other slots (not counted against max_restarts)", text)
        self.assertNotIn("error: trial 1.1", text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        machines = {p["machine"] for p in trial["placement"]}
        self.assertNotIn(placed, machines, trial)
        return trial

    def test_a_trial_whose_agent_is_lost_before_its_launch_starts_elsewhere(self):
        agents = [Agent(self, "agent-a", 1), Agent(self, "agent-b", 1)]
        placed, text = self.run_with_hook(SINGLE % os.path.join(self.dir, "train.py"), agents)
        self.check_requeued(placed, text)
        self.assertEqual(len(re.findall(r"\[1\.1\] pid \d+ starts at 0", text)), 1, text)

    def test_a_gang_rank_whose_agent_is_lost_before_its_launch_restarts_the_gang(self):
        # Rank 0 starts on a live agent, rank 1's agent was lost: the gang stops and starts
        # again on the two agents left, as a gang whose machine is lost does.
        agents = [Agent(self, "agent-a", 1), Agent(self, "agent-b", 1),
                  Agent(self, "agent-c", 1)]
        placed, text = self.run_with_hook(GANG, agents)
        self.assertIn("warning: lost agent %s" % placed, text)
        self.assertIn("trial 1.1 lost its machine", text)
        self.assertNotIn("error: trial 1.1", text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        self.assertNotIn(placed, {p["machine"] for p in trial["placement"]}, trial)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
