"""The Python API: loading, introspection, run() in its forms, tensor files, the stubs."""

import ast
import os

import numpy as np
import pytest

import cnnrt
import onnx_writer as w
from conftest import EDGES, LENET, repo_path


def images(n, seed=0):
    return np.random.default_rng(seed).standard_normal((n, 1, 28, 28), dtype=np.float32)


def test_module_basics():
    assert cnnrt.__version__ == cnnrt.version()
    assert isinstance(cnnrt.with_cuda, bool)
    assert "Conv" in cnnrt.supported_ops() and "Gemm" in cnnrt.supported_ops()
    names = [name for name, _ in cnnrt.graph_passes()]
    assert "fuse_activation" in names


def test_model_introspection(lenet_cpu):
    m = lenet_cpu
    assert m.device == "cpu"
    assert m.path == LENET
    assert len(m.inputs) == 1 and len(m.outputs) == 1
    assert m.inputs[0].name == "input" and m.inputs[0].shape == ["N", 1, 28, 28] and m.inputs[0].dtype == "float32"
    assert m.outputs[0].name == "logits" and m.outputs[0].shape == ["N", 10]
    assert m.metadata["labels"].split(",")[9] == "Ankle boot"
    assert m.output_shapes() == [[1, 10]]
    assert m.output_shapes(64) == [[64, 10]]
    assert "TensorInfo(name='input', shape=['N', 1, 28, 28], dtype='float32')" == repr(m.inputs[0])


def test_explain_is_the_cli_plan(lenet_cpu, cli):
    for batch in (None, 4):
        args = ["plan", LENET, "--explain", "--device", "cpu"] + ([] if batch is None else ["--batch", batch])
        result = cli(*args)
        assert result.returncode == 0, result.stderr
        assert lenet_cpu.explain(batch) == result.stdout


def test_run_forms_agree(lenet_cpu):
    x = images(3)
    by_dict = lenet_cpu.run({"input": x})
    by_list = lenet_cpu.run([x])
    by_array = lenet_cpu.run(x)
    as_dict = lenet_cpu.run({"input": x}, as_dict=True)
    assert isinstance(by_dict, list) and len(by_dict) == 1
    assert list(as_dict) == ["logits"]
    for out in (by_list[0], by_array[0], as_dict["logits"]):
        np.testing.assert_array_equal(out, by_dict[0])
    y = by_dict[0]
    assert y.dtype == np.float32 and y.shape == (3, 10) and y.flags["C_CONTIGUOUS"] and y.flags["WRITEABLE"]


def test_outputs_own_their_memory(lenet_cpu):
    """The NumPy arrays hold the engine's output vectors: they survive the model and later runs."""
    m = cnnrt.Model(LENET, device="cpu")
    first = m.run(images(2, seed=1))[0]
    kept = first.copy()
    del m
    m2 = cnnrt.Model(LENET, device="cpu")
    for seed in range(3):
        m2.run(images(2, seed=10 + seed))
    np.testing.assert_array_equal(first, kept)


def test_batch_sizes_and_readonly_inputs(lenet_cpu):
    m = cnnrt.Model(LENET, device="cpu", batch_sizes=[1, 5])
    x = images(5)
    x.setflags(write=False)  # inputs are only read
    np.testing.assert_array_equal(m.run(x)[0], lenet_cpu.run(x)[0])
    # One row at a time gives the rows of the batch.
    batch = lenet_cpu.run(x)[0]
    for i in range(5):
        np.testing.assert_allclose(lenet_cpu.run(x[i : i + 1])[0][0], batch[i], rtol=1e-6, atol=1e-6)


def test_load_from_bytes_and_pathlike(lenet_cpu):
    import pathlib
    with open(LENET, "rb") as f:
        data = f.read()
    x = images(2)
    expected = lenet_cpu.run(x)[0]
    for source in (data, bytearray(data), memoryview(data)):
        m = cnnrt.Model(source, device="cpu", name="lenet-in-memory")
        assert m.name == "lenet-in-memory" and m.path is None
        np.testing.assert_array_equal(m.run(x)[0], expected)
    np.testing.assert_array_equal(cnnrt.Model(pathlib.Path(LENET), device="cpu").run(x)[0], expected)


def test_two_inputs_by_name_and_order():
    add = w.model([w.node("Sub", ["a", "b"], ["y"])], [("a", ["N", 3]), ("b", ["N", 3])], [("y", ["N", 3])])
    m = cnnrt.Model(add, device="cpu", name="sub.onnx")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(m.run({"b": b, "a": a})[0], a - b)
    np.testing.assert_array_equal(m.run([a, b])[0], a - b)
    np.testing.assert_array_equal(m.run((b, a))[0], b - a)


def test_symbolic_dimensions_bound_by_the_arrays():
    """edges.onnx takes [N, 1, H, W]: every call may bring another image size."""
    m = cnnrt.Model(EDGES, device="cpu")
    assert m.inputs[0].shape == ["N", 1, "H", "W"]
    assert m.outputs[0].shape == ["N", 5, "H", "W"]
    rng = np.random.default_rng(3)
    for n, h, wd in ((1, 16, 16), (2, 9, 31), (1, 64, 40), (3, 9, 31)):
        x = rng.random((n, 1, h, wd), dtype=np.float32)
        y = m.run({"input": x})[0]
        assert y.shape == (n, 5, h, wd)
        # Channel 3 is the 3x3 Gaussian [1,2,1]^T [1,2,1] / 16 (models/make_edges.py): one interior pixel.
        k = np.outer([1, 2, 1], [1, 2, 1]) / 16
        np.testing.assert_allclose(y[-1, 3, 4, 5], (x[-1, 0, 3:6, 4:7] * k).sum(), rtol=1e-5)


def test_input_shapes_for_plans(cli):
    """Plans for explicit shapes: at load (input_shapes=), in explain() and output_shapes(), as the tool's
    --shape gives them."""
    m = cnnrt.Model(EDGES, device="cpu", input_shapes=[{"input": (1, 1, 64, 48)}, [(2, 1, 9, 9)], (1, 1, 5, 7)])
    assert m.output_shapes(input_shapes={"input": (3, 1, 20, 10)}) == [[3, 5, 20, 10]]
    assert m.output_shapes(input_shapes=[(1, 1, 4, 4)]) == [[1, 5, 4, 4]]
    assert m.output_shapes(input_shapes=(1, 1, 4, 6)) == [[1, 5, 4, 6]]
    text = m.explain(input_shapes=(1, 1, 64, 48))
    assert "1x1x64x48" in text
    result = cli("plan", EDGES, "--explain", "--device", "cpu", "--shape", "input=1x1x64x48")
    assert result.returncode == 0, result.stderr
    assert text == result.stdout


def test_symbolic_everything():
    relu = w.model([w.node("Relu", ["x"], ["y"])], [("x", ["N", "C", "H", "W"])], [("y", ["N", "C", "H", "W"])])
    m = cnnrt.Model(relu, device="cpu", name="relu.onnx")
    assert m.inputs[0].shape == ["N", "C", "H", "W"]
    for shape in ((1, 1, 1, 1), (2, 3, 4, 5), (1, 7, 2, 9)):
        x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
        np.testing.assert_array_equal(m.run(x)[0], np.maximum(x, 0))


def test_tensor_files_round_trip(tmp_path):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7
    path = str(tmp_path / "t.pb")
    cnnrt.write_tensor(path, x, "values")
    name, y = cnnrt.read_tensor(path)
    assert name == "values"
    np.testing.assert_array_equal(x, y)


def test_array_likes_through_numpy_protocols(lenet_cpu):
    """Objects with only __array__ go through numpy.asarray (and its dtype is still checked)."""

    class ArrayLike:
        def __init__(self, a):
            self.a = a

        def __array__(self, dtype=None):
            return self.a

    x = images(1)
    np.testing.assert_array_equal(lenet_cpu.run(ArrayLike(x))[0], lenet_cpu.run(x)[0])
    with pytest.raises(cnnrt.InvalidInput, match="float64"):
        lenet_cpu.run(ArrayLike(x.astype(np.float64)))


class DlpackOnly:
    """A DLPack producer with nothing else (no buffer protocol): NumPy's own __dlpack__ underneath."""

    def __init__(self, a):
        self.a = a
        self.capsules = []

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()

    def __dlpack__(self, stream=None):
        capsule = self.a.__dlpack__()
        self.capsules.append(capsule)
        return capsule


def capsule_name(capsule):
    import ctypes
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get_name(capsule)


def test_host_dlpack_producers(lenet_cpu):
    """A CPU DLPack tensor is read in place, its capsule taken (renamed) and its deleter called once."""
    import sys
    x = images(3, seed=4)
    refs = sys.getrefcount(x)
    producer = DlpackOnly(x)
    np.testing.assert_array_equal(lenet_cpu.run({"input": producer})[0], lenet_cpu.run(x)[0])
    assert [capsule_name(c) for c in producer.capsules] == [b"used_dltensor"]
    del producer
    assert sys.getrefcount(x) == refs  # the deleter released NumPy's reference: no leak
    with pytest.raises(cnnrt.InvalidInput, match="has dtype float64"):
        lenet_cpu.run(DlpackOnly(x.astype(np.float64)))
    with pytest.raises(cnnrt.InvalidInput, match="not C-contiguous"):
        lenet_cpu.run(DlpackOnly(np.zeros((1, 1, 28, 56), np.float32)[..., ::2]))


def test_pytorch_cpu_tensors(lenet_cpu):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    x = images(2, seed=5)
    t = torch.from_numpy(x.copy())
    np.testing.assert_array_equal(lenet_cpu.run({"input": t})[0], lenet_cpu.run(x)[0])
    with pytest.raises(cnnrt.InvalidInput, match="has dtype float64"):
        lenet_cpu.run(t.double())
    with pytest.raises(cnnrt.InvalidInput, match="not C-contiguous"):
        lenet_cpu.run(t.transpose(2, 3))


def test_stubs_match_the_module():
    """Every public name of the package is in the stubs, with the same methods on its classes."""
    stub_path = os.path.join(os.path.dirname(cnnrt.__file__), "__init__.pyi")
    with open(stub_path) as f:
        tree = ast.parse(f.read())
    stub = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            stub[node.name] = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AnnAssign)) and
                               hasattr(n, "name")}
        elif isinstance(node, ast.FunctionDef):
            stub[node.name] = None
        elif isinstance(node, ast.AnnAssign):
            stub[node.target.id] = None
    for name in cnnrt.__all__:
        assert name in stub, f"{name} is missing from __init__.pyi"
    for name, members in stub.items():
        obj = getattr(cnnrt, name, None)
        if name in ("ArrayLike", "StreamLike", "Inputs", "ShapeSet"):
            continue
        assert obj is not None, f"__init__.pyi declares {name}, which cnnrt lacks"
        if isinstance(obj, type) and not issubclass(obj, BaseException):
            public = {m for m in dir(obj) if not m.startswith("_") or m in ("__dlpack__", "__dlpack_device__",
                                                                             "__cuda_array_interface__")}
            members = members - {"__init__"}
            assert public == members, f"{name}: module has {sorted(public)}, stubs {sorted(members)}"


def test_docstrings():
    for obj in (cnnrt.Model, cnnrt.Model.run, cnnrt.Model.bench, cnnrt.Model.explain, cnnrt.Context,
                cnnrt.DeviceArray, cnnrt.InvalidInput, cnnrt.read_tensor):
        assert obj.__doc__ and len(obj.__doc__) > 20, obj


def test_example_script_runs():
    """apps/examples/python/classify.py, as docs/python.md runs it: one line per sample, best class first."""
    import subprocess
    import sys
    script = repo_path("apps", "examples", "python", "classify.py")
    result = subprocess.run([sys.executable, script, "--device", "cpu"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 10
    boot = [line for line in lines if "fashion_0_ankle_boot.png" in line]
    assert len(boot) == 1 and boot[0].split(": ", 1)[1].startswith("Ankle boot ")
