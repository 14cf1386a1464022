"""MASTER_PORT of a gang whose rank 0 runs on an agent (docs/peers.md "Before a gang over
machines starts"): the port is one that rank 0's agent found free on its machine and held
listening while the other machines probed MASTER_ADDR:MASTER_PORT itself; it is released
before rank 0 starts, which binds it, and rank 1 on another machine connects there — a
rendezvous of the torchrun kind, on real sockets."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CairnTestCase  # noqa: E402
from peer_testlib import agent_env, peer_home  # noqa: E402
from test_peers_placement import Agent  # noqa: E402

# Rank 0 listens on MASTER_PORT (every address, as torch's TCPStore does); rank 1 connects
# to MASTER_ADDR:MASTER_PORT, sends a line, and rank 0 prints what it got.
TRAIN = r"""
import os, socket, time
import cairn

ctx = cairn.init()
rank = int(os.environ["RANK"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
print("rank", rank, "MASTER", addr, port, flush=True)
if rank == 0:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("0.0.0.0", port))
    s.listen(1)
    s.settimeout(60)
    conn, _ = s.accept()
    print("rank 0 got", conn.recv(100).decode().strip(), flush=True)
else:
    deadline = time.monotonic() + 60
    while True:
        try:
            c = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    c.sendall(b"hello from rank 1\n")
    c.close()
step = 0
for op in ctx.operations():
    step = op.length
    ctx.report_validation(step, {"val_loss": 1.0})
"""

CONFIG = """name: master-port
entrypoint: [/usr/bin/python3, %s]
searcher: {name: single, metric: val_loss, max_length: 1}
resources: {slots_per_trial: 2}
max_restarts: 0
"""


class MasterPortTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.key = peer_home(self)
        self.write("train.py", TRAIN)
        self.write("exp.yaml", CONFIG % os.path.join(self.dir, "train.py"))

    def env(self, extra=None):
        return agent_env(self, extra)

    def test_rank_0_on_an_agent_gets_a_port_its_agent_held_free(self):
        a = Agent(self, "agent-a", 1)
        b = Agent(self, "agent-b", 1)
        proc = self.cairn("run", "exp.yaml", "--slots", "0", "--peers",
                          a.address + "," + b.address, "--key-file", self.key, env=self.env(),
                          timeout=240)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        trial = self.cairn_json("show", "1.1", "--json")
        host = {a.address: a, b.address: b}[trial["placement"][0]["machine"]]
        other = a if host is b else b
        ports = set()
        for rank in (0, 1):
            out = self.cairn("logs", "1.1", "--rank", str(rank), check=0).stdout
            m = re.search(r"rank %d MASTER (\S+) (\d+)" % rank, out)
            self.assertTrue(m, out)
            ports.add(int(m.group(2)))
        self.assertEqual(len(ports), 1, ports)
        port = ports.pop()
        # The port rank 0's agent held, and released before rank 0 started; the other agent
        # held none.
        log = host.text()
        held = log.index("holding MASTER_PORT %d for " % port)
        released = log.index("released MASTER_PORT %d for " % port)
        started = log.index("started rank")
        self.assertLess(held, released)
        self.assertLess(released, started)
        self.assertNotIn("MASTER_PORT", other.text())
        self.assertIn("rank 0 got hello from rank 1",
                      self.cairn("logs", "1.1", check=0).stdout)

    def test_a_gang_all_on_one_agent_gets_its_port_from_that_agent(self):
        a = Agent(self, "agent-a", 2)
        proc = self.cairn("run", "exp.yaml", "--slots", "0", "--peers", a.address,
                          "--key-file", self.key, env=self.env(), timeout=240)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        out = self.cairn("logs", "1.1", check=0).stdout
        m = re.search(r"rank 0 MASTER 127\.0\.0\.1 (\d+)", out)
        self.assertTrue(m, out)
        self.assertIn("holding MASTER_PORT %s for " % m.group(1), a.text())
        self.assertIn("rank 0 got hello from rank 1", out)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
