"""Attribute and argument checks of the depthwise family (SPEC 5.1, 5.3, 5.5), with TensorFlow's
messages: each raises a ``GradopsError`` naming the field. ``gradops.depthwise`` uses them."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ._arrays import as_array, require_memory
from ._depthwise_reference import BFLOAT16
from .errors import DataTypeError, DescriptorError, ShapeError

DEPTHWISE_DTYPES = (np.dtype(np.float16), BFLOAT16, np.dtype(np.float32), np.dtype(np.float64))
# TensorFlow's names for T (SPEC 5.1), also accepted by the descriptors and `gradops run`.
_TF_TYPE_NAMES = {"half": np.dtype(np.float16), "bfloat16": BFLOAT16, "float": np.dtype(np.float32),
                  "double": np.dtype(np.float64)}
_TF_TYPE_LIST = "half, bfloat16, float, double"
_PADDINGS = ("SAME", "VALID", "EXPLICIT")
_DATA_FORMATS = ("NHWC", "NCHW")
_INT32_MAX = 2**31 - 1


def tf_dtype(value: Any, field: str = "T") -> np.dtype:
    """T as a NumPy dtype, from a dtype-like or a TF type name ("half", "float", ...)."""
    dtype: np.dtype | None = None
    if isinstance(value, str):
        dtype = _TF_TYPE_NAMES.get(value)
    if dtype is None and value is not None:  # np.dtype(None) is float64
        try:
            dtype = np.dtype(value)
        except (TypeError, ValueError):
            dtype = None
    if dtype is None or dtype not in DEPTHWISE_DTYPES:  # `None in DEPTHWISE_DTYPES` is True (== float64)
        raise DataTypeError(field, f"Value for attr 'T' of {value!r} is not in the list of allowed values: "
                            f"{_TF_TYPE_LIST} (float16, bfloat16, float32, float64)")
    return dtype


def _quoted(value: Any) -> str:
    """A string attribute value as TF's messages quote it ("same"); anything else as repr."""
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _int_list(field: str, value: Any, length_message: str) -> tuple[int, ...]:
    """A list attribute of exactly 4 integers (strides, dilations)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise DescriptorError.expected(field, "a list of 4 integers", value)
    items = list(value)
    if len(items) != 4:
        raise DescriptorError(field, f"{length_message}, got {len(items)} values")
    return tuple(_int32(f"{field}[{i}]", v, field) for i, v in enumerate(items))


def _int32(field: str, value: Any, attr: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise DescriptorError.expected(field, "an integer", value)
    value = int(value)
    if not -_INT32_MAX - 1 <= value <= _INT32_MAX:
        raise DescriptorError(field, f"Attr {attr} has value {value} out of range for an int32")
    return value


def _check_tensor(name: str, value: Any, prefix: str, dtype: np.dtype | None = None) -> np.ndarray:
    """A 4-D array of a depthwise dtype (``dtype`` when T is known). Zero sizes are legal in TF.
    Lists are refused: they carry no dtype, and gradops never converts behind the caller's back."""
    value = as_array(name, value, DEPTHWISE_DTYPES)
    if value.dtype not in DEPTHWISE_DTYPES:
        raise DataTypeError(f"{name}.dtype", f"Value for attr 'T' of {value.dtype} is not in the list of "
                            f"allowed values: {_TF_TYPE_LIST} (float16, bfloat16, float32, float64)")
    if dtype is not None and value.dtype != dtype:
        raise DataTypeError.expected(f"{name}.dtype", f"{dtype.name} (T: all tensors share one dtype)",
                                     str(value.dtype))
    if value.ndim != 4:
        raise ShapeError(f"{name}.ndim", f"{prefix}{name} must be 4-dimensional, got shape {list(value.shape)}")
    # a broadcast view can be far larger than its memory; kernels stage rows of it
    require_memory(f"{name}.shape", value.size * value.itemsize,
                   lambda: f"a tensor of shape {value.shape} spans {value.size * value.itemsize / 2**30:.3g} GiB")
    return value


def _shape4(name: str, value: Any) -> tuple[int, ...]:
    """A tensor shape given to ``geometry``: 4 non-negative integers."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)) or len(value) != 4 or any(
            isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0 for v in value):
        raise ShapeError.expected(name, "4 non-negative integers", value)
    return tuple(int(v) for v in value)


def _check_sizes(name: str, value: Any, prefix: str, what: str) -> tuple[int, ...]:
    """``input_sizes`` / ``filter_sizes``: 4 non-negative int32 values (SPEC 5.1)."""
    if isinstance(value, np.ndarray):
        if value.dtype != np.int32:
            raise DataTypeError.expected(f"{name}.dtype", "int32 (TensorFlow registers this input as int32 "
                                         "and rejects int64 tensors)", str(value.dtype))
        if value.ndim != 1:
            raise ShapeError(f"{name}.ndim", f"{name} input must be 1-dim, not {value.ndim}")
        items = value.tolist()
    elif isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise DataTypeError.expected(name, "4 integers (a sequence of ints or a 1-D int32 array)", value)
    else:
        items = list(value)
    for i, v in enumerate(items):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise DataTypeError.expected(f"{name}[{i}]", "an integer", v)
    if len(items) != 4:
        raise ShapeError(name, f"{prefix}{what} must be 4-dimensional, got {len(items)} values")
    for i, v in enumerate(items):
        if v < 0:
            raise ShapeError(f"{name}[{i}]", f"Dimension {i} of {name} must be >= 0, got {int(v)}")
        if v > _INT32_MAX:
            raise ShapeError.expected(f"{name}[{i}]", "a value that fits an int32", int(v))
    return tuple(int(v) for v in items)


def _window(size: int, filter_size: int, stride: int, dilation: int, padding: str,
            explicit: tuple[int, int], field: str) -> tuple[int, int, int]:
    """Output size and (before, after) pads along one spatial dim: TensorFlow's
    ``GetWindowedOutputSizeVerbose`` (SPEC 5.3)."""
    effective = (filter_size - 1) * dilation + 1
    if padding == "SAME":
        out = (size + stride - 1) // stride
        need = max(0, (out - 1) * stride + effective - size)
        before, after = need // 2, need - need // 2  # the odd element goes after (bottom/right)
    else:
        before, after = explicit
        numerator = size + before + after - effective + stride
        out = abs(numerator) // stride * (1 if numerator >= 0 else -1)  # C++ division truncates
    if out < 0:
        raise ShapeError(field, f"Computed output size would be negative: {out} [input_size: {size}, "
                         f"effective_filter_size: {effective}, stride: {stride}]")
    return out, before, after
