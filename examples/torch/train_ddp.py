"""Data-parallel training of an MLP on Fashion-MNIST with PyTorch DDP.

An ordinary DDP script, written as a user would: nothing in it knows of
commprof. The model is the one `commprof train` trains (784-256-128-10,
ReLU, softmax cross-entropy, SGD with momentum 0.9), so the two can be
compared with `commprof diff` (docs/torch.md):

    commprof record --ranks 2 --out runs/torch-ddp -- \
        python3 examples/torch/train_ddp.py --epochs 1 --batch-size 64

It reads torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
which `commprof record --ranks N`, torchrun and the startup module under
mpirun all set.
"""
import argparse
import gzip
import os
import struct
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def read_idx(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    dims = magic & 0xFF
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    t = torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8)
    return t.reshape(shape)


def load(data, split):
    images = read_idx(os.path.join(data, split + "-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data, split + "-labels-idx1-ubyte.gz"))
    return images.reshape(images.shape[0], -1).float() / 255.0, labels.long()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--batch-size", type=int, default=64, help="images per rank per step")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--hidden", default="256,128")
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: the whole epochs)")
    p.add_argument("--bucket-mb", type=float, default=1.0)
    a = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)
    torch.set_num_threads(1)

    x, y = load(a.data, "train")
    sizes = [784] + [int(h) for h in a.hidden.split(",")] + [10]
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    model = DDP(nn.Sequential(*layers), bucket_cap_mb=a.bucket_mb)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    per_rank = x.shape[0] // world
    steps = per_rank // a.batch_size
    done = 0
    t0 = time.time()
    for epoch in range(a.epochs):
        g = torch.Generator().manual_seed(epoch)
        order = torch.randperm(x.shape[0], generator=g)[rank * per_rank:(rank + 1) * per_rank]
        for s in range(steps):
            idx = order[s * a.batch_size:(s + 1) * a.batch_size]
            opt.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            done += 1
            if a.max_steps and done >= a.max_steps:
                break
        if rank == 0:
            print("epoch %d: loss %.4f, %d steps, %.1fs" % (epoch + 1, loss.item(), done, time.time() - t0))
        if a.max_steps and done >= a.max_steps:
            break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
