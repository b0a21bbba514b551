#!/usr/bin/python3
"""Trains the benchmark LeNet on Fashion-MNIST and exports models/fashion_lenet.onnx.

Architecture (the LeNet of the `small` benchmark suite; models/fashion_lenet.md documents the result):
  input [N,1,28,28] -> Conv 1->8 5x5 pad 2 -> Relu -> MaxPool 2x2/2   -> [N,8,14,14]
                    -> Conv 8->16 5x5 pad 2 -> Relu -> MaxPool 3x3/3 -> [N,16,4,4]
                    -> Flatten -> Gemm 256->10 -> logits [N,10]

Data: Debian's dataset-fashion-mnist IDX files, read with gzip + numpy (no torchvision).
CPU only, one thread, fixed seeds: the same command gives the same model on the same torch build.

    /usr/bin/python3 models/train_fashion_mnist.py [--data DIR] [--epochs E] [--out models/fashion_lenet.onnx]
"""
import argparse
import gzip
import os
import random
import time

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

CLASS_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
               "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
INPUT_SCALE = "0.00392156862745098"  # 1/255: raw 0..255 pixel -> 0..1


def read_idx(path):
    """Reads an IDX file (gzipped): magic 0x0000TTDD, then DD big-endian uint32 dims, then uint8 data."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    if magic >> 8 != 0x08:  # type byte 0x08 = unsigned byte
        raise ValueError(f"{path}: not a uint8 IDX file (magic {magic:#x})")
    ndim = magic & 0xFF
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


class FashionLeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 5, padding=2)
        self.conv2 = nn.Conv2d(8, 16, 5, padding=2)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)  # [N,8,14,14]
        x = F.max_pool2d(F.relu(self.conv2(x)), 3, 3)  # [N,16,4,4]
        return self.fc(torch.flatten(x, 1))            # [N,10]


def augment(batch, gen, max_shift):
    """Random horizontal flip per image (garments are left-right symmetric enough), and when max_shift > 0 a
    random shift of up to max_shift pixels, filled with the background value."""
    n = batch.shape[0]
    flip = torch.rand(n, generator=gen) < 0.5
    batch = torch.where(flip[:, None, None, None], batch.flip(3), batch)
    if max_shift == 0:
        return batch
    s = max_shift
    padded = F.pad(batch, (s, s, s, s), value=float(batch.min()))
    dx = torch.randint(0, 2 * s + 1, (n,), generator=gen)
    dy = torch.randint(0, 2 * s + 1, (n,), generator=gen)
    out = torch.empty_like(batch)
    for i in range(n):
        out[i] = padded[i, :, dy[i]:dy[i] + 28, dx[i]:dx[i] + 28]
    return out


def evaluate(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], 1000):
            correct += (model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item()
    return 100.0 * correct / x.shape[0]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--shift", type=int, default=0, help="max random shift in pixels (0: flips only)")
    ap.add_argument("--out", default=os.path.join(here, "fashion_lenet.onnx"))
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)

    train_x = read_idx(os.path.join(args.data, "train-images-idx3-ubyte.gz")).astype(np.float32) / 255.0
    train_y = read_idx(os.path.join(args.data, "train-labels-idx1-ubyte.gz")).astype(np.int64)
    test_x = read_idx(os.path.join(args.data, "t10k-images-idx3-ubyte.gz")).astype(np.float32) / 255.0
    test_y = read_idx(os.path.join(args.data, "t10k-labels-idx1-ubyte.gz")).astype(np.int64)
    # Normalisation constants from the training set, rounded so the metadata states them exactly.
    mean = round(float(train_x.mean()), 4)
    std = round(float(train_x.std()), 4)
    print(f"train {train_x.shape}, test {test_x.shape}, mean {mean}, std {std}")

    def to_tensor(a):
        return torch.from_numpy((a - mean) / std).unsqueeze(1)

    xtr, ytr = to_tensor(train_x), torch.from_numpy(train_y)
    xte, yte = to_tensor(test_x), torch.from_numpy(test_y)

    model = FashionLeNet()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    steps_per_epoch = (xtr.shape[0] + args.batch - 1) // args.batch
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, epochs=args.epochs,
                                                steps_per_epoch=steps_per_epoch)
    gen = torch.Generator().manual_seed(1)
    for epoch in range(args.epochs):
        t0 = time.time()
        model.train()
        perm = torch.randperm(xtr.shape[0], generator=gen)
        total_loss = 0.0
        for s in range(steps_per_epoch):
            idx = perm[s * args.batch:(s + 1) * args.batch]
            xb = augment(xtr[idx], gen, args.shift)
            loss = F.cross_entropy(model(xb), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total_loss += loss.item()
        acc = evaluate(model, xte, yte)
        print(f"epoch {epoch + 1:2d}/{args.epochs}  loss {total_loss / steps_per_epoch:.4f}  "
              f"test acc {acc:.2f}%  ({time.time() - t0:.1f} s)", flush=True)

    acc = evaluate(model, xte, yte)
    print(f"final test accuracy: {acc:.2f}%")

    model.eval()
    torch.onnx.export(model, torch.zeros(1, 1, 28, 28), args.out, opset_version=13,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
    m = onnx.load(args.out)
    meta = {
        "labels": ",".join(CLASS_NAMES),
        "input_scale": INPUT_SCALE,
        "mean": repr(mean),
        "std": repr(std),
        "invert": "0",
        "task": "classification",
        "test_accuracy": f"{acc:.2f}",
    }
    del m.metadata_props[:]
    for k, v in meta.items():
        m.metadata_props.add(key=k, value=v)
    m.doc_string = "LeNet-class Fashion-MNIST classifier; see models/fashion_lenet.md"
    onnx.checker.check_model(m)
    onnx.save(m, args.out)
    print(f"wrote {args.out}: {meta}")


if __name__ == "__main__":
    main()
