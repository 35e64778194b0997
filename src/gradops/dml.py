"""DirectML tensor layer: data types, feature levels, buffer tensor descriptors, binding.

Mirrors SPEC section 2: ``DML_TENSOR_DATA_TYPE`` (2.1), ``DML_BUFFER_TENSOR_DESC`` with
``DMLCalcBufferTensorSize`` (2.2) and ``DML_FEATURE_LEVEL`` (2.4). An operator descriptor
(:class:`OperatorDesc`) is compiled once and then dispatched on raw flat buffers, as DirectML
does: inputs are read through strided (possibly broadcast) views of their buffers, outputs are
written through their strides and bytes outside the described elements are left untouched.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np

from ._arrays import check_output_size, layout_overlap
from .errors import BindingError, DataTypeError, DescriptorError, FeatureLevelError, ShapeError

__all__ = [
    "DataType",
    "FeatureLevel",
    "TensorDesc",
    "calc_buffer_tensor_size",
    "OperatorDesc",
    "CompiledOperator",
    "MAX_DIMENSION_COUNT",
    "dml_name",
]

MAX_DIMENSION_COUNT = 8  # DML_TENSOR_DIMENSION_COUNT_MAX1 (FL 3.0+)
_MAX_ELEMENTS = 2**32 - 1  # "a buffer tensor may hold at most 2^32 - 1 elements" (SPEC 2.2)
_UINT32_MAX = 2**32 - 1


class DataType(enum.IntEnum):
    """``DML_TENSOR_DATA_TYPE`` (SPEC 2.1), with DirectML's names and values."""

    UNKNOWN = 0
    FLOAT32 = 1
    FLOAT16 = 2
    UINT32 = 3
    UINT16 = 4
    UINT8 = 5
    INT32 = 6
    INT16 = 7
    INT8 = 8
    FLOAT64 = 9
    UINT64 = 10
    INT64 = 11
    UINT4 = 12
    INT4 = 13

    @property
    def size_in_bits(self) -> int:
        return _BITS[self]

    @property
    def numpy_dtype(self) -> np.dtype:
        """The NumPy dtype holding one element (4-bit types have none: they are packed)."""
        if self not in _NUMPY:
            raise DataTypeError("DataType", f"{self.name} has no NumPy element type (packed 4-bit)")
        return np.dtype(_NUMPY[self])

    @classmethod
    def of(cls, value: Any, *, field: str = "DataType") -> DataType:
        """Coerce a DataType, its name ("FLOAT16", "DML_TENSOR_DATA_TYPE_FLOAT16"), its value or
        a NumPy dtype."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            name = value.upper().removeprefix("DML_TENSOR_DATA_TYPE_")
            if name in cls.__members__:
                return cls[name]
        elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            if int(value) in cls._value2member_map_:
                return cls(int(value))
        else:
            try:
                dtype = np.dtype(value)
            except TypeError:
                dtype = None
            if dtype is not None:
                for member, npname in _NUMPY.items():
                    if np.dtype(npname) == dtype:
                        return member
        raise DataTypeError.expected(field, "a DML_TENSOR_DATA_TYPE name or value (e.g. FLOAT32)", value)


_BITS = {
    DataType.UNKNOWN: 0, DataType.FLOAT32: 32, DataType.FLOAT16: 16, DataType.UINT32: 32,
    DataType.UINT16: 16, DataType.UINT8: 8, DataType.INT32: 32, DataType.INT16: 16,
    DataType.INT8: 8, DataType.FLOAT64: 64, DataType.UINT64: 64, DataType.INT64: 64,
    DataType.UINT4: 4, DataType.INT4: 4,
}
_NUMPY = {
    DataType.FLOAT32: "float32", DataType.FLOAT16: "float16", DataType.UINT32: "uint32",
    DataType.UINT16: "uint16", DataType.UINT8: "uint8", DataType.INT32: "int32",
    DataType.INT16: "int16", DataType.INT8: "int8", DataType.FLOAT64: "float64",
    DataType.UINT64: "uint64", DataType.INT64: "int64",
}


class FeatureLevel(enum.IntEnum):
    """``DML_FEATURE_LEVEL`` (SPEC 2.4). Levels are strict supersets."""

    FL_1_0 = 0x1000
    FL_2_0 = 0x2000
    FL_2_1 = 0x2100
    FL_3_0 = 0x3000
    FL_3_1 = 0x3100
    FL_4_0 = 0x4000
    FL_4_1 = 0x4100
    FL_5_0 = 0x5000
    FL_5_1 = 0x5100
    FL_5_2 = 0x5200
    FL_6_0 = 0x6000
    FL_6_1 = 0x6100
    FL_6_2 = 0x6200
    FL_6_3 = 0x6300
    FL_6_4 = 0x6400

    @property
    def label(self) -> str:
        return self.name.removeprefix("FL_").replace("_", ".")

    @classmethod
    def of(cls, value: Any, *, field: str = "feature_level") -> FeatureLevel:
        """Coerce ``FeatureLevel``, ``0x5100``, ``"5.1"``, ``"5_1"`` or ``"DML_FEATURE_LEVEL_5_1"``."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            name = value.upper().removeprefix("DML_FEATURE_LEVEL_").removeprefix("FL_").replace(".", "_")
            if "FL_" + name in cls.__members__:
                return cls["FL_" + name]
        elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            if int(value) in cls._value2member_map_:
                return cls(int(value))
        raise FeatureLevelError.expected(field, "a DML_FEATURE_LEVEL such as '5.1' or 0x5100", value)


def require_feature_level(requested: FeatureLevel | None, needed: FeatureLevel, what: str) -> None:
    """Raise if a ``feature_level`` was requested and ``what`` needs a higher one (SPEC 2.4)."""
    if requested is not None and requested < needed:
        raise FeatureLevelError(
            "feature_level", f"{what} requires DML_FEATURE_LEVEL_{needed.name[3:]}, "
            f"but DML_FEATURE_LEVEL_{requested.name[3:]} was requested")


def _uint_tuple(value: Any, field: str, *, minimum: int) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise DescriptorError.expected(field, "a sequence of integers", value)
    out = []
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise DescriptorError.expected(f"{field}[{i}]", "an integer", v)
        if not minimum <= int(v) <= _UINT32_MAX:
            raise DescriptorError.expected(f"{field}[{i}]", f"an integer in [{minimum}, 2^32-1]", int(v))
        out.append(int(v))
    return tuple(out)


def packed_strides(sizes: Sequence[int]) -> tuple[int, ...]:
    """Row-major element strides: ``stride[last] = 1``, ``stride[d] = stride[d+1]*size[d+1]``."""
    strides = [1] * len(sizes)
    for d in range(len(sizes) - 2, -1, -1):
        strides[d] = strides[d + 1] * sizes[d + 1]
    return tuple(strides)


def calc_buffer_tensor_size(data_type: DataType | str | int, sizes: Sequence[int],
                            strides: Sequence[int] | None = None) -> int:
    """``DMLCalcBufferTensorSize`` as in DirectMLX (SPEC 2.2), in bytes.

    Without strides the size is ``prod(sizes)`` elements, with strides ``lastIndex + 1`` where
    ``lastIndex = sum((size-1)*stride)``; bits are rounded up to bytes, then to a multiple of 4.
    An UNKNOWN data type gives 0.
    """
    data_type = DataType.of(data_type)
    sizes = _uint_tuple(sizes, "sizes", minimum=0)
    if strides is not None:
        strides = _uint_tuple(strides, "strides", minimum=0)
        if len(strides) != len(sizes):
            raise DescriptorError.expected("strides", f"{len(sizes)} entries (one per size)", len(strides))
    bits_per_element = data_type.size_in_bits
    if bits_per_element == 0:
        return 0
    if strides is None:
        elements = math.prod(sizes)
    else:
        elements = sum((s - 1) * st for s, st in zip(sizes, strides)) + 1
    nbytes = (elements * bits_per_element + 7) // 8
    return (nbytes + 3) & ~3


@dataclass(frozen=True)
class TensorDesc:
    """``DML_BUFFER_TENSOR_DESC`` (SPEC 2.2). ``strides`` count elements; None means packed.

    Construction only normalises types; :meth:`validate` applies the rules, and operator
    descriptors call it for each of their tensors with the field name and role.
    """

    data_type: DataType
    sizes: tuple[int, ...]
    strides: tuple[int, ...] | None = None
    total_tensor_size_in_bytes: int | None = None
    guaranteed_base_offset_alignment: int = 0
    flags: int = 0  # DML_TENSOR_FLAGS: NONE = 0, OWNED_BY_DML = 1 (no effect on results)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "data_type", DataType.of(self.data_type))
        set_(self, "sizes", _uint_tuple(self.sizes, "Sizes", minimum=0))
        if self.strides is not None:
            set_(self, "strides", _uint_tuple(self.strides, "Strides", minimum=0))
        for name, label in (("total_tensor_size_in_bytes", "TotalTensorSizeInBytes"),
                            ("guaranteed_base_offset_alignment", "GuaranteedBaseOffsetAlignment"),
                            ("flags", "Flags")):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise DescriptorError.expected(label, "a non-negative integer", value)
            set_(self, name, int(value))

    @classmethod
    def for_array(cls, array: np.ndarray) -> TensorDesc:
        """A packed descriptor with the shape and data type of ``array``."""
        return cls(DataType.of(array.dtype, field="array.dtype"), tuple(array.shape))

    @property
    def dimension_count(self) -> int:
        return len(self.sizes)

    @property
    def element_strides(self) -> tuple[int, ...]:
        return self.strides if self.strides is not None else packed_strides(self.sizes)

    @property
    def minimum_size_in_bytes(self) -> int:
        return calc_buffer_tensor_size(self.data_type, self.sizes, self.strides)

    @property
    def size_in_bytes(self) -> int:
        """``TotalTensorSizeInBytes``, defaulting to the minimum DirectML accepts."""
        if self.total_tensor_size_in_bytes is None:
            return self.minimum_size_in_bytes
        return self.total_tensor_size_in_bytes

    def validate(self, field: str = "TensorDesc", *, output: bool = False,
                 ranks: Sequence[int] = range(1, MAX_DIMENSION_COUNT + 1)) -> None:
        """Apply SPEC 2.2. ``output`` rejects strides that make elements share memory;
        ``ranks`` narrows the dimension count to what the operator supports."""
        if self.data_type == DataType.UNKNOWN:
            raise DataTypeError.expected(f"{field}.DataType", "a known data type", "UNKNOWN")
        if self.flags not in (0, 1):
            raise DescriptorError.expected(f"{field}.Flags", "DML_TENSOR_FLAG_NONE (0) or OWNED_BY_DML (1)",
                                           self.flags)
        rank = len(self.sizes)
        if rank not in ranks:
            raise ShapeError.expected(f"{field}.DimensionCount", f"a rank in {_span(ranks)}", rank)
        for d, size in enumerate(self.sizes):
            if size < 1:
                raise ShapeError.expected(f"{field}.Sizes[{d}]", "an integer >= 1", size)
        if self.strides is not None and len(self.strides) != rank:
            raise DescriptorError.expected(f"{field}.Strides", f"{rank} entries (one per dimension)",
                                           len(self.strides))
        elements = math.prod(self.sizes)
        if elements > _MAX_ELEMENTS:
            raise ShapeError.expected(f"{field}.Sizes", "at most 2^32-1 elements", elements)
        if output and self.strides is not None:
            overlap = layout_overlap(self.sizes, self.strides, 1)
            if overlap:
                raise DescriptorError(f"{field}.Strides", f"an output tensor may not alias its own "
                                      f"elements ({overlap}); got strides {list(self.strides)} "
                                      f"for sizes {list(self.sizes)}")
        minimum = self.minimum_size_in_bytes
        if self.total_tensor_size_in_bytes is not None and self.total_tensor_size_in_bytes < minimum:
            raise DescriptorError.expected(f"{field}.TotalTensorSizeInBytes",
                                           f">= DMLCalcBufferTensorSize = {minimum}",
                                           self.total_tensor_size_in_bytes)
        alignment = self.guaranteed_base_offset_alignment
        element_bytes = max(1, self.data_type.size_in_bits // 8)
        if alignment != 0 and (alignment & (alignment - 1) or alignment < element_bytes):
            raise DescriptorError.expected(f"{field}.GuaranteedBaseOffsetAlignment",
                                           f"0 or a power of two >= the element size ({element_bytes})",
                                           alignment)

    def view(self, buffer: Any, *, field: str = "buffer", writeable: bool = False) -> np.ndarray:
        """The strided NumPy view of ``buffer`` that this descriptor describes.

        ``buffer`` is any object exposing contiguous bytes (a NumPy array, bytearray, memoryview).
        It must hold at least ``TotalTensorSizeInBytes``. Outputs need a writeable buffer.
        """
        raw = _as_bytes(buffer, field, writeable)
        needed = self.size_in_bytes
        if raw.size < needed:
            raise BindingError.expected(field, f"a buffer of at least {needed} bytes "
                                        "(TotalTensorSizeInBytes)", f"{raw.size} bytes")
        dtype = self.data_type.numpy_dtype
        base = raw[: raw.size - raw.size % dtype.itemsize].view(dtype)
        byte_strides = tuple(s * dtype.itemsize for s in self.element_strides)
        view = np.lib.stride_tricks.as_strided(base, shape=self.sizes, strides=byte_strides,
                                               writeable=writeable)
        return view


def _span(ranks: Sequence[int]) -> str:
    lo, hi = min(ranks), max(ranks)
    return f"{lo}" if lo == hi else f"{lo}..{hi}"


def _as_bytes(buffer: Any, field: str, writeable: bool) -> np.ndarray:
    if isinstance(buffer, np.ndarray):
        if not (buffer.flags.c_contiguous or buffer.flags.f_contiguous):
            raise BindingError.expected(field, "a contiguous buffer", buffer)
        raw = buffer.reshape(-1, order="A").view(np.uint8)
    else:
        try:
            raw = np.frombuffer(buffer, dtype=np.uint8)
        except (TypeError, ValueError) as exc:
            raise BindingError.expected(field, "a NumPy array or bytes-like buffer", buffer) from exc
        if writeable and not isinstance(buffer, bytes):
            raw = np.frombuffer(memoryview(buffer).cast("B"), dtype=np.uint8)  # keeps writeability
    if writeable and not raw.flags.writeable:
        raise BindingError.expected(field, "a writeable buffer for an output tensor", "a read-only buffer")
    return raw


class OperatorDesc:
    """Base of the DirectML operator descriptors (frozen dataclasses mirroring the C structs).

    Subclasses declare which fields are input and output tensors, implement ``validate`` (the
    one validation path) and ``_execute`` (run on NumPy views, writing the outputs in place).
    """

    OPERATOR_TYPE: ClassVar[str]  # e.g. "DML_OPERATOR_ACTIVATION_RELU_GRAD"
    OPERATOR_VALUE: ClassVar[int]  # DML_OPERATOR_TYPE value
    FEATURE_LEVEL: ClassVar[FeatureLevel]  # level that introduced the operator
    INPUTS: ClassVar[tuple[str, ...]]
    OUTPUTS: ClassVar[tuple[str, ...]]

    def validate(self, feature_level: FeatureLevel | str | int | None = None) -> None:
        raise NotImplementedError

    def _execute(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray], backend: str | None) -> None:
        raise NotImplementedError

    def check_tensor_fields(self) -> None:
        """Every tensor field holds a :class:`TensorDesc` (the first check of each ``validate``)."""
        for name in self.INPUTS + self.OUTPUTS:
            value = getattr(self, name)
            if not isinstance(value, TensorDesc):
                raise DescriptorError.expected(dml_name(name), "a TensorDesc", value)

    def tensor_descs(self) -> dict[str, TensorDesc]:
        return {name: getattr(self, name) for name in self.INPUTS + self.OUTPUTS}

    def compile(self, *, feature_level: FeatureLevel | str | int | None = None,
                backend: str | None = None) -> CompiledOperator:
        """Validate once and return a callable bound to this descriptor (SPEC 2.2 binding)."""
        self.validate(feature_level)
        return CompiledOperator(self, backend)


class CompiledOperator:
    """A validated operator, dispatched on raw buffers: ``op(*inputs, *outputs)``.

    Output buffers may be omitted; zero-filled ones of ``TotalTensorSizeInBytes`` are then
    allocated. The call returns the list of output buffers. Every buffer is checked before
    any output is written.
    """

    def __init__(self, desc: OperatorDesc, backend: str | None) -> None:
        from ._backend import resolve_backend

        self.desc = desc
        self.backend = resolve_backend(backend)

    def __call__(self, *buffers: Any) -> list[Any]:
        desc = self.desc
        n_in, n_out = len(desc.INPUTS), len(desc.OUTPUTS)
        if len(buffers) not in (n_in, n_in + n_out):
            raise BindingError("buffers", f"{desc.OPERATOR_TYPE} takes {n_in} input buffers "
                               f"({', '.join(map(dml_name, desc.INPUTS))}) and optionally {n_out} output "
                               f"buffers ({', '.join(map(dml_name, desc.OUTPUTS))}); got {len(buffers)}")
        in_buffers = buffers[:n_in]
        out_buffers = list(buffers[n_in:]) or [_zeroed_buffer(desc, name) for name in desc.OUTPUTS]
        inputs = [getattr(desc, name).view(buf, field=dml_name(name))
                  for name, buf in zip(desc.INPUTS, in_buffers)]
        outputs = [getattr(desc, name).view(buf, field=dml_name(name), writeable=True)
                   for name, buf in zip(desc.OUTPUTS, out_buffers)]
        desc._execute(inputs, outputs, self.backend)
        return out_buffers

    def __repr__(self) -> str:
        return f"CompiledOperator({self.desc!r}, backend={self.backend!r})"


def _zeroed_buffer(desc: OperatorDesc, name: str) -> np.ndarray:
    """A zero-filled output buffer of the tensor's ``TotalTensorSizeInBytes``, sized first."""
    field = f"{dml_name(name)}.TotalTensorSizeInBytes"
    size = getattr(desc, name).size_in_bytes
    check_output_size(field, (size,), 1)
    try:
        return np.zeros(size, dtype=np.uint8)
    except (MemoryError, ValueError) as exc:
        raise ShapeError(field, f"cannot allocate {size} bytes: {exc}") from exc


def dml_name(field: str) -> str:
    """The DirectML spelling of a descriptor field: ``input_gradient_tensor`` -> ``InputGradientTensor``."""
    return "".join(word.capitalize() for word in field.split("_"))
