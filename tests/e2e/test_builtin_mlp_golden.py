"""Golden numbers for builtin:mlp: a few short deterministic trials whose validation losses
are compared, bit for bit, with values recorded once. A change of cairn that changes the
trainer's results (summation order, batching, RNG, a BLAS call's shape, a kernel) fails
here instead of passing silently; docs/builtin-mlp.md, "Numerical stability across
versions", says what to do then.

Exact, not within a tolerance: a reordered sum moves the numbers by as little as another
BLAS kernel does (OpenBLAS's SkylakeX kernels instead of Haswell's: 3e-10 to 6e-9 relative
after these 3 epochs, yet 0.3818 instead of 0.3531 for the best of a random search's 81-epoch
trials), so a tolerance wide enough to absorb kernel differences lets such changes through.
Instead the test removes the kernel from the question: OpenBLAS built with DYNAMIC_ARCH
(cairn's static OpenBLAS is) picks its kernels from the CPU model, and did change results
between two VMs once (see the doc); OPENBLAS_CORETYPE=Haswell makes it use the AVX2/FMA
kernels on every x86-64 CPU that has them. Elsewhere (no AVX2/FMA, another architecture, an
OpenBLAS that ignores the variable) the test cannot pin the kernels: without AVX2/FMA it
is listed as Skipped (ctest entry e2e_test_builtin_mlp_golden_needs_avx2), and an OpenBLAS
that ignores the variable fails LinkedOpenblasTest. The values also depend on
the OpenBLAS version (recorded below): an upgrade of OpenBLAS may legitimately require
recording them again.

To record new values after a deliberate change: CAIRN_GOLDEN_RECORD=1 prints them."""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CairnTestCase, needs  # noqa: E402
import cairn_testlib  # noqa: E402

# The OpenBLAS the values were recorded with (`cairn version`), for the failure message.
RECORDED_OPENBLAS = "OpenBLAS 0.3.21"
CORETYPE = "Haswell"
EPOCHS = 3
SEED = 7

# name -> hyperparameters. Between them: sgd with momentum and weight decay, adam with
# weight decay, plain sgd; batch sizes that divide the 2,400 training rows (32) and that
# leave a partial last batch (128: 96 rows; 512: 352 rows); 1 to 3 hidden layers; both
# datasets.
CONFIGS = {
    "sgd-momentum": {"dataset": "spirals", "classes": 5, "noise": 0.4, "optimizer": "sgd",
                     "lr": 0.05, "momentum": 0.9, "weight_decay": 0.0001, "hidden": 64,
                     "layers": 2, "batch_size": 32},
    "adam-decay": {"dataset": "spirals", "classes": 5, "noise": 0.4, "optimizer": "adam",
                   "lr": 0.005, "weight_decay": 0.001, "hidden": 32, "layers": 3,
                   "batch_size": 128},
    "sgd-teacher": {"dataset": "teacher", "features": 16, "classes": 4, "samples": 3000,
                    "optimizer": "sgd", "lr": 0.1, "momentum": 0, "weight_decay": 0,
                    "hidden": 48, "layers": 1, "batch_size": 512},
}

# name -> val_loss after epochs 1..EPOCHS (JSON doubles, compared exactly).
GOLDEN = {
    "sgd-momentum": [1.5794659680128098, 1.5875321219364802, 1.5717391607165336],
    "adam-decay": [1.5955389537413915, 1.5724176609516143, 1.5791615096728007],
    "sgd-teacher": [1.3668736556172372, 1.147239598830541, 1.0098626295228799],
}


def cpu_has_haswell_features():
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f
                          if line.startswith("flags")), [])
    except OSError:
        return False
    return "avx2" in flags and "fma" in flags


ENV = {"OPENBLAS_CORETYPE": CORETYPE}


def linked_openblas(test):
    """(version, config) of the OpenBLAS cairn links, from `cairn version`."""
    version = test.cairn("version", check=0, env=ENV).stdout
    blas = re.search(r"openblas \((OpenBLAS \S+)([^)]*)\)", version)
    test.assertIsNotNone(blas, "cairn version names no OpenBLAS:\n" + version)
    return blas.group(1), blas.group(2)


class LinkedOpenblasTest(CairnTestCase):
    # Runs everywhere. cairn links Debian's static OpenBLAS (DYNAMIC_ARCH), which honours
    # OPENBLAS_CORETYPE: if it did not, the golden test below could not pin its kernels, and
    # that is a failure, not a skip. Another version may change the values legitimately:
    # then record them again (CAIRN_GOLDEN_RECORD=1) with it.
    def test_openblas_is_the_one_the_values_were_recorded_with_and_takes_the_coretype(self):
        version, config = linked_openblas(self)
        self.assertEqual(version, RECORDED_OPENBLAS)
        self.assertIn("DYNAMIC_ARCH", config)
        if cpu_has_haswell_features():
            self.assertIn(CORETYPE, config)


# On this machine it runs 3 trials of 3 epochs in about 0.2 s: it is fast, not skipped.
@needs("avx2", cpu_has_haswell_features(),
       "an x86-64 CPU with AVX2 and FMA to run OpenBLAS's " + CORETYPE + " kernels")
class BuiltinMlpGoldenTest(CairnTestCase):
    ENV = ENV

    def setUp(self):
        super().setUp()
        self.openblas = linked_openblas(self)[0]
        self.cairn("init", check=0)

    def validation_losses(self, name, hparams):
        config = {"name": "golden-" + name, "entrypoint": "builtin:mlp",
                  "hyperparameters": dict(hparams, device="cpu"),
                  "searcher": {"name": "single", "metric": "val_loss", "max_length": EPOCHS},
                  "checkpoint": {"period": EPOCHS},
                  "reproducibility": {"seed": SEED, "deterministic": True}}
        self.write(name + ".yaml", json.dumps(config))  # JSON is YAML
        experiment = self.cairn("run", name + ".yaml", check=0, env=self.ENV).stdout.split()[0]
        metrics = self.cairn_json("metrics", experiment + ".1", "--json")
        return [v["metrics"]["val_loss"] for v in metrics["validation"]]

    def test_validation_losses_are_unchanged(self):
        got = {name: self.validation_losses(name, hp) for name, hp in CONFIGS.items()}
        if os.environ.get("CAIRN_GOLDEN_RECORD"):
            print("\nGOLDEN = {")
            for name, losses in got.items():
                print("    %r: [%s]," % (name, ", ".join(repr(x) for x in losses)))
            print("}  # %s, OPENBLAS_CORETYPE=%s" % (self.openblas, CORETYPE))
            return
        changed = [name for name in CONFIGS if got[name] != GOLDEN.get(name)]
        if changed:
            lines = ["  %s: recorded %s, now %s" % (n, GOLDEN.get(n), got[n]) for n in changed]
            self.fail(
                "builtin:mlp's results changed (same hyperparameters, seed and deterministic "
                "mode, OpenBLAS %s kernels):\n%s\n"
                "If the change is deliberate, record it in docs/builtin-mlp.md, section "
                "'Numerical stability across versions', and record the new values here "
                "(CAIRN_GOLDEN_RECORD=1). If not, find the commit that changed them. "
                "(Recorded with %s; this cairn has %s: a different OpenBLAS may change them "
                "too.)" % (CORETYPE, "\n".join(lines), RECORDED_OPENBLAS, self.openblas))


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
