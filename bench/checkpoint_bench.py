#!/usr/bin/python3
"""Benchmark: checkpoint save and restore throughput through cairn, against copying the
same bytes with cp and making them durable with sync, in the same session.

Two cases by default: `large`, 256 MiB of random bytes in 4 files, and `small`, 64 MiB in
4,096 files of 16 KiB. Per case, with the page cache warm everywhere:

  cp + sync    `cp -r SRC DST` then `sync` of every copied file and of DST (per-file
               fsync: the durability cairn gives a checkpoint); also reported without the
               sync. R repetitions before the cairn run and R after; the baseline for
               both save and restore.
  sdk-alone    the trial (bench/checkpoint_trial.py) standalone: the SDK writes the same
               bytes from memory into ./checkpoints/.partial-N/, fsyncs every file and
               renames it (write + fsync, no cairn).
  save         the trial under `cairn run`: from the moment `ctx.checkpoint(step)` hands
               it the staging directory until the `with` block returns, i.e. until cairn
               acknowledged the checkpoint (docs/protocol.md, checkpoint_end: cairn
               hashes every file into the object store, fsyncs it, registers the
               checkpoint and only then acks). Each save has new content.
  restore      the trial crashes (exit 1) after its last save; cairn restarts it from its
               latest checkpoint, copying every file out of the object store with its
               hash verified into a fresh directory, and then starts the process.
               copy-out = the newest mtime of a restored file - the birth time of the
               restore directory (statx); what the user waits for adds the process
               start: -> the trial's first line, -> cairn.init() returned and every file
               present ("seen"). Reported too: the trial's exit -> the restore directory
               created, less the deliberate 1 s restart back-off (finding the
               checkpoint, removing the previous restore directory).
  dedup        a checkpoint with the same bytes as the one before, then one with one file
               changed: the bytes under .cairn/objects after each (should grow by 0, then
               by one file + a manifest).

Throughput ratio = (cp + sync seconds) / (cairn seconds) for the same bytes; goal >= 0.9
for save and for restore. Medians of the repetitions; the load average is printed
before and after each part.

Fairness on a VM: every timed write (cp's, the trial's, cairn's copy-out) is preceded by
writing and deleting as many bytes (untimed), because with virtio_balloon free page
reporting, page-cache writes into memory freed more than ~1 s ago run ~10x slower; and
the trial writes 1 MiB at a time, unbuffered, as cp does. See also the note on deleting
below.

    /usr/bin/python3 bench/checkpoint_bench.py [--cairn BIN] [--reps R] [--cases large,small]
        [--large-mib 256] [--large-files 4] [--small-files 4096] [--small-kib 16]
        [--scratch DIR] [--keep]
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import SOURCE, default_cairn, machine_summary

TRIAL = SOURCE / "bench" / "checkpoint_trial.py"
BACKOFF_S = 1.0  # the first restart's back-off (engine/coordinator/coordinator_trials.cc)
GOAL = 0.9
MIB = 1 << 20
# Nothing the benchmark writes is deleted before its case ends. On ext4 without a journal
# (this VM's root file system) creating a file skips every inode of its group deleted in
# the last ~30 s (fs/ext4/ialloc.c: recently_deleted()), so after deleting thousands of
# files, creating thousands more costs ~0.5 ms each: a baseline that deleted its previous
# copy would slow down the next timed step. (cairn's own restore removes the previous
# restore directory right before copying the next one out: that cost is cairn's and is
# measured.)


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env.update(extra or {})
    return env


def load():
    return "%.2f" % os.getloadavg()[0]


def make_source(directory, count, size):
    """count files of size random bytes; nested two levels for the many-files case, as
    a sharded checkpoint or a tokenizer directory would be."""
    directory.mkdir(parents=True)
    per_dir = 256
    for i in range(count):
        sub = directory / ("part%03d" % (i // per_dir)) if count > per_dir else directory
        sub.mkdir(exist_ok=True)
        with open(sub / ("file%05d.bin" % i), "wb") as f:
            f.write(os.urandom(size))
    subprocess.run(["sync"], check=True)
    return count * size


def all_files(directory):
    return sorted(str(p) for p in pathlib.Path(directory).rglob("*") if p.is_file())


def prewarm(directory, size):
    """Writes and deletes size bytes in directory, untimed: see checkpoint_trial.prewarm
    (on this kind of VM, page-cache writes into memory freed long ago are ~10x slower)."""
    scratch = directory / ".prewarm"
    chunk = bytes(MIB)
    with open(scratch, "wb") as f:
        for _ in range(0, size, MIB):
            f.write(chunk)
    os.remove(scratch)


def cp_sync_once(src, dst, size):
    """(seconds for cp -r, seconds for cp -r + sync of the copied files and directories)."""
    subprocess.run(["sync"], check=True)
    prewarm(dst.parent, size)
    t0 = time.perf_counter()
    subprocess.run(["cp", "-r", str(src), str(dst)], check=True)
    t1 = time.perf_counter()
    dirs = sorted({str(pathlib.Path(f).parent) for f in all_files(dst)} | {str(dst)})
    subprocess.run(["sync"] + all_files(dst) + dirs, check=True)
    t2 = time.perf_counter()
    # dst stays until the case ends (see the note on deleting at the top)
    return t1 - t0, t2 - t0


def read_events(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def trial_env(src, events, extra):
    env = clean_env({"CKPT_SOURCE": str(src), "CKPT_EVENTS": str(events)})
    env.update(extra)
    return env


def sdk_standalone(src, workdir, reps):
    workdir.mkdir()
    events = workdir / "events.jsonl"
    env = trial_env(src, events, {"PYTHONPATH": str(SOURCE / "sdk" / "python"),
                                  "CKPT_PREWARM_DIR": str(workdir),
                                  "CKPT_SAVES": str(reps), "CAIRN_MAX_LENGTH": str(reps)})
    subprocess.run(["/usr/bin/python3", str(TRIAL)], cwd=workdir, env=env, check=True,
                   stderr=subprocess.DEVNULL, timeout=600)
    return [e["saved"] for e in read_events(events) if e["kind"] == "save"]


def cairn_run(cairn, src, workdir, reps, total):
    workdir.mkdir()
    store = workdir / "store"
    events = workdir / "events.jsonl"
    subprocess.run([cairn, "init", str(store)], check=True, capture_output=True,
                   env=clean_env())
    config = {
        "name": "checkpoint-bench",
        "entrypoint": ["/usr/bin/python3", str(TRIAL)],
        "searcher": {"name": "single", "metric": "val_loss", "max_length": 1000},
        "max_restarts": 1000,
        # The trial checkpoints when it wants to; nothing is deleted while it runs, so the
        # bytes under .cairn/objects only grow.
        "checkpoint": {"period": 1000, "keep_trial_latest": 1000, "keep_trial_best": 0},
        "environment": {"CKPT_SOURCE": str(src), "CKPT_EVENTS": str(events),
                        "CKPT_PREWARM_DIR": str(store), "CKPT_RESTORE_BYTES": str(total),
                        "CKPT_OBJECTS": str(store / ".cairn" / "objects"),
                        "CKPT_SAVES": str(reps), "CKPT_RESTORES": str(reps)},
    }
    (workdir / "exp.yaml").write_text(json.dumps(config))
    proc = subprocess.run([cairn, "--store", str(store), "run", str(workdir / "exp.yaml")],
                          cwd=workdir, capture_output=True, text=True, env=clean_env(),
                          timeout=900)
    if proc.returncode != 0:
        sys.exit("bench: cairn run exited %d\n%s%s" % (proc.returncode, proc.stdout,
                                                       proc.stderr))
    listing = subprocess.run([cairn, "--store", str(store), "checkpoints", "1.1", "--json"],
                             capture_output=True, text=True, env=clean_env(), check=True)
    return read_events(events), json.loads(listing.stdout)


def analyse(events, first_file_bytes):
    saves = [e for e in events if e["kind"] == "save"]
    unchanged = next(e for e in events if e["kind"] == "unchanged")
    one = next(e for e in events if e["kind"] == "one_changed")
    crashes = [e for e in events if e["kind"] == "crash"]
    restores = [e for e in events if e["kind"] == "restored"]
    if not all(r["ok"] for r in restores):
        sys.exit("bench: a restarted trial did not find all its files")
    out = {
        "save": [e["saved"] for e in saves],
        "save_write": [e["written"] for e in saves],
        "save_commit": [e["saved"] - e["written"] for e in saves],
        "copy_out": [r["newest_file"] - r["dir_born"] for r in restores],
        "to_first_line": [r["start"] - r["dir_born"] for r in restores],
        "to_seen": [r["seen"] - r["dir_born"] for r in restores],
        "before_copy": [r["dir_born"] - c["time"] - BACKOFF_S
                        for c, r in zip(crashes, restores)],
        "unchanged_save": unchanged["saved"],
        "unchanged_new": unchanged["objects_bytes"] - saves[-1]["objects_bytes"],
        "one_changed_new": one["objects_bytes"] - unchanged["objects_bytes"],
        "same_id": unchanged["checkpoint"] == saves[-1]["checkpoint"],
        "first_file_bytes": first_file_bytes,
    }
    # Every save after the first stores its files and a manifest (the SDK's random-generator
    # file is the same each time): bytes added per save = the checkpoint + ~150 B per file.
    out["save_new"] = [b["objects_bytes"] - a["objects_bytes"] for a, b in zip(saves, saves[1:])]
    return out


def med(values):
    return statistics.median(values) if values else float("nan")


def mb_s(total, seconds):
    return total / MIB / seconds if seconds > 0 else float("inf")


def run_case(name, cairn, scratch, count, size, reps, log, keep=False):
    case = scratch / name
    src = case / "src"
    log("\n== %s: %d files of %s (%.0f MiB), %d repetitions ==" % (
        name, count, "%d KiB" % (size >> 10) if size < MIB else "%d MiB" % (size // MIB),
        count * size / MIB, reps))
    total = make_source(src, count, size)
    loads = {"start": load()}
    cp_only, cp_sync = [], []
    for i in range(reps):
        a, b = cp_sync_once(src, case / ("dst-before-%d" % i), total)
        cp_only.append(a)
        cp_sync.append(b)
    log("  cp -r + sync (before): %s s" % ", ".join("%.3f" % x for x in cp_sync[-reps:]))
    alone = sdk_standalone(src, case / "standalone", reps)
    log("  sdk standalone saves: %s s" % ", ".join("%.3f" % x for x in alone))
    loads["cairn"] = load()
    events, listing = cairn_run(cairn, src, case / "cairn", reps, total)
    loads["cairn_end"] = load()
    first = min(all_files(src))
    result = analyse(events, os.path.getsize(first))
    result["checkpoints_listed"] = len(listing)
    log("  cairn saves: %s s" % ", ".join("%.3f" % x for x in result["save"]))
    log("  cairn restores (copy-out): %s s" % ", ".join("%.3f" % x for x in result["copy_out"]))
    for i in range(reps):
        a, b = cp_sync_once(src, case / ("dst-after-%d" % i), total)
        cp_only.append(a)
        cp_sync.append(b)
    log("  cp -r + sync (after): %s s" % ", ".join("%.3f" % x for x in cp_sync[-reps:]))
    loads["end"] = load()
    if not keep:
        shutil.rmtree(case, ignore_errors=True)  # the next case has the disk to itself
    result.update(total=total, cp_only=cp_only, cp_sync=cp_sync, sdk_alone=alone, loads=loads,
                  count=count, size=size)
    return result


def report(name, r):
    total = r["total"]
    base = med(r["cp_sync"])
    rows = [
        ("cp -r + sync (baseline)", base, None),
        ("cp -r, no sync", med(r["cp_only"]), None),
        ("SDK standalone: write + fsync", med(r["sdk_alone"]), None),
        ("cairn save (to the ack)", med(r["save"]), "save"),
        ("  of which: writing the files", med(r["save_write"]), None),
        ("  of which: commit (hash, fsync, register, ack)", med(r["save_commit"]), None),
        ("cairn restore: copy-out (hash-verified, not fsynced)", med(r["copy_out"]), "restore"),
        ("  + process start -> trial's first line", med(r["to_first_line"]), None),
        ("  + cairn.init(), files seen", med(r["to_seen"]), None),
        ("  before the copy-out (exit -> dir created, - 1 s back-off)",
         med(r["before_copy"]), None),
    ]
    print("\n%s: %d files, %.0f MiB; load %s" % (
        name, r["count"], total / MIB,
        " -> ".join("%s %s" % kv for kv in r["loads"].items())))
    print("  | what | seconds (median) | MiB/s | ratio cp+sync / this |")
    print("  | --- | --- | --- | --- |")
    verdicts = {}
    for label, seconds, goal in rows:
        ratio = base / seconds if seconds > 0 else float("inf")
        print("  | %s | %.3f | %.0f | %.2f |" % (label, seconds, mb_s(total, seconds), ratio))
        if goal:
            verdicts[goal] = ratio
    for goal, ratio in verdicts.items():
        print("  goal %s >= %.1fx cp+sync: %s (%.2fx)" % (
            goal, GOAL, "meets" if ratio >= GOAL else "MISSES", ratio))
    print("  restore copy-out against cp -r without sync (cairn does not fsync the restored "
          "copy): %.2fx" % (med(r["cp_only"]) / med(r["copy_out"])))
    print("  user-visible restore (copy-out + process start + init): %.3f s = %.2fx cp+sync" % (
        med(r["to_seen"]), base / med(r["to_seen"])))
    print("  dedup: a checkpoint identical to the previous one took %.3f s and added %d B "
          "under .cairn/objects (same checkpoint id as the previous one: %s); with one file "
          "of %d B changed: +%d B; each new save added %s B; `cairn checkpoints` lists %d" % (
              r["unchanged_save"], r["unchanged_new"], r["same_id"], r["first_file_bytes"],
              r["one_changed_new"], ", ".join(str(b) for b in r["save_new"]) or "-",
              r["checkpoints_listed"]))
    return all(v >= GOAL for v in verdicts.values())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cairn", default=default_cairn())
    parser.add_argument("--reps", type=int, default=5, help="saves, restores and baselines")
    parser.add_argument("--cases", default="large,small")
    parser.add_argument("--large-mib", type=int, default=256)
    parser.add_argument("--large-files", type=int, default=4)
    parser.add_argument("--small-files", type=int, default=4096)
    parser.add_argument("--small-kib", type=int, default=16)
    parser.add_argument("--scratch", help="parent of the scratch directory (default: TMPDIR)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args()
    cairn = str(pathlib.Path(args.cairn).resolve())

    scratch = pathlib.Path(tempfile.mkdtemp(prefix="cairn-bench-checkpoint-",
                                            dir=args.scratch))
    print(machine_summary(cairn))
    print("scratch: %s" % scratch)
    log = lambda line: print(line, flush=True)  # noqa: E731
    shapes = {"large": (args.large_files, args.large_mib * MIB // args.large_files),
              "small": (args.small_files, args.small_kib << 10)}
    results = {}
    try:
        for name in args.cases.split(","):
            count, size = shapes[name]
            results[name] = run_case(name, cairn, scratch, count, size, args.reps, log,
                                     args.keep)
        ok = [report(name, r) for name, r in results.items()]
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    print("\nload average after: %s" % load())
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
