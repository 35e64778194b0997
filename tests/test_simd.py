"""The explicit SIMD vectors of the fast backend compute exactly what scalar code computes."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from numba import njit  # noqa: E402

from gradops._fast import simd  # noqa: E402
from gradops._fast.half import HARDWARE_HALF  # noqa: E402
from gradops._fast.target import codegen_target  # noqa: E402


@njit
def _sum_of_products(x, w, out, start, taps, width):
    """out[j] = ((+0 + x[start + j] * w[j]) + x[start + width + j] * w[width + j]) + ..., one
    vector of lanes at a time (``width`` is a multiple of the lane count)."""
    lanes = simd.lanes(out)
    for j in range(0, width, lanes):
        total = simd.zeros(out)
        for t in range(taps):
            total = simd.muladd(total, simd.load(x, start + t * width + j), simd.load(w, t * width + j))
        simd.store(out, j, total)


@pytest.mark.parametrize("dtype, lanes", [(np.float32, 16), (np.float64, 8)])
@pytest.mark.parametrize("start", [0, 1])  # loads need no alignment
def test_vector_lanes_match_scalar_arithmetic(dtype, lanes, start):
    rng = np.random.default_rng(0)
    taps, width = 7, 3 * lanes
    x = rng.standard_normal(start + taps * width).astype(dtype)
    w = rng.standard_normal(taps * width).astype(dtype)
    for t in range(taps):  # the first lanes add only -0 products: +0 + -0 is +0, the scalar sum's start
        x[start + t * width:start + t * width + lanes] = -0.0
    out = np.empty(width, dtype)
    _sum_of_products(x, w, out, start, taps, width)
    expected = np.zeros(width, dtype)
    for t in range(taps):  # a rounded product, then a rounded sum: a fused multiply-add would differ
        expected = expected + x[start + t * width:start + (t + 1) * width] * w[t * width:(t + 1) * width]
    np.testing.assert_array_equal(out, expected)
    assert not np.signbit(out[:lanes]).any() and np.all(out[lanes:] != 0)


@njit
def _weighted_pairs(x, y, weight, zero, out):
    """out[j] = zero + (weight * x[j] + y[j]) with add, mul and splat; x's term is -0.0 where
    ``weight`` is 0 (choose)."""
    lanes = simd.lanes(out)
    for j in range(0, out.size, lanes):
        term = simd.choose(weight == 0, simd.splat(out, -0.0), simd.mul(simd.splat(out, weight), simd.load(x, j)))
        simd.store(out, j, simd.add(simd.splat(out, zero), simd.add(term, simd.load(y, j))))


@pytest.mark.parametrize("dtype, lanes", [(np.float32, 16), (np.float64, 8)])
@pytest.mark.parametrize("zero", [0.0, -0.0])
@pytest.mark.parametrize("weight", [0.1, 0.0])  # 0.1 is not a power of two: the product rounds
def test_add_mul_splat_and_choose_match_scalar_arithmetic(dtype, lanes, zero, weight):
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((2, 4 * lanes)).astype(dtype)
    x[:lanes], y[:lanes] = -0.0, -0.0  # -0 sums: the splatted zero decides the sign
    x[lanes] = np.inf  # chosen away where the weight is 0 (0 * inf would be NaN)
    weight = dtype(weight)
    out = np.empty(4 * lanes, dtype)
    _weighted_pairs(x, y, weight, zero, out)
    term = np.full_like(x, -0.0) if weight == 0 else weight * x
    expected = dtype(zero) + (term + y)
    np.testing.assert_array_equal(out.view(f"u{out.itemsize}"), expected.view(f"u{out.itemsize}"))


@njit
def _first_of_each(count, a, b, out):
    simd.store(out, 0, simd.choose_first(count, simd.load(a, 0), simd.load(b, 0)))


@pytest.mark.parametrize("dtype, lanes", [(np.float32, 16), (np.float64, 8)])
def test_choose_first_takes_count_lanes_from_the_first_vector(dtype, lanes):
    """``choose_first``: lanes below ``count`` from the first vector, the rest from the second,
    NaN and -0 lanes included (a select, not arithmetic)."""
    a = np.arange(1, lanes + 1, dtype=dtype)
    b = -np.arange(1, lanes + 1, dtype=dtype)
    a[1], b[-1] = np.nan, -0.0
    for count in range(lanes + 1):
        out = np.empty(lanes, dtype)
        _first_of_each(count, a, b, out)
        expected = np.concatenate([a[:count], b[count:]])
        np.testing.assert_array_equal(out.view(f"u{out.itemsize}"), expected.view(f"u{out.itemsize}"))


@njit
def _sum_with_prefetch(x, ahead):
    total = 0.0
    for i in range(x.size):
        simd.prefetch(x, min(i + ahead, x.size - 1))
        total += x[i]
    return total


def test_prefetch_is_a_hint_only():
    x = np.arange(1000, dtype=np.float32)
    assert _sum_with_prefetch(x, 16) == float(x.sum(dtype=np.float64))
    assert "llvm.prefetch" in _sum_with_prefetch.inspect_llvm(_sum_with_prefetch.signatures[0])


@njit
def _half_round_trip(bits, out, scale, start, stream):
    """out[j] = float16(float32(bits[start + j]) * scale) for j < out.size, one vector at a time."""
    lanes = simd.lanes(scale)
    w = simd.splat(scale, scale[0])
    for j in range(0, out.size, lanes):
        value = simd.mul(simd.load_half(bits, start + j), w)
        if stream:
            simd.store_stream_half(out, j, value)
        else:
            simd.store_half(out, j, value)


@pytest.mark.skipif(not HARDWARE_HALF, reason="no hardware half conversions")
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("start", [0, 3])  # loads need no alignment
def test_half_vectors_decode_exactly_and_round_to_nearest_even(stream, start):
    """Every float16 pattern decodes to its exact float32 value (NaN stays NaN), and products
    are rounded to float16 as NumPy rounds them, streamed or not."""
    patterns = np.arange(65536 + 16, dtype=np.uint32).astype(np.uint16)  # all patterns, then 16 more
    raw = np.empty(2 * 65536 + 64, np.uint8)
    out = raw[(-raw.ctypes.data) % 64:][:2 * 65536].view(np.uint16)  # 32-byte aligned for streaming
    for scale in (1.0, 0.75, 2.0 ** -3):
        _half_round_trip(patterns, out, np.array([scale], np.float32), start, stream)
        with np.errstate(over="ignore", invalid="ignore"):
            expected = (patterns[start:start + 65536].view(np.float16).astype(np.float32) * np.float32(scale))
        expected = expected.astype(np.float16)
        nan = np.isnan(expected)
        np.testing.assert_array_equal(np.isnan(out.view(np.float16)), nan)
        np.testing.assert_array_equal(out[~nan], expected[~nan].view(np.uint16))


def _store_first_kernel():
    """A new function (compiled at its first call, under the target then in force) that stores
    the first ``count`` lanes of ``values`` at ``out[index:]``."""
    @njit
    def store_first_lanes(values, out, index, count):
        simd.store_first(out, index, simd.load(values, 0), count)
    return store_first_lanes


@pytest.mark.parametrize("avx512", [True, False])
def test_store_first_writes_exactly_count_elements(monkeypatch, avx512):
    """The partial-vector store, as a masked store (AVX-512) and lane by lane (other targets),
    writes the first ``count`` lanes and nothing around them."""
    from dataclasses import replace

    monkeypatch.setattr(simd, "codegen_target", lambda: replace(codegen_target(), avx512=avx512))
    kernel = _store_first_kernel()
    for dtype in (np.float32, np.float64):
        lanes = simd.VECTOR_BYTES // np.dtype(dtype).itemsize
        values = np.arange(1, lanes + 1, dtype=dtype)
        for index, count in ((0, 0), (0, 1), (3, lanes - 1), (5, lanes // 2 + 1)):
            out = np.full(lanes + 8, -1.0, dtype)
            kernel(values, out, index, count)
            expected = np.full(lanes + 8, -1.0, dtype)
            expected[index:index + count] = values[:count]
            np.testing.assert_array_equal(out, expected)
    ir_text = kernel.inspect_llvm(kernel.signatures[0])
    assert ("llvm.masked.store" in ir_text) == avx512
