#!/usr/bin/python3
"""Benchmark: builtin:mlp training throughput on one GPU against PyTorch on the same GPU.

Last run on an H100 (bench/RESULTS.md, 2026-11-26), through tests/gpu/device_checks.sh. It needs a CUDA GPU,
cairn finding the driver, cuBLAS and NVRTC (`cairn doctor`), and a CUDA build of PyTorch
for /usr/bin/python3 (Debian's python3-torch is CPU only); it exits 77 saying what is
missing otherwise.

The structure of bench/mlp_bench.py (the CPU comparison): the same MLP (FEATURES →
HIDDEN × LAYERS with ReLU → CLASSES, float32), batch size, optimizer and rows; every epoch
both shuffle, train in mini-batches and evaluate the validation rows.

- builtin:mlp runs as a real trial (`cairn run`, hyperparameter `device: cuda`). Its time
  per epoch is the difference between the wall times of a run of E2 epochs and one of E1
  epochs, divided by E2 − E1, leaving out start-up (NVRTC compiling the kernels, copying
  the data to the GPU) and the final checkpoint. The trial's log must say it ran on CUDA.
- PyTorch runs bench/mlp_torch.py --device cuda: data and model on the GPU, the loss kept
  there until the epoch ends (as builtin:mlp does), torch.cuda.synchronize() before each
  timestamp; the time per epoch is the mean of epochs E1+1 … E2.

Repetitions alternate builtin and PyTorch; medians are reported. samples/s = training
rows / seconds per epoch; the ratio is builtin / PyTorch.

    /usr/bin/python3 bench/mlp_gpu_bench.py [--cairn BIN] [--reps 3] [--features 64]
        [--hidden 1024] [--layers 2] [--batch-size 512] [--samples 200000] [--optimizer sgd]
"""
import argparse
import json
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import SOURCE, default_cairn, machine_summary, run_checked

VAL_FRACTION = 0.2
SKIP = 77


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cairn", default=default_cairn())
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--samples", type=int, default=200000)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--short", type=int, default=2, help="E1: epochs of the short run")
    p.add_argument("--long", type=int, default=12, help="E2: epochs of the long run")
    return p.parse_args()


def check_gpu(args):
    """Exits 77 with the reason when either side cannot use a GPU here."""
    # The check of tests/e2e/test_builtin_mlp_gpu.py's gpu_runtime(): `cairn version` says
    # whether the driver is usable; cuBLAS and NVRTC only `cairn doctor` looks for, and with
    # a usable driver it marks either missing as "warn".
    version = json.loads(run_checked([args.cairn, "version", "--json"]).stdout)
    missing = []
    if not version["cuda"]["usable"]:
        missing.append("a CUDA device for cairn (%s)" % version["gpu"])
    else:
        doctor = subprocess.run([args.cairn, "doctor", "--json"], capture_output=True, text=True)
        checks = {c["check"]: c for c in json.loads(doctor.stdout)} if doctor.stdout else {}
        for lib in ("cublas", "nvrtc"):
            if lib not in checks or checks[lib]["status"] != "ok":
                missing.append("%s (%s)" % (lib, checks.get(lib, {}).get("detail", doctor.stderr.strip())))
    torch_cuda = subprocess.run(["/usr/bin/python3", "-c",
                                 "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"],
                                capture_output=True)
    if torch_cuda.returncode != 0:
        missing.append("a CUDA build of PyTorch for /usr/bin/python3")
    if missing:
        print("bench: skipped, needs " + ", ".join(missing))
        sys.exit(SKIP)
    return version["gpu"]


def builtin_config(args, epochs):
    return {
        "name": "mlp-gpu-bench",
        "entrypoint": "builtin:mlp",
        "hyperparameters": {
            "device": "cuda", "dataset": "teacher", "features": args.features,
            "classes": args.classes, "samples": args.samples, "val_fraction": VAL_FRACTION,
            "hidden": args.hidden, "layers": args.layers, "batch_size": args.batch_size,
            "optimizer": args.optimizer, "lr": args.lr, "momentum": 0.9,
        },
        "searcher": {"name": "single", "metric": "val_loss", "max_length": epochs},
        "checkpoint": {"period": epochs},
        "resources": {"devices": "gpu"},
        "reproducibility": {"seed": 1, "deterministic": False},
    }


def time_builtin(args, epochs, workdir):
    """Wall seconds of one `cairn run` of builtin:mlp on the GPU, with a fresh store."""
    workdir.mkdir()
    (workdir / "exp.yaml").write_text(json.dumps(builtin_config(args, epochs)))
    start = time.perf_counter()
    run_checked([args.cairn, "run", "exp.yaml"], cwd=workdir)
    elapsed = time.perf_counter() - start
    show = json.loads(run_checked([args.cairn, "show", "1", "--json"], cwd=workdir).stdout)
    if show["state"] != "COMPLETED" or show["trials"][0]["steps_completed"] != epochs:
        sys.exit("bench: builtin:mlp did not complete %d epochs: %s" % (epochs, show))
    logs = run_checked([args.cairn, "logs", "1.1"], cwd=workdir).stdout
    if "device cuda" not in logs:
        sys.exit("bench: builtin:mlp did not train on the GPU:\n" + logs)
    return elapsed


def builtin_epoch_seconds(args, scratch, rep):
    short = time_builtin(args, args.short, scratch / ("builtin-%d-short" % rep))
    long = time_builtin(args, args.long, scratch / ("builtin-%d-long" % rep))
    return (long - short) / (args.long - args.short)


def torch_epoch_seconds(args):
    proc = run_checked(["/usr/bin/python3", str(SOURCE / "bench" / "mlp_torch.py"),
                        "--device", "cuda", "--features", str(args.features),
                        "--classes", str(args.classes), "--samples", str(args.samples),
                        "--val-fraction", str(VAL_FRACTION), "--hidden", str(args.hidden),
                        "--layers", str(args.layers), "--batch-size", str(args.batch_size),
                        "--optimizer", args.optimizer, "--lr", str(args.lr),
                        "--epochs", str(args.long)])
    result = json.loads(proc.stdout)
    measured = slice(args.short, args.long)
    return (statistics.mean(result["epoch_s"][measured]),
            statistics.mean(result["train_s"][measured]), result["train_rows"])


def main():
    args = parse_args()
    gpu = check_gpu(args)
    print(machine_summary(args.cairn))
    print("GPU runtime: " + gpu)
    print("model %d -> %s -> %d, batch %d, %s, epochs %d..%d measured" %
          (args.features, " -> ".join([str(args.hidden)] * args.layers), args.classes,
           args.batch_size, args.optimizer, args.short + 1, args.long))
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="cairn-bench-mlp-gpu-"))
    builtin, torch_runs, rows = [], [], None
    try:
        for rep in range(args.reps):  # alternating, so drift hits both sides alike
            builtin.append(builtin_epoch_seconds(args, scratch, rep))
            epoch_s, train_s, rows = torch_epoch_seconds(args)
            torch_runs.append((epoch_s, train_s))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    b = statistics.median(builtin)
    t = statistics.median(r[0] for r in torch_runs)
    t_train = statistics.median(r[1] for r in torch_runs)
    print("\n%d training rows, %d repetitions (median seconds per epoch):" % (rows, args.reps))
    print("  %-36s %8.4f s  %12.0f samples/s" % ("builtin:mlp on GPU (train + val)", b, rows / b))
    print("  %-36s %8.4f s  %12.0f samples/s  (train only: %.0f samples/s)" %
          ("PyTorch on GPU (train + val)", t, rows / t, rows / t_train))
    print("  ratio builtin / PyTorch: %.2fx" % (t / b))
    print("  builtin per-rep seconds per epoch: %s" % ", ".join("%.4f" % s for s in builtin))
    print("  PyTorch per-rep seconds per epoch: %s" % ", ".join("%.4f" % r[0] for r in torch_runs))


if __name__ == "__main__":
    sys.exit(main())
