"""Arrays as fadsl sees them: numpy arrays and torch tensors, their dtypes as
fadsl names them, where their memory lies, and which machine runs on them.

torch is never imported here: a tensor is recognised by its type's module,
so that numpy users need not have torch at all.
"""
import sys

import numpy as np

from ._lib import FadslInvalidArgument

# fadsl dtype name <-> numpy dtype name (bfloat16 through ml_dtypes, when installed)
_NUMPY = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "int8": "i8",
          "int16": "i16", "int32": "i32", "int64": "i64", "uint32": "u32", "bool": "i1"}
_TORCH = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "int8": "i8",
          "int16": "i16", "int32": "i32", "int64": "i64", "uint32": "u32", "bool": "i1"}
SIZES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "u32": 4, "i1": 1}


def is_torch(x):
    t = type(x)
    return t.__module__.startswith("torch") and t.__name__ in ("Tensor", "Parameter") or (
        "torch" in sys.modules and isinstance(x, sys.modules["torch"].Tensor))


def is_array(x):
    return isinstance(x, np.ndarray) or is_torch(x)


def dtype_name(x):
    """fadsl's name of an array's element type, or None."""
    if isinstance(x, np.ndarray):
        return _NUMPY.get(x.dtype.name)
    return _TORCH.get(str(x.dtype).replace("torch.", ""))


def dtype_of_value(v):
    """fadsl's name of a dtype given as a string, a numpy dtype or type, or a
    torch dtype; None when v is none of these."""
    if isinstance(v, str):
        return v
    if "torch" in sys.modules and isinstance(v, sys.modules["torch"].dtype):
        return _TORCH.get(str(v).replace("torch.", ""))
    try:
        if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
            return _NUMPY.get(np.dtype(v).name)
    except TypeError:
        return None
    return None


def describe(x):
    if isinstance(x, np.ndarray):
        return f"numpy array of {x.dtype} {list(x.shape)}"
    return f"torch tensor of {x.dtype} {list(x.shape)} on {x.device}"


def device_of(x):
    """-1 for host memory (numpy, torch CPU), else the CUDA device index."""
    if isinstance(x, np.ndarray):
        return -1
    if x.device.type == "cpu":
        return -1
    if x.device.type == "cuda":
        return x.device.index if x.device.index is not None else sys.modules["torch"].cuda.current_device()
    raise FadslInvalidArgument(f"fadsl runs on CUDA devices and the CPU interpreter, not on {x.device}")


def address(x):
    if isinstance(x, np.ndarray):
        return x.__array_interface__["data"][0]
    return x.data_ptr()


def region(x):
    """(lowest byte, bytes) of the memory an array's elements occupy."""
    if isinstance(x, np.ndarray):
        strides, item = x.strides, x.itemsize
    else:
        item = x.element_size()
        strides = [s * item for s in x.stride()]
    base = address(x)
    if x.size == 0 if isinstance(x, np.ndarray) else x.numel() == 0:
        return base, 0
    low = high = 0
    for n, s in zip(x.shape, strides):
        if s < 0:
            low += s * (n - 1)
        else:
            high += s * (n - 1)
    return base + low, high - low + item
