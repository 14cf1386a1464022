#!/usr/bin/python3
"""CPU all-reduce bus bandwidth: cairn's Gloo path vs Open MPI's MPI_Allreduce.

Runs, for each size in turn and in rotating order, --rounds times, on this machine:
  gloo     build/bench_allreduce_bench (collective/gloo_collective.h, TCP over 127.0.0.1)
  mpi-tcp  bench/allreduce_mpi.c under mpirun --mca pml ob1 --mca btl tcp,self
  mpi-shm  the same with --mca btl self,vader (shared memory: the single-machine ceiling)
and prints the median busbw per size (busbw = algbw * 2(n-1)/n, nccl-tests' definition)
with the ratios gloo / mpi-tcp and gloo / mpi-shm. See bench/README.md.
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_common  # noqa: E402

SOURCE = bench_common.SOURCE


def run_json(command, timeout):
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        sys.exit("bench: %s exited %d\nstdout:\n%s\nstderr:\n%s" %
                 (" ".join(command), proc.returncode, proc.stdout, proc.stderr))
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", default=str(SOURCE / "build" / "bench_allreduce_bench"),
                        help="the Gloo benchmark binary (cmake --build build --target "
                             "bench_allreduce_bench)")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="4K,16K,64K,256K,1M,4M,16M,64M,256M")
    parser.add_argument("--reps", type=int, default=5, help="repetitions per size and run")
    parser.add_argument("--rep-seconds", type=float, default=0.2)
    parser.add_argument("--gloo", action="append", metavar="NAME:ARGS",
                        help="a Gloo variant to run: a name and extra arguments for the Gloo "
                             "binary, e.g. 'gloo-spin:--busy-poll' (repeatable; default "
                             "'gloo:', the library's defaults)")
    parser.add_argument("--mpi-bind", default="none",
                        help="mpirun --bind-to (none: unpinned, like the Gloo processes)")
    parser.add_argument("--only", default="",
                        help="comma-separated subset of the runs (default: all)")
    args = parser.parse_args()

    if not pathlib.Path(args.bench).exists():
        sys.exit("bench: %s not found; build it with "
                 "cmake --build build --target bench_allreduce_bench" % args.bench)
    mpicc, mpirun = shutil.which("mpicc"), shutil.which("mpirun")
    if not mpicc or not mpirun:
        sys.exit("bench: Open MPI not found: apt-get install -y --no-install-recommends "
                 "openmpi-bin libopenmpi-dev")
    mpi_bin = "/tmp/cairn-allreduce-mpi-%d" % os.getpid()
    bench_common.run_checked([mpicc, "-O2", "-o", mpi_bin, str(SOURCE / "bench" / "allreduce_mpi.c")])

    common = ["--reps", str(args.reps), "--rep-seconds", str(args.rep_seconds), "--json"]
    # Open MPI's TCP BTL leaves out the loopback interface by default; naming it keeps both
    # contenders on 127.0.0.1. pml ob1 keeps UCX (which would use shared memory) out.
    mpirun_base = [mpirun, "--allow-run-as-root", "-np", str(args.ranks),
                   "--bind-to", args.mpi_bind, "--mca", "pml", "ob1"]
    commands = {}
    for variant in args.gloo or ["gloo:"]:
        name, _, extra = variant.partition(":")
        commands[name] = [args.bench, "--ranks", str(args.ranks)] + extra.split() + common
    gloos = list(commands)
    commands.update({
        "mpi-tcp": mpirun_base + ["--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include",
                                  "lo", mpi_bin, "--label", "mpi-tcp"] + common,
        "mpi-shm": mpirun_base + ["--mca", "btl", "self,vader", mpi_bin, "--label",
                                  "mpi-shm"] + common,
    })
    impls = [n for n in commands if not args.only or n in args.only.split(",")]

    print("date and load:", subprocess.run(["date", "-Iseconds"], capture_output=True,
                                           text=True).stdout.strip(),
          "load average %.2f %.2f %.2f" % os.getloadavg())
    print("machine: %d cores, %s" % (os.cpu_count(), bench_common.cpu_model()))
    for name in impls:
        print("%-8s %s" % (name, " ".join(commands[name])))
    sys.stdout.flush()

    # Each size is run by every contender back to back (in an order that rotates), so that
    # the machine's load, which drifts, weighs on all of them alike.
    busbw = {name: {} for name in impls}  # name -> bytes -> [busbw per round]
    loads = []
    for rnd in range(args.rounds):
        for i, size in enumerate(args.sizes.split(",")):
            shift = (rnd + i) % len(impls)
            for name in impls[shift:] + impls[:shift]:
                loads.append(os.getloadavg()[0])
                for row in run_json(commands[name] + ["--sizes", size], timeout=3600):
                    busbw[name].setdefault(row["bytes"], []).append(row["busbw_gbs"])
        print("round %d done (load %.2f)" % (rnd + 1, os.getloadavg()[0]), file=sys.stderr)

    sizes = sorted(next(iter(busbw.values())).keys())
    ratios = [(g, m) for g in gloos if g in impls for m in ("mpi-tcp", "mpi-shm") if m in impls]
    header = ["bytes"] + ["%s GB/s" % n for n in impls] + ["%s/%s" % r for r in ratios]
    print("\nmedian busbw over %d rounds; load average during runs: min %.2f, median %.2f, "
          "max %.2f" % (args.rounds, min(loads), statistics.median(loads), max(loads)))
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for size in sizes:
        med = {n: statistics.median(busbw[n][size]) for n in impls}
        cells = [human(size)] + ["%.3f" % med[n] for n in impls]
        cells += ["%.2f" % (med[g] / med[m]) for g, m in ratios]
        print("| " + " | ".join(cells) + " |")
    os.unlink(mpi_bin)


def human(n):
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return "%d %s" % (n // scale, unit)
    return "%d B" % n


if __name__ == "__main__":
    main()
