"""GPU arrays in and out without a copy: PyTorch tensors through DLPack (and __cuda_array_interface__), on
PyTorch's streams, with results equal to the CPU backend's. Skipped, visibly, without a CUDA build of
cnnrt, PyTorch with CUDA, or a GPU.

On the GPU machine (PyTorch there): see docs/python.md, "Testing on a GPU".
"""

import ctypes
import gc
import threading

import numpy as np
import pytest

import cnnrt
from conftest import EDGES, LENET

if not cnnrt.with_cuda:
    pytest.skip("this build of cnnrt has no CUDA (CNNRT_ENABLE_CUDA=OFF)", allow_module_level=True)
torch = pytest.importorskip("torch", reason="PyTorch is not installed: no GPU interop to test")
if not torch.cuda.is_available():
    pytest.skip("PyTorch sees no CUDA device", allow_module_level=True)


def close(a, b):
    """The GPU tests' tolerance (tests/gpu/test_runtime.cpp): |a - b| / max(1, |b|) < 1e-4 everywhere."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape
    worst = float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b)))) if a.size else 0.0
    assert worst < 1e-4, f"max relative error {worst:.3g}"


@pytest.fixture(scope="module")
def gpu_model():
    m = cnnrt.Model(LENET, device="gpu", batch_sizes=[8])
    assert m.device == "gpu"
    return m


@pytest.fixture(scope="module")
def cpu_model():
    return cnnrt.Model(LENET, device="cpu")


def cuda_images(n, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn((n, 1, 28, 28), generator=g, device="cuda", dtype=torch.float32)


def test_dlpack_in_and_out_without_a_copy(gpu_model, cpu_model):
    x = cuda_images(8, 1)
    out = gpu_model.run({"input": x}, output="dlpack")
    assert isinstance(out[0], cnnrt.DeviceArray)
    assert out[0].shape == (8, 10) and out[0].dtype == "float32" and out[0].device == "cuda:0"
    y = torch.from_dlpack(out[0])
    assert y.is_cuda and y.dtype == torch.float32 and tuple(y.shape) == (8, 10)
    assert y.data_ptr() == out[0].data_ptr  # the same device memory: no copy
    assert out[0].__cuda_array_interface__["data"][0] == out[0].data_ptr
    expected = cpu_model.run(x.cpu().numpy())[0]
    close(y.cpu().numpy(), expected)
    close(out[0].numpy(), expected)
    # The memory lives as long as the consumer's tensor: drop our side, reuse the allocator, read again.
    pointer = y.data_ptr()
    del out
    gc.collect()
    for seed in range(3):
        gpu_model.run({"input": cuda_images(8, 10 + seed)}, output="dlpack")
    torch.cuda.synchronize()
    assert y.data_ptr() == pointer
    close(y.cpu().numpy(), expected)


def test_input_is_read_in_place_on_the_stream(gpu_model, cpu_model):
    """The run reads the tensor's own memory, in stream order: a copy made at call time would see zeros,
    because the values are written into it by work still queued behind a long sleep."""
    stream = torch.cuda.Stream()
    source = cuda_images(8, 2)
    x = torch.zeros_like(source)
    torch.cuda.synchronize()  # both made on the default stream; the test's stream starts after them
    with torch.cuda.stream(stream):
        gpu_model.run({"input": x}, output="dlpack", stream=stream)  # plans and captures for this stream
        stream.synchronize()
        torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU time on the stream
        x.copy_(source)
        out = gpu_model.run({"input": x}, output="dlpack", stream=stream)
        returned_early = not stream.query()  # run() queued the work and returned
        y = torch.from_dlpack(out[0])
        result = y.cpu().numpy()  # waits for the stream
    assert returned_early
    close(result, cpu_model.run(source.cpu().numpy())[0])


def test_default_stream_is_joined(gpu_model, cpu_model):
    """PyTorch's default stream (handle 0, where no CUDA graph can be captured): the run is ordered after
    its work and its work after the run."""
    source = cuda_images(8, 3)
    x = torch.zeros_like(source)
    current = torch.cuda.current_stream()
    assert current.cuda_stream == 0
    torch.cuda._sleep(100_000_000)
    x.copy_(source)
    out = gpu_model.run({"input": x}, output="dlpack", stream=current)
    y = torch.from_dlpack(out[0]) * 1.0  # a PyTorch kernel on the default stream, after the run
    close(y.cpu().numpy(), cpu_model.run(source.cpu().numpy())[0])


def test_outputs_into_pytorch_tensors(gpu_model, cpu_model):
    x = cuda_images(8, 4)
    logits = torch.full((8, 10), float("nan"), device="cuda")
    pointer = logits.data_ptr()
    stream = torch.cuda.current_stream()
    result = gpu_model.run({"input": x}, out=[logits], stream=stream)
    assert result[0] is logits and logits.data_ptr() == pointer
    close(logits.cpu().numpy(), cpu_model.run(x.cpu().numpy())[0])
    as_dict = gpu_model.run({"input": x}, out={"logits": logits}, as_dict=True)
    assert as_dict["logits"] is logits
    with pytest.raises(cnnrt.InvalidInput, match="has shape 4x10, the output is 8x10"):
        gpu_model.run({"input": x}, out=[torch.empty((4, 10), device="cuda")])
    with pytest.raises(cnnrt.InvalidInput, match="in host memory"):
        gpu_model.run({"input": x}, out=[torch.empty((8, 10))])


def test_every_mix_of_host_and_device(gpu_model, cpu_model):
    x = cuda_images(8, 5)
    host = x.cpu().numpy()
    expected = cpu_model.run(host)[0]
    close(gpu_model.run({"input": x})[0], expected)                          # device in, NumPy out
    close(gpu_model.run({"input": host}, output="dlpack")[0].numpy(), expected)  # NumPy in, device out
    close(gpu_model.run({"input": x.cpu()})[0], expected)                    # a CPU tensor (DLPack on the host)
    close(gpu_model.run({"input": host})[0], expected)                       # the engine's host path


def test_cuda_array_interface_input(gpu_model, cpu_model):
    x = cuda_images(8, 6)
    torch.cuda.synchronize()  # PyTorch's interface names no stream: the data must be ready when it is read

    class CudaArrayOnly:  # what CuPy and Numba arrays offer
        def __init__(self, t):
            self.t = t
            self.__cuda_array_interface__ = t.__cuda_array_interface__

    close(gpu_model.run({"input": CudaArrayOnly(x)})[0], cpu_model.run(x.cpu().numpy())[0])


def capsule_name(capsule):
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get_name(capsule)


class DLTensor(ctypes.Structure):  # the DLPack spec's layout
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


def test_dlpack_capsule_forms(gpu_model, cpu_model):
    x = cuda_images(8, 7)
    out = gpu_model.run({"input": x}, output="dlpack")[0]
    expected = cpu_model.run(x.cpu().numpy())[0]
    legacy_capsule = out.__dlpack__()
    assert capsule_name(legacy_capsule) == b"dltensor"
    legacy = torch.utils.dlpack.from_dlpack(legacy_capsule)
    assert legacy.data_ptr() == out.data_ptr
    close(legacy.cpu().numpy(), expected)
    # DLPack 1.0 for a consumer that asks with max_version: its fields, read as the spec lays them out. Not
    # consumed: the capsule's destructor frees it (no leak, no double free).
    versioned = out.__dlpack__(max_version=(1, 2))
    assert capsule_name(versioned) == b"dltensor_versioned"
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    m = DLManagedTensorVersioned.from_address(get_pointer(versioned, b"dltensor_versioned"))
    t = m.dl_tensor
    assert (m.major, m.minor, m.flags) == (1, 0, 0)
    assert (t.data, t.device_type, t.device_id, t.ndim) == (out.data_ptr, 2, 0, 2)
    assert (t.code, t.bits, t.lanes, t.shape[0], t.shape[1], t.strides, t.byte_offset) == (2, 32, 1, 8, 10, None, 0)
    del versioned, m, t
    gc.collect()
    assert out.__dlpack_device__() == (2, 0)
    with pytest.raises(BufferError):
        out.__dlpack__(copy=True)


def test_cupy_if_present(gpu_model, cpu_model):
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    x = cupy.asarray(cuda_images(8, 8).cpu().numpy())
    out = gpu_model.run({"input": x}, output="dlpack")[0]
    y = cupy.from_dlpack(out)
    assert y.data.ptr == out.data_ptr
    close(cupy.asnumpy(y), cpu_model.run(cupy.asnumpy(x))[0])


def test_device_input_errors(gpu_model):
    x = cuda_images(8, 9)
    with pytest.raises(cnnrt.InvalidInput, match="has dtype float64"):
        gpu_model.run({"input": x.double()})
    with pytest.raises(cnnrt.InvalidInput, match="has dtype float16"):
        gpu_model.run({"input": x.half()})
    with pytest.raises(cnnrt.InvalidInput, match="not C-contiguous"):
        gpu_model.run({"input": x.transpose(2, 3)})
    with pytest.raises(cnnrt.InvalidInput, match="dimension 2 is fixed at 28, got 27"):
        gpu_model.run({"input": x[:, :, :27, :].contiguous()})
    flat = torch.zeros(8 * 784 + 1, device="cuda")
    with pytest.raises(cnnrt.InvalidInput, match="not 16-byte aligned"):
        gpu_model.run({"input": flat[1:].view(8, 1, 28, 28)})
    # A batch slice at an aligned offset is read in place.
    big = cuda_images(16, 10)
    close(gpu_model.run({"input": big[4:12]})[0], gpu_model.run({"input": big[4:12].clone()})[0])


def test_symbolic_model_on_the_gpu():
    """edges.onnx's N, H and W bound by each GPU array's shape, in place, against the CPU backend."""
    gpu = cnnrt.Model(EDGES, device="gpu", input_shapes=[(1, 1, 64, 64)])
    cpu = cnnrt.Model(EDGES, device="cpu")
    for shape in ((1, 1, 64, 64), (2, 1, 40, 56), (1, 1, 17, 300)):
        x = torch.rand(shape, device="cuda")
        out = gpu.run({"input": x}, output="dlpack")[0]
        assert out.shape == (shape[0], 5) + shape[2:]
        expected = cpu.run({"input": x.cpu().numpy()})[0]
        close(torch.from_dlpack(out).cpu().numpy(), expected)
        close(gpu.run({"input": x.cpu().numpy()})[0], expected)


def test_contexts_on_their_own_streams_in_threads(cpu_model):
    model = cnnrt.Model(LENET, device="gpu")
    inputs = [cuda_images(1 + t, 20 + t) for t in range(4)]
    expected = [cpu_model.run(x.cpu().numpy())[0] for x in inputs]
    torch.cuda.synchronize()  # the inputs are read on other streams
    failures = []

    def worker(t):
        stream = torch.cuda.Stream()
        context = cnnrt.Context(model, stream=stream)
        with torch.cuda.stream(stream):
            for _ in range(50):
                y = torch.from_dlpack(context.run({"input": inputs[t]}, output="dlpack")[0])
                try:
                    close(y.cpu().numpy(), expected[t])
                except AssertionError as e:
                    failures.append((t, str(e)))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not failures


def test_bench_on_the_gpu(gpu_model):
    steps = gpu_model.bench(batch=1, iterations=50)
    assert steps and all(s["ours_us"] > 0 and s["kernel"] for s in steps)
    assert {"step", "nodes", "output_shape", "share", "cudnn_algo", "cudnn_us", "speedup", "alone_us"} <= set(steps[0])
    # A convolution step cuDNN ran beside ours: the speedup compares both timed back to back.
    for s in steps:
        if s["is_conv"] and s["cudnn_us"]:
            assert s["alone_us"] > 0 and abs(s["speedup"] - s["cudnn_us"] / s["alone_us"]) < 1e-6 * s["speedup"]
    report = gpu_model.bench(batch=8, iterations=50, report=True)
    assert report["batch"] == 8 and report["latency"]["median_us"] > 0 and report["steps"]
    edges = cnnrt.Model(EDGES, device="gpu").bench(input_shapes={"input": (1, 1, 256, 256)}, iterations=50,
                                                     report=True)
    assert edges["input_shapes"] == [[1, 1, 256, 256]] and edges["steps"]


def test_explain_on_the_gpu(gpu_model):
    text = gpu_model.explain(8)
    assert "device: gpu" in text and "8x1x28x28" in text
