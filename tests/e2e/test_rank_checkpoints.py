"""End to end: checkpoints of multi-rank trials (issue 16 §3, SPEC §4) with real PyTorch
DistributedDataParallel scripts (gloo, CPU) in both idioms — rank 0 alone saves the
checkpoint (`if rank == 0: with ctx.checkpoint(step)`, as plain torch.distributed code
does), or every rank enters it and writes a shard of its own — through a rank killed with
SIGKILL and `cairn run` killed with SIGKILL followed by `cairn resume`. Each run completes
with every step recorded exactly once, and every rank, resumed, draws the random numbers it
drew the first time (its generator state is kept with the checkpoint even when it did not
enter it)."""
import json
import os
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cairn_testlib import CAIRN, PYTHON, CairnTestCase, wait_until  # noqa: E402

# A tiny regression trained by 2 DDP ranks. Each step every rank draws one number from
# torch's generator (logged with the step in draws-<rank>.txt: a step trained again after a
# restore must draw what it drew the first time) and appends "rank step" to units.txt.
DDP = r'''
import os, sys, time
import cairn
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

ctx = cairn.init()
dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
out = os.environ["CAIRN_WORKDIR"]
idiom = os.environ["IDIOM"]
model = nn.Linear(4, 1)
step = ctx.steps_completed
if ctx.latest_checkpoint:
    model.load_state_dict(torch.load(ctx.latest_checkpoint / "model.pt"))
    if idiom == "every":
        assert (ctx.latest_checkpoint / ("shard-%d" % rank)).read_text() == str(step)
ddp = DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
x = torch.arange(32, dtype=torch.float32).reshape(8, 4) / 32
y = x.sum(1, keepdim=True)
for op in ctx.operations():
    while step < op.length:
        time.sleep(0.05)
        draw = torch.rand(1).item()
        loss = nn.functional.mse_loss(ddp(x[rank::2]), y[rank::2])
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        with open(os.path.join(out, "draws-%d.txt" % rank), "a") as f:
            f.write("%d %r\n" % (step, draw))
        with open(os.path.join(out, "units.txt"), "a") as f:
            f.write("%d %d\n" % (rank, step))
        ctx.report_training(step, {"loss": loss.item()})
        if ctx.checkpoint_due(step):
            if idiom == "chief":
                if rank == 0:
                    with ctx.checkpoint(step) as path:
                        torch.save(model.state_dict(), path / "model.pt")
            else:
                with ctx.checkpoint(step) as path:
                    if rank == 0:
                        torch.save(model.state_dict(), path / "model.pt")
                    (path / ("shard-%d" % rank)).write_text(str(step))
            if ctx.should_preempt():
                sys.exit(0)
    ctx.report_validation(step, {"val_loss": loss.item()})
dist.destroy_process_group()
'''

CONFIG = """name: ddp-%(idiom)s
entrypoint: /usr/bin/python3 ddp.py
searcher: {name: single, metric: val_loss, max_length: %(length)d}
resources: {slots_per_trial: 2}
checkpoint: {period: 4}
max_restarts: 3
environment: {IDIOM: %(idiom)s}
"""

LENGTH = 40


def have_torch():
    return subprocess.run([PYTHON, "-c", "import torch.distributed"],
                          capture_output=True).returncode == 0


@unittest.skipUnless(have_torch(), "needs Debian's python3-torch")
class RankCheckpointTest(CairnTestCase):
    def show(self):
        shown = self.cairn("show", "1.1", "--json", timeout=30)
        return json.loads(shown.stdout) if shown.returncode == 0 else None

    def running_ranks(self, restarts, after_step):
        """The rank pids of attempt `restarts` once it has a checkpoint past `after_step`."""
        def ranks():
            t = self.show()
            if not t or t["state"] != "RUNNING" or t["restarts"] != restarts:
                return None
            latest = max([c["steps_completed"] for c in t["checkpoints"]], default=0)
            return (t["rank_pids"], latest) if t.get("rank_pids") and latest > after_step else None
        return wait_until(ranks, timeout=120, what="attempt %d of 1.1 past a checkpoint" % restarts)

    def run_through_kills(self, idiom):
        """Kills rank 1, then `cairn run`, resumes, and checks what every step left."""
        self.write("ddp.py", DDP)
        self.write("exp.yaml", CONFIG % {"idiom": idiom, "length": LENGTH})
        env = dict(os.environ, NO_COLOR="1")
        env.pop("CAIRN_DIR", None)
        log = open(os.path.join(self.dir, "run.log"), "w+")
        self.addCleanup(log.close)
        run = subprocess.Popen([CAIRN, "run", "exp.yaml", "--slots", "2"], cwd=self.dir, env=env,
                               stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(run.kill)

        pids, step = self.running_ranks(0, 0)
        os.kill(pids[1], signal.SIGKILL)
        # The gang restarts from its checkpoint and checkpoints again; then cairn dies.
        _, step = self.running_ranks(1, -1)
        self.running_ranks(1, step)
        run.kill()
        run.wait(timeout=30)
        try:
            resume = self.cairn("resume", "1", timeout=90)
        except subprocess.TimeoutExpired as e:
            log.seek(0)
            logs = "".join(self.cairn("logs", "1.1", "--rank", r, timeout=30).stdout[-3000:]
                           for r in (0, 1))
            self.fail("cairn resume timed out\n%s\n%s\n%s\n%s" % (
                log.read()[-3000:], e.stdout, e.stderr, logs))
        self.assertEqual(resume.returncode, 0, resume.stdout + resume.stderr)
        log.seek(0)
        text = log.read() + resume.stdout + resume.stderr
        # The ranks checkpoint on their own once cairn is gone, rank 1 leaving its part (its
        # generator state and a marker) in the chief-only idiom; unless cairn died between
        # its answers to the two ranks, that orphan is adopted.
        print("adopted" if "adopted the checkpoint" in text else "not adopted", file=sys.stderr)
        self.assertNotIn("deadlocked", text)
        self.assertNotIn("rank_wait_timeout", text)

        trial = self.show()
        self.assertEqual(trial["state"], "COMPLETED", text)
        steps = [p["step"] for p in self.cairn_json("metrics", "1.1", "--json")["training"]]
        self.assertEqual(steps, list(range(1, LENGTH + 1)), "every step recorded exactly once")
        for rank in (0, 1):
            with open(os.path.join(self.dir, "draws-%d.txt" % rank)) as f:
                draws = [line.split() for line in f]
            first = {}
            for s, value in draws:
                self.assertEqual(first.setdefault(s, value), value,
                                 "rank %d drew a different number when step %s was trained again"
                                 % (rank, s))
            self.assertEqual(sorted(map(int, first)), list(range(1, LENGTH + 1)))
        files = self.cairn("export", "1.1@latest", os.path.join(self.dir, "export"), timeout=60)
        self.assertEqual(files.returncode, 0, files.stderr)
        saved = sorted(os.listdir(os.path.join(self.dir, "export")))
        self.assertIn("cairn_rng_state.pkl", saved)
        self.assertIn("cairn_rng_state.rank1.pkl", saved, "rank 1's generators are kept")
        return text

    def test_chief_only_checkpoint_survives_killed_rank_and_killed_cairn(self):
        self.run_through_kills("chief")

    def test_every_rank_checkpoint_survives_killed_rank_and_killed_cairn(self):
        self.run_through_kills("every")


if __name__ == "__main__":
    unittest.main()
