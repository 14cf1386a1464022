"""Issue 17 item 7: the environment of a gang over two "machines" (network namespaces joined
by a bridge): MASTER_ADDR is rank 0's machine as the other reaches it, and
GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME name, on each machine, its own interface that
routes there (docs/peers.md "A rank's environment"; engine/coordinator/rank_interfaces.h).
The devices have names of their own per machine, so a value copied from another machine,
or a default like eth0, cannot pass."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, CairnTestCase, needs  # noqa: E402
import peer_testlib  # noqa: E402
from peer_testlib import Network, agent_env, peer_home  # noqa: E402

NETNS, NETNS_WHY = cairn_testlib.netns_available()

VARIABLES = ["RANK", "MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"]

TRAIN = r"""
import os, cairn
ctx = cairn.init()
print("env " + " ".join("%s=%s" % (k, os.environ.get(k, "-")) for k in VARIABLES), flush=True)
for op in ctx.operations():
    if ctx.rank == 0:
        ctx.report_validation(op.length, {"val_loss": 1.0})
""".replace("VARIABLES", repr(VARIABLES))

CONFIG = """name: interfaces
entrypoint: [python3, train.py]
searcher: {name: single, metric: val_loss, max_length: 1}
resources: {slots_per_trial: 2}
max_restarts: 0
"""


class LoopbackInterfaces(CairnTestCase):
    def test_agents_on_loopback_leave_the_interface_to_gloo(self):
        # Every rank on one machine (two agents on loopback): MASTER_ADDR is loopback and no
        # interface is named (rank_interfaces.h: nothing to choose).
        key = peer_home(self)
        self.write("train.py", TRAIN)
        self.write("exp.yaml", CONFIG)
        a = peer_testlib.Agent(self, "--no-announce", key=key, slots=1)
        b = peer_testlib.Agent(self, "--no-announce", key=key, slots=1)
        proc = self.cairn("run", "exp.yaml", "--slots", "0", "--peers",
                          a.address + "," + b.address, "--key-file", key,
                          env=agent_env(self), timeout=240)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("started on %s ×1, %s ×1" % (a.address, b.address), proc.stdout)
        env = CollectiveInterfaces.ranks_env(self, proc.stdout)
        self.assertEqual(sorted(env), [0, 1], proc.stdout)
        for rank in env.values():
            self.assertEqual(rank["MASTER_ADDR"], "127.0.0.1", env)
            self.assertEqual(rank["GLOO_SOCKET_IFNAME"], "-", env)
            self.assertEqual(rank["NCCL_SOCKET_IFNAME"], "-", env)


@needs("netns", NETNS, NETNS_WHY)
class CollectiveInterfaces(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.key = peer_home(self)
        self.write("train.py", TRAIN)
        self.write("exp.yaml", CONFIG)
        self.net = Network(self, "cairni")
        # Machine a (the coordinator) has a second, decoy interface that routes elsewhere.
        self.net.bridge("sw", "10.77.0", [("a", "ia0", 1), ("b", "ib0", 2)])
        self.net.bridge("sw2", "10.75.0", [("a", "ia1", 1)], port_prefix="w")

    def ranks_env(self, output):
        found = {}
        for line in output.splitlines():
            m = re.search(r"\benv (.*)$", line)
            if m:
                env = dict(kv.split("=", 1) for kv in m.group(1).split())
                found[int(env["RANK"])] = env
        return found

    def test_each_machine_names_its_own_interface_to_rank_0(self):
        agent = peer_testlib.Agent(self, "--no-announce", key=self.key, slots=1,
                                   listen="10.77.0.2:0", ns=self.net.ns["b"])
        proc = subprocess.run(self.net.run_in("a") + [CAIRN, "run", "exp.yaml", "--slots", "1",
                                                      "--peers", agent.address, "--key-file",
                                                      self.key],
                              cwd=self.dir, env=self.cairn_env(agent_env(self)),
                              capture_output=True, text=True, timeout=240)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("started on local ×1, %s ×1" % agent.address, proc.stdout)
        env = self.ranks_env(proc.stdout)
        self.assertEqual(sorted(env), [0, 1], proc.stdout)
        for rank in env.values():
            self.assertEqual(rank["MASTER_ADDR"], "10.77.0.1", env)
            self.assertEqual(rank["MASTER_PORT"], env[0]["MASTER_PORT"], env)
        # Rank 0 here (machine a): its interface toward its own address, not the decoy.
        self.assertEqual(env[0]["GLOO_SOCKET_IFNAME"], "ia0", env)
        self.assertEqual(env[0]["NCCL_SOCKET_IFNAME"], "ia0", env)
        # Rank 1 on the agent (machine b): b's interface, which only b has.
        self.assertEqual(env[1]["GLOO_SOCKET_IFNAME"], "ib0", env)
        self.assertEqual(env[1]["NCCL_SOCKET_IFNAME"], "ib0", env)

    def test_the_users_own_choice_stands(self):
        agent = peer_testlib.Agent(self, "--no-announce", key=self.key, slots=1,
                                   listen="10.77.0.2:0", ns=self.net.ns["b"])
        proc = subprocess.run(self.net.run_in("a") + [CAIRN, "run", "exp.yaml", "--slots", "1",
                                                      "--peers", agent.address, "--key-file",
                                                      self.key],
                              cwd=self.dir,
                              env=self.cairn_env(agent_env(self, {"GLOO_SOCKET_IFNAME": "mine"})),
                              capture_output=True, text=True, timeout=240)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        env = self.ranks_env(proc.stdout)
        self.assertEqual(env[0]["GLOO_SOCKET_IFNAME"], "mine", env)
        self.assertEqual(env[0]["NCCL_SOCKET_IFNAME"], "ia0", env)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
