"""Checkpoint shipping over the wire (issue 17's benchmark, docs/peers.md "Checkpoints over
the wire"): a Python SDK trial on a `cairn agent` on loopback writes a checkpoint of one
256 MiB file; the time from the end of its `with ctx.checkpoint(step)` block to the ack
(the agent hashes the directory, sends its manifest, the coordinator asks for what its store
lacks, receives it in chunks, verifies and stores it durably, registers the checkpoint and
acks) is compared with the baseline bench/tls_copy_baseline.cc: the same bytes through a
TLS 1.3 stream with the same cipher suite (TLS_AES_128_GCM_SHA256, an external PSK),
hashed with SHA-256 and fsynced on the receiving side; like the trial's, the file it sends
was written just before (untimed). The trial then writes the same
checkpoint again: its content bytes on the wire (from the agent's log line) should be 0.

Besides the times, each repetition reports the CPU seconds of each side, which the load of
other processes changes much less than the times: the baseline's sender and receiver
processes; cairn's agent (its own threads: the listing, which hashes the directory, and the
send, for both checkpoints, and the relay; not the trial) and coordinator (`cairn run`).

The two are run in alternating order (--order): on a VM whose freed memory goes back to
the host, the run that follows the other's deletion of its files can pay for faulting that
memory in again, which showed as a page-cache copy up to 20 times slower in whichever ran
second (bench/RESULTS.md, 2026-11-27).

  /usr/bin/python3 bench/peer_checkpoint_bench.py [--cairn BIN] [--reps N] [--mib M]
      [--order alternate|baseline-first|cairn-first]
"""
import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import SOURCE, default_cairn, machine_summary, run_checked  # noqa: E402

TRIAL = r"""
import os, shutil, time, cairn
ctx = cairn.init()
step = ctx.steps_completed
for op in ctx.operations():
    while step < op.length:
        step += 1
        with ctx.checkpoint(step) as path:
            shutil.copyfile(os.environ["BENCH_SRC"], os.path.join(str(path), "weights.bin"))
            written = time.monotonic()
        print("BENCH commit %d %.4f" % (step, time.monotonic() - written), flush=True)
    ctx.report_validation(step, {"val_loss": 1.0})
"""

CONFIG = """name: ship
entrypoint: [/usr/bin/python3, %s]
searcher: {name: single, metric: val_loss, max_length: 2}
max_restarts: 0
"""

SENT = re.compile(r"sent checkpoint of trial \S+ attempt \d+ to \S+: \d+ files \(\d+ bytes\), "
                  r"\d+ wanted, (\d+) content bytes on the wire")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def own_cpu(pid):
    """User + system seconds of a live process's own threads (not its children)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def baseline(tool, src, work):
    # As the trial does: the file to send is written just before (untimed), so on this one
    # machine both sides ship a file whose pages are still being written back.
    fresh = os.path.join(work, "fresh.bin")
    shutil.copyfile(src, fresh)
    src = fresh
    out = os.path.join(work, "received.bin")
    server = subprocess.Popen([tool, "serve", out], stdout=subprocess.PIPE, text=True)
    port = server.stdout.readline().strip()
    cpu = children_cpu()
    start = time.monotonic()
    subprocess.run([tool, "send", port, src], check=True)
    elapsed = time.monotonic() - start
    sender = children_cpu() - cpu
    _, status, usage = os.wait4(server.pid, 0)  # bounded: the sender got its close_notify
    server.returncode = os.waitstatus_to_exitcode(status)
    receiver = usage.ru_utime + usage.ru_stime
    os.remove(out)
    os.remove(fresh)
    return elapsed, sender, receiver


def cairn_run(cairn, src, work):
    home = os.path.join(work, "home")
    os.makedirs(home, exist_ok=True)
    env = {"HOME": home, "XDG_CONFIG_HOME": None, "XDG_STATE_HOME": None,
           "CAIRN_KEY_FILE": None, "BENCH_SRC": src}
    key = os.path.join(work, "cluster.key")
    run_checked([cairn, "agent", "--new-key", key], cwd=work, env=env)
    full_env = dict(os.environ, HOME=home, BENCH_SRC=src)
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "CAIRN_KEY_FILE", "CAIRN_DIR"):
        full_env.pop(name, None)
    agent = subprocess.Popen([cairn, "agent", "--dir", os.path.join(work, "agent"), "--listen",
                              "127.0.0.1:0", "--key-file", key], cwd=work, env=full_env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        port = re.search(r"listening on \S*:(\d+) ", agent.stderr.readline()).group(1)
        with open(os.path.join(work, "trial.py"), "w") as f:
            f.write(TRIAL)
        with open(os.path.join(work, "exp.yaml"), "w") as f:
            f.write(CONFIG % os.path.join(work, "trial.py"))
        # --slots 0: the trial runs on the agent, never on this machine's slots.
        cpu = children_cpu()
        proc = run_checked([cairn, "run", "exp.yaml", "--peers", "127.0.0.1:" + port,
                            "--key-file", key, "--slots", "0"], cwd=work, env=env)
        coordinator = children_cpu() - cpu
        commits = {int(s): float(t) for s, t in
                   re.findall(r"BENCH commit (\d+) ([\d.]+)", proc.stdout + proc.stderr)}
        agent_cpu = own_cpu(agent.pid)
    finally:
        agent.terminate()
        log = agent.stderr.read()
        agent.wait(timeout=60)
    content = [int(c) for c in SENT.findall(log)]
    if len(content) != 2:
        sys.exit("bench: the agent shipped %d checkpoints, not 2:\n%s" % (len(content), log))
    for line in log.splitlines():
        if "sent checkpoint" in line:
            print("  agent:", line.split("cairn agent: ", 1)[-1], flush=True)
    return commits, content, agent_cpu, coordinator


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cairn", default=default_cairn())
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--order", choices=("alternate", "baseline-first", "cairn-first"),
                        default="alternate")
    args = parser.parse_args()
    print(machine_summary(args.cairn))
    work_root = tempfile.mkdtemp(prefix="cairn-ship-bench-")
    try:
        tool = os.path.join(work_root, "tls_copy_baseline")
        subprocess.run(["g++", "-O2", "-std=c++20", str(SOURCE / "bench" / "tls_copy_baseline.cc"),
                        "-o", tool, "-lssl", "-lcrypto"], check=True)
        src = os.path.join(work_root, "checkpoint.bin")
        with open(src, "wb") as f:
            for _ in range(args.mib):
                f.write(os.urandom(1 << 20))
        base, first, second, zero, ratios, cpus = [], [], [], [], [], []
        for rep in range(args.reps):
            work = os.path.join(work_root, "rep-%d" % rep)
            os.makedirs(work)
            cairn_first = args.order == "cairn-first" or (args.order == "alternate" and rep % 2)
            if cairn_first:
                commits, content, agent_cpu, coord_cpu = cairn_run(args.cairn, src, work)
                b, b_send, b_recv = baseline(tool, src, work)
            else:
                b, b_send, b_recv = baseline(tool, src, work)
                commits, content, agent_cpu, coord_cpu = cairn_run(args.cairn, src, work)
            base.append(b)
            first.append(commits[1])
            second.append(commits[2])
            zero.append(content)
            ratios.append(base[-1] / first[-1])
            cpus.append((b_send, b_recv, agent_cpu, coord_cpu))
            shutil.rmtree(work)
            print("rep %d (%s first): baseline %.3f s, cairn %.3f s (%.2fx; unchanged checkpoint "
                  "%.3f s), content bytes on the wire %s; CPU s: baseline sender %.2f receiver "
                  "%.2f, cairn agent %.2f coordinator %.2f"
                  % (rep, "cairn" if cairn_first else "baseline", base[-1], first[-1],
                     ratios[-1], second[-1], content, b_send, b_recv, agent_cpu, coord_cpu),
                  flush=True)
        b, c = statistics.median(base), statistics.median(first)
        print("%d MiB: baseline %.3f s (%.0f MiB/s), cairn %.3f s (%.0f MiB/s): %.2fx the "
              "baseline's throughput (per repetition %.2f-%.2fx, median %.2fx); unchanged "
              "checkpoint %.3f s, content bytes %s"
              % (args.mib, b, args.mib / b, c, args.mib / c, b / c, min(ratios), max(ratios),
                 statistics.median(ratios), statistics.median(second),
                 [z[1] if len(z) > 1 else None for z in zero]))
        med = [statistics.median(x[i] for x in cpus) for i in range(4)]
        print("CPU seconds, medians: baseline sender %.2f + receiver %.2f = %.2f; cairn agent "
              "%.2f (both checkpoints) + coordinator %.2f = %.2f"
              % (med[0], med[1], med[0] + med[1], med[2], med[3], med[2] + med[3]))
    finally:
        shutil.rmtree(work_root, ignore_errors=True)


if __name__ == "__main__":
    main()
