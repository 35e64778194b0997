"""The corpus format, version 1 (specified for other runtimes in docs/vectors.md).

A corpus is a directory: ``manifest.json`` lists the cases, each case is a JSON document
``<family>/<name>.json`` and each tensor of a case is a raw little-endian buffer
``<family>/<name>.<Tensor>.bin`` beside it. A buffer holds exactly ``TotalTensorSizeInBytes``
bytes; the tensor's elements live at byte offsets ``element_size * sum(index[d] * Strides[d])``,
as a DirectML runtime binds them (SPEC 2.2). Every other byte is the poison byte 0xFF, so a
runtime that reads padding sees NaN (floats) or -1 (integers). Only the elements a layout
describes are ever compared: DirectML may write anywhere inside an output's
``TotalTensorSizeInBytes``.

This module owns the pieces shared by the exporter, the replayer and the tests: data type
names, :class:`Layout` (encode / decode a binding), :class:`Comparison` (the three rules) and
:func:`dumps` (byte-stable JSON).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..dml import TensorDesc, packed_strides
from ..errors import DescriptorError

FORMAT_NAME = "gradops-conformance-vectors"
FORMAT_VERSION = 1
POISON_BYTE = 0xFF


def _bfloat16() -> np.dtype:
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


# Element types of bindings: DirectML's DML_TENSOR_DATA_TYPE names (SPEC 2.1) plus BFLOAT16,
# which only TensorFlow cases use (TensorFlow's "bfloat16": the upper half of a float32).
_NUMPY_NAMES = {
    "FLOAT32": "float32", "FLOAT16": "float16", "FLOAT64": "float64", "INT32": "int32", "INT16": "int16",
    "INT8": "int8", "INT64": "int64", "UINT32": "uint32", "UINT16": "uint16", "UINT8": "uint8",
    "UINT64": "uint64",
}
DATA_TYPES = (*_NUMPY_NAMES, "BFLOAT16")


def numpy_dtype(data_type: str, field: str = "DataType") -> np.dtype:
    """The NumPy dtype of a corpus data type name."""
    if data_type == "BFLOAT16":
        return _bfloat16()
    if data_type not in _NUMPY_NAMES:
        raise DescriptorError.expected(field, f"one of {', '.join(DATA_TYPES)}", data_type)
    return np.dtype(_NUMPY_NAMES[data_type])


def data_type_name(dtype: np.dtype) -> str:
    """The corpus data type name of a NumPy dtype."""
    dtype = np.dtype(dtype)
    if dtype == _bfloat16():
        return "BFLOAT16"
    for name, numpy_name in _NUMPY_NAMES.items():
        if dtype == np.dtype(numpy_name):
            return name
    raise DescriptorError.expected("dtype", f"a dtype with a corpus name ({', '.join(DATA_TYPES)})", dtype)


_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def as_bits(values: np.ndarray) -> np.ndarray:
    """The raw bits of each element as an unsigned integer of the same width."""
    return np.ascontiguousarray(values).view(_UNSIGNED[values.dtype.itemsize])


@dataclass(frozen=True)
class Layout:
    """Where a tensor's elements live in its buffer: element type, sizes, element strides
    (always explicit, 0 broadcasts) and the buffer's size in bytes."""

    data_type: str
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    total_bytes: int

    @classmethod
    def of_tensor_desc(cls, desc: TensorDesc) -> Layout:
        """A DirectML tensor as bound: its strides and ``TotalTensorSizeInBytes`` (SPEC 2.2)."""
        return cls(desc.data_type.name, desc.sizes, desc.element_strides, desc.size_in_bytes)

    @classmethod
    def dense(cls, dtype: np.dtype, sizes: tuple[int, ...]) -> Layout:
        """A packed row-major tensor of exactly ``prod(sizes) * element_size`` bytes (TensorFlow)."""
        dtype = np.dtype(dtype)
        return cls(data_type_name(dtype), tuple(int(s) for s in sizes), packed_strides(sizes),
                   math.prod(sizes) * dtype.itemsize)

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(self.data_type)

    def to_json(self) -> dict[str, Any]:
        return {"DataType": self.data_type, "Sizes": list(self.sizes), "Strides": list(self.strides),
                "TotalTensorSizeInBytes": self.total_bytes}

    @classmethod
    def from_json(cls, doc: Any, field: str) -> Layout:
        if not isinstance(doc, Mapping):
            raise DescriptorError.expected(field, "a binding object", doc)
        missing = {"DataType", "Sizes", "Strides", "TotalTensorSizeInBytes"} - set(doc)
        if missing:
            raise DescriptorError(field, f"missing {sorted(missing)}")
        layout = cls(str(doc["DataType"]), tuple(int(s) for s in doc["Sizes"]),
                     tuple(int(s) for s in doc["Strides"]), int(doc["TotalTensorSizeInBytes"]))
        numpy_dtype(layout.data_type, f"{field}.DataType")
        if len(layout.strides) != len(layout.sizes):
            raise DescriptorError.expected(f"{field}.Strides", f"{len(layout.sizes)} entries", len(layout.strides))
        if layout.span_bytes > layout.total_bytes:
            raise DescriptorError.expected(f"{field}.TotalTensorSizeInBytes", f">= {layout.span_bytes} (the bytes "
                                           "the elements span)", layout.total_bytes)
        return layout

    @property
    def span_bytes(self) -> int:
        """Bytes from the buffer start to the end of the last addressed element (0 for an
        empty TensorFlow tensor)."""
        if 0 in self.sizes:
            return 0
        last = sum((n - 1) * s for n, s in zip(self.sizes, self.strides))
        return (last + 1) * self.dtype.itemsize

    def view(self, buffer: bytes | np.ndarray) -> np.ndarray:
        """The described elements of ``buffer`` as a read-only strided array."""
        raw = np.frombuffer(buffer, dtype=np.uint8) if isinstance(buffer, (bytes, bytearray)) else buffer
        if raw.size != self.total_bytes:
            raise DescriptorError.expected("buffer", f"{self.total_bytes} bytes (TotalTensorSizeInBytes)",
                                           f"{raw.size} bytes")
        dtype = self.dtype
        base = raw[: self.span_bytes].view(dtype)
        return np.lib.stride_tricks.as_strided(base, self.sizes, [s * dtype.itemsize for s in self.strides],
                                               writeable=False)

    def encode(self, values: np.ndarray) -> bytes:
        """A buffer of poison bytes with ``values`` (the logical tensor) written through the
        strides. Under broadcast strides the elements sharing memory must agree."""
        values = np.asarray(values)
        if values.shape != self.sizes or values.dtype != self.dtype:
            raise DescriptorError.expected("values", f"shape {self.sizes} and dtype {self.dtype}",
                                           f"shape {values.shape} and dtype {values.dtype}")
        raw = np.full(self.total_bytes, POISON_BYTE, dtype=np.uint8)
        dtype = self.dtype
        base = raw[: self.span_bytes].view(dtype)
        target = np.lib.stride_tricks.as_strided(base, self.sizes, [s * dtype.itemsize for s in self.strides])
        target[...] = values
        if not np.array_equal(as_bits(target), as_bits(values)):
            raise DescriptorError("values", "elements that share memory (broadcast strides) must be equal")
        return raw.tobytes()


@dataclass(frozen=True)
class Comparison:
    """How an actual output is compared with the expected one, element by element.

    * ``bitwise``: identical bit patterns (NaN payloads and the sign of zero included).
    * ``ulps``: both NaN, or identical if the expected value is infinite, or at most
      ``max_ulps`` apart on the ordered integer line of the format (+0 and -0 coincide).
    * ``tolerance``: both NaN, or identical if the expected value is infinite, or
      ``|actual - expected| <= atol + rtol * |expected|`` evaluated in float64.
    """

    rule: str
    max_ulps: int = 0
    rtol: float = 0.0
    atol: float = 0.0

    RULES = ("bitwise", "ulps", "tolerance")

    def to_json(self) -> dict[str, Any]:
        if self.rule == "bitwise":
            return {"rule": "bitwise"}
        if self.rule == "ulps":
            return {"rule": "ulps", "max_ulps": self.max_ulps}
        return {"rule": "tolerance", "rtol": self.rtol, "atol": self.atol}

    @classmethod
    def from_json(cls, doc: Any, field: str) -> Comparison:
        if not isinstance(doc, Mapping) or doc.get("rule") not in cls.RULES:
            raise DescriptorError.expected(f"{field}.rule", f"one of {cls.RULES}", doc)
        if doc["rule"] == "ulps":
            return cls("ulps", max_ulps=int(doc["max_ulps"]))
        if doc["rule"] == "tolerance":
            return cls("tolerance", rtol=float(doc["rtol"]), atol=float(doc["atol"]))
        return cls("bitwise")

    def describe(self) -> str:
        if self.rule == "ulps":
            return f"<= {self.max_ulps} ulps"
        if self.rule == "tolerance":
            return f"rtol {self.rtol:g}, atol {self.atol:g}"
        return "bitwise"

    def mismatches(self, actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
        """A boolean array: True where ``actual`` fails the rule."""
        same_bits = as_bits(actual) == as_bits(expected)
        if self.rule == "bitwise":
            return ~same_bits
        if not is_float(expected.dtype):
            difference = np.abs(actual.astype(np.int64) - expected.astype(np.int64))
            limit = self.max_ulps if self.rule == "ulps" else self.atol + self.rtol * np.abs(expected.astype(np.int64))
            return difference > limit
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        both_nan = np.isnan(a) & np.isnan(e)
        finite = np.isfinite(e) & np.isfinite(a)
        if self.rule == "ulps":
            close = np.abs(_ordered(actual) - _ordered(expected)) <= self.max_ulps
        else:
            with np.errstate(invalid="ignore", over="ignore"):
                close = np.abs(a - e) <= self.atol + self.rtol * np.abs(e)
        return ~(same_bits | both_nan | (finite & close))


def is_float(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "f" or np.dtype(dtype) == _bfloat16()


def _ordered(values: np.ndarray) -> np.ndarray:
    """Float bit patterns mapped onto a line where adjacent floats differ by 1 (+0 == -0)."""
    bits = as_bits(values).astype(np.int64)
    sign = np.int64(1) << (8 * values.dtype.itemsize - 1)
    return np.where(bits & sign, -(bits & (sign - 1)), bits)


def float32_json(value: float) -> float:
    """A DirectML ``FLOAT`` field as JSON: the shortest decimal that reads back as the same
    float32 (1.4, not 1.399999976158142)."""
    return float(str(np.float32(value)))


def dumps(doc: Any) -> str:
    """Byte-stable JSON: sorted keys, two-space indentation, lists of scalars on one line,
    Python's shortest round-trip float repr, no NaN or infinity, a final newline."""
    return _dump(doc, 0) + "\n"


def _dump(value: Any, depth: int) -> str:
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        pad = "  " * (depth + 1)
        items = [f"{pad}{json.dumps(str(k))}: {_dump(value[k], depth + 1)}" for k in sorted(value)]
        return "{\n" + ",\n".join(items) + "\n" + "  " * depth + "}"
    if isinstance(value, (list, tuple)):
        if all(not isinstance(v, (Mapping, list, tuple)) for v in value):
            return "[" + ", ".join(_dump(v, depth) for v in value) + "]"
        pad = "  " * (depth + 1)
        return "[\n" + ",\n".join(pad + _dump(v, depth + 1) for v in value) + "\n" + "  " * depth + "]"
    if isinstance(value, np.generic):
        value = value.item()
    return json.dumps(value, allow_nan=False)
