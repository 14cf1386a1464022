"""IPv6 discovery (docs/peers.md "Discovery"): agents announce format 2 beacons (naming an
IPv6 address) to the link-local group ff12::7070 on each IPv6 interface, `cairn peers` and
`cairn run --peers auto` listen for them too and propose `[addr%scope]:port`, and the
authenticated connection to that address works.

On IPv6 loopback ("ipv6": a machine may have IPv6 disabled): an agent on [::1] announcing
to [::1] (--announce-to), found and asked over TLS. In network namespaces ("netns"): two
"machines" on a bridge with no IPv4 address at all, so only IPv6 multicast can find the
agent, and a trial runs there through `--peers auto`."""
import json
import os
import re
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import beacon_forge  # noqa: E402
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, CairnTestCase, needs, wait_until  # noqa: E402
from peer_testlib import Agent, Network, agent_env, peer_home  # noqa: E402


def ipv6_loopback():
    """(True, "") where this process can bind [::1], else (False, why)."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.bind(("::1", 0))
    except OSError as e:
        return False, "cannot bind [::1]: %s" % e
    return True, ""


IPV6, IPV6_WHY = ipv6_loopback()
NETNS, NETNS_WHY = cairn_testlib.netns_available()
if NETNS and not IPV6:
    NETNS, NETNS_WHY = False, "IPv6 is disabled here (%s)" % IPV6_WHY


def free_udp6_port():
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
        s.bind(("::1", 0))
        return s.getsockname()[1]


# A trial that reports one validation and the address of the machine it ran on.
TRAIN = r"""
import cairn
ctx = cairn.init()
for op in ctx.operations():
    ctx.report_validation(op.length, {"val_loss": 0.5})
"""


class Discovery6Case(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.agents = []
        self.key = peer_home(self)

    def peers(self, *args, ns=None):
        argv = [CAIRN, "peers", "--key-file", self.key] + list(args)
        if ns:
            argv = ["ip", "netns", "exec", ns] + argv
        return subprocess.run(argv, cwd=self.dir, env=agent_env(self), capture_output=True,
                              text=True, timeout=120)


class Ipv6OptionsTest(Discovery6Case):
    def test_ipv6_addresses_need_brackets_and_a_bad_one_is_refused_before_serving(self):
        for args, said in ((["--listen", "[::1"], "no closing ']'"),
                           (["--listen", "::1:7070"], "an IPv6 address needs brackets"),
                           (["--announce-to", "fe80::1"], "an IPv6 address needs brackets"),
                           (["--announce-to", "[fe80::1%no-such-nic9]"], "no-such-nic9")):
            proc = subprocess.run([CAIRN, "agent", "--key-file", self.key, "--dir",
                                   os.path.join(self.dir, "a")] + args, cwd=self.dir,
                                  env=agent_env(self), capture_output=True, text=True,
                                  timeout=60)
            self.assertEqual(proc.returncode, 2, (args, proc.stderr))
            # One line, before any "listening on".
            self.assertEqual(len(proc.stderr.strip().splitlines()), 1, (args, proc.stderr))
            self.assertIn(said, proc.stderr)


@needs("ipv6", IPV6, IPV6_WHY)
class LoopbackDiscovery6Test(Discovery6Case):
    def test_an_agent_on_ipv6_loopback_is_discovered_and_asked_with_the_key(self):
        port = free_udp6_port()
        agent = Agent(self, "--listen", "[::1]:0", "--announce-to", "[::1]",
                      "--beacon-port", str(port), "--announce-interval", "0.3", "--slots", "2",
                      key=self.key)
        # Listening and announcing lines name IPv6 addresses in brackets.
        self.assertRegex(agent.listening, r"listening on \[::1\]:\d+ ")
        line = agent.line(lambda l: "announcing" in l, "the announcing line")
        self.assertIn("to [::1]:%d (as ::1)" % port, line)
        proc = self.peers("--beacon-port", str(port), "--discover", "2", "--json")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        doc = json.loads(proc.stdout)
        self.assertEqual([(p["address"], p["found_by"], p["status"], p["slots"]) for p in doc],
                         [("[::1]:%d" % agent.port, "broadcast", "ok",
                           {"free": 2, "total": 2})], proc.stderr)
        # Asked over TLS with the key, from an IPv6 address.
        agent.line(lambda l: "connected [::1]:" in l, "the status connection from [::1]")
        # Listed by hand, and in the table: brackets.
        proc = self.peers("--peers", "[::1]:%d" % agent.port)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertRegex(proc.stdout.splitlines()[1],
                         r"^\[::1\]:%d +list +2/2 +cpu +\S+ +ok$" % agent.port)
        # A forged IPv6 beacon (no key) pointing elsewhere proposes nothing.
        forged = bytearray(beacon_forge.seal(os.urandom(32), "::1", 9, 0,
                                             key_id_bytes=bytes.fromhex(
                                                 re.search(r"key id ([0-9a-f]{16})",
                                                           line).group(1))))
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            listener = subprocess.Popen(
                [CAIRN, "peers", "--key-file", self.key, "--beacon-port", str(port),
                 "--discover", "1.5", "--json"], cwd=self.dir, env=agent_env(self),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.addCleanup(lambda: listener.poll() is None and listener.kill())
            # Sent until the listener is done: some reach its window.
            while listener.poll() is None:
                s.sendto(bytes(forged), ("::1", port))
                try:
                    listener.wait(timeout=0.1)
                except subprocess.TimeoutExpired:
                    pass
            out, err = listener.communicate(timeout=30)
        self.assertEqual([p["address"] for p in json.loads(out)], ["[::1]:%d" % agent.port], err)
        self.assertRegex(err, r"dropped a beacon from \[::1\]:\d+ \(forged\)")
        code, _ = agent.stop()
        self.assertEqual(code, 0)

    def test_listening_on_every_address_with_brackets_serves_ipv4_and_ipv6(self):
        agent = Agent(self, "--listen", "[::]:0", "--no-announce", key=self.key)
        self.assertRegex(agent.listening, r"listening on \[::\]:\d+ ")
        for address in ("127.0.0.1:%d" % agent.port, "[::1]:%d" % agent.port):
            proc = self.peers("--peers", address, "--json")
            self.assertEqual([(p["address"], p["status"]) for p in json.loads(proc.stdout)],
                             [(address, "ok")], proc.stderr)
        agent.line(lambda l: "connected 127.0.0.1:" in l, "the IPv4 connection")
        agent.line(lambda l: "connected [::1]:" in l, "the IPv6 connection")

    def test_a_keyless_agent_may_listen_on_ipv6_loopback_only(self):
        agent = Agent(self, "--listen", "[::1]:0")
        self.assertRegex(agent.listening, r"listening on \[::1\]:\d+ \(key id none")
        proc = subprocess.run([CAIRN, "agent", "--listen", "[::]:0", "--dir",
                               os.path.join(self.dir, "any")], cwd=self.dir,
                              env=agent_env(self), capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("loopback only, not [::]:0", proc.stderr)


@needs("netns", NETNS, NETNS_WHY)
class Namespace6DiscoveryTest(Discovery6Case):
    """Machines a and b on a bridge, with IPv6 link-local addresses only: no IPv4 address
    but loopback's, so neither IPv4 multicast nor broadcast can carry a beacon."""

    def setUp(self):
        super().setUp()
        self.net = Network(self, "cairn6")
        self.net.bridge("sw", "10.79.0", ["a", "b"], addresses=False, snooping=False)
        for n in ("a", "b"):
            self.net.link(n, up=True)
        self.ns = self.net.ns

    def link_local(self, n):
        def found():
            out = subprocess.run(["ip", "-n", self.ns[n], "-6", "-o", "addr", "show", "dev",
                                  "eth0", "scope", "link"], capture_output=True, text=True,
                                 timeout=30).stdout
            # Usable once duplicate address detection is done (no longer "tentative").
            m = re.search(r"inet6 (fe80::[0-9a-f:]+)/64 scope link (?!.*tentative)", out)
            return m and m.group(1)
        return wait_until(found, timeout=30, what="machine %s's link-local address" % n)

    def test_only_ipv6_multicast_finds_the_agent_and_a_trial_runs_there(self):
        # The agent starts while a's link-local address may still be tentative: it names it
        # only once it is usable (before, it says it is not announcing).
        agent = Agent(self, "--slots", "1", "--announce-interval", "0.3", ns=self.ns["a"],
                      key=self.key, listen=None)
        line = agent.lines_until(lambda l: "announcing every" in l, what="the announcing line")
        a_address = self.link_local("a")
        self.link_local("b")
        # No IPv4 on the link: only loopback's.
        for n in ("a", "b"):
            v4 = subprocess.run(["ip", "-n", self.ns[n], "-4", "-o", "addr"],
                                capture_output=True, text=True, timeout=30).stdout
            self.assertEqual(re.findall(r"inet (\S+)", v4), ["127.0.0.1/8"], v4)
        self.assertTrue(all(l.endswith("is up") for l in line[:-1] if "not announcing" in l),
                        line)
        line = line[-1]
        self.assertIn("multicast [ff12::7070]:7070 on eth0 (%s)" % a_address, line)
        self.assertNotIn("239.255.70.70", line)
        self.assertNotIn("broadcast", line)
        expected = "[%s%%eth0]:%d" % (a_address, agent.port)

        def discovered():
            proc = self.peers("--discover", "2", "--timeout", "5", "--json", ns=self.ns["b"])
            doc = json.loads(proc.stdout or "[]")
            return doc if [p["status"] for p in doc] == ["ok"] else None

        doc = wait_until(discovered, timeout=60, interval=0.2,
                         what="a discovered from b over IPv6")
        self.assertEqual((doc[0]["address"], doc[0]["found_by"], doc[0]["slots"]),
                         (expected, "multicast", {"free": 1, "total": 1}), doc)
        # The agent saw b's connection from b's link-local address, scope included.
        agent.line(lambda l: re.search(r"connected \[fe80::[0-9a-f:]+%eth0\]:\d+ ", l),
                   "b's status connection over IPv6")
        # A run on b with `--peers auto` finds a the same way and runs its trial there.
        self.write("train.py", TRAIN)
        self.write("exp.yaml", "name: v6\nentrypoint: /usr/bin/python3 %s\n"
                   "searcher: {name: single, metric: val_loss, max_length: 2}\n"
                   "max_restarts: 0\n" % os.path.join(self.dir, "train.py"))
        run = subprocess.run(["ip", "netns", "exec", self.ns["b"], CAIRN, "run", "exp.yaml",
                              "--slots", "0", "--peers", "auto", "--key-file", self.key],
                             cwd=self.dir, env=agent_env(self), capture_output=True, text=True,
                             timeout=240)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr + agent.text())
        self.assertIn("peers auto: 1 agent found", run.stderr)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertEqual(trial["placement"][0]["machine"], expected, trial)
        self.assertRegex(agent.text(), r"started rank \d+ of \[fe80::[0-9a-f:]+%eth0\]:\d+: ")
        code, _ = agent.stop()
        self.assertEqual(code, 0)

    def test_a_dual_stack_agent_is_one_peer_under_its_ipv4_address(self):
        a_address = self.link_local("a")
        self.link_local("b")
        self.net.address("a")
        self.net.address("b")
        agent = Agent(self, "--slots", "1", "--announce-interval", "0.3", ns=self.ns["a"],
                      key=self.key, listen=None)
        line = agent.line(lambda l: "announcing" in l, "the announcing line")
        self.assertIn("multicast 239.255.70.70:7070 on eth0 (10.79.0.1)", line)
        self.assertIn("multicast [ff12::7070]:7070 on eth0 (%s)" % a_address, line)

        def both_heard():
            # Heard both ways: its IPv4 and its IPv6 beacons (what `peers` then merges).
            proc = self.peers("--discover", "2", "--timeout", "5", "--json", ns=self.ns["b"])
            return proc if json.loads(proc.stdout or "[]") and \
                agent.text().count("connected [fe80::") >= 1 else None

        proc = wait_until(both_heard, timeout=60, interval=0.2,
                          what="a heard over IPv4 and IPv6 from b")
        doc = json.loads(proc.stdout)
        # One row, under its IPv4 address; no line about it (both addresses were discovered).
        self.assertEqual([(p["address"], p["found_by"], p["status"]) for p in doc],
                         [("10.79.0.1:%d" % agent.port, "multicast", "ok")], proc.stderr)
        self.assertNotIn("shown once", proc.stderr)
        # A run that lists it and discovers it at its IPv6 address too uses it once.
        self.write("train.py", TRAIN)
        self.write("exp.yaml", "name: v6\nentrypoint: /usr/bin/python3 %s\n"
                   "searcher: {name: single, metric: val_loss, max_length: 2}\n"
                   "max_restarts: 0\n" % os.path.join(self.dir, "train.py"))
        listed = "10.79.0.1:%d" % agent.port
        run = subprocess.run(["ip", "netns", "exec", self.ns["b"], CAIRN, "run", "exp.yaml",
                              "--slots", "0", "--peers", "auto," + listed, "--key-file",
                              self.key], cwd=self.dir, env=agent_env(self),
                             capture_output=True, text=True, timeout=240)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr + agent.text())
        self.assertRegex(run.stderr, r"peer \[fe80::[0-9a-f:]+%%eth0\]:%d is the agent at %s "
                                     r"\(agent id \w+\): using it once"
                         % (agent.port, re.escape(listed)))
        self.assertEqual(self.cairn_json("show", "1", "--json")["peers"], [listed])


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
