"""`cairn reproduce` on peers (docs/reproducibility.md "Where the re-run runs", docs/peers.md):
a builtin:mlp trial whose 2 ranks trained on 2 real loopback agents (`--slots 0`) is re-run on
them with `reproduce --peers A,B --slots 0 --verify` and on this machine alike, bit-identical
both ways in deterministic mode; the recorded config's resources.peers is where a re-run goes
when --peers is not given; a coordinator with too few slots and no peers, and a wrong key,
are refused at once in one line, with nothing created."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CairnTestCase  # noqa: E402
import peer_testlib  # noqa: E402
from peer_testlib import agent_env, peer_home  # noqa: E402
import test_reproducibility  # noqa: E402

# tests/e2e/test_peers_placement.py's gang, on 2 slots.
MLP = """name: mlp-pair
entrypoint: builtin:mlp
hyperparameters: {dataset: teacher, samples: 512, hidden: 32, batch_size: 64, threads: 1,
                  device: cpu}
searcher: {name: single, metric: val_loss, max_length: 3}
resources: {slots_per_trial: 2%s}
checkpoint: {period: 2}
reproducibility: {seed: 5, deterministic: true}
max_restarts: 0
"""


class ReproduceOnPeersTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.key = peer_home(self)
        self.a = peer_testlib.Agent(self, "--no-announce", name="agent-a", key=self.key, slots=1)
        self.b = peer_testlib.Agent(self, "--no-announce", name="agent-b", key=self.key, slots=1)
        self.pair = self.a.address + "," + self.b.address

    def run_cairn(self, *args, extra=None):
        return self.cairn(*args, env=agent_env(self, extra), timeout=240)

    def train_on_the_agents(self, config_peers=""):
        """Trial 1.1: rank 0 on one agent, rank 1 on the other, nothing on this machine."""
        self.write("mlp.yaml", MLP % config_peers)
        args = ["run", "mlp.yaml", "--slots", "0", "--key-file", self.key]
        if not config_peers:
            args += ["--peers", self.pair]
        proc = self.run_cairn(*args)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(sorted(p["machine"] for p in trial["placement"]),
                         sorted([self.a.address, self.b.address]), trial)

    def experiments(self):
        return sorted(e["id"] for e in self.cairn_json("ls", "--json"))

    def assert_nothing_created(self):
        self.assertEqual(self.experiments(), [1])
        self.assertEqual(os.listdir(os.path.join(self.dir, ".cairn", "reproduce")), [])

    def test_a_trial_trained_on_two_agents_reproduces_there_and_here_bit_identical(self):
        self.train_on_the_agents()
        # On the same agents, with the key from CAIRN_KEY_FILE (run's search order).
        proc = self.run_cairn("reproduce", "1.1", "--peers", self.pair, "--slots", "0",
                              "--verify", extra={"CAIRN_KEY_FILE": self.key})
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("cairn: verified: 2.1 reproduces 1.1 exactly", proc.stdout)
        # The same kernels, set by the user then and taken from the record now, are no drift.
        self.assertNotIn("dependencies differ", proc.stderr)
        again = self.cairn_json("show", "2.1", "--json")
        self.assertEqual(sorted(p["machine"] for p in again["placement"]),
                         sorted([self.a.address, self.b.address]), again)
        record = self.cairn_json("show", "2", "--json")
        self.assertEqual(record.get("peers"), [self.a.address, self.b.address], record)
        self.assertIs(record.get("run_locally"), False, record)
        self.assertEqual(record["reproduces"]["trial"], "1.1")
        for agent in (self.a, self.b):
            self.assertIn("started rank", agent.text())
        # And on this machine, both ranks local: the same bits.
        proc = self.run_cairn("reproduce", "1.1", "--slots", "2", "--verify")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("cairn: verified: 3.1 reproduces 1.1 exactly", proc.stdout)
        here = self.cairn_json("show", "3.1", "--json")
        self.assertEqual([p["machine"] for p in here["placement"]], ["local", "local"], here)
        series = [self.cairn_json("metrics", t, "--json") for t in ("1.1", "2.1", "3.1")]
        for s in series[1:]:
            self.assertEqual(s["training"], series[0]["training"])
            self.assertEqual(s["validation"], series[0]["validation"])
        self.assertTrue(series[0]["validation"], series[0])

    def test_the_recorded_configs_peers_are_where_the_rerun_goes_without_peers(self):
        self.train_on_the_agents(config_peers=", peers: [%s]" % self.pair)
        proc = self.run_cairn("reproduce", "1.1", "--slots", "0", "--key-file", self.key,
                              "--verify")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("cairn: verified: 2.1 reproduces 1.1 exactly", proc.stdout)
        again = self.cairn_json("show", "2.1", "--json")
        self.assertEqual(sorted(p["machine"] for p in again["placement"]),
                         sorted([self.a.address, self.b.address]), again)

    def test_too_few_slots_here_and_no_peers_is_refused_at_once_naming_the_need(self):
        self.train_on_the_agents()
        proc = self.run_cairn("reproduce", "1.1", "--slots", "1", "--verify")
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        lines = proc.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertRegex(lines[0], r"^cairn: error: .*mlp\.yaml:\d+: resources\.slots_per_trial: 2 "
                                   r"is more than the 1 slots of this machine")
        # Where it ran, and how to re-run it there.
        self.assertIn("trial 1.1 ran on the agents %s: --peers %s re-runs it there"
                      % (self.pair, self.pair), lines[0])
        self.assert_nothing_created()
        # --slots 0 and no agent to run on: the same as `cairn run`'s refusal.
        proc = self.run_cairn("reproduce", "1.1", "--slots", "0")
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        self.assertIn("--slots 0 runs nothing on this machine", proc.stderr)
        self.assert_nothing_created()
        # The peers' slots count: 1 here and 1 on an agent fit the gang of 2.
        proc = self.run_cairn("reproduce", "1.1", "--slots", "1", "--peers", self.a.address,
                              "--key-file", self.key, "--verify")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("cairn: verified: 2.1 reproduces 1.1 exactly", proc.stdout)
        mixed = self.cairn_json("show", "2.1", "--json")
        self.assertEqual(sorted(p["machine"] for p in mixed["placement"]),
                         sorted(["local", self.a.address]), mixed)

    def test_a_wrong_key_is_refused_in_one_line_naming_the_peer_and_key_id(self):
        self.train_on_the_agents()
        other = os.path.join(self.dir, "other.key")
        proc = self.run_cairn("agent", "--new-key", other)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        other_id = re.search(r"key id ([0-9a-f]{16})", proc.stdout).group(1)
        proc = self.run_cairn("reproduce", "1.1", "--peers", self.pair, "--slots", "0",
                              "--key-file", other, "--verify")
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        lines = proc.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertRegex(lines[0], r"^cairn: error: peer 127\.0\.0\.1:\d+")
        self.assertTrue(self.a.address in lines[0] or self.b.address in lines[0], lines[0])
        self.assertIn("key id " + other_id, lines[0])
        self.assert_nothing_created()


    def test_data_too_large_to_keep_is_checked_where_it_is_not_through_the_checkout(self):
        # The re-run's workdir is its checkout in the store, whose data entry is a link to
        # the project's data: an agent on another machine has the data at the path the run
        # read it (which it must, docs/peers.md "Code and data on a peer"), not this store.
        self.write("train.py", test_reproducibility.TRAIN.replace("NOISE", "0.0"))
        self.write("data/train.csv", "1\n2\n3\n")
        with open(os.path.join(self.dir, "data", "big.bin"), "wb") as f:
            f.write(b"\1" * (5 << 19))
        self.write("exp.yaml", test_reproducibility.CONFIG.replace(
            "seed: 17}", "seed: 17, snapshot_limit_mb: 1}"))
        proc = self.run_cairn("run", "exp.yaml", "--slots", "0", "--peers", self.a.address,
                              "--key-file", self.key)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertFalse(self.cairn_json("show", "1", "--json")["data"]["stored"])
        proc = self.run_cairn("reproduce", "1.1", "--peers", self.a.address, "--slots", "0",
                              "--key-file", self.key, "--verify")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("cairn: verified: 2.1 reproduces 1.1 exactly", proc.stdout)
        self.assertEqual(self.cairn_json("show", "2.1", "--json")["placement"][0]["machine"],
                         self.a.address)
        # Both run directories on the agent link to the project's data itself.
        runs = os.path.join(self.a.dir, "work", "runs")
        links = [os.readlink(os.path.join(runs, run, "data")) for run in sorted(os.listdir(runs))]
        self.assertEqual(len(links), 2, links)
        project_data = os.path.join(os.path.realpath(self.dir), "data")
        for link in links:
            self.assertEqual(os.path.realpath(link), project_data, links)
            self.assertNotIn(os.path.join(".cairn", "reproduce"), link, links)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
