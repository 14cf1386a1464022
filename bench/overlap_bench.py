#!/usr/bin/python3
"""Benchmark: builtin:mlp data parallel on 2 ranks, gradient all-reduce overlapped with the
backward pass (`allreduce: overlap`, buckets started as the backward pass produces them)
against all-reduce after the backward pass (`allreduce: after_backward`, the same buckets
reduced one after another once the pass is done). Both give the same bits; only the
timing differs.

Each variant runs as a real trial (`cairn run`, `resources.slots_per_trial: 2`). Its time
per epoch is the difference between the wall times of a run of E2 epochs and a run of E1
epochs, divided by E2 − E1, which leaves out start-up, data generation, the rendezvous
and the final checkpoint. The variants alternate, repeated --reps times; medians are
reported, and the ratio after_backward / overlap (> 1: overlapping saves time).

    /usr/bin/python3 bench/overlap_bench.py [--cairn BIN] [--reps 3] [--threads 1]
        [--hidden 512] [--layers 3] [--batch-size 256] [--samples 40000] [--bucket-kb 512]
"""
import argparse
import pathlib
import statistics
import tempfile
import time

from bench_common import default_cairn, machine_summary, run_checked

E1, E2 = 1, 4


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cairn", default=default_cairn())
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="BLAS threads per rank")
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--samples", type=int, default=40000)
    p.add_argument("--bucket-kb", type=int, default=512)
    return p.parse_args()


CONFIG = """name: overlap-{mode}-{epochs}
entrypoint: builtin:mlp
hyperparameters: {{device: cpu, dataset: teacher, features: 64, classes: 10, samples: {samples}, hidden: {hidden},
  layers: {layers}, batch_size: {batch}, threads: {threads}, allreduce: {mode}, bucket_kb: {bucket}}}
searcher: {{name: single, metric: val_loss, max_length: {epochs}}}
resources: {{slots_per_trial: 2}}
checkpoint: {{period: 1000}}
"""


def wall(args, workdir, mode, epochs):
    path = pathlib.Path(workdir) / ("%s-%d.yaml" % (mode, epochs))
    path.write_text(CONFIG.format(mode=mode, epochs=epochs, samples=args.samples, hidden=args.hidden,
                                  layers=args.layers, batch=args.batch_size, threads=args.threads,
                                  bucket=args.bucket_kb))
    start = time.monotonic()
    run_checked([args.cairn, "run", path.name, "--slots", "2"], cwd=workdir, env={"NO_COLOR": "1"})
    return time.monotonic() - start


def main():
    args = parse_args()
    print(machine_summary(args.cairn))
    params = 64 * args.hidden + args.hidden + (args.layers - 1) * (args.hidden * args.hidden + args.hidden) \
        + args.hidden * 10 + 10
    print("model: 64 → %d × %d → 10 (%d parameters, %.1f MB of gradients per step); batch %d; "
          "%d rows (80%% train); BLAS threads per rank %d; buckets ≥ %d KiB"
          % (args.hidden, args.layers, params, params * 4 / 1e6, args.batch_size, args.samples,
             args.threads, args.bucket_kb))
    per_epoch = {"overlap": [], "after_backward": []}
    with tempfile.TemporaryDirectory(prefix="cairn-overlap-") as workdir:
        for rep in range(args.reps):
            for mode in per_epoch:
                short = wall(args, workdir, mode, E1)
                long = wall(args, workdir, mode, E2)
                per_epoch[mode].append((long - short) / (E2 - E1))
                print("rep %d %-15s %.3f s/epoch" % (rep + 1, mode, per_epoch[mode][-1]), flush=True)
    train_rows = int(args.samples * 0.8)
    print("\n| allreduce | s/epoch (median) | samples/s | steps/s |")
    print("| --- | ---: | ---: | ---: |")
    steps = -(-train_rows // args.batch_size)
    for mode, times in per_epoch.items():
        t = statistics.median(times)
        print("| %s | %.3f | %.0f | %.1f |" % (mode, t, train_rows / t, steps / t))
    ratio = statistics.median(per_epoch["after_backward"]) / statistics.median(per_epoch["overlap"])
    print("\nafter_backward / overlap step time: %.2f× (> 1: overlapping saves time)" % ratio)


if __name__ == "__main__":
    main()
