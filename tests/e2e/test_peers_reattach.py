"""Remote ranks that outlive their connection (issue 17 item 8, docs/peers.md "Reattach"):
a link between `cairn run` and a real `cairn agent` on loopback that drops and comes back
within the heartbeat timeout loses nothing (same rank process, no requeue, no step twice),
one that stays down longer loses the agent as before; a coordinator killed with SIGKILL
leaves its remote ranks running for `reattach_window` seconds, after which the agent has
them checkpoint as orphans and exit (test_peers_orphans.py), and a `cairn resume` within the
window adopts them (test_peers_adopt.py).

The link is a small TCP proxy in this process between the coordinator and the agent: it
can cut every connection through it (both ends see the connection end) and hold new ones
without forwarding them (a link that is down), so neither process is touched."""
import json
import os
import select
import signal
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402,F401
from cairn_testlib import wait_until  # noqa: E402
from peer_testlib import BackgroundRun, alive  # noqa: E402
from test_peers_placement import Agent, PlacementCase  # noqa: E402

CONFIG = """name: reattach
entrypoint: /usr/bin/python3 %s
searcher: {name: single, metric: val_loss, max_length: %d}
checkpoint: {period: 2}
max_restarts: 0
"""


class Proxy:
    """TCP on 127.0.0.1 to `target_port`: `down()` cuts every connection through it and
    holds new ones unforwarded, `up()` forwards again; `kill()` cuts them and closes its
    port (connections are refused), `restart()` listens on the same port again; `freeze()`
    stops carrying bytes on the connections open now, without closing them (a link gone
    silent: no end either side can see), while new ones work."""

    def __init__(self, test, target_port):
        self.target = ("127.0.0.1", target_port)
        self.port = 0
        self.listener = self._listen()
        self.port = self.listener.getsockname()[1]
        self.address = "127.0.0.1:%d" % self.port
        self.lock = threading.Lock()
        self.forwarding = True
        self.stopped = False
        self.closing = threading.Event()  # set by close(): frozen pumps end
        self.open = []  # every socket of a forwarded connection
        self.held = []  # connections accepted while down
        self.held_total = 0
        self.frozen = set()  # ids of the pumps that carry nothing any more
        self.pumps = []
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()
        test.addCleanup(self.close)

    def _listen(self):
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        return listener

    def _accept(self):
        while not self.stopped:
            with self.lock:
                listener = self.listener
            if listener is None:
                select.select([], [], [], 0.05)
                continue
            try:
                ready, _, _ = select.select([listener], [], [], 0.1)
                if not ready or self.stopped:
                    continue
                client, _ = listener.accept()
            except (OSError, ValueError):
                continue  # closed by kill()
            with self.lock:
                if not self.forwarding:
                    self.held.append(client)
                    self.held_total += 1
                    continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.open += [client, server]
            t = threading.Thread(target=self._pump, args=(client, server, len(self.threads)),
                                 daemon=True)
            t.start()
            self.threads.append(t)

    def _pump(self, a, b, pump_id):
        self.pumps.append(pump_id)
        try:
            while True:
                if pump_id in self.frozen:
                    # A silent link: nothing read, nothing carried; the thread sleeps (a
                    # select on the unread bytes would return at once, a busy loop).
                    if self.closing.wait(0.2):
                        return
                    continue
                ready, _, _ = select.select([a, b], [], [], 0.2)
                if self.stopped:
                    return
                if pump_id in self.frozen:
                    continue
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    (b if s is a else a).sendall(data)
                    self.carried_bytes(pump_id, 0 if s is a else 1, len(data))
        except OSError:
            return
        finally:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def carried_bytes(self, pump_id, direction, n):
        """Called on the pump's thread after it carried `n` bytes of connection `pump_id`
        (direction 0: from the connecting end, 1: to it); a subclass counts or throttles."""

    def cut(self):
        with self.lock:
            sockets, self.open = self.open, []
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def down(self):
        with self.lock:
            self.forwarding = False
        self.cut()

    def up(self):
        with self.lock:
            self.forwarding = True
            held, self.held = self.held, []
        for s in held:
            s.close()

    def freeze(self):
        self.frozen.update(self.pumps)

    def kill(self):
        with self.lock:
            listener, self.listener = self.listener, None
        listener.close()
        self.cut()

    def restart(self):
        def bound():  # the cut connections' sockets may hold the port for a moment
            try:
                return self._listen()
            except OSError:
                return None

        listener = wait_until(bound, timeout=30, what="the proxy's port free again")
        with self.lock:
            self.listener = listener

    def close(self):
        self.stopped = True
        self.closing.set()
        self.cut()
        self.up()
        for t in self.threads:
            t.join(timeout=10)
        with self.lock:
            listener, self.listener = self.listener, None
        if listener is not None:
            listener.close()


class ReattachTest(BackgroundRun, PlacementCase):
    def start_run(self, peers, env=None, length=30, window=None):
        config = CONFIG % (os.path.join(self.dir, "train.py"), length)
        if window is not None:
            config += "reattach_window: %d\n" % window
        self.write("exp.yaml", config)
        return self.start_background_run(peers, env)

    def kill_later(self, pid):
        self.addCleanup(lambda: alive(pid) and os.kill(pid, signal.SIGKILL))

    def training_steps(self):
        metrics = self.cairn_json("metrics", "1.1", "--json")
        return [p["step"] for p in metrics["training"]]

    def test_a_link_that_drops_and_comes_back_within_the_timeout_loses_nothing(self):
        a = Agent(self, "agent-a", 1)
        proxy = Proxy(self, int(a.address.rsplit(":", 1)[1]))
        run = self.start_run(proxy.address)
        self.wait_output(r"\[1\.1\] step 5\n")
        pid = self.rank_pids(self.output())[0]
        self.kill_later(pid)
        proxy.down()
        # Both ends saw it: the agent keeps the session, the coordinator tries to resume it
        # through a link that is still down.
        a.wait_log("kept 1 ranks of")
        self.wait_output(r"the connection dropped")
        wait_until(lambda: proxy.held_total >= 1, timeout=30, what="a resume while down")
        self.assertTrue(alive(pid))
        proxy.up()
        self.assertEqual(run.wait(timeout=180), 0, self.output())
        text = self.output()
        self.assertIn("agent %s: connection resumed" % proxy.address, text)
        self.assertNotIn("lost agent", text)
        self.assertNotIn("lost its machine", text)
        self.assertEqual(self.rank_pids(text), [pid], text)  # one process, never restarted
        a.wait_log("resumed session")
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        self.assertEqual(self.training_steps(), list(range(1, 31)))

    def test_a_proxy_killed_and_restarted_within_the_timeout_loses_nothing(self):
        a = Agent(self, "agent-a", 1)
        proxy = Proxy(self, int(a.address.rsplit(":", 1)[1]))
        run = self.start_run(proxy.address)
        self.wait_output(r"\[1\.1\] step 5\n")
        pid = self.rank_pids(self.output())[0]
        self.kill_later(pid)
        proxy.kill()  # refused while it is down: tried again, not a lost agent
        a.wait_log("kept 1 ranks of")
        self.wait_output(r"the connection dropped")
        proxy.restart()
        self.assertEqual(run.wait(timeout=180), 0, self.output())
        text = self.output()
        self.assertIn("agent %s: connection resumed" % proxy.address, text)
        self.assertNotIn("lost agent", text)
        self.assertEqual(self.rank_pids(text), [pid], text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        self.assertEqual(self.training_steps(), list(range(1, 31)))

    def test_a_link_gone_silent_is_replaced_by_a_new_connection_and_loses_nothing(self):
        a = Agent(self, "agent-a", 1)
        proxy = Proxy(self, int(a.address.rsplit(":", 1)[1]))
        run = self.start_run(proxy.address)
        self.wait_output(r"\[1\.1\] step 5\n")
        pid = self.rank_pids(self.output())[0]
        self.kill_later(pid)
        proxy.freeze()  # neither end sees the connection end; new connections work
        self.wait_output(r"the connection dropped \(\S+: nothing heard for [\d.]+ s\)")
        # The agent's end of the silent connection let go when the new one claimed it.
        a.wait_log("a new connection resumes its session")
        self.assertEqual(run.wait(timeout=180), 0, self.output())
        text = self.output()
        self.assertIn("agent %s: connection resumed" % proxy.address, text)
        self.assertNotIn("lost agent", text)
        self.assertEqual(self.rank_pids(text), [pid], text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        self.assertEqual(self.training_steps(), list(range(1, 31)))

    def test_a_link_down_longer_than_the_timeout_loses_the_agent(self):
        a = Agent(self, "agent-a", 1)
        b = Agent(self, "agent-b", 1)
        proxy = Proxy(self, int(a.address.rsplit(":", 1)[1]))
        run = self.start_run(proxy.address + "," + b.address,
                             env={"CAIRN_HEARTBEAT_TIMEOUT": "2"}, window=0)
        self.wait_output(r"\[1\.1\] step 3\n")
        pid = self.rank_pids(self.output())[0]
        self.kill_later(pid)
        proxy.down()
        b.wait_log("started rank", timeout=60)
        self.assertEqual(run.wait(timeout=180), 0, self.output())
        text = self.output()
        self.assertIn("lost agent %s (the agent closed the connection, and it was not back "
                      "within 2 s)" % proxy.address, text)
        self.assertIn("trial 1.1 lost its machine", text)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)
        self.assertEqual(trial["placement"][0]["machine"], b.address)
        # The agent kept the lost session's rank no longer than its window (reattach_window
        # 0: the heartbeat timeout), then had it checkpoint as an orphan and exit.
        a.wait_log("no coordinator resumed it within its reattach window")
        wait_until(lambda: not alive(pid), timeout=30, what="the kept rank gone")

    def killed_coordinator(self, window, env=None):
        """Runs a trial on an agent with `reattach_window: window`, then kills `cairn run`
        with SIGKILL once a checkpoint is registered; returns the agent and the rank's pid."""
        a = Agent(self, "agent-a", 1)
        run = self.start_run(a.address, env=env, length=40, window=window)
        self.wait_output(r"\[1\.1\] step 5\n")

        def checkpointed():
            shown = self.cairn("show", "1.1", "--json")
            if shown.returncode != 0:
                return None
            return json.loads(shown.stdout)["checkpoints"]

        wait_until(checkpointed, timeout=60, what="a registered checkpoint")
        pid = self.rank_pids(self.output())[0]
        self.kill_later(pid)
        run.kill()
        run.wait(timeout=30)
        a.wait_log("kept 1 ranks of")
        return a, pid

    def test_a_killed_coordinators_ranks_run_for_the_window_then_leave_as_orphans(self):
        a, pid = self.killed_coordinator(2, env={"CAIRN_HEARTBEAT_TIMEOUT": "1"})
        line = a.wait_log("no coordinator resumed it within its reattach window")
        self.assertIn("of 2 s", line)
        self.assertIn("to checkpoint as orphans and exit", line)  # asked, not killed
        wait_until(lambda: not alive(pid), timeout=30, what="the kept rank gone")
        a.wait_log("its orphaned ranks exited")

    def test_resume_after_a_kill_adopts_the_kept_rank(self):
        # test_peers_adopt.py has the details (steps once, checkpoints, gangs, what cannot
        # be adopted): here, that the same process goes on.
        a, pid = self.killed_coordinator(600)
        # Kept, not killed, while no coordinator is there.
        self.assertTrue(alive(pid))
        proc = self.cairn("resume", "1", env=self.env({"CAIRN_KEY_FILE": self.key}),
                          timeout=240)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        a.wait_log("adopted rank")
        self.assertIn("adopted its rank on %s (pid %d)" % (a.address, pid),
                      proc.stdout + proc.stderr)
        self.assertEqual(self.rank_pids(proc.stdout + proc.stderr), [], proc.stdout)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["restarts"], 0, trial)

if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
