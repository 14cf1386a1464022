#!/usr/bin/python3
"""Where a training epoch spends its GPU time: builtin:mlp (`cairn run`, device cuda) and the
same MLP in PyTorch (bench/mlp_torch.py --device cuda), each under Nsight Compute reading one
counter (the duration of each kernel) for a window of kernels in the middle of the run.

Prints, for each side, the kernels by total time (launches, total and mean microseconds) and
the sum, so the GPU time of a training step can be set against its wall time from
bench/mlp_gpu_bench.py: a step whose wall time is much larger than its kernels' time is
waiting on launches or synchronisation, not on the GPU.

    /usr/bin/python3 bench/mlp_gpu_profile.py [--cairn BIN] [--hidden 1024] [--layers 2]
        [--batch-size 512] [--skip 800] [--count 400]

Needs ncu (Nsight Compute) on PATH; exits 77 saying so otherwise. The shape is
bench/mlp_gpu_bench.py's default.
"""
import argparse
import collections
import csv
import io
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

from bench_common import SOURCE, default_cairn


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cairn", default=default_cairn())
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--samples", type=int, default=40000)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--skip", type=int, default=800, help="kernels left out at the start")
    p.add_argument("--count", type=int, default=400, help="kernels measured after those")
    return p.parse_args()


def ncu(args, command, cwd):
    """[(kernel name, microseconds)] of the measured window."""
    proc = subprocess.run(
        ["ncu", "--csv", "--target-processes", "all", "--metrics", "gpu__time_duration.sum",
         "--clock-control", "none", "--cache-control", "none", "--launch-skip", str(args.skip),
         "--launch-count", str(args.count)] + command,
        cwd=cwd, capture_output=True, text=True, timeout=300)
    rows = [line for line in proc.stdout.splitlines() if line.startswith('"')]
    if not rows:
        sys.exit("ncu measured nothing (exit %d):\n%s\n%s" % (proc.returncode, proc.stdout[-3000:],
                                                            proc.stderr[-3000:]))
    kernels = []
    for row in csv.DictReader(io.StringIO("\n".join(rows))):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "nsecond")
        scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}.get(unit, 1e-3)
        kernels.append((row["Kernel Name"][:80], value * scale))
    return kernels


def report(title, kernels):
    by_name = collections.defaultdict(list)
    for name, us in kernels:
        by_name[name].append(us)
    total = sum(us for _, us in kernels)
    print("\n%s: %d kernels measured, %.1f us of GPU time" % (title, len(kernels), total))
    print("  %7s %10s %9s  %s" % ("launches", "total us", "mean us", "kernel"))
    for name, times in sorted(by_name.items(), key=lambda kv: -sum(kv[1])):
        print("  %7d %10.1f %9.2f  %s" % (len(times), sum(times), sum(times) / len(times), name))


def main():
    args = parse_args()
    if shutil.which("ncu") is None:
        print("profile: skipped, needs ncu (Nsight Compute) on PATH")
        return 77
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="cairn-mlp-gpu-profile-"))
    try:
        config = {
            "name": "mlp-gpu-profile", "entrypoint": "builtin:mlp",
            "hyperparameters": {
                "device": "cuda", "dataset": "teacher", "features": args.features,
                "classes": args.classes, "samples": args.samples, "val_fraction": 0.2,
                "hidden": args.hidden, "layers": args.layers, "batch_size": args.batch_size,
                "optimizer": "sgd", "lr": 0.05, "momentum": 0.9},
            "searcher": {"name": "single", "metric": "val_loss", "max_length": 3},
            "checkpoint": {"period": 3},
            "reproducibility": {"seed": 1, "deterministic": False},
        }
        (scratch / "exp.yaml").write_text(json.dumps(config))
        steps = int(args.samples * 0.8) // args.batch_size
        print("model %d -> %s -> %d, batch %d, sgd; %d training steps per epoch" %
              (args.features, " -> ".join([str(args.hidden)] * args.layers), args.classes,
               args.batch_size, steps))
        report("builtin:mlp", ncu(args, [args.cairn, "run", "exp.yaml"], scratch))
        report("PyTorch", ncu(args, ["/usr/bin/python3", str(SOURCE / "bench" / "mlp_torch.py"),
                                     "--device", "cuda", "--features", str(args.features),
                                     "--classes", str(args.classes), "--samples",
                                     str(args.samples), "--hidden", str(args.hidden),
                                     "--layers", str(args.layers), "--batch-size",
                                     str(args.batch_size), "--epochs", "3"], scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
