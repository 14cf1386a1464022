#!/usr/bin/python3
"""Benchmark: cairn's overhead per trial when it runs many trivial trials.

bench/trivial_trial.py (Python SDK) reports one validation and exits. The same N trial
commands (`/usr/bin/python3 bench/trivial_trial.py`) run on 2 workers (the local slots)
four ways, one after the other in each repetition:

  xargs   `seq N | xargs -P 2 -n 1 python3 trivial_trial.py` standalone (the SDK with
          no cairn): the ideal makespan of the trial processes alone, launched from C.
  pool    a Python process running them with a 2-thread pool, subprocess.run each, a
          hyperparameter in CAIRN_HPARAMS and the validation parsed from stderr.
  cairn   `cairn run` of a `random` searcher, max_trials N, max_length 1, --slots 2,
          with a fresh store.
  optuna  Optuna (Debian's python3-optuna) with a JournalStorage file and a
          RandomSampler, study.optimize(n_trials=N, n_jobs=2), its objective running the
          trial through subprocess.run like `pool`.

--trial cpp swaps the Python trial for bench/trivial_trial.cc (the C++ SDK; compiled with
g++ into the scratch directory), whose process costs ~1 ms instead of ~100 ms: the drivers'
overheads are then not buried in the noise of the trials' own start-up.

The makespan of each is the wall time of the process that drives it (Optuna: also the
time inside study.optimize() alone, without Python's and Optuna's start-up). Overhead per
trial = (makespan - ideal makespan) / N, the ideal of a repetition being the faster of
xargs and pool; "paired" takes that difference within each repetition before the median
(steadier when the machine's load drifts). CPU: user + system time of the driver and
every trial (getrusage(RUSAGE_CHILDREN)); of the driving process alone (/proc); and of the
trial processes (the difference), each per trial.
Goal: cairn <= 5 ms per trial, and ahead of Optuna.

    /usr/bin/python3 bench/runner_bench.py [--cairn BIN] [--baseline BIN] [--trials N]
                                           [--reps R] [--only xargs,pool,cairn,optuna] [--keep]
                                           [--trial python|cpp] [--agent] [--agents N]

--agent adds a driver "cairn-agent": the same `cairn run` with --peers naming one `cairn agent`
on loopback (started once, with its own key and --slots 2), so every trial runs as a remote
rank, its control channel relayed through the agent's connection (docs/peers.md); its
overhead over "cairn" is what running on a peer costs per trial. --agents 2 (the issue's
setting) starts two such agents sharing one key, each with half the slots, and names both.

--baseline BIN adds a driver "cairn-base": the same `cairn run` with another build (say,
the previous commit's), interleaved with the others in every repetition, so a change is
measured against its baseline under the same load. With --agent too, "cairn-base-agent" is
the baseline's `cairn run` on the baseline's own loopback agents.
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from bench_common import SOURCE, default_cairn, machine_summary

# The trial command; --trial cpp replaces it (through the environment, so that the driver
# processes this script starts for pool and optuna see it too).
TRIAL = json.loads(os.environ.get("RUNNER_BENCH_TRIAL", "null")) or [
    "/usr/bin/python3", str(SOURCE / "bench" / "trivial_trial.py")]
WORKERS = 2
GOAL_MS = 5.0
VALIDATION = re.compile(r"validation: val_loss=(\S+)")


def standalone_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env["PYTHONPATH"] = str(SOURCE / "sdk" / "python")
    env.update(extra or {})
    return env


def run_standalone_trial(x):
    """One trial command, as a driver without cairn runs it: returns its val_loss."""
    proc = subprocess.run(TRIAL, env=standalone_env({"CAIRN_HPARAMS": json.dumps({"x": x})}),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    match = VALIDATION.search(proc.stderr)
    if proc.returncode != 0 or not match:
        raise RuntimeError("trial failed (%d): %s" % (proc.returncode, proc.stderr[-500:]))
    return float(match.group(1))


# -- the drivers, each run as a child process of the benchmark -----------------------------


def drive_pool(trials):
    rng = random.Random(1)
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        losses = list(pool.map(run_standalone_trial, [rng.random() for _ in range(trials)]))
    print(json.dumps({"inner_s": time.perf_counter() - start, "trials": len(losses)}))


def drive_optuna(trials, journal):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    start = time.perf_counter()
    storage = optuna.storages.JournalStorage(optuna.storages.JournalFileStorage(journal))
    study = optuna.create_study(study_name="runner-bench", storage=storage,
                                sampler=optuna.samplers.RandomSampler(seed=1))
    study.optimize(lambda trial: run_standalone_trial(trial.suggest_float("x", 0.0, 1.0)),
                   n_trials=trials, n_jobs=WORKERS)
    inner = time.perf_counter() - start
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    print(json.dumps({"inner_s": inner, "trials": len(complete)}))


# -- the benchmark ----------------------------------------------------------------------------


def self_cpu(pid):
    """CPU seconds the process itself has used (not its children), from /proc."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(command, cwd, stdout=subprocess.PIPE, env=None):
    """Runs command; returns (wall seconds, CPU seconds of it and its descendants, CPU
    seconds of the driving process alone, stdout). The driver's own CPU is sampled from
    /proc every 20 ms until it exits, so its last 20 ms may be missed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=cwd, stdout=stdout, stderr=subprocess.PIPE,
                            text=True, env=env)
    driver_cpu = 0.0
    # Read stderr (small) in a thread so the driver never blocks on a full pipe.
    chunks = {}
    reader = threading.Thread(target=lambda: chunks.update(
        out=proc.stdout.read() if proc.stdout else None, err=proc.stderr.read()))
    reader.start()
    while proc.poll() is None:
        sample = self_cpu(proc.pid)
        if sample is not None:
            driver_cpu = sample
        time.sleep(0.02)
    wall = time.perf_counter() - start
    reader.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit("bench: %s exited %d\n%s" % (" ".join(map(str, command)), proc.returncode,
                                              (chunks.get("err") or "")[-3000:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, driver_cpu, chunks.get("out")


def run_xargs(workdir, trials):
    with open(workdir / "numbers", "w") as f:
        f.write("".join("%d\n" % i for i in range(trials)))
    # The number is one more argument, which the trial ignores: one process per line.
    wall, cpu, driver, _ = timed(["xargs", "-P", str(WORKERS), "-n", "1", "-a", "numbers"] +
                                 TRIAL, workdir, stdout=subprocess.DEVNULL,
                                 env=standalone_env({"CAIRN_HPARAMS": '{"x": 0.5}'}))
    return {"wall": wall, "cpu": cpu, "driver_cpu": driver}


def run_pool(workdir, trials):
    wall, cpu, driver, out = timed([sys.executable, __file__, "--drive", "pool", "--trials",
                                    str(trials)], workdir)
    result = json.loads(out.strip().splitlines()[-1])
    check_count("pool", result["trials"], trials)
    return {"wall": wall, "cpu": cpu, "driver_cpu": driver, "inner": result["inner_s"]}


def run_optuna(workdir, trials):
    journal = workdir / "optuna-journal.log"
    wall, cpu, driver, out = timed([sys.executable, __file__, "--drive", "optuna", "--trials",
                                    str(trials), "--journal", str(journal)], workdir)
    result = json.loads(out.strip().splitlines()[-1])
    check_count("optuna", result["trials"], trials)
    return {"wall": wall, "cpu": cpu, "driver_cpu": driver, "inner": result["inner_s"]}


class LoopbackAgent:
    """`cairn agent` on 127.0.0.1 with a key of its own, for the cairn-agent driver."""

    def __init__(self, cairn, scratch, index=0, slots=WORKERS):
        self.key = scratch / "cluster.key"
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
        if not self.key.exists():
            subprocess.run([cairn, "agent", "--new-key", str(self.key)], check=True,
                           capture_output=True, env=env)
        self.process = subprocess.Popen(
            [cairn, "agent", "--dir", str(scratch / ("agent-%d" % index)), "--key-file",
             str(self.key), "--listen", "127.0.0.1:0", "--slots", str(slots), "--no-announce"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, env=env)
        line = self.process.stderr.readline()
        match = re.search(r"listening on \S*:(\d+) ", line)
        if not match:
            sys.exit("bench: the agent did not start: " + line)
        self.address = "127.0.0.1:" + match.group(1)
        # Its log (a few lines per trial) is drained so it never blocks on a full pipe.
        threading.Thread(target=lambda: self.process.stderr.read(), daemon=True).start()

    def close(self):
        self.process.terminate()
        self.process.wait(timeout=30)


def run_cairn(cairn, workdir, trials, agents=None, searcher_extra=None, hparams_extra=None):
    config = {
        "name": "runner-bench",
        "entrypoint": TRIAL,
        "hyperparameters": {"x": {"type": "double", "minval": 0.0, "maxval": 1.0},
                            **(hparams_extra or {})},
        "searcher": {"name": "random", "metric": "val_loss", "max_trials": trials,
                     "max_length": 1, **(searcher_extra or {})},
        "reproducibility": {"seed": 1},
    }
    (workdir / "exp.yaml").write_text(json.dumps(config))  # JSON is YAML
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    subprocess.run([cairn, "init", str(workdir)], check=True, capture_output=True, env=env)
    with open(workdir / "cairn.out", "w") as out:
        # With an agent, --slots 0: every trial on the agent (its --slots is WORKERS).
        where = (["--slots", "0", "--peers", ",".join(a.address for a in agents),
                  "--key-file", str(agents[0].key)] if agents else ["--slots", str(WORKERS)])
        wall, cpu, driver, _ = timed([cairn, "--store", str(workdir), "run", "exp.yaml"] + where,
                                     workdir, stdout=out, env=env)
    shown = subprocess.run([cairn, "--store", str(workdir), "show", "1", "--json"],
                           capture_output=True, text=True, check=True, env=env)
    states = [t.get("state") for t in json.loads(shown.stdout).get("trials", [])]
    check_count("cairn", states.count("COMPLETED"), trials)
    hparams = [json.dumps(t.get("hparams"), sort_keys=True)
               for t in json.loads(shown.stdout).get("trials", [])]
    return {"wall": wall, "cpu": cpu, "driver_cpu": driver, "hparams": hparams}


def check_count(name, done, trials):
    if done != trials:
        sys.exit("bench: %s completed %d of %d trials" % (name, done, trials))


def report(trials, results):
    """Prints, per way of running: the median makespan, its overhead per trial against the
    ideal, the same paired within each repetition (steadier when the load drifts), the CPU
    of everything beyond xargs' and of the driving process alone, per trial."""
    med = statistics.median
    # The ideal of a repetition: the faster of the two launchers without cairn.
    ideals = [min(x["wall"], p["wall"]) if p else x["wall"] for x, p in
              zip(results["xargs"], results.get("pool") or [None] * len(results["xargs"]))]
    ideal = med(ideals)
    ideal_cpu = med(r["cpu"] for r in results["xargs"])
    reps = len(results["xargs"])
    print("\n%d trials, %d workers, %d repetitions; medians. overhead = (makespan - ideal) / "
          "trials;\n  ideal = the faster of xargs and pool in each repetition; paired = "
          "makespan - ideal within each repetition; cpu_extra = CPU beyond xargs'" %
          (trials, WORKERS, reps))
    print("  %-12s %10s %7s %12s %10s %7s %13s %14s %14s" % (
        "", "makespan_s", "ratio", "overhead_ms", "paired_ms", "cpu_s", "cpu_extra_ms",
        "driver_cpu_ms", "trial_cpu_ms"))
    overhead, paired = {}, {}
    rows = list(results.items())
    if results.get("optuna"):
        rows.append(("optuna inner", [dict(r, wall=r["inner"]) for r in results["optuna"]]))
    for name, runs in rows:
        if not runs:
            continue
        wall = med(r["wall"] for r in runs)
        overhead[name] = 1e3 * (wall - ideal) / trials
        paired[name] = med(1e3 * (r["wall"] - i) / trials for r, i in zip(runs, ideals))
        cpu = med(r["cpu"] for r in runs)
        driver_cpu = med(r["driver_cpu"] for r in runs)
        trial_cpu = med(r["cpu"] - r["driver_cpu"] for r in runs)
        print("  %-12s %10.2f %6.2fx %12.2f %10.2f %7.2f %13.2f %14.2f %14.2f   (all: %s)" % (
            name, wall, wall / ideal, overhead[name], paired[name], cpu,
            1e3 * (cpu - ideal_cpu) / trials, 1e3 * driver_cpu / trials,
            1e3 * trial_cpu / trials, ", ".join("%.2f" % r["wall"] for r in runs)))
    print("  the ideal: %.2f ms of wall per trial on %d workers (%.1f ms per trial process); "
          "load average now %.2f" % (1e3 * ideal / trials, WORKERS, 1e3 * ideal * WORKERS / trials,
                                     os.getloadavg()[0]))
    if "cairn" in overhead and "cairn-base" in overhead:
        print("  cairn vs cairn-base (--baseline): %.2f ms vs %.2f ms per trial (paired %.2f vs "
              "%.2f)" % (overhead["cairn"], overhead["cairn-base"], paired["cairn"],
                         paired["cairn-base"]))
    if "cairn-agent" in overhead and "cairn-base-agent" in overhead:
        print("  cairn-agent vs cairn-base-agent (--baseline --agent): %.2f ms vs %.2f ms per "
              "trial (paired %.2f vs %.2f)" % (overhead["cairn-agent"], overhead["cairn-base-agent"],
                                               paired["cairn-agent"], paired["cairn-base-agent"]))
    if "cairn" in overhead and "cairn-agent" in overhead:
        print("  cairn-agent vs cairn (--agent: every trial on a loopback agent): %.2f ms vs "
              "%.2f ms per trial (paired %.2f vs %.2f): %.2fx the local overhead (paired %.2fx)"
              % (overhead["cairn-agent"], overhead["cairn"], paired["cairn-agent"],
                 paired["cairn"], overhead["cairn-agent"] / overhead["cairn"],
                 paired["cairn-agent"] / paired["cairn"]))
    if "cairn" in overhead:
        verdict = "meets" if max(overhead["cairn"], paired["cairn"]) <= GOAL_MS else "MISSES"
        print("  goal: cairn overhead <= %.0f ms per trial: %s (%.2f ms; paired %.2f ms)" % (
            GOAL_MS, verdict, overhead["cairn"], paired["cairn"]))
        if "optuna" in overhead:
            best_optuna = min(overhead["optuna"], overhead["optuna inner"])
            print("  cairn vs optuna: %.2f ms vs %.2f ms per trial (optimize() alone: %.2f ms; "
                  "paired %.2f vs %.2f): %s" % (
                      overhead["cairn"], overhead["optuna"], overhead["optuna inner"],
                      paired["cairn"], paired["optuna"],
                      "cairn ahead" if overhead["cairn"] < best_optuna and
                      paired["cairn"] < paired["optuna inner"] else "cairn NOT ahead"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cairn", default=default_cairn())
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", default="xargs,pool,cairn,optuna")
    parser.add_argument("--baseline", help="another cairn build, run as driver cairn-base")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--trial", choices=["python", "cpp"], default="python",
                        help="the trivial trial: bench/trivial_trial.py (default) or "
                             "bench/trivial_trial.cc, compiled with g++ against the C++ SDK")
    parser.add_argument("--agent", action="store_true",
                        help="add the driver cairn-agent: cairn run --peers a loopback agent")
    parser.add_argument("--agents", type=int, default=1,
                        help="with --agent: how many loopback agents (slots split among them)")
    parser.add_argument("--drive", choices=["pool", "optuna"], help=argparse.SUPPRESS)
    parser.add_argument("--journal", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive == "pool":
        return drive_pool(args.trials)
    if args.drive == "optuna":
        return drive_optuna(args.trials, args.journal)

    cairn = str(pathlib.Path(args.cairn).resolve())
    names = args.only.split(",")
    if "xargs" not in names:
        names.insert(0, "xargs")  # the ideal every overhead is measured against
    if args.baseline and "cairn-base" not in names:
        names.append("cairn-base")
    if args.agent and "cairn-agent" not in names:
        names.append("cairn-agent")
    if args.agent and args.baseline and "cairn-base-agent" not in names:
        names.append("cairn-base-agent")
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="cairn-bench-runner-"))
    print(machine_summary(cairn))
    print("scratch: %s" % scratch)
    if args.trial == "cpp":
        binary = scratch / "trivial_trial"
        subprocess.run(["g++", "-O2", "-std=c++20", "-I" + str(SOURCE / "sdk" / "cpp"),
                        str(SOURCE / "bench" / "trivial_trial.cc"), "-o", str(binary), "-pthread"],
                       check=True)
        global TRIAL
        TRIAL = [str(binary)]
        os.environ["RUNNER_BENCH_TRIAL"] = json.dumps(TRIAL)
    print("trial: %s" % " ".join(TRIAL))
    results = {name: [] for name in names}
    agents = []
    if "cairn-agent" in names:
        # The same slots in all as the local driver's, split over the agents.
        for i in range(args.agents):
            agents.append(LoopbackAgent(cairn, scratch, i, max(1, WORKERS // args.agents)))
    base_agents = []
    if "cairn-base-agent" in names:
        # The baseline's own agents (its coordinator and agents both the other build).
        base = str(pathlib.Path(args.baseline).resolve())
        for i in range(args.agents):
            base_agents.append(LoopbackAgent(base, scratch, 100 + i,
                                             max(1, WORKERS // args.agents)))
    runners = {"xargs": lambda w: run_xargs(w, args.trials),
               "pool": lambda w: run_pool(w, args.trials),
               "cairn": lambda w: run_cairn(cairn, w, args.trials),
               "cairn-base": lambda w: run_cairn(str(pathlib.Path(args.baseline).resolve()), w,
                                                 args.trials),
               "cairn-agent": lambda w: run_cairn(cairn, w, args.trials, agents),
               "cairn-base-agent": lambda w: run_cairn(str(pathlib.Path(args.baseline).resolve()),
                                                       w, args.trials, base_agents),
               "optuna": lambda w: run_optuna(w, args.trials)}
    try:
        for rep in range(args.reps):
            # Rotate the order, so a slow drift of the machine's load favours no one.
            order = names[rep % len(names):] + names[:rep % len(names)]
            for name in order:
                workdir = scratch / ("%s-%d" % (name, rep))
                workdir.mkdir()
                result = runners[name](workdir)
                results[name].append(result)
                print("rep %d %-6s %.2f s wall, %.2f s CPU (load %.2f)" % (
                    rep + 1, name, result["wall"], result["cpu"], os.getloadavg()[0]),
                    flush=True)
                if not args.keep:
                    shutil.rmtree(workdir, ignore_errors=True)
        report(args.trials, results)
    finally:
        for agent in agents + base_agents:
            agent.close()
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    print("\nload average after: %.2f" % os.getloadavg()[0])


if __name__ == "__main__":
    sys.exit(main())
