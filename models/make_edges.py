#!/usr/bin/python3
"""Builds models/edges.onnx: a fixed filter bank of one Conv, 1 input channel -> 5 maps, 5x5 kernel, pad 2.

    input [N,1,H,W] -> Conv(W=[5,1,5,5], B=0, pads 2) -> maps [N,5,H,W]

Channels (the 3x3 filters sit centred in the 5x5 kernel, with zeros around them):
  0 sobel_x    [[-1,0,1],[-2,0,2],[-1,0,1]]   (responds to intensity rising left to right)
  1 sobel_y    its transpose                 (rising top to bottom)
  2 laplacian  [[0,1,0],[1,-4,1],[0,1,0]]
  3 blur3      [1,2,1]^T [1,2,1] / 16
  4 blur5      [1,4,6,4,1]^T [1,4,6,4,1] / 256
Conv is cross-correlation (no kernel flip), so these are the kernels exactly as written.

    /usr/bin/python3 models/make_edges.py [--out models/edges.onnx]
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

LABELS = ["sobel_x", "sobel_y", "laplacian", "blur3", "blur5"]


def filter_bank():
    """[5,1,5,5] float32 weights, one channel per entry of LABELS."""
    def embed3(k3):
        k = np.zeros((5, 5), np.float64)
        k[1:4, 1:4] = k3
        return k

    sobel_x = np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], np.float64)
    laplacian = np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]], np.float64)
    b3 = np.array([1, 2, 1], np.float64)
    b5 = np.array([1, 4, 6, 4, 1], np.float64)
    kernels = [embed3(sobel_x), embed3(sobel_x.T), embed3(laplacian),
               embed3(np.outer(b3, b3) / 16.0), np.outer(b5, b5) / 256.0]
    return np.stack(kernels)[:, None, :, :].astype(np.float32)


def build():
    weights = numpy_helper.from_array(filter_bank(), "filters")
    bias = numpy_helper.from_array(np.zeros(5, np.float32), "filters_bias")
    conv = helper.make_node("Conv", ["input", "filters", "filters_bias"], ["maps"], name="filter_bank",
                            kernel_shape=[5, 5], pads=[2, 2, 2, 2], strides=[1, 1], dilations=[1, 1], group=1)
    graph = helper.make_graph(
        [conv], "edges",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 1, "H", "W"])],
        [helper.make_tensor_value_info("maps", TensorProto.FLOAT, ["N", 5, "H", "W"])],
        [weights, bias])
    model = helper.make_model(graph, producer_name="cnnrt models/make_edges.py",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7  # what onnx 1.12 writes for opset 13; readable by every runtime since 2020
    model.doc_string = "Sobel x/y, Laplacian, 3x3 and 5x5 Gaussian blur as one Conv; see models/edges.md"
    for key, value in {
        "task": "image-to-image",
        "labels": ",".join(LABELS),
        "input_scale": "0.00392156862745098",
        "mean": "0.0",
        "std": "1.0",
        "invert": "0",
    }.items():
        model.metadata_props.add(key=key, value=value)
    onnx.checker.check_model(model, full_check=True)
    return model


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(here, "edges.onnx"))
    args = ap.parse_args()
    model = build()
    onnx.save(model, args.out)

    # Check against a direct evaluation of the same correlation on a random image.
    try:
        from onnx.reference import ReferenceEvaluator
    except ImportError:
        ReferenceEvaluator = None
    rng = np.random.default_rng(0)
    image = rng.random((1, 1, 9, 11), dtype=np.float32)
    padded = np.pad(image[0, 0], 2)
    w = filter_bank()
    want = np.zeros((1, 5, 9, 11), np.float64)
    for c in range(5):
        for y in range(9):
            for x in range(11):
                want[0, c, y, x] = np.sum(padded[y:y + 5, x:x + 5] * w[c, 0])
    if ReferenceEvaluator is not None:
        got = ReferenceEvaluator(model).run(None, {"input": image})[0]
        assert np.allclose(got, want, atol=1e-5), "onnx.reference disagrees with the direct correlation"
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
