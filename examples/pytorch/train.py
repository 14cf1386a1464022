"""A PyTorch trial for cairn: an MLP that classifies scikit-learn's 8x8 digits.

One unit of training is one epoch. The script follows the loop of docs/sdk.md: it resumes
from ctx.latest_checkpoint, trains until each operation's length, checkpoints when
cairn says one is due, stops when asked to, and reports val_loss and val_accuracy at the
end of every operation. It runs unchanged without cairn:

    CAIRN_MAX_LENGTH=10 /usr/bin/python3 train.py

Hyperparameters (all optional): lr, hidden, layers, batch_size, optimizer (sgd/adam),
momentum, weight_decay, val_fraction.
"""

import sys

import cairn
import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

DEFAULTS = {
    "lr": 0.01,
    "hidden": 64,
    "layers": 1,
    "batch_size": 32,
    "optimizer": "adam",
    "momentum": 0.9,
    "weight_decay": 0.0,
    "val_fraction": 0.2,
}


def split_digits(seed, val_fraction):
    """The digits data as tensors, split into train and validation by the trial's seed
    (so every run of a trial, resumed or not, sees the same split)."""
    digits = load_digits()
    features = torch.tensor(digits.data / 16.0, dtype=torch.float32)  # pixels are 0..16
    labels = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.from_numpy(np.random.default_rng([seed, 0]).permutation(len(labels)))
    n_val = int(len(labels) * val_fraction)
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
    name = str(hp["optimizer"]).lower()
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=float(hp["lr"]),
                               momentum=float(hp["momentum"]),
                               weight_decay=float(hp["weight_decay"]))
    if name == "adam":
        return torch.optim.Adam(model.parameters(), lr=float(hp["lr"]),
                                weight_decay=float(hp["weight_decay"]))
    sys.exit("train.py: optimizer must be sgd or adam, got %r" % hp["optimizer"])


def train_one_epoch(model, optimizer, train, batch_size, seed, epoch):
    """One pass over the training set in an order fixed by (seed, epoch), so an epoch
    replayed after a resume sees the same batches. Returns (mean loss, accuracy)."""
    features, labels = train
    order = torch.from_numpy(np.random.default_rng([seed, 1, epoch]).permutation(len(labels)))
    model.train()
    total_loss, correct = 0.0, 0
    for start in range(0, len(order), batch_size):
        batch = order[start:start + batch_size]
        logits = model(features[batch])
        loss = nn.functional.cross_entropy(logits, labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += loss.item() * len(batch)
        correct += (logits.argmax(1) == labels[batch]).sum().item()
    return total_loss / len(order), correct / len(order)


@torch.no_grad()
def evaluate(model, val):
    features, labels = val
    model.eval()
    logits = model(features)
    loss = nn.functional.cross_entropy(logits, labels).item()
    accuracy = (logits.argmax(1) == labels).float().mean().item()
    return {"val_loss": loss, "val_accuracy": accuracy}


def save(path, model, optimizer, step):
    torch.save(model.state_dict(), path / "model.pt")
    torch.save(optimizer.state_dict(), path / "optimizer.pt")
    (path / "step.txt").write_text("%d\n" % step)


def load(path, model, optimizer):
    model.load_state_dict(torch.load(path / "model.pt"))
    optimizer.load_state_dict(torch.load(path / "optimizer.pt"))


def main():
    ctx = cairn.init()  # also seeds torch, so the initial weights follow ctx.seed
    hp = {**DEFAULTS, **ctx.hparams}
    train, val = split_digits(ctx.seed, float(hp["val_fraction"]))
    model = build_model(hp, train[0].shape[1], 10)
    optimizer = build_optimizer(hp, model)
    step = ctx.steps_completed
    if ctx.latest_checkpoint:
        load(ctx.latest_checkpoint, model, optimizer)

    for op in ctx.operations():
        while step < op.length:
            loss, accuracy = train_one_epoch(model, optimizer, train, int(hp["batch_size"]),
                                             ctx.seed, step)
            step += 1
            ctx.report_training(step, {"loss": loss, "accuracy": accuracy})
            if ctx.checkpoint_due(step):
                with ctx.checkpoint(step) as path:
                    save(path, model, optimizer, step)
                if ctx.should_preempt():
                    return
        ctx.report_validation(step, evaluate(model, val))


if __name__ == "__main__":
    main()
