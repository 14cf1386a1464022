"""Benchmark trial for bench/recovery_bench.py: a Python SDK trial that takes one training
step every STEP_S seconds (default 0.05), reports a training metric per step, checkpoints
a tiny file whenever cairn says a checkpoint is due, and appends a timestamped line per
event to the file named by $RECOVERY_EVENTS:

    <time.time()> <pid> start              first line of the script (before `import cairn`)
    <time.time()> <pid> init               cairn.init() returned (handshake done)
    <time.time()> <pid> restored <step>    the checkpoint was read (step 0: none)
    <time.time()> <pid> step <step>        a training step was completed and reported
    <time.time()> <pid> checkpoint <step>  cairn acknowledged a checkpoint
    <time.time()> <pid> exit <step>        operations() ended (done, paused or orphaned)

Standalone (no CAIRN_CONTROL) it trains from $CAIRN_LATEST_CHECKPOINT to $CAIRN_MAX_LENGTH,
which is how the driver measures the trial's own start-up and restore time.
"""
import time

START = time.time()

import os  # noqa: E402  (the start time is taken before anything is imported)

import cairn  # noqa: E402

STEP_S = float(os.environ.get("RECOVERY_STEP_S", "0.05"))


class Events:
    def __init__(self, path):
        # Line-buffered appends: a line is in the file the moment it is recorded, so a
        # kill -9 loses nothing recorded before it.
        self._file = open(path, "a", buffering=1)
        self._pid = os.getpid()

    def record(self, what, when=None):
        self._file.write("%.6f %d %s\n" % (time.time() if when is None else when, self._pid,
                                           what))


def restore(ctx):
    if ctx.latest_checkpoint is None:
        return 0
    with open(ctx.latest_checkpoint / "state.txt") as f:
        return int(f.read())


def main():
    events = Events(os.environ["RECOVERY_EVENTS"])
    events.record("start", START)
    ctx = cairn.init()
    events.record("init")
    step = restore(ctx)
    events.record("restored %d" % step)
    for op in ctx.operations():
        while step < op.length:
            time.sleep(STEP_S)
            step += 1
            ctx.report_training(step, {"loss": 1.0 / step})
            events.record("step %d" % step)
            if ctx.checkpoint_due(step):
                with ctx.checkpoint(step) as directory:
                    (directory / "state.txt").write_text(str(step))
                events.record("checkpoint %d" % step)
                if ctx.should_preempt():
                    events.record("exit %d" % step)
                    return
        ctx.report_validation(step, {"val_loss": 1.0 / step})
    events.record("exit %d" % step)


if __name__ == "__main__":
    main()
