"""The suite's skip rules (tests/README.md, "Skips") hold: a run whose tests all skipped for
allowed reasons exits 77 (ctest: Skipped), a skip for any other reason fails, a skip beside
tests that ran fails, and the entries that run the host-emulated GPU (ctest's unit_fake_gpu
and e2e_test_builtin_mlp_gpu_fake) fail when the emulation is not usable instead of
passing with nothing run."""
import os
import subprocess
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, PYTHON, SOURCE, CairnTestCase  # noqa: E402
import cairn_testlib  # noqa: E402

BUILD = os.path.dirname(os.path.abspath(CAIRN))
UNIT = os.path.join(BUILD, "cairn_unit_tests")
FAKE_GPU = os.path.join(BUILD, "fake_cuda") + ":" + os.path.join(BUILD, "fake_nvrtc")
E2E = os.path.dirname(os.path.abspath(__file__))


class SkipRulesTest(CairnTestCase):
    def run_file(self, body, **env):
        """Runs a test file made of `body` with cairn_testlib.main(); returns the process."""
        path = self.write("test_example.py", textwrap.dedent("""\
            import sys, unittest
            sys.path.insert(0, %r)
            import cairn_testlib
            from cairn_testlib import needs
            """ % E2E) + textwrap.dedent(body) + "\nsys.exit(cairn_testlib.main())\n")
        full = dict(os.environ, CAIRN_SOURCE_DIR=SOURCE)
        for key in ("CAIRN_TEST_NEEDS", "CAIRN_TEST_SPLIT", "CAIRN_TEST_NO_SKIPS"):
            full.pop(key, None)
        full.update(env)
        return subprocess.run([PYTHON, path], capture_output=True, text=True, env=full, timeout=60)

    def test_python_skip_codes(self):
        # (The capability is in a variable so that CMakeLists.txt, which looks for
        # needs("NAME" in this file, makes no entry for it.)
        body = """\
            CAP = "gpu"
            class T(unittest.TestCase):
                @needs(CAP, False, "no GPU here")
                def test_gpu(self): pass
                def test_plain(self): pass
            """
        # The capability's entry: every test skipped, for an allowed reason.
        run = self.run_file(body, CAIRN_TEST_NEEDS="gpu")
        self.assertEqual(run.returncode, 77, run.stderr)
        self.assertIn("skipped: __main__.T.test_gpu: needs gpu: no GPU here", run.stderr)
        # The same where no skip is allowed.
        run = self.run_file(body, CAIRN_TEST_NEEDS="gpu", CAIRN_TEST_NO_SKIPS="1")
        self.assertEqual(run.returncode, 1, run.stderr)
        self.assertIn("SKIP NOT ALLOWED: __main__.T.test_gpu", run.stderr)
        # The file's own entry runs the plain test only, and knows the gpu entry exists.
        run = self.run_file(body, CAIRN_TEST_SPLIT="gpu")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("Ran 1 test", run.stderr)
        # A capability no entry runs is an error, not a test silently dropped.
        run = self.run_file(body, CAIRN_TEST_SPLIT="")
        self.assertEqual(run.returncode, 1, run.stderr)
        self.assertIn("tests need gpu, which no ctest entry runs", run.stderr)
        # Run by hand (no entry): everything, and the skip beside a test that ran fails.
        run = self.run_file(body)
        self.assertEqual(run.returncode, 1, run.stderr)
        self.assertIn("1 of 2 tests skipped beside tests that ran", run.stderr)

    def test_python_skip_for_a_reason_not_allowed_fails(self):
        run = self.run_file("""\
            class T(unittest.TestCase):
                def test_x(self): self.skipTest("flaky today")
            """)
        self.assertEqual(run.returncode, 1, run.stderr)
        self.assertIn("SKIP NOT ALLOWED: __main__.T.test_x: flaky today", run.stderr)

    def unit(self, filter, **env):
        full = dict(os.environ, LD_LIBRARY_PATH=FAKE_GPU + ":" + os.environ.get("LD_LIBRARY_PATH", ""))
        full.pop("CAIRN_TEST_NO_SKIPS", None)
        full.update(env)
        return subprocess.run([UNIT, "-tc=" + filter], capture_output=True, text=True, env=full,
                              timeout=300)

    def test_doctest_skip_codes(self):
        broken = {"FAKE_CUDA_INIT_ERROR": "100"}  # the emulated driver finds no device
        run = self.unit("*[needs gpu]*", **broken)
        self.assertEqual(run.returncode, 77, run.stdout + run.stderr)
        self.assertIn("skipped: \"cuda forward/backward matches the CPU", run.stderr)
        # ctest's unit_fake_gpu, with the emulation broken: it fails.
        run = self.unit("*[needs gpu]*,*[needs fake gpu]*", CAIRN_TEST_NO_SKIPS="1", **broken)
        self.assertEqual(run.returncode, 1, run.stdout + run.stderr)
        self.assertIn("SKIP NOT ALLOWED", run.stderr)
        # A case that skips beside one that ran fails the run.
        run = self.unit("*[needs gpu]*,mlp hyperparameter device*", **broken)
        self.assertEqual(run.returncode, 1, run.stdout + run.stderr)
        self.assertIn("cases skipped beside cases that ran", run.stderr)

    def test_fake_gpu_e2e_entry_fails_when_the_emulation_is_not_usable(self):
        # ctest's e2e_test_builtin_mlp_gpu_fake, with the emulated driver failing cuInit and
        # then with a library path that misses the emulation.
        for broken in ({"FAKE_CUDA_INIT_ERROR": "100",
                        "LD_LIBRARY_PATH": FAKE_GPU + ":" + os.environ.get("LD_LIBRARY_PATH", "")},
                       {"LD_LIBRARY_PATH": os.path.join(self.dir, "nothing")}):
            with self.subTest(broken=broken):
                env = dict(os.environ, CAIRN_TEST_MLP_DEVICE="cuda", CAIRN_TEST_NEEDS="gpu",
                           CAIRN_TEST_NO_SKIPS="1", **broken)
                env.pop("CAIRN_TEST_SPLIT", None)  # this file's own entry's
                run = subprocess.run([PYTHON, os.path.join(E2E, "test_builtin_mlp_gpu.py")],
                                     capture_output=True, text=True, env=env, timeout=300)
                self.assertEqual(run.returncode, 1, run.stderr)
                self.assertIn("SKIP NOT ALLOWED", run.stderr)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
