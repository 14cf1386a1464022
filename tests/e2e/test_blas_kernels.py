"""End to end: the OpenBLAS kernels ("core type") builtin:mlp trials run (issue 22).

The coordinator decides once per trial attempt and puts OPENBLAS_CORETYPE into every rank's
environment before OpenBLAS initialises; the trial's first log line names the kernels
OpenBLAS actually runs, which is how these tests know the variable took effect. The choice
is recorded with the trial (`show`) and in the experiment's dependency fingerprint; a user's
OPENBLAS_CORETYPE wins; deterministic: true pins Haswell on AVX2+FMA CPUs and keeps the
recorded kernels through a resume and a reproduce; `reproduce --verify` on a CPU that cannot
run the recorded kernels says so; `cairn doctor` and `cairn version` report the kernels.
The cores the tests force (Prescott, Core2) run on every x86-64 CPU, which cairn needs.

The session may export OPENBLAS_CORETYPE (a machine set up to pin kernels): every test here
starts without it and sets it only where it means to.
"""
import json
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, PYTHON, CairnTestCase, needs, read_line_until, wait_until  # noqa: E402
import cairn_testlib  # noqa: E402

# Small: a few hundred milliseconds per run.
FAST = {"dataset": "teacher", "features": 8, "classes": 3, "samples": 1200, "hidden": 16,
        "layers": 1, "batch_size": 64, "threads": 1}
# Slow enough per epoch that a pause lands before the end.
SLOW = {"dataset": "teacher", "features": 32, "classes": 4, "samples": 10000, "hidden": 128,
        "layers": 2, "batch_size": 64, "threads": 1}


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].split() for line in f
                         if line.startswith("flags")), [])
    except OSError:
        return []


HASWELL = "avx2" in cpu_flags() and "fma" in cpu_flags()


def config(name, hparams, epochs, deterministic=False, environment=None, slots=1):
    c = {"name": name, "entrypoint": "builtin:mlp", "hyperparameters": hparams,
         "searcher": {"name": "single", "metric": "val_loss", "max_length": epochs},
         "checkpoint": {"period": 1},
         "reproducibility": {"seed": 3, "deterministic": deterministic}}
    if environment:
        c["environment"] = environment
    if slots > 1:
        c["resources"] = {"slots_per_trial": slots}
    return json.dumps(c)  # JSON is YAML


class KernelsTestCase(CairnTestCase):
    """Helpers; no tests."""

    def setUp(self):
        super().setUp()
        saved = os.environ.pop("OPENBLAS_CORETYPE", None)
        if saved is not None:
            self.addCleanup(os.environ.__setitem__, "OPENBLAS_CORETYPE", saved)

    def kernels(self):
        """`cairn version --json`'s report of OpenBLAS's kernels."""
        return self.cairn_json("version", "--json")["libraries"]["openblas"]["kernels"]

    def run_trial(self, name, env=None, **kwargs):
        self.write(name + ".yaml", config(name, FAST, 2, **kwargs))
        run = self.cairn("run", name + ".yaml", env=env)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        return run.stdout.split()[0], run

    def running_kernels(self, trial, rank=0):
        """The kernels OpenBLAS ran in the trial's (last) attempt, from its log."""
        log = self.cairn("logs", trial, "--rank", rank, check=0).stdout
        found = re.findall(r"OpenBLAS (\w+) kernels", log)
        self.assertTrue(found, "the trial's log names no OpenBLAS kernels:\n" + log)
        return found[-1]


class BlasKernelsTest(KernelsTestCase):
    def test_a_trial_runs_cairns_choice_recorded_in_show_and_the_fingerprint(self):
        report = self.kernels()
        choice = report["cairn_choice"]
        self.assertTrue(choice, report)
        self.assertIsNone(report["forced_by_env"])
        exp, _ = self.run_trial("plain")
        trial = self.cairn_json("show", exp + ".1", "--json")
        core = trial["blas_core"]
        self.assertEqual(core["core"], choice)
        self.assertEqual(core["chosen_by"], report["cairn_choice_by"])
        self.assertIn(core["chosen_by"], ("cairn", "openblas"))
        self.assertEqual(core["cpu"], report["cpu"])
        # OpenBLAS took it: what it runs is what was recorded.
        self.assertEqual(self.running_kernels(exp + ".1"), choice)
        deps = self.cairn_json("show", exp, "--json")["dependencies"]
        self.assertEqual(deps["openblas-core"], "%s (%s)" % (choice, core["chosen_by"]))
        text = self.cairn("show", exp + ".1", check=0).stdout
        self.assertRegex(text, r"\nblas +OpenBLAS %s kernels \(" % choice)

    def test_every_rank_of_a_trial_runs_the_same_kernels(self):
        self.write("dp.yaml", config("dp", FAST, 2, slots=2))
        run = self.cairn("run", "dp.yaml", "--slots", "2")
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        choice = self.cairn_json("show", "1.1", "--json")["blas_core"]["core"]
        self.assertEqual([self.running_kernels("1.1", rank) for rank in (0, 1)], [choice, choice])

    def test_the_users_openblas_coretype_wins_the_configs_over_the_shells(self):
        exp, _ = self.run_trial("shell", env={"OPENBLAS_CORETYPE": "Prescott"})
        core = self.cairn_json("show", exp + ".1", "--json")["blas_core"]
        self.assertEqual((core["core"], core["chosen_by"]), ("Prescott", "user"))
        self.assertEqual(self.running_kernels(exp + ".1"), "Prescott")
        self.assertEqual(self.cairn_json("show", exp, "--json")["dependencies"]["openblas-core"],
                         "Prescott (user)")
        self.assertIn("OPENBLAS_CORETYPE set by the user",
                      self.cairn("show", exp + ".1", check=0).stdout)

        exp, _ = self.run_trial("config", env={"OPENBLAS_CORETYPE": "Prescott"},
                                environment={"OPENBLAS_CORETYPE": "Core2"})
        self.assertEqual(self.cairn_json("show", exp + ".1", "--json")["blas_core"]["core"], "Core2")
        self.assertEqual(self.running_kernels(exp + ".1"), "Core2")

    def test_kernels_this_cpu_cannot_run_are_refused_with_a_warning(self):
        # SIGILL would be the alternative. A CPU with AVX-512 has no FMA4 (AMD dropped it
        # before Zen), which Piledriver's kernels use; one without cannot run SkylakeX's.
        core, needs = (("Piledriver", "FMA4") if "avx512f" in cpu_flags() else
                       ("SkylakeX", "AVX-512"))
        exp, run = self.run_trial("refused", env={"OPENBLAS_CORETYPE": core})
        self.assertIn("OPENBLAS_CORETYPE=%s is ignored: this CPU cannot run those kernels "
                      "(they need %s)" % (core, needs), run.stderr)
        recorded = self.cairn_json("show", exp + ".1", "--json")["blas_core"]
        self.assertEqual(recorded["core"], self.kernels()["cairn_choice"])
        self.assertEqual(self.running_kernels(exp + ".1"), recorded["core"])
        self.assertIn("warning: OPENBLAS_CORETYPE=%s is ignored" % core,
                      self.cairn("show", exp + ".1", check=0).stdout)

    def test_doctor_and_version_report_the_kernels(self):
        report = self.kernels()
        doctor = self.cairn("doctor", check=0).stdout
        blas = [line for line in doctor.splitlines() if re.match(r"^\S+ +blas ", line)]
        self.assertEqual(len(blas), 1, doctor)
        self.assertIn("OpenBLAS runs its %s kernels" % report["core"], blas[0])
        if report["falls_short"]:
            self.assertTrue(blas[0].startswith("warn"), blas[0])
            self.assertIn("builtin:mlp trials get OPENBLAS_CORETYPE=%s from cairn"
                          % report["cairn_choice"], blas[0])
        else:
            self.assertTrue(blas[0].startswith("ok"), blas[0])
        # Forced to the generic kernels on a CPU that has better: doctor says what to set.
        doctor = self.cairn("doctor", "--json", env={"OPENBLAS_CORETYPE": "Prescott"}, check=0)
        blas = next(c for c in json.loads(doctor.stdout) if c["check"] == "blas")
        self.assertEqual(blas["status"], "warn")
        self.assertIn("OpenBLAS runs its generic Prescott kernels (set by OPENBLAS_CORETYPE="
                      "Prescott) on a CPU that supports %s's" % report["cairn_choice"],
                      blas["detail"])
        self.assertIn("unset OPENBLAS_CORETYPE, or set it to " + report["cairn_choice"],
                      blas["detail"])
        # NumPy's OpenBLAS, which Python trials load, is checked the same way.
        pyblas = next(c for c in json.loads(doctor.stdout) if c["check"] == "pyblas")
        self.assertEqual(pyblas["status"], "warn")
        self.assertIn("NumPy's OpenBLAS (", pyblas["detail"])
        self.assertIn("runs its generic Prescott kernels", pyblas["detail"])

        version = self.cairn("version", env={"OPENBLAS_CORETYPE": "Prescott"}, check=0).stdout
        self.assertIn("OpenBLAS kernels: Prescott kernels (set by OPENBLAS_CORETYPE); cairn's "
                      "choice for builtin:mlp: %s" % report["cairn_choice"], version)
        self.assertEqual(report["cairn_deterministic"],
                         "Haswell" if HASWELL else report["cairn_choice"])

    def test_a_python_trial_is_told_when_its_openblas_runs_older_kernels(self):
        # NumPy's OpenBLAS is made to run its generic kernels, as an OpenBLAS older than the
        # CPU does, by the variable at its import; the variable is then gone, as it would be.
        self.write("train.py", "\n".join([
            "import os",
            "os.environ['OPENBLAS_CORETYPE'] = 'Prescott'",
            "import numpy",
            "del os.environ['OPENBLAS_CORETYPE']",
            "import cairn",
            "ctx = cairn.init()",
            "for op in ctx.operations():",
            "    ctx.report_validation(op.length, {'val_loss': 1.0})",
            ""]))
        self.write("py.yaml", "name: py\nentrypoint: %s train.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 1}\n" % PYTHON)
        self.cairn("run", "py.yaml", check=0)
        log = self.cairn("logs", "1.1", check=0).stdout
        choice = self.kernels()["cairn_choice"]
        first = log.splitlines()[0]
        self.assertRegex(first, r"^cairn: warning: \S+ runs OpenBLAS's Prescott kernels on a CPU "
                                r"that supports %s's; set OPENBLAS_CORETYPE=%s" % (choice, choice))
        self.assertIn("cairn does not set it for you", first)
        self.assertEqual(log.count("runs OpenBLAS's"), 1, "said once:\n" + log)

        # The user's own choice: nothing said.
        self.write("train.py", "import numpy\nimport cairn\nctx = cairn.init()\n"
                   "for op in ctx.operations():\n"
                   "    ctx.report_validation(op.length, {'val_loss': 1.0})\n")
        self.cairn("run", "py.yaml", check=0, env={"OPENBLAS_CORETYPE": "Prescott"})
        self.assertNotIn("runs OpenBLAS's", self.cairn("logs", "2.1", check=0).stdout)


@needs("avx2", HASWELL, "an x86-64 CPU with AVX2 and FMA to run OpenBLAS's Haswell kernels")
class DeterministicKernelsTest(KernelsTestCase):
    def test_deterministic_mode_pins_haswell(self):
        exp, _ = self.run_trial("det", deterministic=True)
        core = self.cairn_json("show", exp + ".1", "--json")["blas_core"]
        self.assertEqual((core["core"], core["chosen_by"]), ("Haswell", "deterministic"))
        self.assertEqual(self.running_kernels(exp + ".1"), "Haswell")
        self.assertEqual(self.cairn_json("show", exp, "--json")["dependencies"]["openblas-core"],
                         "Haswell (deterministic)")

    def test_resume_and_reproduce_keep_the_recorded_kernels(self):
        # Recorded like any choice: the user's, in deterministic mode.
        self.write("det.yaml", config("det", SLOW, 20, deterministic=True))
        env = dict(os.environ, NO_COLOR="1", OPENBLAS_CORETYPE="Prescott")
        proc = subprocess.Popen([CAIRN, "run", "det.yaml"], cwd=self.dir, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(proc.kill)
        read_line_until(proc.stdout, lambda line: True, timeout=120, what="the experiment id")
        wait_until(lambda: self.cairn("checkpoints", "1.1", "--json").returncode == 0 and
                   len(self.cairn_json("checkpoints", "1.1", "--json")) >= 1,
                   timeout=120, what="a first checkpoint")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "PAUSED", out)
        recorded = self.cairn_json("show", "1.1", "--json")["blas_core"]
        self.assertEqual((recorded["core"], recorded["chosen_by"]), ("Prescott", "user"))

        # Resumed with another variable: the recorded kernels, and the variable named as ignored.
        resumed = self.cairn("resume", "1", env={"OPENBLAS_CORETYPE": "Core2"}, timeout=300)
        self.assertEqual(resumed.returncode, 0, resumed.stdout + resumed.stderr)
        self.assertIn("OPENBLAS_CORETYPE=Core2 is ignored: the trial ran OpenBLAS's Prescott "
                      "kernels, which deterministic: true keeps", resumed.stderr)
        self.assertEqual(self.cairn_json("show", "1.1", "--json")["blas_core"], recorded)
        self.assertEqual(self.running_kernels("1.1"), "Prescott")
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "COMPLETED")

        # Reproduced without the variable: the recorded kernels again, and the same bits.
        again = self.cairn("reproduce", "1.1", "--verify", timeout=300)
        self.assertEqual(again.returncode, 0, again.stdout + again.stderr)
        self.assertIn("verified", again.stdout)
        core = self.cairn_json("show", "2.1", "--json")["blas_core"]
        self.assertEqual((core["core"], core["chosen_by"], core["from"]),
                         ("Prescott", "recorded", "1.1"))
        self.assertEqual(self.running_kernels("2.1"), "Prescott")
        self.assertEqual(self.cairn_json("show", "2", "--json")["dependencies"]["openblas-core"],
                         "Prescott (recorded)")
        self.assertIn("as trial 1.1 ran them", self.cairn("show", "2.1", check=0).stdout)

    def test_reproduce_verify_on_a_cpu_that_cannot_run_the_recorded_kernels_says_so(self):
        exp, _ = self.run_trial("det", deterministic=True)
        self.assertEqual(self.cairn_json("show", exp + ".1", "--json")["blas_core"]["core"],
                         "Haswell")
        # A CPU without AVX2, as far as cairn can tell (the variable is for tests).
        weaker = {"CAIRN_TEST_CPU_WITHOUT": "avx2"}
        again = self.cairn("reproduce", exp + ".1", "--verify", env=weaker, timeout=300)
        self.assertIn("cairn: warning: trial %s.1 ran OpenBLAS's Haswell kernels, which this CPU "
                      "cannot run (they need AVX2+FMA): the re-run runs other kernels, and its "
                      "results may differ" % exp, again.stderr)
        self.assertIn("this CPU cannot run the recorded OpenBLAS Haswell kernels", again.stderr)
        core = self.cairn_json("show", "2.1", "--json")["blas_core"]
        self.assertNotEqual(core["core"], "Haswell")
        self.assertEqual(self.running_kernels("2.1"), core["core"])
        if again.returncode != 0:  # other kernels, other bits: the verdict names the kernels
            self.assertIn("ran Haswell's, which this CPU cannot run (they need AVX2+FMA)",
                          again.stderr)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
