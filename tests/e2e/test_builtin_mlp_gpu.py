"""End to end: builtin:mlp on a GPU (hyperparameter `device`). The GPU tests (needs("gpu"))
run in ctest entries of their own, listed as Skipped where `cairn doctor` finds no usable
CUDA device, cuBLAS or NVRTC; the fallback test hides the GPU and runs everywhere.

With build/fake_cuda on LD_LIBRARY_PATH (tests/fake_cuda: the driver and cuBLAS emulated
on the host) the GPU tests run without a GPU, through `cairn run`, on the emulation; ctest
does that as e2e_test_builtin_mlp_gpu_fake. On a GPU machine tests/gpu/device_checks.sh runs
them on the real libraries (they passed on an H100, 2026-11-26)."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, CairnTestCase, needs  # noqa: E402
import cairn_testlib  # noqa: E402

CONFIG = """name: mlp-gpu
entrypoint: builtin:mlp
hyperparameters:
  device: %(device)s
  optimizer: adam
  hidden: 64
  layers: 2
  batch_size: 64
searcher: {name: single, metric: val_loss, max_length: %(length)d}
checkpoint: {period: 2}
max_restarts: %(restarts)d
reproducibility: {seed: 3, deterministic: true}
"""


def gpu_runtime():
    """(usable, why): whether builtin:mlp can train on a GPU here, by the loaders a trial
    uses. `cairn version` says whether the driver is usable; cuBLAS and NVRTC only `cairn
    doctor` looks for, and with a usable driver it marks either missing as "warn"."""
    out = subprocess.run([CAIRN, "version", "--json"], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        return False, "cairn version failed: " + out.stderr
    version = json.loads(out.stdout)
    if not version["cuda"]["usable"]:
        return False, version["gpu"]
    out = subprocess.run([CAIRN, "doctor", "--json"], capture_output=True, text=True, timeout=120)
    if not out.stdout.startswith("["):
        return False, "cairn doctor failed: " + out.stderr
    checks = {c["check"]: c for c in json.loads(out.stdout)}
    for check in ("gpu", "cublas", "nvrtc"):
        if checks[check]["status"] != "ok":
            return False, checks[check]["detail"]
    return True, checks["gpu"]["detail"]


USABLE, WHY = gpu_runtime()


def nccl_usable():
    out = subprocess.run([CAIRN, "version", "--json"], capture_output=True, text=True, timeout=120)
    return out.returncode == 0 and json.loads(out.stdout)["nccl"]["usable"]


RANKS_CONFIG = """name: mlp-auto-ranks
entrypoint: builtin:mlp
hyperparameters: {device: auto, samples: 600, collective_timeout: 20}
searcher: {name: single, metric: val_loss, max_length: 2}
resources: {slots_per_trial: 2}
max_restarts: 0
"""
# What trainer/gpu_memory_reserve.h leaves to the CUDA context on a GPU smaller than 10 GiB.
RESERVE = 512 << 20
# tests/fake_cuda's emulation is on the library path: it can be told to fail (FAKE_CUDA_*).
FAKE = any(os.path.basename(p.rstrip("/")) == "fake_cuda"
           for p in os.environ.get("LD_LIBRARY_PATH", "").split(":"))


class BuiltinMlpGpuTest(CairnTestCase):
    def run_config(self, device, length=6, restarts=0, check=0, env=None):
        self.write("mlp.yaml", CONFIG % {"device": device, "length": length, "restarts": restarts})
        return self.cairn("run", "mlp.yaml", check=check, env=env, timeout=300)

    @needs("gpu", USABLE, WHY)
    def test_trains_on_one_gpu(self):
        self.run_config("cuda")
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED")
        logs = self.cairn("logs", "1.1", check=0).stdout
        self.assertIn("device cuda: cuda:0 ", logs)
        metrics = self.cairn_json("metrics", "1.1", "--json")
        losses = [p["metrics"]["loss"] for p in metrics["training"]]
        self.assertLess(losses[-1], 0.8 * losses[0], "training loss falls")
        self.assertGreater(metrics["validation"][-1]["metrics"]["val_accuracy"], 0.6)  # chance 1/3

    @needs("gpu", USABLE, WHY)
    def test_auto_picks_the_gpu_and_follows_the_cpu_curve(self):
        self.run_config("auto")
        self.run_config("cpu")
        self.assertIn("device cuda (auto): cuda:0 ", self.cairn("logs", "1.1", check=0).stdout)
        gpu = [p["metrics"]["loss"] for p in self.cairn_json("metrics", "1.1", "--json")["training"]]
        cpu = [p["metrics"]["loss"] for p in self.cairn_json("metrics", "2.1", "--json")["training"]]
        self.assertEqual(len(gpu), len(cpu))
        # Float rounding differs (cuBLAS, CUDA's expf) and grows over epochs of Adam; the
        # curves stay within a few percent.
        for g, c in zip(gpu, cpu):
            self.assertAlmostEqual(g, c, delta=0.05 * c)

    @needs("gpu", USABLE, WHY)
    def test_gpu_run_repeats_bit_for_bit(self):
        self.run_config("cuda")
        self.run_config("cuda")
        a = self.cairn_json("metrics", "1.1", "--json")
        b = self.cairn_json("metrics", "2.1", "--json")
        self.assertEqual(a["training"], b["training"])
        self.assertEqual(a["validation"], b["validation"])

    @needs("gpu", USABLE, WHY)
    def test_later_trials_load_the_kernels_from_the_store_and_a_damaged_entry_is_replaced(self):
        cache = os.path.join(self.dir, ".cairn", "cache", "kernels")

        def run_and_log(n):
            self.run_config("cuda", length=1)
            self.assertEqual(self.cairn_json("show", "%d.1" % n, "--json")["state"], "COMPLETED")
            return self.cairn("logs", "%d.1" % n, check=0).stdout

        first = run_and_log(1)
        self.assertIn("kernels compiled by NVRTC ", first)
        self.assertNotIn("from the kernel cache", first)
        entries = os.listdir(cache)
        self.assertEqual(len(entries), 1, entries)
        self.assertIn("(from the kernel cache)", run_and_log(2))
        # A damaged entry is not loaded: the trial says so, compiles, and writes it afresh.
        entry = os.path.join(cache, entries[0])
        with open(entry, "r+b") as f:
            f.seek(os.path.getsize(entry) // 2)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0xFF]))
        third = run_and_log(3)
        self.assertIn("cairn: warning: the cached kernels %s are damaged; compiling them again"
                      % entry, third)
        self.assertNotIn("from the kernel cache", third)
        self.assertIn("(from the kernel cache)", run_and_log(4))
        # All four trained the same: the cached image is the compiled one.
        curves = [self.cairn_json("metrics", "%d.1" % n, "--json")["training"] for n in range(1, 5)]
        for curve in curves[1:]:
            self.assertEqual(curve, curves[0])

    # tests/fake_cuda can be told to fail (FAKE_CUDA_*): these run on it only.
    @needs("fake_gpu", USABLE and FAKE, "tests/fake_cuda on the library path: " + WHY)
    def test_gpu_failures_a_restart_cannot_fix_exit_2_and_others_1(self):
        # (what the emulated GPU does, samples, exit status, the line the trial ends with)
        cases = [
            # 512 MiB of each "GPU" is the CUDA context's share (trainer/gpu_memory_reserve.h):
            # the model needs less than the GPU has in all, but more than the rest.
            ({"FAKE_CUDA_MEMORY": str(RESERVE + 65536)}, 300, 2,
             "cannot train on the GPU: the model 2→64→64→3 needs "),
            ({"FAKE_CUDA_MEMORY": str(RESERVE + 2400000)}, 100000, 2,
             "cannot train on the GPU: the data (100000 rows) beside the model needs "),
            ({"FAKE_CUDA_REFUSE_MODULE": "209"}, 300, 2,
             "cannot train on the GPU: CUDA cuModuleLoadData: fake CUDA error "
             "(the driver refuses the module)"),
            # An allocation below the GPU's size that fails: memory other processes hold,
            # which a restart may find free.
            ({"FAKE_CUDA_MAX_ALLOC": "1024"}, 300, 1,
             "cannot train on the GPU: CUDA cuMemAlloc of "),
            # A module refused for a reason that is not the image's (CUDA_ERROR_UNKNOWN):
            # the driver may take it in a fresh process.
            ({"FAKE_CUDA_REFUSE_MODULE": "999"}, 300, 1,
             "cannot train on the GPU: CUDA cuModuleLoadData: fake CUDA error\n"),
        ]
        for i, (env, samples, code, line) in enumerate(cases, start=1):
            with self.subTest(env=env):
                self.write("mlp.yaml", (CONFIG % {"device": "cuda", "length": 1, "restarts": 0})
                           .replace("batch_size: 64", "batch_size: 64\n  samples: %d" % samples))
                self.cairn("run", "mlp.yaml", env=env)
                trial = self.cairn_json("show", "%d.1" % i, "--json")
                self.assertEqual(trial["exit"]["code"], code, trial)
                logs = self.cairn("logs", "%d.1" % i, check=0).stdout
                self.assertIn("cairn: error: builtin:mlp: " + line, logs)
                if code == 2:
                    self.assertIn("512.0 MiB in all, 64 KiB after the CUDA context's share "
                                  "(use device: cpu)" if i == 1 else
                                  " after the CUDA context's share (use device: cpu)"
                                  if "FAKE_CUDA_MEMORY" in env
                                  else "refuses", logs)

    # tests/fake_cuda can be told to fail (FAKE_CUDA_*): these run on it only.
    @needs("fake_gpu", USABLE and FAKE, "tests/fake_cuda on the library path: " + WHY)
    def test_cuinit_no_device_ends_the_trial_and_an_unknown_error_is_retried(self):
        # (the cuInit error, exit status, the line the trial ends with)
        cases = [
            ("100", 2, "CUDA driver 13.0 found but no CUDA device"),
            ("999", 1, "CUDA driver 13.0 found but cuInit failed: fake CUDA error"),
        ]
        for i, (error, code, line) in enumerate(cases, start=1):
            with self.subTest(error=error):
                self.write("mlp.yaml", CONFIG % {"device": "cuda", "length": 1, "restarts": 0})
                self.cairn("run", "mlp.yaml", env={"FAKE_CUDA_INIT_ERROR": error}, check=None)
                trial = self.cairn_json("show", "%d.1" % i, "--json")
                self.assertEqual(trial["exit"]["code"], code, trial)
                self.assertIn("cairn: error: builtin:mlp: hyperparameter 'device' is \"cuda\" "
                              "but this machine cannot train on a GPU: " + line,
                              self.cairn("logs", "%d.1" % i, check=0).stdout)

    # `auto` with two ranks whose machines differ (FAKE_CUDA_NO_DEVICE_RANK hides the
    # emulated GPU from one rank). NCCL must be found, or `auto` picks the CPU on every rank
    # with several ranks whatever the GPU, and the ranks never disagree.
    @needs("fake_gpu_nccl", USABLE and FAKE and nccl_usable(),
           "tests/fake_cuda and libnccl (found, not used)")
    def test_auto_ranks_follow_rank_0_and_fail_at_once_when_they_cannot(self):
        self.write("mlp.yaml", RANKS_CONFIG)
        # Rank 0 has no GPU: it picks the CPU, and rank 1, which has one, follows it.
        self.cairn("run", "mlp.yaml", "--slots", "2", env={"FAKE_CUDA_NO_DEVICE_RANK": "0"},
                   timeout=120)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED", trial)
        # Each rank's log line shows the agreed decision, not one of its own.
        rank1 = self.cairn("logs", "1.1", "--rank", "1", check=0).stdout
        self.assertIn("device cpu (auto, as rank 0)", rank1)
        rank0 = self.cairn("logs", "1.1", "--rank", "0", check=0).stdout
        self.assertIn("device cpu (auto: CUDA driver 13.0 found but no CUDA device)", rank0)
        self.assertIn("rank 1 of 2 (gloo)", rank1)
        # Rank 0 picks the GPU; rank 1 cannot follow and says so at once (exit 2), without
        # waiting out collective_timeout.
        run = self.cairn("run", "mlp.yaml", "--slots", "2", env={"FAKE_CUDA_NO_DEVICE_RANK": "1"},
                         timeout=120)
        self.assertIn("rank 1 exited with status 2", run.stderr)
        self.assertEqual(self.cairn_json("show", "2.1", "--json")["exit"]["code"], 2)
        self.assertIn("cairn: error: builtin:mlp: device: auto: rank 0 trains on the GPU but rank "
                      "1 cannot: CUDA driver 13.0 found but no CUDA device",
                      self.cairn("logs", "2.1", "--rank", "1", check=0).stdout)

    # Runs everywhere: CUDA_VISIBLE_DEVICES="" hides a GPU, real or emulated, from cairn
    # and its trials.
    def test_cuda_without_a_gpu_fails_clearly_and_auto_falls_back(self):
        hidden = {"CUDA_VISIBLE_DEVICES": ""}
        run = self.run_config("cuda", length=2, check=None, env=hidden)
        self.assertEqual(run.returncode, 1)
        self.assertEqual(self.cairn_json("show", "1.1", "--json")["exit"]["code"], 2)
        logs = self.cairn("logs", "1.1", check=0).stdout + run.stderr
        self.assertIn("hyperparameter 'device' is \"cuda\" but this machine cannot train on a GPU",
                      logs)
        self.run_config("auto", length=2, env=hidden)
        self.assertEqual(self.cairn_json("show", "2.1", "--json")["state"], "COMPLETED")
        self.assertIn("device cpu (auto: ", self.cairn("logs", "2.1", check=0).stdout)


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
