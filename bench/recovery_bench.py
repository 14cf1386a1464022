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
               processes below it (its machine went away) -> the trial's first new training
               step on the other agent; also timed, the kill -> the coordinator's "lost
               agent" warning on its terminal (cairn.out, followed every 2 ms). No back-off
               (a lost machine is not the trial's failure); the coordinator tries the
               broken connection again for the heartbeat timeout (a link that comes back
               loses nothing, docs/peers.md "Reattach"), set to 2 s here; the killed agent
               is started again on its port, so the next kill finds two agents.
  hung agent   (--only hung) as agent kill, but SIGSTOP instead of `kill -9`: the agent and
               the processes below it stop, their sockets stay open and the kernel goes on
               acknowledging what the coordinator sends, so nothing but the silence says
               the machine is gone (a hung peer: a machine swapping to death, a frozen VM).
               The coordinator resumes the session on a new connection after half the
               heartbeat timeout of silence and counts the agent lost at the timeout.
               After each sample the stopped agent and its ranks are killed and the
               agent started again (a hung machine that comes back is covered by
               tests/e2e/test_peers_placement.py).
  standalone   the same trial started directly (no cairn) from a checkpoint, Popen ->
               first training step: Python start-up, `import cairn`, the checkpoint
               read and one 50 ms step. The baseline both figures are net of.

--trial picks the trial (a comma-separated list runs each, with its own standalone
baseline):
  python  bench/recovery_trial.py, above (the default).
  cpp     bench/recovery_trial.cc, the same trial through the C++ SDK (compiled with g++
          into the scratch directory): the same 50 ms steps, checkpoints and event file.
  mlp     `entrypoint: builtin:mlp` (spirals, MLP_HPARAMS below: one thread, CPU), one
          ~50 ms epoch per step, a checkpoint every 5 epochs; agent kills only. builtin:mlp
          writes no event file, so the driver follows the store's write-ahead log
          (store/.cairn/experiments/*/db/*.log; RocksDB writes its records there
          uncompressed, keys in plain text) every 2 ms: "restored" is when the moved rank's
          first output line ("builtin:mlp: ...; epochs completed: K", printed after the
          checkpoint is loaded) is stored, "first step" when the validation of epoch K+1
          (key metric/<trial>/v/<step>, sent as that epoch ends) is stored. Both are
          later than the trial's own moment by the relay to the coordinator and its
          commit (loopback: a few ms); start and init are not seen. Its standalone
          baseline is `cairn __builtin-mlp`, the trainer the agent starts, run directly
          without CAIRN_CONTROL from a checkpoint it wrote standalone: Popen -> the same
          two lines on its stderr (the SDK prints each report there standalone), timed as
          they arrive through a pipe.

net (trial kill) = raw - 1 s back-off (deliberate: engine/coordinator/coordinator_trials.cc) - standalone
net (resume)     = raw - standalone
net (agent kill) = raw - standalone, against a goal of 2 s + the heartbeat timeout; also
                   printed: raw - standalone - the timeout, and the "lost agent" line ->
                   the first step, net of standalone (cairn's part once it counted the
                   agent lost: the timeout runs from when it last heard the agent, up to a
                   second before the kill)
Goal: net <= 1 s each for kill and resume; <= 2 s for an agent kill or a hung agent (issue
17's goal). The checkpoint is ~4 KB (the trial's state and the SDK's random
generator state), so reading it (cairn copying it out of the object store with its hash
verified, the trial reading it) is in the raw figures but costs well under a millisecond.

    /usr/bin/python3 bench/recovery_bench.py [--cairn BIN] [--runs R] [--kills K]
                                             [--standalone N] [--keep]
                                             [--only kill,resume,agent,hung]
                                             [--trial python,cpp,mlp]
"""
import argparse
import glob
import json
import os
import pathlib
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import SOURCE, default_cairn, machine_summary

TRIAL = SOURCE / "bench" / "recovery_trial.py"
TRIAL_CC = SOURCE / "bench" / "recovery_trial.cc"
# builtin:mlp's trial (--trial mlp): one BLAS thread on the CPU, an epoch (its step) of
# 32,000 rows takes about 50 ms here, as the other trials' steps do; its checkpoint ~40 KB.
MLP_HPARAMS = {"dataset": "spirals", "samples": 40000, "hidden": 64, "layers": 2,
               "threads": 1, "device": "cpu"}
MLP_SEED = 7  # the standalone baseline's (cairn gives the trial its own)
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


class TrialKind:
    """Which trial the runs use: its entrypoint under cairn and its command standalone."""

    def __init__(self, name, command):
        self.name = name
        self.command = command  # argv started directly for the standalone baseline

    @property
    def mlp(self):
        return self.name == "mlp"

    def entrypoint(self):
        return "builtin:mlp" if self.mlp else self.command


def make_trial_kind(name, cairn, scratch):
    if name == "python":
        return TrialKind(name, ["/usr/bin/python3", str(TRIAL)])
    if name == "cpp":
        binary = scratch / "recovery_trial"
        subprocess.run(["g++", "-O2", "-std=c++20", "-I" + str(SOURCE / "sdk" / "cpp"),
                        str(TRIAL_CC), "-o", str(binary), "-pthread"], check=True)
        return TrialKind(name, [str(binary)])
    if name == "mlp":
        # The trainer the agent starts for a builtin:mlp rank (cairn re-executes itself).
        return TrialKind(name, [cairn, "__builtin-mlp"])
    sys.exit("bench: unknown --trial %r (python, cpp, mlp)" % name)


def write_config(directory, events_path, trial, max_length=100000):
    config = {
        "name": "recovery-bench",
        "entrypoint": trial.entrypoint(),
        "searcher": {"name": "single", "metric": "val_loss", "max_length": max_length},
        "checkpoint": {"period": PERIOD},
        "max_restarts": 1000,
        "environment": {"RECOVERY_EVENTS": str(events_path)},
    }
    if trial.mlp:
        config["hyperparameters"] = MLP_HPARAMS
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


def standalone_env(trial, extra):
    """The trial's environment standalone: what cairn would hand it, without CAIRN_CONTROL."""
    env = {"CAIRN_CHECKPOINT_PERIOD": str(PERIOD)}
    if trial.mlp:
        env.update({"CAIRN_HPARAMS": json.dumps(MLP_HPARAMS), "CAIRN_SEED": str(MLP_SEED)})
    else:
        env["PYTHONPATH"] = str(SOURCE / "sdk" / "python")
    env.update(extra)
    return clean_env(env)


def make_standalone_checkpoint(scratch, trial):
    """A checkpoint as the SDK writes it standalone (state + random generators), at step
    PERIOD: the trial run alone from 0 to PERIOD."""
    workdir = scratch / ("standalone-" + trial.name)
    workdir.mkdir()
    env = standalone_env(trial, {"RECOVERY_EVENTS": str(workdir / "seed-events.txt"),
                                 "CAIRN_MAX_LENGTH": str(PERIOD)})
    subprocess.run(trial.command, cwd=workdir, env=env, check=True, stderr=subprocess.DEVNULL)
    return workdir, workdir / "checkpoints" / str(PERIOD)


def standalone_once(trial, workdir, checkpoint, rep):
    if trial.mlp:
        return standalone_once_mlp(trial, workdir, checkpoint, rep)
    events = Events(workdir / ("events-%d.txt" % rep))
    env = standalone_env(trial, {"RECOVERY_EVENTS": str(events.path),
                                 "CAIRN_LATEST_CHECKPOINT": str(checkpoint),
                                 "CAIRN_STEPS_COMPLETED": str(PERIOD),
                                 "CAIRN_MAX_LENGTH": str(PERIOD + 1)})
    run_dir = workdir / ("run-%d" % rep)
    run_dir.mkdir()
    launched = time.time()
    subprocess.run(trial.command, cwd=run_dir, env=env, check=True, stderr=subprocess.DEVNULL)
    (pid,) = events.pids()
    result = phases(events, pid, launched)
    if events.first(pid, "restored")[1] != PERIOD:
        sys.exit("bench: the standalone trial did not restore step %d" % PERIOD)
    return result


MLP_RESTORED = re.compile(rb"epochs completed: (\d+)\D")


def standalone_once_mlp(trial, workdir, checkpoint, rep):
    """`cairn __builtin-mlp` from the checkpoint: Popen -> its "epochs completed" line (the
    checkpoint loaded) and its first validation line, timed as they come through the pipe."""
    env = standalone_env(trial, {"CAIRN_LATEST_CHECKPOINT": str(checkpoint),
                                 "CAIRN_STEPS_COMPLETED": str(PERIOD),
                                 "CAIRN_MAX_LENGTH": str(PERIOD + 1)})
    run_dir = workdir / ("run-%d" % rep)
    run_dir.mkdir()
    nan = float("nan")
    result = {"start": nan, "init": nan, "restored": nan, "step": nan}
    first_step = b"cairn: step %d validation:" % (PERIOD + 1)
    launched = time.time()
    proc = subprocess.Popen(trial.command, cwd=run_dir, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    for line in proc.stderr:
        now = time.time()
        restored = MLP_RESTORED.search(line)
        if restored and result["restored"] != result["restored"]:
            if int(restored.group(1)) != PERIOD:
                sys.exit("bench: builtin:mlp standalone did not restore epoch %d" % PERIOD)
            result["restored"] = now - launched
        elif line.startswith(first_step):
            result["step"] = now - launched
    if proc.wait() != 0 or result["step"] != result["step"]:
        sys.exit("bench: builtin:mlp standalone failed (exit %d)" % proc.returncode)
    return result


# -- trial kill ---------------------------------------------------------------------------


def trial_kill_run(cairn, trial, workdir, kills, log):
    store = workdir / "store"
    events = Events(workdir / "events.txt")
    config = write_config(workdir, events.path, trial)
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


def descendants(pid):
    """The processes below pid (children, theirs, ...), from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, frontier = [], [pid]
    while frontier:
        children = [p for p, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


class WalProbe:
    """builtin:mlp's progress as the coordinator stores it: follows the store's RocksDB
    write-ahead log (uncompressed; keys and values in plain text) and timestamps each new
    validation key (metric/<trial>/v/<step>) and each stored "epochs completed: K" output
    line (the rank loaded its checkpoint) when a poll first sees it. A record split over
    one of the log's 32 KiB block boundaries is not seen (a few in a thousand): the run
    then takes the next one and says so."""

    VALIDATION = re.compile(rb"metric/00000001/v/(\d{12})")

    def __init__(self, store):
        self.pattern = str(store / ".cairn" / "experiments" / "*" / "db" / "*.log")
        # path -> [bytes read, the last 64 of them (a match may go on in the next read),
        #          per pattern the position of the last match taken]
        self.files = {}
        self.validations = []  # (time seen, step)
        self.restores = []  # (time seen, epochs completed)

    def poll(self):
        now = time.time()
        for path in sorted(glob.glob(self.pattern)):
            state = self.files.setdefault(path, [0, b"", [-1, -1]])
            try:
                with open(path, "rb") as f:
                    f.seek(state[0])
                    new = f.read()
            except FileNotFoundError:
                continue
            if not new:
                continue
            data = state[1] + new
            base = state[0] + len(new) - len(data)  # the file position of data[0]
            # Both patterns match only whole (12 digits; a non-digit after the count).
            for i, (regex, out) in enumerate(((self.VALIDATION, self.validations),
                                              (MLP_RESTORED, self.restores))):
                for m in regex.finditer(data):
                    if base + m.start() > state[2][i]:
                        state[2][i] = base + m.start()
                        out.append((now, int(m.group(1))))
            state[0] += len(new)
            state[1] = data[-64:]

    def first_after(self, which, after, min_step=0):
        for t, step in which:
            if t >= after and step >= min_step:
                return t, step
        return None

    def max_step_after(self, after):
        return max((step for t, step in self.validations if t >= after), default=-1)


class LostProbe:
    """When the coordinator says it lost an agent: follows its terminal's file (cairn.out;
    its warnings go to stderr, unbuffered) and timestamps each "lost agent" line when a
    poll first sees it. From there on the recovery is cairn's: before it, the heartbeat
    timeout runs (counted from when the agent was last heard, up to a second before the
    kill, since it answers a heartbeat asked every second)."""

    def __init__(self, path):
        self.path, self.offset, self.partial, self.lost = path, 0, b"", []

    def poll(self):
        now = time.time()
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                new = f.read()
        except FileNotFoundError:
            return
        self.offset += len(new)
        lines = (self.partial + new).split(b"\n")
        self.partial = lines.pop()
        self.lost += [now for line in lines if b"lost agent " in line]

    def first_after(self, after):
        return next((t for t in self.lost if t >= after), None)


def agent_kill_run(cairn, trial, workdir, kills, log, hang=False):
    """Kills (hang: stops) the trial's agent and its ranks `kills` times; the samples."""
    fault = "stop" if hang else "kill"
    store = workdir / "store"
    events = Events(workdir / "events.txt")
    config = write_config(workdir, events.path, trial)
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
    probe = WalProbe(store)
    terminal = LostProbe(workdir / "cairn.out")
    samples = []
    try:
        if trial.mlp:
            restored_at, restored = 0.0, 0
        else:
            # A remote rank's pid in the store is cairn's name for it (below -1): the
            # trial's own pid is the one in its event file.
            pid = wait_for("the first trial pid", lambda: next(iter(events.pids()), None))
        for kill in range(kills):
            if trial.mlp:
                # A checkpoint after the one restored, and two epochs more.
                goal = (restored // PERIOD + 1) * PERIOD + 2
                wait_for("epoch %d" % goal,
                         lambda: probe.poll() or probe.max_step_after(restored_at) >= goal)
                time.sleep(random.uniform(0, 0.01))
            else:
                wait_for_checkpoint(events, pid, after_steps=2)
            where = wait_for("the trial's machine", lambda: trial_machine(cairn, store))
            (victim,) = [a for a in agents if a.address == where]
            ranks = descendants(victim.process.pid)
            if not trial.mlp and pid not in ranks:
                sys.exit("bench: the trial %d is not below the agent at %s" % (pid, where))
            before = events.pids()
            probe.poll()
            killed_at = time.time()
            # Its machine went away (or hung): its processes with it.
            for process in ([victim.process.pid] if hang else []) + ranks:
                try:
                    os.kill(process, signal.SIGSTOP if hang else signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if not hang:
                victim.kill()
            if trial.mlp:
                restored_at, restored = wait_for(
                    "the moved rank's checkpoint load",
                    lambda: terminal.poll() or probe.poll() or
                    probe.first_after(probe.restores, killed_at))
                t, step = wait_for(
                    "the moved trial's first epoch",
                    lambda: terminal.poll() or probe.poll() or
                    probe.first_after(probe.validations, restored_at, restored + 1))
                nan = float("nan")
                sample = {"start": nan, "init": nan, "restored": restored_at - killed_at,
                          "step": t - killed_at, "raw": t - killed_at,
                          "restored_step": restored}
                new_pid = None  # not seen: builtin:mlp writes no event file
                if step != restored + 1:
                    log("  (epoch %d's validation was not seen in the log; epoch %d's was)"
                        % (restored + 1, step))
                    sample["raw"] = sample["step"] = nan
            else:
                t, new_pid, step = wait_for(
                    "the moved trial's first step",
                    lambda: terminal.poll() or events.first_other("step", before, killed_at))
                sample = phases(events, new_pid, killed_at)
                sample["raw"] = t - killed_at
                sample["restored_step"] = events.first(new_pid, "restored")[1]
                pid = new_pid
            terminal.poll()  # the line may have come in the poll that saw the step
            lost_at = wait_for("the coordinator's lost agent line",
                               lambda: terminal.poll() or terminal.first_after(killed_at))
            sample["lost"] = lost_at - killed_at
            samples.append(sample)
            log("  agent %s %d: %s and its ranks %s %s; lost after %.3f s; %s restored "
                "step %d, first new step %d after %.3f s (restored after %.3f s)"
                % (fault, kill + 1, where, ranks, "stopped" if hang else "killed", sample["lost"],
                   "the moved rank" if new_pid is None else "pid %d" % new_pid,
                   sample["restored_step"], step, t - killed_at, sample["restored"]))
            if hang:  # a stopped process dies of SIGKILL too
                for rank in ranks:
                    try:
                        os.kill(rank, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                victim.kill()
            agents[agents.index(victim)] = victim.again()
            # The next kill must find another agent to move to: wait until the coordinator
            # has connected the restarted one again (it tries a lost agent every 5 s).
            wait_for("the coordinator to reconnect %s" % where,
                     lambda: (workdir / "cairn.out").read_text().count(" is back (") > kill,
                     interval=0.05)
    finally:
        stop_driver(driver)
        out.close()
        for agent in agents:
            agent.kill()
    if any(s["raw"] != s["raw"] for s in samples):
        samples = [s for s in samples if s["raw"] == s["raw"]]
    return samples


# -- resume -------------------------------------------------------------------------------


def resume_run(cairn, trial, workdir, resumes, log):
    """Kills cairn and resumes, `resumes` times. Rounds 1, 3, 5 ... resume as soon as the
    orphaned trial has exited (a zombie: its parent died, and the machine's PID 1 reaps orphans
    only now and then); rounds 2, 4 ... wait until it has been reaped, as a PID 1 that reaps
    at once (systemd, tini) would. Returns {"exited": samples, "reaped": samples}."""
    store = workdir / "store"
    events = Events(workdir / "events.txt")
    config = write_config(workdir, events.path, trial)
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
    values = [s[key] for s in samples if s[key] == s[key]]  # builtin:mlp: no start, init
    return statistics.median(values) if values else float("nan")


def report(trial, standalone, kills, resumes, agent_kills=(), hung_agents=()):
    s_first = median(standalone, "step")
    print("\n%s trial: median seconds (n = samples; nan: not seen)" % trial.name)
    print("  standalone trial, Popen -> (n=%d): start %.3f, init %.3f, restored %.3f, "
          "first step %.3f" % (len(standalone), median(standalone, "start"),
                               median(standalone, "init"), median(standalone, "restored"),
                               s_first))
    verdicts = []
    for name, samples, deliberate in (
            ("trial kill", kills, BACKOFF_S),
            ("resume, orphan exited (zombie)", resumes["exited"], 0.0),
            ("resume, orphan reaped", resumes["reaped"], 0.0),
            ("agent kill", agent_kills, 0.0),
            ("hung agent", hung_agents, 0.0)):
        if not samples:
            continue
        raw = median(samples, "raw")
        nets = sorted(s["raw"] - deliberate - s_first for s in samples)
        net = statistics.median(nets)
        remote = name in ("agent kill", "hung agent")
        origin = {"hung agent": "SIGSTOP"}.get(
            name, "kill -9" if deliberate or remote else "`cairn resume`")
        print("  %s (n=%d), %s -> start %.3f, init %.3f, restored %.3f, first step %.3f"
              % (name, len(samples), origin, median(samples, "start"), median(samples, "init"),
                 median(samples, "restored"), raw))
        print("    raw %.3f s%s; net of the standalone trial (%.3f s): %.3f s "
              "(min %.3f, max %.3f); ratio raw / standalone %.1fx" % (
                  raw, " - back-off %.1f s" % deliberate if deliberate else "", s_first, net,
                  nets[0], nets[-1], raw / s_first))
        # cairn's own share before the trial's process runs its first line
        if not trial.mlp:  # builtin:mlp's start is not seen
            pre = statistics.median(s["start"] - deliberate for s in samples) - \
                median(standalone, "start")
            print("    of which before the trial's first line (beyond the standalone "
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
        goal = 2.0 + HEARTBEAT_S if remote else GOAL_S
        verdict = "meets" if net <= goal else "MISSES"
        print("    goal: net <= %.1f s%s: %s (%.3f s)" % (
            goal, " (2 s + the heartbeat timeout)" if remote else "", verdict, net))
        if remote:
            print("    net of the standalone trial and the %.1f s heartbeat timeout: %.3f s "
                  "(min %.3f, max %.3f)" % (HEARTBEAT_S, net - HEARTBEAT_S,
                                            nets[0] - HEARTBEAT_S, nets[-1] - HEARTBEAT_S))
            after_lost = sorted(s["raw"] - s["lost"] - s_first for s in samples)
            print("    %s -> the coordinator's \"lost agent\" line: %.3f s (min %.3f, max "
                  "%.3f); that line -> first step, net of the standalone trial: %.3f s (min "
                  "%.3f, max %.3f)" % (origin, median(samples, "lost"),
                                       min(s["lost"] for s in samples),
                                       max(s["lost"] for s in samples),
                                       statistics.median(after_lost), after_lost[0],
                                       after_lost[-1]))
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
                        help="which recoveries: kill, resume, agent, hung (comma-separated)")
    parser.add_argument("--trial", default="python",
                        help="which trials: python, cpp, mlp (comma-separated; mlp: agent "
                             "kills only)")
    args = parser.parse_args()
    cairn = str(pathlib.Path(args.cairn).resolve())
    modes = args.only.split(",")
    if "mlp" in args.trial.split(",") and not set(modes) <= {"agent", "hung"}:
        sys.exit("bench: --trial mlp measures agent kills and hung agents only (--only "
                 "agent,hung)")

    scratch = pathlib.Path(tempfile.mkdtemp(prefix="cairn-bench-recovery-"))
    print(machine_summary(cairn))
    print("scratch: %s" % scratch)
    log = lambda line: print(line, flush=True)  # noqa: E731
    results = []
    try:
        trials = [make_trial_kind(name, cairn, scratch) for name in args.trial.split(",")]
        for trial in trials:
            workdir, checkpoint = make_standalone_checkpoint(scratch, trial)
            standalone, kills, resumes = [], [], {"exited": [], "reaped": []}
            agent_kills, hung_agents = [], []
            for run in range(args.runs):
                for kind in modes:
                    for _ in range(args.standalone):
                        standalone.append(standalone_once(trial, workdir, checkpoint,
                                                          len(standalone)))
                    log("%s standalone so far: median first step %.3f s"
                        % (trial.name, median(standalone, "step")))
                    target = scratch / ("%s-%s-%d" % (trial.name, kind, run))
                    target.mkdir()
                    if kind == "kill":
                        log("%s trial kills, run %d:" % (trial.name, run + 1))
                        kills += trial_kill_run(cairn, trial, target, args.kills, log)
                    elif kind == "agent":
                        log("%s agent kills, run %d:" % (trial.name, run + 1))
                        agent_kills += agent_kill_run(cairn, trial, target, args.kills, log)
                    elif kind == "hung":
                        log("%s hung agents, run %d:" % (trial.name, run + 1))
                        hung_agents += agent_kill_run(cairn, trial, target, args.kills, log,
                                                      hang=True)
                    else:
                        log("%s cairn kills + resume, run %d:" % (trial.name, run + 1))
                        for mode, samples in resume_run(cairn, trial, target, args.kills,
                                                        log).items():
                            resumes[mode] += samples
            results.append((trial, standalone, kills, resumes, agent_kills, hung_agents))
        met = [report(*result) for result in results]
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    print("\nload average after: %.2f" % os.getloadavg()[0])
    print("goals: %s" % ("all met" if all(met) else "NOT all met"))


if __name__ == "__main__":
    sys.exit(main())
