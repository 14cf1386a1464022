"""Smaller pieces of issue 17 on a real `cairn agent` (docs/peers.md): builtin:mlp runs the
agent's own cairn binary; placement asks an agent whether it has the data before a trial
is placed there; the agent's directory is garbage-collected."""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, CairnTestCase, wait_until  # noqa: E402

MLP = """name: mlp-remote
entrypoint: builtin:mlp
hyperparameters: {dataset: teacher, samples: 256, hidden: 16, batch_size: 64, threads: 1,
                  device: cpu}
searcher: {name: single, metric: val_loss, max_length: 2}
reproducibility: {seed: 5, deterministic: true}
max_restarts: 0
"""


class Agent:
    """A `cairn agent` on loopback, from `binary`, with its log in a file."""

    def __init__(self, test, name, slots, *extra, binary=CAIRN):
        self.dir = os.path.join(test.dir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.log = os.path.join(test.dir, name + ".log")
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(
                [binary, "agent", "--dir", self.dir, "--slots", str(slots), "--key-file",
                 test.key, "--listen", "127.0.0.1:0", "--no-announce"] + list(extra),
                cwd=test.dir, env=test.cairn_env(test.env()), stdin=subprocess.DEVNULL,
                stdout=log, stderr=log)
        test.addCleanup(self.kill)
        line = self.wait_log("listening on")
        self.address = re.search(r"listening on (\S*:\d+) ", line).group(1)

    def text(self):
        with open(self.log) as f:
            return f.read()

    def lines(self, needle):
        return [l for l in self.text().splitlines() if needle in l]

    def wait_log(self, needle, timeout=60):
        wait_until(lambda: self.lines(needle), timeout=timeout,
                   what="%r in the agent's log" % needle)
        return self.lines(needle)[0]

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)


class AgentOpsCase(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.home = os.path.join(self.dir, "home")
        os.makedirs(self.home)
        self.key = os.path.join(self.dir, "cluster.key")
        self.cairn("agent", "--new-key", self.key, check=0, env=self.env())

    def env(self, extra=None):
        base = {"HOME": self.home, "XDG_CONFIG_HOME": None, "XDG_STATE_HOME": None,
                "CAIRN_KEY_FILE": None}
        base.update(extra or {})
        return base

    def copy_binary(self, folder):
        path = os.path.join(self.dir, folder, "cairn")
        os.makedirs(os.path.dirname(path))
        shutil.copy2(CAIRN, path)
        return path


class BuiltinOnAgentTest(AgentOpsCase):
    def test_builtin_mlp_runs_the_agents_own_cairn_binary(self):
        agent_bin = self.copy_binary("agent-install")
        coordinator_bin = self.copy_binary("coordinator-install")
        agent = Agent(self, "agent", 1, binary=agent_bin)
        self.write("mlp.yaml", MLP)
        self.write(".cairnignore", "agent-install/\ncoordinator-install/\n")
        log = open(os.path.join(self.dir, "run.log"), "w")
        self.addCleanup(log.close)
        run = subprocess.Popen(
            [coordinator_bin, "run", "mlp.yaml", "--slots", "0", "--peers", agent.address,
             "--key-file", self.key], cwd=self.dir, env=self.cairn_env(self.env()),
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: run.poll() is None and run.kill())
        # Once the coordinator runs its image, its binary's path goes away: the agent cannot
        # run the coordinator's cairn by that path, only its own.
        wait_until(lambda: os.readlink("/proc/%d/exe" % run.pid) == coordinator_bin,
                   what="the coordinator's exec")
        os.unlink(coordinator_bin)
        self.assertEqual(run.wait(timeout=240), 0, open(os.path.join(self.dir, "run.log")).read())
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["placement"][0]["machine"], agent.address, trial)
        started = agent.lines("started rank")
        self.assertEqual(len(started), 1, agent.text())
        self.assertIn(": %s in work/" % agent_bin, started[0])
        self.assertTrue(self.cairn_json("metrics", "1.1", "--json")["validation"])


if __name__ == "__main__":
    from cairn_testlib import main
    main()
