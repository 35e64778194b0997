"""Corpus cases of the resample family (SPEC section 3): RESAMPLE, RESAMPLE1, RESAMPLE2,
RESAMPLE_GRAD and RESAMPLE_GRAD1.

Covered: the worked examples E1-E10, E18 and E19; exact ties under each rounding rule
(``floor(x+0.5)``, floor, ceil) with dyadic scales only (SPEC 3.7); crops and clamps at both
edges; size-1 axes; resampling of batch and channel axes; ranks 1-4; 16-tap linear; huge and tiny
scales; strided, padded, permuted and broadcast descriptors and oversized buffers; float16; and
a seeded random set (the E20 sweep).

Comparison rules (SPEC 3.4, 3.7): nearest forward is a copy, so bitwise. Nearest gradients are
sums of dY elements: bitwise when the data lie on a dyadic grid that makes every partial sum
exact in float32 (then no summation order can matter), a tolerance otherwise. Linear results
use rtol 1e-5 (FLOAT32) or 2e-3 (FLOAT16) with an atol that absorbs cancellation, or 2 ulps for
FLOAT16 data that are all >= 0.

GRAD offsets are the GRAD op's own (per-tensor convention, SPEC 3.6): the gradient of a forward
op with offsets (ipo, opo) is a GRAD call with InputPixelOffsets = opo, OutputPixelOffsets = ipo.
Every nearest case is checked to be robust (SPEC 3.7): no sample lies within 2^-16 of a rounding
boundary unless it lies exactly on it and float32 computes it exactly.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from .._resample_plan import sample_coordinates
from ..dml import TensorDesc, dml_name
from ..resample import (AxisDirection, InterpolationMode, Resample1Desc, Resample2Desc, ResampleDesc,
                        ResampleGrad1Desc, ResampleGradDesc)
from .cases import (BITWISE, Case, CaseList, Comparison, CompareSpec, Relative, dml_case, rng_for, run_dml,
                    strided_desc)
from .format import as_bits

FAMILY = "resample"
F32, F16 = np.float32, np.float16
HALF_PIXEL = (0.5, -0.5)  # forward (ipo, opo); a per-tensor GRAD call takes (-0.5, 0.5)

_OPS = {
    "RESAMPLE": (ResampleDesc, False, "half_up", range(4, 5)),
    "RESAMPLE1": (Resample1Desc, False, "half_up", range(4, 5)),
    "RESAMPLE2": (Resample2Desc, False, None, range(1, 5)),
    "RESAMPLE_GRAD": (ResampleGradDesc, True, "half_up", range(4, 5)),
    "RESAMPLE_GRAD1": (ResampleGrad1Desc, True, None, range(1, 5)),
}
_TYPE_NAMES = {np.dtype(F32): "FLOAT32", np.dtype(F16): "FLOAT16"}
_ROBUST_MARGIN = Fraction(1, 2**16)


# --- rounding robustness (SPEC 3.7) ---------------------------------------------------------------

def _rounded(x: Fraction, rule: str, n_in: int) -> int:
    if rule == "half_up":
        index = math.floor(x + Fraction(1, 2))
    elif rule == "floor":
        index = math.floor(x)
    else:
        index = math.ceil(x)
    return min(max(index, 0), n_in - 1)


def robust_axis(n_in: int, n_out: int, scale: float, ipo: float, opo: float, rule: str) -> bool:
    """Whether every nearest sample of one forward axis picks its index with a margin: the
    exact real coordinate ``(o - opo)/S - ipo`` (float32 parameters) is at least 2^-16
    (relative) away from a rounding boundary, or exactly on a tie that float32 computes exactly."""
    x32 = sample_coordinates(n_out, scale, ipo, opo)
    s, i, p = (Fraction(float(np.float32(v))) for v in (scale, ipo, opo))
    for o in range(n_out):
        exact = (o - p) / s - i
        margin = _ROBUST_MARGIN * max(1, abs(exact))
        if _rounded(exact - margin, rule, n_in) != _rounded(exact + margin, rule, n_in):
            if Fraction(float(x32[o])) != exact:
                return False
    return True


def _rule(op: str, direction: str | None) -> str:
    fixed = _OPS[op][2]
    if fixed is not None:
        return fixed
    return "floor" if direction == "decreasing" else "ceil"


# --- one case ----------------------------------------------------------------------------------------

def _compare(op: str, mode: str, source: np.ndarray) -> CompareSpec:
    gradient = _OPS[op][1]
    if mode == "nearest":
        return BITWISE if not gradient or exactly_summable(source) else Relative(1e-5 if source.dtype == F32 else 2e-3)
    if source.dtype == F16 and bool(np.all(source >= 0)):
        return Comparison("ulps", max_ulps=2)
    return Relative(1e-5 if source.dtype == F32 else 2e-3)


def exactly_summable(values: np.ndarray) -> bool:
    """Whether any sum of these values is exact in float32: multiples of 2^-8 whose absolute
    total stays below 2^15 (so every partial sum fits float32's 24-bit significand)."""
    scaled = values.astype(np.float64) * 256
    return bool(np.all(scaled == np.round(scaled)) and np.sum(np.abs(values.astype(np.float64))) < 2**15)


def resample_case(name: str, title: str, op: str, source: np.ndarray, target_sizes: Sequence[int], *,
                  mode: str = "nearest", direction: str | None = None, scales: Sequence[float],
                  ipo: Sequence[float] | None = None, opo: Sequence[float] | None = None,
                  spec: Sequence[str], tags: Sequence[str] = (), source_layout: dict[str, Any] | None = None,
                  target_layout: dict[str, Any] | None = None, compare: CompareSpec | None = None) -> Case:
    """One resample case. ``source`` is X (forward ops) or dY (GRAD ops); ``target_sizes`` the
    output's sizes; ``ipo``/``opo`` are the op's own fields (GRAD: per-tensor). Layout options
    go to :func:`strided_desc` (None: packed)."""
    desc_cls, gradient, _, ranks = _OPS[op]
    rank = source.ndim
    if rank not in ranks:
        raise ValueError(f"{name}: {op} takes ranks {ranks.start}..{ranks.stop - 1}")
    type_name = _TYPE_NAMES[source.dtype]
    source_desc = _desc(type_name, source.shape, source_layout)
    target_desc = _desc(type_name, tuple(target_sizes), target_layout)
    if mode == "nearest":
        forward_in, forward_out = (target_sizes, source.shape) if gradient else (source.shape, target_sizes)
        forward_ipo, forward_opo = (opo, ipo) if gradient else (ipo, opo)
        if op == "RESAMPLE":
            forward_ipo, forward_opo = (HALF_PIXEL[0],) * rank, (HALF_PIXEL[1],) * rank
        rule = _rule(op, direction)
        for d in range(rank):
            if not robust_axis(forward_in[d], forward_out[d], scales[d], forward_ipo[d], forward_opo[d], rule):
                raise ValueError(f"{name}: axis {d} samples too close to a rounding boundary (SPEC 3.7)")
    interpolation = InterpolationMode.NEAREST_NEIGHBOR if mode == "nearest" else InterpolationMode.LINEAR
    fields: dict[str, Any] = {"interpolation_mode": interpolation}
    if op == "RESAMPLE":
        fields.update(scale_count=rank, scales=tuple(scales))
    else:
        fields.update(dimension_count=rank, scales=tuple(scales), input_pixel_offsets=tuple(ipo),
                      output_pixel_offsets=tuple(opo))
    if op in ("RESAMPLE2", "RESAMPLE_GRAD1"):
        # A descriptor always carries a direction; linear mode ignores it (SPEC 2.3).
        fields["rounding_direction"] = AxisDirection.INCREASING if direction == "increasing" else \
            AxisDirection.DECREASING
    source_field, target_field = desc_cls.INPUTS[0], desc_cls.OUTPUTS[0]
    desc = desc_cls(**{source_field: source_desc, target_field: target_desc}, **fields)
    tags = (*tags, mode, type_name.lower(), f"rank-{rank}", op.lower().replace("_", "-"))
    case = dml_case(FAMILY, name, title, desc, {source_field: source}, spec=spec, tags=tags,
                    compare=compare or _compare(op, mode, source))
    if gradient and _convention_matters(desc, case):
        case = replace(case, tags=(*case.tags, "offset-convention"))
    return case


def _convention_matters(desc: Any, case: Case) -> bool:
    """Whether the doc-literal reading of the GRAD offsets (SPEC 3.6, 8.1) gives another result."""
    literal = replace(desc, offset_convention="doc-literal")
    source_field = desc.INPUTS[0]
    (result,) = run_dml(literal, [case.inputs[dml_name(source_field)].data], "reference")
    (binding,) = case.outputs.values()
    return not np.array_equal(as_bits(binding.layout.view(result)), as_bits(binding.values()))


def _desc(type_name: str, sizes: Sequence[int], layout: dict[str, Any] | None) -> TensorDesc:
    return TensorDesc(type_name, tuple(sizes)) if layout is None else strided_desc(type_name, sizes, **layout)


def _w(values: Sequence[float], dtype: type = F32) -> np.ndarray:
    """A 1-D list as the W axis of a [1, 1, 1, n] tensor (for the 4-D-only ops)."""
    return np.array(values, dtype=dtype).reshape(1, 1, 1, -1)


def _on_w(value: float, rest: float = 1.0) -> list[float]:
    """Per-axis parameters [rest, rest, rest, value] of a [1, 1, 1, n] resample."""
    return [rest, rest, rest, value]


# --- worked examples -------------------------------------------------------------------------------

def _worked_examples(out: CaseList) -> None:
    add = out.add
    for dtype in (F32, F16):
        t = _TYPE_NAMES[np.dtype(dtype)].lower()
        x = np.array([[1, 2], [3, 4]], dtype).reshape(1, 1, 2, 2)
        dy = np.array([4, 5, 6], dtype).reshape(1, 1, 1, 3)
        scales = [1, 1, 0.5, 1.5]
        e1 = [("resample1-half-pixel", "RESAMPLE1", None, (0.5, -0.5)), ("resample1-tf-legacy", "RESAMPLE1", None,
                                                                         (0.5, 0.0)),
              ("resample1-asymmetric", "RESAMPLE1", None, (0.0, 0.0)),
              ("resample2-dec-half-pixel", "RESAMPLE2", "decreasing", (0.5, -0.5)),
              ("resample2-dec-asymmetric", "RESAMPLE2", "decreasing", (0.0, 0.0)),
              ("resample2-inc-half-pixel", "RESAMPLE2", "increasing", (0.5, -0.5)),
              ("resample2-inc-onnx-prefer-floor", "RESAMPLE2", "increasing", (1.0, -0.5))]
        for label, op, direction, (ipo, opo) in e1:
            add(resample_case(f"e1-{label}-{t}", f"E1: the documented example, {op} {direction or ''} forward "
                              f"offsets ({ipo}, {opo})", op, x, (1, 1, 1, 3), direction=direction, scales=scales,
                              ipo=[ipo] * 4, opo=[opo] * 4, spec=("3.3", "E1"), tags=("worked-example", "tie")))
            grad = "RESAMPLE_GRAD" if op == "RESAMPLE1" else "RESAMPLE_GRAD1"
            add(resample_case(f"e1-{label}-grad-{t}", f"E1: gradient of {op} {direction or ''} ({ipo}, {opo}): "
                              f"{grad} In {opo} / Out {ipo}", grad, dy, (1, 1, 2, 2), direction=direction,
                              scales=scales, ipo=[opo] * 4, opo=[ipo] * 4, spec=("3.6", "E1"),
                              tags=("worked-example", "tie")))
        add(resample_case(f"e1-resample-v0-{t}", "E1 with RESAMPLE (v0) = RESAMPLE1 half-pixel", "RESAMPLE", x,
                          (1, 1, 1, 3), scales=scales, spec=("3.1", "E1"), tags=("worked-example", "tie")))

    # E2: which offset does the -0.5 remark move? Y holds the index of the input each output reads.
    for scale in (1.4, 3.0):
        s = str(scale).replace(".", "p")
        x = np.arange(5, dtype=F32)
        add(resample_case(f"e2-resample1-scale{s}", f"E2: RESAMPLE1 half-pixel at Scale {scale}", "RESAMPLE1",
                          _w(x), (1, 1, 1, 7), scales=_on_w(scale), ipo=[0.5] * 4, opo=[-0.5] * 4,
                          spec=("3.3", "E2"), tags=("worked-example",)))
        add(resample_case(f"e2-resample2-dec-ipo-shift-scale{s}", f"E2: RESAMPLE2 DEC with InputPixelOffsets - 0.5 "
                          f"(= RESAMPLE1) at Scale {scale}", "RESAMPLE2", x, (7,), direction="decreasing",
                          scales=[scale], ipo=[0.0], opo=[-0.5], spec=("0.6", "E2"), tags=("worked-example",)))
        add(resample_case(f"e2-resample2-dec-opo-shift-scale{s}", f"E2: RESAMPLE2 DEC with OutputPixelOffsets - 0.5 "
                          f"(the remark as printed) at Scale {scale}", "RESAMPLE2", x, (7,), direction="decreasing",
                          scales=[scale], ipo=[0.5], opo=[-1.0], spec=("8.2", "E2"), tags=("worked-example",)))
    dy = np.array([8, 6, 6, 8, 5, 7, 7], F32)
    add(resample_case("e2-grad-scale3", "E2: RESAMPLE_GRAD In -0.5 / Out 0.5 at Scale 3", "RESAMPLE_GRAD", _w(dy),
                      (1, 1, 1, 5), scales=_on_w(3.0), ipo=[-0.5] * 4, opo=[0.5] * 4, spec=("3.6", "E2"),
                      tags=("worked-example",)))
    add(resample_case("e2-grad1-dec-scale3", "E2: RESAMPLE_GRAD1 DEC In -0.5 / Out 0 (the GRAD1 remark) at Scale 3",
                      "RESAMPLE_GRAD1", dy, (5,), direction="decreasing", scales=[3.0], ipo=[-0.5], opo=[0.0],
                      spec=("0.6", "E2"), tags=("worked-example",)))

    # E3: ties of a 1-D upsample, offsets (0, 0).
    x, dy = np.array([10, 20, 30], F32), np.arange(1, 7, dtype=F32)
    add(resample_case("e3-resample1", "E3: RESAMPLE1 ties go up", "RESAMPLE1", _w(x), (1, 1, 1, 6), scales=_on_w(2),
                      ipo=[0] * 4, opo=[0] * 4, spec=("3.3", "E3"), tags=("worked-example", "tie")))
    add(resample_case("e3-grad", "E3: RESAMPLE_GRAD of the tie upsample", "RESAMPLE_GRAD", _w(dy), (1, 1, 1, 3),
                      scales=_on_w(2), ipo=[0] * 4, opo=[0] * 4, spec=("3.6", "E3"), tags=("worked-example", "tie")))
    for direction in ("decreasing", "increasing"):
        d = direction[:3]
        add(resample_case(f"e3-resample2-{d}", f"E3: RESAMPLE2 {direction} ties", "RESAMPLE2", x, (6,),
                          direction=direction, scales=[2], ipo=[0], opo=[0], spec=("3.3", "E3"),
                          tags=("worked-example", "tie")))
        add(resample_case(f"e3-grad1-{d}", f"E3: RESAMPLE_GRAD1 {direction} of the tie upsample", "RESAMPLE_GRAD1",
                          dy, (3,), direction=direction, scales=[2], ipo=[0], opo=[0], spec=("3.6", "E3"),
                          tags=("worked-example", "tie")))

    # E4: GRAD1 downsample where every sample is a tie.
    dy = np.array([10, 20], F32)
    for direction in ("decreasing", "increasing"):
        add(resample_case(f"e4-grad1-{direction[:3]}", f"E4: GRAD1 NEAREST {direction}, every sample a tie",
                          "RESAMPLE_GRAD1", dy, (4,), direction=direction, scales=[0.5], ipo=[-0.5], opo=[0.5],
                          spec=("3.6", "E4"), tags=("worked-example", "tie")))
    add(resample_case("e4-grad", "E4: RESAMPLE_GRAD (floor(x+0.5)), every sample a tie", "RESAMPLE_GRAD", _w(dy),
                      (1, 1, 1, 4), scales=_on_w(0.5), ipo=_on_w(-0.5, -0.5), opo=_on_w(0.5, 0.5),
                      spec=("3.6", "E4"), tags=("worked-example", "tie")))
    add(resample_case("e4-grad1-linear", "E4: GRAD1 LINEAR of the same call", "RESAMPLE_GRAD1", dy, (4,),
                      mode="linear", scales=[0.5], ipo=[-0.5], opo=[0.5], spec=("3.4", "E4"),
                      tags=("worked-example",)))

    # E5: fractional-scale linear.
    for dtype in (F32, F16):
        t = _TYPE_NAMES[np.dtype(dtype)].lower()
        add(resample_case(f"e5-resample2-linear-{t}", "E5: LINEAR at Scale 1.5, half-pixel", "RESAMPLE2",
                          np.array([0, 10, 20, 30], dtype), (6,), mode="linear", scales=[1.5], ipo=[0.5], opo=[-0.5],
                          spec=("3.4", "E5"), tags=("worked-example",)))
        add(resample_case(f"e5-grad1-linear-{t}", "E5: LINEAR gradient at Scale 1.5, half-pixel", "RESAMPLE_GRAD1",
                          np.arange(1, 7, dtype=dtype), (4,), mode="linear", scales=[1.5], ipo=[-0.5], opo=[0.5],
                          spec=("3.6", "E5"), tags=("worked-example",)))

    # E6: linear edge clamping.
    add(resample_case("e6-resample1-linear", "E6: LINEAR edge clamping, Scale 2 half-pixel", "RESAMPLE1",
                      _w([1, 2, 4]), (1, 1, 1, 6), mode="linear", scales=_on_w(2), ipo=[0.5] * 4, opo=[-0.5] * 4,
                      spec=("3.4", "E6"), tags=("worked-example", "clamp")))
    add(resample_case("e6-grad-linear", "E6: LINEAR gradient of ones, edges clamped", "RESAMPLE_GRAD",
                      _w(np.ones(6)), (1, 1, 1, 3), mode="linear", scales=_on_w(2), ipo=[-0.5] * 4, opo=[0.5] * 4,
                      spec=("3.6", "E6"), tags=("worked-example", "clamp")))

    # E7: crop and clamp.
    x = [1, 2, 3, 4]
    add(resample_case("e7-crop", "E7: RESAMPLE1 crop (out 4 at Scale 2)", "RESAMPLE1", _w(x), (1, 1, 1, 4),
                      scales=_on_w(2), ipo=[0.5] * 4, opo=[-0.5] * 4, spec=("3.5", "E7"),
                      tags=("worked-example", "crop")))
    add(resample_case("e7-clamp", "E7: RESAMPLE1 clamp (out 6 at Scale 1)", "RESAMPLE1", _w(x), (1, 1, 1, 6),
                      scales=_on_w(1), ipo=[0.5] * 4, opo=[-0.5] * 4, spec=("3.5", "E7"),
                      tags=("worked-example", "clamp")))
    add(resample_case("e7-clamp-grad", "E7: gradient of the clamp piles up on the edge", "RESAMPLE_GRAD",
                      _w(range(1, 7)), (1, 1, 1, 4), scales=_on_w(1), ipo=[-0.5] * 4, opo=[0.5] * 4,
                      spec=("3.6", "E7"), tags=("worked-example", "clamp")))

    # E8: the channel and batch axes.
    x = np.array([[1, 2], [10, 20]], F32).reshape(1, 2, 1, 2)
    dy = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], F32).reshape(1, 4, 1, 2)
    channel_scales = [1, 2, 1, 1]
    for mode in ("nearest", "linear"):
        add(resample_case(f"e8-channels-{mode}", f"E8: RESAMPLE1 {mode} of the channel axis 2 -> 4", "RESAMPLE1",
                          x, (1, 4, 1, 2), mode=mode, scales=channel_scales, ipo=[0.5] * 4, opo=[-0.5] * 4,
                          spec=("3.2", "E8"), tags=("worked-example", "channel-axis")))
    add(resample_case("e8-channels-linear-grad", "E8: LINEAR gradient over the channel axis", "RESAMPLE_GRAD", dy,
                      (1, 2, 1, 2), mode="linear", scales=channel_scales, ipo=[-0.5] * 4, opo=[0.5] * 4,
                      spec=("3.6", "E8"), tags=("worked-example", "channel-axis")))
    add(resample_case("e8-batch-linear", "E8: LINEAR of the batch axis 2 -> 3 at Scale 1.5", "RESAMPLE1",
                      np.array([1, 5], F32).reshape(2, 1, 1, 1), (3, 1, 1, 1), mode="linear", scales=[1.5, 1, 1, 1],
                      ipo=[0.5] * 4, opo=[-0.5] * 4, spec=("3.2", "E8"), tags=("worked-example", "batch-axis")))

    # E9: GRAD1 with DimensionCount 1 and 3.
    add(resample_case("e9-grad1-1d", "E9: GRAD1 1-D, Scale 2.5, NEAREST DEC", "RESAMPLE_GRAD1",
                      np.arange(1, 6, dtype=F32), (2,), direction="decreasing", scales=[2.5], ipo=[-0.5], opo=[0.5],
                      spec=("3.6", "E9"), tags=("worked-example",)))
    dy = np.arange(1, 17, dtype=F32).reshape(2, 2, 4)
    add(resample_case("e9-grad1-3d-linear", "E9: GRAD1 3-D LINEAR", "RESAMPLE_GRAD1", dy, (2, 1, 2), mode="linear",
                      scales=[1, 2, 2], ipo=[-0.5] * 3, opo=[0.5] * 3, spec=("3.6", "E9"), tags=("worked-example",)))
    add(resample_case("e9-grad1-3d-inc", "E9: GRAD1 3-D NEAREST INC", "RESAMPLE_GRAD1", dy, (2, 1, 2),
                      direction="increasing", scales=[1, 2, 2], ipo=[-0.5] * 3, opo=[0.5] * 3, spec=("3.6", "E9"),
                      tags=("worked-example", "tie")))

    # E10: RESAMPLE v0.
    x = np.array([[1, 2], [3, 4]], F32).reshape(1, 1, 2, 2)
    for mode in ("nearest", "linear"):
        add(resample_case(f"e10-resample-v0-{mode}", f"E10: RESAMPLE (v0) x2 {mode}", "RESAMPLE", x, (1, 1, 4, 4),
                          mode=mode, scales=[1, 1, 2, 2], spec=("3.1", "E10"), tags=("worked-example",)))

    # E18: 4096 contributions onto one float16 element: 4096, not the 2048 of a float16 accumulator.
    add(resample_case("e18-grad-float16-accumulation", "E18: 4096 ones onto one float16 element (accumulate in "
                      "float32 or wider)", "RESAMPLE_GRAD", np.ones((1, 1, 64, 64), F16), (1, 1, 1, 1),
                      scales=[1, 1, 64, 64], ipo=[-0.5] * 4, opo=[0.5] * 4, spec=("3.7", "E18"),
                      tags=("worked-example", "accumulation")))
    add(resample_case("e18-grad1-linear-float16-accumulation", "E18 with LINEAR: 4096 ones onto one float16 element",
                      "RESAMPLE_GRAD1", np.ones((64, 64), F16), (1, 1), mode="linear", scales=[64, 64],
                      ipo=[-0.5] * 2, opo=[0.5] * 2, spec=("3.7", "E18"), tags=("worked-example", "accumulation"),
                      compare=BITWISE))  # n_in = 1: every tap has weight exactly 1

    # E19: the real DirectML run of web-platform-tests PR 41811.
    e19 = np.array([[3.86005284, 45.18463077, 87.67153743, 98.78210347, 66.37414347, 3.41158349],
                    [86.14930501, 95.9813372, 76.87126314, 16.52591355, 65.98782867, 25.47092156],
                    [22.56010548, 92.08479613, 85.80876635, 92.63166027, 29.91620871, 75.40461275],
                    [62.06375451, 1.77121588, 99.47231285, 11.44055014, 25.39634271, 67.02175102]], F32)
    add(resample_case("e19-resample-v0-real-directml", "E19: RESAMPLE v0 nearest 4x6 -> 2x3, every sample a tie "
                      "(what DirectML returned)", "RESAMPLE", e19.reshape(1, 1, 4, 6), (1, 1, 2, 3),
                      scales=[1, 1, 0.5, 0.5], spec=("3.3", "E19"), tags=("worked-example", "tie")))


# --- systematic cases ------------------------------------------------------------------------------

def grid_values(rng: np.random.Generator, shape: Sequence[int], dtype: type, *, nonnegative: bool = False
                ) -> np.ndarray:
    """Multiples of 1/8 in [-8, 8) (or [0, 8)): exact in float16, and sums stay exact (SPEC 3.7)."""
    low = 0 if nonnegative else -64
    return (rng.integers(low, 64, tuple(shape)) / 8).astype(dtype)


def _call(op: str, n_in: int, n_out: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(source shape, target shape) of a 1-D resample along the last axis, padded to 4-D for the
    4-D-only ops."""
    forward_in, forward_out = (n_in,), (n_out,)
    source, target = (forward_out, forward_in) if _OPS[op][1] else (forward_in, forward_out)
    if _OPS[op][3].start == 4:
        return (1, 1, 1) + source, (1, 1, 1) + target
    return source, target


def _axis_call(op: str, rank: int, scale: float, ipo: float, opo: float) -> dict[str, list[float]]:
    """Per-axis fields of a resample along the last axis; other axes are identities (S = 1,
    forward offsets (0.5, -0.5)). GRAD ops get the per-tensor swap of every axis."""
    scales = [1.0] * (rank - 1) + [scale]
    forward_ipo = [HALF_PIXEL[0]] * (rank - 1) + [ipo]
    forward_opo = [HALF_PIXEL[1]] * (rank - 1) + [opo]
    return {"scales": scales, "ipo": forward_ipo, "opo": forward_opo}


def _as_grad(fields: dict[str, list[float]]) -> dict[str, list[float]]:
    return {"scales": fields["scales"], "ipo": fields["opo"], "opo": fields["ipo"]}


_RULE_OPS = {"half-up": ("RESAMPLE1", "RESAMPLE_GRAD", None), "floor": ("RESAMPLE2", "RESAMPLE_GRAD1", "decreasing"),
             "ceil": ("RESAMPLE2", "RESAMPLE_GRAD1", "increasing")}


def _ties(out: CaseList) -> None:
    """Dyadic scales and half-integer offsets: many samples are exact ties, computed exactly in
    float32, so each rounding rule is pinned down (SPEC 3.3, 3.7)."""
    offsets = {"asym": (0.0, 0.0), "half": (0.5, -0.5), "tfnn": (0.0, -0.5), "legacy": (0.5, 0.0)}
    for rule, (forward_op, grad_op, direction) in _RULE_OPS.items():
        for scale in (0.25, 0.5, 2.0, 4.0):
            n_in = 5 if scale > 1 else 9
            n_out = int(n_in * scale) + 1
            for label, (ipo, opo) in offsets.items():
                s = str(scale).replace(".", "p")
                source_shape, target_shape = _call(forward_op, n_in, n_out)
                fields = _axis_call(forward_op, len(source_shape), scale, ipo, opo)
                x = np.arange(1, n_in + 1, dtype=F32).reshape(source_shape)
                out.add(resample_case(f"ties-{rule}-s{s}-{label}", f"{forward_op} {direction or ''} ties: {n_in} -> "
                                      f"{n_out}, Scale {scale}, forward offsets ({ipo}, {opo})", forward_op, x,
                                      target_shape, direction=direction, **fields, spec=("3.3", "3.7"),
                                      tags=("tie",)))
                source_shape, target_shape = _call(grad_op, n_in, n_out)
                dy = np.arange(1, n_out + 1, dtype=F32).reshape(source_shape)
                out.add(resample_case(f"ties-{rule}-s{s}-{label}-grad", f"{grad_op} {direction or ''} of the same "
                                      "ties (per-tensor offsets)", grad_op, dy, target_shape, direction=direction,
                                      **_as_grad(fields), spec=("3.6", "3.7"), tags=("tie",)))


def _edges(out: CaseList) -> None:
    """Samples before the first and past the last input element (clamped), and crops (SPEC 3.5)."""
    configs = {  # label: (n_in, n_out, scale, forward ipo, forward opo)
        "before-start": (6, 8, 1.5, 0.0, 2.5),
        "past-end": (4, 11, 2.0, 0.0, 0.0),
        "both-ends": (5, 12, 1.25, 1.0, 3.0),
        "crop": (8, 3, 2.0, 0.5, -0.5),
        "tiny-scale": (7, 4, 1e-3, 0.5, -0.5),
    }
    for label, (n_in, n_out, scale, ipo, opo) in configs.items():
        for rule, mode in (("floor", "nearest"), ("ceil", "nearest"), ("half-up", "nearest"), ("floor", "linear")):
            forward_op, grad_op, direction = _RULE_OPS[rule]
            name = f"edge-{label}-{mode}-{rule}" if mode == "nearest" else f"edge-{label}-linear"
            rng = rng_for(name)
            source_shape, target_shape = _call(forward_op, n_in, n_out)
            fields = _axis_call(forward_op, len(source_shape), scale, ipo, opo)
            out.add(resample_case(name, f"{forward_op} {mode} {label}: {n_in} -> {n_out}, Scale {scale}, forward "
                                  f"offsets ({ipo}, {opo})", forward_op, grid_values(rng, source_shape, F32),
                                  target_shape, mode=mode, direction=direction, **fields, spec=("3.5",),
                                  tags=("clamp",)))
            source_shape, target_shape = _call(grad_op, n_in, n_out)
            out.add(resample_case(f"{name}-grad", f"{grad_op} {mode} of the same {label}", grad_op,
                                  grid_values(rng, source_shape, F32), target_shape, mode=mode, direction=direction,
                                  **_as_grad(fields), spec=("3.5", "3.6"), tags=("clamp",)))
    # A huge finite Scale (ONNX Runtime passes FLT_MAX, SPEC 3.1): every sample reads index 0.
    huge = float(np.finfo(F32).max)
    rng = rng_for("huge-scale")
    out.add(resample_case("edge-huge-scale", "RESAMPLE1 with Scale FLT_MAX on W", "RESAMPLE1",
                          grid_values(rng, (1, 1, 2, 5), F32), (1, 1, 2, 4), scales=[1, 1, 1, huge],
                          ipo=[0.5] * 4, opo=[-0.5] * 4, spec=("3.1",), tags=("clamp",)))
    out.add(resample_case("edge-huge-scale-grad", "RESAMPLE_GRAD with Scale FLT_MAX on W", "RESAMPLE_GRAD",
                          grid_values(rng, (1, 1, 2, 4), F32), (1, 1, 2, 5), scales=[1, 1, 1, huge],
                          ipo=[-0.5] * 4, opo=[0.5] * 4, spec=("3.1", "3.6"), tags=("clamp",)))


def _size_one_axes(out: CaseList) -> None:
    for mode in ("nearest", "linear"):
        for n_in, n_out in ((1, 5), (5, 1), (1, 1)):
            name = f"size1-{n_in}to{n_out}-{mode}"
            rng = rng_for(name)
            scale = 0.25 if n_out < n_in else n_out / n_in  # dyadic: 5 -> 1 at 0.2 would sample a tie inexactly
            for op, direction in (("RESAMPLE2", "decreasing"), ("RESAMPLE_GRAD1", "decreasing")):
                gradient = _OPS[op][1]
                source_shape, target_shape = ((n_out,), (n_in,)) if gradient else ((n_in,), (n_out,))
                ipo, opo = ((-0.5,), (0.5,)) if gradient else ((0.5,), (-0.5,))
                out.add(resample_case(f"{name}{'-grad' if gradient else ''}", f"{op} {mode} of a size-{n_in} axis "
                                      f"to size {n_out}", op, grid_values(rng, source_shape, F16), target_shape,
                                      mode=mode, direction=direction, scales=[scale], ipo=ipo, opo=opo,
                                      spec=("3.5",), tags=("size-1",)))
    rng = rng_for("size1-4d")
    out.add(resample_case("size1-4d-mixed-linear", "RESAMPLE1 LINEAR [1,3,1,2] -> [2,1,3,1]: every axis has size 1 "
                          "on one side", "RESAMPLE1", grid_values(rng, (1, 3, 1, 2), F32), (2, 1, 3, 1),
                          mode="linear", scales=[2, 1 / 3, 3, 0.5], ipo=[0.5] * 4, opo=[-0.5] * 4, spec=("3.5",),
                          tags=("size-1",)))
    out.add(resample_case("size1-4d-mixed-linear-grad", "RESAMPLE_GRAD LINEAR of the same", "RESAMPLE_GRAD",
                          grid_values(rng, (2, 1, 3, 1), F32), (1, 3, 1, 2), mode="linear", scales=[2, 1 / 3, 3, 0.5],
                          ipo=[-0.5] * 4, opo=[0.5] * 4, spec=("3.5", "3.6"), tags=("size-1",)))


def _batch_channel_and_ranks(out: CaseList) -> None:
    """Any axis can be resampled, N and C included (SPEC 2.2, 3.2); ranks 1-4 for RESAMPLE2 and
    GRAD1; all four axes at once (16 linear taps)."""
    for mode in ("nearest", "linear"):
        for dtype in (F32, F16):
            t = _TYPE_NAMES[np.dtype(dtype)].lower()
            name = f"batch-channel-{mode}-{t}"
            rng = rng_for(name)
            nonnegative = dtype == F16 and mode == "linear"
            scales, ipo, opo = [1.5, 2.0, 1.0, 0.5], [0.5, 0.0, 0.5, 0.5], [-0.5, 0.0, -0.5, -0.5]
            out.add(resample_case(name, f"RESAMPLE2 {mode}: batch 2 -> 3 and channels 3 -> 6", "RESAMPLE2",
                                  grid_values(rng, (2, 3, 2, 4), dtype, nonnegative=nonnegative), (3, 6, 2, 2),
                                  mode=mode, direction="decreasing", scales=scales, ipo=ipo, opo=opo,
                                  spec=("3.2",), tags=("batch-axis", "channel-axis")))
            out.add(resample_case(f"{name}-grad", f"RESAMPLE_GRAD1 {mode} of the same", "RESAMPLE_GRAD1",
                                  grid_values(rng, (3, 6, 2, 2), dtype, nonnegative=nonnegative), (2, 3, 2, 4),
                                  mode=mode, direction="decreasing", scales=scales, ipo=opo, opo=ipo,
                                  spec=("3.2", "3.6"), tags=("batch-axis", "channel-axis")))
    rng = rng_for("all-axes-linear")
    scales = [1.5, 0.75, 2.5, 1.25]
    out.add(resample_case("all-axes-linear", "RESAMPLE1 LINEAR on all four axes (up to 16 taps)", "RESAMPLE1",
                          grid_values(rng, (2, 4, 2, 4), F32), (3, 3, 5, 5), mode="linear", scales=scales,
                          ipo=[0.5] * 4, opo=[-0.5] * 4, spec=("3.4",), tags=("batch-axis", "channel-axis")))
    out.add(resample_case("all-axes-linear-grad", "RESAMPLE_GRAD LINEAR on all four axes", "RESAMPLE_GRAD",
                          grid_values(rng, (3, 3, 5, 5), F32), (2, 4, 2, 4), mode="linear", scales=scales,
                          ipo=[-0.5] * 4, opo=[0.5] * 4, spec=("3.4", "3.6"), tags=("batch-axis", "channel-axis")))
    shapes = {1: ((5,), (7,)), 2: ((3, 4), (5, 2)), 3: ((2, 3, 4), (3, 5, 2)), 4: ((2, 2, 3, 3), (3, 2, 5, 4))}
    for rank, (in_shape, out_shape) in shapes.items():
        scales = [o / i for i, o in zip(in_shape, out_shape)]
        for mode, direction in (("nearest", "decreasing"), ("nearest", "increasing"), ("linear", "decreasing")):
            label = mode if mode == "linear" else f"nearest-{direction[:3]}"
            name = f"rank{rank}-{label}"
            rng = rng_for(name)
            # Nearest on (0, -0.5), i.e. floor((o + 0.5) / S) like JAX; half-pixel floor/ceil would
            # sample inexact ties at Scale 1.4 (SPEC 3.7).
            ipo, opo = [0.5 if mode == "linear" else 0.0] * rank, [-0.5] * rank
            out.add(resample_case(name, f"RESAMPLE2 {label}, rank {rank}, Scale out/in", "RESAMPLE2",
                                  grid_values(rng, in_shape, F32), out_shape, mode=mode, direction=direction,
                                  scales=scales, ipo=ipo, opo=opo, spec=("3.1",)))
            out.add(resample_case(f"{name}-grad", f"RESAMPLE_GRAD1 {label}, rank {rank}", "RESAMPLE_GRAD1",
                                  grid_values(rng, out_shape, F32), in_shape, mode=mode, direction=direction,
                                  scales=scales, ipo=opo, opo=ipo, spec=("3.1", "3.6")))


def _layouts(out: CaseList) -> None:
    """Strided, padded, permuted (NHWC) and broadcast descriptors, oversized buffers (SPEC 2.2)."""
    layouts = {  # label: (source layout, target layout)
        "nhwc": (dict(order=(0, 2, 3, 1)), dict(order=(0, 2, 3, 1))),
        "padded": (dict(pad=3), dict(pad=2, extra_bytes=12)),
        "broadcast-channel": (dict(broadcast=(1,)), dict(order=(3, 2, 1, 0))),
        "broadcast-rows": (dict(broadcast=(2,), pad=1), None),
        "oversized": (dict(extra_bytes=40), dict(extra_bytes=8)),
    }
    ops = (("RESAMPLE", None, "nearest"), ("RESAMPLE1", None, "linear"), ("RESAMPLE2", "increasing", "nearest"),
           ("RESAMPLE_GRAD", None, "nearest"), ("RESAMPLE_GRAD1", "decreasing", "linear"))
    in_shape, out_shape = (2, 3, 4, 4), (2, 3, 6, 2)
    scales = [1.0, 1.0, 1.5, 0.5]
    for label, (source_layout, target_layout) in layouts.items():
        for op, direction, mode in ops:
            for dtype in (F32, F16):
                t = _TYPE_NAMES[np.dtype(dtype)].lower()
                name = f"layout-{label}-{op.lower().replace('_', '-')}-{t}"
                rng = rng_for(name)
                gradient = _OPS[op][1]
                source_shape, target_shape = (out_shape, in_shape) if gradient else (in_shape, out_shape)
                values = grid_values(rng, source_shape, dtype, nonnegative=dtype == F16 and mode == "linear")
                for axis in source_layout.get("broadcast", ()):
                    values = np.repeat(np.take(values, [0], axis=axis), source_shape[axis], axis=axis)
                ipo, opo = ([-0.5] * 4, [0.5] * 4) if gradient else ([0.5] * 4, [-0.5] * 4)
                tags = ("strided", label, "broadcast") if "broadcast" in source_layout else ("strided", label)
                out.add(resample_case(name, f"{op} {mode} with {label} tensor descriptors", op, values, target_shape,
                                      mode=mode, direction=direction, scales=scales, ipo=ipo, opo=opo,
                                      spec=("2.2",), tags=tags, source_layout=source_layout,
                                      target_layout=target_layout))


def _random_layout(rng: np.random.Generator, rank: int) -> dict[str, Any] | None:
    """Packed, or a random axis order with row padding and extra bytes."""
    if rng.random() < 0.4:
        return None
    return dict(order=[int(a) for a in rng.permutation(rank)], pad=int(rng.integers(0, 3)),
                extra_bytes=4 * int(rng.integers(0, 3)))


def _random(out: CaseList, count: int = 48) -> None:
    """The E20 sweep as vectors: random op, rank, sizes, mode, rule, scales, offsets in
    {-0.5, 0, 0.5, 1}, data type, layouts and data. Nearest configurations that sample too
    close to a rounding boundary (SPEC 3.7) are drawn again."""
    for index in range(count):
        name = f"random-{index:02d}"
        rng = rng_for(name)
        while True:
            op = str(rng.choice(list(_OPS)))
            desc_ranks = _OPS[op][3]
            rank = int(rng.integers(desc_ranks.start, desc_ranks.stop))
            mode = str(rng.choice(["nearest", "linear"]))
            direction = str(rng.choice(["decreasing", "increasing"])) if op in ("RESAMPLE2", "RESAMPLE_GRAD1") else None
            forward_in = [int(n) for n in rng.integers(1, 7, rank)]
            forward_out = [int(n) for n in rng.integers(1, 7, rank)]
            scales = [float(np.float32(o / i)) if rng.random() < 0.6 else float(rng.choice([0.5, 0.75, 1.0, 1.5, 2.0,
                                                                                              2.5, 3.0, 1.4]))
                      for i, o in zip(forward_in, forward_out)]
            ipo = [float(rng.choice([-0.5, 0.0, 0.5, 1.0])) for _ in range(rank)]
            opo = [float(rng.choice([-0.5, 0.0, 0.5, 1.0])) for _ in range(rank)]
            if op == "RESAMPLE":
                ipo, opo = [HALF_PIXEL[0]] * rank, [HALF_PIXEL[1]] * rank
            rule = _rule(op, direction)
            if mode == "linear" or all(robust_axis(*axis, rule) for axis in zip(forward_in, forward_out, scales,
                                                                                  ipo, opo)):
                break
        gradient = _OPS[op][1]
        dtype = F32 if rng.random() < 0.6 else F16
        source_shape, target_shape = (forward_out, forward_in) if gradient else (forward_in, forward_out)
        if rng.random() < 0.5:
            values = grid_values(rng, source_shape, dtype, nonnegative=dtype == F16 and mode == "linear")
        else:
            values = rng.normal(0, 2, source_shape).astype(dtype)
            if dtype == F16 and mode == "linear":
                values = np.abs(values)
        if gradient:
            ipo, opo = opo, ipo
        fields = {"scales": scales, "ipo": ipo, "opo": opo}
        out.add(resample_case(name, f"random {op} {mode} #{index}", op, values, target_shape, mode=mode,
                              direction=direction, **fields, spec=("3", "E20"), tags=("random",),
                              source_layout=_random_layout(rng, rank), target_layout=_random_layout(rng, rank)))


def cases() -> list[Case]:
    out = CaseList(FAMILY)
    _worked_examples(out)
    _ties(out)
    _edges(out)
    _size_one_axes(out)
    _batch_channel_and_ranks(out)
    _layouts(out)
    _random(out)
    return out.cases
