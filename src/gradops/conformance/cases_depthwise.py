"""Corpus cases of the TensorFlow depthwise family (SPEC section 5): DepthwiseConv2dNative,
DepthwiseConv2dNativeBackpropInput and DepthwiseConv2dNativeBackpropFilter, with tf.raw_ops
input and attribute names.

Covered: E12-E16; SAME with odd and even padding totals, VALID (including an output size that
truncates to 0), EXPLICIT; strides 1-3; dilations (which TensorFlow's CPU raw kernels reject or
silently ignore, SPEC 5.6: the vectors follow the documented math); multipliers 1-3; NHWC and
NCHW; float32, float16, bfloat16 and float64; half-type accumulation (SPEC 5.6); a seeded random
set.

Comparison rules: data on a dyadic grid (multiples of 1/8 in [-8, 8)) with small fan-in make
every product and partial sum exact in float32, so results are bitwise whatever the summation
order; random normal data use a tolerance (rtol 1e-5 float32, 2e-3 float16, 1.6e-2 bfloat16,
1e-12 float64) with an atol that absorbs cancellation.
"""

from __future__ import annotations

from typing import Any, Sequence

import ml_dtypes
import numpy as np

from ..depthwise import DepthwiseConv2dNativeDesc
from .cases import BITWISE, Case, CaseList, CompareSpec, Relative, TfOp, rng_for
from .cases import tf_case as _tf_case

FAMILY = "depthwise"
_MODULE = "gradops.depthwise"
FORWARD = TfOp("DepthwiseConv2dNative", _MODULE, "depthwise_conv2d_native", ("input", "filter"))
BACKPROP_INPUT = TfOp("DepthwiseConv2dNativeBackpropInput", _MODULE, "depthwise_conv2d_native_backprop_input",
                      ("input_sizes", "filter", "out_backprop"))
BACKPROP_FILTER = TfOp("DepthwiseConv2dNativeBackpropFilter", _MODULE, "depthwise_conv2d_native_backprop_filter",
                       ("input", "filter_sizes", "out_backprop"))
TF_OPS = (FORWARD, BACKPROP_INPUT, BACKPROP_FILTER)

F32, F16, F64 = np.float32, np.float16, np.float64
BF16 = ml_dtypes.bfloat16
_TYPE_LABELS = {np.dtype(F32): "float32", np.dtype(F16): "float16", np.dtype(BF16): "bfloat16",
                np.dtype(F64): "float64"}
_RTOL = {np.dtype(F32): 1e-5, np.dtype(F16): 2e-3, np.dtype(BF16): 1.6e-2, np.dtype(F64): 1e-12}


def tf_case(family: str, name: str, title: str, op: TfOp, attrs: dict[str, Any], inputs: dict[str, np.ndarray], *,
            spec: Sequence[str], tags: Sequence[str], compare: CompareSpec = BITWISE) -> Case:
    """:func:`gradops.conformance.cases.tf_case`, with tags saying where TensorFlow's CPU raw
    kernels cannot serve as the oracle (SPEC 5.6): NCHW is rejected, and dilations are rejected
    by the forward kernel and silently ignored by the two backprop kernels."""
    extra = []
    if attrs["data_format"] == "NCHW":
        extra.append("tf-cpu-rejects-nchw")
    if any(d != 1 for d in attrs["dilations"]):
        extra.append("tf-cpu-rejects-dilation" if op is FORWARD else "tf-cpu-ignores-dilation")
    return _tf_case(family, name, title, op, attrs, inputs, spec=spec, tags=(*tags, *extra), compare=compare)


def _attrs(strides: Sequence[int], padding: str, *, explicit_paddings: Sequence[int] = (), data_format: str = "NHWC",
           dilations: Sequence[int] = (1, 1, 1, 1)) -> dict[str, Any]:
    return {"strides": list(strides), "padding": padding, "explicit_paddings": list(explicit_paddings),
            "data_format": data_format, "dilations": list(dilations)}


def _hw(value_h: int, value_w: int, data_format: str) -> list[int]:
    """A 4-entry attribute (strides, dilations) in data_format order."""
    return [1, value_h, value_w, 1] if data_format == "NHWC" else [1, 1, value_h, value_w]


def _sizes(shape: Sequence[int]) -> np.ndarray:
    return np.array(shape, np.int32)


def grid_values(rng: np.random.Generator, shape: Sequence[int], dtype: Any) -> np.ndarray:
    """Multiples of 1/8 in [-8, 8): exact in every type here, products and sums stay exact."""
    return (rng.integers(-64, 64, tuple(shape)) / 8).astype(dtype)


def _add_all_ops(out: CaseList, name: str, title: str, attrs: dict[str, Any], input_shape: Sequence[int],
                 filter_shape: Sequence[int], dtype: Any, *, spec: Sequence[str], tags: Sequence[str],
                 random_data: bool = False) -> None:
    """The forward op and both gradients for one configuration, with fresh data for each."""
    geometry = DepthwiseConv2dNativeDesc(dtype, **attrs).geometry(input_shape, filter_shape)
    dy_shape = geometry.output_shape(attrs["data_format"])
    rng = rng_for(name)
    label = _TYPE_LABELS[np.dtype(dtype)]

    def data(shape: Sequence[int]) -> np.ndarray:
        return rng.normal(0, 1, tuple(shape)).astype(dtype) if random_data else grid_values(rng, shape, dtype)

    compare = Relative(_RTOL[np.dtype(dtype)]) if random_data else BITWISE
    tags = (*tags, label, attrs["data_format"].lower())
    out.add(tf_case(FAMILY, f"{name}-forward-{label}", f"{title}: forward", FORWARD, attrs,
                    {"input": data(input_shape), "filter": data(filter_shape)}, spec=spec, tags=tags, compare=compare))
    out.add(tf_case(FAMILY, f"{name}-backprop-input-{label}", f"{title}: BackpropInput", BACKPROP_INPUT, attrs,
                    {"input_sizes": _sizes(input_shape), "filter": data(filter_shape), "out_backprop": data(dy_shape)},
                    spec=spec, tags=tags, compare=compare))
    out.add(tf_case(FAMILY, f"{name}-backprop-filter-{label}", f"{title}: BackpropFilter", BACKPROP_FILTER, attrs,
                    {"input": data(input_shape), "filter_sizes": _sizes(filter_shape), "out_backprop": data(dy_shape)},
                    spec=spec, tags=tags, compare=compare))


def _worked_examples(out: CaseList) -> None:
    add = out.add
    # E12: stride 2, SAME, multiplier 2.
    f = np.stack([np.arange(1, 10).reshape(3, 3), np.ones((3, 3))], axis=-1).reshape(3, 3, 1, 2)
    dy = np.stack([np.arange(1, 10).reshape(3, 3), np.full((3, 3), 10)], axis=-1).reshape(1, 3, 3, 2)
    attrs = _attrs([1, 2, 2, 1], "SAME")
    for dtype in (F32, F16, BF16, F64):
        label = _TYPE_LABELS[np.dtype(dtype)]
        add(tf_case(FAMILY, f"e12-backprop-input-{label}", "E12: BackpropInput, stride 2, SAME, multiplier 2",
                    BACKPROP_INPUT, attrs, {"input_sizes": _sizes([1, 5, 5, 1]), "filter": f.astype(dtype),
                                            "out_backprop": dy.astype(dtype)},
                    spec=("5.4", "E12"), tags=("worked-example", "multiplier", "nhwc", label)))
    add(tf_case(FAMILY, "e12-forward", "E12: the forward check with X = 1..25", FORWARD, attrs,
                {"input": np.arange(1, 26, dtype=F32).reshape(1, 5, 5, 1), "filter": f.astype(F32)},
                spec=("5.4", "E12"), tags=("worked-example", "multiplier", "nhwc", "float32")))
    # E13: SAME with an odd padding total (0 before, 1 after).
    add(tf_case(FAMILY, "e13-backprop-input-same-odd", "E13: SAME, input 6, k 3, s 2: pads 0/1", BACKPROP_INPUT,
                attrs, {"input_sizes": _sizes([1, 6, 6, 1]), "filter": np.arange(1, 10, dtype=F32).reshape(3, 3, 1, 1),
                        "out_backprop": np.ones((1, 3, 3, 1), F32)},
                spec=("5.3", "E13"), tags=("worked-example", "same-odd-padding", "nhwc", "float32")))
    # E14: dilation 2 (TensorFlow's CPU raw kernels reject it or ignore it, SPEC 5.6).
    x = np.arange(1, 26, dtype=F32).reshape(1, 5, 5, 1)
    f14 = np.array([[1, 0, -1], [0, 2, 0], [1, 0, 1]], F32).reshape(3, 3, 1, 1)
    dilated = _attrs([1, 1, 1, 1], "VALID", dilations=[1, 2, 2, 1])
    tags = ("worked-example", "dilation", "nhwc", "float32")
    add(tf_case(FAMILY, "e14-forward-dilation2", "E14: dilation 2, VALID: Y = 68", FORWARD, dilated,
                {"input": x, "filter": f14}, spec=("5.4", "5.6", "E14"), tags=tags))
    add(tf_case(FAMILY, "e14-backprop-input-dilation2", "E14: BackpropInput of [[7]] with dilation 2", BACKPROP_INPUT,
                dilated, {"input_sizes": _sizes([1, 5, 5, 1]), "filter": f14,
                          "out_backprop": np.full((1, 1, 1, 1), 7, F32)}, spec=("5.4", "5.6", "E14"), tags=tags))
    add(tf_case(FAMILY, "e14-forward-same-dilation2", "E14: SAME with dilation 2 (pads 2/2)", FORWARD,
                _attrs([1, 1, 1, 1], "SAME", dilations=[1, 2, 2, 1]), {"input": x, "filter": f14},
                spec=("5.3", "5.6", "E14"), tags=tags))
    # E15: EXPLICIT padding, NHWC and NCHW.
    f15 = np.stack([np.ones((2, 2)), np.array([[1, 2], [3, 4]])], axis=-1).reshape(2, 2, 2, 1).astype(F32)
    for data_format, pads, input_sizes, dy_shape in (("NHWC", [0, 0, 1, 0, 0, 2, 0, 0], [1, 3, 3, 2], (1, 3, 4, 2)),
                                                     ("NCHW", [0, 0, 0, 0, 1, 0, 0, 2], [1, 2, 3, 3], (1, 2, 3, 4))):
        add(tf_case(FAMILY, f"e15-backprop-input-explicit-{data_format.lower()}", f"E15: EXPLICIT padding "
                    f"{pads} in {data_format}", BACKPROP_INPUT,
                    _attrs([1, 1, 1, 1], "EXPLICIT", explicit_paddings=pads, data_format=data_format),
                    {"input_sizes": _sizes(input_sizes), "filter": f15, "out_backprop": np.ones(dy_shape, F32)},
                    spec=("5.3", "5.6", "E15"), tags=("worked-example", "explicit", data_format.lower(), "float32")))
    # E16: BackpropFilter.
    dy16 = np.stack([np.ones((2, 2)), np.array([[1, 0], [0, 0]])], axis=-1).reshape(1, 2, 2, 2).astype(F32)
    add(tf_case(FAMILY, "e16-backprop-filter", "E16: BackpropFilter, VALID, stride 1", BACKPROP_FILTER,
                _attrs([1, 1, 1, 1], "VALID"), {"input": np.arange(1, 10, dtype=F32).reshape(1, 3, 3, 1),
                                                "filter_sizes": _sizes([2, 2, 1, 2]), "out_backprop": dy16},
                spec=("5.4", "E16"), tags=("worked-example", "multiplier", "nhwc", "float32")))
    # SPEC 5.6: 4096 unit contributions per element; a float16 accumulator stops at 2048.
    for name, op, inputs in (
            ("accumulation-backprop-filter-float16", BACKPROP_FILTER,
             {"input": np.ones((1, 64, 64, 1), F16), "filter_sizes": _sizes([1, 1, 1, 1]),
              "out_backprop": np.ones((1, 64, 64, 1), F16)}),
            ("accumulation-forward-float16", FORWARD,
             {"input": np.ones((1, 64, 64, 1), F16), "filter": np.ones((64, 64, 1, 1), F16)})):
        add(tf_case(FAMILY, name, f"{op.name}: 4096 unit contributions onto one float16 element (4096, not 2048)",
                    op, _attrs([1, 1, 1, 1], "VALID"), inputs, spec=("5.6", "E18"),
                    tags=("accumulation", "float16", "nhwc")))


def _systematic(out: CaseList) -> None:
    configs = [  # name, title, (stride h, w), padding, explicit pads (h, w), (dilation h, w), input HW, filter
        ("same-odd-s2", "SAME, odd padding total", (2, 2), "SAME", None, (1, 1), (6, 7), (3, 3), ("same-odd-padding",)),
        ("same-even-s1", "SAME, even padding total", (1, 1), "SAME", None, (1, 1), (5, 4), (3, 3), ()),
        ("same-s3-k2", "SAME, stride 3, filter 2", (3, 3), "SAME", None, (1, 1), (7, 8), (2, 2), ("same-odd-padding",)),
        ("valid-s2", "VALID, stride 2", (2, 2), "VALID", None, (1, 1), (7, 6), (3, 2), ()),
        ("valid-stride-skips", "VALID, stride 3 > filter 2 (skipped rows get 0)", (3, 3), "VALID", None, (1, 1),
         (8, 8), (2, 2), ()),
        ("explicit-asymmetric", "EXPLICIT, asymmetric pads", (2, 2), "EXPLICIT", ((2, 0), (1, 3)), (1, 1), (5, 5),
         (3, 3), ("explicit",)),
        ("dilation2-same", "SAME, dilation 2", (1, 1), "SAME", None, (2, 2), (6, 6), (3, 3), ("dilation",)),
        ("dilation3-valid-s2", "VALID, dilation 3, stride 2", (2, 2), "VALID", None, (3, 3), (9, 10), (2, 3),
         ("dilation",)),
        ("dilation-unequal-explicit", "EXPLICIT, dilations (2, 1)", (1, 1), "EXPLICIT", ((1, 1), (0, 2)), (2, 1),
         (5, 6), (3, 2), ("dilation", "explicit")),
        ("filter-larger-than-input", "SAME, filter 5x5 on a 3x2 input", (1, 1), "SAME", None, (1, 1), (3, 2), (5, 5),
         ("same-odd-padding",)),
        ("one-by-one", "1x1 filter, stride 2", (2, 2), "VALID", None, (1, 1), (5, 5), (1, 1), ()),
    ]
    for index, (name, title, strides, padding, explicit, dilations, hw, khw, tags) in enumerate(configs):
        for data_format in ("NHWC", "NCHW"):
            shapes = ((1, 3, 1), (2, 2, 2), (3, 1, 1))  # (multiplier, channels, batch): two per config
            for multiplier, channels, batch in (shapes[index % 3], shapes[(index + 1) % 3]):
                pads = () if explicit is None else (
                    [0, 0, *explicit[0], *explicit[1], 0, 0] if data_format == "NHWC"
                    else [0, 0, 0, 0, *explicit[0], *explicit[1]])
                attrs = _attrs(_hw(*strides, data_format), padding, explicit_paddings=pads, data_format=data_format,
                               dilations=_hw(*dilations, data_format))
                input_shape = ([batch, *hw, channels] if data_format == "NHWC" else [batch, channels, *hw])
                dtype = (F32, F16, BF16, F64)[(index + multiplier) % 4]
                _add_all_ops(out, f"{name}-{data_format.lower()}-m{multiplier}",
                             f"{title}, {data_format}, multiplier {multiplier}", attrs, input_shape,
                             [*khw, channels, multiplier], dtype, spec=("5.3", "5.4"),
                             tags=(*tags, "multiplier") if multiplier > 1 else tags)
    # VALID whose output size truncates to 0: in 4, effective filter 7, stride 2 (SPEC 5.3).
    attrs = _attrs([1, 2, 2, 1], "VALID", dilations=[1, 2, 2, 1])
    out.add(tf_case(FAMILY, "valid-empty-output-forward", "VALID output size trunc(-1/2) = 0: an empty output",
                    FORWARD, attrs, {"input": grid_values(rng_for("empty"), (1, 4, 4, 1), F32),
                                     "filter": grid_values(rng_for("empty-f"), (4, 4, 1, 1), F32)},
                    spec=("5.3",), tags=("empty", "dilation", "nhwc", "float32")))
    out.add(tf_case(FAMILY, "valid-empty-output-backprop-input", "BackpropInput of an empty out_backprop: zeros",
                    BACKPROP_INPUT, attrs, {"input_sizes": _sizes([1, 4, 4, 1]),
                                            "filter": grid_values(rng_for("empty-f"), (4, 4, 1, 1), F32),
                                            "out_backprop": np.zeros((1, 0, 0, 1), F32)},
                    spec=("5.3",), tags=("empty", "dilation", "nhwc", "float32")))


def _random(out: CaseList, count: int = 12) -> None:
    """Random geometry, layout, type and normally distributed data (tolerance rules)."""
    for index in range(count):
        name = f"random-{index:02d}"
        rng = rng_for(name)
        data_format = str(rng.choice(["NHWC", "NCHW"]))
        padding = str(rng.choice(["SAME", "VALID", "EXPLICIT"]))
        stride, dilation = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        kh, kw = (int(k) for k in rng.integers(1, 4, 2))
        hw = [int(n) for n in rng.integers(max(kh, kw) * dilation, 9, 2)]
        explicit = [int(p) for p in rng.integers(0, 3, 4)] if padding == "EXPLICIT" else None
        pads = () if explicit is None else ([0, 0, *explicit, 0, 0] if data_format == "NHWC"
                                            else [0, 0, 0, 0, *explicit])
        channels, multiplier, batch = int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 3))
        attrs = _attrs(_hw(stride, stride, data_format), padding, explicit_paddings=pads, data_format=data_format,
                       dilations=_hw(dilation, dilation, data_format))
        input_shape = [batch, *hw, channels] if data_format == "NHWC" else [batch, channels, *hw]
        dtype = (F32, F32, F16, F64, BF16)[int(rng.integers(0, 5))]
        tags = ["random"] + (["dilation"] if dilation > 1 else []) + (["multiplier"] if multiplier > 1 else [])
        _add_all_ops(out, name, f"random #{index}: {padding}, stride {stride}, dilation {dilation}", attrs,
                     input_shape, [kh, kw, channels, multiplier], dtype, spec=("5.4",), tags=tags, random_data=True)


def cases() -> list[Case]:
    out = CaseList(FAMILY)
    _worked_examples(out)
    _systematic(out)
    _random(out)
    return out.cases
