"""A rank on an agent makes its output file on the coordinator only when its first byte
arrives (launcher.h take_new_outputs, docs/peers.md "Running ranks"): a trial that prints
nothing leaves no directory under .cairn/work, and one that prints is shown live, while it
runs, not only when it ends."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, CairnTestCase, wait_until  # noqa: E402
from peer_testlib import Agent, agent_env, peer_home  # noqa: E402

SILENT = r"""
import cairn

ctx = cairn.init()
for op in ctx.operations():
    ctx.report_validation(op.length, {"val_loss": 1.0})
"""

# Prints one line, then waits (bounded) for the test's go-ahead before it reports.
TALKS = r"""
import os, sys, time
import cairn

ctx = cairn.init()
print("HELLO from the agent", flush=True)
deadline = time.monotonic() + 120
while not os.path.exists(os.environ["GO_FILE"]) and time.monotonic() < deadline:
    time.sleep(0.02)
for op in ctx.operations():
    ctx.report_validation(op.length, {"val_loss": 1.0})
"""


def config(script):
    return ("name: lazy\nentrypoint: [/usr/bin/python3, %s]\n"
            "searcher: {name: single, metric: val_loss, max_length: 1}\nmax_restarts: 0\n"
            % script)


class LazyOutputTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.key = peer_home(self)
        self.write("silent.py", SILENT)
        self.write("talks.py", TALKS)
        self.write("silent.yaml", config("silent.py"))
        self.write("talks.yaml", config("talks.py"))
        self.go = os.path.join(self.dir, "go")

    def run_cairn(self, *args):
        proc = subprocess.run([CAIRN] + list(args), cwd=self.dir, env=self.env(),
                              capture_output=True, text=True, timeout=240)
        self.assertEqual(proc.returncode, 0, proc.stdout[-2000:] + proc.stderr[-2000:])
        return proc.stdout

    def env(self):
        return agent_env(self, {"GO_FILE": self.go})

    def work(self, experiment, trial):
        return os.path.join(self.dir, ".cairn", "work", str(experiment), str(trial))

    def test_a_silent_trial_on_an_agent_makes_no_work_directory(self):
        # Locally the trial's stdout is its output file: the directory is made (which also
        # shows this test looks where cairn puts it).
        self.run_cairn("run", "silent.yaml", "--slots", "1")
        self.assertTrue(os.path.isfile(os.path.join(self.work(1, 1), "output.log")))
        agent = Agent(self, key=self.key, slots=1)
        self.run_cairn("run", "silent.yaml", "--slots", "0", "--peers", agent.address,
                       "--key-file", self.key)
        self.assertEqual(self.cairn_json("show", "2.1", "--json")["state"], "COMPLETED")
        self.assertFalse(os.path.exists(self.work(2, 1)), os.listdir(os.path.dirname(
            self.work(2, 1))) if os.path.exists(os.path.dirname(self.work(2, 1))) else "")
        # Nothing to show, and nothing missing: logs has cairn's own lines only.
        self.assertNotIn("Traceback", self.run_cairn("logs", "2.1"))

    def test_a_trial_on_an_agent_is_shown_from_its_first_byte_while_it_runs(self):
        agent = Agent(self, key=self.key, slots=1)
        out_path = os.path.join(self.dir, "run.out")
        with open(out_path, "w") as out:
            run = subprocess.Popen([CAIRN, "run", "talks.yaml", "--slots", "0", "--peers",
                                    agent.address, "--key-file", self.key],
                                   cwd=self.dir, env=self.env(), stdout=out,
                                   stderr=subprocess.STDOUT)
        self.addCleanup(lambda: run.poll() is None and (run.kill(), run.wait()))

        def shown():
            with open(out_path) as f:
                return "[1.1] HELLO from the agent" in f.read()
        # The trial waits for the go-ahead: the line can only come from the live path (the
        # file made at the first byte, then followed), not from the drain at its end.
        wait_until(shown, timeout=120, what="the trial's first line shown while it runs")
        self.assertIsNone(run.poll())
        self.assertTrue(os.path.isfile(os.path.join(self.work(1, 1), "output.log")))
        open(self.go, "w").close()
        self.assertEqual(run.wait(timeout=120), 0)
        logs = self.run_cairn("logs", "1.1")
        self.assertEqual(logs.count("HELLO from the agent"), 1, logs)


if __name__ == "__main__":
    cairn_testlib.main()
