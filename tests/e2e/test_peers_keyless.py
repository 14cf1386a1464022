"""A keyless agent and local users (docs/peers.md "No key"): without a cluster key an agent
listens on loopback only and serves its own user only, and a keyless coordinator talks
only to its own user's agent. Each end looks up the owner of the other end's socket
(peer/socket_owner.h); another user is refused with one line on each side. With that, a
keyless agent runs ranks and keeps checkpoints for its user.

The other user is uid 65534 (nobody), through `setpriv` ("second_user": root, or
CAP_SETUID and CAP_SETGID, and a cairn that user may run)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, CairnTestCase, needs  # noqa: E402
from peer_testlib import TEST_CLIENT, Agent, agent_env, peer_home  # noqa: E402

OTHER = 65534
AS_OTHER = ["setpriv", "--reuid=%d" % OTHER, "--regid=%d" % OTHER, "--clear-groups"]
# The other user's environment: no home of its own (no key file: keyless).
OTHER_ENV = {"HOME": "/nonexistent", "XDG_CONFIG_HOME": None, "XDG_STATE_HOME": None}


def second_user():
    """(True, "") where this process can run cairn as uid 65534, else (False, why)."""
    try:
        proc = subprocess.run(AS_OTHER + [CAIRN, "--version"], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, "cannot run setpriv: %s" % e
    if proc.returncode != 0:
        return False, "cannot run cairn as uid %d: %s" % (OTHER, proc.stderr.strip()[:200])
    return True, ""


SECOND_USER, SECOND_USER_WHY = second_user()

# Reports each step, checkpoints every 2 and resumes from its checkpoint.
TRAIN = r"""
import cairn
ctx = cairn.init()
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                (path / "step").write_text(str(step))
    ctx.report_validation(step, {"val_loss": 1.0 / (step + 1)})
"""

CONFIG = """name: keyless
entrypoint: /usr/bin/python3 %s
searcher: {name: single, metric: val_loss, max_length: 4}
checkpoint: {period: 2}
max_restarts: 0
"""


class KeylessCase(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.agents = []
        peer_home(self, key=False)  # no key anywhere: both ends keyless
        self.write("train.py", TRAIN)
        self.write("exp.yaml", CONFIG % os.path.join(self.dir, "train.py"))

    def run_on(self, agent):
        return subprocess.run([CAIRN, "run", "exp.yaml", "--slots", "0", "--peers",
                               agent.address], cwd=self.dir, env=agent_env(self),
                              capture_output=True, text=True, timeout=240)

    def peers(self, address, wrap=(), env=None):
        return subprocess.run(list(wrap) + [CAIRN, "peers", "--peers", address, "--json"],
                              cwd=self.dir, env=agent_env(self, env), capture_output=True,
                              text=True, timeout=120)


class SameUserTest(KeylessCase):
    def test_a_keyless_agent_runs_ranks_and_keeps_checkpoints_for_its_user(self):
        agent = Agent(self, "--slots", "1")
        self.assertIn("key id none, no key file: loopback only, this user only", agent.listening)
        run = self.run_on(agent)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr + agent.text())
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["placement"][0]["machine"], agent.address, trial)
        # Its checkpoint reached this store through the agent (the latest is kept).
        self.assertEqual([c["steps_completed"] for c in trial["checkpoints"]], [4], trial)
        self.assertEqual(trial["latest_checkpoint"], trial["checkpoints"][0]["id"])
        text = agent.text()
        self.assertRegex(text, r"started rank \d+ of 127\.0\.0\.1:\d+: /usr/bin/python3")
        self.assertNotIn("refused", text)


@needs("second_user", SECOND_USER, SECOND_USER_WHY)
class OtherUserTest(KeylessCase):
    def test_another_users_coordinator_is_refused_with_one_line_each_side(self):
        agent = Agent(self, "--slots", "1")
        # The raw client as the other user: the agent answers its hello with a refusal.
        lines = subprocess.run(AS_OTHER + [TEST_CLIENT, agent.address, "none", "run", "x",
                                           "/bin/true"],
                               capture_output=True, text=True, timeout=60).stdout.splitlines()
        frames = [json.loads(l) for l in lines if l.startswith("{")]
        self.assertEqual(frames[0]["type"], "refused", frames)
        self.assertEqual(frames[0]["code"], "other_user", frames)
        why = "the coordinator runs as uid %d, not as this agent's uid %d" % (OTHER, os.geteuid())
        self.assertIn(why, frames[0]["reason"])
        refused = agent.line(lambda l: "refused 127.0.0.1:" in l, "the agent's refusal")
        self.assertIn(why, refused)
        self.assertFalse(os.path.exists(os.path.join(agent.dir, "work", "x")))
        # `cairn peers` as the other user: it finds the agent is not its user's and stops
        # (key_mismatch, one line); the agent refuses it from its side too (one line).
        proc = self.peers(agent.address, wrap=AS_OTHER, env=OTHER_ENV)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        doc = json.loads(proc.stdout)
        self.assertEqual(doc[0]["status"], "key_mismatch", doc)
        self.assertIn("the agent runs as uid %d, not as this user's uid %d"
                      % (os.geteuid(), OTHER), doc[0]["error"])
        lines = agent.lines_until(lambda l: "refused" in l, what="the second refusal")
        self.assertEqual(len([l for l in lines if "refused" in l]), 1, lines)
        self.assertIn(why, lines[-1])
        # The agent's own user is still served.
        proc = self.peers(agent.address)
        self.assertEqual(json.loads(proc.stdout)[0]["status"], "ok", proc.stderr)

    def test_another_users_agent_is_refused_before_anything_is_sent(self):
        # The other user's keyless agent (squatting a port, say): its directory is its own.
        home = tempfile.mkdtemp(prefix="cairn-other-")
        self.addCleanup(shutil.rmtree, home, ignore_errors=True)
        os.chown(home, OTHER, OTHER)
        agent = Agent(self, "--slots", "1", wrap=AS_OTHER, dir=os.path.join(home, "agent"),
                      env=OTHER_ENV)
        why = "the agent runs as uid %d, not as this user's uid %d" % (OTHER, os.geteuid())
        proc = self.peers(agent.address)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        doc = json.loads(proc.stdout)
        self.assertEqual(doc[0]["status"], "key_mismatch", doc)
        self.assertIn(why, doc[0]["error"])
        # The agent says so from its side too.
        refused = agent.line(lambda l: "refused 127.0.0.1:" in l, "the agent's refusal")
        self.assertIn("the coordinator runs as uid %d, not as this agent's uid %d"
                      % (os.geteuid(), OTHER), refused)
        # A run sends it nothing: no code, no rank.
        run = self.run_on(agent)
        self.assertNotEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn(why, run.stdout + run.stderr)
        text = agent.text()
        self.assertNotIn("received code", text)
        self.assertNotIn("started rank", text)
        self.assertFalse(re.search(r"connected 127\.0\.0\.1:\d+ \(key id", text), text)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
