"""`cairn resume`'s adoption loses none of a rank's output (issue 17 item 8, docs/peers.md
"Adoption", "No output is lost"): a rank on a real `cairn agent` prints numbered lines
without pause; its `cairn run --slots 0` is stopped (SIGSTOP: it reads nothing more, so the
agent's output frames pile up unread in its socket), then killed with SIGKILL, which
throws away those frames; a `cairn resume` adopts the rank, and `cairn logs` holds every
line exactly once, in order: the agent kept what it had relayed and the dead coordinator
never confirmed, and sent it again from where the coordinator's output file ends."""
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

# Prints "n K" for K = 1, 2, … continuously, LINES per unit, and writes the last K it
# printed to $COUNT_FILE (so the test knows how far it got while cairn read nothing).
TRAIN = r"""
import os, sys, time
import cairn

ctx = cairn.init()
print("pid", os.getpid(), "starts at", ctx.steps_completed, flush=True)
lines = int(os.environ["LINES"])
count = os.environ["COUNT_FILE"]
n = 0
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        for _ in range(lines):
            n += 1
            print("n %d" % n, flush=True)
            time.sleep(0.002)
        with open(count + ".tmp", "w") as f:
            f.write(str(n))
        os.replace(count + ".tmp", count)
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        if ctx.should_preempt():
            sys.exit(0)
    ctx.report_validation(step, {"val_loss": 1.0 / (step + 1)})
"""

CONFIG = """name: adopt-output
entrypoint: /usr/bin/python3 %s
searcher: {name: single, metric: val_loss, max_length: %d}
max_restarts: 0
reattach_window: 600
"""


class AdoptOutputTest(PlacementCase):
    LENGTH = 150  # units of LINES lines: about 12 s of output
    LINES = 40

    def setUp(self):
        super().setUp()
        self.write("train.py", TRAIN)
        self.count_file = os.path.join(self.dir, "count")

    def run_env(self):
        return self.env({"LINES": str(self.LINES), "COUNT_FILE": self.count_file,
                         "CAIRN_KEY_FILE": self.key})

    def printed(self):
        try:
            with open(self.count_file) as f:
                return int(f.read() or 0)
        except (OSError, ValueError):
            return 0

    def test_every_line_a_rank_printed_around_the_kill_is_logged_once(self):
        a = Agent(self, "agent-a", 1)
        self.write("exp.yaml", CONFIG % (os.path.join(self.dir, "train.py"), self.LENGTH))
        run_out = os.path.join(self.dir, "run.out")
        out = open(run_out, "w")
        self.addCleanup(out.close)
        run = subprocess.Popen([CAIRN, "run", "exp.yaml", "--slots", "0", "--peers", a.address],
                               cwd=self.dir, env=self.cairn_env(self.run_env()), stdout=out,
                               stderr=subprocess.STDOUT)
        self.addCleanup(lambda: run.poll() is None and (run.kill(), run.wait()))

        def output():
            with open(run_out) as f:
                return f.read()

        started = wait_until(lambda: re.search(r"\[1\.1\] pid (\d+) starts at 0", output()),
                             timeout=90, what="the rank's start")
        pid = int(started.group(1))
        self.addCleanup(lambda: alive(pid) and os.kill(pid, signal.SIGKILL))
        wait_until(lambda: "[1.1] n 200\n" in output(), timeout=60, what="line 200 shown")
        # The coordinator reads nothing from now on; the rank goes on printing, and what the
        # agent relays waits in the dead coordinator's socket.
        run.send_signal(signal.SIGSTOP)
        at_stop = self.printed()
        wait_until(lambda: self.printed() >= at_stop + 3 * self.LINES, timeout=30,
                   what="more lines printed while cairn reads nothing")
        run.kill()
        run.wait(timeout=30)
        a.wait_log("kept 1 ranks of")
        self.assertTrue(alive(pid))
        last_before = self.printed()
        self.assertLess(last_before, self.LENGTH * self.LINES)  # still printing

        proc = self.cairn("resume", "1", env=self.run_env(), timeout=240)
        text = proc.stdout + proc.stderr
        self.assertEqual(proc.returncode, 0, text)
        self.assertIn("trial 1.1: adopted its rank on %s (pid %d)" % (a.address, pid), text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)

        log = self.cairn("logs", "1.1").stdout
        numbers = [int(k) for k in re.findall(r"^(?:\S+ )*n (\d+)$", log, re.M)]
        total = self.LENGTH * self.LINES
        missing = sorted(set(range(1, total + 1)) - set(numbers))
        self.assertEqual(missing, [], "lines missing from the log (first: %s; printed %d by "
                         "the kill)" % (missing[:5], last_before))
        self.assertEqual(numbers, list(range(1, total + 1)))  # each once, in order
        self.assertNotIn("bytes of output were lost", log)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
