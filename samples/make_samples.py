#!/usr/bin/python3
"""Writes the sample images in samples/:

  fashion_<index>_<class>.png  the first Fashion-MNIST test image of each class (28x28, 8-bit grayscale),
                               named by its index in t10k-images-idx3-ubyte and its label's slug
  camera.png, coins.png        grayscale photos from scikit-image's bundled data (licences: README.md)

    /usr/bin/python3 samples/make_samples.py [--data /usr/share/datasets/fashion-mnist]
"""
import argparse
import gzip
import os
import re

import numpy as np
import skimage.data
import skimage.io

CLASS_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
               "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]


def read_idx(path):
    """A gzipped uint8 IDX file as an ndarray: magic 0x000008DD, DD big-endian uint32 dims, then the bytes."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    if magic >> 8 != 0x08:
        raise ValueError(f"{path}: not a uint8 IDX file (magic {magic:#x})")
    ndim = magic & 0xFF
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def slug(name):
    """'T-shirt/top' -> 't_shirt_top', 'Ankle boot' -> 'ankle_boot'."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def save_gray(path, image):
    assert image.dtype == np.uint8 and image.ndim == 2, (path, image.dtype, image.shape)
    skimage.io.imsave(path, image, check_contrast=False)
    back = skimage.io.imread(path)
    assert back.shape == image.shape and np.array_equal(back, image), f"{path} does not read back"
    print(f"wrote {path} ({image.shape[1]}x{image.shape[0]}, {os.path.getsize(path)} bytes)")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--out", default=here)
    args = ap.parse_args()

    images = read_idx(os.path.join(args.data, "t10k-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(args.data, "t10k-labels-idx1-ubyte.gz"))
    for cls, name in enumerate(CLASS_NAMES):
        index = int(np.flatnonzero(labels == cls)[0])
        save_gray(os.path.join(args.out, f"fashion_{index}_{slug(name)}.png"), images[index])

    save_gray(os.path.join(args.out, "camera.png"), skimage.data.camera())
    save_gray(os.path.join(args.out, "coins.png"), skimage.data.coins())


if __name__ == "__main__":
    main()
