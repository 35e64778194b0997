"""How the fast depthwise kernels read and write rows (SPEC 5.4): dy rows staged with zero margins
or read in place, masked channel tails at the end of an array, dx rows streamed with
non-temporal stores, prefetched staged rows; each against brute force or the documented
summation order (``emulate_stride1_adjoint``), bit for bit where promised."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from gradops._fast import depthwise as fast
from gradops._fast import half, simd
from gradops._fast.depthwise import call_plans, plan, selection
from gradops._fast.target import codegen_target

from fast_depthwise_cases import (bits, brute_backprop_input, brute_forward, check, emulate_stride1_adjoint,
                                  emulate_stride1_forward, out_size, random_values, run_all)


@pytest.mark.parametrize("dtype, layout", [(np.dtype(np.float32), "strided"), (np.dtype(np.float16), "NHWC"),
                                           (np.dtype(np.float32), "NHWC")])
@pytest.mark.parametrize("k, dil, pad, w, margins", [(3, 1, (1, 1), 14, (1, 1)), (3, 1, (1, 1), 23, (1, 1)),
                                                     (5, 1, (2, 2), 13, (2, 2)), (5, 1, (2, 2), 7, (2, 2)),
                                                     (5, 1, (2, 2), 14, (2, 2)), (5, 1, (2, 2), 5, (2, 2)),
                                                     (5, 1, (2, 2), 22, (2, 2)), (3, 2, (2, 2), 12, (2, 2)),
                                                     (3, 1, (0, 2), 11, (2, 0)), (3, 1, (2, 0), 11, (0, 2)),
                                                     (3, 1, (3, 3), 9, (0, 0)), (4, 1, (1, 2), 10, (2, 1))])
def test_staged_rows_with_zero_margins(dtype, layout, k, dil, pad, w, margins):
    """Stride-1 backprop over staged dy rows (strided, half, or float32 rows of 48 channels, wider
    than ``_IN_PLACE_ROW_BYTES``) with zero margins, so each row is
    one segment whose blocks of P (8, or 7: ``selection.ROW_KERNELS``) overlap at the end, or go 7
    at a time over 7k positions, or whose 5 positions go tap by tap (``_zero_margins``,
    ``_taps_rows``): the
    same bits as NCHW's planar kernels, and against brute force. Asymmetric padding gives
    margins on one side only (each margin: the filter's reach less that side's padding); padding
    of 3 on a 3x3 filter needs none."""
    c, h = 48, 6
    ow = out_size(w, k, 1, dil, *pad)
    assert plan._zero_margins(k, dil, pad[0], ow, w) == margins
    case = dict(n=1, h=h, w=w, c=c, m=1, fh=k, fw=k, stride=(1, 1), dil=(dil, dil), pad=(pad[0], pad[0]),
                oh=out_size(h, k, 1, dil, pad[0], pad[0]), ow=ow)
    staged, planar = (run_all(case, dtype, (chosen, chosen), np.random.default_rng(w))
                      for chosen in (layout, "NCHW"))
    np.testing.assert_array_equal(bits(staged[1]), bits(planar[1]))


# expected: (longest row, 9 taps in registers on AVX-512 ("wide"), on AVX2 ("narrow"))
@pytest.mark.parametrize("filter_rows, fw, stride, dil, width, dtype, expected", [
    (3, 3, 1, 1, 24, np.float32, (3, False, True)),  # 96 bytes: not a pair of 64-byte vectors; 3 of 32
    (3, 3, 1, 1, 40, np.float32, (3, False, True)),  # 160 bytes
    (3, 3, 1, 1, 32, np.float32, (3, True, True)),
    (3, 3, 1, 1, 64, np.float32, (3, True, True)),  # 256 bytes
    (3, 3, 1, 1, 96, np.float32, (3, False, False)),  # 384 bytes
    (3, 3, 1, 1, 20, np.float32, (3, False, False)),  # 80 bytes: no whole 32-byte vectors either
    (3, 3, 1, 1, 16, np.float64, (3, False, False)),  # float64: never (compile time, see plan._tap_paths)
    (3, 3, 1, 1, 12, np.float64, (3, False, False)),
    (3, 3, 1, 1, 7, np.float32, (0, False, False)),  # narrower than a vector
    (3, 3, 2, 1, 32, np.float32, (0, False, False)),  # filter rows of 2 and 1 taps per residue plane
    (5, 5, 2, 1, 32, np.float32, (3, True, True)),  # rows of 3 and 2 taps; 5 x 3 taps
    (5, 5, 1, 1, 64, np.float32, (5, True, True)),  # corners of 3 x 3 taps
    (3, 3, 1, 2, 32, np.float32, (0, True, True)),  # dilated: no filter row reads consecutive positions
    (3, 3, 1, 2, 24, np.float32, (0, False, False)),  # ... and then a pair of 64-byte vectors on both tiers
    (3, 3, 2, 2, 32, np.float32, (3, True, True)),  # ... unless the dilation divides the stride
    (1, 6, 1, 1, 32, np.float32, (5, False, False)),
    (2, 3, 1, 1, 32, np.float32, (3, False, False)),
])
def test_tap_paths(filter_rows, fw, stride, dil, width, dtype, expected):
    """Which tap paths a channels-last call's kernel compiles (issue 23, cold start), derived by
    hand: filter rows of 3, 5 and 7 taps (``test_seven_tap_rows_on_both_tiers``); 9 taps with their
    weights in registers for rows of 4-byte sums: in 3-tap filter rows, at most 256 bytes of whole
    pairs of 64-byte vectors on AVX-512, of whole 32-byte vectors on AVX2 (``selection.NINE_ROWS``);
    dilated, whole pairs of 64-byte vectors of at most 256 bytes on both."""
    longest, wide, narrow = expected
    nine = wide if selection.tier(codegen_target()) == "wide" else narrow
    assert plan._tap_paths(filter_rows, fw, stride, dil, width, dtype, False) == (longest, nine)
    assert plan._tap_paths(filter_rows, fw, stride, dil, width, dtype, True) == (0, False)  # planar rows


def test_seven_tap_rows_on_both_tiers():
    """7-tap filter rows have a path of their own on both tiers (64-byte vectors with 32
    registers, 32-byte ones with 16: ``selection.ROW_KERNELS``); a 7x7 filter's corners hold 3 x 3
    taps, in registers on AVX2 for C = 24 (whole 32-byte vectors)."""
    assert plan._tap_paths(7, 7, 1, 1, 24, np.float32, False) == (7, selection.tier(codegen_target()) == "narrow")


@pytest.mark.parametrize("taps, stride, dilation, expected", [(3, 1, 1, 3), (3, 2, 1, 2), (5, 2, 1, 3), (3, 2, 2, 3),
                                                              (3, 1, 2, 3), (7, 3, 1, 3), (5, 4, 2, 3)])
def test_taps_per_plane(taps, stride, dilation, expected):
    """Residue plane r of a stride holds the taps whose offset ``tap * dilation`` is r modulo the
    stride: counted here by brute force over every residue."""
    assert max(sum(1 for t in range(taps) if t * dilation % stride == r) for r in range(stride)) == expected
    assert plan._taps_per_plane(taps, stride, dilation) == expected


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
def test_streamed_dx_rows(monkeypatch, stride, n, c):
    """A dx of 16 (8) MiB is written with non-temporal stores when every position starts on a
    64-byte line, straight from the registers (on any host: at stride 2 and C = 256 a block's
    stores are 2048 bytes apart, which AMD hosts without AVX-512 do not stream, ``plan._STREAM_STEP_CONFLICTS``,
    emptied here): whole filter rows (``_taps_rows``; C = 256, staged
    rows) and 9 taps with weights in registers (``_taps9_2x2``; C = 32, rows read in place). A
    dx that does not start on a line (as NumPy's own arrays, 16 bytes past one) goes row by row
    through a row buffer at stride 2 and where staged rows are a line wider than C (C = 256),
    rows starting at any element offset (the first and last partial lines of every row through
    plain stores); else from the registers in vectors that start on the lines
    (``test_phased_stores_at_every_line_offset``). Checked against brute force, the same bits
    every way, and nothing around the view written."""
    monkeypatch.setattr(plan, "_STREAM_STEP_CONFLICTS", {})
    monkeypatch.setattr(simd, "STREAMING_THRESHOLD_BYTES", 8 << 20)  # a 32 MiB L3's: whatever this host's
    monkeypatch.setattr(fast, "input_plan", call_plans.input_plan.__wrapped__)  # plans made afresh
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
        on_lines.append(plan._positions_line_offset(*plan._kernel_view(dx, False), c) == 0)
    assert on_lines[1:] == [False, True]
    for other in results[1:]:
        np.testing.assert_array_equal(bits(other), bits(results[0]))


def test_streamed_float16_dx_rows(monkeypatch):
    """A float16 dx of 8 MiB with rows of one run is rounded from the row buffer straight into
    non-temporal stores (``_stream_row``), rows starting at any element offset (C = 33: no
    row starts on a line; the partial lines at both ends take plain stores). The same bits as the
    plain stores (streaming switched off), checked against brute force, nothing around the view
    written."""
    monkeypatch.setattr(simd, "STREAMING_THRESHOLD_BYTES", 8 << 20)  # a 32 MiB L3's: whatever this host's
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
        streamed = plan._streams_rows(dx.nbytes, dx.dtype, plan._kernel_view(dx, False)[2], c, 1, 1, False,
                                       simd.STREAMING_THRESHOLD_BYTES)
        assert streamed == (half.HARDWARE_HALF and threshold < size * 2)
        fast.backprop_input(dy, f, dx, 1, 1, 1, 1, 1, 1)
        check(dx, exact, exact_abs, 9, np.dtype(np.float16))
        assert (buffer[:shift] == 7).all() and (buffer[shift + size:] == 7).all()
        results.append(dx.copy())
    for other in results[1:]:
        np.testing.assert_array_equal(bits(other), bits(results[0]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pair_sums_dx_rows(monkeypatch, dtype):
    """M = 2 with dx rows of one run: the two sums of each element are added in vectors as the row
    is written (``_pair_sums_run``), with non-temporal stores when dx is beyond the cache
    (threshold lowered here to stream a small dx; raised, plain stores), rows starting at any
    element offset (C = 37: the partial lines at both ends of a row take scalar stores). Bit for
    bit the documented order (``emulate_stride1_adjoint``), nothing around the view written."""
    rng = np.random.default_rng(21)
    n, h, w, c = 2, 9, 30, 37
    dy = random_values(rng, (n, h, w, 2 * c), dtype)
    f = random_values(rng, (5, 5, c, 2), dtype)
    expected = emulate_stride1_adjoint(dy, f, h, w, (2, 2))
    size = n * h * w * c
    for shift, threshold in ((0, 0), (5, 0), (5, 1 << 62)):
        monkeypatch.setattr(simd, "STREAMING_THRESHOLD_BYTES", threshold)
        buffer = np.full(size + 16, 7.0, dtype)
        dx = buffer[shift:shift + size].reshape(n, h, w, c)
        assert plan._streams_rows(dx.nbytes, dx.dtype, plan._kernel_view(dx, False)[2], c, 2, 1, False,
                                  simd.STREAMING_THRESHOLD_BYTES) == (threshold == 0)
        fast.backprop_input(dy, f, dx, 1, 1, 1, 1, 2, 2)
        np.testing.assert_array_equal(bits(dx), bits(expected))
        assert (buffer[:shift] == 7).all() and (buffer[shift + size:] == 7).all()


@pytest.mark.parametrize("seed, dtype, h, w, c, k, mult", [(22, np.float32, 128, 128, 128, 5, 2),
                                                          (23, np.float16, 256, 1024, 32, 3, 1)],
                         ids=["D4-float32-5x5-M2", "D7-float16-3x3"])
def test_prefetched_staged_rows(seed, dtype, h, w, c, k, mult, on_each_thread_count):
    """The layouts of D4 and D7 at a size where every fast path of theirs runs: a dy of 16 MiB of
    staged rows, more rows where the host's last-level cache makes the prefetch threshold larger
    (float16 ones converted to float32), the next row requested a share per block of
    ``_taps_rows`` (5-tap filter rows) or per part of ``_taps9_rows`` (3x3, C = 32: the weights in
    registers), dx streamed: M = 2 sums added as they are written, or float16 rows rounded by
    ``_stream_row``. Bit for bit the documented order (float32 sums for float16, rounded once), on
    1 and 2 threads."""
    rng = np.random.default_rng(seed)
    h *= -(-plan._PREFETCH_STAGED_BYTES // (h * w * c * mult * np.dtype(dtype).itemsize))
    dy = random_values(rng, (1, h, w, c * mult), dtype)
    f = random_values(rng, (k, k, c, mult), dtype)
    assert dy.nbytes >= plan._PREFETCH_STAGED_BYTES and dy.nbytes // mult >= simd.STREAMING_THRESHOLD_BYTES
    pad = (k // 2, k // 2)
    expected = emulate_stride1_adjoint(dy.astype(np.float32), f.astype(np.float32), h, w, pad).astype(dtype)

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


@pytest.mark.parametrize("operator", ["input", "forward"])
@pytest.mark.parametrize("dtype, k, w, c, mult, dil", [(np.float32, 3, 12, 16, 1, 1), (np.float32, 3, 30, 48, 1, 1),
                                                       (np.float32, 5, 9, 32, 1, 1), (np.float32, 7, 17, 48, 1, 1),
                                                       (np.float64, 3, 11, 24, 1, 1), (np.float32, 3, 13, 16, 2, 1),
                                                       (np.float32, 3, 14, 32, 1, 2), (np.float64, 3, 14, 16, 1, 2),
                                                       (np.float32, 3, 3, 16, 1, 1), (np.float32, 3, 2, 32, 1, 1)])
def test_phased_stores_at_every_line_offset(monkeypatch, operator, dtype, k, w, c, mult, dil):
    """An output streamed (threshold lowered) whose positions all start at one point off the
    64-byte lines, at every element offset into a line, stride 1: the row paths stream vectors
    that start on the lines, each running into the next position, with the weights rotated to
    match (``CallPlan.phase``; C = 16 and 32 float32 rows read in place, 48 staged with zero
    margins, 3x3 nine-tap blocks and 5- and 7-tap rows, the forward with M = 2, a dilated 3x3
    (9 taps in 2x2 blocks where the tier has them); rows of 3 and 2 positions, too short for it,
    plain). Backprop input with M = 2 adds its pairs of sums in the row buffer instead (no
    phase), and so do rows without those paths (a dilated float64 3x3: float64 takes its 9 taps
    in filter rows, which a dilation of 2 does not have). The documented order bit for bit
    (``emulate_stride1_*``; the dilated adjoint: the bits of plain stores, checked against brute
    force), the same bits at every offset, and
    nothing around the view written."""
    monkeypatch.setattr(simd, "STREAMING_THRESHOLD_BYTES", 0)
    monkeypatch.setattr(plan, "_STREAM_STEP_CONFLICTS", {})
    phases = []
    make_plan = call_plans.input_plan.__wrapped__ if operator == "input" else call_plans.forward_plan.__wrapped__

    def spy(*args):  # plans made afresh, each one's phase recorded
        planned = make_plan(*args)
        phases.append(planned.phase)
        return planned
    monkeypatch.setattr(fast, f"{operator}_plan", spy)
    rng = np.random.default_rng(k * w + c)
    n, h, pad = 2, 4, (k - 1) * dil // 2
    source = random_values(rng, (n, h, w, c * (mult if operator == "input" else 1)), np.dtype(dtype))
    f = random_values(rng, (k, k, c, mult), np.dtype(dtype))
    shape = (n, h, w, c * (1 if operator == "input" else mult))
    run = fast.backprop_input if operator == "input" else fast.conv_forward
    if operator == "forward":
        expected = emulate_stride1_forward(source, f, h, w, (dil, dil), (pad, pad))
    elif dil == 1:
        expected = emulate_stride1_adjoint(source, f, h, w, (pad, pad))
    else:  # plain stores, below the streaming threshold
        expected = np.empty(shape, dtype)
        with monkeypatch.context() as plain:
            plain.setattr(simd, "STREAMING_THRESHOLD_BYTES", 1 << 62)
            run(source, f, expected, 1, 1, dil, dil, pad, pad)
        exact = brute_backprop_input(source, f, h, w, (1, 1), (dil, dil), (pad, pad))
        exact_abs = brute_backprop_input(np.abs(source), np.abs(f), h, w, (1, 1), (dil, dil), (pad, pad))
        check(expected, exact, exact_abs, k * k, np.dtype(dtype))
        phases.clear()
    size, item = math.prod(shape), np.dtype(dtype).itemsize
    line = 64 // item
    for offset in range(line):
        buffer = np.full(size + 2 * line, 7.0, dtype)
        shift = (-buffer.ctypes.data) % 64 // item + offset
        out = buffer[shift:shift + size].reshape(shape)
        run(source, f, out, 1, 1, dil, dil, pad, pad)
        np.testing.assert_array_equal(bits(out), bits(expected.astype(dtype)))
        assert (buffer[:shift] == 7).all() and (buffer[shift + size:] == 7).all()
    phased = (operator == "forward" or mult == 1) and not (dtype == np.float64 and dil > 1)
    assert phases == [(line - offset) % line if phased else 0 for offset in range(line)]
