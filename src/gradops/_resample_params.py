"""Resample parameters (SPEC 3.1-3.3, 3.6): the enums, the validation shared by the NumPy
functions and the descriptors, and the cached plan (sizes and per-axis taps) of one call."""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Hashable, Mapping, Sequence

import numpy as np

from ._arrays import check_output_size
from ._resample_plan import Rule, axis_taps, is_selection, tap_key
from .dml import _UINT32_MAX, FeatureLevel
from .errors import DescriptorError, ShapeError

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
    ``tap_key``: the taps as bytes, the fast backend's cache key for its kernel tables;
    ``selection``: every axis takes one source element at weight 1 (nearest; SPEC 3.3), so the
    forward op copies bits. Both are worked out once per plan, not per call."""

    forward_in: tuple[int, ...]
    forward_out: tuple[int, ...]
    taps: Taps
    tap_key: tuple[tuple[bytes, bytes], ...] = field(init=False)
    selection: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tap_key", tuple(tap_key(index, weight) for index, weight in self.taps))
        object.__setattr__(self, "selection", is_selection(self.taps))


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
                itemsize: int, **parameters: Any) -> _Plan:
    """Validate the non-tensor parameters of ``op`` and build its taps (SPEC 3.1 rules 3 and 5)."""
    arguments = _axis_arguments(op, forward_in, forward_out, names, itemsize, **parameters)
    return _Plan(forward_in, forward_out, tuple(_cached_axis_taps(*axis) for axis in arguments))


AxisArguments = tuple[int, int, float, float, float, str, Rule]  # _cached_axis_taps' arguments


def _axis_arguments(op: _Op, forward_in: tuple[int, ...], forward_out: tuple[int, ...], names: _Fields,
                    itemsize: int, *, mode: Any, rounding_direction: Any = None, scales: Any = None,
                    input_pixel_offsets: Any = None, output_pixel_offsets: Any = None,
                    offset_convention: Any = "per-tensor") -> tuple[AxisArguments, ...]:
    """Validate the non-tensor parameters of ``op``; what determines each axis's taps, in a few
    numbers (``_cached_axis_taps``' arguments: sizes, scale, offsets, mode, rounding rule).

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
    return tuple((n_in, n_out, s, i, o, mode_name, rule)
                 for n_in, n_out, s, i, o in zip(forward_in, forward_out, scales, ipo, opo))


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
