#!/usr/bin/env python3
"""Classify grayscale PNG images with cnnrt and NumPy alone (no imaging library).

    PYTHONPATH=build/cpu/python python3 apps/examples/python/classify.py \
        models/fashion_lenet.onnx samples/fashion_*.png

prints each image's top classes, as `cnnrt infer MODEL IMAGES --top-k 3` does. The model's metadata_props
say how pixels become inputs (input_scale, mean, std, invert) and name the classes (labels); see
models/fashion_lenet.md. The images must have the model's height and width (the CLI also resizes).
"""

import argparse
import glob
import os
import struct
import sys
import zlib

import numpy as np

import cnnrt

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # PNG colour type -> samples per pixel (gray, RGB, gray+alpha, RGBA)


def read_png_gray(path):
    """The image as a uint8 array [height, width]: 8-bit PNGs, colour converted with the luma weights
    0.299 R + 0.587 G + 0.114 B, alpha dropped (as the cnnrt tool converts)."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError(f"{path}: not a PNG file")
    pos, header, idat = len(PNG_SIGNATURE), None, []
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        pos += 12 + length  # length, type, body, CRC
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError(f"{path}: no IHDR chunk")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in CHANNELS or interlace != 0:
        raise ValueError(f"{path}: only 8-bit, non-interlaced gray/RGB(A) PNGs are read here "
                         f"(bit depth {depth}, colour type {colour}, interlace {interlace})")
    channels = CHANNELS[colour]
    stride = width * channels
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8)
    if raw.size != height * (stride + 1):
        raise ValueError(f"{path}: truncated image data")
    rows = raw.reshape(height, stride + 1)
    pixels = np.zeros((height, stride), dtype=np.int32)
    for y in range(height):  # undo each row's filter (PNG spec, section 9)
        kind, line = rows[y, 0], rows[y, 1:].astype(np.int32)
        up = pixels[y - 1] if y > 0 else np.zeros(stride, dtype=np.int32)
        if kind == 0:
            out = line
        elif kind == 2:
            out = (line + up) & 0xFF
        elif kind in (1, 3, 4):  # Sub, Average, Paeth: each byte depends on the one to its left
            out = np.zeros(stride, dtype=np.int32)
            for x in range(stride):
                left = out[x - channels] if x >= channels else 0
                upper_left = up[x - channels] if x >= channels else 0
                if kind == 1:
                    predictor = left
                elif kind == 3:
                    predictor = (left + up[x]) // 2
                else:
                    p = left + up[x] - upper_left
                    pa, pb, pc = abs(p - left), abs(p - up[x]), abs(p - upper_left)
                    predictor = left if pa <= pb and pa <= pc else (up[x] if pb <= pc else upper_left)
                out[x] = (line[x] + predictor) & 0xFF
        else:
            raise ValueError(f"{path}: bad filter type {kind} in row {y}")
        pixels[y] = out
    image = pixels.reshape(height, width, channels).astype(np.float32)
    if channels >= 3:
        gray = 0.299 * image[..., 0] + 0.587 * image[..., 1] + 0.114 * image[..., 2]
        return np.clip(np.rint(gray), 0, 255).astype(np.uint8)
    return image[..., 0].astype(np.uint8)


def normalise(pixels, metadata):
    """x = ((invert ? 255 - p : p) * input_scale - mean) / std, in float32 as the cnnrt tool computes it."""
    scale = np.float32(float(metadata.get("input_scale", 1.0 / 255.0)))
    mean = np.float32(float(metadata.get("mean", 0.0)))
    inv_std = np.float32(1.0) / np.float32(float(metadata.get("std", 1.0)))
    p = pixels.astype(np.float32)
    if metadata.get("invert", "0") == "1":
        p = np.float32(255.0) - p
    return (p * scale - mean) * inv_std


def softmax(logits):
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def classify(model, paths, top_k=3):
    """[(path, [(label, probability), ...]), ...], best class first, for images of the model's size."""
    _, channels, height, width = model.inputs[0].shape
    if channels != 1:
        raise ValueError(f"this example feeds grayscale images; {model.name} takes {channels} channels")
    images = []
    for path in paths:
        pixels = read_png_gray(path)
        if pixels.shape != (height, width):
            raise ValueError(f"{path}: {pixels.shape[1]}x{pixels.shape[0]} pixels, the model takes "
                             f"{width}x{height} (`cnnrt infer` resizes; this example does not)")
        images.append(normalise(pixels, model.metadata))
    batch = np.stack(images)[:, np.newaxis]  # [N, 1, H, W], float32, C-contiguous
    probabilities = softmax(model.run({model.inputs[0].name: batch})[0])
    labels = model.metadata.get("labels", "").split(",")
    results = []
    for path, p in zip(paths, probabilities):
        best = sorted(range(len(p)), key=lambda i: (-p[i], i))[:top_k]  # ties: lower index first
        results.append((path, [(labels[i].strip() if i < len(labels) else f"class {i}", float(p[i])) for i in best]))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=os.path.join(REPO, "models", "fashion_lenet.onnx"))
    parser.add_argument("images", nargs="*")
    parser.add_argument("--top-k", type=int, default=3)
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "gpu"])
    args = parser.parse_args()
    paths = args.images or sorted(glob.glob(os.path.join(REPO, "samples", "fashion_*.png")))
    try:
        model = cnnrt.Model(args.model, device=args.device)
        for path, best in classify(model, paths, args.top_k):
            print(f"{path}: " + ", ".join(f"{label} {100 * p:.1f}%" for label, p in best))
    except cnnrt.Error as e:
        print(f"error: {e}", file=sys.stderr)
        return e.code
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
