"""Two coordinators' connections on one agent each have their control socket, and a rank of
one cannot speak on the other's (docs/peers.md "The control channel through the agent"):
the agent tells connections apart by the kernel's SO_PEERCRED, not by the socket's address.

A victim trial runs for one `cairn run`; a second `cairn run` on the same agent starts a
hostile trial that connects to every control socket of the agent's but its own and says
hello as the victim's trial: each connection is closed at once with one agent log line
naming the victim's connection, and the victim trains on untouched. The hostile rank's own
child that left its process group (setsid) is still the rank's, and is served."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, wait_until  # noqa: E402
from test_peers_placement import Agent, PlacementCase  # noqa: E402

# Trains one step per 50 ms until $STOP_FILE exists, then the rest at once.
VICTIM = r"""
import os, time
import cairn

ctx = cairn.init()
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        if not os.path.exists(os.environ["STOP_FILE"]):
            time.sleep(0.05)
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
    ctx.report_validation(step, {"val_loss": 1.0 / (step + 1)})
"""

HOSTILE = r"""
import glob, os, socket, subprocess
import cairn

ctx = cairn.init()
mine = os.environ["CAIRN_CONTROL"][len("unix:"):]
for path in sorted(glob.glob(os.path.join(os.path.dirname(mine), "*.sock"))):
    if path == mine:
        continue
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(path)
    try:
        s.sendall(b'{"type": "hello", "protocol": 1, "trial": "1.1", "rank": 0}\n')
        answer = s.recv(4096)
    except OSError as e:
        answer = b""
    print("other socket", os.path.basename(path), "answered", repr(answer), flush=True)
child = subprocess.run([
    "/usr/bin/python3", "-c",
    "import os, socket, sys; os.setsid(); s = socket.socket(socket.AF_UNIX); s.settimeout(10); "
    "s.connect(sys.argv[1]); s.sendall(b'{\"type\": \"nonsense\"}\\n'); "
    "print('child answered', repr(s.recv(4096)))", mine], capture_output=True, text=True,
    timeout=30)
print(child.stdout.strip(), child.stderr.strip(), flush=True)
for op in ctx.operations():
    ctx.report_validation(op.length, {"val_loss": 1.0})
"""

CONFIG = """name: %s
entrypoint: /usr/bin/python3 %s
searcher: {name: single, metric: val_loss, max_length: %d}
max_restarts: 0
"""


class ControlOwnerTest(PlacementCase):
    def test_a_rank_cannot_speak_on_another_connections_control_socket(self):
        agent = Agent(self, "agent-a", 2)
        self.write("victim.py", VICTIM)
        self.write("hostile.py", HOSTILE)
        self.write("victim.yaml", CONFIG % ("victim", os.path.join(self.dir, "victim.py"), 200))
        self.write("hostile.yaml", CONFIG % ("hostile", os.path.join(self.dir, "hostile.py"), 1))
        stop = os.path.join(self.dir, "stop")
        env = self.env({"STOP_FILE": stop})
        victim = subprocess.Popen(
            [CAIRN, "run", "victim.yaml", "--slots", "0", "--peers", agent.address,
             "--key-file", self.key], cwd=self.dir, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        try:
            control = os.path.join(agent.dir, "control")
            wait_until(lambda: "started rank" in agent.text() and os.path.isdir(control)
                       and any(n.endswith(".sock") for n in os.listdir(control)),
                       timeout=60, what="the victim's rank and its control socket")
            victim_connection = re.search(r"started rank \d+ of (\S+):", agent.text()).group(1)
            hostile = self.run_cairn("run", "hostile.yaml", "--slots", "0", "--peers",
                                     agent.address, timeout=120, extra={"STOP_FILE": stop})
            text = hostile.stdout + hostile.stderr
            self.assertEqual(hostile.returncode, 0, text)
            # Closed at once, unread: nothing came back.
            others = re.findall(r"other socket (\S+) answered (.*)", text)
            self.assertEqual(len(others), 1, text)
            self.assertEqual(others[0][1], "b''", text)
            refused = [l for l in agent.text().splitlines()
                       if "refused a control connection" in l]
            self.assertEqual(len(refused), 1, agent.text())
            self.assertRegex(refused[0], r"control channel of %s: refused a control connection "
                             r"from process \d+: not a rank running on this connection, nor "
                             r"started by one$" % re.escape(victim_connection))
            # The rank's own child in a session of its own reached the coordinator, which
            # answered its nonsense.
            self.assertRegex(text, r"child answered b'\{\"type\":\s*\"error\"")
        finally:
            open(stop, "w").close()
            out = victim.communicate(timeout=120)[0]
        self.assertEqual(victim.returncode, 0, out)
        metrics = self.cairn_json("metrics", "1.1", "--json")
        self.assertEqual([p["step"] for p in metrics["training"]], list(range(1, 201)))
        self.assertEqual(self.cairn_json("show", "1.1", "--json")["state"], "COMPLETED")


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
