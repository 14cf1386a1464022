"""End to end: what `cairn doctor` and `cairn version` say about the GPU runtime, and that
it is what a trial finds. Both read the loaders the trainer uses (gpu/runtime_probe.h), so
a CUDA driver that lacks an entry point the trainer needs is not reported usable; and
`cairn version` stays cheap: it never loads cuBLAS or NVRTC (`cairn doctor` does).

Runs on build/fake_cuda_old (tests/fake_cuda/fake_cuda_old.cc: a driver that answers
cuInit, cuDriverGetVersion and cuDeviceGetCount and has nothing else), found beside
CAIRN_BIN; skipped when it is not there."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, CairnTestCase  # noqa: E402
import cairn_testlib  # noqa: E402

BUILD = os.path.dirname(os.path.abspath(CAIRN))
OLD_DRIVER = os.path.join(BUILD, "fake_cuda_old")
OLD_NCCL = os.path.join(BUILD, "fake_nccl_old")

CONFIG = """name: mlp-old-driver
entrypoint: builtin:mlp
hyperparameters: {device: %s, samples: 300}
searcher: {name: single, metric: val_loss, max_length: 1}
max_restarts: 0
"""


def with_library_path(path):
    return {"LD_LIBRARY_PATH": path + ":" + os.environ.get("LD_LIBRARY_PATH", "")}


class GpuProbeTest(CairnTestCase):
    def test_a_driver_too_old_for_the_trainer_is_not_reported_usable(self):
        self.assertTrue(os.path.isdir(OLD_DRIVER), "needs %s, built with the tests" % OLD_DRIVER)
        env = with_library_path(OLD_DRIVER)
        checks = {c["check"]: c for c in json.loads(self.cairn("doctor", "--json", env=env).stdout)}
        self.assertEqual(checks["gpu"]["status"], "warn", checks["gpu"])
        self.assertIn("CUDA driver 10.2 is too old for cairn (it lacks cuDeviceGet)",
                      checks["gpu"]["detail"])
        version = json.loads(self.cairn("version", "--json", check=0, env=env).stdout)
        self.assertIs(version["cuda"]["driver"], True)
        self.assertIs(version["cuda"]["usable"], False)
        self.assertEqual(version["cuda"]["devices"], 1)
        self.assertIn("too old for cairn", version["gpu"])
        # A trial asking for the GPU fails with the same reason, as bad input (exit 2).
        self.write("mlp.yaml", CONFIG % "cuda")
        self.cairn("run", "mlp.yaml", env=env)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["exit"]["code"], 2, trial)
        logs = self.cairn("logs", "1.1").stdout
        self.assertIn("cannot train on a GPU: CUDA driver 10.2 is too old for cairn "
                      "(it lacks cuDeviceGet)", logs)
        # `auto` trains on the CPU and says why.
        self.write("mlp.yaml", CONFIG % "auto")
        self.cairn("run", "mlp.yaml", env=env)
        trial = self.cairn_json("show", "2.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        self.assertIn("device cpu (auto: CUDA driver 10.2 is too old", self.cairn("logs", "2.1").stdout)

    def test_an_nccl_too_old_for_cairn_is_found_and_fingerprinted_but_not_usable(self):
        self.assertTrue(os.path.isdir(OLD_NCCL), "needs %s, built with the tests" % OLD_NCCL)
        # tests/fake_cuda/fake_nccl_old.cc: NCCL 2.12, as a PyTorch trial may bring.
        env = with_library_path(OLD_NCCL)
        version = json.loads(self.cairn("version", "--json", env=env).stdout)
        self.assertEqual(version["nccl"]["found"], True, version["nccl"])
        self.assertEqual(version["nccl"]["usable"], False, version["nccl"])
        self.assertEqual(version["nccl"]["version"], 21200, version["nccl"])
        checks = {c["check"]: c for c in json.loads(self.cairn("doctor", "--json", env=env).stdout)}
        self.assertIn("NCCL 2.12.0 is too old for cairn", checks["nccl"]["detail"])
        # The experiment's environment still records it: comparisons with experiments that
        # ran before cairn needed NCCL 2.14 must not show a difference that is not there.
        self.write("mlp.yaml", CONFIG % "cpu")
        self.cairn("run", "mlp.yaml", env=env)
        self.assertEqual(self.cairn_json("show", "1", "--json")["dependencies"]["nccl"], "21200")

    def test_version_loads_neither_cublas_nor_nvrtc_and_doctor_looks_for_both(self):
        # LD_DEBUG=libs makes the dynamic loader log every library it looks for.
        env = {"LD_DEBUG": "libs"}
        version = self.cairn("version", check=0, env=env).stderr
        self.assertTrue("find library=libcuda.so.1" in version, "version reports the driver")
        for lib in ("libcublas", "libnvrtc"):
            self.assertFalse("find library=" + lib in version, "cairn version looked for " + lib)
        # The keys earlier versions filled stay, saying they were not checked.
        as_json = json.loads(self.cairn("version", "--json", env=env).stdout)
        for key in ("cublas", "nvrtc"):
            self.assertEqual(as_json[key], {"loaded_at_run_time": True, "checked": False,
                                            "see": "cairn doctor"})
        doctor = self.cairn("doctor", "--json", env=env).stderr
        for lib in ("libcublas", "libnvrtc"):
            self.assertTrue("find library=" + lib in doctor, "cairn doctor did not look for " + lib)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
