"""Shared helpers for the end-to-end tests: run the real cairn binary in a scratch directory."""
import json
import os
import re
import shutil
import ctypes
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

CAIRN = os.environ.get("CAIRN_BIN", "cairn")
SOURCE = os.environ.get("CAIRN_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PYTHON = "/usr/bin/python3"


def wait_until(predicate, timeout=60.0, interval=0.05, what="condition"):
    """Polls `predicate` until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))


def userns_mounts():
    """(usable, why): whether this process can make a user and mount namespace and mount a
    tmpfs in it (unshare -rm), which tests use for a small or read-only file system that
    root obeys too."""
    try:
        probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    return probe.returncode == 0, "cannot mount a tmpfs in a user namespace here: " + probe.stderr.strip()


# No test may wait for ever: past this many seconds (CAIRN_TEST_DEADLINE) a test's processes
# are killed, which ends any wait on them, and the test fails. Well under ctest's 900 s per
# file, so the file's other tests still run.
TEST_DEADLINE = float(os.environ.get("CAIRN_TEST_DEADLINE", "400"))


def become_subreaper():
    """Makes this process adopt its orphaned descendants (a trial whose cairn was killed),
    so a test can find and end every process it started. Linux only."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def descendants(pid=None):
    """The process ids below `pid` (this process by default), from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        parents.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(entry))
    found, todo = [], [pid or os.getpid()]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_descendants():
    """SIGKILLs every process this one started, directly or not, and reaps the orphans it
    adopted. Returns the ids killed."""
    killed = []
    for pid in descendants():
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except ProcessLookupError:
            pass
    return killed


def read_line_until(stream, predicate, timeout=60.0, what="a line"):
    """Reads lines of `stream` (a pipe not read from before) until one satisfies
    `predicate`, which it returns; fails after `timeout` seconds, or when the stream ends
    first. Reads byte by byte from the descriptor, so what follows that line stays in the
    pipe for whoever reads it next."""
    fd = stream.fileno()
    deadline = time.monotonic() + timeout
    seen, line = [], b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise AssertionError("timed out after %.0f s waiting for %s; read:\n%s"
                                 % (timeout, what, "".join(seen) + line.decode(errors="replace")))
        byte = os.read(fd, 1)
        if not byte:
            raise AssertionError("output ended before %s; read:\n%s"
                                 % (what, "".join(seen) + line.decode(errors="replace")))
        line += byte
        if byte == b"\n":
            text = line.decode(errors="replace")
            seen.append(text)
            line = b""
            if predicate(text):
                return text


class CairnTestCase(unittest.TestCase):
    """Each test gets its own directory with its own store. Whatever the test started is
    killed when it ends, passed or failed, and a test that outlives TEST_DEADLINE has its
    processes killed (so no wait on them can hang) and fails."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cairn-e2e-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        become_subreaper()
        self.addCleanup(self.end_processes)
        self.deadline_passed = False
        watchdog = threading.Timer(TEST_DEADLINE, self.past_deadline)
        watchdog.daemon = True
        watchdog.start()
        self.addCleanup(watchdog.cancel)

    def past_deadline(self):
        self.deadline_passed = True
        print("\n%s: past its %.0f s deadline: killing its processes %s" %
              (self.id(), TEST_DEADLINE, kill_descendants()), file=sys.stderr, flush=True)

    def end_processes(self):
        left = kill_descendants()
        # Reap the orphans this process adopted (Popen objects reap their own).
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and descendants():
            try:
                os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            time.sleep(0.01)
        if self.deadline_passed:
            self.fail("the test ran past its %.0f s deadline (CAIRN_TEST_DEADLINE)" % TEST_DEADLINE)
        return left

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    def cairn_env(self, env=None):
        """The environment cairn runs in: this one without CAIRN_DIR, with NO_COLOR=1 (so
        output compares as plain text), then `env` on top, where None removes a variable
        (env={"NO_COLOR": None} lets a test see cairn's colour)."""
        full_env = dict(os.environ)
        full_env.pop("CAIRN_DIR", None)
        full_env["NO_COLOR"] = "1"
        for key, value in (env or {}).items():
            if value is None:
                full_env.pop(key, None)
            else:
                full_env[key] = value
        return full_env

    def cairn(self, *args, check=None, timeout=300, env=None):
        """Runs cairn in the test directory; returns the CompletedProcess. `env` as in
        cairn_env()."""
        full_env = self.cairn_env(env)
        proc = subprocess.run([CAIRN] + [str(a) for a in args], cwd=self.dir, env=full_env,
                              capture_output=True, text=True, timeout=timeout)
        if check is not None and proc.returncode != check:
            self.fail("cairn %s exited %d (expected %d)\nstdout:\n%s\nstderr:\n%s" %
                      (" ".join(map(str, args)), proc.returncode, check, proc.stdout, proc.stderr))
        return proc

    def cairn_json(self, *args):
        return json.loads(self.cairn(*args, check=0).stdout)

    def on_pty(self, argv, env=None, cwd=None):
        """Starts `argv` with a pseudo-terminal as its stdin, stdout and stderr (what a
        user's terminal is), in its own session; ended with the test's other processes."""
        process = PtyProcess(argv, cwd=cwd or self.dir,
                             env=env if env is not None else self.cairn_env())
        self.addCleanup(process.close)
        return process


class PtyProcess:
    """A process on a pseudo-terminal, and everything it wrote there. Reads are bounded:
    read_until() fails after its timeout, read_to_end() too. The terminal translates "\n"
    to "\r\n" (onlcr), as a user's does; `text` keeps the bytes as written to it."""

    def __init__(self, argv, cwd, env):
        master, slave = os.openpty()
        try:
            self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=slave, stdout=slave,
                                         stderr=slave, start_new_session=True)
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        self.master = master
        self.data = b""
        self.ended = False

    @property
    def text(self):
        return self.data.decode(errors="replace")

    def write(self, text):
        os.write(self.master, text.encode())

    def _read_some(self, timeout):
        """Reads what is there within `timeout` seconds; False once the terminal is closed
        by every process that had it (the program and its children ended)."""
        if self.ended:
            return False
        if not select.select([self.master], [], [], max(timeout, 0))[0]:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: no process has the terminal open any more
            chunk = b""
        if not chunk:
            self.ended = True
            return False
        self.data += chunk
        return True

    def read_until(self, predicate, timeout=60.0, what="output"):
        """Reads until predicate(text so far) is truthy, and returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate(self.text)
            if value:
                return value
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("timed out after %.0f s waiting for %s; the terminal "
                                     "showed:\n%r" % (timeout, what, self.text[-4000:]))
            if not self._read_some(min(left, 0.5)):
                if predicate(self.text):
                    return predicate(self.text)
                raise AssertionError("the terminal closed before %s; it showed:\n%r"
                                     % (what, self.text[-4000:]))

    def read_to_end(self, timeout=60.0):
        """Reads until the program has ended and closed the terminal; returns its exit
        status."""
        deadline = time.monotonic() + timeout
        while self._read_some(min(deadline - time.monotonic(), 0.5)):
            if time.monotonic() > deadline:
                raise AssertionError("timed out after %.0f s waiting for the program to end; "
                                     "the terminal showed:\n%r" % (timeout, self.text[-4000:]))
        return self.proc.wait(timeout=max(deadline - time.monotonic(), 1))

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        if self.master is not None:
            os.close(self.master)
            self.master = None


# Skips (tests/README.md, "Skips"). unittest exits 0 when tests skip, so ctest would say
# "Passed" where nothing ran. A test that needs what a machine may lack says so with
# needs(); CMakeLists.txt finds needs("NAME" in each file and gives each capability a
# ctest entry of its own (CAIRN_TEST_NEEDS=NAME), so the file's plain entry never skips.
# main() then turns the run's skips into ctest's words: 77 ("Skipped") when every test of
# the entry skipped for a reason tests/skip_allowlist.txt allows, a failure otherwise.


def netns_available():
    """(True, "") where this process can make network namespaces (`ip netns add`: root or
    CAP_SYS_ADMIN, and iproute2), else (False, why): the probe the "netns" tests need."""
    name = "cairn-probe-%d" % os.getpid()
    try:
        made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, "cannot run ip netns: %s" % e
    if made.returncode != 0:
        return False, "cannot make a network namespace: " + made.stderr.strip()
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
    return True, ""


def needs(capability, available, why=""):
    """Decorates a test method or class that needs `capability`: it runs only in that
    capability's ctest entry, and skips there, with reason "needs CAPABILITY: why", when
    `available` is false."""
    def mark(obj):
        obj.cairn_capability = capability
        if not available:
            return unittest.skip("needs %s: %s" % (capability, why))(obj)
        return obj
    return mark


def allowed_skip_patterns():
    patterns = []
    with open(os.path.join(SOURCE, "tests", "skip_allowlist.txt")) as f:
        for line in f:
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                patterns.append(re.compile(line))
    return patterns


def capability_of(test):
    method = getattr(test, getattr(test, "_testMethodName", ""), None)
    return getattr(method, "cairn_capability", None) or getattr(type(test), "cairn_capability", None)


def flatten(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from flatten(item)
        else:
            yield item


def main():
    """Runs the calling module's tests (arguments as unittest's: -v, test names). Under
    ctest, CAIRN_TEST_NEEDS picks the tests of one capability entry ("-" for those that
    need nothing, or a comma-separated list), CAIRN_TEST_SPLIT names the capabilities that
    have entries, and CAIRN_TEST_NO_SKIPS=1 makes any skip a failure (entries whose
    capability is always there, such as the host-emulated GPU)."""
    argv = sys.argv[1:]
    verbosity = 2 if "-v" in argv else 1
    names = [a for a in argv if not a.startswith("-")]
    module = sys.modules["__main__"]
    loader = unittest.defaultTestLoader
    suite = loader.loadTestsFromNames(names, module) if names else loader.loadTestsFromModule(module)
    # Only the module's own test classes: a TestCase imported from another test file (for
    # its helpers) is that file's to run, not run twice.
    tests = [t for t in flatten(suite) if names or type(t).__module__ == module.__name__]
    wanted = os.environ.get("CAIRN_TEST_NEEDS")
    split = os.environ.get("CAIRN_TEST_SPLIT")
    if split is not None:
        entries = set(c for c in split.split(",") if c)
        lost = sorted(set(capability_of(t) for t in tests) - entries - {None})
        if lost:
            print("tests need %s, which no ctest entry runs: call needs() with a literal name "
                  "CMakeLists.txt can find" % ", ".join(lost), file=sys.stderr)
            return 1
    if wanted is not None:
        caps = set(None if c == "-" else c for c in wanted.split(","))
        tests = [t for t in tests if capability_of(t) in caps]
    elif split is not None:
        tests = [t for t in tests if capability_of(t) is None]
    if not tests:
        print("no test of this file was selected (CAIRN_TEST_NEEDS=%s)" % wanted, file=sys.stderr)
        return 1
    result = unittest.TextTestRunner(verbosity=verbosity).run(unittest.TestSuite(tests))
    if not result.skipped:
        return 0 if result.wasSuccessful() else 1
    no_skips = os.environ.get("CAIRN_TEST_NO_SKIPS") == "1"
    patterns = allowed_skip_patterns()
    refused = False
    for test, reason in result.skipped:
        allowed = not no_skips and any(p.search(reason) for p in patterns)
        refused = refused or not allowed
        print("%s: %s: %s" % ("skipped" if allowed else "SKIP NOT ALLOWED", test.id(), reason),
              file=sys.stderr)
    if no_skips:
        print("CAIRN_TEST_NO_SKIPS=1: this entry must run every test", file=sys.stderr)
    elif refused:
        print("a skip whose reason tests/skip_allowlist.txt does not allow fails the run",
              file=sys.stderr)
    if refused or not result.wasSuccessful():
        return 1
    if len(result.skipped) < result.testsRun:
        print("%d of %d tests skipped beside tests that ran: mark each test that may skip with "
              "needs() so it gets an entry of its own" % (len(result.skipped), result.testsRun),
              file=sys.stderr)
        return 1
    print("every test skipped: exit 77 (ctest: Skipped)", file=sys.stderr)
    return 77
