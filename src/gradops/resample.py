"""Resample family: DML_RESAMPLE, RESAMPLE1, RESAMPLE2, RESAMPLE_GRAD and RESAMPLE_GRAD1 (SPEC 3).

Every operator is linear and separable. Along each axis, forward output index ``o`` reads the
float32 input coordinate ``x = (o - OutputPixelOffset) / Scale - InputPixelOffset`` (SPEC 3.2)
and takes one tap (nearest, SPEC 3.3) or two (linear, SPEC 3.4) from
:func:`gradops._resample_plan.axis_taps`. An N-D tap is the product of one tap per axis.
The GRAD ops return the exact adjoint ``dX = J^T dY`` of their forward op (SPEC 3.6).

Nearest rounding rules: RESAMPLE, RESAMPLE1 and RESAMPLE_GRAD use ``floor(x + 0.5)`` (ties go
up); RESAMPLE2 and RESAMPLE_GRAD1 use ``floor`` (DECREASING) or ``ceil`` (INCREASING).

GRAD offsets [DECISION, SPEC 0.5 / 3.6]: by default ("per-tensor") a GRAD op's
``InputPixelOffsets`` belong to its ``InputGradientTensor`` (forward output space) and its
``OutputPixelOffsets`` to ``OutputGradientTensor`` (forward input space), so the gradient of a
forward op with offsets (ipo, opo) is called with (opo, ipo);
:func:`resample_grad_params_from_forward` does the swap. ``offset_convention="doc-literal"``
reads the GRAD offsets as the forward op's instead.

Numerics (SPEC 3.7): coordinates in float32; the reference backend accumulates in float64 and
rounds once to the output type (float32 or float16).
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field, fields
from functools import cached_property, lru_cache, partial
from pathlib import Path
from typing import Any, ClassVar, Hashable, Mapping, Sequence

import numpy as np

from ._arrays import check_input, check_output_size, prepare_out
from ._backend import resolve_backend
from ._resample_plan import Rule, axis_taps, tap_key
from .dml import _UINT32_MAX, DataType, FeatureLevel, OperatorDesc, TensorDesc, dml_name, require_feature_level
from .errors import DataTypeError, DescriptorError, ShapeError, UnsupportedError
from .registry import OpInfo, run_dml_json

__all__ = [
    "InterpolationMode", "AxisDirection", "OFFSET_CONVENTIONS",
    "resample", "resample1", "resample2", "resample_grad", "resample_grad1",
    "resample_grad_params_from_forward",
    "ResampleDesc", "Resample1Desc", "Resample2Desc", "ResampleGradDesc", "ResampleGrad1Desc",
]

RESAMPLE_DTYPES = (np.dtype(np.float32), np.dtype(np.float16))
OFFSET_CONVENTIONS = ("per-tensor", "doc-literal")
Taps = tuple[tuple[np.ndarray, np.ndarray], ...]  # one (index, weight) pair per axis

# The half-pixel grid (SPEC 3.2): forward (InputPixelOffset, OutputPixelOffset) = (0.5, -0.5).
_HALF_PIXEL = (0.5, -0.5)
_MODE_ALIASES = {"NEAREST": "NEAREST_NEIGHBOR"}
# Bytes a plan and its kernels hold per forward-output index of an axis (coordinates and their
# temporaries, the int64/float32 tap table, its bytes key, the gradient's transposed table) and
# per forward-input index (the transposed table's row pointers): an over-estimate, so that a
# call the machine cannot hold is refused before the tables are built.
_TAP_BYTES_PER_OUTPUT = 64
_TAP_BYTES_PER_INPUT = 8


class InterpolationMode(enum.IntEnum):
    """``DML_INTERPOLATION_MODE`` (SPEC 2.3)."""

    NEAREST_NEIGHBOR = 0
    LINEAR = 1

    @classmethod
    def of(cls, value: Any, *, field: str = "InterpolationMode") -> InterpolationMode:
        """Coerce the enum, ``"nearest"``/``"linear"``, a DML name or 0/1."""
        member = _enum_member(cls, value, "DML_INTERPOLATION_MODE_", _MODE_ALIASES)
        if member is None:
            raise DescriptorError.expected(field, "'nearest', 'linear', a DML_INTERPOLATION_MODE name or "
                                           "0 (NEAREST_NEIGHBOR) / 1 (LINEAR)", value)
        return member


class AxisDirection(enum.IntEnum):
    """``DML_AXIS_DIRECTION`` (SPEC 2.3); the resample ops read it as a rounding direction:
    INCREASING = ceil, DECREASING = floor (nearest mode only)."""

    INCREASING = 0
    DECREASING = 1

    @classmethod
    def of(cls, value: Any, *, field: str = "RoundingDirection") -> AxisDirection:
        """Coerce the enum, ``"increasing"``/``"decreasing"``, a DML name or 0/1."""
        member = _enum_member(cls, value, "DML_AXIS_DIRECTION_", {})
        if member is None:
            raise DescriptorError.expected(field, "'increasing' (ceil), 'decreasing' (floor), a "
                                           "DML_AXIS_DIRECTION name or 0 / 1", value)
        return member


def _enum_member(cls: type[enum.IntEnum], value: Any, prefix: str, aliases: Mapping[str, str]) -> Any:
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        name = value.strip().upper().removeprefix(prefix)
        name = aliases.get(name, name)
        return cls.__members__.get(name)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return cls._value2member_map_.get(int(value))
    return None


# --- parameter validation (shared by the NumPy functions and the descriptors) ---------------

# Singletons, hashed by identity (cheap as part of the plan cache's key, see ``_plan``).
@dataclass(frozen=True, eq=False)
class _Op:
    """What distinguishes the five operators."""

    operator_type: str
    operator_value: int
    feature_level: FeatureLevel
    ranks: range
    gradient: bool
    has_offsets: bool  # False for RESAMPLE (v0): fixed half-pixel offsets
    has_rounding: bool  # RESAMPLE2 / GRAD1: RoundingDirection picks floor or ceil


_RESAMPLE = _Op("DML_OPERATOR_RESAMPLE", 96, FeatureLevel.FL_2_0, range(4, 5), False, False, False)
_RESAMPLE1 = _Op("DML_OPERATOR_RESAMPLE1", 116, FeatureLevel.FL_2_1, range(4, 5), False, True, False)
_RESAMPLE2 = _Op("DML_OPERATOR_RESAMPLE2", 161, FeatureLevel.FL_5_1, range(1, 5), False, True, True)
_RESAMPLE_GRAD = _Op("DML_OPERATOR_RESAMPLE_GRAD", 134, FeatureLevel.FL_3_0, range(4, 5), True, True, False)
_RESAMPLE_GRAD1 = _Op("DML_OPERATOR_RESAMPLE_GRAD1", 162, FeatureLevel.FL_5_1, range(1, 5), True, True, True)


@dataclass(frozen=True, eq=False)
class _Fields:
    """How errors name each parameter: NumPy argument names or DirectML struct fields."""

    mode: str
    rounding_direction: str
    scales: str
    input_pixel_offsets: str
    output_pixel_offsets: str
    count: str  # what fixes the number of entries of the array fields
    numpy: bool  # NumPy functions have defaults; descriptor fields are all required


_NUMPY_FIELDS = _Fields("mode", "rounding_direction", "scales", "input_pixel_offsets", "output_pixel_offsets",
                        "one per axis", numpy=True)
_DML_FIELDS = _Fields("InterpolationMode", "RoundingDirection", "Scales", "InputPixelOffsets",
                      "OutputPixelOffsets", "DimensionCount", numpy=False)
_DML_V0_FIELDS = _Fields("InterpolationMode", "RoundingDirection", "Scales", "InputPixelOffsets",
                         "OutputPixelOffsets", "ScaleCount", numpy=False)


def _float32_values(field: str, values: Any, count: int, count_label: str, *, positive: bool) -> tuple[float, ...]:
    """A per-axis FLOAT array: ``count`` numbers, finite as float32 (SPEC 3.1 rule 3), and > 0 for
    scales. Returns the float32 values (what DirectML receives) as Python floats."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise DescriptorError.expected(field, f"a sequence of {count} numbers ({count_label})", values)
    if len(values) != count:
        raise DescriptorError.expected(field, f"{count} entries ({count_label})", f"{len(values)} entries")
    result = []
    for d, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise DescriptorError.expected(f"{field}[{d}]", "a number", value)
        with np.errstate(over="ignore"):
            single = np.float32(value)
        if not np.isfinite(single):
            raise DescriptorError.expected(f"{field}[{d}]", "a finite float32 value", value)
        if positive and not single > 0:
            raise DescriptorError.expected(f"{field}[{d}]", "a float32 value > 0", value)
        result.append(float(single))
    return tuple(result)


def _sizes(field: str, value: Any, rank: int, rank_label: str) -> tuple[int, ...]:
    """Sizes of ``rank`` axes, each an integer >= 1 (DirectML sizes are never 0)."""
    if type(value) is tuple and len(value) == rank and all(type(size) is int and 1 <= size <= _UINT32_MAX
                                                          for size in value):
        return value  # the common case, checked in one pass
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise ShapeError.expected(field, f"a sequence of {rank} sizes", value)
    if len(value) != rank:
        raise ShapeError.expected(field, f"{rank} sizes ({rank_label})", f"{len(value)} sizes")
    sizes = []
    for d, size in enumerate(value):
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or not 1 <= size <= _UINT32_MAX:
            raise ShapeError.expected(f"{field}[{d}]", "an integer size >= 1", size)
        sizes.append(int(size))
    return tuple(sizes)


def _default_scales(forward_in: Sequence[int], forward_out: Sequence[int]) -> tuple[float, ...]:
    """``fl32(out / in)`` per axis, one correctly rounded float32 division."""
    return tuple(float(np.float32(o) / np.float32(i)) for i, o in zip(forward_in, forward_out))


def _offset_convention(value: Any) -> str:
    if value not in OFFSET_CONVENTIONS:
        raise DescriptorError.expected("offset_convention", "'per-tensor' (default, SPEC 3.6) or 'doc-literal'",
                                       value)
    return value


@dataclass(frozen=True, eq=False)
class _Plan:
    """A validated call in forward terms: sizes and the per-axis taps of the forward op.
    ``tap_key``: the taps as bytes, the fast backend's cache key for its kernel tables."""

    forward_in: tuple[int, ...]
    forward_out: tuple[int, ...]
    taps: Taps
    tap_key: tuple[tuple[bytes, bytes], ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tap_key", tuple(tap_key(index, weight) for index, weight in self.taps))


# Plans of recent NumPy calls, by their exact arguments (with types: True == 1 == 1.0 as dict
# keys, but only 1 and 1.0 are valid scales). Errors are never cached: they are raised again.
_PLAN_CACHE: dict[tuple, _Plan] = {}
_PLAN_CACHE_SIZE = 256
_PLAN_CACHE_LOCK = threading.Lock()


def _argument_key(value: Any) -> Hashable:
    """``value`` with its type and its items' types. Unhashable values raise TypeError when the
    key is hashed: that call is planned without the cache."""
    kind = type(value)
    if kind is str or value is None:
        return value  # equal only to itself: no type needed
    if kind is tuple or kind is list:
        items = value if kind is tuple else tuple(value)
        return (tuple, tuple(map(type, items)), items)
    if kind is np.ndarray:
        return (kind, value.dtype.str, value.shape, value.tobytes())
    return (kind, value)


def _plan(op: _Op, forward_in: tuple[int, ...], forward_out: tuple[int, ...], names: _Fields, itemsize: int,
          **parameters: Any) -> _Plan:
    """:func:`_build_plan`, remembered for repeated calls with the same arguments."""
    try:
        key = (op, forward_in, forward_out, names, itemsize, tuple(parameters),
               tuple(map(_argument_key, parameters.values())))
        plan = _PLAN_CACHE.get(key)
    except TypeError:
        return _build_plan(op, forward_in, forward_out, names, itemsize, **parameters)
    if plan is None:
        plan = _build_plan(op, forward_in, forward_out, names, itemsize, **parameters)
        with _PLAN_CACHE_LOCK:
            if len(_PLAN_CACHE) >= _PLAN_CACHE_SIZE:
                del _PLAN_CACHE[next(iter(_PLAN_CACHE))]  # the oldest entry
            _PLAN_CACHE[key] = plan
    return plan


def _build_plan(op: _Op, forward_in: tuple[int, ...], forward_out: tuple[int, ...], names: _Fields,
                itemsize: int, *, mode: Any, rounding_direction: Any = None, scales: Any = None, input_pixel_offsets: Any = None,
                output_pixel_offsets: Any = None, offset_convention: Any = "per-tensor") -> _Plan:
    """Validate the non-tensor parameters of ``op`` and build its taps (SPEC 3.1 rules 3 and 5).

    The NumPy functions (``names.numpy``) fill defaults: scales ``fl32(out/in)`` and the
    half-pixel grid, expressed in the GRAD op's offset convention for the gradients.
    """
    rank = len(forward_in)
    mode = InterpolationMode.of(mode, field=names.mode)
    rule = _rounding_rule(op, mode, rounding_direction, names)
    convention = _offset_convention(offset_convention)
    if scales is None and names.numpy:
        scales = _default_scales(forward_in, forward_out)
    scales = _float32_values(names.scales, scales, rank, names.count, positive=True)
    if not op.has_offsets:
        ipo, opo = (_HALF_PIXEL[0],) * rank, (_HALF_PIXEL[1],) * rank  # SPEC 3.1: v0 = RESAMPLE1 half-pixel
    else:
        # The half-pixel grid as the caller writes it: forward (0.5, -0.5); per-tensor GRAD (-0.5, 0.5).
        default_in, default_out = _HALF_PIXEL[::-1] if op.gradient and convention == "per-tensor" else _HALF_PIXEL
        if input_pixel_offsets is None and names.numpy:
            input_pixel_offsets = (default_in,) * rank
        if output_pixel_offsets is None and names.numpy:
            output_pixel_offsets = (default_out,) * rank
        ipo = _float32_values(names.input_pixel_offsets, input_pixel_offsets, rank, names.count, positive=False)
        opo = _float32_values(names.output_pixel_offsets, output_pixel_offsets, rank, names.count, positive=False)
        if op.gradient and convention == "per-tensor":
            ipo, opo = opo, ipo  # forward ipo = GRAD OutputPixelOffsets, forward opo = GRAD InputPixelOffsets
    _check_size(op, forward_in, forward_out, names, itemsize)
    mode_name = "nearest" if mode == InterpolationMode.NEAREST_NEIGHBOR else "linear"
    taps = tuple(_cached_axis_taps(n_in, n_out, s, i, o, mode_name, rule)
                 for n_in, n_out, s, i, o in zip(forward_in, forward_out, scales, ipo, opo))
    return _Plan(forward_in, forward_out, taps)


def _check_size(op: _Op, forward_in: tuple[int, ...], forward_out: tuple[int, ...], names: _Fields,
                itemsize: int) -> None:
    """The output (forward_out, or forward_in for a GRAD op) and the tap tables, which grow with
    each axis's forward output size, must fit in memory (README "Errors")."""
    if names.numpy:
        field = "input_sizes" if op.gradient else "output_sizes"
    else:
        field = "OutputGradientTensor.Sizes" if op.gradient else "OutputTensor.Sizes"
    tap_bytes = _TAP_BYTES_PER_OUTPUT * sum(forward_out) + _TAP_BYTES_PER_INPUT * sum(forward_in)
    check_output_size(field, forward_in if op.gradient else forward_out, itemsize, working_bytes=tap_bytes,
                      working="tap tables")


def _rounding_rule(op: _Op, mode: InterpolationMode, rounding_direction: Any, names: _Fields) -> Rule:
    """SPEC 3.3: ``half_up`` for RESAMPLE/RESAMPLE1/GRAD, floor/ceil from RoundingDirection for
    RESAMPLE2/GRAD1. Linear taps ignore the rule, so linear mode always gets "floor" (one cache
    entry). A NumPy call needs a direction only in nearest mode; a descriptor always has one."""
    if op.has_rounding and rounding_direction is None and not (mode == InterpolationMode.LINEAR and names.numpy):
        if names.numpy:
            raise DescriptorError(names.rounding_direction, "required for nearest-neighbour mode: 'decreasing' "
                                  "(floor) or 'increasing' (ceil); there is no default (SPEC 3.3)")
        raise DescriptorError(names.rounding_direction, f"missing: {op.operator_type} needs a DML_AXIS_DIRECTION "
                              "(DECREASING = floor, INCREASING = ceil), even in linear mode")
    direction = None
    if op.has_rounding and rounding_direction is not None:
        direction = AxisDirection.of(rounding_direction, field=names.rounding_direction)
    if mode == InterpolationMode.LINEAR:
        return "floor"
    if direction is None:
        return "half_up"
    return "floor" if direction == AxisDirection.DECREASING else "ceil"


@lru_cache(maxsize=1024)
def _cached_axis_taps(n_in: int, n_out: int, scale: float, input_pixel_offset: float, output_pixel_offset: float,
                      mode: str, rule: Rule) -> tuple[np.ndarray, np.ndarray]:
    """:func:`axis_taps`, computed once per distinct axis and returned read-only (shared)."""
    index, weight = axis_taps(n_in, n_out, scale, input_pixel_offset, output_pixel_offset,
                              mode, rule)  # type: ignore[arg-type]
    index.flags.writeable = False
    weight.flags.writeable = False
    return index, weight


def resample_grad_params_from_forward(scales: Sequence[float], input_pixel_offsets: Sequence[float],
                                      output_pixel_offsets: Sequence[float], *,
                                      offset_convention: str = "per-tensor"
                                      ) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """The GRAD call for a forward op: ``(Scales, InputPixelOffsets, OutputPixelOffsets)``.

    Given the forward op's scales and offsets, returns what to pass to ``resample_grad``,
    ``resample_grad1`` or a GRAD descriptor so that it computes that op's exact gradient.
    Scales are unchanged (never inverted). Under the default per-tensor convention (SPEC 3.6)
    the offsets swap: GRAD InputPixelOffsets = forward OutputPixelOffsets and GRAD
    OutputPixelOffsets = forward InputPixelOffsets. Under "doc-literal" they are unchanged.
    """
    convention = _offset_convention(offset_convention)
    if isinstance(scales, (str, bytes)) or not isinstance(scales, (Sequence, np.ndarray)):
        raise DescriptorError.expected("scales", "a sequence of numbers (one per axis)", scales)
    count = len(scales)
    scales = _float32_values("scales", scales, count, "one per axis", positive=True)
    ipo = _float32_values("input_pixel_offsets", input_pixel_offsets, count, "as many as scales", positive=False)
    opo = _float32_values("output_pixel_offsets", output_pixel_offsets, count, "as many as scales", positive=False)
    return (scales, opo, ipo) if convention == "per-tensor" else (scales, ipo, opo)


# --- NumPy functions -------------------------------------------------------------------------

def resample(x: np.ndarray, output_sizes: Sequence[int], *, mode: Any = "nearest",
             scales: Sequence[float] | None = None, out: np.ndarray | None = None,
             backend: str | None = None) -> np.ndarray:
    """``DML_RESAMPLE`` (v0): RESAMPLE1 on the half-pixel grid, nearest rule ``floor(x + 0.5)``.

    ``x``: float32 or float16, 4-D, any strides. ``output_sizes``: the output shape (any axis
    may change). ``scales`` default to ``fl32(output_sizes / x.shape)`` per axis.
    """
    x = check_input("x", x, dtypes=RESAMPLE_DTYPES, ranks=_RESAMPLE.ranks)
    output_sizes = _sizes("output_sizes", output_sizes, x.ndim, "one per axis of x")
    plan = _plan(_RESAMPLE, x.shape, output_sizes, _NUMPY_FIELDS, x.itemsize, mode=mode, scales=scales)
    return _run(x, plan, out, backend, gradient=False)


def resample1(x: np.ndarray, output_sizes: Sequence[int], *, mode: Any = "nearest",
              scales: Sequence[float] | None = None, input_pixel_offsets: Sequence[float] | None = None,
              output_pixel_offsets: Sequence[float] | None = None, out: np.ndarray | None = None,
              backend: str | None = None) -> np.ndarray:
    """``DML_RESAMPLE1``: 4-D resample with per-axis scales and pixel offsets (SPEC 3.2/3.3).

    Nearest uses ``floor(x + 0.5)`` (ties go to the larger index). Offsets default to the
    half-pixel grid (input 0.5, output -0.5), scales to ``fl32(output_sizes / x.shape)``.
    """
    x = check_input("x", x, dtypes=RESAMPLE_DTYPES, ranks=_RESAMPLE1.ranks)
    output_sizes = _sizes("output_sizes", output_sizes, x.ndim, "one per axis of x")
    plan = _plan(_RESAMPLE1, x.shape, output_sizes, _NUMPY_FIELDS, x.itemsize, mode=mode, scales=scales,
                 input_pixel_offsets=input_pixel_offsets, output_pixel_offsets=output_pixel_offsets)
    return _run(x, plan, out, backend, gradient=False)


def resample2(x: np.ndarray, output_sizes: Sequence[int], *, mode: Any = "nearest", rounding_direction: Any = None,
              scales: Sequence[float] | None = None, input_pixel_offsets: Sequence[float] | None = None,
              output_pixel_offsets: Sequence[float] | None = None, out: np.ndarray | None = None,
              backend: str | None = None) -> np.ndarray:
    """``DML_RESAMPLE2``: 1..4-D resample; nearest rounds with ``rounding_direction``
    ("decreasing" = floor, "increasing" = ceil), which nearest mode requires and linear ignores.
    Defaults as :func:`resample1`.
    """
    x = check_input("x", x, dtypes=RESAMPLE_DTYPES, ranks=_RESAMPLE2.ranks)
    output_sizes = _sizes("output_sizes", output_sizes, x.ndim, "one per axis of x")
    plan = _plan(_RESAMPLE2, x.shape, output_sizes, _NUMPY_FIELDS, x.itemsize, mode=mode,
                 rounding_direction=rounding_direction, scales=scales, input_pixel_offsets=input_pixel_offsets, output_pixel_offsets=output_pixel_offsets)
    return _run(x, plan, out, backend, gradient=False)


def resample_grad(dy: np.ndarray, input_sizes: Sequence[int], *, mode: Any = "nearest",
                  scales: Sequence[float] | None = None, input_pixel_offsets: Sequence[float] | None = None,
                  output_pixel_offsets: Sequence[float] | None = None, offset_convention: str = "per-tensor",
                  out: np.ndarray | None = None, backend: str | None = None) -> np.ndarray:
    """``DML_RESAMPLE_GRAD``: the exact adjoint of RESAMPLE1 (SPEC 3.6), 4-D.

    ``dy`` has the forward output's shape; ``input_sizes`` is the forward input's shape, i.e. the
    shape of the returned gradient. ``scales`` are the forward scales (default
    ``fl32(dy.shape / input_sizes)``). The offsets are the GRAD op's own (SPEC 3.6, per-tensor):
    ``input_pixel_offsets`` = the forward output offsets, ``output_pixel_offsets`` = the forward
    input offsets. They default to the half-pixel grid (-0.5, 0.5), so with default arguments
    this is exactly the gradient of :func:`resample1`. With ``offset_convention="doc-literal"``
    the offsets are read as the forward op's (defaults 0.5, -0.5).
    """
    dy = check_input("dy", dy, dtypes=RESAMPLE_DTYPES, ranks=_RESAMPLE_GRAD.ranks)
    input_sizes = _sizes("input_sizes", input_sizes, dy.ndim, "one per axis of dy")
    plan = _plan(_RESAMPLE_GRAD, input_sizes, dy.shape, _NUMPY_FIELDS, dy.itemsize, mode=mode, scales=scales,
                 input_pixel_offsets=input_pixel_offsets, output_pixel_offsets=output_pixel_offsets,
                 offset_convention=offset_convention)
    return _run(dy, plan, out, backend, gradient=True)


def resample_grad1(dy: np.ndarray, input_sizes: Sequence[int], *, mode: Any = "nearest",
                   rounding_direction: Any = None, scales: Sequence[float] | None = None,
                   input_pixel_offsets: Sequence[float] | None = None,
                   output_pixel_offsets: Sequence[float] | None = None, offset_convention: str = "per-tensor",
                   out: np.ndarray | None = None, backend: str | None = None) -> np.ndarray:
    """``DML_RESAMPLE_GRAD1``: the exact adjoint of RESAMPLE2 (SPEC 3.6), 1..4-D.

    Arguments as :func:`resample_grad`, plus ``rounding_direction`` as in :func:`resample2`.
    With default offsets and scales it is exactly the gradient of :func:`resample2`.
    """
    dy = check_input("dy", dy, dtypes=RESAMPLE_DTYPES, ranks=_RESAMPLE_GRAD1.ranks)
    input_sizes = _sizes("input_sizes", input_sizes, dy.ndim, "one per axis of dy")
    plan = _plan(_RESAMPLE_GRAD1, input_sizes, dy.shape, _NUMPY_FIELDS, dy.itemsize, mode=mode,
                 rounding_direction=rounding_direction, scales=scales, input_pixel_offsets=input_pixel_offsets,
                 output_pixel_offsets=output_pixel_offsets, offset_convention=offset_convention)
    return _run(dy, plan, out, backend, gradient=True)


def _run(source: np.ndarray, plan: _Plan, out: np.ndarray | None, backend: str | None, *,
         gradient: bool) -> np.ndarray:
    name = "dy" if gradient else "x"
    shape = plan.forward_in if gradient else plan.forward_out
    out = prepare_out(out, shape=shape, dtype=source.dtype, inputs={name: source}, like=source,
                      size_field="input_sizes" if gradient else "output_sizes")
    _dispatch(source, out, plan, resolve_backend(backend), gradient=gradient)
    return out


def _dispatch(source: np.ndarray, out: np.ndarray, plan: _Plan, backend: str, *, gradient: bool) -> None:
    """Run the forward op (``out = J source``) or its adjoint (``out = J^T source``)."""
    if backend == "fast":
        from ._fast.resample import resample_backward, resample_forward

        (resample_backward if gradient else resample_forward)(source, out, plan.taps, key=plan.tap_key)
    else:
        try:
            result = _adjoint_reference(source, plan.taps, out.shape) if gradient else \
                _forward_reference(source, plan.taps)
        except MemoryError as exc:  # its float64 intermediates; out is not written yet
            raise ShapeError("backend", "the reference backend's float64 intermediates for an output of "
                             f"shape {out.shape} do not fit in memory; use backend='fast'") from exc
        np.copyto(out, result)


# --- reference backend: separable, vectorised over everything but the axes and the 2 taps ----

def _is_identity(index: np.ndarray, weight: np.ndarray, n_in: int) -> bool:
    return (index.shape[0] == n_in and bool(np.all(weight[:, 0] == 1)) and not np.any(weight[:, 1])
            and bool(np.array_equal(index[:, 0], np.arange(n_in))))


def _along(vector: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """``vector`` shaped to broadcast along ``axis`` of an ``ndim``-D array."""
    return vector.reshape((-1,) + (1,) * (ndim - 1 - axis))


def _forward_reference(x: np.ndarray, taps: Taps) -> np.ndarray:
    """``Y = J X`` in float64, one axis at a time (the N-D taps are products of axis taps, so the
    same nonzero taps are summed). Axes that shrink go first to keep the intermediates small."""
    y = np.asarray(x, dtype=np.float64)
    order = sorted(range(x.ndim), key=lambda d: taps[d][0].shape[0] / x.shape[d])
    for axis in order:
        index, weight = taps[axis]
        if not _is_identity(index, weight, y.shape[axis]):
            y = _gather_axis(y, axis, index, weight)
    return y


def _gather_axis(y: np.ndarray, axis: int, index: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``result[..., o, ...] = sum_k weight[o, k] * y[..., index[o, k], ...]`` over taps with a
    nonzero weight (SPEC 3.4: a zero-weight tap is not read, so 0 * inf never happens, and an
    input read with weight 1 alone is copied exactly, -0 included)."""
    n_out = index.shape[0]
    result: np.ndarray | None = None
    for k in range(index.shape[1]):
        rows = np.flatnonzero(weight[:, k])
        if rows.size == 0:
            continue
        contribution = np.take(y, index[rows, k], axis=axis)
        if np.any(weight[rows, k] != 1):
            contribution *= _along(weight[rows, k].astype(np.float64), axis, y.ndim)
        selection = (slice(None),) * axis + (rows,)
        if result is None:
            if rows.size == n_out:
                result = contribution
                continue
            shape = list(y.shape)
            shape[axis] = n_out
            result = np.zeros(shape)
            result[selection] = contribution
        else:
            result[selection] += contribution
    assert result is not None, "axis_taps gives every output a first tap of nonzero weight"
    return result


def _adjoint_reference(dy: np.ndarray, taps: Taps, input_sizes: tuple[int, ...]) -> np.ndarray:
    """``dX = J^T dY`` in float64, the transposed 1-D operator applied axis by axis (SPEC 3.6).
    Axes whose gradient shrinks go first."""
    g = dy
    order = sorted(range(dy.ndim), key=lambda d: input_sizes[d] / dy.shape[d])
    for axis in order:
        index, weight = taps[axis]
        if not _is_identity(index, weight, input_sizes[axis]):
            g = _scatter_axis(g, axis, index, weight, input_sizes[axis])
    return np.asarray(g, dtype=np.float64)


def _scatter_axis(g: np.ndarray, axis: int, index: np.ndarray, weight: np.ndarray, n_in: int) -> np.ndarray:
    """``result[..., i, ...] = sum over (o, k) with index[o, k] == i and weight[o, k] != 0 of
    weight[o, k] * g[..., o, ...]``, summed in float64.

    Each tap column ``index[:, k]`` is non-decreasing in ``o`` (every float32 step of the
    coordinate map, the rounding and the clamps are monotone), so the outputs feeding one input
    form a contiguous run and the scatter is a segmented sum (``np.add.reduceat``).
    """
    shape = list(g.shape)
    shape[axis] = n_in
    result = np.zeros(shape)
    for k in range(index.shape[1]):
        rows = np.flatnonzero(weight[:, k])
        if rows.size == 0:
            continue
        targets = index[rows, k]
        contribution = g if rows.size == g.shape[axis] else np.take(g, rows, axis=axis)
        if np.any(weight[rows, k] != 1):
            contribution = contribution * _along(weight[rows, k].astype(np.float64), axis, g.ndim)
        starts = np.flatnonzero(np.concatenate(([True], targets[1:] != targets[:-1])))
        if starts.size < rows.size:
            contribution = np.add.reduceat(contribution, starts, axis=axis, dtype=np.float64)
        result[(slice(None),) * axis + (targets[starts],)] += contribution
    return result


# --- DirectML operator descriptors -----------------------------------------------------------

class _ResampleOperator(OperatorDesc):
    """Validation and execution shared by the five descriptors (SPEC 3.1)."""

    OP: ClassVar[_Op]
    COUNT_FIELD: ClassVar[str] = "dimension_count"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """The operator's constants follow from ``OP``: type, value, level and tensor fields."""
        super().__init_subclass__(**kwargs)
        op = cls.OP
        cls.OPERATOR_TYPE, cls.OPERATOR_VALUE, cls.FEATURE_LEVEL = op.operator_type, op.operator_value, op.feature_level
        cls.INPUTS, cls.OUTPUTS = (("input_gradient_tensor",), ("output_gradient_tensor",)) if op.gradient \
            else (("input_tensor",), ("output_tensor",))

    def validate(self, feature_level: FeatureLevel | str | int | None = None) -> None:
        """Apply every rule of SPEC 3.1; raise naming the field at fault."""
        op = self.OP
        level = None if feature_level is None else FeatureLevel.of(feature_level)
        require_feature_level(level, op.feature_level, op.operator_type)
        (source_field,), (target_field,) = self.INPUTS, self.OUTPUTS
        source_name, target_name = dml_name(source_field), dml_name(target_field)
        source, target = getattr(self, source_field), getattr(self, target_field)
        for name, desc in ((source_name, source), (target_name, target)):
            if not isinstance(desc, TensorDesc):
                raise DescriptorError.expected(name, "a TensorDesc", desc)
        source.validate(source_name, ranks=op.ranks)
        target.validate(target_name, output=True, ranks=op.ranks)
        rank = source.dimension_count
        if target.dimension_count != rank:
            raise ShapeError.expected(f"{target_name}.DimensionCount", f"{rank} (as {source_name})",
                                      target.dimension_count)
        count_name, count = dml_name(self.COUNT_FIELD), getattr(self, self.COUNT_FIELD)
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count != rank:
            raise ShapeError.expected(count_name, f"{rank} (the rank of {source_name} and {target_name})", count)
        if target.data_type != source.data_type:
            raise DataTypeError.expected(f"{target_name}.DataType", f"{source.data_type.name} (as {source_name})",
                                         target.data_type.name)
        if source.data_type not in (DataType.FLOAT32, DataType.FLOAT16):
            if op is _RESAMPLE2 and source.data_type in (DataType.INT8, DataType.UINT8):
                raise UnsupportedError(f"{source_name}.DataType", f"{source.data_type.name} is documented for "
                                       "RESAMPLE2 from DML_FEATURE_LEVEL_6_2; gradops implements FLOAT32 and "
                                       "FLOAT16 only")
            raise DataTypeError.expected(f"{source_name}.DataType", "FLOAT32 or FLOAT16", source.data_type.name)
        self._plan  # noqa: B018 - validates the enums, scales and offsets, and builds the taps once

    @cached_property
    def _plan(self) -> _Plan:
        """The validated parameters and per-axis taps, computed once per descriptor."""
        op = self.OP
        source, target = getattr(self, self.INPUTS[0]), getattr(self, self.OUTPUTS[0])
        forward_in, forward_out = (target.sizes, source.sizes) if op.gradient else (source.sizes, target.sizes)
        names = _DML_FIELDS if self.COUNT_FIELD == "dimension_count" else _DML_V0_FIELDS
        return _plan(op, forward_in, forward_out, names, source.data_type.numpy_dtype.itemsize,
                     mode=self.interpolation_mode,  # type: ignore[attr-defined]
                     rounding_direction=getattr(self, "rounding_direction", None),
                     scales=self.scales,  # type: ignore[attr-defined]
                     input_pixel_offsets=getattr(self, "input_pixel_offsets", None),
                     output_pixel_offsets=getattr(self, "output_pixel_offsets", None),
                     offset_convention=getattr(self, "offset_convention", "per-tensor"))

    def _execute(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray], backend: str | None) -> None:
        source, target = inputs[0], outputs[0]
        prepare_out(target, shape=target.shape, dtype=source.dtype, inputs={dml_name(self.INPUTS[0]): source},
                    name=dml_name(self.OUTPUTS[0]))
        _dispatch(source, target, self._plan, resolve_backend(backend), gradient=self.OP.gradient)

    def __post_init__(self) -> None:
        """Normalise what is unambiguous (enum names and values, lists to tuples, so that
        descriptors are hashable); :meth:`validate` judges everything."""
        set_ = object.__setattr__
        for name, enum_cls in (("interpolation_mode", InterpolationMode), ("rounding_direction", AxisDirection)):
            if hasattr(self, name):
                try:
                    set_(self, name, enum_cls.of(getattr(self, name)))
                except DescriptorError:
                    pass  # validate() reports it, naming the field
        for name in ("scales", "input_pixel_offsets", "output_pixel_offsets"):
            value = getattr(self, name, None)
            if isinstance(value, (list, np.ndarray)):
                set_(self, name, tuple(v.item() if isinstance(v, np.generic) else v for v in value))


@dataclass(frozen=True)
class ResampleDesc(_ResampleOperator):
    """``DML_RESAMPLE_OPERATOR_DESC { InputTensor; OutputTensor; InterpolationMode; ScaleCount;
    Scales; }`` (SPEC 3.1): 4-D, FL 2.0; RESAMPLE1 with half-pixel offsets."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc
    interpolation_mode: InterpolationMode
    scale_count: int
    scales: tuple[float, ...]

    OP = _RESAMPLE
    COUNT_FIELD = "scale_count"


@dataclass(frozen=True)
class Resample1Desc(_ResampleOperator):
    """``DML_RESAMPLE1_OPERATOR_DESC { InputTensor; OutputTensor; InterpolationMode;
    DimensionCount; Scales; InputPixelOffsets; OutputPixelOffsets; }`` (SPEC 3.1): 4-D, FL 2.1."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc
    interpolation_mode: InterpolationMode
    dimension_count: int
    scales: tuple[float, ...]
    input_pixel_offsets: tuple[float, ...]
    output_pixel_offsets: tuple[float, ...]

    OP = _RESAMPLE1


@dataclass(frozen=True)
class Resample2Desc(_ResampleOperator):
    """``DML_RESAMPLE2_OPERATOR_DESC { InputTensor; OutputTensor; InterpolationMode;
    RoundingDirection; DimensionCount; Scales; InputPixelOffsets; OutputPixelOffsets; }``
    (SPEC 3.1): 1..4-D, FL 5.1."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc
    interpolation_mode: InterpolationMode
    rounding_direction: AxisDirection
    dimension_count: int
    scales: tuple[float, ...]
    input_pixel_offsets: tuple[float, ...]
    output_pixel_offsets: tuple[float, ...]

    OP = _RESAMPLE2


@dataclass(frozen=True)
class ResampleGradDesc(_ResampleOperator):
    """``DML_RESAMPLE_GRAD_OPERATOR_DESC { InputGradientTensor; OutputGradientTensor;
    InterpolationMode; DimensionCount; Scales; InputPixelOffsets; OutputPixelOffsets; }``
    (SPEC 3.1): 4-D, FL 3.0, the adjoint of RESAMPLE1.

    ``offset_convention`` is not a struct field: "per-tensor" (default, SPEC 3.6) or
    "doc-literal" says how the offsets relate to the forward op's.
    """

    input_gradient_tensor: TensorDesc
    output_gradient_tensor: TensorDesc
    interpolation_mode: InterpolationMode
    dimension_count: int
    scales: tuple[float, ...]
    input_pixel_offsets: tuple[float, ...]
    output_pixel_offsets: tuple[float, ...]
    offset_convention: str = field(default="per-tensor", kw_only=True)

    OP = _RESAMPLE_GRAD


@dataclass(frozen=True)
class ResampleGrad1Desc(_ResampleOperator):
    """``DML_RESAMPLE_GRAD1_OPERATOR_DESC { InputGradientTensor; OutputGradientTensor;
    InterpolationMode; RoundingDirection; DimensionCount; Scales; InputPixelOffsets;
    OutputPixelOffsets; }`` (SPEC 3.1): 1..4-D, FL 5.1, the adjoint of RESAMPLE2.
    ``offset_convention`` as in :class:`ResampleGradDesc`."""

    input_gradient_tensor: TensorDesc
    output_gradient_tensor: TensorDesc
    interpolation_mode: InterpolationMode
    rounding_direction: AxisDirection
    dimension_count: int
    scales: tuple[float, ...]
    input_pixel_offsets: tuple[float, ...]
    output_pixel_offsets: tuple[float, ...]
    offset_convention: str = field(default="per-tensor", kw_only=True)

    OP = _RESAMPLE_GRAD1


# --- registry (gradops ops / gradops run) -----------------------------------------------------

def _run_json(desc_cls: type[_ResampleOperator], spec: Mapping[str, Any], base: Path) -> dict[str, np.ndarray]:
    """``run_dml_json`` with a clear error for a missing struct field. The output tensor desc is
    required: its sizes are free (SPEC 3.1 rule 4), so they cannot be derived."""
    tensors = set(desc_cls.INPUTS + desc_cls.OUTPUTS)
    for struct_field in fields(desc_cls):
        label = dml_name(struct_field.name)
        if struct_field.name not in tensors and struct_field.kw_only is False and label not in spec:
            raise DescriptorError(label, f"missing: {desc_cls.OPERATOR_TYPE} needs every struct field")
    return run_dml_json(desc_cls, spec, base, derive_outputs=lambda descs, document: {})


def _op_info(desc_cls: type[_ResampleOperator], function: str) -> OpInfo:
    op = desc_cls.OP
    ranks = "4" if op.ranks == range(4, 5) else "1..4"
    return OpInfo(op.operator_type, "DirectML", function, ranks, ("FLOAT32", "FLOAT16"), op.feature_level.label,
                  partial(_run_json, desc_cls))


OPS = (
    _op_info(ResampleDesc, "resample"),
    _op_info(Resample1Desc, "resample1"),
    _op_info(Resample2Desc, "resample2"),
    _op_info(ResampleGradDesc, "resample_grad"),
    _op_info(ResampleGrad1Desc, "resample_grad1"),
)
