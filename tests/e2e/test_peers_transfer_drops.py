"""Checkpoint transfers that outlive a dropped link (issue 17 item 8, docs/peers.md "Reattach:
links that drop" and "Checkpoints over the wire"): a 64 MiB checkpoint moving between a real
`cairn agent` on loopback and `cairn run`, through test_peers_reattach.py's TCP proxy, when
the proxy is killed in the middle of the bytes and listens again within the heartbeat
timeout:

- a fetch (agent -> coordinator) goes on on a new connection: the checkpoint is registered
  once, the rank acknowledged, the same rank process trains on, and the objects that had
  arrived and were verified before the drop are not asked for again (the agent's log line of
  the try that completed names fewer wanted objects and content bytes than the checkpoint
  holds);
- a restore (coordinator -> agent) is pushed again on a new connection, sending only what
  the agent's cache still lacks, instead of failing the rank with exit status 127;
- a link that stays down past the heartbeat timeout loses the agent as before: the fetch
  gives up, the checkpoint is not registered, the trial goes on from scratch on another agent,
  not charged to max_restarts.

The proxy here also throttles what it carries (16 MiB/s per connection), so a 64 MiB transfer
lasts seconds, and counts the bytes of each connection in each direction: the test kills it
once a connection has carried a quarter of the checkpoint."""
import json
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import wait_until  # noqa: E402
from peer_testlib import BackgroundRun  # noqa: E402
from test_peers_placement import Agent, PlacementCase  # noqa: E402
from test_peers_reattach import Proxy  # noqa: E402

MIB = 1024 * 1024
FILES = 8  # of 8 MiB each: a drop after some of them leaves whole verified objects behind
FILE_BYTES = 8 * MIB
RATE = 16 * MIB  # bytes per second per connection and direction, through the proxy

# Checkpoints 64 MiB at step 2 (eight distinct files) and nothing else. With FAIL_ONCE, the
# first attempt exits 3 once its checkpoint is acknowledged, and the next one restores it,
# checks every byte and finishes.
TRAIN = r"""
import hashlib, os, sys, time
import cairn

FILES, FILE_BYTES = %d, %d
def content(i):
    return hashlib.sha256(b"file %%d" %% i).digest() * (FILE_BYTES // 32)

ctx = cairn.init()
print("pid", os.getpid(), "attempt", os.environ.get("CAIRN_ATTEMPT"), "starts at",
      ctx.steps_completed, flush=True)
if ctx.latest_checkpoint is not None:
    for i in range(FILES):
        with open(os.path.join(str(ctx.latest_checkpoint), "part-%%d.bin" %% i), "rb") as f:
            assert f.read() == content(i), "restored part %%d differs" %% i
    print("restored weights ok", flush=True)
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        time.sleep(float(os.environ.get("STEP_SECONDS", "0.2")))
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        print("step", step, flush=True)
        if step == 2:
            with ctx.checkpoint(step) as path:
                print("checkpoint dir", path, flush=True)
                for i in range(FILES):
                    with open(os.path.join(str(path), "part-%%d.bin" %% i), "wb") as f:
                        f.write(content(i))
            print("checkpointed", step, flush=True)
            if os.environ.get("FAIL_ONCE") and ctx.latest_checkpoint is None:
                sys.exit(3)
    ctx.report_validation(step, {"val_loss": 1.0 / (step + 1)})
""" % (FILES, FILE_BYTES)

# A gang of two ranks, one per agent: each writes its own 32 MiB shard (four files) into the
# round's directory on its machine at step 2 (docs/peers.md "A checkpoint round over
# machines").
GANG = r"""
import hashlib, os, time
import cairn

FILES, FILE_BYTES = %d, %d
ctx = cairn.init()
rank = int(os.environ["RANK"])
print("rank", rank, "pid", os.getpid(), "attempt", os.environ.get("CAIRN_ATTEMPT"), flush=True)
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        time.sleep(0.2)
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        if step == 2:
            with ctx.checkpoint(step) as path:
                for i in range(FILES // 2):
                    data = hashlib.sha256(b"rank %%d file %%d" %% (rank, i)).digest()
                    with open(os.path.join(str(path), "r%%d-part-%%d.bin" %% (rank, i)), "wb") as f:
                        f.write(data * (FILE_BYTES // 32))
            print("rank", rank, "checkpointed", step, flush=True)
    ctx.report_validation(step, {"val_loss": 1.0 / (step + 1)})
""" % (FILES, FILE_BYTES)

# One 200 MiB file at step 2: a drop in its middle leaves no whole content behind, only the
# part of it that arrived (docs/peers.md "Checkpoint transfers over a dropped link"). With
# FAIL_ONCE as above.
BIG_BYTES = 200 * MIB
BIG = r"""
import hashlib, os, sys, time
import cairn

BIG_BYTES = %d
def big():
    return hashlib.sha256(b"big").digest() * (BIG_BYTES // 32)

ctx = cairn.init()
print("pid", os.getpid(), "attempt", os.environ.get("CAIRN_ATTEMPT"), "starts at",
      ctx.steps_completed, flush=True)
if ctx.latest_checkpoint is not None:
    with open(os.path.join(str(ctx.latest_checkpoint), "big.bin"), "rb") as f:
        assert f.read() == big(), "restored big.bin differs"
    print("restored weights ok", flush=True)
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        time.sleep(0.2)
        step += 1
        ctx.report_training(step, {"loss": 1.0 / step})
        if step == 2:
            with ctx.checkpoint(step) as path:
                with open(os.path.join(str(path), "big.bin"), "wb") as f:
                    f.write(big())
            print("checkpointed", step, flush=True)
            if os.environ.get("FAIL_ONCE") and ctx.latest_checkpoint is None:
                sys.exit(3)
    ctx.report_validation(step, {"val_loss": 1.0 / (step + 1)})
""" % BIG_BYTES

CONFIG = """name: transfer-drops
entrypoint: /usr/bin/python3 %s
searcher: {name: single, metric: val_loss, max_length: %d}
max_restarts: %d
"""

SENT = re.compile(r"sent checkpoint of trial 1\.1 attempt (\d+) to \S+: (\d+) files \((\d+) "
                  r"bytes\), (\d+) wanted, (\d+) content bytes on the wire")
RECEIVED = re.compile(r"received checkpoint of trial 1\.1 attempt (\d+) from \S+: (\d+) files "
                      r"\((\d+) bytes\), (\d+) wanted, (\d+) content bytes on the wire")


class CountingProxy(Proxy):
    """test_peers_reattach.py's proxy, throttled to RATE per connection and direction, that
    counts what each connection carried: `carried[id] = [to the agent, from the agent]`."""

    def __init__(self, test, target_port):
        self.carried = {}
        Proxy.__init__(self, test, target_port)

    def carried_bytes(self, pump_id, direction, n):
        counts = self.carried.setdefault(pump_id, [0, 0])
        counts[direction] += n
        time.sleep(n / RATE)

    def most(self, direction):
        """The most bytes one connection carried in `direction` (0: to the agent)."""
        return max([c[direction] for c in list(self.carried.values())] or [0])

    def total(self, direction):
        """The bytes every connection carried in `direction`, together."""
        return sum(c[direction] for c in list(self.carried.values()))


class FastCountingProxy(CountingProxy):
    """The same at 64 MiB/s per connection and direction: 200 MiB in about 3 s."""

    def carried_bytes(self, pump_id, direction, n):
        counts = self.carried.setdefault(pump_id, [0, 0])
        counts[direction] += n
        time.sleep(n / (4 * RATE))


class TransferDropTest(BackgroundRun, PlacementCase):
    def setUp(self):
        super().setUp()
        self.write("train.py", TRAIN)

    def start_run(self, peers, length=6, max_restarts=0, env=None):
        self.write("exp.yaml", CONFIG % (os.path.join(self.dir, "train.py"), length,
                                         max_restarts))
        return self.start_background_run(peers, env)

    def kill_mid_transfer(self, proxy, direction, freeze=False):
        """Kills the proxy (or, with `freeze`, silences every connection through it) once a
        connection carried a quarter of the checkpoint in `direction`, before it carried all
        of it."""
        wait_until(lambda: proxy.most(direction) >= FILES * FILE_BYTES // 4, timeout=120,
                   interval=0.01, what="a quarter of the checkpoint through the proxy")
        if freeze:
            proxy.freeze()
        else:
            proxy.kill()
        self.assertLess(proxy.most(direction), FILES * FILE_BYTES,
                        "the whole checkpoint passed before the kill")

    def checkpoints(self):
        """Trial 1.1's registered checkpoints (`cairn checkpoints --json`)."""
        return json.loads(self.cairn("checkpoints", "1.1", "--json", check=0).stdout)

    def test_a_fetch_whose_link_drops_goes_on_and_registers_the_checkpoint_once(self):
        a = Agent(self, "agent-a", 1)
        proxy = CountingProxy(self, a.port)
        run = self.start_run(proxy.address)
        self.kill_mid_transfer(proxy, 1)
        # Both the session and the transfer saw the link go; it comes back well within the
        # heartbeat timeout (10 s).
        self.wait_output(r"the connection dropped")
        a.wait_log("dropped 127.0.0.1")
        proxy.restart()
        self.assertEqual(run.wait(timeout=240), 0, self.output())
        text = self.output()
        self.assertNotIn("was not saved", text)
        self.assertNotIn("lost agent", text)
        self.assertEqual(len(re.findall(r"\[1\.1\] pid \d+ attempt", text)), 1, text)
        self.assertEqual(len(re.findall(r"\[1\.1\] checkpointed 2\n", text)), 1, text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        listed = self.checkpoints()
        self.assertEqual([c["steps_completed"] for c in listed], [2], listed)
        # Every byte, new to the store once.
        self.assertGreaterEqual(listed[0]["bytes"], FILES * FILE_BYTES, listed)
        self.assertEqual(listed[0]["new_bytes"], listed[0]["bytes"], listed)
        # The try that completed asked only for what had not arrived before the drop.
        sent = [SENT.search(l) for l in a.text().splitlines() if SENT.search(l)]
        self.assertEqual(len(sent), 1, a.text())
        attempt, files, total, wanted, content = (int(sent[0].group(i)) for i in range(1, 6))
        self.assertEqual(attempt, 1)
        self.assertGreaterEqual(total, FILES * FILE_BYTES)
        self.assertGreaterEqual(files, FILES)
        self.assertLess(wanted, FILES, a.text())
        self.assertLess(content, FILES * FILE_BYTES, a.text())
        # Its staging directory on the agent went once the checkpoint was durable here.
        staged = re.findall(r"\[1\.1\] checkpoint dir (\S+)", text)
        self.assertEqual(len(staged), 1, text)
        self.assertFalse(os.path.exists(staged[0]), staged[0])

    def test_a_fetch_whose_link_goes_silent_goes_on_when_the_session_notices(self):
        a = Agent(self, "agent-a", 1)
        proxy = CountingProxy(self, a.port)
        run = self.start_run(proxy.address)
        self.kill_mid_transfer(proxy, 1, freeze=True)  # no end either side sees
        frozen = time.monotonic()
        # The session hears nothing for half the heartbeat timeout (5 s), resumes on a new
        # connection and lets go of the transfer's, which goes on on a new one too, long
        # before the transfer's own 60 s timeout.
        self.wait_output(r"the connection dropped \(\S+: nothing heard for [\d.]+ s\)")
        self.wait_output(r"the checkpoint transfer of trial 1\.1 lost its connection \(.*"
                         r"released.*\); trying again")
        self.wait_output(r"\[1\.1\] checkpointed 2\n", timeout=60)
        self.assertLess(time.monotonic() - frozen, 40, self.output())
        self.assertEqual(run.wait(timeout=240), 0, self.output())
        text = self.output()
        self.assertNotIn("was not saved", text)
        self.assertIn("the checkpoint transfer of trial 1.1 continued on a new connection", text)
        self.assertEqual(len(re.findall(r"\[1\.1\] pid \d+ attempt", text)), 1, text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        listed = self.checkpoints()
        self.assertEqual([c["steps_completed"] for c in listed], [2], listed)
        self.assertGreaterEqual(listed[0]["bytes"], FILES * FILE_BYTES, listed)
        sent = [SENT.search(l) for l in a.text().splitlines() if SENT.search(l)]
        self.assertEqual(len(sent), 1, a.text())
        self.assertLess(int(sent[0].group(4)), FILES, a.text())

    def assert_released_early(self, agent, since):
        """The agent let go of its side of the silent transfer connection when the session's
        connection ended, well before the wire's 60 s frame timeout."""
        line = agent.wait_log("released: its coordinator's session connection ended",
                              timeout=50)
        self.assertLess(time.monotonic() - since, 30, line)
        self.assertRegex(line, r"(dropped|kept) ")

    def test_the_agent_lets_go_of_a_silent_transfer_when_the_session_notices(self):
        a = Agent(self, "agent-a", 1)
        proxy = CountingProxy(self, a.port)
        run = self.start_run(proxy.address)
        self.kill_mid_transfer(proxy, 1, freeze=True)  # no end either side sees
        frozen = time.monotonic()
        # The coordinator resumes its session on a new connection after 5 s of silence; the
        # agent lets go of the old session connection then, and of the transfer connection
        # opened while that one held the session: its thread no longer waits to send into
        # the silent link for 60 s.
        self.assert_released_early(a, frozen)
        self.assertEqual(run.wait(timeout=240), 0, self.output())
        self.assertNotIn("was not saved", self.output())

    def test_a_content_cut_in_the_middle_of_a_fetch_is_not_sent_twice(self):
        self.write("train.py", BIG)
        a = Agent(self, "agent-a", 1)
        proxy = FastCountingProxy(self, a.port)
        run = self.start_run(proxy.address)
        # Cut when half the one content passed.
        wait_until(lambda: proxy.most(1) >= BIG_BYTES // 2, timeout=120, interval=0.01,
                   what="half of the content through the proxy")
        proxy.kill()
        self.assertLess(proxy.most(1), BIG_BYTES, "the whole content passed before the kill")
        self.wait_output(r"the connection dropped")
        proxy.restart()
        self.assertEqual(run.wait(timeout=240), 0, self.output())
        text = self.output()
        self.assertNotIn("was not saved", text)
        self.assertIn("continued on a new connection", text)
        listed = self.checkpoints()
        self.assertEqual([c["steps_completed"] for c in listed], [2], listed)
        self.assertGreaterEqual(listed[0]["bytes"], BIG_BYTES, listed)
        # Every byte from the agent, over every connection: the content once, plus frames
        # and TLS (a whole second copy would be 100 MiB more).
        self.assertLess(proxy.total(1), BIG_BYTES + 8 * MIB, proxy.carried)
        # The try that completed sent the rest only.
        sent = [SENT.search(l) for l in a.text().splitlines() if SENT.search(l)]
        self.assertEqual(len(sent), 1, a.text())
        self.assertLess(int(sent[0].group(5)), BIG_BYTES * 3 // 4, a.text())
        self.assertRegex(a.text(), r"1 content resumed after \d+ bytes kept")
        staged = re.findall(r"\[1\.1\] checkpoint dir (\S+)", text)
        self.assertFalse(staged and os.path.exists(staged[0]), staged)

    def flap(self, proxy, direction, timeout):
        """Cuts the link each time another 25 MiB passed through `proxy` in `direction` (1:
        from the agent, 0: to it), seven times, each once the session noticed the one before,
        and checks that the cuts outlasted the 2 s window counted from the first."""
        first_cut = None
        for cut in range(1, 8):
            wait_until(lambda: proxy.total(direction) >= cut * 25 * MIB, timeout=timeout,
                       interval=0.01, what="%d MiB of the content through the proxy" % (cut * 25))
            proxy.kill()
            first_cut = first_cut or time.monotonic()
            wait_until(lambda: len(re.findall(r"the connection dropped", self.output())) >= cut,
                       timeout=30, what="the session to notice cut %d" % cut)
            proxy.restart()
        self.assertGreater(time.monotonic() - first_cut, 2, "the cuts lasted less than the window")

    def test_a_content_larger_than_a_flapping_link_carries_at_once_arrives(self):
        self.write("train.py", BIG)
        a = Agent(self, "agent-a", 1)
        proxy = FastCountingProxy(self, a.port)
        # A 2 s heartbeat timeout, and a link cut each time another 25 MiB of the content
        # passed: the cuts go on for longer than the window from the first one. Each try goes
        # on from the bytes kept, which is progress: the window starts anew, as it does for a
        # resumed session, and the checkpoint arrives (counting the window from the first cut
        # only, the fetch gave up: "was not saved").
        run = self.start_run(proxy.address, env={"CAIRN_HEARTBEAT_TIMEOUT": "2"})
        self.flap(proxy, direction=1, timeout=120)
        self.assertEqual(run.wait(timeout=240), 0, self.output())
        text = self.output()
        self.assertNotIn("was not saved", text)
        self.assertNotIn("lost agent", text)
        listed = self.checkpoints()
        self.assertEqual([c["steps_completed"] for c in listed], [2], listed)
        self.assertGreaterEqual(listed[0]["bytes"], BIG_BYTES, listed)
        self.assertLess(proxy.total(1), BIG_BYTES + 8 * MIB, proxy.carried)

    def test_a_restore_larger_than_a_flapping_link_carries_at_once_arrives(self):
        self.write("train.py", BIG)
        a = Agent(self, "agent-a", 1)
        proxy = FastCountingProxy(self, a.port)
        # As above, for attempt 2's restore to the agent: an agent that asks a content from
        # further on than the try before kept what that try sent, which is progress.
        run = self.start_run(proxy.address, max_restarts=1,
                             env={"FAIL_ONCE": "1", "CAIRN_HEARTBEAT_TIMEOUT": "2"})
        self.flap(proxy, direction=0, timeout=180)
        self.assertEqual(run.wait(timeout=240), 0, self.output())
        text = self.output()
        self.assertNotIn("cannot restore the checkpoint", text)
        self.assertIn("[1.1] restored weights ok", text)
        self.assertLess(proxy.total(0), BIG_BYTES + 8 * MIB, proxy.carried)

    def test_a_content_cut_in_the_middle_of_a_restore_is_not_sent_twice(self):
        self.write("train.py", BIG)
        a = Agent(self, "agent-a", 1)
        proxy = FastCountingProxy(self, a.port)
        run = self.start_run(proxy.address, max_restarts=1, env={"FAIL_ONCE": "1"})
        # Attempt 1's checkpoint travels from the agent whole; attempt 2's restore to it is
        # cut when half the content passed.
        wait_until(lambda: proxy.most(0) >= BIG_BYTES // 2, timeout=180, interval=0.01,
                   what="half of the content through the proxy to the agent")
        proxy.kill()
        self.assertLess(proxy.most(0), BIG_BYTES, "the whole content passed before the kill")
        self.wait_output(r"the connection dropped")
        proxy.restart()
        self.assertEqual(run.wait(timeout=240), 0, self.output())
        text = self.output()
        self.assertNotIn("cannot restore the checkpoint", text)
        self.assertIn("[1.1] restored weights ok", text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["restarts"], 1, trial)
        self.assertLess(proxy.total(0), BIG_BYTES + 8 * MIB, proxy.carried)
        received = [RECEIVED.search(l) for l in a.text().splitlines() if RECEIVED.search(l)]
        self.assertEqual(len(received), 1, a.text())
        self.assertLess(int(received[0].group(5)), BIG_BYTES * 3 // 4, a.text())
        self.assertRegex(a.text(), r"1 content resumed after \d+ bytes kept; restored in")
        # Nothing partial is left in the agent's content cache.
        objects = os.path.join(a.dir, "objects")
        self.assertEqual([n for n in os.listdir(objects) if n.startswith("tmp-")], [])

    def test_a_rounds_part_whose_link_drops_goes_on(self):
        a = Agent(self, "agent-a", 1)
        b = Agent(self, "agent-b", 1)
        proxy = CountingProxy(self, a.port)
        self.write("gang.py", GANG)
        self.write("exp.yaml", CONFIG % (os.path.join(self.dir, "gang.py"), 4, 0) +
                   "resources: {slots_per_trial: 2}\n")
        run = self.start_background_run(proxy.address + "," + b.address)
        # Agent a's part is half the checkpoint: killed when a quarter of it passed.
        self.kill_mid_transfer(proxy, 1)
        self.assertLess(proxy.most(1), FILES * FILE_BYTES // 2)
        self.wait_output(r"the connection dropped")
        proxy.restart()
        self.assertEqual(run.wait(timeout=240), 0, self.output())
        text = self.output()
        self.assertNotIn("was not saved", text)
        self.assertNotIn("lost agent", text)
        self.assertIn("continued on a new connection", text)
        self.assertEqual(len(re.findall(r"rank \d pid \d+ attempt", text)), 2, text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        listed = self.checkpoints()
        self.assertEqual([c["steps_completed"] for c in listed], [2], listed)
        self.assertGreaterEqual(listed[0]["bytes"], FILES * FILE_BYTES, listed)
        sent = [SENT.search(l) for l in a.text().splitlines() if SENT.search(l)]
        self.assertEqual(len(sent), 1, a.text())
        self.assertLess(int(sent[0].group(4)), FILES // 2, a.text())

    def test_a_fetch_from_a_hung_agent_ends_when_the_agent_is_lost(self):
        a = Agent(self, "agent-a", 1)
        b = Agent(self, "agent-b", 1)
        proxy = CountingProxy(self, a.port)
        run = self.start_run(proxy.address + "," + b.address,
                             env={"CAIRN_HEARTBEAT_TIMEOUT": "2"})
        wait_until(lambda: proxy.most(1) >= FILES * FILE_BYTES // 4, timeout=120,
                   interval=0.01, what="a quarter of the checkpoint through the proxy")
        # A frozen machine: its kernel keeps the connections open, nothing answers.
        os.kill(a.process.pid, signal.SIGSTOP)
        self.addCleanup(lambda: a.process.poll() is None and os.kill(a.process.pid,
                                                                     signal.SIGCONT))
        stopped = time.monotonic()
        self.wait_output(r"lost agent %s" % re.escape(proxy.address))
        # The transfer let go when the agent was lost, not after its 60 s frame timeout, so
        # the trial's next attempt (which waits for it) starts on b at once.
        self.wait_output(r"\[1\.1\] pid \d+ attempt 2 starts at 0\n", timeout=60)
        self.assertLess(time.monotonic() - stopped, 30, self.output())
        self.assertEqual(run.wait(timeout=240), 0, self.output())
        text = self.output()
        self.assertIn("checkpoint at step 2 was not saved", text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        self.assertEqual(trial["placement"][0]["machine"], b.address, trial)

    def test_a_restore_whose_link_drops_is_pushed_again(self):
        a = Agent(self, "agent-a", 1)
        proxy = CountingProxy(self, a.port)
        run = self.start_run(proxy.address, max_restarts=1, env={"FAIL_ONCE": "1"})
        # The fetch of attempt 1's checkpoint travels from the agent; the restore of
        # attempt 2 to it.
        self.kill_mid_transfer(proxy, 0)
        self.wait_output(r"the connection dropped")
        proxy.restart()
        self.assertEqual(run.wait(timeout=240), 0, self.output())
        text = self.output()
        self.assertNotIn("cannot restore the checkpoint", text)
        self.assertIn("[1.1] restored weights ok", text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 1, trial)  # attempt 1's own exit, no more
        received = [RECEIVED.search(l) for l in a.text().splitlines() if RECEIVED.search(l)]
        self.assertEqual(len(received), 1, a.text())
        attempt, files, total, wanted, content = (int(received[0].group(i)) for i in range(1, 6))
        self.assertEqual(attempt, 2)
        # What the agent's cache got before the drop was not sent again.
        self.assertLess(wanted, FILES, a.text())
        self.assertLess(content, FILES * FILE_BYTES, a.text())

    def test_a_fetch_whose_link_stays_down_fails_as_for_a_lost_agent(self):
        a = Agent(self, "agent-a", 1)
        b = Agent(self, "agent-b", 1)
        proxy = CountingProxy(self, a.port)
        run = self.start_run(proxy.address + "," + b.address,
                             env={"CAIRN_HEARTBEAT_TIMEOUT": "2"})
        self.kill_mid_transfer(proxy, 1)  # and never back
        started = time.monotonic()
        self.assertEqual(run.wait(timeout=240), 0, self.output())
        text = self.output()
        self.assertIn("lost agent %s" % proxy.address, text)
        self.assertIn("checkpoint at step 2 was not saved", text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)  # a lost machine is not the trial's
        self.assertEqual(trial["placement"][0]["machine"], b.address, trial)
        # The restart on b began from scratch, then checkpointed there.
        self.assertIn("[1.1] pid", text)
        self.assertRegex(text, r"\[1\.1\] pid \d+ attempt 2 starts at 0\n")
        listed = self.checkpoints()
        self.assertEqual([c["steps_completed"] for c in listed], [2], listed)
        self.assertLess(time.monotonic() - started, 200)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
