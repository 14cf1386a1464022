"""The PyTorch side of the builtin:mlp throughput benchmark (bench/mlp_bench.py): a plain
script that trains the same MLP as builtin:mlp, the same way, on data of the same shape.

Per epoch, like builtin:mlp: shuffle the training rows, train in mini-batches gathered
from that order (SGD with momentum, or Adam), then evaluate the loss and accuracy on the
validation rows. Prints one JSON object: the seconds of every epoch, with and without
that validation pass.

    /usr/bin/python3 bench/mlp_torch.py --features 32 --hidden 256 --layers 2 \
        --batch-size 128 --samples 50000 --epochs 5 --threads 1
"""
import argparse
import json
import os
import time


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--samples", type=int, default=50000)
    p.add_argument("--val-fraction", type=float, default=0.2)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--blas-threads", type=int, default=None,
                   help="OpenBLAS threads, which do torch's matrix products on Debian "
                   "(default: --threads)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cuda: data, model and optimizer on the GPU (bench/mlp_gpu_bench.py)")
    return p.parse_args()


def main():
    args = parse_args()
    # torch's own threads (OpenMP) and its BLAS's (OpenBLAS on Debian), before import.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas_threads or args.threads)
    import torch
    from torch import nn
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    # Teacher-like data: Gaussian inputs labelled by a random tanh network. Only the
    # shape matters for speed; the labels are learnable so the loss does move.
    x = torch.randn(args.samples, args.features)
    teacher = torch.tanh(x @ torch.randn(args.features, 32) / args.features ** 0.5)
    y = (teacher @ torch.randn(32, args.classes)).argmax(1)
    n_val = max(1, round(args.val_fraction * args.samples))
    order = torch.randperm(args.samples)
    x_val, y_val = x[order[:n_val]].contiguous(), y[order[:n_val]].contiguous()
    x_train, y_train = x[order[n_val:]].contiguous(), y[order[n_val:]].contiguous()
    cuda = args.device == "cuda"
    if cuda:
        # Everything on the GPU, as builtin:mlp does with device: cuda.
        x_val, y_val, x_train, y_train = (t.cuda() for t in (x_val, y_val, x_train, y_train))

    layers, width = [], args.features
    for _ in range(args.layers):
        layers += [nn.Linear(width, args.hidden), nn.ReLU()]
        width = args.hidden
    model = nn.Sequential(*layers, nn.Linear(width, args.classes)).to(args.device)
    if args.optimizer == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    train_s, epoch_s, losses = [], [], []
    rows = len(y_train)
    for _ in range(args.epochs):
        start = time.perf_counter()
        model.train()
        permutation = torch.randperm(rows, device=args.device)
        loss_sum = 0.0
        for first in range(0, rows, args.batch_size):
            batch = permutation[first:first + args.batch_size]
            loss = nn.functional.cross_entropy(model(x_train[batch]), y_train[batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            # On the GPU the loss stays there until the epoch ends (.item() would wait for
            # the GPU every batch; builtin:mlp waits once per epoch).
            loss_sum += loss.detach() * len(batch) if cuda else loss.item() * len(batch)
        loss_sum = float(loss_sum)
        if cuda:
            torch.cuda.synchronize()
        trained = time.perf_counter()
        model.eval()
        with torch.no_grad():
            logits = model(x_val)
            nn.functional.cross_entropy(logits, y_val).item()
            (logits.argmax(1) == y_val).float().mean().item()
        epoch_s.append(time.perf_counter() - start)
        train_s.append(trained - start)
        losses.append(loss_sum / rows)

    print(json.dumps({"train_rows": rows, "val_rows": n_val, "threads": torch.get_num_threads(),
                      "blas_threads": int(os.environ["OPENBLAS_NUM_THREADS"]),
                      "epoch_s": epoch_s, "train_s": train_s, "loss": losses}))


if __name__ == "__main__":
    main()
