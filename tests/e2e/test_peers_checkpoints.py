"""Checkpoints over the wire (issue 17 item 6, docs/peers.md "Checkpoints over the wire"):
a Python SDK trial runs on a real `cairn agent` on loopback; its checkpoints are written in
the agent's directory and reach the coordinator's store as a manifest plus only the content
the store lacks; a restart restores on the agent, which receives only what its cache lacks.
Content bytes on the wire are read from the agent's one log line per transfer. Hostile
requests (a path outside the agent's directory, a manifest with `..`, a symlink leading out,
an unknown trial or attempt) are refused with one line while the agent keeps serving; they
are sent by build/peer_test_client (tests/peer_client/), which authenticates with the real
key."""
import hashlib
import json
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, CairnTestCase, wait_until  # noqa: E402
from test_peers import TEST_CLIENT, Agent, PeersTest  # noqa: E402

WEIGHTS_BYTES = 3 * 1024 * 1024 + 17  # several chunks, the last one partial

# Checkpoints at steps 1 and 2 hold the same bytes (weights.bin never changes, and nothing
# uses the random generators, so the SDK's rng file is the same too): the second costs no
# content. Attempt 1 fails after step 2; the restart restores step 2's checkpoint on the
# agent, checks it, and finishes.
TRAIN = r"""
import hashlib
import os
import sys
import cairn

WEIGHTS = hashlib.sha256(b"w").digest() * (%d // 32) + b"x" * (%d %% 32)
ctx = cairn.init()
print("latest", ctx.latest_checkpoint, flush=True)
if ctx.latest_checkpoint is not None:
    with open(os.path.join(str(ctx.latest_checkpoint), "weights.bin"), "rb") as f:
        assert f.read() == WEIGHTS, "restored weights differ"
    print("restored weights ok", flush=True)
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        with ctx.checkpoint(step) as path:
            print("checkpoint dir", path, flush=True)
            with open(os.path.join(str(path), "weights.bin"), "wb") as f:
                f.write(WEIGHTS)
        if step == 2 and ctx.latest_checkpoint is None:
            sys.exit(3)
    ctx.report_validation(step, {"val_loss": 1.0 / (step + 1)})
""" % (WEIGHTS_BYTES, WEIGHTS_BYTES)

CONFIG = """name: remote-checkpoints
entrypoint: [/usr/bin/python3, %s]
searcher: {name: single, metric: val_loss, max_length: 3}
max_restarts: 1
checkpoint: {keep_trial_latest: 3}
"""

# Checkpoints at step 1 on the first agent, then waits there to lose its machine; the next
# attempt, on the other agent, restores and checks it, then finishes.
MOVE = r"""
import hashlib, os, time
import cairn

WEIGHTS = hashlib.sha256(b"m").digest() * (%d // 32)
ctx = cairn.init()
print("pid", os.getpid(), "attempt", os.environ.get("CAIRN_ATTEMPT"), flush=True)
print("latest", ctx.latest_checkpoint, flush=True)
if ctx.latest_checkpoint is not None:
    with open(os.path.join(str(ctx.latest_checkpoint), "weights.bin"), "rb") as f:
        assert f.read() == WEIGHTS, "restored weights differ"
    print("restored weights ok", flush=True)
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        with ctx.checkpoint(step) as path:
            with open(os.path.join(str(path), "weights.bin"), "wb") as f:
                f.write(WEIGHTS)
        print("checkpointed", step, flush=True)
        if ctx.latest_checkpoint is None:
            time.sleep(120)  # until its machine is gone
    ctx.report_validation(step, {"val_loss": 1.0 / (step + 1)})
""" % WEIGHTS_BYTES

SENT = re.compile(r"sent checkpoint of trial (\S+) attempt (\d+) to \S+: (\d+) files \((\d+) "
                  r"bytes\), (\d+) wanted, (\d+) content bytes on the wire")
RECEIVED = re.compile(r"received checkpoint of trial (\S+) attempt (\d+) from \S+: (\d+) files "
                      r"\((\d+) bytes\), (\d+) wanted, (\d+) content bytes on the wire; "
                      r"restored in (\S+)")


class PeerCheckpointsTest(CairnTestCase):
    # The agents' plumbing of test_peers.py (not its tests).
    def setUp(self):
        CairnTestCase.setUp(self)
        self.agents = []
        self.addCleanup(self.kill_agents)
        self.home = os.path.join(self.dir, "home")
        os.makedirs(self.home)
        self.assertTrue(os.path.exists(TEST_CLIENT), "build peer_test_client: " + TEST_CLIENT)

    kill_agents = PeersTest.kill_agents
    agent_env = PeersTest.agent_env
    new_key = PeersTest.new_key
    peers = PeersTest.peers

    def request(self, agent, key, message):
        """One request through peer_test_client; its answer as a dict."""
        proc = subprocess.run([TEST_CLIENT, agent.address, key, "request", json.dumps(message)],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout.splitlines()[-1])  # after the agent's hello

    def test_checkpoints_travel_only_missing_content_both_ways(self):
        key, _ = self.new_key("cluster.key")
        agent = Agent(self, "--key-file", key)
        self.write("train.py", TRAIN)
        self.write("exp.yaml", CONFIG % os.path.join(self.dir, "train.py"))
        # --slots 0: nothing runs on this machine, every attempt on the agent.
        proc = self.cairn("run", "exp.yaml", "--peers", agent.address, "--key-file", key,
                          "--slots", "0", env=self.agent_env(), timeout=180)
        out = proc.stdout + proc.stderr
        self.assertEqual(proc.returncode, 0, out)
        # The trial wrote its checkpoints in the agent's directory, not in this store.
        dirs = re.findall(r"^\[1\.1\] checkpoint dir (\S+)$", out, re.M)
        self.assertEqual(len(dirs), 3, out)
        for d in dirs:
            self.assertTrue(d.startswith(os.path.join(agent.dir, "work", "trials", "1.1",
                                                      "checkpoints") + "/"), d)
            # The agent answers checkpoint_dropped, then removes the directory.
            wait_until(lambda: not os.path.exists(d), timeout=30,
                       what="the agent to remove its staging " + d)
        sent = [SENT.search(agent.line(lambda l: "sent checkpoint" in l)) for _ in range(2)]
        # Step 1: everything is new (the weights and the SDK's rng file).
        self.assertEqual((sent[0].group(1), sent[0].group(2)), ("1.1", "1"))
        files, total, wanted, content = (int(sent[0].group(i)) for i in (3, 4, 5, 6))
        self.assertEqual(files, 2)
        self.assertEqual(wanted, 2)
        self.assertEqual(content, total)
        self.assertGreater(content, WEIGHTS_BYTES)
        # Step 2: identical bytes: nothing travels.
        self.assertEqual(sent[1].group(2), sent[0].group(2))  # the same attempt
        self.assertEqual((int(sent[1].group(5)), int(sent[1].group(6))), (0, 0), sent[1].group(0))
        # The restart restores step 2's checkpoint on the agent: its cache was empty.
        received = RECEIVED.search(agent.line(lambda l: "received checkpoint" in l))
        self.assertEqual((received.group(1), received.group(2)), ("1.1", "2"))  # the new attempt
        self.assertEqual(int(received.group(5)), 2)
        self.assertEqual(int(received.group(6)), total)
        restored = os.path.join(agent.dir, received.group(7))
        self.assertIn("latest " + restored, out)
        self.assertIn("restored weights ok", out)
        # Step 3 of the new attempt: the store has both files already.
        third = SENT.search(agent.line(lambda l: "sent checkpoint" in l))
        self.assertEqual(third.group(2), received.group(2))
        self.assertEqual(int(third.group(6)), 0, third.group(0))
        agent.line(lambda l: "ended (code 0, signal 0)" in l)

        # Registered in the coordinator's store, with the bytes that were new to it.
        show = json.loads(self.cairn("show", "1.1", "--json", check=0).stdout)
        self.assertEqual(show["state"], "COMPLETED", show)
        listed = json.loads(self.cairn("checkpoints", "1.1", "--json", check=0).stdout)
        steps = sorted(c["steps_completed"] for c in listed)
        self.assertEqual(steps, [1, 2, 3], listed)
        by_step = {c["steps_completed"]: c for c in listed}
        self.assertEqual(by_step[1]["new_bytes"], total, by_step[1])
        self.assertEqual(by_step[2]["new_bytes"], 0, by_step[2])
        self.assertEqual(by_step[3]["new_bytes"], 0, by_step[3])
        self.assertEqual(by_step[3]["bytes"], total, by_step[3])
        code, rest = agent.stop()
        self.assertEqual(code, 0, rest)

    def test_a_trial_that_loses_its_agent_resumes_on_another_from_its_checkpoint(self):
        key, _ = self.new_key("cluster.key")
        a = Agent(self, "--key-file", key, "--slots", "1")
        b = Agent(self, "--key-file", key, "--slots", "1")
        self.write("move.py", MOVE)
        self.write("exp.yaml", CONFIG.replace("max_restarts: 1", "max_restarts: 0")
                   .replace("max_length: 3", "max_length: 2") % os.path.join(self.dir, "move.py"))
        log = os.path.join(self.dir, "run.out")
        with open(log, "w") as out:
            run = subprocess.Popen([CAIRN, "run", "exp.yaml", "--slots", "0", "--peers",
                                    a.address + "," + b.address, "--key-file", key],
                                   cwd=self.dir, env=self.agent_env(), stdout=out,
                                   stderr=subprocess.STDOUT)
        self.addCleanup(lambda: run.poll() is None and (run.kill(), run.wait()))

        def output():
            with open(log) as f:
                return f.read()

        # The first listed agent runs it; its checkpoint reaches this store from there.
        sent = SENT.search(a.line(lambda l: "sent checkpoint" in l))
        self.assertEqual(sent.group(2), "1")
        total = int(sent.group(4))
        self.assertEqual(int(sent.group(6)), total)
        wait_until(lambda: "[1.1] checkpointed 1" in output(), timeout=60,
                   what="the first checkpoint acknowledged")
        pid = int(re.search(r"\[1\.1\] pid (\d+) attempt 1", output()).group(1))
        # The machine goes away: its agent and the rank it ran.
        a.process.kill()
        os.kill(pid, signal.SIGKILL)
        # The other agent gets the checkpoint from this store: all of it, its cache was empty.
        received = RECEIVED.search(b.line(lambda l: "received checkpoint" in l, timeout=60))
        self.assertEqual((received.group(1), received.group(2)), ("1.1", "2"))
        self.assertEqual((int(received.group(5)), int(received.group(6))), (2, total))
        self.assertEqual(run.wait(timeout=120), 0, output())
        text = output()
        self.assertIn("restored weights ok", text)
        self.assertIn("latest " + os.path.join(b.dir, received.group(7)), text)
        show = json.loads(self.cairn("show", "1.1", "--json", check=0).stdout)
        self.assertEqual(show["state"], "COMPLETED", show)
        self.assertEqual(show["restarts"], 0, show)

    def test_hostile_checkpoint_requests_refused_with_one_line_agent_keeps_serving(self):
        key, _ = self.new_key("cluster.key")
        agent = Agent(self, "--key-file", key)
        # A path outside the agent's directory.
        answer = self.request(agent, key, {"type": "checkpoint_fetch", "trial": "1.1",
                                           "attempt": 2, "path": "/etc"})
        self.assertEqual(answer["type"], "error")
        self.assertIn("/etc is outside the agent's directory", answer["reason"])
        line = agent.line(lambda l: "refused a checkpoint request" in l)
        self.assertIn("outside the agent's directory", line)
        # A path inside that was never staged, or staged for another attempt or trial.
        staged = self.request(agent, key, {"type": "checkpoint_stage", "trial": "1.1",
                                           "attempt": 2})
        self.assertEqual(staged["type"], "checkpoint_staged", staged)
        path = staged["path"]
        self.assertTrue(path.startswith(os.path.join(agent.dir, "work", "trials", "1.1",
                                                     "checkpoints") + "/"), path)
        for trial, attempt in (("1.1", 3), ("1.2", 2)):
            answer = self.request(agent, key, {"type": "checkpoint_fetch", "trial": trial,
                                               "attempt": attempt, "path": path})
            self.assertEqual(answer["type"], "error")
            self.assertIn("no checkpoint of trial %s attempt %d is staged at" % (trial, attempt),
                          answer["reason"])
            agent.line(lambda l: "refused a checkpoint request" in l)
        # A symlink leading out of the staged directory.
        os.symlink("/etc/passwd", os.path.join(path, "passwd"))
        answer = self.request(agent, key, {"type": "checkpoint_fetch", "trial": "1.1",
                                           "attempt": 2, "path": path})
        self.assertEqual(answer["type"], "error")
        self.assertIn("checkpoint holds a symlink: passwd", answer["reason"])
        agent.line(lambda l: "refused a checkpoint request" in l and "symlink" in l)
        # A checkpoint_want that asks for a content from beyond its end, or from an offset
        # that is no number, or for a digest the manifest does not name: refused with one
        # line, the directory still staged; a good offset gets the rest of the content only
        # (docs/peers.md "Resuming a content").
        os.remove(os.path.join(path, "passwd"))
        content = b"w" * 1000
        with open(os.path.join(path, "weights.bin"), "wb") as f:
            f.write(content)
        digest = hashlib.sha256(content).hexdigest()
        fetch = {"type": "checkpoint_fetch", "trial": "1.1", "attempt": 2, "path": path}
        for offsets, why in (({digest: 1001}, "from an offset beyond its 1000 bytes"),
                             ({digest: "10"}, "from an offset beyond its 1000 bytes"),
                             ({"a" * 64: 1}, "does not ask for"),
                             ([1], "offsets is not an object")):
            want = {"type": "checkpoint_want", "digests": [digest], "offsets": offsets}
            proc = subprocess.run([TEST_CLIENT, agent.address, key, "fetch-want",
                                   json.dumps(fetch), json.dumps(want)],
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            manifest, answer = (json.loads(l) for l in proc.stdout.splitlines()[-2:])
            self.assertEqual(manifest["type"], "checkpoint_manifest", manifest)
            self.assertEqual(answer["type"], "error", answer)
            self.assertIn(why, answer["reason"])
            line = agent.line(lambda l: "refused a checkpoint request" in l and why in l)
            self.assertIn(digest[:12] if "beyond" in why else "checkpoint_want", line)
        want = {"type": "checkpoint_want", "digests": [digest], "offsets": {digest: 600}}
        proc = subprocess.run([TEST_CLIENT, agent.address, key, "fetch-want", json.dumps(fetch),
                               json.dumps(want)], capture_output=True, text=True, timeout=60)
        chunk = json.loads(proc.stdout.splitlines()[-1])
        self.assertEqual((chunk["type"], chunk["sha256"], chunk["offset"], chunk["bytes"]),
                         ("checkpoint_chunk", digest, 600, 400), chunk)
        # A restore whose manifest climbs out, or names an absolute path, or is malformed.
        digest = "0" * 64
        for bad, why in ((("../../escaped", 0o644, digest), "climbs out with '..'"),
                         (("/tmp/escaped", 0o644, digest), "an absolute path"),
                         (("a", 0o4755, digest), "no mode"),
                         (("a", 0o644, "XYZ"), "no sha256")):
            name, mode, sha = bad
            answer = self.request(agent, key, {
                "type": "checkpoint_offer", "trial": "1.1", "attempt": 2,
                "manifest": {"files": [{"path": name, "size": 1, "mode": mode,
                                        "sha256": sha}]}})
            self.assertEqual(answer["type"], "error", answer)
            self.assertIn(why, answer["reason"])
            self.assertEqual(len(answer["reason"].splitlines()), 1)
            agent.line(lambda l: "refused a checkpoint request" in l and "manifest" in l)
        self.assertFalse(os.path.exists(os.path.join(agent.dir, "escaped")))
        self.assertFalse(os.path.exists(os.path.join(agent.dir, "work", "escaped")))
        self.assertFalse(os.path.exists("/tmp/escaped"))
        # A bad trial id.
        answer = self.request(agent, key, {"type": "checkpoint_stage", "trial": "../x",
                                           "attempt": 1})
        self.assertEqual(answer["type"], "error")
        self.assertIn("bad trial id", answer["reason"])
        # Still serving.
        peers = json.loads(self.peers("--peers", agent.address, "--key-file", key,
                                      "--json", check=0).stdout)
        self.assertEqual(peers[0]["status"], "ok", peers)
        code, rest = agent.stop()
        self.assertEqual(code, 0, rest)


del PeersTest  # its tests run in test_peers.py, not here

if __name__ == "__main__":
    import unittest
    unittest.main()
