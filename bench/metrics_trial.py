"""Benchmark trial: how much does reporting training metrics through cairn cost a Python
trial? It reports N training points (one metric, "loss", per step) and times its own
reporting loop, either through the Python SDK (under `cairn run`) or, as the baseline,
by writing the same points as JSON lines to a local file.

    metrics_trial.py cairn RESULT.json [N]   under cairn run
    metrics_trial.py jsonl RESULT.json [N]   standalone; writes RESULT.json.jsonl
    metrics_trial.py ... --profile           also prints a cProfile of the loop on stderr

RESULT.json gets {"mode", "points", "loop_s", "total_s", "cpu_s"}: loop_s is the loop
alone, total_s also counts until every point is delivered (the file closed, or cairn's
ack of the validation that follows the last training batch), cpu_s is the CPU time this
process used in that span (all its threads). bench/metrics_bench.py runs both.
"""
import json
import sys
import time


def loss_at(step):
    return 2.5 / (1.0 + 1e-3 * step)


def write_result(path, mode, points, loop_s, total_s, cpu_s):
    with open(path, "w") as f:
        json.dump({"mode": mode, "points": points, "loop_s": loop_s, "total_s": total_s,
                   "cpu_s": cpu_s}, f)


def jsonl_loop(f, points):
    # What a trial without cairn would do: one compact JSON object per line.
    encode = json.JSONEncoder(separators=(",", ":")).encode
    for step in range(1, points + 1):
        f.write('{"step":%d,"metrics":%s}\n' % (step, encode({"loss": loss_at(step)})))


def run_jsonl(result, points, profile):
    start, cpu_start = time.perf_counter(), time.process_time()
    with open(result + ".jsonl", "w") as f:
        profiled(profile, jsonl_loop, f, points)
        loop_s = time.perf_counter() - start
    write_result(result, "jsonl", points, loop_s, time.perf_counter() - start,
                 time.process_time() - cpu_start)


def cairn_loop(ctx, first, points):
    for step in range(first, points + 1):
        ctx.report_training(step, {"loss": loss_at(step)})


def run_cairn(result, points, profile):
    import cairn
    ctx = cairn.init()
    step = ctx.steps_completed
    for op in ctx.operations():
        # The whole budget in the first operation; any later one has nothing left to do.
        start, cpu_start = time.perf_counter(), time.process_time()
        profiled(profile, cairn_loop, ctx, step + 1, points)
        step = max(step, points)
        loop_s = time.perf_counter() - start
        # The validation's ack comes after cairn has stored everything sent before it.
        if not ctx.report_validation(op.length, {"val_loss": 1.0}):
            sys.exit(1)
        write_result(result, "cairn", points, loop_s, time.perf_counter() - start,
                     time.process_time() - cpu_start)


def profiled(profile, function, *args):
    if not profile:
        return function(*args)
    import cProfile
    import pstats
    profiler = cProfile.Profile()
    profiler.runcall(function, *args)
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(12)


def main():
    args = [a for a in sys.argv[1:] if a != "--profile"]
    profile = len(args) != len(sys.argv) - 1
    if len(args) < 2 or args[0] not in ("cairn", "jsonl"):
        sys.exit("usage: metrics_trial.py cairn|jsonl RESULT.json [POINTS] [--profile]")
    points = int(args[2]) if len(args) > 2 else 1_000_000
    (run_cairn if args[0] == "cairn" else run_jsonl)(args[1], points, profile)


if __name__ == "__main__":
    main()
