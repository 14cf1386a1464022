"""Issue 17 item 7: the environment of a gang over two "machines" (network namespaces joined
by a bridge): MASTER_ADDR is rank 0's machine as the other reaches it, and
GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME name, on each machine, its own interface that
routes there (docs/peers.md "A rank's environment"; engine/coordinator/rank_interfaces.h).
The devices have names of their own per machine, so a value copied from another machine,
or a default like eth0, cannot pass.

Over IPv6 only (docs/peers.md "A gang over IPv6"): builtin:mlp's 2 ranks on 2 agents,
machines a and b, with the coordinator on a third, c, all on one bridge with no IPv4 address
but loopback's. Each machine's device has a name of its own (ia0, ib0, ic0) and b's another
interface index (a spare veth pair made first), so neither a scope name nor a scope index
copied from another machine can pass.

- With a unique local address (fd00::/8) on each machine, the agents listed by it: each
  rank's MASTER_ADDR is a's address with no scope and no brackets and its GLOO_SOCKET_IFNAME
  its own machine's device; builtin:mlp's gang runs bit-identical to the same trial's 2 ranks
  on one machine, and so does the PyTorch DDP example (test_peers_pytorch_ddp.py's checks).
- With link-local addresses only (agents listed as [fe80::…%ic0]:port): the gang is refused
  before any rank starts and before any MASTER_PORT is held, with one line (Gloo hands each
  rank's address to the others with its own machine's interface index, which names another
  interface, or none, on theirs: "connect: Network is unreachable")."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, CairnTestCase, needs, wait_until  # noqa: E402
import peer_testlib  # noqa: E402
from peer_testlib import Network, agent_env, peer_home  # noqa: E402
import test_peers_pytorch_ddp as ddp  # noqa: E402
from test_peers_discovery6 import NETNS as NETNS6, NETNS_WHY as NETNS6_WHY  # noqa: E402

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


MLP = """name: mlp-gang6
entrypoint: builtin:mlp
hyperparameters: {dataset: teacher, samples: 4096, hidden: 16, batch_size: 64, threads: 1,
                  device: cpu}
searcher: {name: single, metric: val_loss, max_length: 3}
resources: {slots_per_trial: 2}
reproducibility: {seed: 5, deterministic: true}
max_restarts: 0
"""

DEVICES = {"a": "ia0", "b": "ib0", "c": "ic0"}


class Ipv6Machines:
    """Machines a, b (agents) and c (the coordinator) on one bridge, IPv6 only."""

    def make_machines(self):
        self.net = Network(self, "cairng6")
        # b's device gets another interface index than a's and c's.
        self.net.machine("b")
        self.net.ip("-n", self.net.ns["b"], "link", "add", "d0", "type", "veth", "peer", "name",
                    "d1")
        self.net.bridge("sw", "10.83.0", [(n, DEVICES[n], i) for i, n in
                                          enumerate(("a", "b", "c"), 1)],
                        addresses=False, snooping=False)
        for n in ("a", "b", "c"):
            self.net.link(n, up=True, dev=DEVICES[n])

    def ula(self):
        """Gives each machine the unique local address fd83::N; {machine: address}."""
        ula = {}
        for i, n in enumerate(("a", "b", "c"), 1):
            self.net.ip("-n", self.net.ns[n], "addr", "add", "fd83::%d/64" % i, "dev", DEVICES[n])
            ula[n] = self.v6(n, "global")
            self.v6(n, "link")
        for n in ("a", "b", "c"):
            v4 = subprocess.run(["ip", "-n", self.net.ns[n], "-4", "-o", "addr"],
                                capture_output=True, text=True, timeout=30).stdout
            self.assertEqual(re.findall(r"inet (\S+)", v4), ["127.0.0.1/8"], v4)
        return ula

    def v6(self, n, scope):
        """Machine n's usable (no longer tentative) IPv6 address of `scope` (link, global)."""
        def found():
            out = subprocess.run(["ip", "-n", self.net.ns[n], "-6", "-o", "addr", "show", "dev",
                                  DEVICES[n], "scope", scope], capture_output=True, text=True,
                                 timeout=30).stdout
            m = re.search(r"inet6 ([0-9a-f:]+)/\d+ scope %s (?!.*tentative)" % scope, out)
            return m and m.group(1)
        return wait_until(found, timeout=30, what="machine %s's %s address" % (n, scope))

    def start_agents(self, addresses):
        made = []
        for n in ("a", "b"):
            made.append(peer_testlib.Agent(self, "--no-announce", key=self.key, slots=1,
                                           listen="[%s]:0" % addresses[n], ns=self.net.ns[n]))
        return made

    def run_on_c(self, peers, config="mlp.yaml"):
        return subprocess.run(self.net.run_in("c") + [CAIRN, "run", config, "--slots", "0",
                                                      "--peers", peers, "--key-file", self.key],
                              cwd=self.dir, env=self.cairn_env(agent_env(self)),
                              capture_output=True, text=True, timeout=300)



@needs("netns", NETNS6, NETNS6_WHY)
class Gang6Test(Ipv6Machines, CairnTestCase):
    def setUp(self):
        super().setUp()
        self.agents = []
        self.key = peer_home(self)
        self.write("mlp.yaml", MLP)
        self.make_machines()

    def test_a_gang_over_unique_local_addresses_runs_bit_identical(self):
        # The reference: the same trial's 2 ranks on one machine.
        self.cairn("run", "mlp.yaml", "--slots", "2", check=0, env=agent_env(self), timeout=240)
        alone = self.cairn_json("metrics", "1.1", "--json")
        a, b = self.start_agents(self.ula())
        proc = self.run_on_c(a.address + "," + b.address)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr + a.text() + b.text())
        self.assertIn("started on %s ×1, %s ×1" % (a.address, b.address), proc.stdout)
        trial = self.cairn_json("show", "2.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual([p["machine"] for p in trial["placement"]], [a.address, b.address])
        self.assertIn("rank 0 of 2 (gloo)", proc.stdout + proc.stderr)
        # builtin:mlp's Gloo binds GLOO_SOCKET_IFNAME's address: b's device exists only on b
        # (the environment itself: test_each_rank_gets_rank_0s_address_bare_and_its_own_device).
        split = self.cairn_json("metrics", "2.1", "--json")
        self.assertEqual(split["validation"], alone["validation"])
        self.assertEqual(split["training"], alone["training"])
        for agent in (a, b):
            code, _ = agent.stop()
            self.assertEqual(code, 0)

    def test_each_rank_gets_rank_0s_address_bare_and_its_own_device(self):
        # A Python trial that prints its rendezvous variables (test_peers_interfaces.py's).
        self.write("train.py", TRAIN)
        self.write("env.yaml", CONFIG)
        a, b = self.start_agents(self.ula())
        proc = self.run_on_c(a.address + "," + b.address, config="env.yaml")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        env = CollectiveInterfaces.ranks_env(self, proc.stdout)
        self.assertEqual(sorted(env), [0, 1], proc.stdout)
        for rank in env.values():
            self.assertEqual(rank["MASTER_ADDR"], "fd83::1", env)  # no brackets, no scope
        self.assertEqual((env[0]["GLOO_SOCKET_IFNAME"], env[0]["NCCL_SOCKET_IFNAME"]),
                         ("ia0", "ia0"), env)
        self.assertEqual((env[1]["GLOO_SOCKET_IFNAME"], env[1]["NCCL_SOCKET_IFNAME"]),
                         ("ib0", "ib0"), env)

    def test_a_gang_over_link_local_addresses_is_refused_before_it_starts(self):
        link = {n: self.v6(n, "link") for n in ("a", "b", "c")}
        a, b = self.start_agents({n: "%s%%%s" % (link[n], DEVICES[n]) for n in ("a", "b")})
        peers = ",".join("[%s%%ic0]:%d" % (link[n], agent.port)
                         for n, agent in (("a", a), ("b", b)))
        proc = self.run_on_c(peers)
        self.assertNotEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        lines = [l for l in (proc.stdout + proc.stderr).splitlines() if "link-local" in l]
        self.assertEqual(len(lines), 1, proc.stdout + proc.stderr)
        self.assertIn("a gang over machines needs an address without a scope", lines[0])
        # Refused before the rendezvous check and before any rank: no MASTER_PORT held, no
        # rank started, on either agent.
        for agent in (a, b):
            self.assertNotIn("MASTER_PORT", agent.text())
            self.assertNotIn("started rank", agent.text())
            code, _ = agent.stop()
            self.assertEqual(code, 0)


@needs("netns", NETNS6, NETNS6_WHY)
class Ddp6Test(Ipv6Machines, ddp.DdpCase):
    def test_the_ddp_example_over_unique_local_addresses_trains_as_on_one_machine(self):
        # PyTorch's TCPStore at MASTER_ADDR fd83::1 (no brackets), its Gloo on each machine's
        # own device (GLOO_SOCKET_IFNAME), whose first address is the unique local one.
        self.make_machines()
        a, b = self.start_agents(self.ula())
        run = self.run_on_c(a.address + "," + b.address, config="digits-ddp.yaml")
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr + a.text() + b.text())
        for agent in (a, b):
            self.assertIn("started rank", agent.text())
        self.check_against_one_machine(run, [a.address, b.address])


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
