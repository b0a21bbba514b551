#!/usr/bin/python3
"""Builds the model zoo: every architecture of zoo_models.py with seeded random weights, exported to ONNX
with PyTorch's own outputs as test data.

    /usr/bin/python3 models/zoo/make_zoo.py [--out models/zoo] [--only NAME ...]

writes, for each model, <out>/<name>/model.onnx and <out>/<name>/test_data_set_0/{input_0,output_0}.pb (the
layout of ONNX's node tests), which `cnnrt run <out>/<name>/model.onnx --test-data <out>/<name> --rtol 1e-4
--atol 1e-4` checks, and <out>/zoo.json, the index of the models (inputs, opsets, sizes, ops) that
scripts/zoo_bench.py reads. The expected outputs are PyTorch's in float64 (rounded to float32): the exact
answer for the float32 weights and input, which any float32 implementation misses by rounding only.

The weights are random but not arbitrary: each convolution and linear layer is scaled, in the order the
model runs them, so that its output has unit standard deviation on a calibration batch (so outputs are of
order 1 and an absolute tolerance of 1e-4 means something); then every batch-norm layer gets the running
statistics it measures on that batch, perturbed (mean shifted, variance scaled), and random affine terms.
The export keeps the BatchNormalization nodes (TrainingMode.PRESERVE on a module in eval mode; the
default would fold them into the convolutions), so cnnrt's own folding is what the test data checks.

Deterministic: seeds come from the model names and torch runs on one thread, so running it again writes
the same weights and inputs and the same outputs (bit for bit on the same machine and torch).
Debian 12's python3-torch (1.13) and python3-onnx (1.12): scripts/install-deps.sh --dev.
"""
import argparse
import copy
import json
import os
import shutil
import sys
import warnings
import zlib

import numpy as np
import onnx
import torch
import torch.nn as nn
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_models  # noqa: E402

WEIGHTED = (nn.Conv1d, nn.Conv2d, nn.ConvTranspose2d, nn.Linear)
BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d)


def sample_input(spec, shape, generator):
    if spec.input_kind == "image":
        return torch.rand(shape, generator=generator)
    return torch.randn(shape, generator=generator)


def layers_in_run_order(module, x):
    order = []
    hooks = [m.register_forward_hook(lambda m, i, o: order.append(m) if not any(m is s for s in order) else None)
             for m in module.modules() if isinstance(m, WEIGHTED)]
    with torch.no_grad():
        module(x)
    for h in hooks:
        h.remove()
    return order


def scale_outputs(module, x, layers, target=1.0):
    """Each of `layers`, in turn, scaled so that its output's standard deviation on x is `target`."""
    for layer in layers:
        captured = []
        hook = layer.register_forward_hook(lambda m, i, o: captured.append(o.detach()))
        with torch.no_grad():
            module(x)
            hook.remove()
            std = float(captured[0].std())
            layer.weight.mul_(target / std)
            if layer.bias is not None:
                layer.bias.mul_(target / std)


def randomize_batchnorm(module, x, generator):
    """Running statistics measured on x, then perturbed; affine terms random."""
    norms = [m for m in module.modules() if isinstance(m, BATCH_NORMS)]
    if not norms:
        return 0
    for bn in norms:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average: after one batch, exactly that batch's statistics
        bn.train()
    with torch.no_grad():
        module(x)
    module.eval()
    with torch.no_grad():
        for bn in norms:
            c = bn.num_features
            bn.momentum = 0.1
            std = bn.running_var.sqrt()
            bn.running_mean.add_(0.2 * std * torch.randn(c, generator=generator))
            bn.running_var.mul_(torch.empty(c).uniform_(0.6, 1.6, generator=generator))
            bn.weight.copy_(torch.empty(c).uniform_(0.6, 1.4, generator=generator))
            bn.bias.copy_(torch.empty(c).uniform_(-0.3, 0.3, generator=generator))
    return len(norms)


def build_weights(spec):
    seed = zlib.crc32(spec.name.encode())
    torch.manual_seed(seed)
    module = spec.build()
    generator = torch.Generator().manual_seed(seed + 1)
    calibration = sample_input(spec, (8,) + spec.test_shape[1:], generator)
    layers = layers_in_run_order(module, calibration)
    scale_outputs(module, calibration, layers)
    bn_count = randomize_batchnorm(module, calibration, generator)
    # The batch-norm changes moved the scale: bring the last layer back to its target.
    scale_outputs(module, calibration, layers[-1:], spec.last_layer_std)
    return module.eval(), bn_count, generator


def export(spec, module, x, path):
    axes = {0: "N"}
    if spec.image_to_image:
        axes.update({2: "H", 3: "W"})
    torch.onnx.export(module, x, path, opset_version=spec.opset, input_names=[spec.input_name],
                      output_names=[spec.output_name],
                      dynamic_axes={spec.input_name: axes, spec.output_name: axes if spec.image_to_image else {0: "N"}},
                      training=torch.onnx.TrainingMode.PRESERVE)
    proto = onnx.load(path)
    proto.producer_name = f"pytorch {torch.__version__} (TorchScript exporter), models/zoo/make_zoo.py"
    proto.doc_string = f"cnnrt model zoo: {spec.name}, random weights ({spec.summary})"
    metadata = {"zoo_model": spec.name}
    if spec.image_to_image:
        metadata.update({"task": "image-to-image", "input_scale": "0.00392156862745098"})
    elif spec.input_name == "image":
        metadata["task"] = "classification"
    del proto.metadata_props[:]
    for key, value in metadata.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.checker.check_model(proto, full_check=True)
    onnx.save(proto, path)
    return proto


def write_tensor(path, array, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(array), name).SerializeToString())


def make(spec, out_root):
    module, bn_count, generator = build_weights(spec)
    x = sample_input(spec, spec.test_shape, generator)
    with torch.no_grad():
        got32 = module(x)
        exact = copy.deepcopy(module).double()(x.double())
    want = exact.float()
    # Float32 through dozens of layers moves the last digits; the tolerance must leave room for a second
    # float32 implementation (cnnrt's) without letting a wrong op through: PyTorch's own float32 output
    # must be within a quarter of it.
    excess = ((got32.double() - exact).abs() / (zoo_models.ATOL + zoo_models.RTOL * exact.abs())).max()
    if excess > 0.25:
        raise RuntimeError(f"{spec.name}: PyTorch's float32 output is {float(excess):.2f} of the zoo's tolerance "
                           "away from the float64 answer; the test data would not leave cnnrt room")

    model_dir = os.path.join(out_root, spec.name)
    shutil.rmtree(model_dir, ignore_errors=True)
    data_dir = os.path.join(model_dir, "test_data_set_0")
    os.makedirs(data_dir)
    model_path = os.path.join(model_dir, "model.onnx")
    proto = export(spec, module, x, model_path)

    ops = sorted({n.op_type for n in proto.graph.node})
    bn_nodes = sum(n.op_type == "BatchNormalization" for n in proto.graph.node)
    if bn_nodes != bn_count:
        raise RuntimeError(f"{spec.name}: the export has {bn_nodes} BatchNormalization nodes, the module {bn_count}")
    if spec.opset != proto.opset_import[0].version:
        raise RuntimeError(f"{spec.name}: exported at opset {proto.opset_import[0].version}, asked {spec.opset}")

    # The benchmark rebuilds the module and loads these weights back: check that it gets the same answer.
    rebuilt = zoo_models.load_onnx_weights(spec.build(), proto)
    with torch.no_grad():
        again = rebuilt(x)
    if not torch.equal(again, got32):
        raise RuntimeError(f"{spec.name}: the module rebuilt from the ONNX weights computes something else")

    write_tensor(os.path.join(data_dir, "input_0.pb"), x.numpy(), spec.input_name)
    write_tensor(os.path.join(data_dir, "output_0.pb"), want.numpy(), spec.output_name)
    params = sum(p.numel() for p in module.parameters())
    size = os.path.getsize(model_path)
    entry = {"name": spec.name, "summary": spec.summary, "opset": spec.opset, "input": spec.input_name,
             "output": spec.output_name, "test_input_shape": list(x.shape), "test_output_shape": list(want.shape),
             "image_to_image": spec.image_to_image, "input_kind": spec.input_kind, "parameters": params,
             "model_bytes": size, "batch_norm_nodes": bn_nodes, "ops": ops}
    print(f"{spec.name:18} opset {spec.opset}  {params / 1e6:5.2f}M parameters  {size / 1e6:5.2f} MB  "
          f"in {'x'.join(map(str, x.shape))} out {'x'.join(map(str, want.shape))} (std {float(want.std()):.2f}, "
          f"float32 {float(excess):.3f} of the tolerance)  "
          f"{bn_nodes} BN  ops {' '.join(ops)}")
    return entry


def write_index(out_root, entries):
    """zoo.json: what scripts/zoo_bench.py and other tools need to know of each model without torch."""
    path = os.path.join(out_root, "zoo.json")
    index = {}
    if os.path.exists(path):
        with open(path) as f:
            index = {m["name"]: m for m in json.load(f)["models"]}
    index.update({e["name"]: e for e in entries})
    order = [m.name for m in zoo_models.ZOO]
    models = sorted(index.values(), key=lambda m: order.index(m["name"]) if m["name"] in order else len(order))
    doc = {"schema": "cnnrt-zoo/1", "made_by": "/usr/bin/python3 models/zoo/make_zoo.py",
           "rtol": zoo_models.RTOL, "atol": zoo_models.ATOL, "models": models}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)), help="default: models/zoo")
    ap.add_argument("--only", nargs="*", default=None, metavar="NAME", help="models to build (default: all)")
    args = ap.parse_args()
    names = args.only or [m.name for m in zoo_models.ZOO]
    unknown = [n for n in names if n not in zoo_models.BY_NAME]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; the zoo has {', '.join(zoo_models.BY_NAME)}")
    # TrainingMode.PRESERVE with constant folding on warns that folding could change trainable parameters;
    # make() checks that the exported weights give the module's own outputs.
    warnings.filterwarnings("ignore", message="It is recommended that constant folding be turned off")
    torch.set_num_threads(1)  # one thread: the same reduction order, so the same outputs, every run
    entries = [make(zoo_models.BY_NAME[n], args.out) for n in names]
    write_index(args.out, entries)
    print(f"{len(names)} models, {sum(e['model_bytes'] for e in entries) / 1e6:.1f} MB of model files")


if __name__ == "__main__":
    main()
