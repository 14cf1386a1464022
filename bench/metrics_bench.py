#!/usr/bin/python3
"""Benchmark: the cost of reporting training metrics through cairn.

A trial reports POINTS training metric points (one metric per step) and times its own
reporting loop (bench/metrics_trial.cc with the C++ SDK, bench/metrics_trial.py with the
Python SDK). Each repetition runs it three times, back to back:

  baseline  standalone, writing the same points as JSON lines to a local file;
  cairn     under `cairn run` (the real coordinator and store), through the SDK;
  sdk-only  through the SDK to bench/null_control.py, which answers the protocol and
            throws the training reports away unread: the SDK's own cost (diagnostic).

Prints the median times and the ratios to the baseline, for the loop alone and up to the
moment every point is delivered (file closed; the ack of the validation sent after the
last training batch, which cairn sends once everything before it is stored). The goal
is on the cairn / baseline ratio of the latter (total_s).

    /usr/bin/python3 bench/metrics_bench.py [--cairn BIN] [--points N] [--reps R]
                                            [--sdk cpp|python|both] [--keep]
                                            [--cpp-include DIR]
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import sys
import tempfile

from bench_common import SOURCE, default_cairn, machine_summary, run_checked
from null_control import NullControl

GOALS = {"cpp": 1.5, "python": 2.0}  # SPEC's goals for the ratio of total_s


def build_cpp_trial(scratch, include):
    binary = scratch / "metrics_trial"
    run_checked(["g++", "-O2", "-std=c++20", "-I%s" % include,
                 str(SOURCE / "bench" / "metrics_trial.cc"), "-o", str(binary), "-pthread"])
    return [str(binary)]


def trial_command(sdk, scratch, cpp_include):
    if sdk == "cpp":
        return build_cpp_trial(scratch, cpp_include)
    return ["/usr/bin/python3", str(SOURCE / "bench" / "metrics_trial.py")]


def run_baseline(command, workdir, points):
    result = workdir / "baseline.json"
    run_checked(command + ["jsonl", str(result), str(points)], cwd=workdir)
    return json.loads(result.read_text())


def run_under_cairn(cairn, command, workdir, points):
    """One `cairn run` of the trial, in a directory of its own with a fresh store."""
    code = workdir / "code"
    code.mkdir()
    result = workdir / "cairn.json"
    config = {
        "name": "metrics-bench",
        "entrypoint": command + ["cairn", str(result), str(points)],
        "searcher": {"name": "single", "metric": "val_loss", "max_length": points},
        "checkpoint": {"period": points},
    }
    (code / "exp.yaml").write_text(json.dumps(config))  # JSON is YAML
    run_checked([cairn, "run", "exp.yaml"], cwd=code)
    return json.loads(result.read_text())


def run_sdk_only(command, workdir, points):
    result = workdir / "sdk-only.json"
    with NullControl(str(workdir), points) as sink:
        env = {"CAIRN_CONTROL": sink.address, "CAIRN_TRIAL_ID": "1.1",
               "CAIRN_EXPERIMENT_ID": "1", "CAIRN_SEED": "1", "CAIRN_MAX_LENGTH": str(points),
               "PYTHONPATH": str(SOURCE / "sdk" / "python")}
        run_checked(command + ["cairn", str(result), str(points)], cwd=workdir, env=env)
    return json.loads(result.read_text())


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


def report(sdk, runs):
    baseline, cairn_runs = runs["baseline"], runs["cairn"]
    print("\n%s SDK, %d points, %d repetitions (median seconds; ratio to baseline):" %
          ("C++" if sdk == "cpp" else "Python", baseline[0]["points"], len(baseline)))
    keys = ("loop_s", "total_s", "cpu_s")
    print("  %-9s" % "" + "".join("%9s %7s" % (key, "ratio") for key in keys))
    for name, measured in runs.items():
        print("  %-9s" % name + "".join(
            "%9.3f %6.2fx" % (median_of(measured, key),
                              median_of(measured, key) / median_of(baseline, key))
            for key in keys))
    ratios = {key: median_of(cairn_runs, key) / median_of(baseline, key) for key in keys}
    goal = GOALS[sdk]
    verdict = "meets" if ratios["total_s"] <= goal else "MISSES"
    print("  goal: total_s ratio <= %.1fx: %s (%.2fx)" % (goal, verdict, ratios["total_s"]))
    per_point_us = 1e6 * (median_of(cairn_runs, "total_s") - median_of(baseline, "total_s")) / \
        baseline[0]["points"]
    print("  extra wall time per point through cairn: %.2f us" % per_point_us)
    return ratios


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cairn", default=default_cairn())
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--sdk", choices=["cpp", "python", "both"], default="both")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--cpp-include", default=str(SOURCE / "sdk" / "cpp"),
                        help="the C++ SDK to compile the trial against (default: sdk/cpp)")
    args = parser.parse_args()

    scratch = pathlib.Path(tempfile.mkdtemp(prefix="cairn-bench-metrics-"))
    print(machine_summary(args.cairn))
    print("scratch: %s" % scratch)
    try:
        for sdk in (["cpp", "python"] if args.sdk == "both" else [args.sdk]):
            command = trial_command(sdk, scratch, args.cpp_include)
            runs = {"baseline": [], "cairn": [], "sdk-only": []}
            for rep in range(args.reps):
                workdir = scratch / ("%s-%d" % (sdk, rep))
                workdir.mkdir()
                runs["baseline"].append(run_baseline(command, workdir, args.points))
                runs["cairn"].append(run_under_cairn(args.cairn, command, workdir, args.points))
                runs["sdk-only"].append(run_sdk_only(command, workdir, args.points))
                # The JSON lines and the store are large; only the timings are needed.
                (workdir / "baseline.json.jsonl").unlink()
                if not args.keep:
                    shutil.rmtree(workdir / "code")
            report(sdk, runs)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    print("\nload average after: %s" % os.getloadavg()[0])


if __name__ == "__main__":
    sys.exit(main())
