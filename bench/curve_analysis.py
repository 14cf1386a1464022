#!/usr/bin/python3
"""Why early stopping can or cannot beat random search on a problem: an analysis of the
learning curves a search-efficiency run recorded (issue 4).

Input: the JSON that `bench/search_efficiency.py --json FILE` writes. Only its `random`
runs are used: every one of their trials trained the full `max_length`, so each gives a
complete validation curve of one configuration drawn from the search space.

It prints:

1. How well a rung ranks configurations: Spearman's rank correlation between each
   configuration's val_loss at each rung (epochs 1, 3, 9, 27 for divisor 3) and its best
   val_loss over the whole curve, and where the configurations with the best curves rank
   at each rung. Successive halving keeps the top 1/divisor at every rung; a configuration
   that ranks outside that share at a low rung is stopped there, however good it would have
   become.
2. A resampling estimate of the benchmark's figure: the fraction of random search's budget
   that ASHA needs to reach random search's final best, with both searches drawing their
   configurations from the recorded curves (with replacement) instead of training them.
   ASHA is simulated as one worker running the aggressive bracket (r_min 1, rungs 1, 3, 9,
   27, 81 for R = 81): promote the best not-yet-promoted trial in the top 1/divisor of the
   highest rung that has one, else start a new configuration. Trials resume from their
   checkpoints, so a promoted trial continues its curve. Three variants:
     - asha: ranks by the val_loss at the rung, as cairn does;
     - asha-smoothed: the same on curves smoothed over 11 epochs (how much the epoch-to-epoch
       noise matters);
     - asha-oracle: ranks by each configuration's best val_loss over its whole curve, which
       no real searcher can know (what perfect low-fidelity ranking would give).
   It estimates, it does not replace the benchmark: the pool holds only the configurations
   the random runs drew, and resampling reuses them.

    /usr/bin/python3 bench/curve_analysis.py RUN.json [--trials 20,50,100] [--reps 200]
"""
import argparse
import bisect
import collections
import json
import math
import random
import statistics

DIVISOR = 3
GOAL_FRACTION = 1 / 5
DIVERGED = 10.0  # a NaN validation ranks as worse than any finite loss seen here


def load_curves(path):
    """The complete val_loss curves of every trial of every random run."""
    data = json.load(open(path))
    length = data["args"]["max_length"]
    curves = []
    for run in data["runs"]:
        if run["searcher"] != "random":
            continue
        by_trial = collections.defaultdict(dict)
        for trial, step, loss in run["validations"]:
            by_trial[trial][step] = loss if loss == loss else DIVERGED
        for steps in by_trial.values():
            # A diverged trial stops early (exit 2); it stays diverged for the rest.
            curves.append([steps.get(s, DIVERGED) for s in range(1, length + 1)])
    return curves, length


def rungs_for(length):
    rungs = [length]
    while rungs[0] % DIVISOR == 0 and rungs[0] > 1:
        rungs.insert(0, rungs[0] // DIVISOR)
    return rungs


def ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0] * len(values)
    for position, i in enumerate(order):
        out[i] = position
    return out


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb)) / (n * (n * n - 1))


def smooth(curve, half_width=5):
    return [statistics.mean(curve[max(0, i - half_width):i + half_width + 1])
            for i in range(len(curve))]


def random_search(rng, pool, trials):
    units = []
    for _ in range(trials):
        units.extend(rng.choice(pool))
    return units


def asha(rng, pool, rungs, budget, rank_key):
    """The validations of a one-worker aggressive ASHA run, in order, up to budget."""
    members = [[] for _ in rungs]  # (ranking value, trial) per rung, sorted
    promoted = [set() for _ in rungs]
    curves, units = [], []
    while len(units) < budget:
        job = None
        for r in range(len(rungs) - 2, -1, -1):
            top = members[r][:len(members[r]) // DIVISOR]
            waiting = next((t for _, t in top if t not in promoted[r]), None)
            if waiting is not None:
                job = (waiting, r)
                break
        if job is None:
            trial, start, rung = len(curves), 0, 0
            curves.append(rng.choice(pool))
        else:
            trial, r = job
            promoted[r].add(trial)
            start, rung = rungs[r], r + 1
        curve = curves[trial]
        units.extend(curve[start:rungs[rung]])
        bisect.insort(members[rung], (rank_key(curve, rungs[rung]), trial))
    return units[:budget]


def first_reach(units, target):
    for i, loss in enumerate(units):
        if loss <= target:
            return i + 1
    return math.inf


def simulate(pool, rungs, trials, reps, rank_key):
    """Median fraction of random's budget ASHA needs, and the share of reps <= the goal."""
    fractions = []
    for rep in range(reps):
        reference = random_search(random.Random(rep), pool, trials)
        target, budget = min(reference), len(reference)
        units = asha(random.Random(10 ** 6 + rep), pool, rungs, budget, rank_key)
        fractions.append(first_reach(units, target) / budget)
    return statistics.median(fractions), sum(f <= GOAL_FRACTION for f in fractions) / reps


def fmt(fraction):
    return "never (median)" if math.isinf(fraction) else "%.3f" % fraction


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("json")
    parser.add_argument("--trials", default="20,50,100",
                        help="random search sizes to simulate (comma-separated)")
    parser.add_argument("--reps", type=int, default=200)
    args = parser.parse_args()
    curves, length = load_curves(args.json)
    rungs = rungs_for(length)
    best = [min(c) for c in curves]
    top = sorted(range(len(curves)), key=lambda i: best[i])[:5]
    print("%d complete curves of %d epochs; rungs %s" % (len(curves), length, rungs))
    print("\n| rung (epoch) | Spearman vs best over the curve | ranks at this rung of the 5 best"
          " curves (0 = best of %d) |" % len(curves))
    print("| --- | --- | --- |")
    for epoch in rungs[:-1]:
        at = [c[epoch - 1] for c in curves]
        at_ranks = ranks(at)
        print("| %d | %.2f | %s |" % (epoch, spearman(at, best),
                                      ", ".join(str(at_ranks[i]) for i in top)))
    print("\nbest values of the 5 best curves: %s" %
          ", ".join("%.4f" % best[i] for i in top))

    by_rung = lambda curve, epoch: curve[epoch - 1]  # noqa: E731 (cairn's ranking)
    oracle = lambda curve, epoch: min(curve)  # noqa: E731
    smoothed = [smooth(c) for c in curves]
    print("\n| random trials | asha | asha-smoothed | asha-oracle |")
    print("| --- | --- | --- | --- |")
    for trials in [int(t) for t in args.trials.split(",")]:
        cells = []
        for pool, key in ((curves, by_rung), (smoothed, by_rung), (curves, oracle)):
            median, share = simulate(pool, rungs, trials, args.reps, key)
            cells.append("%s (%.0f %% of reps ≤ 0.2)" % (fmt(median), 100 * share))
        print("| %d | %s |" % (trials, " | ".join(cells)))
    print("\nCells: median over %d resampled searches of the fraction of random search's budget"
          " that aggressive ASHA needs to reach random search's final best (never = not within"
          " that budget)." % args.reps)


if __name__ == "__main__":
    main()
