"""ReLU family: ``DML_ACTIVATION_RELU`` and ``DML_ACTIVATION_RELU_GRAD`` (SPEC section 4).

Both operators are selects, so results are bit-exact on every backend:

* RELU (SPEC 4.3, decision):       ``Y  = X > 0 ? X  : +0``   (NaN -> +0, -0 -> +0)
* RELU_GRAD (SPEC 4.2, normative): ``dX = X > 0 ? dY : +0``   (dY passes bit for bit, -0 included)

``X > 0`` is the exact IEEE comparison: NaN is not positive, a subnormal positive X is.
TensorFlow's ``ReluGrad`` multiplies by a mask instead (inf*0 = NaN, -0 kept) and PyTorch's
``threshold_backward`` passes dY where X is NaN; those divergences are documented, not copied.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Sequence

import numpy as np

from ._arrays import MAX_ELEMENTS, allocate_c_order_output, check_input, check_same, prepare_out
from ._backend import fast_module, resolve_backend
from ._output_cache import MIN_POOLED_BYTES
from .dml import DataType, FeatureLevel, OperatorDesc, TensorDesc, require_feature_level
from .errors import DataTypeError, ShapeError
from .registry import OpInfo, run_dml_json

__all__ = ["relu", "relu_grad", "ActivationReluDesc", "ActivationReluGradDesc", "RELU_DTYPES"]

# SPEC 4.1 [DECISION]: FLOAT32/FLOAT16 always, INT32/INT16/INT8 from FL 5.1 (mirroring RELU).
RELU_DTYPES = tuple(np.dtype(t) for t in ("float32", "float16", "int32", "int16", "int8"))
_FLOAT_TYPES = (DataType.FLOAT32, DataType.FLOAT16)
_INT_TYPES = (DataType.INT32, DataType.INT16, DataType.INT8)
_MAX_RANK = 8
_RANKS = range(1, _MAX_RANK + 1)
_DENSE_DTYPES = frozenset(RELU_DTYPES)
# Ranks by feature level (SPEC 2.4 / 4.1): RELU 4-D at 1_0, 4..5-D at 2_0, 1..8-D from 3_0;
# RELU_GRAD 1..4-D at 3_0 and 1..8-D from 3_1 ([DECISION] when a level is checked).
_RELU_RANK_LEVELS = {range(4, 5): FeatureLevel.FL_1_0, range(4, 6): FeatureLevel.FL_2_0,
                     _RANKS: FeatureLevel.FL_3_0}
_RELU_GRAD_RANK_LEVELS = {range(1, 5): FeatureLevel.FL_3_0, _RANKS: FeatureLevel.FL_3_1}


def relu(x: np.ndarray, *, out: np.ndarray | None = None, backend: str | None = None) -> np.ndarray:
    """``DML_ACTIVATION_RELU``: ``x > 0 ? x : +0`` element-wise (SPEC 4.3).

    ``x``: float32, float16, int32, int16 or int8, rank 1..8, any strides.
    ``out``: optional preallocated result; it may be ``x`` itself (in-place execution).
    """
    backend = resolve_backend(backend)
    dense = _dense_run(x, x, out, backend)
    if dense is not None:
        return dense
    x = check_input("x", x, dtypes=RELU_DTYPES, ranks=_RANKS)
    out = prepare_out(out, shape=x.shape, dtype=x.dtype, inputs={"x": x}, may_alias=("x",), like=x)
    _select_positive(x, x, out, backend)
    return out


def relu_grad(x: np.ndarray, dy: np.ndarray, *, out: np.ndarray | None = None,
              backend: str | None = None) -> np.ndarray:
    """``DML_ACTIVATION_RELU_GRAD``: ``x > 0 ? dy : +0`` element-wise (SPEC 4.2).

    ``x`` is the forward input (the forward output works too, since ``relu(x) > 0 <=> x > 0``);
    ``dy`` is the incoming gradient, with the same dtype and shape. ``out`` may be ``x`` or
    ``dy`` itself; any other overlap with an input is rejected.
    """
    backend = resolve_backend(backend)
    dense = _dense_run(x, dy, out, backend)
    if dense is not None:
        return dense
    x = check_input("x", x, dtypes=RELU_DTYPES, ranks=_RANKS)
    dy = check_input("dy", dy, dtypes=RELU_DTYPES, ranks=_RANKS)
    check_same("dy", dy, "x", x)
    out = prepare_out(out, shape=x.shape, dtype=x.dtype, inputs={"x": x, "dy": dy}, may_alias=("x", "dy"),
                      like=dy)
    _select_positive(x, dy, out, backend)
    return out


def _dense_run(x: object, dy: object, out: object, backend: str) -> np.ndarray | None:
    """The result of the common call (``_dense_arguments``) on the fast backend, or None for any
    other call, and for an ``out`` that shares memory with an input (the fast kernel checks)."""
    if backend != "fast" or not _dense_arguments(x, dy, out):
        return None
    if out is None:
        # As ``allocate_output`` makes it (C order, like dy), without its size checks, which an
        # output the size of an existing input passes; small ones without a function call more.
        small = x.nbytes < MIN_POOLED_BYTES
        out = np.empty(x.shape, x.dtype) if small else allocate_c_order_output("out", x.shape, x.dtype)
    return out if fast_module("relu").select_dense(x, dy, out) else None


def _dense_arguments(x: object, dy: object, out: object) -> bool:
    """Whether a call (``relu``: ``dy`` is ``x``) is the common one, which the checks of
    ``check_input``, ``check_same`` and ``prepare_out`` would pass unchanged apart from aliasing,
    decided with a few attribute reads (a 16 KiB call's checks took 3 of its 5 us): plain
    C-contiguous arrays of one supported dtype and shape, at most ``MAX_ELEMENTS`` elements, and
    an ``out`` that is None or such an array too, writeable and element-aligned. Whether ``out``
    overlaps an input is left to the fast kernel, which checks addresses before writing. Anything
    else takes the checked path, which also runs an ``out`` that is exactly an input."""
    if type(x) is not np.ndarray or type(dy) is not np.ndarray:
        return False
    dtype, shape = x.dtype, x.shape  # each attribute read makes an object: read once
    if not (dtype in _DENSE_DTYPES and dy.dtype == dtype and dy.shape == shape and 0 < len(shape) <= _MAX_RANK
            and 0 < x.size <= MAX_ELEMENTS and x.flags.c_contiguous and dy.flags.c_contiguous):
        return False
    if out is None:
        return True
    if type(out) is not np.ndarray or out.dtype != dtype or out.shape != shape:
        return False
    flags = out.flags
    return flags.c_contiguous and flags.writeable and flags.aligned


def _select_positive(x: np.ndarray, value: np.ndarray, out: np.ndarray, backend: str) -> None:
    """``out = x > 0 ? value : 0``, the one kernel behind both operators."""
    if backend == "fast":
        fast_module("relu").select_positive(x, value, out)
    else:
        # np.where materialises the result before copyto writes, so out may alias x or value.
        np.copyto(out, np.where(x > 0, value, out.dtype.type(0)))


def _check_relu_tensors(descs: Sequence[tuple[str, TensorDesc, bool]], feature_level: FeatureLevel | None,
                        rank_levels: dict[range, FeatureLevel]) -> None:
    """Shared rules of SPEC 4.1: valid descs, identical DataType / DimensionCount / Sizes, and a
    data type and rank that the requested feature level supports (``rank_levels`` maps rank
    ranges to the level that first allows them)."""
    first_name, first, _ = descs[0]
    for name, desc, output in descs:
        desc.validate(name, output=output, ranks=_RANKS)
    for name, desc, _ in descs[1:]:
        if desc.data_type != first.data_type:
            raise DataTypeError.expected(f"{name}.DataType", f"{first.data_type.name} (as {first_name})",
                                         desc.data_type.name)
        if desc.sizes != first.sizes:
            what = "DimensionCount" if len(desc.sizes) != len(first.sizes) else "Sizes"
            got = len(desc.sizes) if what == "DimensionCount" else list(desc.sizes)
            want = len(first.sizes) if what == "DimensionCount" else list(first.sizes)
            raise ShapeError.expected(f"{name}.{what}", f"{want} (as {first_name})", got)
    rank = len(first.sizes)
    needed = min(level for ranks, level in rank_levels.items() if rank in ranks)
    require_feature_level(feature_level, needed, f"DimensionCount {rank}")
    if first.data_type in _INT_TYPES:
        require_feature_level(feature_level, FeatureLevel.FL_5_1, f"data type {first.data_type.name}")
    elif first.data_type not in _FLOAT_TYPES:
        raise DataTypeError.expected(f"{first_name}.DataType", "FLOAT32, FLOAT16, INT32, INT16 or INT8",
                                     first.data_type.name)


@dataclass(frozen=True)
class ActivationReluDesc(OperatorDesc):
    """``DML_ACTIVATION_RELU_OPERATOR_DESC { InputTensor; OutputTensor; }`` (SPEC 4.1)."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc

    OPERATOR_TYPE = "DML_OPERATOR_ACTIVATION_RELU"
    OPERATOR_VALUE = 44
    FEATURE_LEVEL = FeatureLevel.FL_1_0
    INPUTS = ("input_tensor",)
    OUTPUTS = ("output_tensor",)

    def validate(self, feature_level: FeatureLevel | str | int | None = None) -> None:
        self.check_tensor_fields()
        level = None if feature_level is None else FeatureLevel.of(feature_level)
        _check_relu_tensors([("InputTensor", self.input_tensor, False),
                             ("OutputTensor", self.output_tensor, True)], level, _RELU_RANK_LEVELS)

    def _execute(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray], backend: str | None) -> None:
        relu(inputs[0], out=outputs[0], backend=backend)


@dataclass(frozen=True)
class ActivationReluGradDesc(OperatorDesc):
    """``DML_ACTIVATION_RELU_GRAD_OPERATOR_DESC { InputTensor; InputGradientTensor;
    OutputGradientTensor; }`` (SPEC 4.1; seed 003)."""

    input_tensor: TensorDesc
    input_gradient_tensor: TensorDesc
    output_gradient_tensor: TensorDesc

    OPERATOR_TYPE = "DML_OPERATOR_ACTIVATION_RELU_GRAD"
    OPERATOR_VALUE = 129
    FEATURE_LEVEL = FeatureLevel.FL_3_0
    INPUTS = ("input_tensor", "input_gradient_tensor")
    OUTPUTS = ("output_gradient_tensor",)

    def validate(self, feature_level: FeatureLevel | str | int | None = None) -> None:
        self.check_tensor_fields()
        level = None if feature_level is None else FeatureLevel.of(feature_level)
        require_feature_level(level, self.FEATURE_LEVEL, self.OPERATOR_TYPE)
        _check_relu_tensors([("InputTensor", self.input_tensor, False),
                             ("InputGradientTensor", self.input_gradient_tensor, False),
                             ("OutputGradientTensor", self.output_gradient_tensor, True)],
                            level, _RELU_GRAD_RANK_LEVELS)

    def _execute(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray], backend: str | None) -> None:
        relu_grad(inputs[0], inputs[1], out=outputs[0], backend=backend)


def _same_as_input(descs: dict[str, TensorDesc], spec: object) -> dict[str, TensorDesc]:
    """RELU and RELU_GRAD outputs default to a packed desc of the input's type and sizes."""
    first = descs["input_tensor"]
    packed = TensorDesc(first.data_type, first.sizes)
    return {"output_tensor": packed, "output_gradient_tensor": packed}


OPS = (
    OpInfo(ActivationReluDesc.OPERATOR_TYPE, "DirectML", "relu", "1..8",
           ("FLOAT32", "FLOAT16", "INT32 (FL 5.1)", "INT16 (FL 5.1)", "INT8 (FL 5.1)"), "1.0",
           partial(run_dml_json, ActivationReluDesc, derive_outputs=_same_as_input), ("ACTIVATION_RELU",)),
    OpInfo(ActivationReluGradDesc.OPERATOR_TYPE, "DirectML", "relu_grad", "1..8",
           ("FLOAT32", "FLOAT16", "INT32 (FL 5.1)", "INT16 (FL 5.1)", "INT8 (FL 5.1)"), "3.0",
           partial(run_dml_json, ActivationReluGradDesc, derive_outputs=_same_as_input), ("ACTIVATION_RELU_GRAD",)),
)
