"""The PyTorch problem of bench/search_efficiency.py (--problem torch-digits): an MLP in
PyTorch on scikit-learn's 8x8 digits, one unit = one epoch, val_loss to minimise.

examples/pytorch/train.py with what a benchmark needs: the train/validation split is fixed
(not the trial's seed), so every trial, and a pbt clone continuing its parent's weights, is
judged on the same held-out rows that none of them trained on; a clone (pbt) loads its
parent's model and optimizer state and then sets its own lr, momentum and weight_decay
(torch's load_state_dict keeps the saved ones); one torch thread; a diverged epoch (a
non-finite loss) ends the trial with exit 2, as builtin:mlp's does.
"""

import math
import sys

import cairn
import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

SPLIT_SEED = 0  # the same split for every trial
VAL_FRACTION = 0.2


def split_digits():
    digits = load_digits()
    features = torch.tensor(digits.data / 16.0, dtype=torch.float32)  # pixels are 0..16
    labels = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.from_numpy(np.random.default_rng([SPLIT_SEED, 0]).permutation(len(labels)))
    n_val = int(len(labels) * VAL_FRACTION)
    val, train = order[:n_val], order[n_val:]
    return (features[train], labels[train]), (features[val], labels[val])


def build_model(hp, n_features, n_classes):
    layers, width = [], n_features
    for _ in range(int(hp["layers"])):
        layers += [nn.Linear(width, int(hp["hidden"])), nn.ReLU()]
        width = int(hp["hidden"])
    layers.append(nn.Linear(width, n_classes))
    return nn.Sequential(*layers)


def build_optimizer(hp, model):
    if hp["optimizer"] == "sgd":
        return torch.optim.SGD(model.parameters(), lr=float(hp["lr"]),
                               momentum=float(hp["momentum"]),
                               weight_decay=float(hp["weight_decay"]))
    return torch.optim.Adam(model.parameters(), lr=float(hp["lr"]),
                            weight_decay=float(hp["weight_decay"]))


def own_settings(hp, optimizer):
    """This trial's lr, momentum and weight decay, over what a loaded state carried."""
    for group in optimizer.param_groups:
        group["lr"] = float(hp["lr"])
        group["weight_decay"] = float(hp["weight_decay"])
        if "momentum" in group:
            group["momentum"] = float(hp["momentum"])


def main():
    torch.set_num_threads(1)
    ctx = cairn.init()  # seeds torch: the initial weights follow ctx.seed
    hp = ctx.hparams
    train, val = split_digits()
    model = build_model(hp, train[0].shape[1], 10)
    optimizer = build_optimizer(hp, model)
    step = ctx.steps_completed
    if ctx.latest_checkpoint:
        model.load_state_dict(torch.load(ctx.latest_checkpoint / "model.pt"))
        optimizer.load_state_dict(torch.load(ctx.latest_checkpoint / "optimizer.pt"))
        own_settings(hp, optimizer)
    features, labels = train
    batch_size = int(hp["batch_size"])
    for op in ctx.operations():
        while step < op.length:
            # The order of an epoch is fixed by (seed, epoch): a resumed epoch sees the same
            # batches.
            order = torch.from_numpy(
                np.random.default_rng([ctx.seed, 1, step]).permutation(len(labels)))
            model.train()
            for start in range(0, len(order), batch_size):
                batch = order[start:start + batch_size]
                loss = nn.functional.cross_entropy(model(features[batch]), labels[batch])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            step += 1
            with torch.no_grad():
                model.eval()
                val_loss = nn.functional.cross_entropy(model(val[0]), val[1]).item()
            if not math.isfinite(val_loss):
                print("torch_digits_trial: diverged at epoch %d" % step, file=sys.stderr)
                sys.exit(2)
            if step < op.length:
                ctx.report_validation(step, {"val_loss": val_loss})
            if ctx.checkpoint_due(step) or step == op.length:
                with ctx.checkpoint(step) as path:
                    torch.save(model.state_dict(), path / "model.pt")
                    torch.save(optimizer.state_dict(), path / "optimizer.pt")
                if ctx.should_preempt():
                    return
        ctx.report_validation(step, {"val_loss": val_loss})


if __name__ == "__main__":
    main()
