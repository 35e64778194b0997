"""Fuzz the resample family and resample_grad_params_from_forward (issue 27): hostile sizes,
scales, offsets, modes and arrays raise only GradopsError; valid random calls on the fast
backend agree with the reference backend (SPEC 3.7: sums in another order, so within rounding)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gradops

from .harness import call
from .strategies import FLOATS, HUGE, NUMBERS, backends, hostile_arrays, hostile_outs, layouts, values

pytestmark = pytest.mark.xdist_group("fuzz")

FUNCTIONS = {"resample": (gradops.resample, False, False, False), "resample1": (gradops.resample1, False, True, False),
             "resample2": (gradops.resample2, False, True, True), "resample_grad": (gradops.resample_grad, True, True, False),
             "resample_grad1": (gradops.resample_grad1, True, True, True)}


@st.composite
def per_axis(draw, rank: int, positive: bool):
    """Scales or offsets: mostly valid float lists, sometimes hostile."""
    if draw(st.integers(0, 4)) == 0:
        return draw(st.one_of(st.sampled_from(NUMBERS), st.lists(st.sampled_from(NUMBERS), max_size=5),
                              st.just(np.full(rank, np.nan)), st.just("0.5")))
    low = 0.0625 if positive else -3.0
    return draw(st.lists(st.floats(low, 4.0, width=32), min_size=rank, max_size=rank))


@st.composite
def sizes(draw, rank: int):
    if draw(st.integers(0, 5)) == 0:
        hostile = st.lists(st.one_of(st.integers(-2, 3), st.sampled_from(HUGE), st.sampled_from(NUMBERS)),
                           min_size=0, max_size=5)
        return draw(st.one_of(hostile, st.sampled_from([None, "4", b"1234", 3, np.array([2.0] * rank)])))
    values_ = draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank))
    return draw(st.sampled_from([tuple(values_), list(values_), np.array(values_, np.int64)]))


@st.composite
def resample_cases(draw, name: str):
    function, gradient, has_offsets, has_rounding = FUNCTIONS[name]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    rank = 4 if name in ("resample", "resample1", "resample_grad") else draw(st.integers(1, 4))
    dtype = draw(st.sampled_from(FLOATS))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank)))
    source = draw(layouts(values(dtype, shape, rng)))
    if draw(st.integers(0, 5)) == 0:
        source = draw(hostile_arrays(rng))
    target = draw(sizes(rank))
    kwargs = {"mode": draw(st.sampled_from(["nearest", "linear", "NEAREST_NEIGHBOR", "LINEAR", 0, 1, "cubic", None,
                                            2, True, gradops.InterpolationMode.LINEAR]))}
    if has_rounding and draw(st.integers(0, 3)):
        kwargs["rounding_direction"] = draw(st.sampled_from(["decreasing", "increasing", "DECREASING", 0, 1, 2,
                                                             "down", None]))
    if draw(st.booleans()):
        kwargs["scales"] = draw(per_axis(rank, True))
    if has_offsets and draw(st.booleans()):
        kwargs["input_pixel_offsets"] = draw(per_axis(rank, False))
        kwargs["output_pixel_offsets"] = draw(per_axis(rank, False))
    if gradient and draw(st.integers(0, 4)) == 0:
        kwargs["offset_convention"] = draw(st.sampled_from(["per-tensor", "doc-literal", "bogus", None]))
    out_shape = tuple(int(t) for t in target) if isinstance(target, (tuple, list, np.ndarray)) and all(
        isinstance(t, (int, np.integer)) and 1 <= t <= 64 for t in target) else shape
    if draw(st.integers(0, 3)) == 0:
        kwargs["out"] = draw(hostile_outs(np.empty(out_shape, dtype), [source] if isinstance(source, np.ndarray)
                                          else []))
    kwargs["backend"] = draw(st.one_of(st.just("fast"), backends()))
    return function, source, target, kwargs


def _check_against_reference(name, function, source, target, kwargs, result):
    if kwargs["backend"] not in ("fast", None, "auto"):
        return
    reference = function(np.asarray(source), target, **{**kwargs, "out": None, "backend": "reference"})
    tolerance = 1e-2 if result.dtype == np.float16 else 1e-5
    scale = float(np.nanmax(np.abs(np.where(np.isfinite(np.asarray(source, np.float64)), source, 0)), initial=1.0))
    finite = np.isfinite(reference)
    np.testing.assert_allclose(result[finite].astype(np.float64), reference[finite].astype(np.float64),
                               rtol=tolerance, atol=tolerance * scale * 64, err_msg=name)
    np.testing.assert_array_equal(np.isnan(result[~finite]), np.isnan(reference[~finite]), err_msg=name)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@given(data=st.data())
def test_resample_functions(name, data):
    function, source, target, kwargs = data.draw(resample_cases(name))
    out = kwargs.get("out")
    outputs = (out,) if out is not None else ()
    result, error = call(name, function, source, target, outputs=outputs, **kwargs)
    if error is None:
        _check_against_reference(name, function, source, target, kwargs, result)


@given(st.one_of(st.lists(st.floats(allow_nan=True), max_size=5), st.sampled_from(NUMBERS)),
       st.one_of(st.lists(st.floats(allow_nan=True), max_size=5), st.sampled_from(NUMBERS)),
       st.one_of(st.lists(st.floats(allow_nan=True), max_size=5), st.sampled_from(NUMBERS)),
       st.sampled_from(["per-tensor", "doc-literal", "x", None, 3]))
def test_resample_grad_params_from_forward(scales, ipo, opo, convention):
    call("resample_grad_params_from_forward", gradops.resample_grad_params_from_forward, scales, ipo, opo,
         offset_convention=convention)
