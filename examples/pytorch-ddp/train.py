"""A plain torch.distributed data-parallel trial: the digits MLP of examples/pytorch,
trained by N ranks with DistributedDataParallel.

There is no cairn-specific launch code: the process group comes from the environment
torchrun would set (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; cairn sets them for each
rank of a trial with `resources.slots_per_trial: N`), with the gloo backend on CPU and nccl
on GPU. The SDK is used only to report, checkpoint and take operations; every rank calls
it the same way, and cairn gives every rank the same answers, so the ranks stay in step.

Each global batch of `batch_size` rows is split over the ranks; DDP averages the
gradients, so N ranks follow the single-rank loss curve.
"""

import hashlib

import cairn
import numpy as np
import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from torch import nn
from torch.nn.parallel import DistributedDataParallel

DEFAULTS = {"lr": 0.05, "hidden": 64, "batch_size": 64, "val_fraction": 0.2}


def split_digits(seed, val_fraction):
    digits = load_digits()
    features = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    labels = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.from_numpy(np.random.default_rng([seed, 0]).permutation(len(labels)))
    n_val = int(len(labels) * val_fraction)
    return (features[order[n_val:]], labels[order[n_val:]]), (features[order[:n_val]],
                                                              labels[order[:n_val]])


def main():
    ctx = cairn.init()  # seeds torch: every rank starts from the same weights
    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", 0) if use_cuda else torch.device("cpu")  # one GPU per rank

    hp = {**DEFAULTS, **ctx.hparams}
    (x_train, y_train), (x_val, y_val) = split_digits(ctx.seed, float(hp["val_fraction"]))
    model = nn.Sequential(nn.Linear(64, int(hp["hidden"])), nn.ReLU(),
                          nn.Linear(int(hp["hidden"]), 10)).to(device)
    step = ctx.steps_completed
    if ctx.latest_checkpoint:
        model.load_state_dict(torch.load(ctx.latest_checkpoint / "model.pt", map_location=device))
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=float(hp["lr"]), momentum=0.9)
    if ctx.latest_checkpoint:
        optimizer.load_state_dict(torch.load(ctx.latest_checkpoint / "optimizer.pt"))

    batch = int(hp["batch_size"])
    for op in ctx.operations():
        while step < op.length:
            order = torch.from_numpy(np.random.default_rng([ctx.seed, 1, step]).permutation(len(y_train)))
            ddp.train()
            total = torch.zeros(2)
            for start in range(0, len(order) - batch + 1, batch):
                rows = order[start:start + batch][rank::world]  # this rank's share
                logits = ddp(x_train[rows].to(device))
                loss = nn.functional.cross_entropy(logits, y_train[rows].to(device))
                optimizer.zero_grad()
                loss.backward()  # DDP all-reduces (averages) the gradients here
                optimizer.step()
                total += torch.tensor([loss.item() * len(rows), len(rows)])
            dist.all_reduce(total)
            step += 1
            ctx.report_training(step, {"loss": (total[0] / total[1]).item()})
            if ctx.checkpoint_due(step):
                with ctx.checkpoint(step) as path:
                    if rank == 0:  # one copy of the weights; every rank takes part
                        torch.save(model.state_dict(), path / "model.pt")
                        torch.save(optimizer.state_dict(), path / "optimizer.pt")
                if ctx.should_preempt():
                    break
        else:
            model.eval()
            with torch.no_grad():
                logits = model(x_val.to(device))
                val = {"val_loss": nn.functional.cross_entropy(logits, y_val.to(device)).item(),
                       "val_accuracy": (logits.argmax(1) == y_val.to(device)).float().mean().item()}
            ctx.report_validation(step, val)
            continue
        break
    # Every rank holds the same weights (DDP keeps them in step): each says so in its log
    # (`cairn logs TRIAL --rank K`), as a digest of its parameters' bytes.
    digest = hashlib.sha256(b"".join(p.detach().cpu().numpy().tobytes()
                                     for p in model.state_dict().values()))
    print("rank %d of %d at step %d: parameters sha256 %s"
          % (rank, world, step, digest.hexdigest()), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
