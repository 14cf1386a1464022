#!/usr/bin/python3
"""Benchmark: does the coordinator's cost per trial stay flat as a search grows?

`cairn run` of a `random` search of N trials (max_length 1, --slots 2) with the trivial C++
trial (bench/trivial_trial.cc, about a millisecond per process), for N = 500, 5,000 and
50,000 by default. Measured: the CPU time of the `cairn run` process itself, without its
children (utime + stime from /proc, sampled until it exits, as bench/runner_bench.py does),
per trial; and wall time per trial. A coordinator whose every event walks every trial costs
O(N) per trial, so its CPU per trial grows with N; the goal (issue 16) is CPU per trial at
50,000 within 1.2x of that at 500.

    /usr/bin/python3 bench/coordinator_scaling.py [--cairn BIN] [--baseline BIN]
        [--trials 500,5000,50000] [--reps 1]

--baseline BIN runs another build (the previous commit's) alongside, interleaved, so both
are measured under the same load.

--sampler tpe samples with TPE (`sampler: tpe`, one trial at a time so that every sample is
a function of the seed alone): the coordinator then fits TPE for every trial past the
startup ones, and the cost per trial shows how that fit grows with the observations. With
--baseline, the two builds' trials must have the same hyperparameters, bit for bit, or the
bench fails: a faster fit must not change a decision.
"""
import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

import runner_bench
from bench_common import SOURCE, default_cairn, machine_summary


# --space wide: what the trial ignores, for TPE to fit (the trial reads x only).
WIDE = {"n": {"type": "int", "minval": 1, "maxval": 100},
        "lr": {"type": "log", "minval": -5, "maxval": -1},
        "opt": {"type": "categorical", "vals": ["sgd", "adam", "rmsprop", "adagrad"]},
        "depth": {"type": "int", "minval": 1, "maxval": 8}}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cairn", default=default_cairn())
    p.add_argument("--baseline", help="another cairn build, run alongside")
    p.add_argument("--trials", default="500,5000,50000")
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--keep", action="store_true")
    p.add_argument("--sampler", choices=("random", "tpe"), default="random")
    p.add_argument("--space", choices=("one", "wide"), default="one",
                   help="one double (x), or wide: x and four more of every type (two ints, "
                        "a log, a categorical), for TPE's fit")
    return p.parse_args()


def main():
    args = parse_args()
    sizes = [int(n) for n in args.trials.split(",")]
    builds = [("cairn", args.cairn)] + ([("base", args.baseline)] if args.baseline else [])
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="cairn-bench-scaling-"))
    print(machine_summary(args.cairn))
    binary = scratch / "trivial_trial"
    subprocess.run(["g++", "-O2", "-std=c++20", "-I" + str(SOURCE / "sdk" / "cpp"),
                    str(SOURCE / "bench" / "trivial_trial.cc"), "-o", str(binary), "-pthread"],
                   check=True)
    runner_bench.TRIAL = [str(binary)]
    results = {}
    try:
        for rep in range(args.reps):
            for n in sizes:
                order = builds if rep % 2 == 0 else builds[::-1]
                for name, cairn in order:
                    workdir = scratch / ("%s-%d-%d" % (name, n, rep))
                    workdir.mkdir()
                    extra = ({"sampler": "tpe", "max_concurrent_trials": 1}
                             if args.sampler == "tpe" else None)
                    r = runner_bench.run_cairn(cairn, workdir, n, searcher_extra=extra,
                                               hparams_extra=WIDE if args.space == "wide"
                                               else None)
                    results.setdefault((name, n), []).append(r)
                    if args.sampler == "tpe" and len(builds) > 1:
                        others = [x["hparams"] for (b, m), rs in results.items() if m == n
                                  for x in rs]
                        if any(h != others[0] for h in others):
                            sys.exit("bench: the builds sampled different hyperparameters "
                                     "at N=%d" % n)
                    print("rep %d %-5s N=%-6d %7.2f s wall, cairn's own CPU %6.2f s "
                          "(%.3f ms per trial), load %.2f" % (
                              rep + 1, name, n, r["wall"], r["driver_cpu"],
                              1000 * r["driver_cpu"] / n, os.getloadavg()[0]), flush=True)
                    if not args.keep:
                        shutil.rmtree(workdir, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    if args.sampler == "tpe" and len(builds) > 1:
        print("\nidentical decisions: every N, both builds sampled the same hyperparameters")
    print("\nmedians over %d repetition(s):" % args.reps)
    print("| build | trials | cairn's own CPU per trial | vs %d | wall per trial |" % sizes[0])
    print("| --- | --- | --- | --- | --- |")
    for name, _ in builds:
        first = None
        for n in sizes:
            runs = results[(name, n)]
            cpu = statistics.median(r["driver_cpu"] for r in runs) / n
            wall = statistics.median(r["wall"] for r in runs) / n
            first = first or cpu
            print("| %s | %d | %.3f ms | %.2fx | %.3f ms |" % (name, n, 1000 * cpu, cpu / first,
                                                              1000 * wall))


if __name__ == "__main__":
    sys.exit(main())
