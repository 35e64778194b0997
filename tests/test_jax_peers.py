"""gradops.jax against native JAX (SPEC 6.3, 6.5): values and gradients of random cases.

Depthwise against ``lax.conv_general_dilated(..., feature_group_count=C)`` (NHWC and NCHW, strides,
SAME / VALID / explicit padding, dilations, channel multipliers); resize against
``jax.image.resize(..., antialias=False)`` (nearest and linear, any axes, up and down); relu against
``jax.nn.relu``. Gradients are ``jax.vjp`` with a random cotangent. float32 and float64 compare
with JAX in the same type; float16 and bfloat16 compare with JAX in float32 on the same
(half-representable) values, rounded once to the half type: gradops' half types accumulate in
float32 and round once, so the two agree to within one unit in the last place.
"""

from __future__ import annotations

from fractions import Fraction
from functools import partial
from typing import Any

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import gradops.jax as gj  # noqa: E402

pytestmark = pytest.mark.peers

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
HALF_TYPES = (F16, BF16)


def _native_depthwise(x: Any, filt: Any, strides, padding, dilations, data_format: str) -> Any:
    """SPEC 6.5: the filter [kh, kw, C, M] as HWIO [kh, kw, 1, C*M] keeps output channel c*M + m."""
    kh, kw, c, m = filt.shape
    return lax.conv_general_dilated(x, filt.reshape(kh, kw, 1, c * m), strides, padding, rhs_dilation=dilations,
                                    dimension_numbers=(data_format, "HWIO", data_format), feature_group_count=c,
                                    precision=lax.Precision.HIGHEST)


def _expected(native, dtype: np.dtype, primals: tuple[np.ndarray, ...], dy_shape_of=None, seed: int = 0):
    """Native JAX's output and vjp (with a random cotangent) on ``primals`` of ``dtype``: computed
    in ``dtype`` for float32/float64, in float32 and rounded once for the half types."""
    compute = F32 if dtype in HALF_TYPES else dtype
    y, vjp = jax.vjp(native, *(jnp.asarray(p.astype(compute)) for p in primals))
    dy = np.random.default_rng(seed).standard_normal(y.shape).astype(dtype)
    grads = vjp(jnp.asarray(dy.astype(compute)))
    return np.asarray(y).astype(dtype), dy, tuple(np.asarray(g).astype(dtype) for g in grads)


def _ours(function, primals: tuple[np.ndarray, ...], dy: np.ndarray):
    y, vjp = jax.vjp(function, *(jnp.asarray(p) for p in primals))
    return np.asarray(y), tuple(np.asarray(g) for g in vjp(jnp.asarray(dy)))


def _check(got: np.ndarray, expected: np.ndarray, label: str, coordinate_extent: int = 0) -> None:
    """float32/float64: relative to the result's scale (JAX sums in another order). Half types:
    one unit in the last place of the half type, plus float32 summation-order noise.
    ``coordinate_extent``: the largest input size of a linear resize, whose float32 sample
    coordinates JAX and gradops round differently (by up to an ulp of the coordinate, times the
    largest step between neighbours, at most twice the scale)."""
    assert got.dtype == expected.dtype, label
    got64, expected64 = got.astype(np.float64), expected.astype(np.float64)
    scale = max(1.0, float(np.max(np.abs(expected64), initial=0)))
    coordinates = 4 * float(np.finfo(np.float32).eps) * coordinate_extent * scale
    if expected.dtype in HALF_TYPES:
        eps = float(ml_dtypes.finfo(expected.dtype).eps)
        tiny = float(ml_dtypes.finfo(expected.dtype).smallest_subnormal)
        np.testing.assert_allclose(got64, expected64, rtol=eps, atol=max(tiny, 1e-6 * scale) + coordinates,
                                   err_msg=label)
    else:
        rtol = 1e-12 if expected.dtype == F64 else 2e-6
        np.testing.assert_allclose(got64, expected64, rtol=rtol, atol=rtol * scale + coordinates, err_msg=label)


def _enable_x64(dtype: np.dtype):
    """float64 needs JAX's x64 mode; other types run with JAX's default."""
    if dtype == F64:
        return jax.enable_x64(True)
    return jax.enable_x64(False)


# --- depthwise_conv2d ----------------------------------------------------------------------------

def _depthwise_case(seed: int) -> dict[str, Any]:
    """A random configuration with a non-empty output: any strides, dilations and padding."""
    rng = np.random.default_rng(seed)
    while True:
        n, c, m = (int(v) for v in rng.integers(1, 4, size=3))
        h, w = (int(v) for v in rng.integers(1, 11, size=2))
        kh, kw = (int(v) for v in rng.integers(1, 4, size=2))
        strides = tuple(int(v) for v in rng.integers(1, 4, size=2))
        dilations = tuple(int(v) for v in rng.integers(1, 3, size=2))
        kind = ("SAME", "VALID", "EXPLICIT")[seed % 3]
        padding: Any = kind
        if kind == "EXPLICIT":
            padding = tuple(tuple(int(p) for p in rng.integers(0, 3, size=2)) for _ in range(2))
        pads = padding if kind == "EXPLICIT" else ((0, 0), (0, 0))
        if kind == "SAME" or all(size + sum(pad) >= (k - 1) * d + 1
                                 for size, pad, k, d in zip((h, w), pads, (kh, kw), dilations)):
            break
    data_format = ("NHWC", "NCHW")[(seed // 3) % 2]
    shape = (n, h, w, c) if data_format == "NHWC" else (n, c, h, w)
    return dict(x=rng.standard_normal(shape), filt=rng.standard_normal((kh, kw, c, m)), strides=strides,
                padding=padding, dilations=dilations, data_format=data_format)


DEPTHWISE_CASES = 12


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16], ids=str)
@pytest.mark.parametrize("seed", range(DEPTHWISE_CASES))
def test_depthwise_conv2d(seed: int, dtype: np.dtype) -> None:
    case = _depthwise_case(seed)
    attrs = dict(strides=case["strides"], padding=case["padding"], dilations=case["dilations"],
                 data_format=case["data_format"])
    label = f"{attrs} x{case['x'].shape} filter{case['filt'].shape} {dtype}"
    primals = (case["x"].astype(dtype), case["filt"].astype(dtype))
    with _enable_x64(dtype):
        y_jax, dy, (dx_jax, df_jax) = _expected(partial(_native_depthwise, **attrs), dtype, primals, seed=seed)
        y, (dx, df) = _ours(partial(gj.depthwise_conv2d, backend="reference", **attrs), primals, dy)
    _check(y, y_jax, "y " + label)
    _check(dx, dx_jax, "dx " + label)
    _check(df, df_jax, "dfilter " + label)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
@pytest.mark.parametrize("seed", range(0, DEPTHWISE_CASES, 2))
def test_depthwise_conv2d_fast_backend(seed: int, dtype: np.dtype) -> None:
    """The compiled kernels behind the same JAX function."""
    pytest.importorskip("numba")
    case = _depthwise_case(seed)
    attrs = dict(strides=case["strides"], padding=case["padding"], dilations=case["dilations"],
                 data_format=case["data_format"])
    primals = (case["x"].astype(dtype), case["filt"].astype(dtype))
    y_jax, dy, (dx_jax, df_jax) = _expected(partial(_native_depthwise, **attrs), dtype, primals, seed=seed)
    y, (dx, df) = _ours(jax.jit(partial(gj.depthwise_conv2d, backend="fast", **attrs)), primals, dy)
    for got, expected, name in ((y, y_jax, "y"), (dx, dx_jax, "dx"), (df, df_jax, "dfilter")):
        _check(got, expected, f"{name} {attrs} {dtype}")


# --- resize --------------------------------------------------------------------------------------

def _resize_case(seed: int, method: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Ranks 1..4 with every axis changing size with probability 0.6 (batch and channel axes too);
    every fourth case has an axis with exact nearest ties that float32 arithmetic can miss."""
    rng = np.random.default_rng([seed, method == "linear"])
    rank = int(rng.integers(1, 5))
    in_shape = [int(v) for v in rng.integers(1, 9, rank)]
    out_shape = [int(rng.integers(1, 13)) if rng.random() < 0.6 else n for n in in_shape]
    if seed % 4 == 0:
        axis = int(rng.integers(rank))
        in_shape[axis], out_shape[axis] = ((14, 1), (10, 25), (26, 7), (20, 25))[seed // 4 % 4]
    return tuple(in_shape), tuple(out_shape)


def _exact_picks(n_in: int, n_out: int) -> np.ndarray:
    """``floor((o + 0.5) * in / out)`` in rational arithmetic, clamped (SPEC 6.3)."""
    return np.array([min(int((Fraction(2 * o + 1, 2) * n_in / n_out)), n_in - 1) for o in range(n_out)])


def _jit_may_differ(n_in: int, n_out: int) -> bool:
    """Whether jit-compiled JAX may pick another index than the exact formula: XLA's CPU code
    computes ``(o + 0.5) * fl32(in * fl32(1 / out))`` in float32 (see gradops/jax/_resize.py)."""
    f32 = np.float32
    coordinates = (np.arange(n_out, dtype=f32) + f32(0.5)) * (f32(n_in) * (f32(1) / f32(n_out)))
    return not np.array_equal(np.minimum(np.floor(coordinates), n_in - 1), _exact_picks(n_in, n_out))


def _nearest_oracle(x: np.ndarray, dy: np.ndarray, out_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Brute force: the gather of the exact picks and its adjoint, summed in float64."""
    picks = np.ix_(*(_exact_picks(i, o) for i, o in zip(x.shape, out_shape)))
    dx = np.zeros(x.shape, np.float64)
    np.add.at(dx, picks, dy.astype(np.float64))
    return x[picks], dx.astype(x.dtype)


RESIZE_CASES = 16


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=str)
@pytest.mark.parametrize("method", ["nearest", "linear"])
@pytest.mark.parametrize("seed", range(RESIZE_CASES))
def test_resize(seed: int, method: str, dtype: np.dtype) -> None:
    in_shape, out_shape = _resize_case(seed, method)
    x = np.random.default_rng(seed).standard_normal(in_shape).astype(dtype)
    native = partial(jax.image.resize, shape=out_shape, method=method, antialias=False)
    y_jax, dy, (dx_jax,) = _expected(native, dtype, (x,), seed=seed)
    y, (dx,) = _ours(partial(gj.resize, shape=out_shape, method=method, backend="reference"), (x,), dy)
    label = f"{in_shape} -> {out_shape} {method} {dtype}"
    if method == "nearest":
        y_exact, dx_exact = _nearest_oracle(x, dy, out_shape)
        np.testing.assert_array_equal(y, y_exact, err_msg=label)  # a gather: the same picks, the same bits
        _check(dx, dx_exact, "dx " + label)
        if any(_jit_may_differ(i, o) for i, o in zip(in_shape, out_shape)):
            with jax.disable_jit():  # JAX then divides as its source says
                y_jax, _, (dx_jax,) = _expected(native, dtype, (x,), seed=seed)
        np.testing.assert_array_equal(y, y_jax, err_msg=label)
        _check(dx, dx_jax, "dx " + label)
    else:
        _check(y, y_jax, "y " + label, coordinate_extent=max(in_shape))
        _check(dx, dx_jax, "dx " + label, coordinate_extent=max(in_shape))


@pytest.mark.parametrize("method", ["nearest", "linear"])
@pytest.mark.parametrize("dtype", [F32, F16], ids=str)
def test_resize_fast_backend(method: str, dtype: np.dtype) -> None:
    """An image batch upsampled 2x and downsampled to an uneven size, NHWC, on the compiled kernels."""
    pytest.importorskip("numba")
    x = np.random.default_rng(1).standard_normal((2, 12, 10, 8)).astype(dtype)
    for out_shape in ((2, 24, 20, 8), (2, 7, 9, 8)):
        native = partial(jax.image.resize, shape=out_shape, method=method, antialias=False)
        y_jax, dy, (dx_jax,) = _expected(native, dtype, (x,))
        y, (dx,) = _ours(jax.jit(partial(gj.resize, shape=out_shape, method=method, backend="fast")), (x,), dy)
        _check(y, y_jax, f"y {out_shape} {method}", coordinate_extent=max(x.shape))
        _check(dx, dx_jax, f"dx {out_shape} {method}", coordinate_extent=max(x.shape))


# --- relu ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["reference", "fast"])
@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=str)
def test_relu(dtype: np.dtype, backend: str) -> None:
    """Bit for bit, away from the values where SPEC 4.3 decides differently (NaN, -0)."""
    if backend == "fast":
        pytest.importorskip("numba")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 5, 7, 4)).astype(dtype)
    x[0, 0, 0, :2] = 0
    dy = rng.standard_normal(x.shape).astype(dtype)
    y_jax, vjp = jax.vjp(jax.nn.relu, jnp.asarray(x))
    y, (dx,) = _ours(jax.jit(partial(gj.relu, backend=backend)), (x,), dy)
    assert y.dtype == dtype and dx.dtype == dtype
    np.testing.assert_array_equal(y.view(np.uint16 if dtype != F32 else np.uint32),
                                  np.asarray(y_jax).view(np.uint16 if dtype != F32 else np.uint32))
    np.testing.assert_array_equal(dx, np.asarray(vjp(jnp.asarray(dy))[0]))


def test_relu_special_values() -> None:
    """SPEC 4.2 / 4.3: NaN and -0 give +0 (jax.nn.relu keeps NaN); the gradient at 0 and NaN is +0,
    and dy passes bit for bit elsewhere (-0 and inf included)."""
    x = np.array([np.nan, -0.0, 0.0, -1.0, 2.0, np.inf, 3.0], np.float32)
    dy = np.array([5.0, 6.0, 7.0, 8.0, np.inf, -0.0, np.nan], np.float32)
    y, (dx,) = _ours(partial(gj.relu, backend="reference"), (x,), dy)
    np.testing.assert_array_equal(y.view(np.uint32),
                                  np.array([0, 0, 0, 0, 2, np.inf, 3], np.float32).view(np.uint32))
    np.testing.assert_array_equal(dx.view(np.uint32),
                                  np.array([0, 0, 0, 0, np.inf, -0.0, np.nan], np.float32).view(np.uint32))
    assert np.isnan(np.asarray(jax.nn.relu(jnp.float32(np.nan))))  # the divergence is real


@pytest.mark.parametrize("dtype", [np.int32, np.int16, np.int8])
def test_relu_integer(dtype: Any) -> None:
    x = np.arange(-60, 60, 7, dtype=dtype).reshape(2, -1)
    np.testing.assert_array_equal(np.asarray(jax.jit(gj.relu)(jnp.asarray(x))), np.asarray(jax.nn.relu(x)))
