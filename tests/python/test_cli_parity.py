"""The package gives the answers of the C++ API (through the cnnrt tool, which is built on it): the same
predictions on the samples, the same output bits on the CPU backend, the reference outputs of exported
models."""

import glob
import importlib.util
import json
import os

import numpy as np
import pytest

import cnnrt
from conftest import EDGES, LENET, repo_path

SAMPLES = sorted(glob.glob(repo_path("samples", "fashion_*.png")))
EXPORTED = sorted(glob.glob(repo_path("tests", "data", "*_opset*")))


def load_example():
    spec = importlib.util.spec_from_file_location("classify_example",
                                                  repo_path("apps", "examples", "python", "classify.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lenet_predictions_match_the_cli(lenet_cpu, cli):
    """The example's NumPy decoding and normalisation, cnnrt.Model.run: `cnnrt infer`'s top 3 per sample."""
    assert len(SAMPLES) == 10
    result = cli("infer", LENET, *SAMPLES, "--json", "-", "--top-k", 3, "--device", "cpu")
    assert result.returncode == 0, result.stderr
    expected = {r["file"]: r["top"] for r in map(json.loads, result.stdout.splitlines())}
    ours = dict(load_example().classify(lenet_cpu, SAMPLES, top_k=3))
    assert set(ours) == set(expected)
    for path, top in expected.items():
        assert [label for label, _ in ours[path]] == [t["label"] for t in top], path
        np.testing.assert_allclose([p for _, p in ours[path]], [t["probability"] for t in top], rtol=1e-5, atol=1e-6)
    # The file names say the truth; the shipped model gets all ten samples right.
    for path, top in ours.items():
        truth = os.path.basename(path).split("_", 2)[2][:-4].replace("_", " ").lower()
        assert top[0][0].lower().replace("/", " ").replace("-", " ") == truth.replace("-", " "), (path, top)


def run_cli_with_expected(cli, tmp_path, model_path, inputs, outputs, model):
    """`cnnrt run --rtol 0 --atol 0` with our outputs as the expected ones: passes only on identical bits."""
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    for i, (desc, x) in enumerate(zip(model.inputs, inputs)):
        cnnrt.write_tensor(str(data / f"input_{i}.pb"), x, desc.name)
    for i, (desc, y) in enumerate(zip(model.outputs, outputs)):
        cnnrt.write_tensor(str(data / f"output_{i}.pb"), y, desc.name)
    return cli("run", model_path, "--test-data", data, "--rtol", 0, "--atol", 0, "--device", "cpu")


def test_outputs_are_the_cpp_apis_bit_for_bit(lenet_cpu, cli, tmp_path):
    x = np.random.default_rng(7).standard_normal((4, 1, 28, 28), dtype=np.float32)
    y = lenet_cpu.run({"input": x})
    result = run_cli_with_expected(cli, tmp_path, LENET, [x], y, lenet_cpu)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all match" in result.stdout
    # And the comparison can fail: one changed bit is a mismatch.
    y[0][0, 0] = np.nextafter(y[0][0, 0], np.float32(np.inf))
    result = run_cli_with_expected(cli, tmp_path, LENET, [x], y, lenet_cpu)
    assert result.returncode == 1 and "MISMATCH" in result.stdout


def test_symbolic_model_matches_the_cli(cli, tmp_path):
    """edges.onnx (symbolic N, H, W) at an image size of the call's choosing, against `cnnrt run`."""
    m = cnnrt.Model(EDGES, device="cpu")
    x = np.random.default_rng(11).random((2, 1, 37, 53), dtype=np.float32)
    y = m.run([x])
    assert y[0].shape == (2, 5, 37, 53)
    result = run_cli_with_expected(cli, tmp_path, EDGES, [x], y, m)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("case", EXPORTED, ids=os.path.basename)
def test_exported_models_give_their_reference_outputs(case):
    """The models of tests/data (exported by PyTorch) against PyTorch's outputs, as `cnnrt run` checks them."""
    m = cnnrt.Model(os.path.join(case, "model.onnx"), device="cpu")
    data = os.path.join(case, "test_data_set_0")
    inputs = {}
    for i in range(len(m.inputs)):
        name, x = cnnrt.read_tensor(os.path.join(data, f"input_{i}.pb"))
        inputs[name or m.inputs[i].name] = x
    outputs = m.run(inputs, as_dict=True)
    for i, desc in enumerate(m.outputs):
        _, expected = cnnrt.read_tensor(os.path.join(data, f"output_{i}.pb"))
        np.testing.assert_allclose(outputs[desc.name], expected, rtol=1e-4, atol=1e-5, err_msg=case)
