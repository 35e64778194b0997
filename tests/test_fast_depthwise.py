"""The fast (numba) depthwise kernels against float64 brute force (SPEC 5.4): random cases, every
layout, the row shapes that select each SIMD path, thread counts. Brute force, cases and
tolerances: tests/fast_depthwise_cases.py."""

from __future__ import annotations

import numpy as np
import pytest

from gradops._fast import depthwise as fast

from fast_depthwise_cases import (BF16, DTYPES, bits, brute_backprop_filter, brute_forward, check, out_size,
                                  random_case, random_values, run_all)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_random_cases_against_brute_force(dtype):
    rng = np.random.default_rng(list(map(ord, dtype.name)))
    for _ in range(15):
        case = random_case(rng)
        layouts = [("NHWC", "NHWC"), ("NCHW", "NCHW"), ("strided", "strided"), ("NHWC", "NCHW"),
                   ("NCHW", "strided")][rng.integers(5)]
        run_all(case, dtype, layouts, rng)


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16)], ids=lambda d: d.name)
@pytest.mark.parametrize("stride", [(2, 1), (1, 1)])
def test_layouts_give_identical_bits(dtype, stride):
    """One summation order whatever the layout: NHWC, NCHW (row by row for stride > 1, in blocks of
    rows for stride 1) and strided views agree bit for bit."""
    oh = out_size(9, 3, stride[0], 1, 1, 0)
    case = dict(n=2, h=9, w=10, c=4, m=2, fh=3, fw=3, stride=stride, dil=(1, 2), pad=(1, 2), oh=oh, ow=8)
    results = [run_all(case, dtype, (layout, layout), np.random.default_rng(5))
               for layout in ("NHWC", "NCHW", "strided")]
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(bits(a), bits(b))


@pytest.mark.parametrize("k, dil, c, w", [(3, 1, 10, 21), (5, 1, 10, 21), (3, 2, 10, 21), (5, 1, 64, 21),
                                          (3, 1, 10, 14), (3, 1, 64, 15), (3, 1, 64, 7), (3, 1, 10, 28),
                                          (3, 1, 16, 14), (3, 1, 32, 15), (3, 2, 16, 14)])
def test_simd_rows_match_planar_bits(k, dil, c, w):
    """Channels-last rows wide enough for the SIMD blocks (8 positions x 16 lanes, filter rows of
    3 or 5 sharing their loads, a masked channel tail of 4; C*M = 128 staged at a padded pitch;
    interiors of 12 and 13 positions, whose 3-tap rows end with a block of 4; rows of 7, 14, 21
    and 28 positions, whose 3-tap rows go in blocks of 7; 3x3 filters over C*M = 32 and 64, whose
    9 taps keep their weights in registers: filter rows sharing their loads (``_taps9_rows``; dy
    rows of 32 read in place, with the prefetch) or, dilated, not (``_taps9_2x2``)) against the
    planar (NCHW) kernels, written independently: one summation order, so the same bits."""
    case = dict(n=1, h=12, w=w, c=c, m=2, fh=k, fw=k, stride=(1, 1), dil=(dil, dil),
                pad=((k - 1) * dil // 2, (k - 1) * dil // 2), oh=12, ow=w)
    nhwc, nchw = (run_all(case, np.dtype(np.float32), (layout, layout), np.random.default_rng(k + dil))
                  for layout in ("NHWC", "NCHW"))
    for a, b in zip(nhwc, nchw):
        np.testing.assert_array_equal(bits(a), bits(b))


def test_suite_shapes_scaled_down():
    """The SUITE.md D-workload geometries (3x3 SAME, stride 2 with the odd pad after, 5x5 with
    multiplier 2, dilation 2, D3's 512 channels and a multiplier-2 row of 128 channels, which take
    the wide-row path) on small images, where the interior/edge split is exercised."""
    rng = np.random.default_rng(11)
    for c, m, k, stride, dil in [(32, 1, 3, 1, 1), (64, 1, 3, 2, 1), (24, 2, 5, 1, 1), (32, 1, 3, 1, 2),
                                 (512, 1, 3, 1, 1), (64, 2, 3, 1, 1), (20, 2, 5, 1, 1), (19, 1, 3, 1, 1),
                                 (17, 1, 3, 2, 1)]:
        h = w = 13
        oh = (h + stride - 1) // stride
        need = max(0, (oh - 1) * stride + (k - 1) * dil + 1 - h)
        case = dict(n=2, h=h, w=w, c=c, m=m, fh=k, fw=k, stride=(stride, stride), dil=(dil, dil),
                    pad=(need // 2, need // 2), oh=oh, ow=oh)
        for layout in ("NHWC", "NCHW"):
            run_all(case, np.dtype(np.float32), (layout, layout), rng)


@pytest.mark.parametrize("dtype, c, m", [(np.dtype(np.float64), 32, 2), (np.dtype(np.float16), 128, 2),
                                         (BF16, 256, 1)], ids=["float64", "float16", "bfloat16"])
def test_padded_pitch_rows_other_types(dtype, c, m):
    """Rows whose C*M accumulators span a multiple of 512 bytes (64 float64, 128 float32) are
    staged at a padded pitch (``_pitch``); the other accumulator and storage types against brute
    force, with 3x3 and 5x5 filter rows and the edges."""
    rng = np.random.default_rng(c)
    for k in (3, 5):
        case = dict(n=1, h=9, w=13, c=c, m=m, fh=k, fw=k, stride=(1, 1), dil=(1, 1),
                    pad=(k // 2, k // 2), oh=9, ow=13)
        for layout in ("NHWC", "strided"):
            run_all(case, dtype, (layout, layout), rng)


@pytest.mark.parametrize("dtype, c", [(np.dtype(np.float32), 32), (np.dtype(np.float32), 64),
                                      (np.dtype(np.float64), 16), (np.dtype(np.float64), 32),
                                      (np.dtype(np.float16), 32), (BF16, 64)],
                         ids=["float32-32", "float32-64", "float64-16", "float64-32", "float16-32", "bfloat16-64"])
def test_nine_taps_with_weights_in_registers(dtype, c):
    """Rows of 9-tap segments whose C*M accumulators span at most 256 bytes in pairs of vectors
    (``_taps9_2x2``): even and odd interior widths (w - 2 positions), dilation 2, forward and
    both gradients, against brute force."""
    rng = np.random.default_rng(c)
    for w, dil in ((14, 1), (13, 1), (15, 2)):
        case = dict(n=1, h=7, w=w, c=c, m=1, fh=3, fw=3, stride=(1, 1), dil=(dil, dil), pad=(dil, dil), oh=7, ow=w)
        for layout in ("NHWC", "strided"):
            run_all(case, dtype, (layout, layout), rng)


def test_thread_count_does_not_change_bits(on_each_thread_count):
    case = dict(n=3, h=20, w=17, c=8, m=2, fh=3, fw=4, stride=(1, 2), dil=(2, 1), pad=(2, 1), oh=16, ow=8)
    results = on_each_thread_count(
        lambda: run_all(case, np.dtype(np.float32), ("NHWC", "NHWC"), np.random.default_rng(3)))
    for a, b in zip(*results):
        np.testing.assert_array_equal(bits(a), bits(b))


def _nhwc_view(array: np.ndarray, layout: str) -> np.ndarray:
    """An NHWC-indexed view of ``array`` [N, H, W, C] stored NHWC, NCHW, or NCHW inside an array
    twice as wide (W stride 2: positions not unit-stride, harmless only where W = 1)."""
    if layout == "NHWC":
        return array.copy()
    if layout == "NCHW":
        return np.ascontiguousarray(array.transpose(0, 3, 1, 2)).transpose(0, 2, 3, 1)
    wide = np.zeros(array.shape[:2] + (2 * array.shape[2], array.shape[3]), array.dtype)
    wide[:, :, ::2] = array
    return np.ascontiguousarray(wide.transpose(0, 3, 1, 2))[..., ::2].transpose(0, 2, 3, 1)


@pytest.mark.parametrize("x_layout, dy_layout", [("NHWC", "NCHW"), ("NCHW", "NHWC"), ("NCHW-wide", "NCHW"),
                                                 ("NCHW-wide", "NHWC")])
def test_one_column_inputs_in_mixed_layouts(x_layout, dy_layout):
    """W = 1 rows are read in place whatever their W stride (one position): the padding's column
    shift must then count positions, not strides. An NHWC x with an NCHW dy (gradops.torch found
    it) and an NCHW x whose W stride is 2, padded by 1, against brute force."""
    rng = np.random.default_rng(3)
    n, h, w, c, pad = 2, 5, 1, 3, (1, 1)
    x = random_values(rng, (n, h, w, c), np.dtype(np.float32))
    f = random_values(rng, (3, 3, c, 1), np.dtype(np.float32))
    dy = random_values(rng, (n, h, w + 2, c), np.dtype(np.float32))
    args = (1, 1, 1, 1, *pad)
    x_in, dy_in = _nhwc_view(x, x_layout), _nhwc_view(dy, dy_layout)
    df = np.empty((3, 3, c, 1), np.float32)
    fast.backprop_filter(x_in, dy_in, df, *args)
    check(df, brute_backprop_filter(x, dy, 3, 3, (1, 1), (1, 1), pad),
          brute_backprop_filter(np.abs(x), np.abs(dy), 3, 3, (1, 1), (1, 1), pad), n * h * (w + 2), np.dtype(np.float32))
    y = np.empty((n, h, w + 2, c), np.float32)
    fast.conv_forward(x_in, f, y, *args)
    check(y, brute_forward(x, f, h, w + 2, (1, 1), (1, 1), pad),
          brute_forward(np.abs(x), np.abs(f), h, w + 2, (1, 1), (1, 1), pad), 9, np.dtype(np.float32))


def test_backprop_filter_reduces_many_rows():
    """More rows than reduction chunks, and more columns than lanes."""
    rng = np.random.default_rng(4)
    case = dict(n=5, h=30, w=40, c=3, m=1, fh=3, fw=3, stride=(1, 1), dil=(1, 1), pad=(1, 1), oh=30, ow=40)
    for layout in ("NHWC", "NCHW"):
        run_all(case, np.dtype(np.float32), (layout, layout), rng)
