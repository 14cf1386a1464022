"""Shared helpers for the peer tests (tests/e2e/test_peers*.py, docs/peers.md "Tests"): a real
`cairn agent` process (on loopback, in a network namespace, or behind any wrapper), and
"machines" made of network namespaces joined by bridges."""
import os
import re
import signal
import subprocess

from cairn_testlib import CAIRN, wait_until

TEST_CLIENT = os.path.join(os.path.dirname(os.path.abspath(CAIRN)), "peer_test_client")
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ cairn agent: ")
LISTEN_LOOPBACK = "127.0.0.1:0"


def agent_env(test, extra=None):
    """The environment of a test's agents and coordinators: a home of the test's own
    (test.home), so no key is found unless the test puts one there; `extra` on top (None
    removes a variable), as in CairnTestCase.cairn_env()."""
    base = {"HOME": test.home, "XDG_CONFIG_HOME": None, "XDG_STATE_HOME": None,
            "CAIRN_KEY_FILE": None}
    base.update(extra or {})
    return test.cairn_env(base)


def peer_home(test, key=True):
    """Gives the test a home of its own (test.home: no key is found there unless the test
    puts one there) and, with `key`, a new cluster key at test.dir/cluster.key, whose path it
    returns."""
    test.home = os.path.join(test.dir, "home")
    os.makedirs(test.home, exist_ok=True)
    if not key:
        return None
    path = os.path.join(test.dir, "cluster.key")
    subprocess.run([CAIRN, "agent", "--new-key", path], env=agent_env(test), check=True,
                   capture_output=True, timeout=60)
    return path


def alive(pid):
    """Whether `pid` runs (a zombie does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"
    except OSError:
        return False


class BackgroundRun:
    """For a test case (a PlacementCase: self.key, self.env()) that acts on agents and links
    while `cairn run exp.yaml --slots 0 --peers PEERS` runs: the run in the background, its
    output in run.out, read as it grows."""

    def start_background_run(self, peers, env=None):
        self.run_out = os.path.join(self.dir, "run.out")
        out = open(self.run_out, "w")
        self.addCleanup(out.close)
        full = {"STEP_SECONDS": "0.2"}
        full.update(env or {})
        run = subprocess.Popen([CAIRN, "run", "exp.yaml", "--slots", "0", "--peers", peers,
                                "--key-file", self.key],
                               cwd=self.dir, env=self.cairn_env(self.env(full)), stdout=out,
                               stderr=subprocess.STDOUT)
        self.addCleanup(lambda: run.poll() is None and (run.kill(), run.wait()))
        return run

    def output(self):
        with open(self.run_out) as f:
            return f.read()

    def wait_output(self, pattern, timeout=60):
        return wait_until(lambda: re.search(pattern, self.output()), timeout=timeout,
                          what="%r in cairn run's output" % pattern)

    def rank_pids(self, text):
        """The pids trial 1.1's ranks printed ("pid N starts at S"), in order."""
        return [int(p) for p in re.findall(r"\[1\.1\] pid (\d+) starts at \d+", text)]


class Agent:
    """A running `cairn agent`. Its log (stderr) goes to a file, never a pipe that could
    fill: read it from the start (text(), wait_log()) or in order with a cursor (line(),
    lines_until()), each line checked against the agent's log format.

    Agent(test, *args, key=None, slots=None, name=None, dir=None, ns=None, wrap=None,
          listen="127.0.0.1:0", env=None)
    args are more options of `cairn agent`; `key` adds --key-file, `slots` --slots; `listen`
    adds --listen unless args hold one (None: no --listen, the agent's default). The agent's
    DIR is `dir`, else test.dir/`name`, else test.dir/agent-N (N counts test.agents, made
    when missing); an agent started again with the same DIR is a machine that rebooted.
    `ns` runs it in that network namespace (`ip netns exec`, which execs: the process is the
    agent), `wrap` is an argv to run it under (`unshare …`). `env` as in agent_env().
    The agent is killed when the test ends, before the test's own cleanups of setUp."""

    def __init__(self, test, *args, key=None, slots=None, name=None, dir=None, ns=None,
                 wrap=None, listen=LISTEN_LOOPBACK, env=None):
        self.test = test
        if not hasattr(test, "agents"):
            test.agents = []
        n = len(test.agents)
        self.dir = dir or os.path.join(test.dir, name or "agent-%d" % n)
        self.log = os.path.join(test.dir, "agent-%d.log" % n)
        argv = [CAIRN, "agent", "--dir", self.dir]
        if key:
            argv += ["--key-file", key]
        if slots is not None:
            argv += ["--slots", str(slots)]
        if listen and not any(a.startswith("--listen") for a in args):
            argv += ["--listen", listen]
        argv += [str(a) for a in args]
        if ns:
            argv = ["ip", "netns", "exec", ns] + argv
        if wrap:
            argv = list(wrap) + argv
        self.argv = argv
        self.cursor = 0  # lines of the log that line() and lines_until() have read
        with open(self.log, "w") as log, open(self.log[:-4] + ".out", "w") as out:
            self.process = subprocess.Popen(argv, cwd=test.dir, env=agent_env(test, env),
                                            stdin=subprocess.DEVNULL, stdout=out, stderr=log)
        test.agents.append(self)
        test.addCleanup(self.kill)
        self.listening = self.line(lambda l: "listening on" in l, "the agent's listening line")
        self.address = re.search(r"listening on (\S*:\d+) ", self.listening).group(1)
        self.port = int(self.address.rsplit(":", 1)[1])

    def text(self):
        """Everything the agent logged so far."""
        with open(self.log, errors="replace") as f:
            return f.read()

    def _lines(self):
        """The complete lines logged so far (a line still being written is left out)."""
        text = self.text()
        return text[:text.rfind("\n") + 1].splitlines(True)

    def line(self, predicate, what="a log line", timeout=30):
        """The first line after those read before that satisfies `predicate`; fails after
        `timeout` seconds, or when the agent ended without logging it."""
        return self.lines_until(predicate, timeout=timeout, what=what)[-1]

    def lines_until(self, predicate, timeout=60, what=None):
        """Every line (without its newline) after those read before, up to the first that
        satisfies `predicate` (a function of the line, or a string it holds)."""
        if isinstance(predicate, str):
            text, what = predicate, what or "%r in the agent's log" % predicate
            predicate = lambda l: text in l  # noqa: E731
        found = []

        def seen():
            lines = self._lines()
            for i in range(self.cursor, len(lines)):
                if predicate(lines[i]):
                    found[:] = [l.rstrip("\n") for l in lines[self.cursor:i + 1]]
                    self.cursor = i + 1
                    return True
            if self.process.poll() is not None and len(self._lines()) == len(lines):
                raise AssertionError("the agent ended (status %s) before %s; it logged:\n%s"
                                     % (self.process.returncode, what, "".join(lines)))
            return False

        try:
            wait_until(seen, timeout=timeout, interval=0.02, what=what or "a log line")
        except AssertionError as e:
            raise AssertionError("%s; the agent logged:\n%s" % (e, self.text())) from None
        for l in found:
            self.test.assertRegex(l, LOG_LINE)
        return found

    def wait_log(self, needle, timeout=60):
        """The first line of the whole log that holds `needle`, once there is one."""
        found = []

        def seen():
            found[:] = [l for l in self._lines() if needle in l]
            return found

        wait_until(seen, timeout=timeout, what="%r in the agent's log" % needle)
        return found[0].rstrip("\n")

    def stop(self):
        """SIGTERM; returns (exit status, what it logged after the lines read before)."""
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=30)
        return code, "".join(self._lines()[self.cursor:])

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)


class Network:
    """"Machines" made of network namespaces, joined by bridges that live in namespaces of
    their own ("switches"), so nothing touches this machine's network. Names carry this
    process's id; one left by a killed run is deleted first. Every namespace is deleted when
    the test ends (after the agents started later are killed: cleanups run last first).

        net = Network(test, "cairnp")
        net.bridge("sw", "10.78.0", ["a", "b"])      # a is 10.78.0.1, b 10.78.0.2 on eth0
        net.ns["a"]                                  # the namespace's name
        net.run_in("a")                              # argv prefix: ip netns exec …
        net.link("b", up=False)                      # a partition
    """

    def __init__(self, test, tag):
        self.test = test
        self.prefix = "%s%d" % (tag, os.getpid() % 100000)
        self.ns = {}
        self.addresses = {}  # (machine, device): its IPv4 address

    def ip(self, *args):
        proc = subprocess.run(["ip"] + list(args), capture_output=True, text=True, timeout=30)
        self.test.assertEqual(proc.returncode, 0, "ip %s: %s" % (" ".join(args), proc.stderr))

    def machine(self, name):
        """The namespace `name` (made once, with its loopback up)."""
        if name not in self.ns:
            full = "%s-%s" % (self.prefix, name)
            subprocess.run(["ip", "netns", "del", full], capture_output=True, timeout=30)
            self.ip("netns", "add", full)
            self.test.addCleanup(subprocess.run, ["ip", "netns", "del", full],
                                 capture_output=True, timeout=30)
            self.ns[name] = full
            self.ip("-n", full, "link", "set", "lo", "up")
        return self.ns[name]

    def bridge(self, switch, subnet, members, addresses=True, broadcast=True, snooping=True,
               port_prefix="v"):
        """A bridge br0 in namespace `switch` and, for each of `members` — a machine's name
        (device eth0, host number its place from 1) or (name, device, host number) — a veth
        pair: `port_prefix`+name on the bridge, the device in the machine; with `addresses`,
        address `subnet`.HOST/24 on it (the broadcast address too unless told not) and the
        link up. `snooping` False turns off the bridge's multicast snooping (so group
        traffic floods, as on a plain switch)."""
        sw = self.machine(switch)
        self.ip("-n", sw, "link", "add", "br0", "type", "bridge",
                *([] if snooping else ["mcast_snooping", "0"]))
        self.ip("-n", sw, "link", "set", "br0", "up")
        for i, member in enumerate(members, 1):
            n, dev, host = (member, "eth0", i) if isinstance(member, str) else member
            ns = self.machine(n)
            self.addresses[(n, dev)] = "%s.%d" % (subnet, host)
            self.ip("-n", sw, "link", "add", port_prefix + n, "type", "veth", "peer", "name",
                    dev, "netns", ns)
            self.ip("-n", sw, "link", "set", port_prefix + n, "master", "br0", "up")
            if addresses:
                self.address(n, dev=dev, broadcast=broadcast)

    def address(self, n, dev="eth0", broadcast=True):
        """Gives machine n its address on `dev` (from its bridge's subnet) and sets it up."""
        self.ip("-n", self.ns[n], "addr", "add", self.addresses[(n, dev)] + "/24",
                *(["brd", "+"] if broadcast else []), "dev", dev)
        self.ip("-n", self.ns[n], "link", "set", dev, "up")
        return self.addresses[(n, dev)]

    def link(self, n, up, dev="eth0"):
        """Sets machine n's link up or down (down: a partition, nothing in or out)."""
        self.ip("-n", self.ns[n], "link", "set", dev, "up" if up else "down")

    def run_in(self, n):
        """The argv prefix that runs a command in machine n."""
        return ["ip", "netns", "exec", self.ns[n]]
