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

  /usr/bin/python3 bench/peer_checkpoint_bench.py [--cairn BIN] [--reps N] [--mib M]
"""
import argparse
import os
import re
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


def baseline(tool, src, work):
    # As the trial does: the file to send is written just before (untimed), so on this one
    # machine both sides ship a file whose pages are still being written back.
    fresh = os.path.join(work, "fresh.bin")
    shutil.copyfile(src, fresh)
    src = fresh
    out = os.path.join(work, "received.bin")
    server = subprocess.Popen([tool, "serve", out], stdout=subprocess.PIPE, text=True)
    port = server.stdout.readline().strip()
    start = time.monotonic()
    subprocess.run([tool, "send", port, src], check=True)
    elapsed = time.monotonic() - start
    server.wait(timeout=120)
    os.remove(out)
    os.remove(fresh)
    return elapsed


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
        proc = run_checked([cairn, "run", "exp.yaml", "--peers", "127.0.0.1:" + port,
                            "--key-file", key, "--slots", "0"], cwd=work, env=env)
        commits = {int(s): float(t) for s, t in
                   re.findall(r"BENCH commit (\d+) ([\d.]+)", proc.stdout + proc.stderr)}
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
    return commits, content


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cairn", default=default_cairn())
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--mib", type=int, default=256)
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
        base, first, second, zero = [], [], [], []
        for rep in range(args.reps):
            work = os.path.join(work_root, "rep-%d" % rep)
            os.makedirs(work)
            base.append(baseline(tool, src, work))
            commits, content = cairn_run(args.cairn, src, work)
            first.append(commits[1])
            second.append(commits[2])
            zero.append(content)
            shutil.rmtree(work)
            print("rep %d: baseline %.3f s, cairn %.3f s (unchanged checkpoint %.3f s), content "
                  "bytes on the wire %s" % (rep, base[-1], first[-1], second[-1], content),
                  flush=True)
        b, c = statistics.median(base), statistics.median(first)
        print("%d MiB: baseline %.3f s (%.0f MiB/s), cairn %.3f s (%.0f MiB/s): %.2fx the "
              "baseline's throughput; unchanged checkpoint %.3f s, content bytes %s"
              % (args.mib, b, args.mib / b, c, args.mib / c, b / c, statistics.median(second),
                 [z[1] if len(z) > 1 else None for z in zero]))
    finally:
        shutil.rmtree(work_root, ignore_errors=True)


if __name__ == "__main__":
    main()
