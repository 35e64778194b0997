"""The fast resample gradient's summation orders, bit for bit, and its streamed outputs (SPEC 3.7).

Each order test emulates, in float32 with NumPy and from the tap tables alone, the order the
package docstring of ``gradops._fast.resample`` documents (row sums, then the column slots; pixel
sums for nearest; columns first for float16 linear 2x), and compares bits. Outputs written with
non-temporal stores must hold the bits of the plain stores and match the dense reference of
fast_resample_references.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from fast_resample_references import (apply_axes, assert_close, dense, nhwc, random_data, suite_taps,
                                      taps_per_output)

from gradops._fast import resample as fast_resample
from gradops._fast import simd
from gradops._fast.half import HARDWARE_HALF
from gradops._fast.resample import resample_backward
from gradops._fast.resample.plan import IN_PLACE, STAGED
from gradops._resample_plan import transpose_taps


def _sum_in_groups(terms: list[np.ndarray]) -> np.ndarray:
    """The terms (float32) in groups of four, then two, then one, each group summed as
    ``(t0 + t1) + (t2 + t3)``; the first group added to +0, the next ones to the running sum."""
    total = None
    while terms:
        size = 4 if len(terms) >= 4 else (2 if len(terms) >= 2 else 1)
        group, terms = terms[:size], terms[size:]
        part = group[0] if size == 1 else (group[0] + group[1] if size == 2
                                           else (group[0] + group[1]) + (group[2] + group[3]))
        total = np.float32(0) + part if total is None else total + part
    return total


def _kernel_order_gradient(dy: np.ndarray, row_taps, column_taps, n_rows: int, n_columns: int) -> np.ndarray:
    """The NHWC gradient of a resampling of H and W, in float32 and in the order the package
    docstring gives: per dx row, the dy rows in groups of four (then two, one) as
    ``(p0 + p1) + (p2 + p3)``, the first group added to +0, the next ones to the running sum;
    then per dx column ``+0 + ((q0 + q1) + (q2 + q3))`` over a table of 4 slots, the unused
    ones reading -0.0. ``p`` and ``q`` are ``w * value``, or the value itself when every weight
    of the problem is 1 (nearest). Written from the tap tables alone, with NumPy.

    Except nearest, whose pixels are summed straight from the dy rows: ``+0 + (s0 + s1 + ...)``
    over the dy rows in order, ``s = -0 + (v0 + v1 + ...)`` over a row's dy columns in order."""
    f32 = np.float32
    row_ptr, row_src, row_w = transpose_taps(*row_taps, n_rows)
    col_ptr, col_src, col_w = transpose_taps(*column_taps, n_columns)
    weighted = not (np.all(row_w == 1) and np.all(col_w == 1))
    assert np.diff(col_ptr).max() in (3, 4)  # the 4-slot table
    batch, _, _, channels = dy.shape
    dx = np.empty((batch, n_rows, n_columns, channels), f32)
    if not weighted:
        for i in range(n_rows):
            for j in range(n_columns):
                total = np.zeros((batch, channels), f32)
                for r in row_src[row_ptr[i]:row_ptr[i + 1]]:
                    row = np.full((batch, channels), -0.0, f32)
                    for c in col_src[col_ptr[j]:col_ptr[j + 1]]:
                        row = row + dy[:, r, c]
                    total = total + row
                dx[:, i, j] = total
        return dx
    for i in range(n_rows):
        terms = [(row_w[k] * dy[:, row_src[k]]) if weighted else dy[:, row_src[k]]
                 for k in range(row_ptr[i], row_ptr[i + 1])]
        row_sum = _sum_in_groups(terms)
        for j in range(n_columns):
            picks = [(col_w[k] * row_sum[:, col_src[k]]) if weighted else row_sum[:, col_src[k]]
                     for k in range(col_ptr[j], col_ptr[j + 1])]
            picks += [np.full((batch, channels), -0.0, f32)] * (4 - len(picks))
            dx[:, i, j] = f32(0) + ((picks[0] + picks[1]) + (picks[2] + picks[3]))
    return dx


@pytest.mark.parametrize("mode,shape_in,shape_out", [
    ("nearest", (20, 20), (46, 54)),  # P1's ratios: 2-3 dy rows and 2-3 dy columns per dx pixel
    ("linear", (16, 16), (32, 32)),   # L1's 2x: 4 weighted rows and columns
])
@pytest.mark.parametrize("channels", [37, 16])  # two whole vectors and 5 channels more; one vector
def test_channels_last_pixels_are_summed_in_the_documented_order(mode, shape_in, shape_out, channels):
    """Bit for bit against the float32 emulation above: the vectors of whole channels and the
    channels past them give the same sums in the same order."""
    rng = np.random.default_rng(11)
    taps = suite_taps((2, channels) + shape_in, (2, channels) + shape_out, mode, "half")
    dy = rng.standard_normal((2,) + shape_out + (channels,)).astype(np.float32)
    out = np.full((2,) + shape_in + (channels,), np.nan, np.float32)
    resample_backward(dy.transpose(0, 3, 1, 2), out.transpose(0, 3, 1, 2), taps)
    expected = _kernel_order_gradient(dy, taps[2], taps[3], *shape_in)
    np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))


def _columns_first_gradient(dy: np.ndarray, row_taps, column_taps, n_rows: int, n_columns: int) -> np.ndarray:
    """The float16 NHWC gradient of a linear 2x resampling of H and W in the order of the package
    docstring's columns-first path, in float32 with NumPy: per dy row and dx column
    ``(q0 + q1) + (q2 + q3)`` over the 4-slot table (``q = w * value``, -0.0 for unused slots);
    per dx row, over its dy rows ``p = w * cc``: ``+0 + ((p0 + p1) + (p2 + p3))`` for four rows,
    otherwise groups of two (then one) as in the row-first order; rounded once to float16."""
    f32 = np.float32
    row_ptr, row_src, row_w = transpose_taps(*row_taps, n_rows)
    col_ptr, col_src, col_w = transpose_taps(*column_taps, n_columns)
    data = dy.astype(f32)
    batch, _, _, channels = dy.shape
    cc = np.empty((batch, dy.shape[1], n_columns, channels), f32)
    for j in range(n_columns):
        picks = [col_w[k] * data[:, :, col_src[k]] for k in range(col_ptr[j], col_ptr[j + 1])]
        picks += [np.full(data[:, :, 0].shape, -0.0, f32)] * (4 - len(picks))
        cc[:, :, j] = (picks[0] + picks[1]) + (picks[2] + picks[3])
    dx = np.empty((batch, n_rows, n_columns, channels), f32)
    for i in range(n_rows):
        terms = [row_w[k] * cc[:, row_src[k]] for k in range(row_ptr[i], row_ptr[i + 1])]
        dx[:, i] = _sum_in_groups(terms)
    return dx.astype(np.float16)


@pytest.mark.skipif(not HARDWARE_HALF, reason="the columns-first path needs hardware half conversions")
@pytest.mark.parametrize("channels", [64, 112, 16])  # one pass of 4 vectors; 4 + 3 single ones; one
def test_float16_linear_2x_gradients_sum_columns_first(channels, on_each_thread_count):
    """Bit for bit against the emulation above (float16 NHWC, linear 2x, 20 dx columns: an affine
    span and its clamped edges), with infinities and NaN among the data, on 1 and 2 threads (so
    the ring of column sums restarts at chunk boundaries). The row-first order gives other bits."""
    rng = np.random.default_rng(17)
    shape_in, shape_out = (3, channels, 9, 20), (3, channels, 18, 40)
    taps = suite_taps(shape_in, shape_out, "linear", "half")
    # Magnitudes spread over 2**-12 .. 2**12, so that float32 sums round and orders differ.
    dy = (rng.standard_normal((3, 18, 40, channels)) * 2.0 ** rng.integers(-12, 13, (3, 18, 40, channels)))
    dy = dy.astype(np.float16)
    dy[0, 5, 7, 3], dy[1, 0, 39, 0], dy[2, 17, 20, 5] = np.inf, -np.inf, np.nan
    expected = _columns_first_gradient(dy, taps[2], taps[3], *shape_in[2:])

    def run():
        out = np.full((3,) + shape_in[2:] + (channels,), np.nan, np.float16)
        resample_backward(dy.transpose(0, 3, 1, 2), out.transpose(0, 3, 1, 2), taps)
        return out

    nan = np.isnan(expected)
    for out in on_each_thread_count(run):
        np.testing.assert_array_equal(np.isnan(out), nan)
        np.testing.assert_array_equal(out[~nan].view(np.uint16), expected[~nan].view(np.uint16))
    row_first = _kernel_order_gradient(dy.astype(np.float32), taps[2], taps[3], *shape_in[2:]).astype(np.float16)
    assert not np.array_equal(row_first[~nan].view(np.uint16), expected[~nan].view(np.uint16))


def _nans_past_a_line(shape: tuple[int, ...], offset: int, dtype=np.float32) -> np.ndarray:
    """An NHWC array of NaN whose data start ``offset`` bytes past a 64-byte line, viewed as
    NCHW."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    array = raw[start:start + nbytes].view(dtype).reshape(shape)
    array[...] = np.nan
    return array.transpose(0, 3, 1, 2)


@pytest.mark.parametrize("mode,grid,shape_in,shape_out", [
    ("nearest", "asym", (8, 8), (16, 16)),    # 2 rows x 2 columns read directly (N2)
    ("linear", "half", (16, 16), (8, 8)),     # 1 weighted row x 1 column read directly (L2)
    ("nearest", "half", (20, 20), (46, 54)),  # 4-slot pixels from the row sum (P1)
    ("linear", "half", (8, 8), (16, 16)),     # weighted 4-slot pixels (L1)
])
@pytest.mark.parametrize("dtype,channels", [(np.float32, 16), (np.float32, 48), (np.float16, 32), (np.float16, 96)])
def test_streamed_outputs_have_the_same_bits(monkeypatch, mode, grid, shape_in, shape_out, dtype, channels):
    """Outputs written with non-temporal stores (large NHWC outputs of whole 64-byte lines per
    pixel; the size threshold lowered here) hold the bits of the plain stores, and match the
    reference. float16 streams its four-slot pixels only; the flag must not change the others.
    float32 pixels 16 bytes off the lines (NumPy's own buffers) are summed into a staged row and
    streamed from there, the ends of each row plain: the same bits."""
    flags = []

    def share(*args):
        flags.append(args[-1])
        return real_share(*args)
    real_share = fast_resample.share
    monkeypatch.setattr(fast_resample, "share", share)
    rng = np.random.default_rng(13)
    taps = suite_taps((2, channels) + shape_in, (2, channels) + shape_out, mode, grid)
    dy = nhwc(random_data(rng, (2, channels) + shape_out, dtype))
    nhwc_shape = (2,) + shape_in + (channels,)
    plain = _nans_past_a_line(nhwc_shape, 0, dtype)
    resample_backward(dy, plain, taps)
    monkeypatch.setattr(simd, "STREAMING_THRESHOLD_BYTES", 0)
    streamed = _nans_past_a_line(nhwc_shape, 0, dtype)
    resample_backward(dy, streamed, taps)
    unaligned = _nans_past_a_line(nhwc_shape, 4, dtype)  # NumPy's own buffers start 16 bytes past a line
    resample_backward(dy, unaligned, taps)
    staged = STAGED if dtype == np.float32 else 0  # float32 pixels off the lines: through a staged row
    assert flags == [0, IN_PLACE if HARDWARE_HALF or dtype == np.float32 else 0, staged]
    bits = np.uint32 if dtype == np.float32 else np.uint16
    np.testing.assert_array_equal(streamed.view(bits), plain.view(bits))
    np.testing.assert_array_equal(unaligned.view(bits), plain.view(bits))
    transposed = [dense(index, weight, n).T for (index, weight), n in zip(taps, (2, channels) + shape_in)]
    abs_sum = apply_axes([np.abs(m) for m in transposed], np.abs(dy.astype(np.float64)))
    assert_close(streamed, apply_axes(transposed, dy.astype(np.float64)), abs_sum, taps_per_output(transposed))
