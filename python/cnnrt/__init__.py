"""cnnrt: a small inference engine for convolutional networks, from Python.

    import cnnrt
    m = cnnrt.Model("models/fashion_lenet.onnx")
    logits = m.run({"input": images})[0]       # images: float32 NumPy array [N, 1, 28, 28]

GPU arrays (PyTorch, CuPy) go in and out without a copy: ``m.run({"input": t}, output="dlpack",
stream=torch.cuda.current_stream())`` and ``torch.from_dlpack(...)``. See docs/python.md.
"""

from ._cnnrt import (
    Context,
    DeviceArray,
    DeviceError,
    DeviceUnavailable,
    Error,
    InternalError,
    InvalidInput,
    InvalidModel,
    IoError,
    LimitExceeded,
    Model,
    TensorInfo,
    UnsupportedModel,
    UsageError,
    __version__,
    graph_passes,
    read_tensor,
    set_launch_overlap,
    set_log_level,
    supported_ops,
    version,
    with_cuda,
    write_tensor,
)

__all__ = [
    "Context",
    "DeviceArray",
    "DeviceError",
    "DeviceUnavailable",
    "Error",
    "InternalError",
    "InvalidInput",
    "InvalidModel",
    "IoError",
    "LimitExceeded",
    "Model",
    "TensorInfo",
    "UnsupportedModel",
    "UsageError",
    "__version__",
    "graph_passes",
    "read_tensor",
    "set_launch_overlap",
    "set_log_level",
    "supported_ops",
    "version",
    "with_cuda",
    "write_tensor",
]
