#!/usr/bin/python3
"""Benchmark: how long recovery takes, beyond what the trial itself needs to start.

The trial (bench/recovery_trial.py, Python SDK) takes a step every 50 ms, reports a
training metric per step, checkpoints a tiny file every 5 steps and timestamps every
event in a file. Measured:

  trial kill   `kill -9` of the trial process (its pid from `cairn show EXP.1 --json`)
               under `cairn run` -> the restarted trial's first new training step.
               Several kills per run, each after the trial registered a checkpoint, so
               every restart gets the first (1 s) back-off.
  resume       `kill -9` of the cairn process itself; wait until the orphaned trial has
               checkpointed and exited; then `cairn resume EXP` start -> the resumed
               trial's first new training step. Several per experiment, alternating
               between resuming as soon as the orphan has exited (still a zombie: its
               parent is dead and this VM's PID 1 reaps orphans only every second or so)
               and once PID 1 has reaped it; reported apart, the first also from the
               moment it was reaped.
  agent kill   (--only agent) the trial runs on one of two `cairn agent`s on loopback
               (`cairn run --slots 0 --peers A,B`); `kill -9` of that agent and of the
               trial (its machine went away) -> the trial's first new training step on
               the other agent. No back-off (a lost machine is not the trial's failure); the
               coordinator tries the broken connection again for the heartbeat timeout (a
               link that comes back loses nothing, docs/peers.md "Reattach"), set to 2 s
               here; the killed agent is started again on its port, so the next kill finds
               two agents.
  standalone   the same trial started directly (no cairn) from a checkpoint, Popen ->
               first training step: Python start-up, `import cairn`, the checkpoint
               read and one 50 ms step. The baseline both figures are net of.

net (trial kill) = raw - 1 s back-off (deliberate: engine/coordinator/coordinator_trials.cc) - standalone
net (resume)     = raw - standalone
net (agent kill) = raw - standalone, against a goal of 2 s + the heartbeat timeout
Goal: net <= 1 s each for kill and resume; <= 2 s for an agent kill (issue 17's goal). The checkpoint is ~4 KB (the trial's state and the SDK's random
generator state), so reading it (cairn copying it out of the object store with its hash
verified, the trial reading it) is in the raw figures but costs well under a millisecond.

    /usr/bin/python3 bench/recovery_bench.py [--cairn BIN] [--runs R] [--kills K]
                                             [--standalone N] [--keep]
                                             [--only kill,resume,agent]
"""
import argparse
import json
import os
import pathlib
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import SOURCE, default_cairn, machine_summary

TRIAL = SOURCE / "bench" / "recovery_trial.py"
PERIOD = 5
BACKOFF_S = 1.0  # the first restart's back-off: 1 << 0 seconds
GOAL_S = 1.0
TIMEOUT_S = 60.0


# The heartbeat timeout of the agent-kill runs: the coordinator tries a broken connection
# again until this long after it last heard the agent before it counts the agent lost.
HEARTBEAT_S = 2.0


def clean_env(extra=None):
    env = dict(os.environ)
    env.pop("CAIRN_DIR", None)
    for key in [k for k in env if k.startswith("CAIRN_")]:
        env.pop(key)
    env.update(extra or {})
    return env


def wait_for(what, predicate, timeout=TIMEOUT_S, interval=0.002):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            sys.exit("bench: timed out waiting for %s" % what)
        time.sleep(interval)


class Events:
    """The trial's event file: (time, pid, kind, step) per line."""

    def __init__(self, path):
        self.path = path

    def read(self):
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        events = []
        for line in text.splitlines():
            parts = line.split()
            if len(parts) < 3:
                continue  # a line being written
            step = int(parts[3]) if len(parts) > 3 else None
            events.append((float(parts[0]), int(parts[1]), parts[2], step))
        return events

    def first(self, pid, kind, after=0.0):
        for t, p, k, step in self.read():
            if p == pid and k == kind and t >= after:
                return t, step
        return None

    def first_other(self, kind, pids_before, after):
        """The first `kind` event of a process not in pids_before: (time, pid, step)."""
        for t, p, k, step in self.read():
            if p not in pids_before and k == kind and t >= after:
                return t, p, step
        return None

    def pids(self):
        return {p for _, p, _, _ in self.read()}

    def count(self, pid, kind):
        return sum(1 for _, p, k, _ in self.read() if p == pid and k == kind)


def phases(events, pid, origin):
    """Seconds from origin to the process's start, init, restored and first step."""
    out = {}
    for kind in ("start", "init", "restored", "step"):
        hit = events.first(pid, kind)
        out[kind] = hit[0] - origin if hit else float("nan")
    return out


def write_config(directory, events_path, max_length=100000):
    config = {
        "name": "recovery-bench",
        "entrypoint": ["/usr/bin/python3", str(TRIAL)],
        "searcher": {"name": "single", "metric": "val_loss", "max_length": max_length},
        "checkpoint": {"period": PERIOD},
        "max_restarts": 1000,
        "environment": {"RECOVERY_EVENTS": str(events_path)},
    }
    path = directory / "exp.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def trial_pid(cairn, store):
    proc = subprocess.run([cairn, "--store", str(store), "show", "1.1", "--json"],
                          capture_output=True, text=True, env=clean_env())
    if proc.returncode != 0:
        return None
    record = json.loads(proc.stdout)
    return record.get("pid") if record.get("state") == "RUNNING" else None


def process_state(pid):
    """'gone' once reaped, 'Z' while a zombie, else the /proc state letter."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return "gone"


def wait_for_checkpoint(events, pid, after_steps=0):
    """Waits until pid has registered a checkpoint and taken a few steps more, plus a
    random part of a step, so kills land at different points of a step."""
    wait_for("a checkpoint of pid %d" % pid, lambda: events.count(pid, "checkpoint") > 0)
    goal = events.count(pid, "step") + after_steps
    wait_for("pid %d's steps" % pid, lambda: events.count(pid, "step") >= goal)
    time.sleep(random.uniform(0, 0.05))


# -- standalone -------------------------------------------------------------------------


def make_standalone_checkpoint(scratch):
    """A checkpoint as the SDK writes it standalone (state + random generators), at step
    PERIOD: the trial run alone from 0 to PERIOD."""
    workdir = scratch / "standalone"
    workdir.mkdir()
    env = clean_env({"PYTHONPATH": str(SOURCE / "sdk" / "python"),
                     "RECOVERY_EVENTS": str(workdir / "seed-events.txt"),
                     "CAIRN_CHECKPOINT_PERIOD": str(PERIOD), "CAIRN_MAX_LENGTH": str(PERIOD)})
    subprocess.run(["/usr/bin/python3", str(TRIAL)], cwd=workdir, env=env, check=True,
                   stderr=subprocess.DEVNULL)
    return workdir, workdir / "checkpoints" / str(PERIOD)


def standalone_once(workdir, checkpoint, rep):
    events = Events(workdir / ("events-%d.txt" % rep))
    env = clean_env({"PYTHONPATH": str(SOURCE / "sdk" / "python"),
                     "RECOVERY_EVENTS": str(events.path),
                     "CAIRN_CHECKPOINT_PERIOD": str(PERIOD),
                     "CAIRN_LATEST_CHECKPOINT": str(checkpoint),
                     "CAIRN_STEPS_COMPLETED": str(PERIOD),
                     "CAIRN_MAX_LENGTH": str(PERIOD + 1)})
    run_dir = workdir / ("run-%d" % rep)
    run_dir.mkdir()
    launched = time.time()
    subprocess.run(["/usr/bin/python3", str(TRIAL)], cwd=run_dir, env=env, check=True,
                   stderr=subprocess.DEVNULL)
    (pid,) = events.pids()
    result = phases(events, pid, launched)
    if events.first(pid, "restored")[1] != PERIOD:
        sys.exit("bench: the standalone trial did not restore step %d" % PERIOD)
    return result


# -- trial kill ---------------------------------------------------------------------------


def trial_kill_run(cairn, workdir, kills, log):
    store = workdir / "store"
    events = Events(workdir / "events.txt")
    config = write_config(workdir, events.path)
    subprocess.run([cairn, "init", str(store)], check=True, capture_output=True, env=clean_env())
    with open(workdir / "cairn.out", "w") as out:
        driver = subprocess.Popen([cairn, "--store", str(store), "run", str(config)],
                                  cwd=workdir, stdout=out, stderr=subprocess.STDOUT,
                                  env=clean_env())
    samples = []
    try:
        pid = wait_for("the first trial pid", lambda: trial_pid(cairn, store))
        for kill in range(kills):
            wait_for_checkpoint(events, pid, after_steps=2)
            pid = wait_for("the trial pid", lambda: trial_pid(cairn, store))
            if pid not in events.pids():
                sys.exit("bench: cairn show's pid %d is not the trial's" % pid)
            before = events.pids()
            killed_at = time.time()
            os.kill(pid, signal.SIGKILL)
            t, new_pid, step = wait_for("the restarted trial's first step",
                                        lambda: events.first_other("step", before, killed_at))
            sample = phases(events, new_pid, killed_at)
            sample["raw"] = t - killed_at
            sample["restored_step"] = events.first(new_pid, "restored")[1]
            samples.append(sample)
            log("  kill %d: pid %d -> %d, restored step %d, first new step %d after %.3f s"
                % (kill + 1, pid, new_pid, sample["restored_step"], step, sample["raw"]))
            pid = new_pid
    finally:
        stop_driver(driver)
    return samples


def stop_driver(driver):
    """Ctrl-C: the trial checkpoints and exits, cairn pauses the experiment and exits."""
    if driver.poll() is None:
        driver.send_signal(signal.SIGINT)
        try:
            driver.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            driver.kill()
            driver.wait()


# -- agent kill ---------------------------------------------------------------------------


class Agent:
    """A `cairn agent` on 127.0.0.1 (one slot), which can be killed and started again on
    the same port."""

    def __init__(self, cairn, directory, key, port=0):
        self.cairn, self.directory, self.key = cairn, directory, key
        self.log = open(directory.with_suffix(".log"), "a")
        self.process = subprocess.Popen(
            [cairn, "agent", "--dir", str(directory), "--key-file", str(key), "--slots", "1",
             "--listen", "127.0.0.1:%d" % port, "--no-announce"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.PIPE, text=True,
            env=clean_env())
        line = self.process.stderr.readline()
        self.port = int(line.split("listening on 127.0.0.1:")[1].split()[0])
        self.address = "127.0.0.1:%d" % self.port
        self.drain = subprocess.Popen(["cat"], stdin=self.process.stderr, stdout=self.log)

    def kill(self):
        self.process.kill()
        self.process.wait()

    def again(self):
        return Agent(self.cairn, self.directory, self.key, self.port)


def trial_machine(cairn, store):
    proc = subprocess.run([cairn, "--store", str(store), "show", "1.1", "--json"],
                          capture_output=True, text=True, env=clean_env())
    if proc.returncode != 0:
        return None
    record = json.loads(proc.stdout)
    placement = record.get("placement") or []
    return placement[0]["machine"] if record.get("state") == "RUNNING" and placement else None


def agent_kill_run(cairn, workdir, kills, log):
    store = workdir / "store"
    events = Events(workdir / "events.txt")
    config = write_config(workdir, events.path)
    key = workdir / "cluster.key"
    subprocess.run([cairn, "agent", "--new-key", str(key)], check=True, capture_output=True,
                   env=clean_env())
    agents = [Agent(cairn, workdir / "agent-a", key), Agent(cairn, workdir / "agent-b", key)]
    subprocess.run([cairn, "init", str(store)], check=True, capture_output=True, env=clean_env())
    out = open(workdir / "cairn.out", "w")
    driver = subprocess.Popen([cairn, "--store", str(store), "run", str(config), "--slots", "0",
                               "--peers", ",".join(a.address for a in agents), "--key-file",
                               str(key)], cwd=workdir, stdout=out, stderr=subprocess.STDOUT,
                              env=clean_env({"CAIRN_HEARTBEAT_TIMEOUT": str(HEARTBEAT_S)}))
    samples = []
    try:
        # A remote rank's pid in the store is cairn's name for it (below -1): the trial's
        # own pid is the one in its event file.
        pid = wait_for("the first trial pid", lambda: next(iter(events.pids()), None))
        for kill in range(kills):
            wait_for_checkpoint(events, pid, after_steps=2)
            where = wait_for("the trial's machine", lambda: trial_machine(cairn, store))
            (victim,) = [a for a in agents if a.address == where]
            before = events.pids()
            killed_at = time.time()
            victim.kill()
            os.kill(pid, signal.SIGKILL)
            t, new_pid, step = wait_for("the moved trial's first step",
                                        lambda: events.first_other("step", before, killed_at))
            sample = phases(events, new_pid, killed_at)
            sample["raw"] = t - killed_at
            sample["restored_step"] = events.first(new_pid, "restored")[1]
            samples.append(sample)
            log("  agent kill %d: %s and pid %d killed; pid %d restored step %d, first new "
                "step %d after %.3f s" % (kill + 1, where, pid, new_pid,
                                          sample["restored_step"], step, sample["raw"]))
            agents[agents.index(victim)] = victim.again()
            # The next kill must find another agent to move to: wait until the coordinator
            # has connected the restarted one again (it tries a lost agent every 5 s).
            wait_for("the coordinator to reconnect %s" % where,
                     lambda: (workdir / "cairn.out").read_text().count(" is back (") > kill,
                     interval=0.05)
            pid = new_pid
    finally:
        stop_driver(driver)
        out.close()
        for agent in agents:
            agent.kill()
    return samples


# -- resume -------------------------------------------------------------------------------


def resume_run(cairn, workdir, resumes, log):
    """Kills cairn and resumes, `resumes` times. Rounds 1, 3, 5 ... resume as soon as the
    orphaned trial has exited (a zombie: its parent died, and the machine's PID 1 reaps orphans
    only now and then); rounds 2, 4 ... wait until it has been reaped, as a PID 1 that reaps
    at once (systemd, tini) would. Returns {"exited": samples, "reaped": samples}."""
    store = workdir / "store"
    events = Events(workdir / "events.txt")
    config = write_config(workdir, events.path)
    subprocess.run([cairn, "init", str(store)], check=True, capture_output=True, env=clean_env())
    out = open(workdir / "cairn.out", "w")
    driver = subprocess.Popen([cairn, "--store", str(store), "run", str(config)], cwd=workdir,
                              stdout=out, stderr=subprocess.STDOUT, env=clean_env())
    samples = {"exited": [], "reaped": []}
    try:
        pid = wait_for("the first trial pid", lambda: trial_pid(cairn, store))
        for rep in range(resumes):
            mode = "exited" if rep % 2 == 0 else "reaped"
            wait_for_checkpoint(events, pid, after_steps=2)
            driver.kill()  # SIGKILL to cairn itself; its trial is left running
            driver.wait()
            wait_for("the orphaned trial %d to exit" % pid,
                     lambda: process_state(pid) in ("Z", "gone"), interval=0.002)
            exited_at = time.time()
            if mode == "reaped":
                wait_for("the orphaned trial %d to be reaped" % pid,
                         lambda: process_state(pid) == "gone", interval=0.002)
            state = process_state(pid)
            before = events.pids()
            started = time.time()
            driver = subprocess.Popen([cairn, "--store", str(store), "resume", "1"],
                                      cwd=workdir, stdout=out, stderr=subprocess.STDOUT,
                                      env=clean_env())
            reaped_at = time.time()
            if mode == "exited":  # when this VM's PID 1 reaped it, for the report
                reaped_at = wait_for("the orphan %d to be reaped" % pid,
                                     lambda: process_state(pid) == "gone" and time.time(),
                                     interval=0.002)
            t, new_pid, step = wait_for("the resumed trial's first step",
                                        lambda: events.first_other("step", before, started))
            sample = phases(events, new_pid, started)
            sample["raw"] = t - started
            sample["after_reap"] = t - max(reaped_at, started)
            sample["reaped"] = reaped_at - started
            sample["restored_step"] = events.first(new_pid, "restored")[1]
            orphan_exit = events.first(pid, "exit")
            sample["orphan_step"] = orphan_exit[1] if orphan_exit else None
            samples[mode].append(sample)
            log("  resume %d (%s; orphan %s %.3f s after exiting): orphan %d stopped at "
                "step %s; new pid %d restored step %d%s, first new step %d after %.3f s" % (
                    rep + 1, mode, "a zombie" if state == "Z" else "reaped",
                    started - exited_at, pid, sample["orphan_step"], new_pid,
                    sample["restored_step"],
                    "" if sample["restored_step"] == sample["orphan_step"] else
                    " (NOT the orphan's checkpoint)", step, sample["raw"]))
            pid = new_pid
    finally:
        stop_driver(driver)
        out.close()
    return samples


# -- report -------------------------------------------------------------------------------


def median(samples, key):
    return statistics.median(s[key] for s in samples)


def report(standalone, kills, resumes, agent_kills=()):
    s_first = median(standalone, "step")
    print("\nmedian seconds (n = samples)")
    print("  standalone trial, Popen -> (n=%d): start %.3f, init %.3f, restored %.3f, "
          "first step %.3f" % (len(standalone), median(standalone, "start"),
                               median(standalone, "init"), median(standalone, "restored"),
                               s_first))
    verdicts = []
    for name, samples, deliberate in (
            ("trial kill", kills, BACKOFF_S),
            ("resume, orphan exited (zombie)", resumes["exited"], 0.0),
            ("resume, orphan reaped", resumes["reaped"], 0.0),
            ("agent kill", agent_kills, 0.0)):
        if not samples:
            continue
        raw = median(samples, "raw")
        nets = sorted(s["raw"] - deliberate - s_first for s in samples)
        net = statistics.median(nets)
        origin = "kill -9" if deliberate or name == "agent kill" else "`cairn resume`"
        print("  %s (n=%d), %s -> start %.3f, init %.3f, restored %.3f, first step %.3f"
              % (name, len(samples), origin, median(samples, "start"), median(samples, "init"),
                 median(samples, "restored"), raw))
        print("    raw %.3f s%s; net of the standalone trial (%.3f s): %.3f s "
              "(min %.3f, max %.3f); ratio raw / standalone %.1fx" % (
                  raw, " - back-off %.1f s" % deliberate if deliberate else "", s_first, net,
                  nets[0], nets[-1], raw / s_first))
        # cairn's own share before the trial's process runs its first line
        pre = statistics.median(s["start"] - deliberate for s in samples) - \
            median(standalone, "start")
        print("    of which before the trial's first line (beyond the standalone Python "
              "start-up%s): %.3f s" % (", and the back-off" if deliberate else "", pre))
        lost = [s for s in samples if s.get("orphan_step") is not None and
                s["restored_step"] != s["orphan_step"]]
        if lost:
            print("    %d of %d resumes restored an older checkpoint than the orphan's "
                  "(%.1f steps retrained on average)" % (
                      len(lost), len(samples),
                      statistics.mean(s["orphan_step"] - s["restored_step"] for s in lost)))
        if name.startswith("resume, orphan exited"):
            early = [x for x in samples if x["after_reap"] < 0]
            if early:  # cairn did not wait for PID 1 to reap the zombie
                print("    in %d of %d rounds the first step came before PID 1 reaped the "
                      "orphan (median %.3f s after `cairn resume` started)" % (
                          len(early), len(samples), median(samples, "reaped")))
            else:
                after = median(samples, "after_reap")
                print("    the orphan was reaped by PID 1 %.3f s after `cairn resume` started "
                      "(median); the first step came %.3f s after that (net of the "
                      "standalone trial: %.3f s)" % (median(samples, "reaped"), after,
                                                     after - s_first))
        # An agent kill is counted lost at most the heartbeat timeout after the agent was last
        # heard (within a second of the kill): the goal is net of it.
        goal = 2.0 + HEARTBEAT_S if name == "agent kill" else GOAL_S
        verdict = "meets" if net <= goal else "MISSES"
        print("    goal: net <= %.1f s%s: %s (%.3f s)" % (
            goal, " (2 s + the heartbeat timeout)" if name == "agent kill" else "", verdict, net))
        verdicts.append(net <= goal)
    return all(verdicts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cairn", default=default_cairn())
    parser.add_argument("--runs", type=int, default=2, help="cairn runs of each kind")
    parser.add_argument("--kills", type=int, default=6, help="kills (or resumes) per run")
    parser.add_argument("--standalone", type=int, default=5,
                        help="standalone starts before each cairn run")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--only", default="kill,resume",
                        help="which recoveries: kill, resume, agent (comma-separated)")
    args = parser.parse_args()
    cairn = str(pathlib.Path(args.cairn).resolve())

    scratch = pathlib.Path(tempfile.mkdtemp(prefix="cairn-bench-recovery-"))
    print(machine_summary(cairn))
    print("scratch: %s" % scratch)
    log = lambda line: print(line, flush=True)  # noqa: E731
    standalone, kills, resumes = [], [], {"exited": [], "reaped": []}
    agent_kills = []
    try:
        workdir, checkpoint = make_standalone_checkpoint(scratch)
        for run in range(args.runs):
            for kind in args.only.split(","):
                for _ in range(args.standalone):
                    standalone.append(standalone_once(workdir, checkpoint, len(standalone)))
                log("standalone so far: median first step %.3f s" % median(standalone, "step"))
                target = scratch / ("%s-%d" % (kind, run))
                target.mkdir()
                if kind == "kill":
                    log("trial kills, run %d:" % (run + 1))
                    kills += trial_kill_run(cairn, target, args.kills, log)
                elif kind == "agent":
                    log("agent kills, run %d:" % (run + 1))
                    agent_kills += agent_kill_run(cairn, target, args.kills, log)
                else:
                    log("cairn kills + resume, run %d:" % (run + 1))
                    for mode, samples in resume_run(cairn, target, args.kills, log).items():
                        resumes[mode] += samples
        report(standalone, kills, resumes, agent_kills)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    print("\nload average after: %.2f" % os.getloadavg()[0])


if __name__ == "__main__":
    sys.exit(main())
