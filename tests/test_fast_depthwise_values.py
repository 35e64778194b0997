"""The fast depthwise kernels on particular values (SPEC 5.4, 5.6): taps in the padding, NaN and
inf, half results rounded once, empty operands, read-only and broadcast inputs; the half <-> float32
conversions inside the kernels; the public functions dispatch to these kernels."""

from __future__ import annotations

import ml_dtypes
import numba
import numpy as np
import pytest

from gradops._fast import codecs as element_kinds
from gradops._fast import depthwise as fast
from gradops._fast.depthwise import codecs

from fast_depthwise_cases import (BF16, as_layout, brute_backprop_filter, brute_backprop_input, brute_forward, check,
                                  empty_like_layout)


def test_padding_taps_contribute_nothing():
    """A tap that falls in the padding is skipped, not multiplied by 0: an inf weight there
    leaves the result finite (SPEC 5.4)."""
    x = np.ones((1, 2, 2, 1), np.float32)
    f = np.ones((3, 3, 1, 1), np.float32)
    f[0, 0] = np.inf  # reaches only padding for output (0, 0) of a SAME 3x3 on 2x2
    y = np.empty((1, 2, 2, 1), np.float32)
    fast.conv_forward(x, f, y, 1, 1, 1, 1, 1, 1)
    assert y[0, 0, 0, 0] == 4 and np.isinf(y[0, 1, 1, 0])
    dx = np.empty((1, 2, 2, 1), np.float32)
    fast.backprop_input(x, f, dx, 1, 1, 1, 1, 1, 1)
    assert dx[0, 1, 1, 0] == 4 and np.isinf(dx[0, 0, 0, 0])
    # NCHW (planar rows; stride 1 with a non-finite weight must not take the zero-margin blocks)
    y2 = empty_like_layout(y.shape, y.dtype, "NCHW")
    fast.conv_forward(as_layout(x, "NCHW"), f, y2, 1, 1, 1, 1, 1, 1)
    np.testing.assert_array_equal(y2, y)
    dx2 = empty_like_layout(dx.shape, dx.dtype, "NCHW")
    fast.backprop_input(as_layout(x, "NCHW"), f, dx2, 1, 1, 1, 1, 1, 1)
    np.testing.assert_array_equal(dx2, dx)
    # staged rows (strided dy; float16): a non-finite weight must not take the zero margins
    dx3 = empty_like_layout(dx.shape, dx.dtype, "strided")
    fast.backprop_input(as_layout(x, "strided"), f, dx3, 1, 1, 1, 1, 1, 1)
    np.testing.assert_array_equal(dx3, dx)
    dx4 = np.empty(dx.shape, np.float16)
    fast.backprop_input(x.astype(np.float16), f.astype(np.float16), dx4, 1, 1, 1, 1, 1, 1)
    np.testing.assert_array_equal(dx4, dx)


def test_special_values_propagate():
    x = np.zeros((1, 3, 3, 2), np.float32)
    x[0, 1, 1, 0] = np.nan
    x[0, 1, 1, 1] = np.inf
    f = np.ones((3, 3, 2, 1), np.float32)
    y = np.empty((1, 3, 3, 2), np.float32)
    fast.conv_forward(x, f, y, 1, 1, 1, 1, 1, 1)
    assert np.isnan(y[..., 0]).all() and np.isposinf(y[..., 1]).all()


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=lambda d: d.name)
def test_half_results_round_once_from_float32(dtype):
    """Sums that a half accumulator would get wrong: 1 + 2**-12 * 4096 terms; also results in the
    subnormal range and past the largest finite value."""
    n = 64
    x = np.ones((1, 1, n, 1), dtype)
    f = np.ones((1, n, 1, 1), dtype)
    f[0, 1:] = 2.0 ** -12
    y = np.empty((1, 1, 1, 1), dtype)
    fast.conv_forward(x, f, y, 1, 1, 1, 1, 0, 0)
    exact = 1 + (n - 1) * 2.0 ** -12
    assert float(y[0, 0, 0, 0]) == float(np.array(exact, np.float32).astype(dtype))
    # a subnormal tie (f16: 4.5 * 2**-24 goes to 4 * 2**-24), and overflow to inf
    tiny = 3 * 2.0 ** -24 if dtype == np.float16 else 2.0 ** -130
    big = float(ml_dtypes.finfo(dtype).max)
    x = np.array([tiny, big, -big]).astype(dtype).reshape(1, 1, 3, 1)
    y = np.empty((1, 1, 3, 1), dtype)
    fast.conv_forward(x, np.full((1, 1, 1, 1), 1.5, dtype), y, 1, 1, 1, 1, 0, 0)
    with np.errstate(over="ignore"):
        expect = (x.astype(np.float32) * np.float32(1.5)).astype(dtype)
    np.testing.assert_array_equal(y.view(np.uint16), expect.view(np.uint16))


def test_empty_outputs_and_inputs():
    x = np.ones((1, 2, 2, 3), np.float32)
    f = np.ones((4, 4, 3, 1), np.float32)  # VALID with a filter larger than the input: no output
    y = np.empty((1, 0, 0, 3), np.float32)
    fast.conv_forward(x, f, y, 1, 1, 1, 1, 0, 0)
    dx = np.full((1, 2, 2, 3), 7, np.float32)
    fast.backprop_input(np.empty((1, 0, 0, 3), np.float32), f, dx, 1, 1, 1, 1, 0, 0)
    assert not dx.any()
    df = np.full((4, 4, 3, 1), 7, np.float32)
    fast.backprop_filter(x, np.empty((1, 0, 0, 3), np.float32), df, 1, 1, 1, 1, 0, 0)
    assert not df.any()
    # stride larger than the filter: dx columns no tap reads are 0
    dy = np.ones((1, 2, 2, 1), np.float32)
    dx = np.full((1, 6, 6, 1), 7, np.float32)
    fast.backprop_input(dy, np.ones((2, 2, 1, 1), np.float32), dx, 3, 3, 1, 1, 0, 0)
    hit = np.array([1, 1, 0, 1, 1, 0])
    np.testing.assert_array_equal(dx[0, :, :, 0], np.outer(hit, hit))


def test_read_only_and_broadcast_inputs():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 5, 6, 3)).astype(np.float32)
    f = rng.standard_normal((3, 2, 3, 2)).astype(np.float32)
    expected = np.empty((2, 5, 6, 6), np.float32)
    fast.conv_forward(x, f, expected, 1, 1, 1, 1, 1, 0)
    x.flags.writeable = False
    f.flags.writeable = False
    y = np.empty_like(expected)
    fast.conv_forward(x, f, y, 1, 1, 1, 1, 1, 0)
    np.testing.assert_array_equal(y, expected)
    ones = np.broadcast_to(np.float32(1), (2, 5, 6, 3))  # zero strides
    fast.conv_forward(ones, f, y, 1, 1, 1, 1, 1, 0)
    check(y, brute_forward(ones, f, 5, 6, (1, 1), (1, 1), (1, 0)),
          brute_forward(ones, np.abs(f), 5, 6, (1, 1), (1, 1), (1, 0)), 6, np.dtype(np.float32))


# --- the half <-> float32 conversions inside the kernels ----------------------------------------

@numba.njit
def _decode(halves, kind):
    out = np.empty(halves.size, np.float32)
    codecs._load_run(halves, 0, 1, halves.size, out, 0, kind)
    return out


@numba.njit
def _encode(values, kind):
    out = np.empty(values.size, np.uint16)
    codecs._store_run(values, 0, values.size, out, 0, 1, kind)
    return out


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=lambda d: d.name)
def test_half_decoding_is_exact_for_every_bit_pattern(dtype):
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    decoded = _decode(bits, element_kinds.HALF_KINDS[dtype])
    expected = bits.view(dtype).astype(np.float32)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(decoded.view(np.uint32)[~nan], expected.view(np.uint32)[~nan])
    assert np.isnan(decoded[nan]).all()


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=lambda d: d.name)
def test_half_encoding_rounds_to_nearest_even(dtype):
    rng = np.random.default_rng(2)
    # random bit patterns, every exponent, ties and near-ties of both kinds, overflow, subnormals
    patterns = [rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32)]
    half_bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    wide = half_bits.view(dtype).astype(np.float32).view(np.uint32)
    step = 1 << (13 if dtype == np.float16 else 16)
    for delta in (-1, 0, 1):  # just below, on and just above each midpoint
        patterns.append(wide + np.uint32(step // 2 + delta))
    values = np.concatenate(patterns).view(np.float32)
    encoded = _encode(values, element_kinds.HALF_KINDS[dtype])
    with np.errstate(over="ignore", invalid="ignore"):
        expected = values.astype(dtype).view(np.uint16)
    nan = np.isnan(values)
    np.testing.assert_array_equal(encoded[~nan], expected[~nan])
    assert np.isnan(encoded[nan].view(dtype).astype(np.float32)).all()


# --- the public functions dispatch here ---------------------------------------------------------

@pytest.mark.parametrize("name", ["conv_forward", "backprop_input", "backprop_filter"])
def test_public_functions_use_these_kernels(monkeypatch, name):
    depthwise = pytest.importorskip("gradops.depthwise")
    calls = []
    entry = getattr(fast, name)
    prepare = entry.prepare
    monkeypatch.setattr(entry, "prepare", lambda *args: calls.append(args) or prepare(*args))
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 6, 5), dtype=np.float32)  # NCHW
    f = rng.standard_normal((3, 3, 3, 2), dtype=np.float32)
    dy = rng.standard_normal((2, 6, 3, 3), dtype=np.float32)
    attrs = dict(strides=[1, 1, 2, 2], padding="SAME", data_format="NCHW", backend="fast")
    if name == "conv_forward":
        result = depthwise.depthwise_conv2d_native(x, f, **attrs)
        exact = brute_forward(x.transpose(0, 2, 3, 1), f, 3, 3, (2, 2), (1, 1), (0, 1)).transpose(0, 3, 1, 2)
    elif name == "backprop_input":
        result = depthwise.depthwise_conv2d_native_backprop_input(np.array(x.shape, np.int32), f, dy, **attrs)
        exact = brute_backprop_input(dy.transpose(0, 2, 3, 1), f, 6, 5, (2, 2), (1, 1), (0, 1)).transpose(0, 3, 1, 2)
    else:
        result = depthwise.depthwise_conv2d_native_backprop_filter(x, np.array(f.shape, np.int32), dy, **attrs)
        exact = brute_backprop_filter(x.transpose(0, 2, 3, 1), dy.transpose(0, 2, 3, 1), 3, 3, (2, 2), (1, 1),
                                      (0, 1))
    assert len(calls) == 1
    np.testing.assert_allclose(result, exact, rtol=1e-5, atol=1e-5)
