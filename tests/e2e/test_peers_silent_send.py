"""An agent blocked sending to a link gone silent (issue 17 item 8, docs/peers.md
"Reattach"): a rank on a real `cairn agent` prints far more than the socket buffers of a
connection that stopped carrying bytes can hold (no FIN, no reset: a NAT that forgot it),
so the agent's session thread is blocked in a send when the coordinator resumes the
session on a new connection. The claim makes that send let go at once (not at its 30 s
deadline, past the heartbeat timeout), the frames it had not had acknowledged are sent
again on the new connection, and the trial goes on: same process, no restart, every line
of its output once in `cairn logs`.

The silent link is test_peers_reattach.py's proxy (`freeze()`)."""
import os
import re
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from test_peers_placement import Agent, PlacementCase  # noqa: E402
from peer_testlib import BackgroundRun, alive  # noqa: E402
from test_peers_reattach import Proxy  # noqa: E402

# Once the file BLAST names exists, the rank prints BLAST_LINES numbered lines of 100
# bytes at once (far more than the socket buffers of a silent connection hold), then goes on.
TRAIN = r"""
import os, sys, time
import cairn

ctx = cairn.init()
print("pid", os.getpid(), "starts at", ctx.steps_completed, flush=True)
step = ctx.steps_completed
blasted = False
pad = "x" * 80
for op in ctx.operations():
    while step < op.length:
        time.sleep(float(os.environ.get("STEP_SECONDS", "0.05")))
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        print("step", step, flush=True)
        if not blasted and os.path.exists(os.environ["BLAST"]):
            blasted = True
            lines = int(os.environ["BLAST_LINES"])
            for i in range(lines):
                sys.stdout.write("blast %08d %s\n" % (i, pad))
            sys.stdout.flush()
            print("blast done", flush=True)
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / "step").write_text(str(step))
    ctx.report_validation(step, {"val_loss": 1.0 / (step + 1)})
"""

CONFIG = """name: silent-send
entrypoint: /usr/bin/python3 %s
searcher: {name: single, metric: val_loss, max_length: 20}
checkpoint: {period: 2}
max_restarts: 0
"""

LINES = 240000  # 24 MB of output


class SilentSendTest(BackgroundRun, PlacementCase):
    def setUp(self):
        super().setUp()
        self.write("train.py", TRAIN)
        self.write("exp.yaml", CONFIG % os.path.join(self.dir, "train.py"))

    def test_a_send_blocked_on_a_silent_link_lets_go_when_the_session_is_resumed(self):
        a = Agent(self, "agent-a", 1)
        proxy = Proxy(self, int(a.address.rsplit(":", 1)[1]))
        flag = os.path.join(self.dir, "blast")
        run = self.start_background_run(proxy.address, env={"BLAST": flag, "BLAST_LINES": str(LINES)})
        self.wait_output(r"\[1\.1\] step 3\n")
        pid = self.rank_pids(self.output())[0]
        self.addCleanup(lambda: alive(pid) and os.kill(pid, signal.SIGKILL))
        proxy.freeze()  # neither end sees the connection end; new connections work
        with open(flag, "w"):
            pass
        # The coordinator hears nothing and resumes the session on a new connection; the
        # agent's thread, blocked sending the rank's output into the silent one, lets go.
        self.wait_output(r"the connection dropped \(\S+: nothing heard for [\d.]+ s\)")
        self.assertEqual(run.wait(timeout=240), 0, self.output()[-3000:])
        text = self.output()
        self.assertIn("agent %s: connection resumed" % proxy.address, text)
        self.assertNotIn("lost agent", text)
        # It was a send that let go (not the wait between requests, which always could).
        released = a.wait_log("released: a new connection resumes its session")
        self.assertIn("sending to", released)
        self.assertNotIn("lost its machine", text)
        self.assertEqual(self.rank_pids(text), [pid], text[-3000:])
        a.wait_log("resumed session")
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        metrics = self.cairn_json("metrics", "1.1", "--json")
        self.assertEqual([p["step"] for p in metrics["training"]], list(range(1, 21)))
        # Every line of the rank's output once, in order.
        logs = self.cairn("logs", "1.1", check=0).stdout
        blasts = [int(n) for n in re.findall(r"^blast (\d{8}) x{80}$", logs, re.M)]
        self.assertEqual(len(blasts), LINES, "lines missing or twice")
        self.assertEqual(blasts, list(range(LINES)))
        self.assertEqual(len(re.findall(r"^blast done$", logs, re.M)), 1)
        self.assertEqual([int(s) for s in re.findall(r"^step (\d+)$", logs, re.M)],
                         list(range(1, 21)))


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
