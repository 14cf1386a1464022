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

OpenBLAS kernels (issue 22): builtin:mlp runs the ones cairn chooses (OPENBLAS_CORETYPE is
removed from its environment; --cairn-coretype sets it instead), and PyTorch, on the same
OpenBLAS, runs each core type of --torch-coretype (default: the one cairn chooses here,
`cairn version --json`), the fastest being its baseline: both at their best. The kernels
builtin:mlp ran are printed (`cairn show`).

--roofline adds, per thread count, builtin:mlp's achieved GFLOP/s (forward + backward
FLOPs per training row, forward FLOPs per validation row, over the seconds per epoch)
against OpenBLAS's own sgemm on the same products (build/bench_blas_roofline, the kernels
builtin:mlp ran, the same threads: the "sgemm-bound" epoch) and against the core's peak
(measured FMA throughput of the kernels' vector width, × threads).

    /usr/bin/python3 bench/mlp_bench.py [--cairn BIN] [--threads 1,2] [--reps 3]
        [--features 32] [--hidden 256] [--layers 2] [--batch-size 128] [--samples 50000]
        [--torch-intra-op] [--cairn-coretype CORE] [--torch-coretype CORE,...]
        [--roofline [--roofline-bin build/bench_blas_roofline]]
"""
import argparse
import json
import math
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
    p.add_argument("--cairn-coretype", default=None,
                   help="OPENBLAS_CORETYPE for builtin:mlp (default: unset, cairn chooses)")
    p.add_argument("--torch-coretype", default="cairn",
                   help="comma-separated OPENBLAS_CORETYPE values PyTorch runs with, the "
                        "fastest its baseline; 'cairn': the one cairn chooses here; 'unset': "
                        "OpenBLAS's own choice")
    p.add_argument("--roofline", action="store_true",
                   help="also measure sgemm on the same products and the core's peak")
    p.add_argument("--roofline-bin", default=str(SOURCE / "build" / "bench_blas_roofline"))
    return p.parse_args()


def cairn_env(args):
    """builtin:mlp's kernels: cairn's choice, or --cairn-coretype."""
    return {"OPENBLAS_CORETYPE": args.cairn_coretype or None}


def torch_coretypes(args):
    """[(label, OPENBLAS_CORETYPE or None)] PyTorch runs with."""
    out = []
    for value in args.torch_coretype.split(","):
        if value == "cairn":
            version = json.loads(run_checked([args.cairn, "version", "--json"],
                                             env={"OPENBLAS_CORETYPE": None}).stdout)
            value = version["libraries"]["openblas"]["kernels"]["cairn_choice"]
        out.append((value, None if value == "unset" else value))
    return out


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
    run_checked([args.cairn, "run", "exp.yaml"], cwd=workdir, env=cairn_env(args))
    elapsed = time.perf_counter() - start
    show = json.loads(run_checked([args.cairn, "show", "1", "--json"], cwd=workdir).stdout)
    trial = show["trials"][0]
    if show["state"] != "COMPLETED" or trial["steps_completed"] != epochs:
        sys.exit("bench: builtin:mlp did not complete %d epochs: %s" % (epochs, show))
    core = json.loads(run_checked([args.cairn, "show", "1.1", "--json"], cwd=workdir).stdout)
    BUILTIN_KERNELS.add("%s (%s)" % (core["blas_core"]["core"], core["blas_core"]["chosen_by"])
                        if "blas_core" in core else "not recorded")
    return elapsed


BUILTIN_KERNELS = set()  # what builtin:mlp's trials ran, as `cairn show` records it


def builtin_epoch_seconds(args, threads, scratch, rep):
    short = time_builtin(args, threads, args.short, scratch / ("builtin-%d-%d-short" % (threads, rep)))
    long = time_builtin(args, threads, args.long, scratch / ("builtin-%d-%d-long" % (threads, rep)))
    return (long - short) / (args.long - args.short)


def torch_epoch_seconds(args, threads, blas_threads, coretype):
    proc = run_checked(["/usr/bin/python3", str(SOURCE / "bench" / "mlp_torch.py"),
                        "--features", str(args.features), "--classes", str(args.classes),
                        "--samples", str(args.samples), "--val-fraction", str(VAL_FRACTION),
                        "--hidden", str(args.hidden), "--layers", str(args.layers),
                        "--batch-size", str(args.batch_size), "--lr", str(args.lr),
                        "--epochs", str(args.long), "--threads", str(threads),
                        "--blas-threads", str(blas_threads)],
                       env={"OPENBLAS_CORETYPE": coretype})
    result = json.loads(proc.stdout)
    measured = slice(args.short, args.long)
    return (statistics.mean(result["epoch_s"][measured]),
            statistics.mean(result["train_s"][measured]), result["train_rows"])


def measure(args, threads, scratch):
    builtin, torch_variants, roofs = [], {}, []
    variants = [(1, threads)] + ([(threads, threads)] if threads > 1 and args.torch_intra_op else [])
    rows = None
    for rep in range(args.reps):  # interleaved: builtin, sgemm, then each PyTorch variant
        builtin.append(builtin_epoch_seconds(args, threads, scratch, rep))
        if args.roofline:
            roofs.append(roofline_run(args, threads))
        for intra, blas in variants:
            for label, coretype in torch_coretypes(args):
                epoch_s, train_s, rows = torch_epoch_seconds(args, intra, blas, coretype)
                torch_variants.setdefault((intra, blas, label), []).append((epoch_s, train_s))
    return builtin, torch_variants, rows, roofs


def report(args, threads, builtin, torch_variants, rows, roofs):
    print("\n%d thread%s, %d training rows, %d repetitions (median seconds per epoch):" %
          (threads, "" if threads == 1 else "s", rows, args.reps))
    b = statistics.median(builtin)
    print("  %-40s %8.4f s  %10.0f samples/s  (OpenBLAS %s)" %
          ("builtin:mlp (train + validation)", b, rows / b, ", ".join(sorted(BUILTIN_KERNELS))))
    best = None
    for (intra, blas, coretype), runs in torch_variants.items():
        epoch_s = statistics.median(r[0] for r in runs)
        train_s = statistics.median(r[1] for r in runs)
        name = "PyTorch, intra-op %d, BLAS %d, %s" % (intra, blas, coretype)
        print("  %-40s %8.4f s  %10.0f samples/s  (train only: %.0f samples/s)" %
              (name + " (train + validation)", epoch_s, rows / epoch_s, rows / train_s))
        if best is None or epoch_s < best[1]:
            best = (name, epoch_s)
    ratio = best[1] / b
    print("  ratio builtin / PyTorch (best: %s): %.2fx  goal >= 1.0: %s" %
          (best[0], ratio, "meets" if ratio >= 1.0 else "MISSES"))
    print("  builtin per-rep seconds per epoch: %s" % ", ".join("%.4f" % s for s in builtin))
    if roofs:
        roofline(args, threads, b, rows, roofs)


def roofline_run(args, threads):
    """One run of bench_blas_roofline with the kernels builtin:mlp ran."""
    kernels = sorted(BUILTIN_KERNELS)[0].split()[0]
    r = json.loads(run_checked([args.roofline_bin, "--features", str(args.features),
                                "--hidden", str(args.hidden), "--layers", str(args.layers),
                                "--classes", str(args.classes), "--batch", str(args.batch_size),
                                "--threads", str(threads)],
                               env={"OPENBLAS_CORETYPE": kernels}).stdout)
    if r["core"].lower() != kernels.lower():
        sys.exit("bench: bench_blas_roofline ran %s kernels, builtin:mlp %s" % (r["core"], kernels))
    return r


def roofline(args, threads, epoch_s, train_rows, roofs):
    """builtin:mlp's GFLOP/s against sgemm on the same products and the core's peak, each
    the median of the repetitions (one sgemm run after each builtin:mlp run)."""
    kernels = roofs[0]["core"]
    r = dict(roofs[0])
    for key in ("train_batch_s", "eval_batch_s", "train_gflops", "eval_gflops"):
        r[key] = statistics.median(x[key] for x in roofs)
    r["peak"] = {k: statistics.median(x["peak"][k] for x in roofs) for k in roofs[0]["peak"]}
    val_rows = int(args.samples * VAL_FRACTION)
    flops = train_rows * r["train_flops_per_sample"] + val_rows * r["forward_flops_per_sample"]
    achieved = flops / epoch_s / 1e9
    # The epoch of a trainer that did nothing but the sgemm calls: every batch, partial
    # last ones at the full batch's time (a bound, slightly generous to sgemm).
    sgemm_epoch = (math.ceil(train_rows / args.batch_size) * r["train_batch_s"] +
                   math.ceil(val_rows / r["eval_batch"]) * r["eval_batch_s"])
    width = "avx512_gflops" if kernels.lower() in ("skylakex", "cooperlake") else "avx2_gflops"
    peak = r["peak"].get(width, float("nan")) * threads
    print("  roofline (%s kernels, %d thread%s): %.1f GFLOP/s achieved (%.0f FLOPs per "
          "training row); sgemm on the same products: %.1f GFLOP/s training, %.1f validation "
          "batches, an epoch of %.4f s (%.0f samples/s); builtin / sgemm-bound: %.0f%%; "
          "peak (%s FMA, measured): %.0f GFLOP/s, builtin %.0f%%, sgemm %.0f%%" %
          (kernels, threads, "" if threads == 1 else "s", achieved,
           r["train_flops_per_sample"], r["train_gflops"], r["eval_gflops"], sgemm_epoch,
           train_rows / sgemm_epoch, 100 * sgemm_epoch / epoch_s, width.split("_")[0], peak,
           100 * achieved / peak, 100 * r["train_gflops"] / peak))


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
