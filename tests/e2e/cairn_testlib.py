"""Shared helpers for the end-to-end tests: run the real cairn binary in a scratch directory."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
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


class CairnTestCase(unittest.TestCase):
    """Each test gets its own directory with its own store."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cairn-e2e-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    def cairn(self, *args, check=None, timeout=300, env=None):
        """Runs cairn in the test directory; returns the CompletedProcess."""
        full_env = dict(os.environ)
        full_env.pop("CAIRN_DIR", None)
        full_env["NO_COLOR"] = "1"
        if env:
            full_env.update(env)
        proc = subprocess.run([CAIRN] + [str(a) for a in args], cwd=self.dir, env=full_env,
                              capture_output=True, text=True, timeout=timeout)
        if check is not None and proc.returncode != check:
            self.fail("cairn %s exited %d (expected %d)\nstdout:\n%s\nstderr:\n%s" %
                      (" ".join(map(str, args)), proc.returncode, check, proc.stdout, proc.stderr))
        return proc

    def cairn_json(self, *args):
        return json.loads(self.cairn(*args, check=0).stdout)
