"""Fuzz the depthwise family (issue 27): hostile attributes (huge dilations, strides and paddings
included), sizes and arrays raise only GradopsError; valid random calls on the fast backend agree
with the reference backend (SPEC 5.6: float32 sums in another order, so within rounding)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gradops
from gradops import (depthwise_conv2d_native, depthwise_conv2d_native_backprop_filter,
                     depthwise_conv2d_native_backprop_input)

from .harness import call
from .strategies import HUGE, NUMBERS, backends, hostile_arrays, hostile_outs, layouts, values

pytestmark = pytest.mark.xdist_group("fuzz")

DTYPES = (np.float32, np.float16, np.float64, gradops.depthwise.DEPTHWISE_DTYPES[1])
BIG = (2**31 - 1, 2**30, 2**30 + 1, 2**20, 1000)


@st.composite
def attribute(draw, good: list[int]):
    """A 4-int list attribute: usually ``good`` with huge spatial entries mixed in, sometimes hostile."""
    pick = draw(st.integers(0, 9))
    if pick == 0:
        return draw(st.one_of(st.sampled_from(NUMBERS), st.lists(st.sampled_from((*NUMBERS, *HUGE, -1, 0)),
                                                                 max_size=9)))
    value = list(good)
    if pick <= 3:
        value[draw(st.sampled_from([1, 2]))] = draw(st.sampled_from(BIG))
    return value


@st.composite
def depthwise_cases(draw, op: str):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dtype = draw(st.sampled_from(DTYPES))
    data_format = draw(st.sampled_from(["NHWC", "NCHW", "NHWC", "nhwc", None]))
    n, h, w, c, m = (draw(st.integers(0 if i == 0 else 1, 4)) for i in range(5))
    fh, fw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    nchw = data_format == "NCHW"
    x = values(dtype, (n, c, h, w) if nchw else (n, h, w, c), rng)
    f = values(dtype, (fh, fw, c, m), rng)
    strides = draw(attribute([1, draw(st.integers(1, 3)), draw(st.integers(1, 3)), 1]))
    dilations = draw(attribute([1, draw(st.integers(1, 3)), draw(st.integers(1, 3)), 1]))
    padding = draw(st.sampled_from(["SAME", "VALID", "EXPLICIT", "EXPLICIT", "same", 0, None]))
    pads = ()
    if padding == "EXPLICIT" or draw(st.integers(0, 9)) == 0:
        pads = [0, 0, *(draw(st.sampled_from((0, 1, 2, *BIG))) for _ in range(4)), 0, 0]
        if nchw:
            pads = [0, 0, 0, 0, *pads[2:6]]
        if draw(st.integers(0, 9)) == 0:
            pads = draw(st.one_of(st.lists(st.sampled_from((*NUMBERS, -1, 2**31, 2**63)), max_size=9),
                                  st.sampled_from(NUMBERS)))
    attrs = dict(strides=strides, padding=padding, explicit_paddings=pads, data_format=data_format,
                 dilations=dilations, backend=draw(st.one_of(st.just("fast"), backends())))
    # out_backprop: shaped by the reference forward when the attributes are valid, else random
    try:
        y = depthwise_conv2d_native(x, f, **{**attrs, "backend": "reference"})
        dy = values(dtype, y.shape, rng)
    except gradops.GradopsError:
        dy = values(dtype, (n, 2, 2, c * m) if not nchw else (n, c * m, 2, 2), rng)
    except Exception:  # noqa: BLE001 - the fuzz case itself reports it
        dy = values(dtype, (1, 1, 1, 1), rng)
    operands = {"forward": [x, f], "input": [f, dy], "filter": [x, dy]}[op]
    operands = [draw(layouts(a)) for a in operands]
    if draw(st.integers(0, 6)) == 0:
        operands[draw(st.integers(0, 1))] = draw(hostile_arrays(rng))
    sizes = list(x.shape) if op == "input" else list(f.shape)
    if draw(st.integers(0, 5)) == 0:
        sizes = draw(st.one_of(st.lists(st.one_of(st.sampled_from((*HUGE, 10**5, -1, 0))), min_size=4, max_size=4),
                               st.sampled_from([None, "1234", np.array(sizes, np.int64), np.array(sizes, np.float32),
                                                np.array(sizes, np.int32), [1, 100000, 100000, 1]])))
    if draw(st.integers(0, 4)) == 0:
        good_shape = {"forward": dy.shape, "input": x.shape, "filter": f.shape}[op]
        attrs["out"] = draw(hostile_outs(np.empty(good_shape, dtype),
                                         [a for a in operands if isinstance(a, np.ndarray)]))
    return operands, sizes, attrs


def _run(op: str, operands, sizes, attrs, backend=None):
    attrs = attrs if backend is None else {**attrs, "backend": backend, "out": None}
    a, b = operands
    if op == "forward":
        return depthwise_conv2d_native(a, b, **attrs)
    if op == "input":
        return depthwise_conv2d_native_backprop_input(sizes, a, b, **attrs)
    return depthwise_conv2d_native_backprop_filter(a, sizes, b, **attrs)


@pytest.mark.parametrize("op", ["forward", "input", "filter"])
@given(data=st.data())
def test_depthwise_functions(op, data):
    operands, sizes, attrs = data.draw(depthwise_cases(op))
    out = attrs.get("out")
    result, error = call(f"depthwise_{op}", _run, op, operands, sizes, attrs,
                         outputs=(out,) if out is not None else ())
    if error is None and attrs["backend"] in ("fast", None, "auto"):
        try:
            reference = _run(op, [np.asarray(a) for a in operands], sizes, attrs, backend="reference")
        except gradops.GradopsError as exc:  # the reference's float64 copies may exceed the memory limit
            assert exc.field == "backend", exc
            return
        assert result.shape == reference.shape and result.dtype == reference.dtype
        if result.size == 0:  # e.g. a zero batch: the other sizes may be huge
            return
        half = result.dtype.itemsize == 2
        got, want = np.asarray(result, np.float64), np.asarray(reference, np.float64)
        finite = np.isfinite(want)
        scale = max(1.0, float(np.max(np.abs(want[finite]), initial=0)))
        np.testing.assert_allclose(got[finite], want[finite], rtol=2e-2 if half else 1e-4,
                                   atol=(2e-2 if half else 1e-4) * scale)
        np.testing.assert_array_equal(np.isnan(got[~finite]), np.isnan(want[~finite]))
