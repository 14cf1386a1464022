"""A rank on an agent needs nothing of the coordinator's file system (docs/peers.md, "The
control channel through the agent", "Paths on the agent"): the agent runs in a mount
namespace where the coordinator's project and store directory is hidden under a tmpfs, and
a Python SDK trial under asha — metrics, validations, promotions answered over the control
channel, pauses by a stop message, a paused trial resumed — runs there with the same
results as the same experiment on local slots. The trial's script lives outside the hidden
directory (code shipping is not built yet: the entrypoint names it by absolute path)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, CairnTestCase, needs, read_line_until  # noqa: E402

USERNS, USERNS_WHY = cairn_testlib.userns_mounts()

TRAIN = r"""
import os
import cairn

HIDDEN = %r
# On the agent, the coordinator's directory is an empty tmpfs: nothing of its store.
hidden = not os.path.exists(os.path.join(HIDDEN, ".cairn"))
print("store hidden:", hidden, "control:", os.environ["CAIRN_CONTROL"],
      "workdir:", os.environ["CAIRN_WORKDIR"], flush=True)
ctx = cairn.init()
x = ctx.hparams["x"]
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        step += 1
        ctx.report_training(step, {"loss": x / step})
        if ctx.should_preempt():  # a stop (pause) read from the control channel
            print("stopped at", step, flush=True)
            break
    else:
        ctx.report_validation(step, {"val_loss": x + 1.0 / step})
        continue
    break
"""

SLOW = r"""
import os, time
import cairn

assert not os.path.exists(os.path.join(%r, ".cairn"))
ctx = cairn.init()
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        print("step", step, "trained", flush=True)
        if ctx.should_preempt():
            print("stopped by a stop message at step", step, flush=True)
            raise SystemExit(0)
        time.sleep(0.05)
    ctx.report_validation(step, {"val_loss": 1.0 / step})
"""

SLOW_CONFIG = """name: slow
entrypoint: [/usr/bin/python3, %s]
searcher: {name: single, metric: val_loss, max_length: 100000}
max_restarts: 0
"""

PATHS = r"""
import os
import cairn

for name in ("CAIRN_CONTROL", "CAIRN_WORKDIR", "CAIRN_ORPHAN_DIR", "PYTHONPATH"):
    print(name + "=" + os.environ.get(name, ""), flush=True)
print("cairn module=" + cairn.__file__, flush=True)
ctx = cairn.init()
step = 0
for op in ctx.operations():
    while step < op.length:
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
    ctx.report_validation(step, {"val_loss": 1.0 / step})
"""

CONFIG = """name: relay
entrypoint: [/usr/bin/python3, %s]
hyperparameters:
  x: {type: categorical, vals: [0.05, 0.3, 0.1, 0.2, 0.4]}
searcher: {name: asha, metric: val_loss, max_length: 9, max_rungs: 2, divisor: 3,
           max_trials: 5, mode: aggressive, max_concurrent_trials: 1}
reproducibility: {seed: 7}
max_restarts: 0
"""


class PeersRelayTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        # Outside self.dir (the coordinator's directory, hidden on the agent): the agent's
        # directory, its key and the trial's script.
        self.outside = tempfile.mkdtemp(prefix="cairn-e2e-outside-")
        self.addCleanup(shutil.rmtree, self.outside, True)
        self.home = os.path.join(self.outside, "home")
        os.makedirs(self.home)
        self.agent = None
        self.addCleanup(self.kill_agent)

    def kill_agent(self):
        if self.agent and self.agent.poll() is None:
            self.agent.kill()
            self.agent.wait(timeout=30)
        if self.agent:
            self.agent.stderr.close()

    def env(self):
        return self.cairn_env({"HOME": self.home, "XDG_CONFIG_HOME": None,
                               "XDG_STATE_HOME": None, "CAIRN_KEY_FILE": None})

    def start_agent(self, argv):
        self.agent = subprocess.Popen(argv, cwd=self.outside, env=self.env(),
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE)
        line = read_line_until(self.agent.stderr, lambda l: "listening on" in l, timeout=30,
                               what="the agent's listening line")
        return "127.0.0.1:%s" % re.search(r"listening on \S*:(\d+) ", line).group(1)

    def start_hidden_agent(self, key, agent_dir):
        # The agent's mount namespace: self.dir is an empty tmpfs there. `exec` keeps the
        # agent the process Popen knows (unshare does not fork for these namespaces).
        argv = ["unshare", "-rm", "sh", "-c", 'mount -t tmpfs -o size=1m tmpfs "$0" && exec "$@"',
                self.dir, CAIRN, "agent", "--dir", agent_dir, "--key-file", key,
                "--listen", "127.0.0.1:0", "--slots", "2"]
        return self.start_agent(argv)

    def results(self, experiment):
        out = {}
        for n in range(1, 6):
            trial = "%d.%d" % (experiment, n)
            show = json.loads(self.cairn("show", trial, "--json", check=0).stdout)
            metrics = json.loads(self.cairn("metrics", trial, "--json", check=0).stdout)
            out[n] = {
                "state": show["state"],
                "hparams": show.get("hparams"),
                "training": [(p["step"], p["metrics"]) for p in metrics["training"]],
                "validation": [(p["step"], p["metrics"]) for p in metrics["validation"]],
            }
        return out

    @needs("userns", USERNS, USERNS_WHY)
    def test_an_asha_trial_runs_on_an_agent_that_cannot_see_the_coordinators_files(self):
        key = os.path.join(self.outside, "cluster.key")
        self.cairn("agent", "--new-key", key, check=0, env=self.env())
        agent_dir = os.path.join(self.outside, "agent")
        script = os.path.join(self.outside, "train.py")
        with open(script, "w") as f:
            f.write(TRAIN % self.dir)
        self.write("exp.yaml", CONFIG % script)

        # The same experiment on local slots first: what the agent must reproduce.
        local_run = self.cairn("run", "exp.yaml", check=0, env=self.env(), timeout=200)
        local = self.results(1)

        address = self.start_hidden_agent(key, agent_dir)
        proc = self.cairn("run", "exp.yaml", "--peers", address, "--slots", "0", "--key-file", key, check=0,
                          env=self.env(), timeout=200)
        output = proc.stdout + proc.stderr
        remote = self.results(2)
        if os.environ.get("RELAY_DEBUG"):
            print(json.dumps(local), local_run.stdout, local_run.stderr, output, file=sys.stderr)

        # It ran on the agent, which saw none of the store, through the relayed channel and
        # with the agent's own paths.
        self.assertIn("store hidden: True control: unix:" + os.path.join(agent_dir, "control"),
                      output)
        # In the agent's copy of the run directory (shipped: docs/peers.md "Code and data").
        self.assertRegex(output, r"workdir: %s/[0-9a-f]{16}\n" % re.escape(
            os.path.join(agent_dir, "work", "runs")))
        self.assertNotIn("store hidden: False", output)
        self.assertTrue(os.path.isfile(self.sdk_file(agent_dir)))
        logs = self.cairn("logs", "2.1", check=0).stdout
        self.assertIn("store hidden: True", logs)

        # The search went as it did locally: trial 1 waited at the first rung (its run
        # ended), was promoted when trial 3 validated, started again and completed; trial 3
        # was not promoted; the rest were stopped by the searcher.
        for run_output, exp in ((local_run.stdout + local_run.stderr, 1), (output, 2)):
            self.assertEqual(run_output.count("trial %d.1 started" % exp), 2, run_output)
        self.assertEqual(local[1]["state"], "COMPLETED", local)
        self.assertEqual([v[0] for v in local[1]["validation"]], [3, 9], local)
        self.assertEqual(sorted(r["state"] for r in local.values()).count("STOPPED"), 4, local)
        self.assertEqual(remote, local)

    @needs("userns", USERNS, USERNS_WHY)
    def test_cairn_pause_reaches_a_trial_on_a_hidden_agent_as_a_stop_message(self):
        key = os.path.join(self.outside, "cluster.key")
        self.cairn("agent", "--new-key", key, check=0, env=self.env())
        script = os.path.join(self.outside, "slow.py")
        with open(script, "w") as f:
            f.write(SLOW % self.dir)
        self.write("exp.yaml", SLOW_CONFIG % script)
        address = self.start_hidden_agent(key, os.path.join(self.outside, "agent"))
        run = subprocess.Popen([CAIRN, "run", "exp.yaml", "--peers", address, "--slots", "0", "--key-file", key],
                               cwd=self.dir, env=self.env(), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.addCleanup(run.stdout.close)
        read_line_until(run.stdout, lambda l: "[1.1] step 3 " in l, timeout=60,
                        what="the trial training on the agent")
        self.cairn("pause", "1", check=0, env=self.env())
        rest = run.stdout.read().decode()
        self.assertEqual(run.wait(timeout=60), 0, rest)
        # The stop went down the relayed channel: the SDK's should_preempt() saw it.
        self.assertRegex(rest, r"\[1\.1\] stopped by a stop message at step \d+")
        show = json.loads(self.cairn("show", "1", "--json", check=0).stdout)
        self.assertEqual(show["state"], "PAUSED", show)

    def test_a_rank_on_a_loopback_agent_gets_the_agents_paths_and_channel(self):
        # No namespace needed: whatever the coordinator's paths are, the rank sees the
        # agent's, and its control channel goes through the agent's connection.
        key = os.path.join(self.outside, "cluster.key")
        self.cairn("agent", "--new-key", key, check=0, env=self.env())
        agent_dir = os.path.join(self.outside, "agent")
        script = os.path.join(self.outside, "paths.py")
        with open(script, "w") as f:
            f.write(PATHS)
        self.write("exp.yaml", SLOW_CONFIG.replace("100000", "2") % script)
        address = self.start_agent([CAIRN, "agent", "--dir", agent_dir, "--key-file", key,
                                    "--listen", "127.0.0.1:0"])
        out = self.cairn("run", "exp.yaml", "--peers", address, "--slots", "0", "--key-file", key, check=0,
                         env=self.env(), timeout=120).stdout
        sdk = os.path.dirname(self.sdk_file(agent_dir))
        self.assertIn("[1.1] CAIRN_CONTROL=unix:" + os.path.join(agent_dir, "control"), out)
        self.assertRegex(out, r"\[1\.1\] CAIRN_WORKDIR=%s/[0-9a-f]{16}\n" % re.escape(
            os.path.join(agent_dir, "work", "runs")))
        # Per owner and attempt (docs/peers.md "Orphans on an agent").
        self.assertRegex(out, r"\[1\.1\] CAIRN_ORPHAN_DIR=%s/o[0-9a-f]{16}/1\.1/attempt-1\n"
                         % re.escape(os.path.join(agent_dir, "orphans")))
        self.assertIn("[1.1] PYTHONPATH=" + sdk, out)
        self.assertIn("[1.1] cairn module=" + os.path.join(sdk, "cairn.py"), out)
        self.assertNotIn(self.dir, "\n".join(l for l in out.splitlines() if "=" in l))
        show = json.loads(self.cairn("show", "1.1", "--json", check=0).stdout)
        self.assertEqual(show["state"], "COMPLETED", show)
        metrics = json.loads(self.cairn("metrics", "1.1", "--json", check=0).stdout)
        self.assertEqual([p["step"] for p in metrics["training"]], [1, 2])
        # The agent logged nothing refused about the channel.
        self.agent.terminate()
        rest = self.agent.stderr.read().decode()
        self.assertEqual(self.agent.wait(timeout=30), 0, rest)
        self.assertNotIn("control channel", rest)

    def test_an_agent_refuses_control_frames_that_name_nothing_and_keeps_serving(self):
        key = os.path.join(self.outside, "cluster.key")
        self.cairn("agent", "--new-key", key, check=0, env=self.env())
        address = self.start_agent([CAIRN, "agent", "--dir", os.path.join(self.outside, "agent"),
                                    "--key-file", key, "--listen", "127.0.0.1:0"])
        client = os.path.join(os.path.dirname(os.path.abspath(CAIRN)), "peer_test_client")
        lines = subprocess.run([client, address, key, "control"], capture_output=True,
                               text=True, timeout=60).stdout.splitlines()
        # The status request after them is answered on the same connection.
        self.assertEqual(json.loads(lines[1])["type"], "status", lines)
        refusals = [read_line_until(self.agent.stderr, lambda l: "control channel of" in l,
                                    timeout=30, what="a refusal") for _ in range(5)]
        expected = ["refused a control_open (stream 1): only an agent opens streams",
                    "refused a control_data: stream 99 was never opened",
                    'refused a frame: bad control frame: no string "data"',
                    "refused a control_close: stream 5 was never opened",
                    'refused a frame: bad control frame: no integer "bytes"']
        for line, want in zip(refusals, expected):
            self.assertRegex(line, r"control channel of 127\.0\.0\.1:\d+: " + re.escape(want))
        self.assertIsNone(self.agent.poll())

    def sdk_file(self, agent_dir):
        found = [os.path.join(root, "cairn.py")
                 for root, _, files in os.walk(os.path.join(agent_dir, "sdk")) if "cairn.py" in files]
        self.assertEqual(len(found), 1, found)
        return found[0]


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
