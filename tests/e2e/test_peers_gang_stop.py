"""Issue 17 item 8: a rank that dies stops the whole gang on every machine. Rank 1 of a
2-rank gang on agent B exits with status 3 while rank 0, on agent A, sleeps in a call that
would last 300 s: A kills rank 0 at once (its log says signal 9), and the trial restarts
and completes long before rank 0 could have ended by itself."""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, CairnTestCase  # noqa: E402
import peer_testlib  # noqa: E402
from peer_testlib import agent_env, alive, peer_home  # noqa: E402

TRAIN = r"""
import os, sys, time, cairn
ctx = cairn.init()
first = os.environ["CAIRN_ATTEMPT"] == "1"
print("rank", ctx.rank, "pid", os.getpid(), "attempt", os.environ["CAIRN_ATTEMPT"], flush=True)
if first and ctx.rank == 1:
    time.sleep(0.5)
    sys.exit(3)
if first and ctx.rank == 0:
    time.sleep(300)
for op in ctx.operations():
    if ctx.rank == 0:
        ctx.report_validation(op.length, {"val_loss": 1.0})
"""

CONFIG = """name: gang-stop
entrypoint: [python3, train.py]
searcher: {name: single, metric: val_loss, max_length: 1}
resources: {slots_per_trial: 2}
max_restarts: 1
"""


class GangStop(CairnTestCase):
    def test_a_rank_that_dies_on_one_agent_stops_its_gang_on_the_other(self):
        key = peer_home(self)
        self.write("train.py", TRAIN)
        self.write("exp.yaml", CONFIG)
        a = peer_testlib.Agent(self, "--no-announce", key=key, slots=1)
        b = peer_testlib.Agent(self, "--no-announce", key=key, slots=1)
        start = time.monotonic()
        proc = self.cairn("run", "exp.yaml", "--slots", "0", "--peers",
                          a.address + "," + b.address, "--key-file", key, env=agent_env(self),
                          timeout=240)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        # Far below rank 0's 300 s sleep: it was stopped, not waited for.
        self.assertLess(time.monotonic() - start, 120, proc.stdout)
        self.assertIn("started on %s ×1, %s ×1" % (a.address, b.address), proc.stdout)
        self.assertIn("rank 1 exited with status 3", proc.stdout + proc.stderr)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 1, trial)
        first = re.search(r"\[1\.1\] rank 0 pid (\d+) attempt 1", proc.stdout)
        self.assertTrue(first, proc.stdout)
        self.assertFalse(alive(int(first.group(1))))
        # Agent A ended the first attempt's rank 0 with SIGKILL (its group), agent B saw its
        # rank exit with status 3.
        self.assertRegex(a.text(), r"rank \d+ of \S+ ended \(code \d+, signal 9\)")
        self.assertRegex(b.text(), r"rank \d+ of \S+ ended \(code 3, signal 0\)")

    def test_sigterm_logs_each_connection_it_closes_and_its_killed_ranks(self):
        # Item 1, one log line per event: the stop ends a connection with a rank running.
        key = peer_home(self)
        self.write("train.py", TRAIN)
        self.write("exp.yaml", CONFIG.replace("slots_per_trial: 2", "slots_per_trial: 1"))
        a = peer_testlib.Agent(self, "--no-announce", key=key, slots=1)
        out_path = os.path.join(self.dir, "run.out")
        with open(out_path, "w") as out:
            run = subprocess.Popen([CAIRN, "run", "exp.yaml", "--slots", "0", "--peers",
                                    a.address, "--key-file", key], cwd=self.dir,
                                   env=self.cairn_env(agent_env(self)), stdout=out,
                                   stderr=subprocess.STDOUT)
        self.addCleanup(lambda: run.poll() is None and (run.kill(), run.wait()))
        # Attempt 1's rank 0 sleeps for 300 s: running when the agent stops.
        a.line(lambda l: "started rank" in l, "the rank's start")
        code, rest = a.stop()
        self.assertEqual(code, 0, rest)
        lines = rest.splitlines()
        self.assertRegex(lines[-1], r"stopped \(SIGTERM\)$")
        closed = [l for l in lines if ": the agent stops" in l]
        self.assertEqual(len(closed), 1, rest)
        self.assertRegex(closed[0], r"closed 127\.0\.0\.1:\d+: the agent stops; its 1 running "
                         r"rank is killed$")


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
