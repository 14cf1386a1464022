"""Benchmark trial for bench/checkpoint_bench.py: a Python SDK trial that saves checkpoints
of the files under $CKPT_SOURCE (read into memory before anything is timed) and, when it
is restarted from a checkpoint, records when it could read the restored files. It appends
one JSON object per line to $CKPT_EVENTS.

A fresh start (no checkpoint to resume from):

  save    $CKPT_SAVES checkpoints in a row, each with new content (the first 8 bytes of
          every file carry the step, so no file is stored already), through
          `with ctx.checkpoint(step) as d:`. Timed: `written` (d handed out -> the files
          written and closed) and `saved` (d handed out -> the `with` block returned, i.e.
          cairn acknowledged the checkpoint: hashed, fsynced, registered).
  dedup   one checkpoint with exactly the content of the previous one, then one with the
          first file changed; each event carries `objects_bytes`, the bytes under
          $CKPT_OBJECTS after the checkpoint returned (the driver compares them).
  then it exits with status 1 (a crash): cairn restarts it from its latest checkpoint.

A restart (ctx.latest_checkpoint set): the `restored` event records `start` (the script's
first line), `seen` (cairn.init() returned and every expected file is present with its
size: the trial can read them), and the restore directory's birth time and the newest
mtime of the files in it (`stat`: cairn created the directory, then copied the files in),
so the driver can tell cairn's copy-out from the process start-up. Until $CKPT_RESTORES
restarts have been recorded it re-registers the same checkpoint (hard links of the
restored files: no new bytes, and the restart back-off stays at its first step, 1 s) and
crashes again; the last one reports a validation and completes.

Standalone (no CAIRN_CONTROL) it only saves, and the SDK writes the checkpoints to
./checkpoints/<step>/ with an fsync of every file: the driver's write+fsync baseline.
"""
import time

START = time.time()

import json  # noqa: E402  (the start time is taken before anything is imported)
import os  # noqa: E402
import pathlib  # noqa: E402
import struct  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import cairn  # noqa: E402

WRITE_CHUNK = 1 << 20


class Events:
    def __init__(self, path):
        self._file = open(path, "a", buffering=1)

    def record(self, kind, **fields):
        fields.update(kind=kind, pid=os.getpid())
        self._file.write(json.dumps(fields) + "\n")

    def count(self, path, kind):
        with open(path) as f:
            return sum(1 for line in f if json.loads(line)["kind"] == kind)


def load_source(root):
    """[(relative path, bytearray)] of every file under root, sorted."""
    files = []
    for directory, _, names in os.walk(root):
        for name in names:
            path = pathlib.Path(directory) / name
            files.append((str(path.relative_to(root)), bytearray(path.read_bytes())))
    return sorted(files)


def write_files(directory, files):
    made = set()
    for rel, data in files:
        target = directory / rel
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        # Unbuffered, 1 MiB at a time from the buffer itself, as cp does (128 KiB):
        # no temporary copy of a whole file in fresh memory.
        with open(target, "wb", buffering=0) as f:
            view = memoryview(data)
            for offset in range(0, len(view), WRITE_CHUNK):
                f.write(view[offset:offset + WRITE_CHUNK])


def objects_bytes():
    root = os.environ.get("CKPT_OBJECTS")
    if not root:
        return None
    total = 0
    for directory, _, names in os.walk(root):
        for name in names:
            total += os.lstat(os.path.join(directory, name)).st_size
    return total


def stamp(files, step):
    for _, data in files:
        data[0:8] = struct.pack("<q", step)


def prewarm(directory, size):
    """Writes and deletes `size` bytes next to `directory`. On a VM whose balloon driver
    hands free memory back to the host (virtio_balloon free page reporting), writing into
    page-cache pages freed more than about a second ago costs about ten times more than
    into pages freed just now: this makes the timed write that follows find warm pages,
    as the driver's cp baseline does."""
    scratch = pathlib.Path(directory) / (".prewarm-%d" % os.getpid())
    chunk = bytes(1 << 20)
    with open(scratch, "wb") as f:
        for _ in range(0, size, len(chunk)):
            f.write(chunk)
    os.remove(scratch)


def save(ctx, events, files, step, kind):
    os.sync()  # untimed: no earlier writes are still being flushed while this one is timed
    prewarm(os.environ.get("CKPT_PREWARM_DIR", "."), sum(len(d) for _, d in files))
    with ctx.checkpoint(step) as directory:
        handed = time.time()
        write_files(directory, files)
        written = time.time()
    saved = time.time()
    events.record(kind, step=step, written=written - handed, saved=saved - handed,
                  objects_bytes=objects_bytes(), checkpoint=ctx.latest_checkpoint_id)


def fresh(ctx, events, files):
    saves = int(os.environ.get("CKPT_SAVES", "5"))
    step = 0
    for _ in ctx.operations():
        for _ in range(saves):
            step += 1
            stamp(files, step)
            save(ctx, events, files, step, "save")
        if os.environ.get("CAIRN_CONTROL") is None:
            return  # standalone: the baseline saves only
        step += 1  # the same bytes as the checkpoint before
        save(ctx, events, files, step, "unchanged")
        step += 1  # one file changed
        files[0][1][0:8] = struct.pack("<q", -step)
        save(ctx, events, files, step, "one_changed")
        crash(events)  # a crash: cairn restarts the trial from this checkpoint


def crash(events):
    """Exits with status 1, so cairn restarts the trial from its latest checkpoint."""
    os.sync()  # the restore that follows is timed: nothing of ours is left to flush
    if os.environ.get("CKPT_RESTORE_BYTES"):  # cairn's copy-out will find warm pages
        prewarm(os.environ.get("CKPT_PREWARM_DIR", "."), int(os.environ["CKPT_RESTORE_BYTES"]))
    events.record("crash", time=time.time())
    sys.stdout.flush()
    os._exit(1)


def birth_time(path):
    """The birth time of path (statx, through stat(1): Python's os.stat has no st_birthtime
    on Linux), in seconds since the epoch, to the nanosecond the file system keeps."""
    text = subprocess.run(["stat", "-c", "%w", str(path)], capture_output=True,
                          text=True).stdout.strip()  # 2026-11-23 05:00:59.981680367 +0000
    if not text or text == "-":
        return float("nan")
    day, clock, zone = text.split()
    whole, _, fraction = clock.partition(".")
    seconds = subprocess.run(["date", "-d", "%s %s %s" % (day, whole, zone), "+%s"],
                             capture_output=True, text=True).stdout.strip()
    return int(seconds) + float("0." + (fraction or "0"))


def source_sizes(root):
    """{relative path: size} of the files under root (no content: nothing to read)."""
    sizes = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = pathlib.Path(directory) / name
            sizes[str(path.relative_to(root))] = path.stat().st_size
    return sizes


def restarted(ctx, events, events_path, init_done):
    restored = ctx.latest_checkpoint
    expected = source_sizes(os.environ["CKPT_SOURCE"])
    ok = all((restored / rel).is_file() and (restored / rel).stat().st_size == size
             for rel, size in expected.items())
    seen = time.time()
    newest = 0.0
    for directory, _, names in os.walk(restored):
        for name in names:
            newest = max(newest, os.lstat(os.path.join(directory, name)).st_mtime)
    events.record("restored", start=START, init=init_done, seen=seen, ok=ok,
                  dir_born=birth_time(restored), newest_file=newest, step=ctx.steps_completed)
    restores = int(os.environ.get("CKPT_RESTORES", "5"))
    step = ctx.steps_completed
    for op in ctx.operations():
        if events.count(events_path, "restored") < restores:
            # The same checkpoint again, by hard links: registering it keeps the back-off
            # at 1 s (a checkpoint since the last start) and adds no bytes.
            with ctx.checkpoint(step + 1) as directory:
                for rel in expected:
                    (directory / rel).parent.mkdir(parents=True, exist_ok=True)
                    os.link(restored / rel, directory / rel)
            crash(events)
        ctx.report_validation(op.length, {"val_loss": 0.0})


def main():
    events_path = os.environ["CKPT_EVENTS"]
    events = Events(events_path)
    ctx = cairn.init()
    init_done = time.time()
    if ctx.latest_checkpoint is None:
        fresh(ctx, events, load_source(os.environ["CKPT_SOURCE"]))
    else:
        restarted(ctx, events, events_path, init_done)


if __name__ == "__main__":
    main()
