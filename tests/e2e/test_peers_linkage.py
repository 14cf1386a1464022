"""What issue 17 asks of the binary and its packaging that no other test checked: one
OpenSSL in the process (item 2, docs/peers.md "One OpenSSL"), and the systemd example unit
examples/cairn-agent.service (item 1) naming options the agent accepts."""
import os
import re
import shlex
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cairn_testlib  # noqa: E402
from cairn_testlib import CAIRN, SOURCE, CairnTestCase, needs  # noqa: E402
import peer_testlib  # noqa: E402
from peer_testlib import peer_home  # noqa: E402

# Functions of OpenSSL's public API, one from each area cairn uses (TLS, digests, random
# bytes, library set-up): any of them defined inside the binary means a second, static
# copy of OpenSSL beside the shared one libcurl loads.
OPENSSL_API = ["SSL_CTX_new", "SSL_new", "EVP_DigestInit_ex", "EVP_sha256", "RAND_bytes",
               "OPENSSL_init_crypto", "OPENSSL_init_ssl", "SHA256_Init"]

def ldd(path):
    """{soname: resolved path} of what the dynamic loader would load for `path`."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True,
                         timeout=120).stdout
    return dict(re.findall(r"^\s*(\S+) => (/\S+)", out, re.M))


def openssl_libraries(libs):
    return {name: path for name, path in libs.items()
            if re.match(r"lib(ssl|crypto)\.so", name)}


class OneOpenSSL(CairnTestCase):
    def test_openssl_is_linked_shared_once_the_copy_libcurl_loads(self):
        libs = ldd(CAIRN)
        ours = openssl_libraries(libs)
        self.assertEqual(sorted(n.split(".so")[0] for n in ours), ["libcrypto", "libssl"],
                         libs)
        curl = [p for n, p in libs.items() if n.startswith("libcurl")]
        if curl:  # the same files as libcurl's, so one copy is loaded
            self.assertEqual(openssl_libraries(ldd(curl[0])), ours)
        defined = subprocess.run(["nm", "--defined-only", CAIRN], capture_output=True,
                                 text=True, timeout=300)
        self.assertEqual(defined.returncode, 0, defined.stderr)
        names = set(line.split()[-1] for line in defined.stdout.splitlines() if line.strip())
        self.assertEqual([f for f in OPENSSL_API if f in names], [],
                         "OpenSSL functions defined inside the binary: a static copy")
        version = self.cairn("version", check=0).stdout
        self.assertRegex(version, r"(?m)^\s*openssl OpenSSL .*, shared$")

    def test_a_running_agent_maps_one_libssl_and_one_libcrypto(self):
        key = peer_home(self)
        agent = peer_testlib.Agent(self, "--no-announce", key=key, slots=1)
        with open("/proc/%d/maps" % agent.process.pid) as f:
            mapped = set(line.split()[-1] for line in f if "/" in line)
        names = sorted(os.path.basename(p).split(".so")[0] for p in mapped
                       if re.search(r"/lib(ssl|crypto)\.so", p))
        self.assertEqual(names, ["libcrypto", "libssl"], mapped)


class ExampleUnit(CairnTestCase):
    UNIT = os.path.join(SOURCE, "examples", "cairn-agent.service")

    def exec_start(self):
        with open(self.UNIT) as f:
            text = f.read()
        lines = re.findall(r"^ExecStart=(.*)$", text, re.M)
        self.assertEqual(len(lines), 1, text)
        return shlex.split(lines[0]), text

    def test_its_command_is_an_agent_the_binary_starts(self):
        argv, text = self.exec_start()
        self.assertEqual(argv[1], "agent", argv)
        self.assertRegex(text, r"(?m)^RestartPreventExitStatus=2$")
        # The unit's options, as this binary reads them, with a key: the agent starts and
        # stops on SIGTERM with status 0 (the unit's stop). Its port is replaced with 0 so
        # the test needs no free 7070.
        args = [re.sub(r":7070$", ":0", a) for a in argv[2:]]
        key = peer_home(self)
        agent = peer_testlib.Agent(self, "--no-announce", *args, key=key, listen=None)
        self.assertRegex(agent.listening, r"listening on \*:\d+ ")
        code, _ = agent.stop()
        self.assertEqual(code, 0)
        # Without a key the same command refuses (exit 2, one line): the unit does not
        # restart it (RestartPreventExitStatus=2).
        proc = self.cairn("agent", *args, "--dir", os.path.join(self.dir, "d"),
                          env=peer_testlib.agent_env(self, {"CAIRN_KEY_FILE": None,
                                                            "XDG_CONFIG_HOME": self.dir}),
                          timeout=60)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)

    @needs("systemd", shutil.which("systemd-analyze"), "systemd-analyze is not installed")
    def test_systemd_analyze_verifies_it(self):
        argv, text = self.exec_start()
        unit = self.write("cairn-agent.service",
                          text.replace(argv[0], CAIRN).replace("User=you", "User=root"))
        proc = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True,
                              text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
