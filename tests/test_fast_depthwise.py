"""The fast (numba) depthwise kernels against float64 brute force written here (SPEC 5.4).

Tolerances. A kernel sums each output element's n terms t_i in some fixed order, so
|fast - exact| <= n * u * sum|t_i|, with u = 2**-53 (float64) or 2**-24 (float32 and half types,
which accumulate in float32); half results add one final rounding, half an ulp of the result.
``sum|t_i|`` comes from the same brute force run on |x| and |F|.
"""

from __future__ import annotations

import itertools
import sys

import ml_dtypes
import numba
import numpy as np
import pytest

from gradops._fast import depthwise as fast
from gradops._fast import simd

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BF16]
# accumulation unit roundoff, and the relative half-ulp and smallest subnormal of the output type
ACC_EPS = {np.dtype(np.float64): 2.0 ** -53, np.dtype(np.float32): 2.0 ** -24, np.dtype(np.float16): 2.0 ** -24,
           BF16: 2.0 ** -24}
OUT_EPS = {np.dtype(np.float64): 0.0, np.dtype(np.float32): 0.0, np.dtype(np.float16): 2.0 ** -11, BF16: 2.0 ** -8}
OUT_TINY = {np.dtype(np.float64): 0.0, np.dtype(np.float32): 0.0, np.dtype(np.float16): 2.0 ** -24,
            BF16: 2.0 ** -133}


# --- brute force (float64, one tap at a time, padding taps skipped) -----------------------------

def taps(shape_in, shape_out, filt_hw, stride, dil, pad):
    """(ky, kx, iy, ix, oy, ox) for every in-range tap of the forward correlation."""
    (h, w), (oh, ow), (fh, fw) = shape_in, shape_out, filt_hw
    for ky, kx, oy, ox in itertools.product(range(fh), range(fw), range(oh), range(ow)):
        iy, ix = oy * stride[0] - pad[0] + ky * dil[0], ox * stride[1] - pad[1] + kx * dil[1]
        if 0 <= iy < h and 0 <= ix < w:
            yield ky, kx, iy, ix, oy, ox


def brute_forward(x, f, oh, ow, stride, dil, pad):
    x, f = x.astype(np.float64), f.astype(np.float64)
    n, h, w, c = x.shape
    m = f.shape[3]
    y = np.zeros((n, oh, ow, c, m))
    for ky, kx, iy, ix, oy, ox in taps((h, w), (oh, ow), f.shape[:2], stride, dil, pad):
        y[:, oy, ox] += x[:, iy, ix, :, None] * f[ky, kx]
    return y.reshape(n, oh, ow, c * m)


def brute_backprop_input(dy, f, h, w, stride, dil, pad):
    dy, f = dy.astype(np.float64), f.astype(np.float64)
    n, oh, ow, _ = dy.shape
    c, m = f.shape[2:]
    dy = dy.reshape(n, oh, ow, c, m)
    dx = np.zeros((n, h, w, c))
    for ky, kx, iy, ix, oy, ox in taps((h, w), (oh, ow), f.shape[:2], stride, dil, pad):
        dx[:, iy, ix] += (dy[:, oy, ox] * f[ky, kx]).sum(-1)
    return dx


def brute_backprop_filter(x, dy, fh, fw, stride, dil, pad):
    x, dy = x.astype(np.float64), dy.astype(np.float64)
    n, h, w, c = x.shape
    _, oh, ow, k = dy.shape
    dy = dy.reshape(n, oh, ow, c, k // c)
    df = np.zeros((fh, fw, c, k // c))
    for ky, kx, iy, ix, oy, ox in taps((h, w), (oh, ow), (fh, fw), stride, dil, pad):
        df[ky, kx] += (dy[:, oy, ox] * x[:, iy, ix, :, None]).sum(0)
    return df


# --- cases -------------------------------------------------------------------------------------

def out_size(size, k, stride, dil, before, after):
    return (size + before + after - (k - 1) * dil - 1) // stride + 1


def empty_like_layout(shape, dtype, layout):
    if layout == "NCHW":
        n, h, w, c = shape
        return np.empty((n, c, h, w), dtype).transpose(0, 2, 3, 1)
    if layout == "strided":  # every axis padded, W reversed: no unit stride anywhere
        n, h, w, c = shape
        return np.empty((n, h + 1, 2 * w, c + 3), dtype)[:, :h, ::-2, 1:c + 1]
    return np.empty(shape, dtype)


def as_layout(array, layout):
    out = empty_like_layout(array.shape, array.dtype, layout)
    out[...] = array
    return out


def random_case(rng):
    fh, fw = rng.integers(1, 6, 2)
    sh, sw = rng.integers(1, 4, 2)
    dh, dw = rng.integers(1, 3, 2)
    pads = rng.integers(0, 4, 4)
    h, w = rng.integers(1, 12, 2)
    n, c, m = rng.integers(1, 3), rng.integers(1, 6), rng.integers(1, 4)
    oh = out_size(h, fh, sh, dh, pads[0], pads[1])
    ow = out_size(w, fw, sw, dw, pads[2], pads[3])
    if oh < 1 or ow < 1:
        return random_case(rng)
    return dict(n=n, h=h, w=w, c=c, m=m, fh=fh, fw=fw, stride=(sh, sw), dil=(dh, dw), pad=(pads[0], pads[2]),
                oh=oh, ow=ow)


def random_values(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def bits(array):
    return np.ascontiguousarray(array).view(np.uint8)


def bound(exact_abs, terms, dtype):
    """Allowed |fast - exact| for sums of ``terms`` terms with sum|t| = ``exact_abs``."""
    return (terms + 1) * ACC_EPS[dtype] * exact_abs + OUT_EPS[dtype] * exact_abs + OUT_TINY[dtype]


def check(result, exact, exact_abs, terms, dtype):
    assert result.dtype == dtype
    error = np.abs(result.astype(np.float64) - exact)
    allowed = bound(exact_abs, terms, dtype)
    worst = np.unravel_index(np.argmax(error - allowed), error.shape)
    assert np.all(error <= allowed), f"error {error[worst]} > {allowed[worst]} at {worst}"


def run_all(case, dtype, layouts, rng):
    """Run the three kernels on one case and check them against brute force."""
    n, h, w, c, m = case["n"], case["h"], case["w"], case["c"], case["m"]
    fh, fw, oh, ow = case["fh"], case["fw"], case["oh"], case["ow"]
    stride, dil, pad = case["stride"], case["dil"], case["pad"]
    x = random_values(rng, (n, h, w, c), dtype)
    f = random_values(rng, (fh, fw, c, m), dtype)
    dy = random_values(rng, (n, oh, ow, c * m), dtype)
    x_in, dy_in, f_in = as_layout(x, layouts[0]), as_layout(dy, layouts[0]), f
    args = (*stride, *dil, *pad)

    y = empty_like_layout((n, oh, ow, c * m), dtype, layouts[1])
    fast.conv_forward(x_in, f_in, y, *args)
    check(y, brute_forward(x, f, oh, ow, stride, dil, pad),
          brute_forward(np.abs(x), np.abs(f), oh, ow, stride, dil, pad), fh * fw, dtype)

    dx = empty_like_layout((n, h, w, c), dtype, layouts[1])
    fast.backprop_input(dy_in, f_in, dx, *args)
    check(dx, brute_backprop_input(dy, f, h, w, stride, dil, pad),
          brute_backprop_input(np.abs(dy), np.abs(f), h, w, stride, dil, pad), fh * fw * m, dtype)

    df = np.empty((fh, fw, c, m), dtype)
    fast.backprop_filter(x_in, dy_in, df, *args)
    check(df, brute_backprop_filter(x, dy, fh, fw, stride, dil, pad),
          brute_backprop_filter(np.abs(x), np.abs(dy), fh, fw, stride, dil, pad), n * oh * ow, dtype)
    return y, dx, df


# --- tests ---------------------------------------------------------------------------------------

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


@pytest.mark.parametrize("dtype, layout", [(np.dtype(np.float32), "strided"), (np.dtype(np.float16), "NHWC"),
                                           (np.dtype(np.float32), "NHWC")])
@pytest.mark.parametrize("k, dil, pad, w, margins", [(3, 1, (1, 1), 14, (1, 1)), (3, 1, (1, 1), 23, (1, 1)),
                                                     (5, 1, (2, 2), 13, (2, 2)), (3, 2, (2, 2), 12, (2, 2)),
                                                     (3, 1, (0, 2), 11, (2, 0)), (3, 1, (2, 0), 11, (0, 2)),
                                                     (3, 1, (3, 3), 9, (0, 0)), (4, 1, (1, 2), 10, (2, 1))])
def test_staged_rows_with_zero_margins(dtype, layout, k, dil, pad, w, margins):
    """Stride-1 backprop over staged dy rows (strided, half, or float32 rows of 48 channels, wider
    than ``_IN_PLACE_ROW_BYTES``) with zero margins, so each row is
    one segment whose blocks of 8 overlap at the end (``_zero_margins``, ``_taps_rows``): the
    same bits as NCHW's planar kernels, and against brute force. Asymmetric padding gives
    margins on one side only (each margin: the filter's reach less that side's padding); padding
    of 3 on a 3x3 filter needs none."""
    c, h = 48, 6
    ow = out_size(w, k, 1, dil, *pad)
    assert fast._zero_margins(k, dil, pad[0], ow, w) == margins
    case = dict(n=1, h=h, w=w, c=c, m=1, fh=k, fw=k, stride=(1, 1), dil=(dil, dil), pad=(pad[0], pad[0]),
                oh=out_size(h, k, 1, dil, pad[0], pad[0]), ow=ow)
    staged, planar = (run_all(case, dtype, (chosen, chosen), np.random.default_rng(w))
                      for chosen in (layout, "NCHW"))
    np.testing.assert_array_equal(bits(staged[1]), bits(planar[1]))


@pytest.mark.parametrize("c, stride, weight, in_place", [(32, 1, 1.0, True), (48, 1, 1.0, False),
                                                          (48, 2, 1.0, True), (48, 1, np.inf, True)])
def test_which_dy_rows_are_read_in_place(monkeypatch, c, stride, weight, in_place):
    """Backprop input reads contiguous float32 dy rows in place up to ``_IN_PLACE_ROW_BYTES`` per
    position, and stages wider stride-1 rows with zero margins, unless a weight is not finite
    (0 * inf in a margin would be NaN). The results are checked in the tests above; this pins
    the choice."""
    seen = []
    monkeypatch.setattr(fast, "share", lambda kernel, items, moved, *args: seen.append(args[4]))
    oh = -(-9 // stride)
    dy = np.ones((1, oh, oh, c), np.float32)
    f = np.full((3, 3, c, 1), weight, np.float32)
    fast.backprop_input(dy, f, np.empty((1, 9, 9, c), np.float32), stride, stride, 1, 1, 1, 1)
    assert seen == [in_place]


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


def _before_guard_page(stack, shape, dtype):
    """A C-contiguous array whose last byte is the last one before a page that may not be read or
    written (``mprotect(PROT_NONE)``): touching past its end faults."""
    import ctypes
    import mmap

    page = mmap.PAGESIZE
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    pages = -(-nbytes // page) + 1
    region = mmap.mmap(-1, (pages + 1) * page)
    stack.callback(region.close)
    mprotect = ctypes.CDLL(None).mprotect
    guard = ctypes.c_void_p(np.frombuffer(region, np.uint8).ctypes.data + pages * page)
    assert mprotect(guard, page, 0) == 0  # PROT_NONE
    stack.callback(mprotect, guard, page, mmap.PROT_READ | mmap.PROT_WRITE)
    return np.frombuffer(region, dtype, int(np.prod(shape)), pages * page - nbytes).reshape(shape)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mprotect through libc")
@pytest.mark.parametrize("dtype, c", [(np.dtype(np.float32), 20), (np.dtype(np.float32), 7),
                                      (np.dtype(np.float64), 13)], ids=["float32-20", "float32-7", "float64-13"])
def test_channel_tails_stay_inside_the_arrays(dtype, c):
    """The channels past the last whole vector (C*M = 20: 4 of 16 lanes) go through masked vector
    loads and stores: with dy, x and dx read and written in place and ending right before a page
    that faults, the last position's tail touches nothing past the end, and the results match
    brute force."""
    import contextlib

    rng = np.random.default_rng(c)
    f = random_values(rng, (3, 3, c, 1), dtype)
    with contextlib.ExitStack() as stack:
        dy = _before_guard_page(stack, (1, 5, 6, c), dtype)
        dy[...] = random_values(rng, dy.shape, dtype)
        dx = _before_guard_page(stack, (1, 5, 6, c), dtype)
        fast.backprop_input(dy, f, dx, 1, 1, 1, 1, 1, 1)
        check(dx, brute_backprop_input(dy, f, 5, 6, (1, 1), (1, 1), (1, 1)),
              brute_backprop_input(np.abs(dy), np.abs(f), 5, 6, (1, 1), (1, 1), (1, 1)), 9, dtype)
        y = _before_guard_page(stack, (1, 5, 6, c), dtype)
        fast.conv_forward(dx, f, y, 1, 1, 1, 1, 1, 1)
        check(y, brute_forward(dx, f, 5, 6, (1, 1), (1, 1), (1, 1)),
              brute_forward(np.abs(dx), np.abs(f), 5, 6, (1, 1), (1, 1), (1, 1)), 9, dtype)
        del dy, dx, y


@pytest.mark.parametrize("stride, n, c", [(1, 1, 256), (2, 1, 256), (1, 4, 32)])
def test_streamed_dx_rows(stride, n, c):
    """A dx of 16 (8) MiB is written with non-temporal stores when every position starts on a
    64-byte line, straight from the registers: whole filter rows (``_taps_rows``; C = 256, staged
    rows) and 9 taps with weights in registers (``_taps9_2x2``; C = 32, rows read in place). A
    strided dx that does not start on a line goes row by row through a row buffer, rows starting
    at any element offset (the first and last partial lines of every row through plain stores);
    with stride 1, plain stores. Checked against brute force, the same bits every way, and
    nothing around the view written."""
    rng = np.random.default_rng(stride)
    h, w = 128, 128
    oh = -(-h // stride)  # SAME (D1 and D2 geometry): pad before = half the total, rounded down
    pad = ((oh - 1) * stride + 3 - h) // 2
    dy = random_values(rng, (n, oh, oh, c), np.float32)
    f = random_values(rng, (3, 3, c, 1), np.float32)
    pad = (pad, pad)
    exact = brute_backprop_input(dy, f, h, w, (stride, stride), (1, 1), pad)
    exact_abs = brute_backprop_input(np.abs(dy), np.abs(f), h, w, (stride, stride), (1, 1), pad)
    size = n * h * w * c
    assert size * 4 >= simd.STREAMING_THRESHOLD_BYTES
    results, on_lines = [], []
    for shift in (0, 3, None):
        buffer = np.full(size + 32, 7.0, np.float32)
        if shift is None:  # the first element on a 64-byte line
            shift = (-buffer.ctypes.data) % 64 // 4
        dx = buffer[shift:shift + size].reshape(n, h, w, c)
        fast.backprop_input(dy, f, dx, stride, stride, 1, 1, *pad)
        check(dx, exact, exact_abs, 9, np.dtype(np.float32))
        assert (buffer[:shift] == 7).all() and (buffer[shift + size:] == 7).all()
        results.append(dx.copy())
        on_lines.append(fast._on_lines(*fast._kernel_view(dx, False), c))
    assert on_lines[1:] == [False, True]
    for other in results[1:]:
        np.testing.assert_array_equal(bits(other), bits(results[0]))


def test_streamed_float16_dx_rows(monkeypatch):
    """A float16 dx of 8 MiB with rows of one run is rounded from the row buffer straight into
    non-temporal stores (``_stream_row``), rows starting at any element offset (C = 33: no
    row starts on a line; the partial lines at both ends take plain stores). The same bits as the
    plain stores (streaming switched off), checked against brute force, nothing around the view
    written."""
    rng = np.random.default_rng(16)
    n, h, w, c = 2, 256, 250, 33
    dy = random_values(rng, (n, h, w, c), np.float16)
    f = random_values(rng, (3, 3, c, 1), np.float16)
    exact = brute_backprop_input(dy, f, h, w, (1, 1), (1, 1), (1, 1))
    exact_abs = brute_backprop_input(np.abs(dy), np.abs(f), h, w, (1, 1), (1, 1), (1, 1))
    size = n * h * w * c
    assert size * 2 >= simd.STREAMING_THRESHOLD_BYTES
    results = []
    for shift, threshold in ((0, simd.STREAMING_THRESHOLD_BYTES), (5, simd.STREAMING_THRESHOLD_BYTES),
                             (5, 1 << 62)):
        monkeypatch.setattr(simd, "STREAMING_THRESHOLD_BYTES", threshold)
        buffer = np.full(size + 16, 7.0, np.float16)
        dx = buffer[shift:shift + size].reshape(n, h, w, c)
        streamed = fast._streams_rows(dx, fast._kernel_view(dx, False)[2], c, 1, 1, False)
        assert streamed == (fast.half.HARDWARE_HALF and threshold < size * 2)
        fast.backprop_input(dy, f, dx, 1, 1, 1, 1, 1, 1)
        check(dx, exact, exact_abs, 9, np.dtype(np.float16))
        assert (buffer[:shift] == 7).all() and (buffer[shift + size:] == 7).all()
        results.append(dx.copy())
    for other in results[1:]:
        np.testing.assert_array_equal(bits(other), bits(results[0]))


def _emulate_stride1_adjoint(dy, f, h, w, pad):
    """Backprop input with stride 1 in the fast backend's documented order, bit for bit: for each m,
    ``acc + dy * weight`` (two roundings) over taps (ky, kx) ascending from +0, then the M sums
    added in m order. Taps in the padding add dy = 0 products, which leave a sum from +0 unchanged."""
    fh, fw, c, mult = f.shape
    padded = np.zeros((dy.shape[0], h + 2 * fh, w + 2 * fw, c * mult), dy.dtype)
    padded[:, fh - 1:fh - 1 + dy.shape[1], fw - 1:fw - 1 + dy.shape[2]] = dy
    sums = [np.zeros((dy.shape[0], h, w, c), dy.dtype) for _ in range(mult)]
    for ky, kx in itertools.product(range(fh), range(fw)):
        y0, x0 = pad[0] - ky + fh - 1, pad[1] - kx + fw - 1  # dx (iy, ix) reads dy (iy + pt - ky, ix + pl - kx)
        for m in range(mult):
            sums[m] = sums[m] + padded[:, y0:y0 + h, x0:x0 + w, m::mult] * f[ky, kx, :, m]
    total = sums[0]
    for m in range(1, mult):
        total = total + sums[m]
    return total


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pair_sums_dx_rows(monkeypatch, dtype):
    """M = 2 with dx rows of one run: the two sums of each element are added in vectors as the row
    is written (``_pair_sums_run``), with non-temporal stores when dx is beyond the cache
    (threshold lowered here to stream a small dx; raised, plain stores), rows starting at any
    element offset (C = 37: the partial lines at both ends of a row take scalar stores). Bit for
    bit the documented order (``_emulate_stride1_adjoint``), nothing around the view written."""
    rng = np.random.default_rng(21)
    n, h, w, c = 2, 9, 30, 37
    dy = random_values(rng, (n, h, w, 2 * c), dtype)
    f = random_values(rng, (5, 5, c, 2), dtype)
    expected = _emulate_stride1_adjoint(dy, f, h, w, (2, 2))
    size = n * h * w * c
    for shift, threshold in ((0, 0), (5, 0), (5, 1 << 62)):
        monkeypatch.setattr(simd, "STREAMING_THRESHOLD_BYTES", threshold)
        buffer = np.full(size + 16, 7.0, dtype)
        dx = buffer[shift:shift + size].reshape(n, h, w, c)
        assert fast._streams_rows(dx, fast._kernel_view(dx, False)[2], c, 2, 1, False) == (threshold == 0)
        fast.backprop_input(dy, f, dx, 1, 1, 1, 1, 2, 2)
        np.testing.assert_array_equal(bits(dx), bits(expected))
        assert (buffer[:shift] == 7).all() and (buffer[shift + size:] == 7).all()


@pytest.mark.parametrize("seed, dtype, h, w, c, k, mult", [(22, np.float32, 128, 128, 128, 5, 2),
                                                          (23, np.float16, 256, 1024, 32, 3, 1)],
                         ids=["D4-float32-5x5-M2", "D7-float16-3x3"])
def test_prefetched_staged_rows(seed, dtype, h, w, c, k, mult, on_each_thread_count):
    """The layouts of D4 and D7 at a size where every fast path of theirs runs: a dy of 16 MiB of
    staged rows (float16 ones converted to float32), the next row requested a share per block of
    ``_taps_rows`` (5-tap filter rows) or per part of ``_taps9_rows`` (3x3, C = 32: the weights in
    registers), dx streamed: M = 2 sums added as they are written, or float16 rows rounded by
    ``_stream_row``. Bit for bit the documented order (float32 sums for float16, rounded once), on
    1 and 2 threads."""
    rng = np.random.default_rng(seed)
    dy = random_values(rng, (1, h, w, c * mult), dtype)
    f = random_values(rng, (k, k, c, mult), dtype)
    assert dy.nbytes >= fast._PREFETCH_STAGED_BYTES and dy.nbytes // mult >= simd.STREAMING_THRESHOLD_BYTES
    pad = (k // 2, k // 2)
    expected = _emulate_stride1_adjoint(dy.astype(np.float32), f.astype(np.float32), h, w, pad).astype(dtype)

    def run():
        dx = np.empty((1, h, w, c), dtype)
        fast.backprop_input(dy, f, dx, 1, 1, 1, 1, *pad)
        return dx
    for dx in on_each_thread_count(run):
        np.testing.assert_array_equal(bits(dx), bits(expected))


def test_unaligned_output_view():
    """An output whose strides are not multiples of its item size (a packed record field)."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 4, 5, 2)).astype(np.float32)
    f = rng.standard_normal((3, 3, 2, 1)).astype(np.float32)
    record = np.zeros((1, 4, 5, 2), dtype=[("pad", "u1"), ("value", "<f4")])
    y = record["value"]
    fast.conv_forward(x, f, y, 1, 1, 1, 1, 1, 1)
    expected = np.empty_like(x)
    fast.conv_forward(x, f, expected, 1, 1, 1, 1, 1, 1)
    np.testing.assert_array_equal(y, expected)


# --- the half <-> float32 conversions inside the kernels ----------------------------------------

@numba.njit
def _decode(halves, kind):
    out = np.empty(halves.size, np.float32)
    fast._load_run(halves, 0, 1, halves.size, out, 0, kind)
    return out


@numba.njit
def _encode(values, kind):
    out = np.empty(values.size, np.uint16)
    fast._store_run(values, 0, values.size, out, 0, 1, kind)
    return out


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=lambda d: d.name)
def test_half_decoding_is_exact_for_every_bit_pattern(dtype):
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    decoded = _decode(bits, fast._HALF_KINDS[dtype])
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
    encoded = _encode(values, fast._HALF_KINDS[dtype])
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
    kernel = getattr(fast, name)
    monkeypatch.setattr(fast, name, lambda *args: calls.append(args) or kernel(*args))
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
