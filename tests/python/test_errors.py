"""Every error path: the right exception class, the tool's exit code as .code, the tool's message; never a
crash."""

import os
import re

import numpy as np
import pytest

import cnnrt
import onnx_writer as w
from conftest import EDGES, LENET

ERRORS = {  # class -> the cnnrt tool's exit code for it
    cnnrt.UsageError: 2,
    cnnrt.UnsupportedModel: 3,
    cnnrt.InvalidModel: 4,
    cnnrt.InvalidInput: 4,
    cnnrt.IoError: 4,
    cnnrt.DeviceUnavailable: 5,
    cnnrt.LimitExceeded: 6,
    cnnrt.DeviceError: 7,
    cnnrt.InternalError: 8,
}


def test_exception_classes():
    for cls, code in ERRORS.items():
        assert issubclass(cls, cnnrt.Error) and issubclass(cls, RuntimeError)
        assert cls.code == code and cls.__module__ == "cnnrt" and cls.__doc__
    assert issubclass(cnnrt.InvalidInput, ValueError) and issubclass(cnnrt.UsageError, ValueError)
    assert not issubclass(cnnrt.DeviceUnavailable, ValueError)


def same_as_cli(cli, error, *args):
    """The tool, given the same mistake, prints 'error: ' + the same message and exits with the same code."""
    result = cli(*args)
    assert result.returncode == error.value.code, result.stderr
    assert f"error: {error.value}\n" in result.stderr


def unsupported_model(tmp_path):
    path = tmp_path / "unsupported.onnx"
    path.write_bytes(w.model([w.node("FooBar", ["x"], ["y"], name="/foo")], [("x", [1, 4])], [("y", [1, 4])]))
    return str(path)


def test_missing_file(cli, tmp_path):
    path = str(tmp_path / "nope.onnx")
    with pytest.raises(cnnrt.IoError) as error:
        cnnrt.Model(path, device="cpu")
    assert "nope.onnx" in str(error.value) and error.value.code == 4
    same_as_cli(cli, error, "plan", path, "--device", "cpu")


def test_not_a_model(cli, tmp_path):
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"\x08\x07 this is not protobuf \xff\xff\xff")
    with pytest.raises(cnnrt.InvalidModel) as error:
        cnnrt.Model(str(path), device="cpu")
    same_as_cli(cli, error, "plan", path, "--device", "cpu")


def test_unsupported_op(cli, tmp_path):
    path = unsupported_model(tmp_path)
    with pytest.raises(cnnrt.UnsupportedModel, match="FooBar") as error:
        cnnrt.Model(path, device="cpu")
    assert error.value.code == 3
    same_as_cli(cli, error, "plan", path, "--device", "cpu")


def test_limit_exceeded(cli):
    with pytest.raises(cnnrt.LimitExceeded) as error:
        cnnrt.Model(LENET, device="cpu", max_weight_bytes=1000)
    assert error.value.code == 6
    same_as_cli(cli, error, "plan", LENET, "--device", "cpu", "--max-weight-bytes", 1000)


def test_gpu_required_but_absent(cli, has_gpu):
    if has_gpu:
        pytest.skip("a GPU is usable here: device='gpu' succeeds")
    with pytest.raises(cnnrt.DeviceUnavailable) as error:
        cnnrt.Model(LENET, device="gpu")
    assert error.value.code == 5
    same_as_cli(cli, error, "plan", LENET, "--device", "gpu")


def test_wrong_input_shape_as_the_cli_reports_it(lenet_cpu, cli):
    x = np.zeros((2, 1, 27, 28), np.float32)
    with pytest.raises(cnnrt.InvalidInput) as error:
        lenet_cpu.run(x)
    assert "input 'input' dimension 2 is fixed at 28, got 27" in str(error.value)
    same_as_cli(cli, error, "plan", LENET, "--device", "cpu", "--shape", "input=2x1x27x28")


def test_options_refused():
    with pytest.raises(cnnrt.UsageError, match="device must be 'auto', 'cpu' or 'gpu', not 'tpu'") as error:
        cnnrt.Model(LENET, device="tpu")
    assert error.value.code == 2
    with pytest.raises(cnnrt.UsageError, match="log_level"):
        cnnrt.Model(LENET, device="cpu", log_level="loud")
    with pytest.raises(cnnrt.UsageError, match="name="):
        cnnrt.Model(LENET, device="cpu", name="x")
    with pytest.raises(TypeError):
        cnnrt.Model(LENET, device="cpu", batch_sizes="many")


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.int64, np.uint8, np.bool_, np.complex64])
def test_other_dtypes_are_refused_not_converted(lenet_cpu, dtype):
    x = np.zeros((1, 1, 28, 28), dtype)
    with pytest.raises(cnnrt.InvalidInput) as error:
        lenet_cpu.run({"input": x})
    name = np.dtype(dtype).name
    assert f"input 'input' has dtype {name}, but cnnrt models take float32" in str(error.value)
    assert "astype(numpy.float32)" in str(error.value)


def test_big_endian_is_refused(lenet_cpu):
    with pytest.raises(cnnrt.InvalidInput, match=r"float32 \(big-endian\)"):
        lenet_cpu.run(np.zeros((1, 1, 28, 28), ">f4"))


def test_non_contiguous_is_refused(lenet_cpu):
    base = np.zeros((2, 1, 28, 56), np.float32)
    for x in (base[..., ::2], np.zeros((1, 1, 28, 28), np.float32).transpose(0, 1, 3, 2)):
        assert not x.flags["C_CONTIGUOUS"]
        with pytest.raises(cnnrt.InvalidInput, match="is not C-contiguous.*ascontiguousarray"):
            lenet_cpu.run(x)
    # A C-contiguous slice (rows of a batch) is fine.
    batch = np.random.default_rng(0).standard_normal((4, 1, 28, 28), dtype=np.float32)
    np.testing.assert_array_equal(lenet_cpu.run(batch[1:3])[0], lenet_cpu.run(batch)[0][1:3])


def test_wrong_inputs(lenet_cpu):
    x = np.zeros((1, 1, 28, 28), np.float32)
    cases = [
        ({"image": x}, "has no input named 'image' (its inputs: 'input')"),
        ({}, "input 'input' is missing"),
        ([x, x], "takes 1 input, got 2"),
        ([], "takes 1 input, got 0"),
        ({1: x}, "input names must be strings"),
        ("input", "input 'input' is a str"),
        ({"input": [[0.0] * 28] * 28}, "input 'input' is a list"),
        ({"input": None}, "input 'input' is a NoneType"),
        ({"input": np.zeros((28, 28), np.float32)}, "input 'input' has rank 4 (N x 1 x 28 x 28), got shape 28x28"),
        ({"input": np.zeros((1, 2, 28, 28), np.float32)}, "input 'input' dimension 1 is fixed at 1, got 2"),
        ({"input": np.float32(1.0)}, "input 'input' has rank 4"),
    ]
    for inputs, message in cases:
        with pytest.raises(cnnrt.InvalidInput) as error:
            lenet_cpu.run(inputs)
        assert message in str(error.value), (inputs if not isinstance(inputs, dict) else list(inputs), error.value)
        assert error.value.code == 4


def test_two_input_model_errors():
    model = w.model([w.node("Add", ["a", "b"], ["y"])], [("a", ["N", 3]), ("b", ["N", 3])], [("y", ["N", 3])])
    m = cnnrt.Model(model, device="cpu", name="add.onnx")
    a = np.zeros((2, 3), np.float32)
    with pytest.raises(cnnrt.InvalidInput, match="takes 2 inputs: pass a dict"):
        m.run(a)
    with pytest.raises(cnnrt.InvalidInput, match="input 'b' is missing"):
        m.run({"a": a})
    with pytest.raises(cnnrt.InvalidInput, match="'N'"):  # the batch of a and b disagree
        m.run({"a": a, "b": np.zeros((3, 3), np.float32)})


def test_empty_dimensions_are_refused(lenet_cpu):
    for shape, dim in (((0, 1, 28, 28), "0 ('N')"), ((1, 1, 0, 28), "2")):
        with pytest.raises(cnnrt.InvalidInput, match=rf"dimension {re.escape(dim)} must be at least 1, got 0"):
            lenet_cpu.run(np.zeros(shape, np.float32))


def test_input_shapes_mistakes(cli):
    edges = cnnrt.Model(EDGES, device="cpu")
    cases = [
        ({"image": (1, 1, 8, 8)}, "input_shapes: 'EDGES' has no input 'image' (its inputs: 'input')"),
        ({}, "input_shapes: input 'input' of 'EDGES' has a symbolic dimension 0 ('N'); give its shape"),
        ([(1, 1, 8, 8), (1, 1, 8, 8)], "input_shapes: 2 shapes for the 1 inputs of 'EDGES'"),
        ("1x1x8x8", "input_shapes must be a dict {input name: shape} or a list of shapes"),
        ({"input": (1, 1, "eight", 8)}, "input_shapes: the shape of input 'input' must be a sequence of ints"),
    ]
    for shapes, message in cases:
        with pytest.raises(cnnrt.UsageError) as error:
            edges.explain(input_shapes=shapes)
        assert message.replace("EDGES", EDGES) in str(error.value), error.value
    with pytest.raises(cnnrt.UsageError, match="give batch or input_shapes, not both"):
        edges.output_shapes(2, input_shapes=(2, 1, 8, 8))
    with pytest.raises(cnnrt.InvalidInput, match=r"input_shapes\[1\]: .*dimension 1 is fixed at 1, got 3"):
        cnnrt.Model(EDGES, device="cpu", input_shapes=[(1, 1, 8, 8), (1, 3, 8, 8)])
    with pytest.raises(cnnrt.UsageError, match="input_shapes must be a list of shape sets"):
        cnnrt.Model(EDGES, device="cpu", input_shapes="1x1x8x8")
    # Symbolic dimensions left unbound: the engine's own message, as the tool gives it without --shape.
    with pytest.raises(cnnrt.UsageError) as error:
        edges.explain()
    same_as_cli(cli, error, "plan", EDGES, "--explain", "--device", "cpu")


def test_gpu_features_on_a_cpu_model(lenet_cpu):
    """stream=, output='dlpack', out= and GPU arrays need a GPU model: DeviceUnavailable saying why."""
    x = np.zeros((1, 1, 28, 28), np.float32)
    why = "no CUDA support" if not cnnrt.with_cuda else "device='cpu'"

    class FakeCudaArray:  # claims GPU memory; must be refused before its pointer is touched
        __cuda_array_interface__ = {"shape": (1, 1, 28, 28), "typestr": "<f4", "data": (16, False), "version": 3}

    class FakeDlpackTensor:
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, stream=None):
            raise AssertionError("cnnrt must not ask a CUDA tensor for its data on a CPU model")

    cases = [
        (lambda: lenet_cpu.run(x, output="dlpack"), "output='dlpack' returns GPU memory"),
        (lambda: lenet_cpu.run(x, stream=12345), "stream= orders the run on a CUDA stream"),
        (lambda: lenet_cpu.run(x, out=[FakeCudaArray()]), "out= takes GPU arrays"),
        (lambda: lenet_cpu.run({"input": FakeCudaArray()}), "input 'input' is in GPU memory"),
        (lambda: lenet_cpu.run({"input": FakeDlpackTensor()}), "input 'input' is in GPU memory"),
        (lambda: cnnrt.Context(lenet_cpu, stream=7), "stream= orders runs on a CUDA stream"),
    ]
    for call, message in cases:
        with pytest.raises(cnnrt.DeviceUnavailable) as error:
            call()
        assert message in str(error.value) and why in str(error.value), error.value
        assert error.value.code == 5


def test_usage_errors_of_run(lenet_cpu):
    x = np.zeros((1, 1, 28, 28), np.float32)
    with pytest.raises(cnnrt.UsageError, match="output must be 'numpy' or 'dlpack', not 'torch'"):
        lenet_cpu.run(x, output="torch")
    with pytest.raises(cnnrt.UsageError, match="out= or output=, not both"):
        lenet_cpu.run(x, output="numpy", out=[x])
    with pytest.raises(cnnrt.UsageError, match="stream must be a CUDA stream handle"):
        lenet_cpu.run(x, stream="default")
    with pytest.raises(cnnrt.UsageError, match="stream must be a CUDA stream handle"):
        lenet_cpu.run(x, stream=-5)
    with pytest.raises(cnnrt.UsageError, match="batch must be at least 1"):
        lenet_cpu.explain(0)
    with pytest.raises(cnnrt.UsageError, match="batch must be at least 1"):
        lenet_cpu.output_shapes(-1)


def test_bench_errors(has_gpu):
    with open(LENET, "rb") as f:
        from_bytes = cnnrt.Model(f.read(), device="cpu")
    with pytest.raises(cnnrt.UsageError, match="loaded from bytes"):
        from_bytes.bench()
    if not has_gpu:
        with pytest.raises(cnnrt.DeviceUnavailable) as error:
            cnnrt.Model(LENET, device="cpu").bench(batch=1)
        assert error.value.code == 5


def test_tensor_file_errors(tmp_path):
    with pytest.raises(cnnrt.IoError, match="missing.pb"):
        cnnrt.read_tensor(str(tmp_path / "missing.pb"))
    (tmp_path / "bad.pb").write_bytes(b"\xff\xff\xff\xff")
    with pytest.raises(cnnrt.Error) as error:
        cnnrt.read_tensor(str(tmp_path / "bad.pb"))
    assert error.value.code == 4
    with pytest.raises(cnnrt.InvalidInput, match="float64"):
        cnnrt.write_tensor(str(tmp_path / "t.pb"), np.zeros(3))


def test_random_bytes_never_crash():
    """Truncations and corruptions of a real model: an exception every time, never a crash."""
    with open(LENET, "rb") as f:
        data = f.read()
    rng = np.random.default_rng(5)
    for i in range(40):
        if i % 2:
            blob = data[: int(rng.integers(0, len(data)))]
        else:
            blob = bytearray(data)
            for pos in rng.integers(0, len(data), 8):
                blob[pos] = int(rng.integers(0, 256))
            blob = bytes(blob)
        try:
            m = cnnrt.Model(blob, device="cpu", name=f"corrupt-{i}")
            m.run(np.zeros((1, 1, 28, 28), np.float32))
        except cnnrt.Error as error:
            assert error.code in (3, 4, 6), error
