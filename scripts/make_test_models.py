#!/usr/bin/python3
"""Exports small CNNs with PyTorch's TorchScript exporter at several opsets, with reference outputs.

Writes tests/data/<case>_opset<K>/model.onnx and test_data_set_0/{input_0,output_K}.pb (the ONNX backend-test
layout: serialized TensorProtos). Reference outputs come from torch itself (float32, eval mode). Inputs are
random normal, batch 2, small spatial sizes; every model has a dynamic batch dimension named N, as most
exported models do. tests/test_exported_models.cpp runs every folder on the CPU backend.

    /usr/bin/python3 scripts/make_test_models.py [--out tests/data] [--only NAME ...]

Each case is checked with onnx.checker; onnx.reference (onnx >= 1.13) is used as a second reference when
it is installed. Combinations the exporter refuses (an op that needs a newer opset) are skipped and listed.
"""
import argparse
import os
import shutil
import sys
import zlib

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

OPSETS = [9, 11, 13, 17]


def randomize_batchnorm(module):
    """Non-trivial running statistics and affine parameters, so folding or running BN is really tested."""
    for m in module.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            with torch.no_grad():
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.3, 0.3)
    return module


class LeNetBN(nn.Module):
    """Conv-BN-ReLU-MaxPool twice (BN folded into the conv by the exporter), then a BN after a ReLU (kept as a
    BatchNormalization node), Flatten, Linear, ReLU, Linear."""
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.conv2, self.bn2 = nn.Conv2d(4, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.bn3 = nn.BatchNorm2d(8)
        self.fc1, self.fc2 = nn.Linear(8 * 4 * 4, 16), nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(self.bn3(F.relu(self.bn2(self.conv2(x)))), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


class ResNetBasicBlock(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + x)


class DepthwisePointwise(nn.Module):
    """MobileNet block: depthwise 3x3 + BN + ReLU6, pointwise 1x1 + BN + ReLU6."""
    def __init__(self):
        super().__init__()
        self.dw, self.bn1 = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), nn.BatchNorm2d(8)
        self.pw, self.bn2 = nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16)

    def forward(self, x):
        return F.relu6(self.bn2(self.pw(F.relu6(self.bn1(self.dw(x))))))


class GroupedConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(8, 12, 3, groups=4)
        self.conv2 = nn.Conv2d(12, 6, 3, stride=2, padding=1, groups=2)

    def forward(self, x):
        return self.conv2(F.relu(self.conv1(x)))


class Conv1dNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(3, 6, 5, padding=2)
        self.conv2 = nn.Conv1d(6, 4, 3, stride=2, dilation=2)

    def forward(self, x):
        return self.conv2(F.relu(self.conv1(x)))


class ConvPadding(nn.Module):
    """Stride 2 with symmetric padding, dilation 2 keeping the size, an even kernel padded to keep the size
    (asymmetric: F.pad, which the exporter writes as a Pad in front), and an unpadded 1x3 kernel with stride
    (2,1). (torch 1.13 cannot export padding='same', so the pads are spelled out.)"""
    def __init__(self):
        super().__init__()
        self.strided = nn.Conv2d(2, 4, 3, stride=2, padding=1)
        self.dilated = nn.Conv2d(2, 4, 3, dilation=2, padding=2)
        self.even = nn.Conv2d(2, 4, 4)
        self.rect = nn.Conv2d(2, 4, (1, 3), stride=(2, 1))

    def forward(self, x):
        return self.strided(x), self.dilated(x), self.even(F.pad(x, (1, 2, 1, 2))), self.rect(x)


class ConvReflectPad(nn.Module):
    """padding_mode='reflect': the exporter writes Pad(mode=reflect) then an unpadded Conv."""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1, padding_mode="reflect")

    def forward(self, x):
        return self.conv(x)


class Pooling(nn.Module):
    def forward(self, x):
        return (F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=True),
                F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
                F.avg_pool2d(x, 2, stride=2, ceil_mode=True),
                F.max_pool2d(x, 3, stride=2, ceil_mode=True))


class GlobalPool(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.fc = nn.Linear(12, 5)

    def forward(self, x):
        x = F.relu(self.conv(x))
        avg = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)  # GlobalAveragePool
        mean = x.mean(dim=(2, 3))                              # ReduceMean over H, W
        mx = torch.flatten(F.adaptive_max_pool2d(x, 1), 1)    # GlobalMaxPool
        return self.fc(torch.cat([avg, mx], 1)), mean


class Activations(nn.Module):
    def forward(self, x):
        return (F.leaky_relu(x, 0.1), F.relu6(x * 4), torch.sigmoid(x), torch.tanh(x),
                torch.clamp(x, -0.5, 0.75))


class PReLUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.prelu = nn.PReLU(4, init=0.2)
        with torch.no_grad():
            self.prelu.weight.copy_(torch.tensor([0.1, 0.2, 0.3, -0.1]))

    def forward(self, x):
        return self.prelu(self.conv(x))


class HardswishNet(nn.Module):
    def forward(self, x):
        return F.hardswish(x * 4)


class FlattenVsView(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)

    def forward(self, x):
        y = F.relu(self.conv(x))
        return (torch.flatten(y, 1),                  # Flatten
                y.view(y.size(0), -1),                # Shape/Gather/Unsqueeze/Concat -> Reshape
                y.reshape(-1, 4, y.shape[2] * y.shape[3]))


class LinearLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.with_bias = nn.Linear(12, 8)
        self.no_bias = nn.Linear(8, 6, bias=False)
        self.seq = nn.Linear(12, 5)

    def forward(self, x):  # x: [N, 3, 12]
        flat = x[:, 0, :]                                     # Gather -> [N, 12]
        a = self.no_bias(F.relu(self.with_bias(flat)))        # Gemm, then Gemm/MatMul without bias
        b = self.seq(x)                                       # 3-D input: MatMul + Add
        return a, b


class ConcatNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 1)
        self.b = nn.Conv2d(3, 2, 3, padding=1)
        self.c = nn.Conv2d(6, 4, 3, padding=1)

    def forward(self, x):
        y = torch.cat([F.relu(self.a(x)), F.relu(self.b(x))], dim=1)
        return self.c(y)


class UpsampleNearest(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)

    def forward(self, x):
        return F.interpolate(self.conv(x), scale_factor=2, mode="nearest")


class SoftmaxHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, stride=2, padding=1)
        self.fc = nn.Linear(4 * 5 * 5, 10)

    def forward(self, x):
        y = F.relu(self.conv(x))
        return (F.softmax(self.fc(torch.flatten(y, 1)), dim=1),
                F.softmax(y, dim=1),         # over channels of a 4-D tensor: opset < 13 needs Transposes
                F.log_softmax(self.fc(torch.flatten(y, 1)), dim=-1))


class NhwcInput(nn.Module):
    """A model fed NHWC images, as tf2onnx graphs are: Transpose to NCHW first."""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.fc = nn.Linear(6, 4)

    def forward(self, x):  # x: [N, H, W, C]
        y = F.relu(self.conv(x.permute(0, 3, 1, 2)))
        return self.fc(F.adaptive_avg_pool2d(y, 1).flatten(1))


# name -> (module factory, input shape, output names)
CASES = {
    "lenet_bn": (LeNetBN, (2, 1, 16, 16), ["logits"]),
    "resnet_basic_block": (ResNetBasicBlock, (2, 8, 8, 8), ["y"]),
    "depthwise_pointwise": (DepthwisePointwise, (2, 8, 10, 10), ["y"]),
    "grouped_conv": (GroupedConv, (2, 8, 9, 9), ["y"]),
    "conv1d": (Conv1dNet, (2, 3, 32), ["y"]),
    "conv_padding": (ConvPadding, (2, 2, 11, 10), ["strided", "dilated", "even_same", "rect"]),
    "conv_reflect_pad": (ConvReflectPad, (2, 2, 7, 9), ["y"]),
    "pooling": (Pooling, (2, 3, 9, 11), ["avg_incl_pad", "avg_excl_pad", "avg_ceil", "max_ceil"]),
    "global_pool": (GlobalPool, (2, 3, 7, 6), ["logits", "mean"]),
    "activations": (Activations, (2, 3, 5, 6), ["leaky_relu", "relu6", "sigmoid", "tanh", "clip"]),
    "prelu": (PReLUNet, (2, 3, 6, 6), ["y"]),
    "hardswish": (HardswishNet, (2, 3, 5, 6), ["y"]),
    "flatten_vs_view": (FlattenVsView, (2, 2, 5, 6), ["flatten", "view", "reshape"]),
    "linear": (LinearLayers, (2, 3, 12), ["gemm", "matmul_add"]),
    "concat": (ConcatNet, (2, 3, 6, 7), ["y"]),
    "upsample_nearest": (UpsampleNearest, (2, 2, 4, 5), ["y"]),
    "softmax_head": (SoftmaxHead, (2, 1, 10, 10), ["probs", "channel_softmax", "log_probs"]),
    "nhwc_input": (NhwcInput, (2, 8, 9, 3), ["logits"]),
}
# HardSwish is an ONNX op from opset 14; at older opsets the exporter writes HardSigmoid * x.
MIN_OPSET = {"hardswish": 14}


def export_case(name, opset, out_root):
    factory, shape, output_names = CASES[name]
    torch.manual_seed(zlib.crc32(name.encode()))
    model = randomize_batchnorm(factory()).eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        want = model(x)
    want = [want] if isinstance(want, torch.Tensor) else list(want)

    case_dir = os.path.join(out_root, f"{name}_opset{opset}")
    data_dir = os.path.join(case_dir, "test_data_set_0")
    os.makedirs(data_dir, exist_ok=True)
    model_path = os.path.join(case_dir, "model.onnx")
    dynamic = {"input": {0: "N"}}
    dynamic.update({o: {0: "N"} for o in output_names})
    torch.onnx.export(model, x, model_path, opset_version=opset, input_names=["input"],
                      output_names=output_names, dynamic_axes=dynamic)

    proto = onnx.load(model_path)
    proto.producer_name = f"pytorch {torch.__version__} (TorchScript exporter), scripts/make_test_models.py"
    onnx.checker.check_model(proto, full_check=True)
    onnx.save(proto, model_path)
    graph_outputs = [o.name for o in proto.graph.output]
    assert graph_outputs == output_names, (name, graph_outputs)

    xs = x.numpy()
    with open(os.path.join(data_dir, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(xs, "input").SerializeToString())
    for i, (o, t) in enumerate(zip(output_names, want)):
        with open(os.path.join(data_dir, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(t.numpy(), o).SerializeToString())

    try:
        from onnx.reference import ReferenceEvaluator  # onnx >= 1.13
    except ImportError:
        ReferenceEvaluator = None
    if ReferenceEvaluator is not None:
        got = ReferenceEvaluator(proto).run(None, {"input": xs})
        for o, g, w in zip(output_names, got, want):
            assert np.allclose(g, w.numpy(), rtol=1e-4, atol=1e-5), f"{name} opset {opset}: {o} differs"
    ops = sorted({n.op_type for n in proto.graph.node})
    print(f"{name}_opset{opset}: {os.path.getsize(model_path)} bytes, ops {' '.join(ops)}")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(root, "tests", "data"))
    ap.add_argument("--only", nargs="*", default=None, help="case names (without _opsetK)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    names = args.only or list(CASES)
    skipped = []
    for name in names:
        for opset in OPSETS:
            if opset < MIN_OPSET.get(name, 0):
                skipped.append(f"{name}_opset{opset} (needs opset {MIN_OPSET[name]})")
                continue
            case_dir = os.path.join(args.out, f"{name}_opset{opset}")
            shutil.rmtree(case_dir, ignore_errors=True)
            try:
                export_case(name, opset, args.out)
            except Exception as e:  # the exporter refuses this op at this opset: record it, go on
                shutil.rmtree(case_dir, ignore_errors=True)
                skipped.append(f"{name}_opset{opset} ({type(e).__name__}: {str(e).splitlines()[0]})")
    for s in skipped:
        print(f"skipped {s}", file=sys.stderr)


if __name__ == "__main__":
    main()
