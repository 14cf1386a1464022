#!/usr/bin/python3
"""Benchmark: builtin:mlp training throughput against PyTorch on the CPU.

The same MLP (FEATURES → HIDDEN × LAYERS with ReLU → CLASSES, float32), the same batch
size, optimizer (SGD with momentum), number of rows and thread count. Every epoch, both
shuffle, train on the training rows in mini-batches and then evaluate the validation
rows (builtin:mlp validates after every epoch, so the PyTorch script does too).

- builtin:mlp runs as a real trial, `cairn run` on a config with `entrypoint:
  builtin:mlp` and `threads: N`. Its time per epoch is the difference between the wall
  times of a run of E2 epochs and a run of E1 epochs, divided by E2 − E1, which leaves
  out start-up, data generation and the final checkpoint.
- PyTorch runs bench/mlp_torch.py for E2 epochs and times its epochs itself; the time
  per epoch is the mean of epochs E1+1 … E2, the same epochs as above. On Debian torch's
  matrix products are OpenBLAS calls, so N threads means OPENBLAS_NUM_THREADS=N; torch's
  own (OpenMP) intra-op threads stay at 1, because torch.set_num_threads(N > 1) made
  every epoch 30 times slower on the 2-core VM (see bench/RESULTS.md).
  --torch-intra-op also runs that variant; the fastest variant is the baseline.

samples/s = training rows / seconds per epoch; the ratio is builtin / PyTorch (goal ≥ 1).

    /usr/bin/python3 bench/mlp_bench.py [--cairn BIN] [--threads 1,2] [--reps 3]
        [--features 32] [--hidden 256] [--layers 2] [--batch-size 128] [--samples 50000]
        [--torch-intra-op]
"""
import argparse
import json
import pathlib
import shutil
import statistics
import sys
import tempfile
import time

from bench_common import SOURCE, default_cairn, machine_summary, run_checked

VAL_FRACTION = 0.2


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cairn", default=default_cairn())
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--samples", type=int, default=50000)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--torch-intra-op", action="store_true",
                   help="at N > 1 threads, also run PyTorch with torch.set_num_threads(N)")
    p.add_argument("--short", type=int, default=2, help="E1: epochs of the short run")
    p.add_argument("--long", type=int, default=12, help="E2: epochs of the long run")
    return p.parse_args()


def builtin_config(args, threads, epochs):
    return {
        "name": "mlp-bench",
        "entrypoint": "builtin:mlp",
        "hyperparameters": {
            "device": "cpu", "dataset": "teacher", "features": args.features,
            "classes": args.classes, "samples": args.samples, "val_fraction": VAL_FRACTION, "hidden": args.hidden,
            "layers": args.layers, "batch_size": args.batch_size, "optimizer": "sgd",
            "lr": args.lr, "momentum": 0.9, "threads": threads,
        },
        "searcher": {"name": "single", "metric": "val_loss", "max_length": epochs},
        "checkpoint": {"period": epochs},
        "reproducibility": {"seed": 1, "deterministic": False},
    }


def time_builtin(args, threads, epochs, workdir):
    """Wall seconds of one `cairn run` of builtin:mlp for `epochs`, with a fresh store."""
    workdir.mkdir()
    (workdir / "exp.yaml").write_text(json.dumps(builtin_config(args, threads, epochs)))
    start = time.perf_counter()
    run_checked([args.cairn, "run", "exp.yaml"], cwd=workdir)
    elapsed = time.perf_counter() - start
    show = json.loads(run_checked([args.cairn, "show", "1", "--json"], cwd=workdir).stdout)
    trial = show["trials"][0]
    if show["state"] != "COMPLETED" or trial["steps_completed"] != epochs:
        sys.exit("bench: builtin:mlp did not complete %d epochs: %s" % (epochs, show))
    return elapsed


def builtin_epoch_seconds(args, threads, scratch, rep):
    short = time_builtin(args, threads, args.short, scratch / ("builtin-%d-%d-short" % (threads, rep)))
    long = time_builtin(args, threads, args.long, scratch / ("builtin-%d-%d-long" % (threads, rep)))
    return (long - short) / (args.long - args.short)


def torch_epoch_seconds(args, threads, blas_threads):
    proc = run_checked(["/usr/bin/python3", str(SOURCE / "bench" / "mlp_torch.py"),
                        "--features", str(args.features), "--classes", str(args.classes),
                        "--samples", str(args.samples), "--val-fraction", str(VAL_FRACTION),
                        "--hidden", str(args.hidden), "--layers", str(args.layers),
                        "--batch-size", str(args.batch_size), "--lr", str(args.lr),
                        "--epochs", str(args.long), "--threads", str(threads),
                        "--blas-threads", str(blas_threads)])
    result = json.loads(proc.stdout)
    measured = slice(args.short, args.long)
    return (statistics.mean(result["epoch_s"][measured]),
            statistics.mean(result["train_s"][measured]), result["train_rows"])


def measure(args, threads, scratch):
    builtin, torch_variants = [], {}
    variants = [(1, threads)] + ([(threads, threads)] if threads > 1 and args.torch_intra_op else [])
    rows = None
    for rep in range(args.reps):
        builtin.append(builtin_epoch_seconds(args, threads, scratch, rep))
        for intra, blas in variants:
            epoch_s, train_s, rows = torch_epoch_seconds(args, intra, blas)
            torch_variants.setdefault((intra, blas), []).append((epoch_s, train_s))
    return builtin, torch_variants, rows


def report(args, threads, builtin, torch_variants, rows):
    print("\n%d thread%s, %d training rows, %d repetitions (median seconds per epoch):" %
          (threads, "" if threads == 1 else "s", rows, args.reps))
    b = statistics.median(builtin)
    print("  %-40s %8.4f s  %10.0f samples/s" % ("builtin:mlp (train + validation)", b, rows / b))
    best = None
    for (intra, blas), runs in torch_variants.items():
        epoch_s = statistics.median(r[0] for r in runs)
        train_s = statistics.median(r[1] for r in runs)
        name = "PyTorch, intra-op %d, BLAS %d" % (intra, blas)
        print("  %-40s %8.4f s  %10.0f samples/s  (train only: %.0f samples/s)" %
              (name + " (train + validation)", epoch_s, rows / epoch_s, rows / train_s))
        if best is None or epoch_s < best[1]:
            best = (name, epoch_s)
    ratio = best[1] / b
    print("  ratio builtin / PyTorch (best: %s): %.2fx  goal >= 1.0: %s" %
          (best[0], ratio, "meets" if ratio >= 1.0 else "MISSES"))
    print("  builtin per-rep seconds per epoch: %s" % ", ".join("%.4f" % s for s in builtin))


def main():
    args = parse_args()
    print(machine_summary(args.cairn))
    print("model %d -> %s -> %d, batch %d, sgd momentum 0.9, epochs %d..%d measured" %
          (args.features, " -> ".join([str(args.hidden)] * args.layers), args.classes,
           args.batch_size, args.short + 1, args.long))
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="cairn-bench-mlp-"))
    try:
        for threads in (int(t) for t in args.threads.split(",")):
            report(args, threads, *measure(args, threads, scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
