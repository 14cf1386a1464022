"""Placement over this machine and several agents (issue 17 item 4 and 8, docs/peers.md
"Placement"): real `cairn agent`s on loopback, each with its own --dir, port and slots, and
one `cairn run` that fills their slots and this machine's, splits a gang unevenly over
machines (bit-identical to the same gang on one machine), refuses what can never fit, and
restarts a trial whose agent died on another machine without charging max_restarts."""
import os
import json
import re
import signal
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, CairnTestCase, needs, wait_until  # noqa: E402
import peer_testlib  # noqa: E402
from peer_testlib import Network, agent_env, peer_home  # noqa: E402

# A trial that says where it runs, reports, checkpoints every unit and resumes from it.
TRAIN = r"""
import os, sys, time
import cairn

ctx = cairn.init()
print("pid", os.getpid(), "starts at", ctx.steps_completed, flush=True)
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        time.sleep(float(os.environ.get("STEP_SECONDS", "0.05")))
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        print("step", step, flush=True)
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / "step").write_text(str(step))
        if ctx.should_preempt():
            sys.exit(0)
    ctx.report_validation(step, {"val_loss": 1.0 / (step + 1)})
"""

MLP = """name: mlp-gang
entrypoint: builtin:mlp
hyperparameters: {dataset: teacher, samples: 512, hidden: 32, batch_size: 64, threads: 1,
                  device: cpu}
searcher: {name: single, metric: val_loss, max_length: 4}
resources: {slots_per_trial: 3}
checkpoint: {period: 2}
reproducibility: {seed: 5, deterministic: true}
max_restarts: 0
"""


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def Agent(test, name, slots, *extra, ns=None):
    """An agent named `name` (its DIR test.dir/NAME) with `slots` slots and the test's key,
    on loopback unless `extra` says --listen (peer_testlib.Agent)."""
    return peer_testlib.Agent(test, *extra, name=name, slots=slots, key=test.key, ns=ns)


class PlacementCase(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.key = peer_home(self)
        self.write("train.py", TRAIN)

    def env(self, extra=None):
        return agent_env(self, extra)

    def run_cairn(self, *args, timeout=240, extra=None):
        return self.cairn(*args, "--key-file", self.key, env=self.env(extra), timeout=timeout)

    def trial_records(self, experiment=1):
        return self.cairn_json("show", str(experiment), "--json")["trials"]


class PlacementTest(PlacementCase):
    def test_trials_fill_this_machine_and_every_agent(self):
        a = Agent(self, "agent-a", 1)
        b = Agent(self, "agent-b", 1)
        self.write("exp.yaml", """name: spread
entrypoint: /usr/bin/python3 %s
hyperparameters: {x: {type: categorical, vals: [1, 2, 3, 4, 5, 6]}}
searcher: {name: grid, metric: val_loss, max_length: 3}
max_restarts: 0
""" % os.path.join(self.dir, "train.py"))
        proc = self.run_cairn("run", "exp.yaml", "--slots", "1", "--peers",
                              a.address + "," + b.address, extra={"STEP_SECONDS": "0.3"})
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        trials = self.trial_records()
        self.assertEqual([t["state"] for t in trials], ["COMPLETED"] * 6, trials)
        machines = {t["placement"][0]["machine"] for t in trials}
        # With one slot each and trials of about a second, all three machines ran trials.
        self.assertEqual(machines, {"local", a.address, b.address}, trials)
        self.assertIn("started on " + a.address, proc.stdout)
        show = self.cairn("show", trials[0]["id"], check=0).stdout
        self.assertRegex(show, r"ran on +(local|127\.0\.0\.1:\d+)\n")
        # The experiment remembers its agents for `resume`.
        self.assertEqual(self.cairn_json("show", "1", "--json").get("peers"),
                         [a.address, b.address])

    def test_a_gang_split_over_machines_trains_as_it_does_on_one(self):
        self.write("mlp.yaml", MLP)
        # One machine, three slots: the reference.
        proc = self.run_cairn("run", "mlp.yaml", "--slots", "3")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        alone = self.cairn_json("metrics", "1.1", "--json")
        # Three ranks over two agents and no local slot: split 2 + 1.
        a = Agent(self, "agent-a", 2)
        b = Agent(self, "agent-b", 2)
        # A gang of 5 cannot fit in 4 slots: refused at once, nothing created.
        proc = self.run_cairn("run", "mlp.yaml", "--slots", "0", "--peers",
                              a.address + "," + b.address, "--set",
                              "resources.slots_per_trial=5")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("resources.slots_per_trial: 5 is more than the 4 slots of this machine "
                      "(0) and its peers (%s: 2, %s: 2) together" % (a.address, b.address),
                      proc.stderr)
        proc = self.run_cairn("run", "mlp.yaml", "--slots", "0", "--peers",
                              a.address + "," + b.address)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        exp = self.cairn_json("ls", "--json")
        split_id = max(e["id"] for e in exp)
        trial = self.cairn_json("show", "%d.1" % split_id, "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        placed = [p["machine"] for p in trial["placement"]]
        self.assertEqual(sorted(placed), sorted([a.address, a.address, b.address]), trial)
        self.assertIn("started on %s ×2, %s ×1" % (a.address, b.address), proc.stdout)
        split = self.cairn_json("metrics", "%d.1" % split_id, "--json")
        self.assertEqual(split["validation"], alone["validation"])
        self.assertEqual(split["training"], alone["training"])

    def test_an_agent_reached_at_two_addresses_is_one_machine(self):
        # Listening on every address: 127.0.0.1 and 127.0.0.2 both reach it.
        a = Agent(self, "agent-a", 1, "--listen", "0.0.0.0:0")
        names = "127.0.0.1:%d,127.0.0.2:%d" % (a.port, a.port)
        peers = self.run_cairn("peers", "--peers", names, "--json")
        self.assertEqual(peers.returncode, 0, peers.stderr)
        shown = json.loads(peers.stdout)
        self.assertEqual([p["address"] for p in shown], ["127.0.0.1:%d" % a.port], shown)
        self.assertRegex(shown[0]["agent"], r"^[0-9a-f]{16}$")
        self.assertIn("127.0.0.2:%d is the agent at 127.0.0.1:%d (agent id %s): shown once"
                      % (a.port, a.port, shown[0]["agent"]), peers.stderr)
        # Its one slot counts once: a gang of 2 cannot fit, and is refused before anything
        # is created (counted twice, it would be placed on two slots the agent lacks).
        self.write("exp.yaml", """name: twice
entrypoint: /usr/bin/python3 %s
searcher: {name: single, metric: val_loss, max_length: 1}
resources: {slots_per_trial: 2}
max_restarts: 0
""" % os.path.join(self.dir, "train.py"))
        proc = self.run_cairn("run", "exp.yaml", "--slots", "0", "--peers", names)
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertIn("peer 127.0.0.2:%d is the agent at 127.0.0.1:%d" % (a.port, a.port),
                      proc.stderr)
        self.assertIn("resources.slots_per_trial: 2 is more than the 1 slots of this machine "
                      "(0) and its peers (127.0.0.1:%d: 1) together" % a.port, proc.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, ".cairn", "experiments", "1")))

    def test_peers_auto_runs_on_the_agents_that_announce_themselves(self):
        port = free_udp_port()
        a = Agent(self, "agent-a", 1, "--announce-to", "127.0.0.1:%d" % port,
                  "--announce-interval", "0.5")
        self.write("exp.yaml", """name: auto
entrypoint: /usr/bin/python3 %s
searcher: {name: single, metric: val_loss, max_length: 2}
resources: {peers: auto}
max_restarts: 0
""" % os.path.join(self.dir, "train.py"))
        proc = self.run_cairn("run", "exp.yaml", "--slots", "0",
                              extra={"CAIRN_BEACON_PORT": str(port)})
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("peers auto: 1 agent found in 3 s", proc.stderr)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["placement"][0]["machine"], a.address, trial)
        # Listed by name and discovered by number: one agent, taken once, as listed.
        by_name = "localhost:%s" % a.address.split(":")[1]
        proc = self.run_cairn("run", "exp.yaml", "--slots", "0", "--peers", "auto," + by_name,
                              extra={"CAIRN_BEACON_PORT": str(port)})
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual(self.cairn_json("show", "2", "--json")["peers"], [by_name])
        # Nobody announcing: --slots 0 has nowhere to run, said at once.
        a.kill()
        proc = self.run_cairn("run", "exp.yaml", "--slots", "0",
                              extra={"CAIRN_BEACON_PORT": str(free_udp_port())})
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("--slots 0 runs nothing on this machine", proc.stderr)

    def trial_moves_when(self, lose, lost_line, extra=None):
        """Runs a long trial on agent a (ties go to the first listed), has it checkpoint,
        then `lose(agent a, the rank's pid)`; the trial must finish on agent b from its
        checkpoint without spending a restart (max_restarts is 0: a charge would fail it).
        `lost_line` is a pattern of the reason the run gives for losing a."""
        a = Agent(self, "agent-a", 1)
        b = Agent(self, "agent-b", 1)
        self.write("exp.yaml", """name: moves
entrypoint: /usr/bin/python3 %s
searcher: {name: single, metric: val_loss, max_length: 30}
checkpoint: {period: 1}
max_restarts: 0
""" % os.path.join(self.dir, "train.py"))
        out = open(os.path.join(self.dir, "run.out"), "w")
        self.addCleanup(out.close)
        env = {"STEP_SECONDS": "0.2"}
        env.update(extra or {})
        run = subprocess.Popen([CAIRN, "run", "exp.yaml", "--slots", "0", "--peers",
                                a.address + "," + b.address, "--key-file", self.key],
                               cwd=self.dir, env=self.cairn_env(self.env(env)),
                               stdout=out, stderr=subprocess.STDOUT)

        def output():
            with open(os.path.join(self.dir, "run.out")) as f:
                return f.read()

        a.wait_log("started rank")

        def checkpointed():  # the latest checkpoint registered, once it is past step 2
            shown = self.cairn("show", "1.1", "--json")
            if shown.returncode != 0:
                return None
            steps = [c["steps_completed"] for c in json.loads(shown.stdout)["checkpoints"]]
            return max(steps) if steps and max(steps) >= 3 else None

        registered = wait_until(checkpointed, timeout=60, what="a checkpoint on a")
        pid = int(re.search(r"\[1\.1\] pid (\d+) starts at 0", output()).group(1))
        lose(a, pid)
        b.wait_log("started rank", timeout=60)
        self.assertEqual(run.wait(timeout=180), 0, output())
        text = output()
        self.assertRegex(text, r"lost agent %s \(%s\)" % (re.escape(a.address), lost_line))
        self.assertIn("trial 1.1 lost its machine", text)
        resumed_at = int(re.findall(r"\[1\.1\] pid \d+ starts at (\d+)", text)[-1])
        self.assertGreaterEqual(resumed_at, registered, text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        self.assertEqual(trial["placement"][0]["machine"], b.address)

    def test_a_lost_agent_costs_no_restart_and_its_trial_moves(self):
        def machine_gone(agent, pid):  # the agent and the rank it ran
            agent.process.kill()
            os.kill(pid, signal.SIGKILL)

        # The connection is tried again for the heartbeat timeout (a link that drops and
        # comes back loses nothing: test_peers_reattach.py), then the agent is lost.
        self.trial_moves_when(machine_gone, "the agent closed the connection, and it was not "
                              "back within 2 s", extra={"CAIRN_HEARTBEAT_TIMEOUT": "2"})

    def test_a_hung_agent_is_lost_when_its_heartbeats_stop(self):
        # SIGSTOP: the connection stays open, the agent answers nothing.
        self.trial_moves_when(lambda agent, pid: agent.process.send_signal(signal.SIGSTOP),
                              # 2 s, or more when the once-a-second check runs late
                              r"no heartbeat for [2-9] s", extra={"CAIRN_HEARTBEAT_TIMEOUT": "2"})


NETNS, NETNS_WHY = cairn_testlib.netns_available()


@needs("netns", NETNS, NETNS_WHY)
class NamespacePlacementTest(PlacementCase):
    """Two "machines" joined by a bridge: this test's coordinator in namespace a
    (10.78.0.1), an agent in namespace b (10.78.0.2). Only their network differs (the
    filesystem is shared), so a rank in b reaches rank 0 in a over a real route, not
    loopback."""

    def setUp(self):
        super().setUp()
        self.net = Network(self, "cairnp")
        self.net.bridge("sw", "10.78.0", ["a", "b"])
        self.ns = self.net.ns

    def test_a_gang_over_two_machines_trains_as_it_does_on_one(self):
        self.write("mlp.yaml", MLP.replace("slots_per_trial: 3", "slots_per_trial: 2"))
        proc = self.run_cairn("run", "mlp.yaml", "--slots", "2")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        alone = self.cairn_json("metrics", "1.1", "--json")
        agent = Agent(self, "agent-b", 1, "--listen", "10.78.0.2:0", ns=self.ns["b"])
        proc = self.cairn_in(self.ns["a"], "run", "mlp.yaml", "--slots", "1", "--peers",
                             agent.address)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        trial = self.cairn_json("show", "2.1", "--json")
        self.assertEqual([p["machine"] for p in trial["placement"]], ["local", agent.address])
        split = self.cairn_json("metrics", "2.1", "--json")
        self.assertEqual(split["validation"], alone["validation"])
        self.assertEqual(split["training"], alone["training"])

    def test_a_gang_whose_machines_cannot_reach_rank_0_is_refused_not_hung(self):
        # A third "machine" c on a second bridge that only a (the coordinator) joins: c cannot
        # reach b, where rank 0 is placed. torchrun would hang there; cairn probes first.
        self.net.bridge("sw2", "10.79.0", [("a", "eth1", 1), ("c", "eth0", 3)], port_prefix="w")
        b = Agent(self, "agent-b", 1, "--listen", "10.78.0.2:0", ns=self.ns["b"])
        c = Agent(self, "agent-c", 1, "--listen", "10.79.0.3:0", ns=self.ns["c"])
        self.write("mlp.yaml", MLP.replace("slots_per_trial: 3", "slots_per_trial: 2"))
        proc = self.cairn_in(self.ns["a"], "run", "mlp.yaml", "--slots", "0", "--peers",
                             b.address + "," + c.address)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertRegex(proc.stderr, r"error: trial 1\.1: rank 0's machine \(%s\) at "
                         r"10\.78\.0\.2:\d+ cannot be reached from %s: " %
                         (re.escape(b.address), re.escape(c.address)))
        self.assertNotIn("started rank", b.text() + c.text())

    def cairn_in(self, ns, *args):
        return subprocess.run(["ip", "netns", "exec", ns, CAIRN] + list(args) +
                              ["--key-file", self.key], cwd=self.dir,
                              env=self.cairn_env(self.env()), capture_output=True, text=True,
                              timeout=240)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
