#!/usr/bin/python3
"""Benchmark: search efficiency on builtin:mlp and PyTorch, in training units (issues 4, 18).

ASHA and Hyperband (cairn's searchers), cairn's TPE sampler alone and inside ASHA and
Hyperband (BOHB), and Optuna's TPE sampler alone and with its HyperbandPruner, against
cairn's random search with the same budget of training units, over several seeds:
the best validation loss each reaches within that budget, and the fraction of random
search's budget each needs to reach random search's final best. Goal: <= 1/5.

Problems (--problem; the same for every searcher of a run): `spirals` (default), `teacher`
and `digits` on builtin:mlp (below), and `torch-digits`, the same search space on a PyTorch
MLP trial on scikit-learn's digits (bench/torch_digits_trial.py: a fixed 80/20 split, one
torch thread). Optuna's drivers run that same script standalone (the Python SDK without
CAIRN_CONTROL takes CAIRN_HPARAMS, CAIRN_SEED, CAIRN_DETERMINISTIC and CAIRN_MAX_LENGTH from
the environment and prints each epoch's validation on stderr, with 6 significant digits);
an epoch the script reports as diverged (it exits 2 without a validation, so under cairn
it is no unit) is reported to Optuna as NaN and the trial pruned.

The default problem: builtin:mlp on `spirals` with 5 arms and angle
noise 0.4 (3,000 rows: 2,400 train / 600 validation), one unit = one epoch, `max_length`
R = 81 epochs, val_loss to minimise, `deterministic: true` (one BLAS thread, bit-exact).
The search space makes hyperparameters matter (most random draws stay near chance,
val_loss ~1.6; good ones reach ~0.4):

    optimizer    {sgd, adam}                 lr            10^U(-4.5, 0) (log)
    momentum     {0, 0.5, 0.9, 0.99}          hidden        {8, 16, 32, 64, 128, 256}
    layers       int 1..4                     batch_size    {8, 32, 128, 512}
    weight_decay {0, 1e-4, 1e-3, 1e-2}

Searchers (each run one trial at a time, so that the order of the validations, hence the
units spent before each, is well defined and timing-independent; each with its own
experiment seed, the run's seed + 0/100/200/300, since cairn samples trial k from
(experiment seed, k) whatever the searcher and one seed would hand ASHA and Hyperband random
search's very configurations):

  random     cairn `random`, max_trials N (default 20): the budget B = the units it trains
             (N x R = 1,620 unless a trial diverges).
  asha       cairn `asha`, divisor 3, max_rungs 5 (rungs 1, 3, 9, 27, 81), mode standard,
             max_trials M (default chosen so that it trains about B units).
  hyperband  cairn `hyperband`, divisor 3, min_length 1: one iteration, 143 trials, 1,581
             units (R = 81).
  tpe        cairn `tpe` (random search with `sampler: tpe`, TPE's defaults: 10 startup
             trials), max_trials = --tpe-trials (default: random's N, so the same budget).
  bohb       cairn `asha` as above with `sampler: tpe` (BOHB's rule, docs/search.md).
  bohb-hb    cairn `hyperband` as above with `sampler: tpe`.
  pbt        cairn `pbt`: population_size = random's N, perturbation_interval 9 (default
             --pbt-interval), quantile_fraction 0.25, each trained to R, so the same total
             units as random search (N x R); lr, momentum, batch_size and weight_decay are
             perturbed by the defaults (numeric x 0.8 or 1.2, categorical resampled with
             probability 0.25), the optimizer and architecture are kept (a clone continues
             its parent's weights and optimizer state). Its figure is the best within the
             same total units.
  optuna-tpe Optuna's TPESampler(seed) alone (no pruner): every trial trains to R; the study
             stops once it has spent B units. Otherwise as optuna-tpe-hb.
  optuna-tpe-hb
             Optuna (Debian's python3-optuna) TPESampler(seed) + HyperbandPruner(min_resource
             1, max_resource R, reduction_factor 3), sequential, the study stopped once it has
             spent B units. Each Optuna trial runs the very same trainer, `cairn __builtin-mlp`
             (builtin:mlp standalone: the C++ SDK without CAIRN_CONTROL takes CAIRN_HPARAMS,
             CAIRN_SEED, CAIRN_DETERMINISTIC and CAIRN_MAX_LENGTH=R from the environment and
             prints each epoch's validation on stderr); the objective reads the validations
             as they come, reports each to Optuna (trial.report(val_loss, epoch)), asks
             trial.should_prune(), and kills the process when pruned. The returned value is
             the val_loss at epoch R. A diverged epoch (val_loss NaN) is reported and the trial
             pruned (TPE then ranks it worst at that step, as cairn ranks an errored trial).
             Units: the epochs the objective consumed; the process may have run an epoch or
             two ahead in the pipe before it was killed, which is not counted (an in-process
             training loop would not have trained them).
  optuna-random-hb
             Optuna's RandomSampler(seed) with the same HyperbandPruner: a diagnostic that
             separates what Optuna's pruner does from what its TPE does.

Unit accounting. builtin:mlp validates after every epoch and every epoch is a unit, so the
units a search trains are its validation reports (`cairn metrics TRIAL --json`, one entry
per step; a promoted trial resumes from its checkpoint and reports only the new epochs;
max_restarts is 0, so nothing is retrained). cairn's CLI has no timestamps on metrics, so
the order comes from `cairn run --slots 1`'s own notes: "trial E.N started (pid P) [from
checkpoint C (K units done)]". With one slot the trial processes run one after the other,
so trial N's segment started at K covers its validations K+1 ... up to where its next
segment starts (or its last). The script checks that the segments cover every validation
exactly once. Cumulative units at the i-th validation = i.

Figures, per run (every val_loss taken at 6 significant digits, the precision Optuna's
drivers read from the standalone trainer, so that cairn's and Optuna's runs are compared
alike): `best` = the lowest val_loss among the validations within the first B
units (B = the random run's units for that seed; every validation of every epoch counts,
as a keep-best checkpoint would keep it); `units` = units it trained in all; `to_target`
= the cumulative units at the first validation <= the random run's final best (same seed);
`fraction` = to_target / B ("-" when never reached). Medians over seeds; a fraction that
was not reached counts as infinite. Also the median over all searcher-seed x random-seed
pairs, which does not lean on one random run's luck.

    /usr/bin/python3 bench/search_efficiency.py [--cairn BIN] [--seeds 1,2,3,4,5]
        [--searchers random,asha,hyperband,tpe,bohb,bohb-hb,pbt,optuna-tpe,optuna-tpe-hb,
                     optuna-random-hb] [--baseline-cairn BIN]
        [--random-trials 20] [--tpe-trials N] [--asha-trials 220] [--max-length 81]
        [--jobs 2] [--tolerance 0.05] [--json FILE] [--cache DIR] [--keep] [--workdir DIR]
    /usr/bin/python3 bench/search_efficiency.py --from-json FILE

--jobs runs that many searches at once (each is single-threaded; the figures do not
depend on it). --cache keeps each finished run in DIR, keyed by (searcher, seed) and every
setting that changes its result, and takes it from there next time: a suite can be
completed across several sittings, and re-run in parts (delete a file to redo that run).
The default list of searchers is the original four (random, asha, hyperband,
optuna-tpe-hb); name the others with --searchers. A --json file written before the
optuna searchers had their own names calls optuna-tpe-hb "tpe"; --from-json reads it so. --tolerance adds the units to get within that share of the target (less
at the mercy of one lucky epoch). --json writes every run's validation sequence and
figures; --from-json prints the tables of such a file again without running anything.
--baseline-cairn BIN runs the random baseline with another binary (and takes it from the
cache as that binary's run): random search's runs do not change between builds that leave
random sampling alone, so a new build's searchers can be measured against the cached ones.
About 10 minutes at the defaults on 2 busy cores; the figures are deterministic.
"""
import argparse
import concurrent.futures
import hashlib
import json
import math
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import default_cairn, machine_summary

GOAL_FRACTION = 1 / 5
DIVISOR = 3
MAX_RUNGS = 5
# Each searcher's experiment seed is the run's seed plus its offset. cairn samples trial k
# from (experiment seed, k) whatever the searcher, so with one seed ASHA's and Hyperband's
# first trials would be random search's very configurations (and trial seeds); the offsets
# make every run an independent sample.
SEED_OFFSET = {"random": 0, "asha": 100, "hyperband": 200, "optuna-tpe-hb": 300, "tpe": 400,
               "bohb": 500, "bohb-hb": 600, "optuna-tpe": 700, "pbt": 800,
               "optuna-random-hb": 900}
OPTUNA = ("optuna-tpe", "optuna-tpe-hb", "optuna-random-hb")

# The problems (--problem): constants passed to builtin:mlp as hyperparameters. Every searcher
# of a run tunes the same one. `digits` is scikit-learn's bundled digits set (1,797 8x8
# images, 64 features, 10 classes) exported to CSV by export_digits().
PROBLEMS = {
    "spirals": {"device": "cpu", "dataset": "spirals", "classes": 5, "noise": 0.4},
    "teacher": {"device": "cpu", "dataset": "teacher", "samples": 4000, "noise": 0.5},
    "digits": {"device": "cpu", "dataset": None},  # the CSV's absolute path, set in main()
    # PyTorch: bench/torch_digits_trial.py (its own constants), run by /usr/bin/python3.
    "torch-digits": {},
}
TORCH_TRIAL = pathlib.Path(__file__).resolve().parent / "torch_digits_trial.py"
SDK_PYTHON = pathlib.Path(__file__).resolve().parent.parent / "sdk" / "python"
PROBLEM = dict(PROBLEMS["spirals"])
PROBLEM_NAME = "spirals"
LR_EXPONENTS = (-4.5, 0.0)
CHOICES = {
    "optimizer": ["sgd", "adam"],
    "momentum": [0.0, 0.5, 0.9, 0.99],
    "hidden": [8, 16, 32, 64, 128, 256],
    "batch_size": [8, 32, 128, 512],
    "weight_decay": [0.0, 0.0001, 0.001, 0.01],
}
LAYERS = (1, 4)

STARTED = re.compile(r"^cairn: trial (\d+)\.(\d+) started \(pid \d+\)"
                     r"(?: from checkpoint \S+ \((\d+) units done\))?")
STANDALONE_VALIDATION = re.compile(r"^cairn: step (\d+) validation:.*\bval_loss=(\S+)")
TORCH_DIVERGED = re.compile(r"^torch_digits_trial: diverged at epoch (\d+)")


def export_digits(directory):
    """Writes scikit-learn's digits set as CSV (64 features, then the label) under
    `directory` once; returns its absolute path and the file's SHA-256."""
    path = pathlib.Path(directory).resolve() / "digits.csv"
    if not path.exists():
        from sklearn.datasets import load_digits
        data = load_digits()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            for row, label in zip(data.data, data.target):
                f.write(",".join("%g" % v for v in row) + ",%d\n" % label)
        os.replace(tmp, path)
    return str(path), hashlib.sha256(path.read_bytes()).hexdigest()


def set_problem(name, data_dir):
    """Makes `name` the problem every function here tunes; returns what identifies it for
    the cache (the problem, with the CSV's digest in place of its path)."""
    global PROBLEM, PROBLEM_NAME
    PROBLEM_NAME = name
    PROBLEM = dict(PROBLEMS[name])
    identity = dict(PROBLEM)
    if name == "torch-digits":  # the trial script is part of the problem
        identity["trial_sha256"] = hashlib.sha256(TORCH_TRIAL.read_bytes()).hexdigest()
    if name == "digits":
        PROBLEM["dataset"], identity["dataset"] = export_digits(data_dir)
    return identity


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env.update(extra or {})
    return env


def cairn_space():
    space = dict(PROBLEM)
    space["lr"] = {"type": "log", "minval": LR_EXPONENTS[0], "maxval": LR_EXPONENTS[1],
                   "base": 10}
    space["layers"] = {"type": "int", "minval": LAYERS[0], "maxval": LAYERS[1]}
    for name, vals in CHOICES.items():
        space[name] = {"type": "categorical", "vals": vals}
    return space


def searcher_config(name, args):
    searcher = {"name": name, "metric": "val_loss", "smaller_is_better": True,
                "max_length": args.max_length}
    if name == "random":
        searcher["max_trials"] = args.random_trials
    elif name == "asha":
        searcher.update(max_trials=args.asha_trials, divisor=DIVISOR, max_rungs=MAX_RUNGS,
                        mode=args.asha_mode)
    elif name == "hyperband":
        searcher.update(divisor=DIVISOR, min_length=1)
    elif name == "tpe":
        searcher["max_trials"] = args.tpe_trials or args.random_trials
    elif name == "bohb":
        searcher = dict(searcher_config("asha", args), sampler="tpe")
    elif name == "bohb-hb":
        searcher = dict(searcher_config("hyperband", args), sampler="tpe")
    elif name == "pbt":
        # A population as large as random's trials, each trained to R: the same total
        # units as random search. Only the training hyperparameters are perturbed: a clone
        # continues its parent's weights, so its architecture (hidden, layers) and optimizer
        # (whose state the checkpoint holds) stay the parent's.
        searcher.update(population_size=args.random_trials,
                        perturbation_interval=args.pbt_interval,
                        perturbations={"optimizer": {"resample_probability": 0},
                                       "hidden": {"resample_probability": 0},
                                       "layers": {"factors": [1.0]}})
    return searcher


# -- cairn's searchers --------------------------------------------------------------------------


def cairn_json(cairn, store, *argv):
    proc = subprocess.run([cairn, "--store", str(store), *argv, "--json"], capture_output=True,
                          text=True, env=clean_env())
    if proc.returncode != 0:
        raise RuntimeError("cairn %s: exit %d: %s" % (" ".join(argv), proc.returncode,
                                                      proc.stderr.strip()[-500:]))
    return json.loads(proc.stdout)


def as_loss(value):
    return float("nan") if value is None else float(value)


def run_cairn_search(cairn, name, seed, args, workdir):
    """Runs one cairn search with one slot; returns its validations in the order they were
    made: [(trial, step, val_loss)]."""
    torch = PROBLEM_NAME == "torch-digits"
    if torch:
        shutil.copy(TORCH_TRIAL, workdir / TORCH_TRIAL.name)
    config = {
        "name": "search-eff-%s-%d" % (name, seed),
        "entrypoint": "/usr/bin/python3 " + TORCH_TRIAL.name if torch else "builtin:mlp",
        "hyperparameters": cairn_space(),
        "searcher": searcher_config(name, args),
        "max_restarts": 0,  # a diverged trial stops (exit 2); a restart would diverge again
        "checkpoint": {"period": args.max_length},  # the decision points checkpoint anyway
        "reproducibility": {"seed": seed + SEED_OFFSET[name], "deterministic": True},
    }
    (workdir / "exp.yaml").write_text(json.dumps(config, indent=1))  # JSON is YAML
    subprocess.run([cairn, "init", str(workdir)], check=True, capture_output=True,
                   env=clean_env())
    with open(workdir / "run.out", "w") as out:
        rc = subprocess.run([cairn, "--store", str(workdir), "run", "exp.yaml", "--slots", "1"],
                            cwd=workdir, stdout=out, stderr=subprocess.STDOUT,
                            env=clean_env()).returncode
    if rc != 0:
        raise RuntimeError("%s seed %d: cairn run exited %d (see %s)" %
                           (name, seed, rc, workdir / "run.out"))
    shown = cairn_json(cairn, workdir, "show", "1")
    trials = {}
    for t in shown["trials"]:
        number = int(t["id"].split(".")[1])
        metrics = cairn_json(cairn, workdir, "metrics", t["id"])
        trials[number] = {
            "state": t["state"],
            "restarts": t.get("restarts", 0),
            "steps_completed": t.get("steps_completed", 0),
            "validation": [(v["step"], as_loss(v["metrics"].get("val_loss")))
                           for v in metrics["validation"]],
        }
    order = order_validations(workdir / "run.out", trials)
    return {"validations": order, "trials": len(trials),
            "states": count(t["state"] for t in trials.values()),
            "restarts": sum(t["restarts"] for t in trials.values()),
            "steps_completed": sum(t["steps_completed"] for t in trials.values())}


def order_validations(run_log, trials):
    """The validations of all trials in the order they were made, from the `started` notes
    of a one-slot run (see the module's docstring)."""
    segments = []  # (trial, units done at its start)
    with open(run_log) as f:
        for line in f:
            m = STARTED.match(line)
            if m:
                segments.append((int(m.group(2)), int(m.group(3) or 0)))
    ordered, used = [], set()
    for i, (trial, start) in enumerate(segments):
        later = [s for t, s in segments[i + 1:] if t == trial]
        end = later[0] if later else math.inf
        for step, loss in trials[trial]["validation"]:
            if start < step <= end:
                if (trial, step) in used:
                    raise RuntimeError("trial %d step %d falls in two segments" % (trial, step))
                used.add((trial, step))
                ordered.append((trial, step, loss))
    every = {(t, s) for t, v in trials.items() for s, _ in v["validation"]}
    if every != used:
        raise RuntimeError("%d validations not placed in any segment of %s" %
                           (len(every - used), run_log))
    return ordered


def count(values):
    counts = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return counts


# -- Optuna: TPE + HyperbandPruner driving the same trainer standalone --------------------------


def trial_seed(seed, number, name):
    text = "tpe:%d:%d" % (seed + SEED_OFFSET[name], number)
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:4], "little")


def drive_tpe(args):
    """Runs one Optuna study in this process; prints its result as JSON on stdout."""
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    cairn, seed, budget, length = args.cairn, args.drive_seed, args.drive_budget, args.max_length
    name = args.drive_tpe
    torch = PROBLEM_NAME == "torch-digits"
    validations = []  # (trial, step, val_loss), in the order the objective consumed them

    def objective(trial):
        hparams = dict(PROBLEM)
        hparams["optimizer"] = trial.suggest_categorical("optimizer", CHOICES["optimizer"])
        hparams["lr"] = trial.suggest_float("lr", 10 ** LR_EXPONENTS[0], 10 ** LR_EXPONENTS[1],
                                            log=True)
        hparams["momentum"] = trial.suggest_categorical("momentum", CHOICES["momentum"])
        hparams["hidden"] = trial.suggest_categorical("hidden", CHOICES["hidden"])
        hparams["layers"] = trial.suggest_int("layers", LAYERS[0], LAYERS[1])
        hparams["batch_size"] = trial.suggest_categorical("batch_size", CHOICES["batch_size"])
        hparams["weight_decay"] = trial.suggest_categorical("weight_decay",
                                                            CHOICES["weight_decay"])
        env = clean_env({"CAIRN_HPARAMS": json.dumps(hparams),
                         "CAIRN_SEED": str(trial_seed(seed, trial.number, name)),
                         "CAIRN_DETERMINISTIC": "1", "CAIRN_MAX_LENGTH": str(length),
                         "CAIRN_CHECKPOINT_PERIOD": "0"})
        if torch:
            # The Python SDK standalone, from this checkout, as cairn puts its own copy
            # first on PYTHONPATH for a trial.
            env["PYTHONPATH"] = os.pathsep.join(
                [str(SDK_PYTHON)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
            command = ["/usr/bin/python3", str(TORCH_TRIAL)]
        else:
            command = [cairn, "__builtin-mlp"]
        final = None
        with tempfile.TemporaryDirectory(prefix="tpe-trial-") as cwd:  # its ./checkpoints
            proc = subprocess.Popen(command, cwd=cwd, env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            tail = []
            try:
                for line in proc.stderr:
                    tail = (tail + [line])[-5:]
                    diverged = TORCH_DIVERGED.match(line) if torch else None
                    if diverged:
                        # The PyTorch trial exits 2 at a non-finite epoch without reporting
                        # it (under cairn that epoch is no validation, so no unit either):
                        # Optuna ranks it worst at that step, as for builtin:mlp's NaN.
                        trial.report(float("nan"), int(diverged.group(1)))
                        raise optuna.TrialPruned()
                    m = STANDALONE_VALIDATION.match(line)
                    if not m:
                        continue
                    step, loss = int(m.group(1)), float(m.group(2))
                    validations.append((trial.number, step, loss))
                    trial.report(loss, step)
                    if not math.isfinite(loss):
                        raise optuna.TrialPruned()  # diverged: worst at this step
                    if trial.should_prune():
                        raise optuna.TrialPruned()
                    final = loss if step == length else None
            finally:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                proc.stderr.close()
        if proc.returncode != 0 or final is None:
            raise RuntimeError("%s exited %d without reaching epoch %d: %s" %
                               (command[-1], proc.returncode, length, "".join(tail)))
        return final

    def stop_at_budget(study, _trial):
        if len(validations) >= budget:
            study.stop()

    pruner = (optuna.pruners.HyperbandPruner(min_resource=1, max_resource=length,
                                             reduction_factor=DIVISOR)
              if name.endswith("-hb") else optuna.pruners.NopPruner())
    sampler = (optuna.samplers.RandomSampler(seed=seed + SEED_OFFSET[name])
               if name == "optuna-random-hb"
               else optuna.samplers.TPESampler(seed=seed + SEED_OFFSET[name]))
    study = optuna.create_study(
        study_name="search-eff-%s-%d" % (name, seed), direction="minimize",
        sampler=sampler, pruner=pruner)
    study.optimize(objective, n_trials=100000, callbacks=[stop_at_budget])
    print(json.dumps({"validations": validations, "trials": len(study.trials),
                      "states": count(t.state.name for t in study.trials), "restarts": 0,
                      "optuna": optuna.__version__}))


def run_optuna(name, cairn, seed, budget, args, workdir):
    command = [sys.executable, os.path.abspath(__file__), "--drive-tpe", name, "--cairn", cairn,
               "--problem", PROBLEM_NAME, "--data-dir", args.data_dir,
               "--drive-seed", str(seed), "--drive-budget", str(budget),
               "--max-length", str(args.max_length)]
    proc = subprocess.run(command, cwd=workdir, capture_output=True, text=True)
    (workdir / "tpe.err").write_text(proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError("%s seed %d exited %d: %s" % (name, seed, proc.returncode,
                                                         proc.stderr[-2000:]))
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["validations"] = [tuple(v) for v in result["validations"]]
    return result


# -- the cache ----------------------------------------------------------------------------------


def cairn_for(args, name):
    """The binary that runs `name`: --baseline-cairn for random when given, else --cairn."""
    return args.baseline_cairn if name == "random" and args.baseline_cairn else args.cairn


def cache_path(args, name, seed, budget):
    """Where --cache keeps the run of `name` with `seed`: the file name holds a digest of
    everything that changes the run's result (the problem, the searcher's settings, the
    budget an Optuna study stops at, the cairn binary's version), so a changed setting is a
    different file, never a stale hit."""
    if not args.cache:
        return None
    version = subprocess.run([cairn_for(args, name), "version"], capture_output=True, text=True,
                             env=clean_env()).stdout.strip()
    space = cairn_space()
    space.update(args.problem_identity)  # a CSV by its digest, not its path
    key = json.dumps({"problem": args.problem_identity, "space": space, "seed": seed,
                      "offset": SEED_OFFSET[name], "budget": budget,
                      "searcher": None if name in OPTUNA else searcher_config(name, args),
                      "max_length": args.max_length, "cairn": version}, sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return pathlib.Path(args.cache) / ("%s-%s-seed%d-%s.json" % (PROBLEM_NAME, name, seed, digest))


# -- the figures --------------------------------------------------------------------------------


def finite_min(losses):
    finite = [x for x in losses if math.isfinite(x)]
    return min(finite) if finite else math.inf


def first_reaching(losses, target):
    for i, loss in enumerate(losses):
        if math.isfinite(loss) and loss <= target:
            return i + 1
    return None


def as_printed(loss):
    """`loss` at the precision the standalone trainers print it (the SDKs' "%.6g"), which is
    all Optuna's drivers read: every searcher's validations are compared at that precision,
    cairn's (full doubles from `cairn metrics`) as well as Optuna's."""
    return float("%.6g" % loss) if math.isfinite(loss) else loss


def figures(run, random_run, tolerance):
    losses = [as_printed(v[2]) for v in run["validations"]]
    budget = len(random_run["validations"])
    target = finite_min(as_printed(v[2]) for v in random_run["validations"])
    to_target = first_reaching(losses, target)
    to_near = first_reaching(losses, target * (1 + tolerance))
    return {"best": finite_min(losses[:budget]), "best_all": finite_min(losses),
            "units": len(losses), "budget": budget, "target": target, "to_target": to_target,
            "fraction": to_target / budget if to_target else math.inf, "to_near": to_near,
            "fraction_near": to_near / budget if to_near else math.inf}


def median(values):
    return statistics.median(sorted(values))


def fmt_fraction(f):
    return "-" if math.isinf(f) else "%.3f" % f


def report(runs, names, seeds, tolerance):
    near = "within %g %%" % (100 * tolerance)
    print("\n## per run (B = the random run's units for that seed; target = its final best)\n")
    print("| searcher | seed | trials | units | best val_loss within B | units to target "
          "| fraction of B | units to %s of target | fraction of B | B | target |" % near)
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    table = {}
    for name in names:
        for seed in seeds:
            run = runs[(name, seed)]
            f = figures(run, runs[("random", seed)], tolerance)
            table[(name, seed)] = f
            print("| %s | %d | %d | %d | %.4f | %s | %s | %s | %s | %d | %.4f |" % (
                name, seed, run["trials"], f["units"], f["best"],
                f["to_target"] or "not reached", fmt_fraction(f["fraction"]),
                f["to_near"] or "not reached", fmt_fraction(f["fraction_near"]),
                f["budget"], f["target"]))
    print("\n## medians over seeds %s\n" % ",".join(map(str, seeds)))
    print("| searcher | best val_loss within B | units | fraction of B to reach random's "
          "best | reached | same, all %d x %d seed pairs | fraction of B to get %s of it "
          "| goal <= %.2f |" % (len(seeds), len(seeds), near, GOAL_FRACTION))
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        rows = [table[(name, s)] for s in seeds]
        pairs = [figures(runs[(name, s)], runs[("random", r)], tolerance)["fraction"]
                 for s in seeds for r in seeds if name != "random" or s == r]
        frac = median(r["fraction"] for r in rows)
        goal = "" if name == "random" else ("met" if frac <= GOAL_FRACTION else "missed")
        print("| %s | %.4f | %g | %s | %d/%d | %s | %s | %s |" % (
            name, median(r["best"] for r in rows), median(r["units"] for r in rows),
            fmt_fraction(frac), sum(1 for r in rows if r["to_target"]), len(rows),
            fmt_fraction(median(pairs)), fmt_fraction(median(r["fraction_near"] for r in rows)),
            goal))
    return table


def load_runs(path):
    """The runs a --json file holds, to print the tables again without re-running them."""
    with open(path) as f:
        saved = json.load(f)
    runs = {}
    for run in saved["runs"]:
        run["validations"] = [(t, s, as_loss(v)) for t, s, v in run["validations"]]
        if run["searcher"] == "tpe" and "optuna" in run:  # written before the rename
            run["searcher"] = "optuna-tpe-hb"
        runs[(run["searcher"], run["seed"])] = run
    names = list(dict.fromkeys(n for n, _ in runs))
    names.sort(key=lambda n: n != "random")
    return runs, names, sorted({s for _, s in runs})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cairn", default=default_cairn())
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--searchers", default="random,asha,hyperband,optuna-tpe-hb")
    parser.add_argument("--random-trials", type=int, default=20)
    parser.add_argument("--tpe-trials", type=int, default=0,
                        help="cairn tpe's max_trials (default: --random-trials)")
    parser.add_argument("--asha-trials", type=int, default=220)
    parser.add_argument("--pbt-interval", type=int, default=9,
                        help="pbt's perturbation_interval (its population is --random-trials)")
    parser.add_argument("--max-length", type=int, default=81)
    parser.add_argument("--asha-mode", default="standard",
                        choices=["aggressive", "standard", "conservative"],
                        help="asha's mode (how many brackets it builds)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--tolerance", type=float, default=0.05,
                        help="the extra column: units to get within this share of the target")
    parser.add_argument("--json", help="write every run's validations and figures here")
    parser.add_argument("--from-json", help="print the tables of a saved --json file; run nothing")
    parser.add_argument("--problem", default="spirals", choices=sorted(PROBLEMS))
    parser.add_argument("--data-dir", default="/tmp/cairn-bench-data",
                        help="where the digits problem's CSV is written (once)")
    parser.add_argument("--cache", help="keep finished runs here and reuse them (see above)")
    parser.add_argument("--baseline-cairn",
                        help="the cairn binary for the random baseline (default: --cairn); "
                             "with --cache, a later build's searchers are measured against "
                             "the random runs an earlier build cached")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--workdir", help="scratch directory (default: a new one in /tmp)")
    parser.add_argument("--drive-tpe", choices=OPTUNA, help=argparse.SUPPRESS)
    parser.add_argument("--drive-seed", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--drive-budget", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.cairn = str(pathlib.Path(args.cairn).resolve())
    if args.baseline_cairn:
        args.baseline_cairn = str(pathlib.Path(args.baseline_cairn).resolve())
    args.problem_identity = set_problem(args.problem, args.data_dir)
    if args.drive_tpe:
        return drive_tpe(args)
    if args.from_json:
        report(*load_runs(args.from_json), args.tolerance)
        return 0

    seeds = [int(s) for s in args.seeds.split(",")]
    names = args.searchers.split(",")
    unknown = [n for n in names if n not in SEED_OFFSET]
    if unknown:
        parser.error("unknown searchers: %s (known: %s)" % (",".join(unknown),
                                                            ",".join(SEED_OFFSET)))
    if "random" not in names:
        names.insert(0, "random")  # the baseline every figure is measured against
    print(machine_summary(args.cairn))
    if args.baseline_cairn:
        print("random (the baseline) with %s" % args.baseline_cairn)
    if args.workdir:
        scratch = pathlib.Path(args.workdir)
        scratch.mkdir(parents=True, exist_ok=True)
    else:
        scratch = pathlib.Path(tempfile.mkdtemp(prefix="cairn-bench-search-"))
    print("scratch: %s" % scratch)
    trainer = ("PyTorch " + TORCH_TRIAL.name if PROBLEM_NAME == "torch-digits"
               else "builtin:mlp " + json.dumps(PROBLEM))
    print("problem %s: %s, max_length %d; random %d trials; asha %d trials; "
          "searchers %s; seeds %s" % (PROBLEM_NAME, trainer, args.max_length,
                                      args.random_trials,
                                      args.asha_trials, ",".join(names), args.seeds), flush=True)
    runs = {}
    start = time.monotonic()

    def one(name, seed):
        budget = len(runs[("random", seed)]["validations"]) if name in OPTUNA else None
        cached = cache_path(args, name, seed, budget)
        if cached and cached.exists():
            run = json.loads(cached.read_text())
            run["validations"] = [(t, s, as_loss(v)) for t, s, v in run["validations"]]
            runs[(name, seed)] = run
            print("  %-13s seed %d: from %s" % (name, seed, cached), flush=True)
            return
        workdir = scratch / ("%s-%d" % (name, seed))
        if workdir.exists():
            shutil.rmtree(workdir)
        workdir.mkdir()
        t0 = time.monotonic()
        if name in OPTUNA:
            run = run_optuna(name, args.cairn, seed, budget, args, workdir)
        else:
            run = run_cairn_search(cairn_for(args, name), name, seed, args, workdir)
        run["wall_s"] = time.monotonic() - t0
        runs[(name, seed)] = run
        if cached:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(".tmp")
            tmp.write_text(json.dumps(run, default=str))
            os.replace(tmp, cached)
        print("  %-13s seed %d: %4d trials, %5d units, best %.4f, %.0f s (load %.1f) %s" % (
            name, seed, run["trials"], len(run["validations"]),
            finite_min(v[2] for v in run["validations"]), run["wall_s"], os.getloadavg()[0],
            json.dumps(run["states"])), flush=True)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    try:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            # Random first: TPE's budget is the random run's units.
            for future in [pool.submit(one, "random", s) for s in seeds]:
                future.result()
            jobs = [pool.submit(one, n, s) for s in seeds for n in names if n != "random"]
            for future in jobs:
                future.result()
        table = report(runs, names, seeds, args.tolerance)
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(scratch, ignore_errors=True)
    print("\nall searches: %.0f s; load average after: %.2f" % (time.monotonic() - start,
                                                               os.getloadavg()[0]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "runs": [
                dict(run, searcher=n, seed=s, figures=table[(n, s)])
                for (n, s), run in sorted(runs.items())]}, f, default=str)


if __name__ == "__main__":
    sys.exit(main())
