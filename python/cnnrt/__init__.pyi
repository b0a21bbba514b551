"""Type stubs for the cnnrt package (the extension cnnrt._cnnrt). See docs/python.md."""

import os
from typing import Any, ClassVar, Dict, List, Literal, Mapping, Optional, Sequence, Tuple, Union, overload

import numpy

__version__: str
with_cuda: bool
"""True when this build has the GPU backend (CNNRT_ENABLE_CUDA=ON)."""

# Anything run() reads as an array: a float32 NumPy array (or any buffer-protocol object), a PyTorch or
# CuPy tensor (__dlpack__), or an object with __cuda_array_interface__.
ArrayLike = Any
# A CUDA stream: an int handle, or an object with .cuda_stream (torch.cuda.Stream) or __cuda_stream__().
StreamLike = Any
Inputs = Union[Mapping[str, ArrayLike], Sequence[ArrayLike], ArrayLike]
# One shape per input: {input name: shape}, a list of shapes in input order, or one shape (one-input models).
ShapeSet = Union[Mapping[str, Sequence[int]], Sequence[Sequence[int]], Sequence[int]]

class Error(RuntimeError):
    """Base class of every cnnrt error; the message is the one the cnnrt tool prints after 'error: '."""

    code: ClassVar[int]
    """The cnnrt tool's exit status for this error (2 usage, 3 unsupported, 4 invalid model or input or
    i/o, 5 no device, 6 limit, 7 device error, 8 internal)."""

class UsageError(Error, ValueError): ...
class UnsupportedModel(Error): ...
class InvalidModel(Error): ...
class InvalidInput(Error, ValueError): ...
class IoError(Error): ...
class DeviceUnavailable(Error): ...
class LimitExceeded(Error): ...
class DeviceError(Error): ...
class InternalError(Error): ...

class TensorInfo:
    """A model input or output."""

    @property
    def name(self) -> str: ...
    @property
    def shape(self) -> List[Union[int, str, None]]:
        """Per dimension its size, or for a symbolic one its name (None when unnamed)."""
    @property
    def dtype(self) -> Literal["float32"]: ...

class DeviceArray:
    """A float32 output in GPU memory (run(..., output="dlpack")): torch.from_dlpack(a), cupy.from_dlpack(a)."""

    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> Literal["float32"]: ...
    @property
    def device(self) -> str:
        """'cuda:N'."""
    @property
    def data_ptr(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]: ...
    def numpy(self) -> numpy.ndarray:
        """A host copy, once the run that produced it has finished."""

class Model:
    """An ONNX model, loaded, checked and planned."""

    def __init__(
        self,
        model: Union[str, os.PathLike, bytes, bytearray, memoryview],
        device: Literal["auto", "cpu", "gpu"] = "auto",
        batch_sizes: Sequence[int] = ...,
        *,
        tuning: bool = True,
        tuning_cache: str = "",
        cuda_graphs: bool = True,
        disabled_passes: Sequence[str] = ...,
        force_kernel: str = "",
        log_level: Optional[Literal["trace", "debug", "info", "warn", "error", "off"]] = None,
        max_model_bytes: Optional[int] = None,
        max_weight_bytes: Optional[int] = None,
        max_activation_bytes: Optional[int] = None,
        max_nodes: Optional[int] = None,
        name: Optional[str] = None,
        input_shapes: Optional[Sequence[ShapeSet]] = None,
    ) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def path(self) -> Optional[str]: ...
    @property
    def inputs(self) -> List[TensorInfo]: ...
    @property
    def outputs(self) -> List[TensorInfo]: ...
    @property
    def metadata(self) -> Dict[str, str]: ...
    @property
    def device(self) -> Literal["cpu", "gpu"]: ...
    def output_shapes(self, batch: Optional[int] = None, *, input_shapes: Optional[ShapeSet] = None) -> List[List[int]]: ...
    def explain(self, batch: Optional[int] = None, *, input_shapes: Optional[ShapeSet] = None) -> str:
        """The plan as `cnnrt plan --explain` prints it."""
    @overload
    def run(
        self,
        inputs: Inputs,
        *,
        as_dict: Literal[False] = False,
        output: Optional[Literal["numpy", "dlpack"]] = None,
        stream: Optional[StreamLike] = None,
        out: Optional[Union[Sequence[ArrayLike], Mapping[str, ArrayLike]]] = None,
    ) -> List[Any]: ...
    @overload
    def run(
        self,
        inputs: Inputs,
        *,
        as_dict: Literal[True],
        output: Optional[Literal["numpy", "dlpack"]] = None,
        stream: Optional[StreamLike] = None,
        out: Optional[Union[Sequence[ArrayLike], Mapping[str, ArrayLike]]] = None,
    ) -> Dict[str, Any]: ...
    @overload
    def bench(
        self,
        *,
        batch: Optional[int] = None,
        input_shapes: Optional[ShapeSet] = None,
        iterations: int = 200,
        duration_s: float = 0.0,
        warmup_ms: float = 200.0,
        include_transfers: bool = False,
        report: Literal[False] = False,
    ) -> List[Dict[str, Any]]: ...
    @overload
    def bench(
        self,
        *,
        batch: Optional[int] = None,
        input_shapes: Optional[ShapeSet] = None,
        iterations: int = 200,
        duration_s: float = 0.0,
        warmup_ms: float = 200.0,
        include_transfers: bool = False,
        report: Literal[True],
    ) -> Dict[str, Any]: ...

class Context:
    """A run context for one thread at a time; contexts of one model run in parallel."""

    def __init__(self, model: Model, stream: Optional[StreamLike] = None) -> None: ...
    @property
    def stream(self) -> Optional[int]: ...
    @overload
    def run(
        self,
        inputs: Inputs,
        *,
        as_dict: Literal[False] = False,
        output: Optional[Literal["numpy", "dlpack"]] = None,
        stream: Optional[StreamLike] = None,
        out: Optional[Union[Sequence[ArrayLike], Mapping[str, ArrayLike]]] = None,
    ) -> List[Any]: ...
    @overload
    def run(
        self,
        inputs: Inputs,
        *,
        as_dict: Literal[True],
        output: Optional[Literal["numpy", "dlpack"]] = None,
        stream: Optional[StreamLike] = None,
        out: Optional[Union[Sequence[ArrayLike], Mapping[str, ArrayLike]]] = None,
    ) -> Dict[str, Any]: ...

def version() -> str: ...
def supported_ops() -> List[str]: ...
def graph_passes() -> List[Tuple[str, str]]: ...
def set_log_level(level: Literal["trace", "debug", "info", "warn", "error", "off"]) -> None: ...
def set_launch_overlap(on: bool) -> None: ...
def read_tensor(path: str) -> Tuple[str, numpy.ndarray]: ...
def write_tensor(path: str, array: ArrayLike, name: str = "") -> None: ...
