"""End to end: data-parallel trials (`resources.slots_per_trial: N`, SPEC §4, issue 6) —
N rank processes with torchrun's variables, every rank's output kept, the ranks kept in
step (same operations, same stop decision, one checkpoint per step), gang restarts when a
rank dies, the plain torch.distributed example with 1 and 2 ranks, and the C++ SDK's Gloo
all-reduce (examples/cpp-ddp) with 1 and 2 ranks and a rank killed."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, PYTHON, SOURCE, CairnTestCase, wait_until  # noqa: E402
import cairn_testlib  # noqa: E402

# Each rank takes 40 ms steps, appends "rank step" to units.txt in the live workdir, and
# checkpoints (every rank takes part; rank 0 writes the state) when cairn says so.
RANKS = r'''
import json, os, sys, time
import cairn

ctx = cairn.init()
out = os.environ["CAIRN_WORKDIR"]
rank = int(os.environ["RANK"])
names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
with open(os.path.join(out, "env-%d.json" % rank), "w") as f:
    json.dump({k: os.environ.get(k) for k in names}, f)
print("rank", rank, "starts at", ctx.steps_completed, flush=True)
step = ctx.steps_completed
shards = os.environ.get("SHARDS")  # every rank also saves (and restores) a file of its own
if ctx.latest_checkpoint:
    assert int((ctx.latest_checkpoint / "step").read_text()) == step
    if shards:
        assert (ctx.latest_checkpoint / ("shard-%d" % rank)).read_text() == "%d %d" % (rank, step)
for op in ctx.operations():
    while step < op.length:
        time.sleep(0.04)
        step += 1
        with open(os.path.join(out, "units.txt"), "a") as f:
            f.write("%d %d\n" % (rank, step))
        ctx.report_training(step, {"loss": 1.0 / step, "rank": rank})
        if ctx.checkpoint_due(step):
            with ctx.checkpoint(step) as path:
                if rank == 0:
                    (path / "step").write_text(str(step))
                if shards:
                    (path / ("shard-%d" % rank)).write_text("%d %d" % (rank, step))
            if ctx.should_preempt():
                print("rank", rank, "stops at", step, flush=True)
                # HOLD: an orphan (cairn is gone) waits for the test's go-ahead to exit.
                while os.environ.get("HOLD") and not os.path.exists(os.path.join(out, "release")):
                    time.sleep(0.02)
                sys.exit(0)
    ctx.report_validation(step, {"val_loss": 1.0 / step})
'''

CONFIG = """name: ranks
entrypoint: /usr/bin/python3 ranks.py
searcher: {name: single, metric: val_loss, max_length: %d}
resources: {slots_per_trial: 2}
checkpoint: {period: 2}
max_restarts: 3
"""

MLP_CONFIG = """name: mlp-ranks
entrypoint: builtin:mlp
hyperparameters: {dataset: teacher, samples: %(samples)d, hidden: 64, batch_size: 128, threads: 1,
                  device: cpu}
searcher: {name: single, metric: val_loss, max_length: %(length)d}
resources: {slots_per_trial: %(ranks)d}
checkpoint: {period: %(period)d}
reproducibility: {seed: 5, deterministic: true}
max_restarts: 3
"""


def have_torch():
    return subprocess.run([PYTHON, "-c", "import torch, sklearn"], capture_output=True, timeout=120).returncode == 0



# The C++ SDK's collectives on 2 ranks, checked by each rank against the sums it expects:
# floats over several of the ring's pieces, doubles, integers, a broadcast from rank 1 and
# a barrier. Reports ok=1 once all agree.
COLLECTIVES = r"""
#include <cairn/gloo.hpp>
#include <cstdio>
#include <numeric>
#include <vector>

static int fail(const std::string& what) {
  std::fprintf(stderr, "collectives: %s\n", what.c_str());
  return 1;
}

int main() {
  std::string error;
  auto ctx = cairn::Context::init(&error);
  if (!ctx) return fail(error);
  auto group = cairn::GlooGroup::connect(*ctx, {}, &error);
  if (!group) return fail(error);
  const int rank = group->rank(), n = group->size();
  std::vector<float> f(1 << 20);  // 4 MiB: many pieces
  for (size_t i = 0; i < f.size(); ++i) f[i] = float(i % 1000) + rank;
  if (!group->allreduce_sum(f.data(), f.size(), &error)) return fail(error);
  for (size_t i = 0; i < f.size(); ++i)
    if (f[i] != float(n * (i % 1000)) + float(n * (n - 1) / 2)) return fail("float sum");
  std::vector<double> d(1001, 0.25 * (rank + 1));
  if (!group->allreduce_sum(d.data(), d.size(), &error)) return fail(error);
  for (double v : d)
    if (v != 0.25 * n * (n + 1) / 2) return fail("double sum");
  std::vector<int64_t> k(7, int64_t{1} << (40 + rank));
  if (!group->allreduce_sum(k.data(), k.size(), &error)) return fail(error);
  for (int64_t v : k)
    if (v != (int64_t{1} << 40) * ((int64_t{1} << n) - 1)) return fail("integer sum");
  std::vector<unsigned char> b(500000, static_cast<unsigned char>(rank == 1 ? 7 : 0));
  if (!group->broadcast(b.data(), b.size(), n > 1 ? 1 : 0, &error)) return fail(error);
  for (unsigned char c : b)
    if (c != (n > 1 ? 7 : 0)) return fail("broadcast");
  if (!group->barrier(&error)) return fail(error);
  std::printf("rank %d of %d: collectives agree\n", rank, n);
  for (auto op = ctx->next_operation(); op; op = ctx->next_operation())
    if (!ctx->report_validation(op->length, {{"ok", 1.0}})) return fail("validation refused");
  return 0;
}
"""

class DataParallelTest(CairnTestCase):
    def setUp(self):
        super().setUp()
        self.write("ranks.py", RANKS)

    def ranks_after_a_checkpoint(self, trial):
        """The pids of the trial's ranks, once it runs and has a checkpoint to restart from."""
        def ranks():
            shown = self.cairn("show", trial, "--json")
            if shown.returncode != 0:
                return None
            t = json.loads(shown.stdout)
            ok = t["state"] == "RUNNING" and t.get("rank_pids") and t["checkpoints"]
            return t["rank_pids"] if ok else None
        return wait_until(ranks, what="the ranks of %s running after a checkpoint" % trial)

    def kill_rank_1_and_finish(self, trial, run_args, series, length):
        """Runs `cairn run RUN_ARGS`, kills rank 1 of `trial` once it has a checkpoint, and
        checks the gang restart: the trial completes, one restart counted, every step of
        `series` ("training" or "validation") recorded exactly once."""
        env = dict(os.environ, NO_COLOR="1")
        log = open(os.path.join(self.dir, "run.log"), "w")
        self.addCleanup(log.close)
        proc = subprocess.Popen([CAIRN, "run"] + run_args, cwd=self.dir, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
        self.addCleanup(proc.kill)

        os.kill(self.ranks_after_a_checkpoint(trial)[1], signal.SIGKILL)
        self.assertEqual(proc.wait(timeout=300), 0)
        shown = self.cairn_json("show", trial, "--json")
        self.assertEqual(shown["state"], "COMPLETED")
        self.assertEqual(shown["restarts"], 1, "the gang restart counts once")
        steps = [p["step"] for p in self.cairn_json("metrics", trial, "--json")[series]]
        self.assertEqual(steps, list(range(1, length + 1)), "every step recorded exactly once")

    def units(self):
        with open(os.path.join(self.dir, "units.txt")) as f:
            return [tuple(map(int, line.split())) for line in f]

    def test_time_metric_rungs_stop_every_rank_and_promotion_resumes_them(self):
        # Two ranks train to their own end (16 batches) and report "batches" in rank 0's
        # validations; ASHA stops a trial at its rung through the ranks' agreed stop, and a
        # promotion resumes both ranks from the checkpoint: no batch trained twice.
        self.write("own.py", r'''
import json, os, sys
import cairn

ctx = cairn.init()
rank = int(os.environ["RANK"])
step = ctx.steps_completed
if ctx.latest_checkpoint:
    assert int((ctx.latest_checkpoint / "step").read_text()) == step
with open(os.path.join(os.environ["CAIRN_WORKDIR"], "starts.txt"), "a") as f:
    f.write("%s %d %d\n" % (ctx.trial_id, rank, step))
lr = ctx.hparams["lr"]
while step < 16:
    step += 1
    with open(os.path.join(os.environ["CAIRN_WORKDIR"], "units.txt"), "a") as f:
        f.write("%s %d %d\n" % (ctx.trial_id, rank, step))
    ctx.report_training(step, {"loss": lr / step})
    if step % 4 == 0 and rank == 0:
        ctx.report_validation(step, {"val_loss": lr / step, "batches": step})
    if ctx.checkpoint_due(step):
        with ctx.checkpoint(step) as path:
            if rank == 0:
                (path / "step").write_text(str(step))
        if ctx.should_preempt():
            sys.exit(0)
''')
        self.write("own.yaml", """name: own
entrypoint: /usr/bin/python3 own.py
hyperparameters: {lr: {type: double, minval: 0.0, maxval: 1.0}}
searcher: {name: asha, metric: val_loss, time_metric: batches, max_time: 16, max_trials: 4,
           divisor: 2, max_rungs: 2, max_concurrent_trials: 1}
resources: {slots_per_trial: 2}
checkpoint: {period: 0}
reproducibility: {seed: 3}
max_restarts: 0
""")
        run = self.cairn("run", "own.yaml", timeout=300)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        exp = self.cairn_json("show", "1", "--json")
        self.assertEqual(exp["state"], "COMPLETED", exp)
        states = [t["state"] for t in exp["trials"]]
        self.assertIn("STOPPED", states)
        with open(os.path.join(self.dir, "units.txt")) as f:
            units = [line.split() for line in f]
        with open(os.path.join(self.dir, "starts.txt")) as f:
            starts = [line.split() for line in f]
        promoted = 0
        for trial in exp["trials"]:
            self.assertEqual(trial["restarts"], 0, trial)
            for rank in ("0", "1"):
                mine = [int(u[2]) for u in units if u[0] == trial["id"] and u[1] == rank]
                # Never retrained: each batch once, in order, on both ranks.
                self.assertEqual(mine, list(range(1, len(mine) + 1)), (trial["id"], rank))
                self.assertEqual(mine[-1], 16 if trial["state"] == "COMPLETED" else 8,
                                 (trial, rank))
            resumed = [s for s in starts if s[0] == trial["id"] and s[2] != "0"]
            promoted += len(resumed)
        self.assertGreater(promoted, 0, "some trial was promoted and resumed on both ranks")

    def test_ranks_get_torchrun_variables_and_their_own_logs(self):
        self.write("exp.yaml", CONFIG % 4)
        self.cairn("run", "exp.yaml", "--slots", "2", check=0)
        envs = []
        for rank in (0, 1):
            with open(os.path.join(self.dir, "env-%d.json" % rank)) as f:
                envs.append(json.load(f))
        for rank, env in enumerate(envs):
            self.assertEqual((env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"],
                              env["LOCAL_WORLD_SIZE"], env["MASTER_ADDR"]),
                             (str(rank), str(rank), "2", "2", "127.0.0.1"))
        self.assertEqual(envs[0]["MASTER_PORT"], envs[1]["MASTER_PORT"])
        self.assertIn("rank 1 starts at 0", self.cairn("logs", "1.1", "--rank", "1", check=0).stdout)
        self.assertNotIn("rank 1", self.cairn("logs", "1.1", check=0).stdout)
        # Rank 0's reports are the trial's: one series, every step once, from rank 0.
        metrics = self.cairn_json("metrics", "1.1", "--json")
        self.assertEqual([p["step"] for p in metrics["training"]], [1, 2, 3, 4])
        self.assertTrue(all(p["metrics"]["rank"] == 0 for p in metrics["training"]))
        # Both ranks trained every step; one checkpoint per step, made with every rank.
        self.assertEqual(sorted(self.units()), sorted((r, s) for r in (0, 1) for s in range(1, 5)))
        self.assertEqual([c["steps_completed"] for c in self.cairn_json("checkpoints", "1.1", "--json")], [4])

    def test_a_killed_rank_restarts_the_whole_trial_from_its_checkpoint(self):
        self.write("exp.yaml", CONFIG % 30)
        self.kill_rank_1_and_finish("1.1", ["exp.yaml", "--slots", "2"], "training", 30)
        # Both ranks were started again, from the same checkpoint (an even step: the
        # period is 2), and trained every step to the end.
        restarts = []
        for rank in (0, 1):
            self.assertEqual(set(s for r, s in self.units() if r == rank), set(range(1, 31)))
            args = ("logs", "1.1") + (("--rank", "1") if rank else ())
            starts = [int(m) for m in re.findall(r"rank %d starts at (\d+)" % rank,
                                                  self.cairn(*args, check=0).stdout)]
            self.assertEqual(len(starts), 2, starts)
            self.assertEqual(starts[0], 0)
            restarts.append(starts[1])
        self.assertEqual(restarts[0], restarts[1])
        self.assertGreater(restarts[0], 0)
        self.assertEqual(restarts[0] % 2, 0)

    def test_a_permanent_failure_of_one_rank_ends_the_gang_without_restarts(self):
        # Rank 1 fails at once with hparams['code']; rank 0 waits until cairn stops the gang.
        self.write("fail_rank.py", "import os, sys, time\nimport cairn\nctx = cairn.init()\n"
                   "if os.environ['RANK'] == '1':\n"
                   "    open(os.path.join(%r, 'tries-%%d' %% ctx.hparams['code']), 'a').write('x')\n"
                   "    sys.exit(ctx.hparams['code'])\n"
                   "deadline = time.monotonic() + 120\n"
                   "while time.monotonic() < deadline:\n"
                   "    time.sleep(0.05)\n" % self.dir)
        self.write("gang.yaml", "entrypoint: /usr/bin/python3 fail_rank.py\n"
                   "hyperparameters: {code: {type: categorical, vals: [2, 3]}}\n"
                   "searcher: {name: grid, metric: val_loss, max_length: 1}\n"
                   "resources: {slots_per_trial: 2, devices: cpu}\n"
                   "max_restarts: 1\npermanent_exit_codes: [2]\n")
        run = self.cairn("run", "gang.yaml", "--slots", "2")
        self.assertEqual(run.returncode, 1, run.stdout + run.stderr)
        trials = {t["hparams"]["code"]: t for t in self.cairn_json("show", "1", "--json")["trials"]}
        # Rank 0, killed by cairn's gang stop, does not make status 2 any less permanent;
        # status 3 is not declared, so the gang is restarted once.
        self.assertEqual((trials[2]["state"], trials[2]["restarts"]), ("ERROR", 0))
        self.assertEqual((trials[3]["state"], trials[3]["restarts"]), ("ERROR", 1))
        for code, attempts in ((2, "x"), (3, "xx")):
            with open(os.path.join(self.dir, "tries-%d" % code)) as f:
                self.assertEqual(f.read(), attempts)

    def test_the_failure_report_shows_the_failing_ranks_last_lines(self):
        # Rank 1 raises; rank 0 prints its own lines and waits until cairn stops the gang.
        # The report showed rank 0's lines, hiding the traceback that says what went wrong.
        self.write("raise_rank.py", "import os, sys, time\nimport cairn\nctx = cairn.init()\n"
                   "if os.environ['RANK'] == '1':\n"
                   "    raise RuntimeError('rank one ran out of luck')\n"
                   "print('rank zero is fine', flush=True)\n"
                   "deadline = time.monotonic() + 120\n"
                   "while time.monotonic() < deadline:\n"
                   "    time.sleep(0.05)\n")
        self.write("gang.yaml", "entrypoint: /usr/bin/python3 raise_rank.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 1}\n"
                   "resources: {slots_per_trial: 2, devices: cpu}\n"
                   "max_restarts: 0\n")
        run = self.cairn("run", "gang.yaml", "--slots", "2", timeout=120)
        self.assertEqual(run.returncode, 1, run.stdout + run.stderr)
        report = run.stderr[run.stderr.index("cairn: trial 1.1 failed: rank 1 exited with status 1"):]
        self.assertIn("last lines of rank 1's log (cairn logs 1.1 --rank 1):", report)
        self.assertIn("RuntimeError: rank one ran out of luck", report)
        self.assertIn("Traceback (most recent call last):", report)
        self.assertNotIn("rank zero is fine", report)

    def test_a_rank_that_cannot_start_is_not_a_permanent_failure(self):
        # Rank 1's log path is taken by a directory: it cannot be started (status 127).
        # Nothing declared that permanent, whatever permanent_exit_codes holds.
        self.cairn("init", check=0)
        os.makedirs(os.path.join(self.dir, ".cairn", "work", "1", "1", "output.rank1.log"))
        self.write("gang.yaml", "entrypoint: /usr/bin/python3 ranks.py\n"
                   "searcher: {name: single, metric: val_loss, max_length: 1}\n"
                   "resources: {slots_per_trial: 2, devices: cpu}\n"
                   "max_restarts: 1\npermanent_exit_codes: [2, 127]\n")
        run = self.cairn("run", "gang.yaml", "--slots", "2")
        self.assertEqual(run.returncode, 1, run.stdout + run.stderr)
        self.assertIn("did not start", run.stderr)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual((trial["state"], trial["restarts"]), ("ERROR", 1))

    def test_sharded_checkpoint_every_rank_saves_and_restores_its_own_file(self):
        self.write("exp.yaml", CONFIG % 30 + "environment: {SHARDS: \"1\"}\n")
        # Each restarted rank asserts that its own shard holds its step: a rank that found
        # it missing or wrong would fail again, and the trial would count more restarts.
        self.kill_rank_1_and_finish("1.1", ["exp.yaml", "--slots", "2"], "training", 30)
        dest = os.path.join(self.dir, "export")
        self.cairn("export", "1.1@latest", dest, check=0)
        for rank in (0, 1):
            with open(os.path.join(dest, "shard-%d" % rank)) as f:
                self.assertEqual(f.read(), "%d 30" % rank)

    def test_resume_after_kill_9_waits_for_every_rank_left_running(self):
        self.write("exp.yaml", CONFIG % 30 + "environment: {HOLD: '1'}\n")
        env = dict(os.environ, NO_COLOR="1")
        env.pop("CAIRN_DIR", None)
        proc = subprocess.Popen([CAIRN, "run", "exp.yaml", "--slots", "2"], cwd=self.dir, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(proc.kill)

        pids = self.ranks_after_a_checkpoint("1.1")
        proc.kill()
        proc.wait(timeout=120)
        # The ranks outlive cairn: each notices the closed channel, checkpoints, and (HOLD)
        # stays until released. resume must wait for both, not start a second gang.
        log = open(os.path.join(self.dir, "resume.log"), "w+")
        self.addCleanup(log.close)
        resume = subprocess.Popen([CAIRN, "resume", "1"], cwd=self.dir, env=env, stdout=log,
                                  stderr=subprocess.STDOUT, text=True)
        self.addCleanup(resume.kill)
        note = "waiting for its processes %d, %d" % tuple(pids)
        wait_until(lambda: note in open(log.name).read(), what="resume to wait for both ranks")
        self.write("release", "")
        self.assertEqual(resume.wait(timeout=120), 0, open(log.name).read())
        self.assertIn("trial 1.1 started", open(log.name).read().split(note)[1],
                      "the gang starts again only after both ranks left")
        # Both ranks checkpointed on their own once cairn was gone: when both finished the
        # same step, that orphan is adopted and the gang restarts from it; otherwise resume
        # says which rank did not, and restarts from the latest registered checkpoint.
        text = open(log.name).read()
        adopted = re.search(r"trial 1\.1: adopted the checkpoint it took at step (\d+)", text)
        if adopted:
            self.assertRegex(text, r"trial 1\.1 started .* \(%s units done\)" % adopted.group(1))
        else:
            self.assertRegex(text, r"orphaned checkpoint \d+ not adopted: rank 1 of 2 did not "
                             r"finish writing it")
        print("orphan adopted" if adopted else "orphan not adopted", file=sys.stderr)
        # What every rank wrote while cairn was away is in its log: the rank's output file
        # is read on from where the dead coordinator's last commit had stored it.
        for rank in (0, 1):
            self.assertRegex(self.cairn("logs", "1.1", "--rank", rank, check=0).stdout,
                             r"rank %d stops at \d+\n" % rank)
        trial = self.cairn_json("show", "1.1", "--json")
        self.assertEqual(trial["state"], "COMPLETED")
        metrics = self.cairn_json("metrics", "1.1", "--json")
        self.assertEqual([p["step"] for p in metrics["training"]], list(range(1, 31)))
        for rank in (0, 1):
            done = sorted(s for r, s in self.units() if r == rank)
            self.assertEqual(sorted(set(done)), list(range(1, 31)), "rank %d trained every step" % rank)
            # No step was trained twice at once: a repeat only follows a checkpoint restore.
            self.assertLessEqual(len(done) - 30, 2, "rank %d repeated at most a checkpoint period" % rank)

    def test_resume_keeps_the_slots_the_run_was_given(self):
        # Three ranks need three slots: more than this machine's default (its cores) may be.
        self.write("exp.yaml", (CONFIG % 30).replace("slots_per_trial: 2", "slots_per_trial: 3"))
        env = dict(os.environ, NO_COLOR="1")
        env.pop("CAIRN_DIR", None)
        proc = subprocess.Popen([CAIRN, "run", "exp.yaml", "--slots", "3"], cwd=self.dir, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(proc.kill)
        self.ranks_after_a_checkpoint("1.1")
        self.assertEqual(self.cairn("pause", "1", timeout=120).returncode, 0)
        self.assertEqual(proc.wait(timeout=60), 0)
        resumed = self.cairn("resume", "1", timeout=300)
        self.assertEqual(resumed.returncode, 0, resumed.stderr)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "COMPLETED")
        steps = [p["step"] for p in self.cairn_json("metrics", "1.1", "--json")["training"]]
        self.assertEqual(steps, list(range(1, 31)))
        # So does a reproduce of its trial.
        again = self.cairn("reproduce", "1.1", timeout=300)
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(self.cairn_json("show", "2", "--json")["state"], "COMPLETED")

    def test_a_pause_stops_every_rank_at_the_same_step(self):
        self.write("exp.yaml", CONFIG % 1000)
        env = dict(os.environ, NO_COLOR="1")
        proc = subprocess.Popen([CAIRN, "run", "exp.yaml", "--slots", "2"], cwd=self.dir, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(proc.kill)
        wait_until(lambda: os.path.exists(os.path.join(self.dir, "units.txt")) and len(self.units()) >= 6,
                   what="a few steps")
        proc.send_signal(signal.SIGINT)
        self.assertEqual(proc.wait(timeout=60), 0)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "PAUSED")
        last = {r: max(s for rr, s in self.units() if rr == r) for r in (0, 1)}
        self.assertEqual(last[0], last[1], "the ranks agreed on the step to stop at")
        self.assertEqual(self.cairn_json("show", "1.1", "--json")["checkpoints"][-1]["steps_completed"], last[0])

    def export_weights(self, trial):
        dest = os.path.join(self.dir, "export-" + trial)
        self.cairn("export", trial + "@latest", dest, check=0)
        with open(os.path.join(dest, "mlp.ckpt"), "rb") as f:
            return f.read()

    def test_builtin_mlp_on_two_ranks_follows_one_rank_and_is_bit_exact(self):
        self.write("mlp.yaml", MLP_CONFIG % {"length": 5, "ranks": 2, "period": 5, "samples": 3000})
        for ranks in (2, 2, 1):
            self.cairn("run", "mlp.yaml", "--slots", "2", "--set",
                       "resources.slots_per_trial=%d" % ranks, check=0)
        curves = [[p["metrics"]["loss"] for p in self.cairn_json("metrics", "%d.1" % e, "--json")["training"]]
                  for e in (1, 2, 3)]
        self.assertEqual(len(curves[0]), 5)
        self.assertEqual(curves[0], curves[1], "two 2-rank runs: the same bits")
        self.assertEqual(self.export_weights("1.1"), self.export_weights("2.1"))
        for two, one in zip(curves[0], curves[2]):
            self.assertAlmostEqual(two, one, delta=1e-3 * one, msg="2 ranks follow the 1-rank curve")
        self.assertNotEqual(curves[0], curves[2], "the ranks really split the batches")
        self.assertLess(curves[0][-1], curves[0][0], "it learns")
        logs = self.cairn("logs", "1.1", "--rank", "1", check=0).stdout
        self.assertIn("rank 1 of 2 (gloo)", logs)

    def test_builtin_mlp_rank_killed_mid_epoch_restarts_and_ends_bit_exact(self):
        # Epochs of about half a second on this data, so the kill lands inside one.
        self.write("mlp.yaml", MLP_CONFIG % {"length": 8, "ranks": 2, "period": 2, "samples": 60000})
        self.cairn("run", "mlp.yaml", "--slots", "2", check=0)  # uninterrupted: experiment 1
        self.kill_rank_1_and_finish("2.1", ["mlp.yaml", "--slots", "2"], "training", 8)
        starts = re.findall(r"epochs completed: (\d+); rank 1 of 2",
                            self.cairn("logs", "2.1", "--rank", "1", check=0).stdout)
        self.assertEqual(len(starts), 2, starts)
        self.assertGreater(int(starts[1]), 0, "the restart resumed from a checkpoint")
        self.assertEqual(self.export_weights("1.1"), self.export_weights("2.1"),
                         "the interrupted run ends with the uninterrupted run's weights")

    cpp_build = None  # the directory where examples/cpp-ddp was built, once for the class

    def cpp_example(self):
        """examples/cpp-ddp built with `make` as a user would (C++ SDK + Gloo), in the test directory."""
        cls = type(self)
        if cls.cpp_build is None:
            build = tempfile.mkdtemp(prefix="cairn-e2e-cpp-")
            cls.addClassCleanup(shutil.rmtree, build, True)
            example = os.path.join(SOURCE, "examples", "cpp-ddp")
            for name in ("train.cc", "Makefile"):
                shutil.copy(os.path.join(example, name), build)
            made = subprocess.run(["make", "-s", "SDK=" + os.path.join(SOURCE, "sdk", "cpp")], cwd=build,
                                  capture_output=True, text=True, timeout=600)
            self.assertEqual(made.returncode, 0, made.stderr)
            cls.cpp_build = build
        shutil.copy(os.path.join(cls.cpp_build, "train"), self.dir)
        shutil.copy(os.path.join(SOURCE, "examples", "cpp-ddp", "ddp.yaml"), self.dir)

    def val_losses(self, trial, name="val_loss"):
        return [p["metrics"][name] for p in self.cairn_json("metrics", trial, "--json")["validation"]]

    def test_cpp_sdk_collectives_sum_broadcast_and_barrier_on_two_ranks(self):
        made = subprocess.run(["g++", "-O1", "-std=c++20", "-I" + os.path.join(SOURCE, "sdk", "cpp"),
                               "-x", "c++", "-", "-o", os.path.join(self.dir, "collectives"),
                               "-lgloo", "-pthread"], input=COLLECTIVES, capture_output=True,
                              text=True, timeout=600)
        self.assertEqual(made.returncode, 0, made.stderr)
        self.write("coll.yaml", "name: coll\nentrypoint: ./collectives\n"
                   "searcher: {name: single, metric: ok, max_length: 1, smaller_is_better: false}\n"
                   "resources: {slots_per_trial: 2}\nmax_restarts: 0\n")
        self.cairn("run", "coll.yaml", "--slots", "2", check=0)
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "COMPLETED")
        self.assertEqual(self.val_losses("1.1", "ok"), [1.0])
        for rank in ("0", "1"):
            self.assertIn("rank %s of 2: collectives agree" % rank,
                          self.cairn("logs", "1.1", "--rank", rank, check=0).stdout)

    def test_cpp_sdk_gloo_example_on_two_ranks_follows_one_rank(self):
        self.cpp_example()
        self.cairn("run", "ddp.yaml", "--slots", "2", check=0)
        self.cairn("run", "ddp.yaml", "--slots", "2", "--set", "resources.slots_per_trial=1", check=0)
        two, one = self.val_losses("1.1"), self.val_losses("2.1")
        self.assertEqual(len(two), 8)
        # Without a real sum over the ranks each would step with half the gradient: the
        # curves would part at once.
        for a, b in zip(one, two):
            self.assertAlmostEqual(a, b, delta=1e-9 * max(1.0, abs(a)))
        self.assertLess(two[-1], two[0] / 10, "it learns")
        self.assertIn("rank 1 of 2 connected", self.cairn("logs", "1.1", "--rank", "1", check=0).stdout)
        self.assertIn("rank 0 of 1 connected", self.cairn("logs", "2.1", check=0).stdout)

    def test_cpp_sdk_gloo_rank_killed_restarts_the_trial_and_ends_as_uninterrupted(self):
        self.cpp_example()
        # About a quarter of a second per epoch (98 all-reduces), so the kill lands mid-run.
        longer = ["--set", "hyperparameters.rows=100000", "--set", "hyperparameters.batch_size=1024",
                  "--set", "searcher.max_length=24"]
        self.cairn("run", "ddp.yaml", "--slots", "2", *longer, check=0)  # uninterrupted: experiment 1
        # Rank 0 is left inside a Gloo all-reduce with a dead peer: it must fail, not hang.
        self.kill_rank_1_and_finish("2.1", ["ddp.yaml", "--slots", "2"] + longer, "validation", 24)
        self.assertEqual(self.val_losses("2.1"), self.val_losses("1.1"),
                         "resumed from the checkpoint, it ends with the uninterrupted run's bits")

    def test_pytorch_ddp_example_with_two_ranks_follows_the_single_rank_curve(self):
        # ./install.sh --test installs both: missing is a failure, not a skip.
        self.assertTrue(have_torch(), "needs Debian's python3-torch and python3-sklearn")
        example = os.path.join(SOURCE, "examples", "pytorch-ddp")
        for name in ("train.py", "digits-ddp.yaml"):
            shutil.copy(os.path.join(example, name), self.dir)
        self.cairn("run", "digits-ddp.yaml", "--slots", "2", check=0)
        self.cairn("run", "digits-ddp.yaml", "--slots", "2", "--set", "resources.slots_per_trial=1", check=0)
        two = [p["metrics"]["loss"] for p in self.cairn_json("metrics", "1.1", "--json")["training"]]
        one = [p["metrics"]["loss"] for p in self.cairn_json("metrics", "2.1", "--json")["training"]]
        self.assertEqual(len(two), 6)
        for a, b in zip(one, two):
            self.assertAlmostEqual(a, b, delta=1e-4 * max(1.0, abs(a)))
        self.assertLess(two[-1], two[0] / 3, "it learns")
        self.assertEqual(self.cairn_json("show", "1", "--json")["state"], "COMPLETED")


if __name__ == "__main__":
    sys.exit(cairn_testlib.main())
