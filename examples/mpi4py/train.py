#!/usr/bin/env python3
"""Data-parallel training of a small MLP with mpi4py and numpy, written as a
user writes it: nothing in it knows about commprof. It trains the same model
as `commprof train` (784-256-128-10, ReLU, softmax, SGD with momentum) on
the same kind of data, so that a recording of it and of `commprof train`
can be read side by side:

    commprof record --out runs/mpi4py -- mpirun -np 2 python3 examples/mpi4py/train.py
    commprof record --ranks 2 --out runs/train -- train

Every rank starts from rank 0's parameters (MPI_Bcast). Each step, every
rank computes the gradient of its share of the global batch; backward
produces the layers' gradients last layer first, and as soon as a bucket of
them (--bucket-mb, counted from the last layer) is complete its
MPI_Iallreduce starts, so that communication overlaps the rest of backward;
the rank waits for all of them (MPI_Waitall) before the update. After each
epoch the loss and accuracy are averaged with MPI_Allreduce.

Data: --data DIR reads MNIST-format IDX files (Debian's dataset-fashion-mnist
installs Fashion-MNIST in /usr/share/datasets/fashion-mnist); by default a
synthetic 10-class set of strokes is drawn, as `commprof train` does.
"""
import argparse
import gzip
import os
import struct
import sys
import time

# One BLAS thread per rank: the ranks share the cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

SIDE, PIXELS, CLASSES = 28, 28 * 28, 10


def synthetic(n, seed):
    """n images of a learnable 10-class set: each class is three strokes at
    class-specific places, drawn with random shifts, width and noise."""
    templates = np.random.default_rng(42).uniform(4, 24, size=(CLASSES, 3, 4))
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, size=n).astype(np.uint8)
    shift = rng.uniform(-2, 2, size=(n, 1, 2))
    width = 1 + rng.uniform(size=(n, 1, 1))
    ys, xs = np.mgrid[0:SIDE, 0:SIDE].astype(np.float32)
    images = np.zeros((n, SIDE, SIDE), dtype=np.float32)
    for c in range(0, n, 1000):  # a thousand images at a time
        part = slice(c, c + 1000)
        for k in range(3):
            s = templates[labels[part], k][:, None, :] + np.concatenate([shift[part], shift[part]], axis=2)
            x0, y0, x1, y1 = (s[..., j:j + 1] for j in range(4))  # each (images, 1, 1)
            ex, ey = x1 - x0, y1 - y0
            t = np.clip(((xs - x0) * ex + (ys - y0) * ey) / np.maximum(ex * ex + ey * ey, 1e-9), 0, 1)
            d = np.hypot(x0 + t * ex - xs, y0 + t * ey - ys)
            w = width[part]
            np.maximum(images[part], np.where(d < w, 1 - d / w, 0), out=images[part])
    images += rng.normal(0, 0.1, size=images.shape).astype(np.float32)
    np.clip(images, 0, 1, out=images)
    return images.reshape(n, PIXELS), labels


def read_idx(path):
    """An IDX file (raw or .gz) as a numpy array."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        zero, kind, dims = struct.unpack(">HBB", f.read(4))
        if zero != 0 or kind != 0x08:
            sys.exit(f"{path}: not an IDX file of bytes")
        shape = struct.unpack(">" + "I" * dims, f.read(4 * dims))
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(shape)


def load(data, size, seed):
    if not data:
        return synthetic(size, seed), synthetic(size // 6, seed + 1000)
    sets = []
    for prefix in ("train", "t10k"):
        images = read_idx(os.path.join(data, prefix + "-images-idx3-ubyte"))
        labels = read_idx(os.path.join(data, prefix + "-labels-idx1-ubyte"))
        sets.append((images.reshape(len(labels), PIXELS).astype(np.float32) / 255, labels))
    return sets[0], sets[1]


class MLP:
    """The parameters and their gradients each live in one flat float32
    array, layer by layer (weights out x in, then biases), so that a run of
    layers is one contiguous buffer to allreduce."""

    def __init__(self, sizes, seed):
        self.sizes = sizes
        self.offs = [0]
        for i, o in zip(sizes, sizes[1:]):
            self.offs.append(self.offs[-1] + o * i + o)
        self.params = np.zeros(self.offs[-1], dtype=np.float32)
        self.grads = np.zeros_like(self.params)
        rng = np.random.default_rng(seed)
        for l in range(1, len(sizes)):
            w, _ = self.layer(self.params, l)
            w[...] = rng.normal(0, np.sqrt(2 / sizes[l - 1]), size=w.shape)

    def layers(self):
        return len(self.sizes) - 1

    def span(self, l):
        return self.offs[l - 1], self.offs[l]

    def layer(self, flat, l):
        lo, hi = self.span(l)
        i, o = self.sizes[l - 1], self.sizes[l]
        return flat[lo:lo + o * i].reshape(o, i), flat[lo + o * i:hi]

    def forward(self, x):
        self.acts, self.zs = [x], [None]
        for l in range(1, self.layers() + 1):
            w, b = self.layer(self.params, l)
            z = self.acts[-1] @ w.T + b
            self.zs.append(z)
            if l < self.layers():
                self.acts.append(np.maximum(z, 0))
            else:
                e = np.exp(z - z.max(axis=1, keepdims=True))
                self.acts.append(e / e.sum(axis=1, keepdims=True))
        return self.acts[-1]

    def backward(self, labels, done):
        """Gradients of the mean cross-entropy, last layer first; done(l) is
        called as soon as layer l's are complete."""
        dz = self.acts[-1].copy()
        dz[np.arange(len(labels)), labels] -= 1
        dz /= len(labels)
        for l in range(self.layers(), 0, -1):
            gw, gb = self.layer(self.grads, l)
            gw[...] = dz.T @ self.acts[l - 1]
            gb[...] = dz.sum(axis=0)
            if l > 1:
                w, _ = self.layer(self.params, l)
                dz = (dz @ w) * (self.zs[l - 1] > 0)
            done(l)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden", default="256,128", help="hidden layer sizes")
    p.add_argument("--batch-size", type=int, default=64, help="images per rank per step")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--bucket-mb", type=float, default=1, help="gradient allreduce bucket size, MiB")
    p.add_argument("--data", default="", help="directory of MNIST-format IDX files (default: synthetic)")
    p.add_argument("--synthetic-size", type=int, default=20000)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()

    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    (train_x, train_y), (test_x, test_y) = load(a.data, a.synthetic_size, a.seed)
    model = MLP([PIXELS] + [int(h) for h in a.hidden.split(",")] + [CLASSES], a.seed)
    comm.Bcast(model.params, root=0)

    # Buckets: runs of layers from the last, each at least bucket-mb.
    buckets, bucket_of, hi = [], {}, model.offs[-1]
    for l in range(model.layers(), 0, -1):
        lo, _ = model.span(l)
        if (hi - lo) * 4 >= a.bucket_mb * (1 << 20) or l == 1:
            bucket_of[l] = (lo, hi)
            buckets.append((lo, hi))
            hi = lo
    velocity = np.zeros_like(model.params)
    b = a.batch_size
    steps = len(train_y) // (b * n)
    if rank == 0:
        print(f"# mpi4py train: mlp {'-'.join(map(str, model.sizes))} ({model.offs[-1]} parameters), "
              f"{n} ranks x batch {b}, {steps} steps/epoch, {len(buckets)} gradient buckets", flush=True)

    for epoch in range(a.epochs):
        start = time.time()
        order = np.random.default_rng((a.seed, epoch)).permutation(len(train_y))
        loss = correct = 0.0
        for s in range(steps):
            idx = order[(s * n + rank) * b:(s * n + rank + 1) * b]
            x, y = train_x[idx], train_y[idx]
            prob = model.forward(x)
            loss += -np.log(np.maximum(prob[np.arange(b), y], 1e-12)).mean()
            correct += (prob.argmax(axis=1) == y).sum()
            requests = []

            def ready(l):
                if l in bucket_of and n > 1:
                    lo, hi = bucket_of[l]
                    requests.append(comm.Iallreduce(MPI.IN_PLACE, model.grads[lo:hi], op=MPI.SUM))

            model.backward(y, ready)
            MPI.Request.Waitall(requests)
            velocity *= a.momentum
            velocity += model.grads / n
            model.params -= a.lr * velocity
        sums = np.array([loss / steps, correct], dtype=np.float64)
        comm.Allreduce(MPI.IN_PLACE, sums, op=MPI.SUM)
        share = np.array_split(np.arange(len(test_y)), n)[rank]
        right = np.array([(model.forward(test_x[share]).argmax(axis=1) == test_y[share]).sum()], dtype=np.float64)
        comm.Allreduce(MPI.IN_PLACE, right, op=MPI.SUM)
        if rank == 0:
            secs = time.time() - start
            print(f"epoch {epoch + 1}  loss {sums[0] / n:.4f}  train acc {sums[1] / (steps * b * n):.4f}  "
                  f"test acc {right[0] / len(test_y):.4f}  {steps * b * n / secs:.0f} images/s", flush=True)


if __name__ == "__main__":
    main()
