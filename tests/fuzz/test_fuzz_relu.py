"""Fuzz relu and relu_grad (issue 27): hostile arguments raise only GradopsError; valid random
inputs on the fast backend give the reference backend's bits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gradops

from .harness import call
from .strategies import FLOATS, INTEGERS, backends, hostile_arrays, hostile_outs, layouts, values

pytestmark = pytest.mark.xdist_group("fuzz")


def _bits(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).view(f"u{array.itemsize}")


def _aliases(out: object, arrays: list) -> tuple:
    return tuple(a for a in arrays if isinstance(a, np.ndarray) and isinstance(out, np.ndarray)
                 and np.shares_memory(a, out))


@st.composite
def relu_cases(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dtype = draw(st.sampled_from(FLOATS + INTEGERS))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=8)))
    x = draw(layouts(values(dtype, shape, rng)))
    dy = draw(layouts(values(dtype, shape, rng)))
    if draw(st.booleans()):
        x = draw(st.one_of(st.just(x), hostile_arrays(rng)))
        dy = draw(st.one_of(st.just(dy), hostile_arrays(rng)))
    out = draw(st.one_of(st.none(), hostile_outs(np.empty(shape, dtype), [a for a in (x, dy)
                                                                          if isinstance(a, np.ndarray)])))
    backend = draw(st.one_of(st.just("fast"), backends()))
    return x, dy, out, backend


@given(relu_cases())
def test_relu(case):
    x, _, out, backend = case
    result, error = call("relu", gradops.relu, x, out=out, backend=backend, outputs=(out,) if out is not None else (),
                         may_write=_aliases(out, [x]))
    if error is None and backend in ("fast", None, "auto"):
        expected = gradops.relu(np.asarray(x), backend="reference")
        np.testing.assert_array_equal(_bits(result), _bits(expected))


@given(relu_cases())
def test_relu_grad(case):
    x, dy, out, backend = case
    result, error = call("relu_grad", gradops.relu_grad, x, dy, out=out, backend=backend,
                         outputs=(out,) if out is not None else (), may_write=_aliases(out, [x, dy]))
    if error is None and backend in ("fast", None, "auto") and not _aliases(out, [x, dy]):
        expected = gradops.relu_grad(np.asarray(x), np.asarray(dy), backend="reference")
        np.testing.assert_array_equal(_bits(result), _bits(expected))
