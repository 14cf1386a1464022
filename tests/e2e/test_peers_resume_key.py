"""Issue 17 item 2: the coordinator side — `run`, `resume` and `peers` — takes the cluster
key from --key-file. `cairn resume` uses the key file its run named unless told another:
here the file moved while the coordinator was away (kill -9), and `resume --key-file` with
its new path reaches the agent and finishes the trial."""
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, CairnTestCase, wait_until  # noqa: E402
import peer_testlib  # noqa: E402
from peer_testlib import agent_env, peer_home  # noqa: E402

TRAIN = r"""
import os, time, cairn
ctx = cairn.init()
print("pid", os.getpid(), "attempt", os.environ["CAIRN_ATTEMPT"], flush=True)
for op in ctx.operations():
    while not os.path.exists(os.environ["GO_FILE"]):
        time.sleep(0.05)
    ctx.report_validation(op.length, {"val_loss": 1.0})
"""

CONFIG = """name: resume-key
entrypoint: [python3, train.py]
searcher: {name: single, metric: val_loss, max_length: 1}
max_restarts: 0
"""


class ResumeKeyFile(CairnTestCase):
    def test_resume_key_file_replaces_the_one_the_run_named(self):
        key = peer_home(self)
        moved = os.path.join(self.dir, "moved.key")
        self.write("train.py", TRAIN)
        self.write("exp.yaml", CONFIG)
        go = os.path.join(self.dir, "go")
        env = agent_env(self, {"GO_FILE": go})
        agent = peer_testlib.Agent(self, "--no-announce", key=key, slots=1)
        out_path = os.path.join(self.dir, "run.out")
        with open(out_path, "w") as out:
            run = subprocess.Popen([CAIRN, "run", "exp.yaml", "--slots", "0", "--peers",
                                    agent.address, "--key-file", key], cwd=self.dir,
                                   env=self.cairn_env(env), stdout=out, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: run.poll() is None and (run.kill(), run.wait()))
        wait_until(lambda: re.search(r"\[1\.1\] pid \d+", open(out_path).read()), timeout=120,
                   what="the rank's start")
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
        os.rename(key, moved)
        # The recorded file is gone: a plain resume cannot reach the agent.
        proc = self.cairn("resume", "1", env=env, timeout=120)
        self.assertNotEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn(key, proc.stderr)
        # With the key's new path it does, and finishes the trial without a restart.
        with open(go, "w"):
            pass
        proc = self.cairn("resume", "1", "--key-file", moved, env=env, timeout=240)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("COMPLETED", proc.stdout)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        self.assertEqual(trial["placement"][0]["machine"], agent.address, trial)

    def test_every_coordinator_command_names_the_same_key_search(self):
        # run, resume, reproduce and peers find the key as the agent does (docs/peers.md
        # "The cluster key"); their --help says so, each step of it.
        for command in ("run", "resume", "reproduce", "peers", "agent"):
            text = " ".join(self.cairn(command, "--help", check=0).stdout.split())
            option = text[text.index("--key-file"):]
            for step in ("CAIRN_KEY_FILE", "$XDG_CONFIG_HOME/cairn/cluster.key",
                         "~/.config/cairn/cluster.key"):
                self.assertIn(step, option[:400], (command, option[:400]))


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
