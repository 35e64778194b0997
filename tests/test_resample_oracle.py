"""Resample family against a brute-force oracle written here from SPEC 3.2-3.6.

The oracle shares no code with gradops (it does not import ``_resample_plan``): per-element
Python loops, float32 steps for the coordinates, float64 sums. It covers all five operators,
both GRAD offset conventions, float16, E20 (scatter gradient == dense J^T dY) and the adjoint
identity <R x, y> == <x, R^T y> under hypothesis.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradops import (resample, resample1, resample2, resample_grad, resample_grad1,
                     resample_grad_params_from_forward)


F = np.float32


# --- the oracle --------------------------------------------------------------------------------------

def oracle_axis(n_in, n_out, scale, ipo, opo, mode, rule):
    """Per forward output index, the list of (input index, float32 weight) with weight != 0."""
    rows = []
    for o in range(n_out):
        # SPEC 3.2: t = fl32(o - opo); t = fl32(t / S); x = fl32(t - ipo).
        t = F(F(o) - F(opo))
        t = F(t / F(scale))
        x = F(t - F(ipo))
        if mode == "nearest":  # SPEC 3.3
            if rule == "half_up":
                i = math.floor(F(x + F(0.5)))
            elif rule == "floor":
                i = math.floor(x)
            else:
                i = math.ceil(x)
            rows.append([(min(max(i, 0), n_in - 1), 1.0)])
        else:  # SPEC 3.4
            xc = min(max(x, F(0)), F(n_in - 1))
            i0 = math.floor(xc)
            i1 = min(i0 + 1, n_in - 1)
            w1 = F(xc - F(i0))
            w0 = F(F(1) - w1)
            rows.append([(i, float(w)) for i, w in ((i0, w0), (i1, w1)) if w != 0])
    return rows


def oracle_taps(forward_in, forward_out, scales, ipo, opo, mode, rule):
    return [oracle_axis(forward_in[d], forward_out[d], scales[d], ipo[d], opo[d], mode, rule)
            for d in range(len(forward_in))]


def oracle_forward(x, forward_out, taps):
    x = x.astype(np.float64)
    y = np.zeros(forward_out)
    for o in np.ndindex(*forward_out):
        total = None
        for combo in itertools.product(*(taps[d][o[d]] for d in range(len(o)))):
            weight = math.prod(w for _, w in combo)
            term = weight * x[tuple(i for i, _ in combo)]
            total = term if total is None else total + term
        y[o] = total
    return y


def oracle_gradient(dy, forward_in, taps):
    """SPEC 3.6 scatter form: dX[i] += w * dY[o] over every forward tap."""
    dy = dy.astype(np.float64)
    dx = np.zeros(forward_in)
    for o in np.ndindex(*dy.shape):
        for combo in itertools.product(*(taps[d][o[d]] for d in range(len(o)))):
            dx[tuple(i for i, _ in combo)] += math.prod(w for _, w in combo) * dy[o]
    return dx


def oracle_dense(n_in, n_out, rows):
    matrix = np.zeros((n_out, n_in))
    for o, taps in enumerate(rows):
        for i, w in taps:
            matrix[o, i] += w
    return matrix


# --- random configurations -----------------------------------------------------------------------------

FOUR_D = {"resample", "resample1", "resample_grad"}
FUNCTIONS = {"resample": resample, "resample1": resample1, "resample2": resample2, "resample_grad": resample_grad,
             "resample_grad1": resample_grad1}
OFFSET_CHOICES = (-0.5, 0.0, 0.5, 1.0)


def random_call(rng, op):
    """A random call of ``op``: (kwargs, forward_in, forward_out, forward parameters, rule)."""
    rank = 4 if op in FOUR_D else int(rng.integers(1, 5))
    small = 4 if rank == 4 else 6
    forward_in = tuple(int(n) for n in rng.integers(1, small + 1, rank))
    forward_out = tuple(int(n) for n in rng.integers(1, small + 2, rank))
    mode = str(rng.choice(["nearest", "linear"]))
    kwargs = {"mode": mode}
    if rng.random() < 0.25:
        scales = [float(F(o) / F(i)) for i, o in zip(forward_in, forward_out)]
    else:
        scales = [float(rng.choice([0.5, 1.0, 1.4, 1.5, 2.0, 2.5, 3.0, rng.uniform(0.2, 4.0)])) for _ in range(rank)]
        kwargs["scales"] = scales

    def offsets():
        return [float(rng.choice(OFFSET_CHOICES)) if rng.random() < 0.7 else float(rng.uniform(-1.5, 1.5))
                for _ in range(rank)]

    rule = "half_up"
    if op in ("resample2", "resample_grad1"):
        direction = str(rng.choice(["increasing", "decreasing"]))
        kwargs["rounding_direction"] = direction
        rule = "ceil" if direction == "increasing" else "floor"
    gradient = op.startswith("resample_grad")
    if op == "resample":
        ipo, opo = [0.5] * rank, [-0.5] * rank
    else:
        given_in, given_out = offsets(), offsets()
        if rng.random() < 0.2:  # the defaults: half-pixel, written in the op's own convention
            given_in = given_out = None
        else:
            kwargs["input_pixel_offsets"], kwargs["output_pixel_offsets"] = given_in, given_out
        convention = "per-tensor"
        if gradient:
            convention = str(rng.choice(["per-tensor", "doc-literal"]))
            kwargs["offset_convention"] = convention
        if given_in is None:
            ipo, opo = [0.5] * rank, [-0.5] * rank
        elif gradient and convention == "per-tensor":
            ipo, opo = given_out, given_in  # SPEC 3.6: forward ipo = GRAD OutputPixelOffsets
        else:
            ipo, opo = given_in, given_out
    return kwargs, forward_in, forward_out, (scales, ipo, opo), rule


@pytest.mark.parametrize("op", list(FUNCTIONS))
@pytest.mark.parametrize("seed", range(24))
def test_against_brute_force_oracle(op, seed, backend):
    rng = np.random.default_rng([seed, list(FUNCTIONS).index(op)])
    kwargs, forward_in, forward_out, (scales, ipo, opo), rule = random_call(rng, op)
    taps = oracle_taps(forward_in, forward_out, scales, ipo, opo, kwargs["mode"], rule)
    gradient = op.startswith("resample_grad")
    source_shape, target_shape = (forward_out, forward_in) if gradient else (forward_in, forward_out)
    data = rng.integers(-9, 10, source_shape).astype(np.float32)
    if kwargs["mode"] == "linear":
        data += rng.uniform(-1, 1, source_shape).astype(np.float32)
    result = FUNCTIONS[op](data, target_shape, backend=backend, **kwargs)
    expected = oracle_gradient(data, forward_in, taps) if gradient else oracle_forward(data, forward_out, taps)
    assert result.shape == target_shape and result.dtype == np.float32
    if kwargs["mode"] == "nearest":
        np.testing.assert_array_equal(result, expected.astype(np.float32), err_msg=str(kwargs))
    else:
        np.testing.assert_allclose(result, expected, rtol=1e-6, atol=1e-5, err_msg=str(kwargs))


@pytest.mark.parametrize("op", list(FUNCTIONS))
@pytest.mark.parametrize("seed", range(6))
def test_float16_against_oracle(op, seed, backend):
    """float16: coordinates in float32, sums wide, one rounding to float16 (SPEC 3.7)."""
    rng = np.random.default_rng([seed, 99, list(FUNCTIONS).index(op)])
    kwargs, forward_in, forward_out, (scales, ipo, opo), rule = random_call(rng, op)
    taps = oracle_taps(forward_in, forward_out, scales, ipo, opo, kwargs["mode"], rule)
    gradient = op.startswith("resample_grad")
    source_shape, target_shape = (forward_out, forward_in) if gradient else (forward_in, forward_out)
    data = (rng.integers(-64, 65, source_shape) / 8).astype(np.float16)
    result = FUNCTIONS[op](data, target_shape, backend=backend, **kwargs)
    expected = oracle_gradient(data, forward_in, taps) if gradient else oracle_forward(data, forward_out, taps)
    assert result.dtype == np.float16
    if kwargs["mode"] == "nearest":
        np.testing.assert_array_equal(result, expected.astype(np.float16), err_msg=str(kwargs))
    else:  # one float16 rounding of a float32-or-wider sum: within one float16 ulp
        np.testing.assert_allclose(result.astype(np.float64), expected, rtol=1e-3, atol=1e-3, err_msg=str(kwargs))


def test_e20_scatter_gradient_equals_dense_transpose(backend):
    """E20: 60 random configurations (rank 1-3, both modes, all three rounding rules, offsets in
    {-0.5, 0, 0.5, 1}): the library's gradient equals the dense J^T dY."""
    rng = np.random.default_rng(20)
    rules = ("half_up", "floor", "ceil")
    for case in range(60):
        rank = int(rng.integers(1, 4))
        mode = ("nearest", "linear")[case % 2]
        rule = rules[(case // 2) % 3]
        forward_in = [int(n) for n in rng.integers(1, 7, rank)]
        forward_out = [int(n) for n in rng.integers(1, 9, rank)]
        scales = [float(rng.choice([0.5, 1.0, 1.5, 2.0, 3.0, rng.uniform(0.3, 3.0)])) for _ in range(rank)]
        ipo = [float(rng.choice(OFFSET_CHOICES)) for _ in range(rank)]
        opo = [float(rng.choice(OFFSET_CHOICES)) for _ in range(rank)]
        dense = np.ones((1, 1))
        for d in range(rank):
            axis_rows = oracle_axis(forward_in[d], forward_out[d], scales[d], ipo[d], opo[d], mode, rule)
            dense = np.kron(dense, oracle_dense(forward_in[d], forward_out[d], axis_rows))
        dy = rng.integers(-9, 10, forward_out).astype(np.float32)
        expected = (dense.T @ dy.reshape(-1).astype(np.float64)).reshape(forward_in)
        grad_scales, grad_in, grad_out = resample_grad_params_from_forward(scales, ipo, opo)
        if rule == "half_up":  # RESAMPLE_GRAD is 4-D: put the axes last
            pad = 4 - rank
            result = resample_grad(dy.reshape((1,) * pad + dy.shape), [1] * pad + forward_in, mode=mode,
                                   scales=[1.0] * pad + list(grad_scales),
                                   input_pixel_offsets=[0.0] * pad + list(grad_in),
                                   output_pixel_offsets=[0.0] * pad + list(grad_out),
                                   backend=backend).reshape(forward_in)
        else:
            result = resample_grad1(dy, forward_in, mode=mode, rounding_direction="decreasing" if rule == "floor"
                                    else "increasing", scales=grad_scales, input_pixel_offsets=grad_in,
                                    output_pixel_offsets=grad_out, backend=backend)
        if mode == "nearest":
            np.testing.assert_array_equal(result, expected, err_msg=f"case {case}")
        else:
            np.testing.assert_allclose(result, expected, rtol=1e-6, atol=1e-5, err_msg=f"case {case}")


# --- the adjoint identity <R x, y> == <x, R^T y> ------------------------------------------------------------

@st.composite
def adjoint_cases(draw):
    rank = draw(st.integers(1, 4))
    forward_in = tuple(draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank)))
    forward_out = tuple(draw(st.lists(st.integers(1, 7), min_size=rank, max_size=rank)))
    mode = draw(st.sampled_from(["nearest", "linear"]))
    rule = draw(st.sampled_from(["half_up", "floor", "ceil"]))
    scales = draw(st.none() | st.lists(st.floats(0.2, 5.0), min_size=rank, max_size=rank))
    offsets = st.lists(st.sampled_from(OFFSET_CHOICES) | st.floats(-1.5, 1.5), min_size=rank, max_size=rank)
    ipo, opo = draw(offsets), draw(offsets)
    convention = draw(st.sampled_from(["per-tensor", "doc-literal"]))
    seed = draw(st.integers(0, 2**32 - 1))
    return forward_in, forward_out, mode, rule, scales, ipo, opo, convention, seed


@settings(max_examples=60, deadline=None)
@given(case=adjoint_cases())
def test_adjoint_identity(backend, case):
    forward_in, forward_out, mode, rule, scales, ipo, opo, convention, seed = case
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, forward_in).astype(np.float32)
    y = rng.integers(-4, 5, forward_out).astype(np.float32)
    if scales is None:
        scales = [float(F(o) / F(i)) for i, o in zip(forward_in, forward_out)]
    grad_scales, grad_in, grad_out = resample_grad_params_from_forward(scales, ipo, opo,
                                                                       offset_convention=convention)
    common = {"mode": mode, "backend": backend}
    if rule == "half_up":  # RESAMPLE1 / RESAMPLE_GRAD are 4-D: pad with leading size-1 axes
        pad = 4 - len(forward_in)
        ones, zeros = [1.0] * pad, [0.0] * pad
        x4, y4 = x.reshape((1,) * pad + x.shape), y.reshape((1,) * pad + y.shape)
        rx = resample1(x4, y4.shape, scales=ones + list(scales), input_pixel_offsets=zeros + list(ipo),
                       output_pixel_offsets=zeros + list(opo), **common)
        rty = resample_grad(y4, x4.shape, scales=ones + list(grad_scales), input_pixel_offsets=zeros + list(grad_in),
                            output_pixel_offsets=zeros + list(grad_out), offset_convention=convention, **common)
    else:
        direction = "decreasing" if rule == "floor" else "increasing"
        rx = resample2(x, forward_out, rounding_direction=direction, scales=scales, input_pixel_offsets=ipo,
                       output_pixel_offsets=opo, **common)
        rty = resample_grad1(y, forward_in, rounding_direction=direction, scales=grad_scales,
                             input_pixel_offsets=grad_in, output_pixel_offsets=grad_out,
                             offset_convention=convention, **common)
    lhs_terms = rx.astype(np.float64).ravel() * y.astype(np.float64).ravel()
    rhs_terms = x.astype(np.float64).ravel() * rty.astype(np.float64).ravel()
    lhs, rhs = float(np.sum(lhs_terms)), float(np.sum(rhs_terms))
    if mode == "nearest":  # integer data, weights 1: both sides are exact
        assert lhs == rhs
    else:  # each side rounded its results to float32 once
        scale = float(np.sum(np.abs(lhs_terms)) + np.sum(np.abs(rhs_terms))) + 1.0
        assert abs(lhs - rhs) <= 1e-6 * scale


@settings(max_examples=30, deadline=None)
@given(shapes=st.integers(1, 4).flatmap(lambda r: st.tuples(
    st.lists(st.integers(1, 6), min_size=r, max_size=r), st.lists(st.integers(1, 7), min_size=r, max_size=r))),
    mode=st.sampled_from(["nearest", "linear"]), direction=st.sampled_from(["increasing", "decreasing"]),
    seed=st.integers(0, 2**32 - 1))
def test_defaults_are_mutually_adjoint(backend, shapes, mode, direction, seed):
    """With default scales and offsets, resample_grad1 is the adjoint of resample2 and
    resample_grad of resample1 (the GRAD defaults are the per-tensor half-pixel grid)."""
    forward_in, forward_out = (tuple(s) for s in shapes)
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, forward_in).astype(np.float32)
    y = rng.integers(-4, 5, forward_out).astype(np.float32)
    pad = (1,) * (4 - len(forward_in))
    pairs = [(resample2(x, forward_out, mode=mode, rounding_direction=direction, backend=backend),
              resample_grad1(y, forward_in, mode=mode, rounding_direction=direction, backend=backend)),
             (resample1(x.reshape(pad + x.shape), pad + forward_out, mode=mode, backend=backend),
              resample_grad(y.reshape(pad + y.shape), pad + forward_in, mode=mode, backend=backend))]
    for rx, rty in pairs:
        lhs = float(np.dot(rx.astype(np.float64).ravel(), y.astype(np.float64).ravel()))
        rhs = float(np.dot(x.astype(np.float64).ravel(), rty.astype(np.float64).ravel()))
        if mode == "nearest":
            assert lhs == rhs
        else:
            assert lhs == pytest.approx(rhs, rel=1e-6, abs=1e-4 * (1 + x.size + y.size))
