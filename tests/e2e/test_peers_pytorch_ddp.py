"""The PyTorch DDP example (examples/pytorch-ddp, gloo on CPU) with its two ranks on two
agents, one rank on each (issue 17 item 7, docs/peers.md "Placement"): unchanged, it trains in
step — both ranks end with the same parameters, the loss curve and the final weights are
those of the same two ranks on this machine — and its checkpoints are registered and hold
the weights the ranks ended with. On loopback agents, and (`needs netns`) on agents in two
network namespaces with the coordinator in a third, so Gloo's ranks meet over a real route
through the interface cairn names (GLOO_SOCKET_IFNAME)."""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, PYTHON, SOURCE, CairnTestCase, needs  # noqa: E402
from peer_testlib import Agent, Network, agent_env, peer_home  # noqa: E402

EXAMPLE = os.path.join(SOURCE, "examples", "pytorch-ddp")
NETNS, NETNS_WHY = cairn_testlib.netns_available()
DIGEST = re.compile(r"rank (\d) of 2 at step 6: parameters sha256 ([0-9a-f]{64})")


def have_torch():
    return subprocess.run([PYTHON, "-c", "import torch, sklearn"], capture_output=True,
                          timeout=120).returncode == 0


class DdpCase(CairnTestCase):
    def setUp(self):
        super().setUp()
        # ./install.sh --test installs both: missing is a failure, not a skip.
        self.assertTrue(have_torch(), "needs Debian's python3-torch and python3-sklearn")
        self.agents = []
        self.key = peer_home(self)
        for name in ("train.py", "digits-ddp.yaml"):
            shutil.copy(os.path.join(EXAMPLE, name), self.dir)

    def digests(self, trial):
        """{rank: the digest of the parameters it ended with}, from each rank's log."""
        found = {}
        for rank in (0, 1):
            logs = self.cairn("logs", trial, "--rank", str(rank), check=0).stdout
            found.update((int(r), d) for r, d in DIGEST.findall(logs))
        return found

    def losses(self, trial):
        return [p["metrics"]["loss"]
                for p in self.cairn_json("metrics", trial, "--json")["training"]]

    def check_against_one_machine(self, remote, agents):
        """Runs the same example with both ranks on this machine (experiment 2) and checks
        `remote` (experiment 1, on `agents`) trained as it did."""
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(sorted(p["machine"] for p in trial["placement"]), sorted(agents),
                         trial["placement"])
        self.assertEqual(len({p["machine"] for p in trial["placement"]}), 2, "one rank on each")
        split = self.digests("1.1")
        self.assertEqual(set(split), {0, 1}, remote.stdout + remote.stderr)
        self.assertEqual(split[0], split[1], "both ranks end with the same parameters")
        # Checkpoints every 2 steps; the latest holds the weights the ranks ended with.
        checkpoints = self.cairn_json("checkpoints", "1.1", "--json")
        self.assertEqual(max(c["steps_completed"] for c in checkpoints), 6, checkpoints)
        out = os.path.join(self.dir, "exported")
        self.cairn("export", "1.1@latest", out, check=0)
        self.assertEqual(self.weights_digest(os.path.join(out, "model.pt")), split[0])
        # The same two ranks on this machine: the same curve and the same weights, bit for bit.
        self.cairn("run", "digits-ddp.yaml", "--slots", "2", check=0, env=agent_env(self),
                   timeout=300)
        local = self.digests("2.1")
        self.assertEqual(local, split)
        self.assertEqual(self.losses("1.1"), self.losses("2.1"))
        self.assertEqual(len(self.losses("1.1")), 6)
        self.assertLess(self.losses("1.1")[-1], self.losses("1.1")[0] / 3, "it learns")

    def weights_digest(self, path):
        return subprocess.run(
            [PYTHON, "-c", "import hashlib, sys, torch\n"
             "s = torch.load(sys.argv[1])\n"
             "print(hashlib.sha256(b''.join(v.numpy().tobytes() for v in s.values()))"
             ".hexdigest())", path], capture_output=True, text=True, check=True,
            timeout=120).stdout.strip()


class PeersDdpTest(DdpCase):
    def test_ddp_example_on_two_loopback_agents_trains_as_on_one_machine(self):
        a = Agent(self, key=self.key, slots=1)
        b = Agent(self, key=self.key, slots=1)
        run = self.cairn("run", "digits-ddp.yaml", "--slots", "0", "--peers",
                         a.address + "," + b.address, "--key-file", self.key,
                         env=agent_env(self), timeout=300)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.check_against_one_machine(run, [a.address, b.address])


@needs("netns", NETNS, NETNS_WHY)
class NamespaceDdpTest(DdpCase):
    def test_ddp_example_on_agents_in_two_namespaces_trains_as_on_one_machine(self):
        net = Network(self, "cairnd")
        net.bridge("sw", "10.81.0", ["a", "b", "c"])
        b = Agent(self, key=self.key, slots=1, ns=net.ns["b"], listen="10.81.0.2:7070")
        c = Agent(self, key=self.key, slots=1, ns=net.ns["c"], listen="10.81.0.3:7070")
        run = subprocess.run(net.run_in("a") + [CAIRN, "run", "digits-ddp.yaml", "--slots", "0",
                                                "--peers", b.address + "," + c.address,
                                                "--key-file", self.key],
                             cwd=self.dir, env=agent_env(self), capture_output=True, text=True,
                             timeout=300)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        for agent in (b, c):
            self.assertIn("started rank", agent.text())
        self.check_against_one_machine(run, [b.address, c.address])


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
