"""End to end: what ./install.sh installs, and what the installed binary needs on a machine
that only runs it (docs/install.md): `--runtime --binary FILE` installs a stripped copy with
its man page and completions, and every shared library that copy loads belongs to one of
install.sh's RUNTIME_PACKAGES, to a package they depend on, or to glibc."""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, SOURCE, CairnTestCase  # noqa: E402
import cairn_testlib  # noqa: E402

INSTALL = os.path.join(SOURCE, "install.sh")


def runtime_packages():
    # Sourced with $0 "bash", so install.sh's guard (BASH_SOURCE[0] == $0) sees a source and
    # only defines: given as $0, install.sh would run its main (apt-get, a build of this
    # tree while other tests use its binary, an install).
    out = subprocess.run(["bash", "-c", 'source "$1"; echo "${RUNTIME_PACKAGES[@]}"', "bash",
                          INSTALL],
                         capture_output=True, text=True, check=True, timeout=120)
    return out.stdout.split()


def depends_closure(packages):
    """The installed packages `packages` need, transitively, by their Depends and
    Pre-Depends (alternatives: every installed one counts)."""
    seen, todo = set(), list(packages)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        out = subprocess.run(["dpkg-query", "-W", "-f=${Depends}, ${Pre-Depends}", name],
                             capture_output=True, text=True, timeout=120)
        for dep in re.split(r"[,|]", out.stdout):
            dep = dep.strip().split(" ")[0].split(":")[0]
            if dep:
                todo.append(dep)
    return seen


class InstallTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        # cairn is built and tested on Debian (install.sh): dpkg-query and readelf (binutils,
        # which g++ needs) are there, and missing is a failure, not a skip.
        self.assertTrue(shutil.which("dpkg-query") and shutil.which("readelf"),
                        "needs dpkg-query and readelf (a Debian machine with binutils)")

    def install_runtime(self):
        prefix = os.path.join(self.dir, "prefix")
        proc = subprocess.run([INSTALL, "--runtime", "--no-deps", "--binary", CAIRN, "--prefix",
                               prefix], capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        return prefix

    def test_runtime_install_is_stripped_and_complete(self):
        prefix = self.install_runtime()
        binary = os.path.join(prefix, "bin", "cairn")
        sections = subprocess.run(["readelf", "-S", "-W", binary], capture_output=True,
                                  text=True, check=True, timeout=120).stdout
        self.assertNotIn(".debug_info", sections)
        self.assertLess(os.path.getsize(binary), os.path.getsize(CAIRN))
        version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=120)
        self.assertEqual(version.returncode, 0, version.stderr)
        for path in ["share/man/man1/cairn.1", "share/bash-completion/completions/cairn",
                     "share/zsh/site-functions/_cairn",
                     "share/fish/vendor_completions.d/cairn.fish"]:
            self.assertTrue(os.path.isfile(os.path.join(prefix, path)), path)

    def test_the_runtime_packages_provide_every_library_the_binary_loads(self):
        binary = os.path.join(self.install_runtime(), "bin", "cairn")
        allowed = depends_closure(runtime_packages()) | {"libc6"}
        ldd = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True, timeout=120).stdout
        libraries = re.findall(r"=> (/\S+)", ldd)
        self.assertTrue(any("libgloo" in lib for lib in libraries), ldd)
        for lib in libraries:
            real = os.path.realpath(lib)
            owner = None
            for candidate in (lib, real, real.replace("/usr/lib/", "/lib/", 1),
                              real.replace("/lib/", "/usr/lib/", 1)):
                out = subprocess.run(["dpkg-query", "-S", candidate], capture_output=True,
                                     text=True, timeout=120)
                if out.returncode == 0:
                    owner = out.stdout.split(":")[0]
                    break
            self.assertIsNotNone(owner, "no package owns %s" % lib)
            self.assertIn(owner, allowed, "%s comes from %s, which install.sh --runtime "
                          "does not install (RUNTIME_PACKAGES: %s)" % (lib, owner,
                                                                       runtime_packages()))

    def test_bad_runtime_arguments_are_one_line_errors(self):
        for args, message in [(["--runtime", "--test"], "--runtime and --test exclude each other"),
                              (["--binary", "x"], "--binary goes with --runtime"),
                              (["--runtime", "--no-deps", "--binary", "/nonexistent/cairn"],
                               "no cairn binary at /nonexistent/cairn")]:
            proc = subprocess.run([INSTALL] + args, capture_output=True, text=True, timeout=60)
            self.assertNotEqual(proc.returncode, 0)
            self.assertEqual(proc.stderr.count("\n"), 1, proc.stderr)
            self.assertIn(message, proc.stderr)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
