"""Discovery (issue 17 item 3, docs/peers.md "Discovery"): agents with a cluster key announce
themselves with HMAC-sealed UDP beacons, and `cairn peers` (no --peers, or "auto") proposes
what it hears, then asks each proposed peer for its status over TLS with the key.

On loopback everywhere: agents listening on 127.0.0.1 announce only to the addresses named
with --announce-to, and `cairn peers --beacon-port` listens on a port of the test's own, so
nothing leaks onto the machine's LAN. Where network namespaces can be made (`ip netns add`):
"machines" joined by a bridge, found by multicast (and by broadcast where multicast is off),
forged and replayed beacons from another machine, and a partition (`ip link set … down`).
Beacons are forged with tests/e2e/beacon_forge.py, written from the documented format."""
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import beacon_forge  # noqa: E402
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, CairnTestCase, needs, wait_until  # noqa: E402
from peer_testlib import Agent, Network, agent_env  # noqa: E402


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def udp_listener(port, host="127.0.0.1"):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    return s


def receive(sock, timeout):
    """One datagram, or None after `timeout` seconds."""
    sock.settimeout(timeout)
    try:
        return sock.recv(4096)
    except socket.timeout:
        return None


NETNS, NETNS_WHY = cairn_testlib.netns_available()


class DiscoveryCase(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.agents = []
        self.home = os.path.join(self.dir, "home")
        os.makedirs(self.home)

    def env(self):
        return agent_env(self)

    def new_key(self, name):
        path = os.path.join(self.dir, name)
        proc = self.cairn("agent", "--new-key", path, check=0, env={"HOME": self.home})
        with open(path, "rb") as f:
            return path, re.search(r"key id ([0-9a-f]{16})", proc.stdout).group(1), f.read()

    def peers(self, *args, ns=None, check=None):
        argv = [CAIRN, "peers"] + list(args)
        if ns:
            argv = ["ip", "netns", "exec", ns] + argv
        proc = subprocess.run(argv, cwd=self.dir, env=self.env(), capture_output=True,
                              text=True, timeout=120)
        if check is not None and proc.returncode != check:
            self.fail("%s exited %d (expected %d)\nstdout:\n%s\nstderr:\n%s"
                      % (" ".join(argv), proc.returncode, check, proc.stdout, proc.stderr))
        return proc


class LoopbackDiscoveryTest(DiscoveryCase):
    def announcing_agent(self, key, port, *extra):
        return Agent(self, "--listen", "127.0.0.1:0", "--announce-to", "127.0.0.1:%d" % port,
                     "--beacon-port", str(port), "--announce-interval", "0.3", *extra, key=key)

    def test_a_keyed_agent_is_discovered_and_its_status_asked_with_the_key(self):
        key, key_id, _ = self.new_key("cluster.key")
        port = free_udp_port()
        agent = self.announcing_agent(key, port, "--slots", "3")
        line = agent.line(lambda l: "announcing" in l, "the announcing line")
        self.assertIn("announcing every 0.3 s to 127.0.0.1:%d (as 127.0.0.1)" % port, line)
        self.assertIn("key id " + key_id, line)
        proc = self.peers("--key-file", key, "--beacon-port", str(port), "--discover", "2",
                          "--json", check=0)
        doc = json.loads(proc.stdout)
        self.assertEqual(len(doc), 1, proc.stderr)
        self.assertEqual(doc[0]["address"], "127.0.0.1:%d" % agent.port)
        # Sent to this host's own address (--announce-to), not to the group.
        self.assertEqual(doc[0]["found_by"], "broadcast")
        self.assertEqual(doc[0]["status"], "ok")
        self.assertEqual(doc[0]["slots"], {"free": 3, "total": 3})
        # The status was asked over TLS with the key: the agent logged the connection.
        agent.line(lambda l: "connected 127.0.0.1:" in l and "key id " + key_id in l,
                   "the status connection")
        # Text, and a peer both listed and discovered shown once, as listed ("list").
        proc = self.peers("--key-file", key, "--beacon-port", str(port), "--discover", "2",
                          "--peers", "auto,localhost:%d" % agent.port, check=0)
        rows = proc.stdout.splitlines()
        self.assertEqual(len(rows), 2, proc.stdout)
        self.assertRegex(rows[1], r"^localhost:%d +list +3/3 +cpu +\S+ +ok$" % agent.port)
        # One line when it starts announcing, none per beacon; a clean stop on SIGTERM.
        code, rest = agent.stop()
        self.assertEqual(code, 0)
        self.assertNotIn("announcing", rest)
        self.assertIn("stopped (SIGTERM)", rest)

    def test_another_key_a_keyless_agent_and_no_announce_propose_nothing(self):
        key, key_id, _ = self.new_key("cluster.key")
        other, other_id, _ = self.new_key("other.key")
        port = free_udp_port()
        self.announcing_agent(other, port)
        quiet_port = free_udp_port()
        watch = udp_listener(quiet_port)
        self.addCleanup(watch.close)
        # No key: it never announces, whatever it is told (its beacons would prove nothing).
        keyless = Agent(self, "--listen", "127.0.0.1:0", "--announce-to",
                        "127.0.0.1:%d" % quiet_port, "--announce-interval", "0.1")
        muted = Agent(self, "--listen", "127.0.0.1:0", "--announce-to",
                      "127.0.0.1:%d" % quiet_port, "--announce-interval", "0.1",
                      "--no-announce", key=key)
        self.assertIsNone(receive(watch, 1.0))
        proc = self.peers("--key-file", key, "--beacon-port", str(port), "--discover", "1.5",
                          "--json", check=0)
        # Another key's agent is dropped at its beacon (not listed at all), with one line
        # naming both key ids however many of its beacons came.
        self.assertEqual(json.loads(proc.stdout), [])
        dropped = [l for l in proc.stderr.splitlines()
                   if l.startswith("cairn: dropped a beacon") and "(other key)" in l]
        self.assertEqual(len(dropped), 1, proc.stderr)
        self.assertIn("key id %s, ours is %s" % (other_id, key_id), dropped[0])
        self.assertIn("no agent with this cluster key announced itself", proc.stderr)
        for agent in (keyless, muted):
            code, rest = agent.stop()
            self.assertEqual(code, 0)
            self.assertNotIn("announcing", rest)

    def test_forged_replayed_stale_and_malformed_beacons_are_dropped(self):
        key, key_id, key_bytes = self.new_key("cluster.key")
        port, capture_port = free_udp_port(), free_udp_port()
        capture = udp_listener(capture_port)
        self.addCleanup(capture.close)
        agent = Agent(self, "--listen", "127.0.0.1:0", "--announce-to",
                      "127.0.0.1:%d,127.0.0.1:%d" % (port, capture_port), "--beacon-port",
                      str(port), "--announce-interval", "0.3", key=key)
        genuine = receive(capture, 10)
        self.assertIsNotNone(genuine)
        self.assertEqual(beacon_forge.fields(genuine)[1:4], ("127.0.0.1", agent.port, key_id))
        now = int(time.time() * 1000)
        forged = bytearray(beacon_forge.seal(key_bytes, "127.0.0.1", 9, now))
        forged[-1] ^= 1  # an attacker without the key pointing discovery at port 9
        hostile = {
            "forged": bytes(forged),
            "stale": beacon_forge.seal(key_bytes, "127.0.0.1", 9, now - 120000),
            "malformed": b"\x00" * 5000,
            "replayed": genuine,
        }
        stop = threading.Event()

        def send_hostile():
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                while not stop.is_set():
                    for datagram in hostile.values():
                        s.sendto(datagram, ("127.0.0.1", port))
                    stop.wait(0.05)

        sender = threading.Thread(target=send_hostile)
        sender.start()
        try:
            proc = self.peers("--key-file", key, "--beacon-port", str(port), "--discover", "2",
                              "--json", check=0)
        finally:
            stop.set()
            sender.join(timeout=30)
        doc = json.loads(proc.stdout)
        # Only the genuine agent is proposed, and it is usable.
        self.assertEqual([(p["address"], p["status"]) for p in doc],
                         [("127.0.0.1:%d" % agent.port, "ok")], proc.stderr)
        lines = proc.stderr.splitlines()
        for cause in hostile:
            first = [l for l in lines if l.startswith("cairn: dropped a beacon") and
                     "(%s)" % cause in l]
            # Dozens of each came: one line each, the rest counted at the end.
            self.assertEqual(len(first), 1, (cause, proc.stderr))
            self.assertTrue(any(re.match(r"cairn: \d+ more beacons dropped \(%s\)" % cause, l)
                                for l in lines), (cause, proc.stderr))
        self.assertIn("datagram of 5000 bytes", proc.stderr)
        # The agent keeps serving.
        again = self.peers("--key-file", key, "--peers", "127.0.0.1:%d" % agent.port, "--json",
                           check=0)
        self.assertEqual(json.loads(again.stdout)[0]["status"], "ok")

    def test_bad_options_are_refused(self):
        key, _, _ = self.new_key("cluster.key")
        proc = self.cairn("agent", "--key-file", key, "--listen", "127.0.0.1:0", "--dir",
                          os.path.join(self.dir, "a"), "--announce-to", "no.such.host.invalid",
                          env={"HOME": self.home})
        self.assertEqual(proc.returncode, 2)
        self.assertIn("no.such.host.invalid", proc.stderr)
        # Refused before it serves: one line, no listening line.
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        proc = self.peers("--discover", "0")
        self.assertEqual(proc.returncode, 2)

    def test_run_slots_0_with_auto_that_finds_no_agent_says_so(self):
        # The discovery window passes, then one line that names what was asked for (it used
        # to say "name the agents … with --peers" to a user who had given --peers auto).
        key, _, _ = self.new_key("cluster.key")
        self.write("exp.yaml", "entrypoint: builtin:mlp\n"
                   "searcher: {name: single, metric: val_loss, max_length: 1}\n")
        env = dict(self.env(), CAIRN_BEACON_PORT=str(free_udp_port()))
        proc = subprocess.run([CAIRN, "run", "exp.yaml", "--slots", "0", "--peers", "auto",
                               "--key-file", key], cwd=self.dir, env=env, capture_output=True,
                              text=True, timeout=60)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("peers auto: 0 agents found", proc.stderr)
        last = proc.stderr.strip().splitlines()[-1]
        self.assertIn("--slots 0 runs nothing on this machine, and auto found no agent", last)
        self.assertFalse(os.path.exists(os.path.join(self.dir, ".cairn", "experiments", "1")))


@needs("netns", NETNS, NETNS_WHY)
class NamespaceDiscoveryTest(DiscoveryCase):
    """Three "machines" (network namespaces) on one bridge in a fourth: a 10.77.0.1,
    b 10.77.0.2, c 10.77.0.3."""

    def setUp(self):
        super().setUp()
        # No multicast snooping: the bridge floods group traffic as a plain switch does.
        self.net = Network(self, "cairn")
        self.net.bridge("sw", "10.77.0", ["a", "b", "c"], addresses=False, snooping=False)
        self.ns = self.net.ns
        self.ip = self.net.ip

    def address(self, n, broadcast=True):
        self.net.address(n, broadcast=broadcast)

    def in_ns(self, n, code, *args):
        """Runs Python `code` in namespace n; returns the process."""
        return subprocess.Popen(["ip", "netns", "exec", self.ns[n], sys.executable, "-c", code]
                                + [str(a) for a in args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)

    def discover(self, n, key, *args):
        proc = self.peers("--key-file", key, "--discover", "2", "--timeout", "3", "--json",
                          *args, ns=self.ns[n])
        return json.loads(proc.stdout), proc.stderr

    def test_multicast_across_the_bridge_another_key_and_a_partition(self):
        key, key_id, _ = self.new_key("cluster.key")
        other, other_id, _ = self.new_key("other.key")
        # No broadcast address on a: its beacons can only travel by multicast.
        self.address("a", broadcast=False)
        self.address("b")
        self.address("c")
        a = Agent(self, "--slots", "2", "--announce-interval", "0.3", ns=self.ns["a"], key=key,
                  listen=None)
        line = a.line(lambda l: "announcing" in l, "the announcing line")
        self.assertIn("multicast 239.255.70.70:7070 on eth0 (10.77.0.1)", line)
        self.assertNotIn("broadcast", line)
        c = Agent(self, "--announce-interval", "0.3", ns=self.ns["c"], key=other,
                  listen=None)
        c.line(lambda l: "announcing" in l, "c's announcing line")
        # What reaches b at the group address is a's multicast beacon.
        probe = self.in_ns("b", MULTICAST_PROBE, beacon_forge.GROUP, 7070, "10.77.0.2")
        out, err = probe.communicate(timeout=30)
        self.assertEqual(probe.returncode, 0, err)
        self.assertIn("10.77.0.1 %d %s" % (a.port, key_id), out.decode())
        doc, err = self.discover("b", key)
        self.assertEqual(len(doc), 1, err)
        self.assertEqual(doc[0]["address"], "10.77.0.1:7070")
        self.assertEqual(doc[0]["found_by"], "multicast")
        self.assertEqual(doc[0]["status"], "ok")
        self.assertEqual(doc[0]["slots"], {"free": 2, "total": 2})
        # c holds another key: its beacons are dropped, so it is not listed at all.
        self.assertIn("key id %s, ours is %s" % (other_id, key_id), err)
        a.line(lambda l: "connected 10.77.0.2:" in l, "b's status connection")
        # A partition: a's link down. Discovery finds nothing; listed, a is unreachable.
        self.ip("-n", self.ns["a"], "link", "set", "eth0", "down")
        a.line(lambda l: "not announcing" in l, "the agent noticing its link is down")
        doc, err = self.discover("b", key)
        self.assertEqual(doc, [], err)
        doc, err = self.discover("b", key, "--peers", "auto,10.77.0.1:7070")
        self.assertEqual([(p["address"], p["found_by"], p["status"]) for p in doc],
                         [("10.77.0.1:7070", "list", "unreachable")], err)
        # Healed: found again.
        self.ip("-n", self.ns["a"], "link", "set", "eth0", "up")
        wait_until(lambda: [p["status"] for p in self.discover("b", key)[0]] == ["ok"],
                   timeout=60, interval=0.5, what="a discovered again after the partition")
        code, _ = a.stop()
        self.assertEqual(code, 0)

    def test_broadcast_where_multicast_is_off(self):
        key, _, _ = self.new_key("cluster.key")
        self.address("a")
        self.address("b")
        self.ip("-n", self.ns["a"], "link", "set", "eth0", "multicast", "off")
        a = Agent(self, "--announce-interval", "0.3", ns=self.ns["a"], key=key,
                  listen=None)
        line = a.line(lambda l: "announcing" in l, "the announcing line")
        self.assertIn("broadcast 10.77.0.255:7070 on eth0 (10.77.0.1)", line)
        self.assertNotIn("multicast", line)
        doc, err = self.discover("b", key)
        self.assertEqual([(p["address"], p["found_by"], p["status"]) for p in doc],
                         [("10.77.0.1:7070", "broadcast", "ok")], err)

    def test_forged_and_replayed_beacons_from_another_machine(self):
        key, key_id, key_bytes = self.new_key("cluster.key")
        for n in ("a", "b", "c"):
            self.address(n)
        a = Agent(self, "--announce-interval", "0.3", ns=self.ns["a"], key=key,
                  listen=None)
        # c captures one of a's beacons off the LAN, then sends it again to b, with
        # forgeries (no key) naming c itself, for longer than b's window.
        attacker = self.in_ns("c", ATTACKER, os.path.dirname(os.path.abspath(__file__)),
                              "10.77.0.2", 7070, 6)
        self.addCleanup(attacker.kill)
        doc, err = self.discover("b", key)
        out, aerr = attacker.communicate(timeout=60)
        self.assertEqual(attacker.returncode, 0, aerr)
        self.assertIn("captured 10.77.0.1 %d %s" % (a.port, key_id), out.decode())
        # Only the genuine agent, usable; the forgeries (naming c) proposed nothing.
        self.assertEqual([(p["address"], p["status"]) for p in doc],
                         [("10.77.0.1:7070", "ok")], err)
        self.assertRegex(err, r"dropped a beacon from 10\.77\.0\.3:\d+ \(forged\)")
        self.assertRegex(err, r"dropped a beacon from 10\.77\.0\.\d:\d+ \(replayed\)")
        self.assertEqual(len(re.findall(r"\(forged\): ", err)), 1, err)
        # The agent keeps serving.
        doc, err = self.discover("b", key, "--peers", "10.77.0.1")
        self.assertEqual(doc[0]["status"], "ok", err)


# Joins the group on the namespace's eth0 and prints the first beacon sent to the group
# address: "ADDRESS PORT KEYID" (the socket is bound to the group, so unicast and broadcast
# datagrams never reach it).
MULTICAST_PROBE = r"""
import socket, struct, sys
group, port, local = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((group, port))
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
             socket.inet_aton(group) + socket.inet_aton(local))
s.settimeout(20)
d = s.recv(4096)
print(socket.inet_ntoa(d[7:11]), struct.unpack(">H", d[11:13])[0], d[13:21].hex())
"""

# Captures one genuine beacon from the group, then for `seconds` sends it again (a replay)
# and a forgery (a made-up key, a's key id, pointing at this machine) to the target.
ATTACKER = r"""
import os, socket, sys, time
sys.path.insert(0, sys.argv[1])
import beacon_forge
target, port, seconds = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((beacon_forge.GROUP, port))
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
             socket.inet_aton(beacon_forge.GROUP) + socket.inet_aton("10.77.0.3"))
s.settimeout(20)
genuine = s.recv(4096)
_, address, agent_port, key_id, _ = beacon_forge.fields(genuine)
print("captured", address, agent_port, key_id, flush=True)
out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
end = time.monotonic() + seconds
while time.monotonic() < end:
    forged = beacon_forge.seal(os.urandom(32), "10.77.0.3", agent_port,
                               int(time.time() * 1000), key_id_bytes=bytes.fromhex(key_id))
    out.sendto(genuine, (target, port))
    out.sendto(forged, (target, port))
    time.sleep(0.05)
"""


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
