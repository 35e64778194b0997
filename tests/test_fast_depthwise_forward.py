"""How the fast depthwise forward kernel reads x, writes y and sums long filter rows (SPEC 5.4):
wide x rows staged with zero margins, y beyond the cache streamed from the registers with
non-temporal stores, filter rows of 7 taps sharing their source vectors; bit for bit the
documented summation order (``emulate_stride1_forward``, ``emulate_stride1_adjoint``) and
against brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gradops._fast import codecs as element_kinds
from gradops._fast import depthwise as fast
from gradops._fast import simd, target
from gradops._fast.depthwise import call_plans, kernels, plan

from fast_depthwise_cases import (as_layout, bits, brute_backprop_input, brute_forward, check,
                                  emulate_stride1_adjoint, emulate_stride1_forward, out_size, random_values)


def _fresh_plans(monkeypatch):
    """Plans made on every call, not remembered: the remembered plans keep the rules of the real
    settings, which a test changes."""
    monkeypatch.setattr(fast, "forward_plan", call_plans.forward_plan.__wrapped__)
    monkeypatch.setattr(fast, "input_plan", call_plans.input_plan.__wrapped__)


def _rows_per_job(monkeypatch, rule):
    """Plans made with ``rule`` for the job sizes (``plan._rows_per_job``), afresh."""
    monkeypatch.setattr(call_plans, "_rows_per_job", rule)
    _fresh_plans(monkeypatch)


def _share_calls(monkeypatch):
    """``(kernel, arguments)`` of each kernel ``fast.share`` runs from now on, in call order (each
    still runs); a forward call's arguments end with its (left, right) zero margins and its phase
    (``CallPlan.phase``)."""
    calls = []
    share = fast.share

    def spy(kernel, *args):
        calls.append((kernel, args))
        share(kernel, *args)
    monkeypatch.setattr(fast, "share", spy)
    return calls


def _streaming(kernel) -> tuple[bool, bool, bool]:
    """(stream_in_place, stream_rows, phased) of a forward or backprop-input kernel: its factory's
    key, ``(planar, stream_in_place, stream_rows, phased, ...)``, is the first argument of its
    recipe."""
    path = kernel.gradops_recipe[2][0]
    return path[1], path[2], path[3]


@pytest.mark.parametrize("dtype, layout, mult", [(np.dtype(np.float32), "NHWC", 1), (np.dtype(np.float16), "NHWC", 1),
                                                 (np.dtype(np.float32), "strided", 1),
                                                 (np.dtype(np.float32), "NHWC", 2)])
@pytest.mark.parametrize("k, dil, pad, w", [(3, 1, (1, 1), 14), (5, 1, (2, 2), 13), (3, 2, (2, 2), 12),
                                            (3, 1, (0, 2), 11), (3, 1, (2, 0), 11), (4, 1, (1, 2), 10),
                                            (7, 1, (3, 3), 16), (3, 1, (3, 3), 9)])
def test_staged_x_rows_with_zero_margins(monkeypatch, dtype, layout, mult, k, dil, pad, w):
    """Stride-1 forward over x rows of C*M = 48 (wider than ``_IN_PLACE_ROW_BYTES``; float32,
    float16, strided, or 24 channels each repeated for M = 2) staged with zero margins of the
    padding on each side (one side only for asymmetric padding), so each row is one segment of
    taps (``_forward_margins``): bit for bit the documented order (float16 summed in float32,
    rounded once). Padding of 3 on a 3x3 filter, beyond its reach, has none. One job per image
    here (``_rows_per_job``), since jobs shorter than the filter read rows in place (or, M = 2,
    staged without margins): with the real jobs of this small batch, the same bits."""
    rng = np.random.default_rng(w * k)
    n, h, c = 2, 8, 48 // mult
    reach = (k - 1) * dil
    ow = out_size(w, k, 1, dil, *pad)
    x = random_values(rng, (n, h, w, c), dtype)
    f = random_values(rng, (k, k, c, mult), dtype)
    expected = emulate_stride1_forward(x.astype(np.float32), f.astype(np.float32), h, ow, (dil, dil),
                                       (reach // 2, pad[0])).astype(dtype)
    calls = _share_calls(monkeypatch)
    for rows_per_job in (lambda batch, rows: rows, plan._rows_per_job):
        _rows_per_job(monkeypatch, rows_per_job)
        y = np.empty((n, h, ow, c * mult), dtype)
        fast.conv_forward(as_layout(x, layout), f, y, 1, 1, dil, dil, reach // 2, pad[0])
        np.testing.assert_array_equal(bits(y), bits(expected))
    assert [args[-3:-1] for _, args in calls] == [pad if max(pad) <= reach else (0, 0), (0, 0)]


def test_non_finite_weights_read_rows_in_place(monkeypatch):
    """An infinite weight turns a tap reaching a zero margin into NaN (0 * inf), so its rows are
    read in place instead: the corner tap skipped at column 0, +inf everywhere else in that
    channel, as brute force has it."""
    rng = np.random.default_rng(24)
    x = np.abs(random_values(rng, (1, 8, 10, 48), np.float32)) + 1
    f = random_values(rng, (3, 3, 48, 1), np.float32)
    f[0, 0, 0, 0] = np.inf
    _rows_per_job(monkeypatch, lambda batch, rows: rows)
    calls = _share_calls(monkeypatch)
    y = np.empty((1, 8, 10, 48), np.float32)
    fast.conv_forward(x, f, y, 1, 1, 1, 1, 1, 1)
    assert [args[-3:-1] for _, args in calls] == [(0, 0)]
    exact = brute_forward(x, f, 8, 10, (1, 1), (1, 1), (1, 1))
    assert not np.isnan(y).any() and (np.isinf(y) == np.isinf(exact)).all()
    assert np.isinf(y[0, 1:, 1:, 0]).all() and np.isfinite(y[0, :, 0, 0]).all()


def test_remembered_plans_follow_what_the_data_changes(monkeypatch):
    """Call plans are remembered per geometry and layout (``call_plans``). The same shapes with an
    infinite weight (no zero margins: 0 * inf), or with a y off the 64-byte lines (no streaming
    from the registers), must each get their own plan, in either order: the margins and the
    kernel differ from the remembered plan's, and the results are brute force's."""
    rng = np.random.default_rng(25)
    x = np.abs(random_values(rng, (2, 40, 10, 48), np.float32)) + 1  # jobs of 3 rows or more: margins
    finite = random_values(rng, (3, 3, 48, 1), np.float32)
    infinite = finite.copy()
    infinite[0, 0, 0, 0] = np.inf
    monkeypatch.setattr(simd, "STREAMING_THRESHOLD_BYTES", 0)
    calls = _share_calls(monkeypatch)
    buffer = np.full(x.size + 32, 7.0, np.float32)
    first = (-buffer.ctypes.data) % 64 // 4
    on_lines, off_lines = (buffer[s:s + x.size].reshape(x.shape) for s in (first, first + 3))
    for f, y in ((finite, on_lines), (infinite, on_lines), (finite, off_lines), (finite, on_lines)):
        fast.conv_forward(x, f, y, 1, 1, 1, 1, 1, 1)
        exact = brute_forward(x, f, 40, 10, (1, 1), (1, 1), (1, 1))
        if f is infinite:
            assert not np.isnan(y).any() and (np.isinf(y) == np.isinf(exact)).all()
        else:
            check(y, exact, brute_forward(x, np.abs(f), 40, 10, (1, 1), (1, 1), (1, 1)), 9, np.dtype(np.float32))
    margins = [args[-3:-1] for _, args in calls]
    assert margins[1] == (0, 0) and margins[0] == margins[2] == margins[3] != (0, 0)
    kernels = [kernel for kernel, _ in calls]
    assert kernels[2] is not kernels[0] and kernels[3] is kernels[0]


@pytest.mark.parametrize("k, c, w", [(3, 48, 20), (3, 16, 13), (5, 48, 13), (7, 16, 21), (7, 48, 21)])
def test_streamed_y_rows(monkeypatch, k, c, w):
    """A y beyond the cache (threshold lowered here, so that a small y streams) whose positions
    start on 64-byte lines is written with non-temporal stores straight from the registers, by a
    kernel of its own (``_forward_kernel_for((False, True, ...))``): filter rows of 3, 5 and 7 taps in
    blocks of 8 positions (the last block overlapping the one before), over x rows staged with
    zero margins (C = 48; one job per image) or read in place (C = 16: the edge positions tap
    by tap). A y whose positions all start at one point off the lines (3 elements past one here,
    as NumPy's own arrays start 16 bytes past one) is streamed from the registers too, in vectors
    that start on the lines, each running into the next position (``CallPlan.phase``: the
    kernel ``(False, False, False, True, ...)``); below the threshold, plain stores. Bit for bit
    the documented order every way, nothing around the view written."""
    rng = np.random.default_rng(k * c + w)
    n, h, pad = 2, 5, k // 2
    x = random_values(rng, (n, h, w, c), np.float32)
    f = random_values(rng, (k, k, c, 1), np.float32)
    expected = emulate_stride1_forward(x, f, h, w, (1, 1), (pad, pad))
    check(expected, brute_forward(x, f, h, w, (1, 1), (1, 1), (pad, pad)),
          brute_forward(np.abs(x), np.abs(f), h, w, (1, 1), (1, 1), (pad, pad)), k * k, np.dtype(np.float32))
    _rows_per_job(monkeypatch, lambda batch, rows: rows)
    calls = _share_calls(monkeypatch)
    # the kernel's tap paths: k-tap filter rows (on both tiers), and whether 9-tap segments keep
    # their weights in registers (test_tap_paths pins that choice)
    longest_row, nine = plan._tap_paths(k, k, 1, 1, c, np.float32, False)
    assert longest_row == k
    size = n * h * w * c
    for shift, threshold, streamed, phased in ((None, 0, True, False), (3, 0, False, True),
                                               (None, 1 << 62, False, False)):
        monkeypatch.setattr(simd, "STREAMING_THRESHOLD_BYTES", threshold)
        buffer = np.full(size + 32, 7.0, np.float32)
        if shift is None:  # the first element on a 64-byte line
            shift = (-buffer.ctypes.data) % 64 // 4
        y = buffer[shift:shift + size].reshape(n, h, w, c)
        fast.conv_forward(x, f, y, 1, 1, 1, 1, pad, pad)
        assert calls[-1][0] is kernels._forward_kernel_for((False, streamed, False, phased, longest_row, nine,
                                                            element_kinds.FLOAT))
        np.testing.assert_array_equal(bits(y), bits(expected))
        assert (buffer[:shift] == 7).all() and (buffer[shift + size:] == 7).all()


@pytest.mark.parametrize("w, c, mult", [(21, 16, 1), (13, 20, 2), (30, 32, 1)])
def test_seven_tap_filter_rows(w, c, mult):
    """7x7 filters of dilation 1 go row by row through the 7-tap row microkernels
    (``selection.row_blocks``), forward and adjoint (taps walking the row backwards): forward
    interiors of 15 positions (a block of 8 and one overlapping it), of 24 (three blocks) and of
    7 (tap by tap), C*M = 40 with a masked channel tail; the adjoint's staged rows of 13 (one
    segment with zero margins: blocks of 8, or of 7 with AVX2, the last overlapping). Bit for
    bit the documented order."""
    rng = np.random.default_rng(w * c)
    n, h, k, pad = 1, 9, 7, 3
    x = random_values(rng, (n, h, w, c), np.float32)
    f = random_values(rng, (k, k, c, mult), np.float32)
    y = np.empty((n, h, w, c * mult), np.float32)
    fast.conv_forward(x, f, y, 1, 1, 1, 1, pad, pad)
    np.testing.assert_array_equal(bits(y), bits(emulate_stride1_forward(x, f, h, w, (1, 1), (pad, pad))))
    dy = random_values(rng, (n, h, w, c * mult), np.float32)
    dx = np.empty((n, h, w, c), np.float32)
    fast.backprop_input(dy, f, dx, 1, 1, 1, 1, pad, pad)
    np.testing.assert_array_equal(bits(dx), bits(emulate_stride1_adjoint(dy, f, h, w, (pad, pad))))


def test_prefetched_staged_x_rows(on_each_thread_count):
    """An x of 16 MiB (on a 32 MiB L3) with rows of 64 channels (wider than ``_IN_PLACE_ROW_BYTES``), 5x5: rows staged
    with zero margins, the x row the next output row stages requested a share per block
    of ``_taps_rows`` (``_PREFETCH_STAGED_BYTES``), y of 16 MiB streamed from the registers. Bit
    for bit the documented order, on 1 and 2 threads."""
    rng = np.random.default_rng(25)
    h, w, c, k = 256, 256, 64, 5
    n = -(-max(plan._PREFETCH_STAGED_BYTES, simd.STREAMING_THRESHOLD_BYTES) // (h * w * c * 4))  # 1 on a 32 MiB L3
    x = random_values(rng, (n, h, w, c), np.float32)
    f = random_values(rng, (k, k, c, 1), np.float32)
    assert x.nbytes >= plan._PREFETCH_STAGED_BYTES and x.nbytes >= simd.STREAMING_THRESHOLD_BYTES
    expected = emulate_stride1_forward(x, f, h, w, (1, 1), (2, 2))
    size = x.size

    def run():
        buffer = np.empty(size + 16, np.float32)
        shift = (-buffer.ctypes.data) % 64 // 4  # y on 64-byte lines: streamed
        y = buffer[shift:shift + size].reshape(n, h, w, c)
        fast.conv_forward(x, f, y, 1, 1, 1, 1, 2, 2)
        return y
    for y in on_each_thread_count(run):
        np.testing.assert_array_equal(bits(y), bits(expected))


@pytest.mark.parametrize("vendor, avx512, streams_2048", [("AuthenticAMD", False, False), ("AuthenticAMD", True, True),
                                                          ("GenuineIntel", True, True), ("", False, True)])
def test_store_step_conflicts_per_host(monkeypatch, vendor, avx512, streams_2048):
    """Blocks that store positions a multiple of 2048 bytes apart are not streamed on the host
    where that was the slowest way to write them, an AMD core without AVX-512 (a Zen 3); a Zen 4
    (AMD with AVX-512), an Intel Xeon and an unknown host stream them, as they stream every
    other step (docs/performance.md, "Depthwise": measured on each of these three CPUs)."""
    monkeypatch.setattr(plan, "host_vendor", lambda: vendor)
    monkeypatch.setattr(plan, "host_avx512", lambda: avx512)
    for step in (2048, 4096, 2048 * 3):
        assert plan._streams_step(step) is streams_2048
    for step in (1024, 2304, 2048 + 64):
        assert plan._streams_step(step)


@pytest.mark.parametrize("operator, stride, c, conflicting", [("forward", 1, 512, True), ("input", 1, 512, True),
                                                              ("input", 2, 256, True), ("forward", 1, 528, False),
                                                              ("input", 2, 272, False)])
def test_conflicting_store_steps_are_not_streamed(monkeypatch, operator, stride, c, conflicting):
    """Where the host has a store step that conflicts (``plan._STREAM_STEP_CONFLICTS``,
    set here for this host whatever it is), an output beyond the cache (threshold lowered) whose
    blocks store positions a multiple of it apart (C = 512 float32 channels: 2048 bytes; C = 256 at
    stride 2, every other dx position) is written in place with plain stores, on a line or 16
    bytes past one; C = 528 and 272 are streamed as before: from the registers on a line; off it,
    at stride 1 from the registers in vectors that start on the lines (``CallPlan.phase``), at
    stride 2 from the row buffer. The same bits every way, checked against brute force, nothing
    around the view written."""
    monkeypatch.setattr(plan, "_STREAM_STEP_CONFLICTS", {(target.host_vendor(), target.host_avx512()): 2048})
    monkeypatch.setattr(simd, "STREAMING_THRESHOLD_BYTES", 0)
    _fresh_plans(monkeypatch)  # with the conflicts above
    calls = _share_calls(monkeypatch)
    rng = np.random.default_rng(c + stride)
    n, h, w, pad = 1, 5, 7, (1, 1)
    f = random_values(rng, (3, 3, c, 1), np.float32)
    if operator == "forward":
        oh, ow = out_size(h, 3, stride, 1, *pad), out_size(w, 3, stride, 1, *pad)
        source = random_values(rng, (n, h, w, c), np.float32)
        exact = brute_forward(source, f, oh, ow, (stride, stride), (1, 1), pad)
        exact_abs = brute_forward(np.abs(source), np.abs(f), oh, ow, (stride, stride), (1, 1), pad)
        shape, run = (n, oh, ow, c), fast.conv_forward
    else:
        dy_shape = (n, out_size(h, 3, stride, 1, *pad), out_size(w, 3, stride, 1, *pad), c)
        source = random_values(rng, dy_shape, np.float32)
        exact = brute_backprop_input(source, f, h, w, (stride, stride), (1, 1), pad)
        exact_abs = brute_backprop_input(np.abs(source), np.abs(f), h, w, (stride, stride), (1, 1), pad)
        shape, run = (n, h, w, c), fast.backprop_input
    size = math.prod(shape)
    results = []
    for on_a_line in (True, False):
        buffer = np.full(size + 32, 7.0, np.float32)
        shift = (-buffer.ctypes.data) % 64 // 4 + (0 if on_a_line else 4)
        out = buffer[shift:shift + size].reshape(shape)
        run(source, f, out, stride, stride, 1, 1, *pad)
        check(out, exact, exact_abs, 9, np.dtype(np.float32))
        assert (buffer[:shift] == 7).all() and (buffer[shift + size:] == 7).all()
        results.append(bits(out))
        off_a_line = not on_a_line and not conflicting
        assert _streaming(calls[-1][0]) == (on_a_line and not conflicting, off_a_line and stride == 2,
                                            off_a_line and stride == 1)
    np.testing.assert_array_equal(results[0], results[1])


@pytest.mark.parametrize("operator", ["forward", "input"])
@pytest.mark.parametrize("w, line_offset, streamed", [(32, 0, True), (32, 16, False), (20, 0, False)])
def test_planar_rows_streamed_only_on_lines(monkeypatch, operator, w, line_offset, streamed):
    """Stride-1 planar (NCHW) outputs beyond the cache (threshold lowered) are streamed by
    ``kernels._planar_blocks_kernel_for(True)`` when every row starts on a 64-byte line (32
    float32 columns, the output on a line); 16 bytes past a line, or rows of 20 columns (80
    bytes), they are stored plainly, as streaming would write lines both ways. The same bits
    either way, checked against brute force, nothing around the output written."""
    monkeypatch.setattr(simd, "STREAMING_THRESHOLD_BYTES", 0)
    calls = _share_calls(monkeypatch)
    rng = np.random.default_rng(w + line_offset)
    n, c, m, h, pad = 2, 3, 2 if operator == "input" else 1, 6, (1, 1)
    f = random_values(rng, (3, 3, c, m), np.float32)
    if operator == "forward":
        source = random_values(rng, (n, h, w, c), np.float32)
        exact = brute_forward(source, f, h, w, (1, 1), (1, 1), pad)
        exact_abs = brute_forward(np.abs(source), np.abs(f), h, w, (1, 1), (1, 1), pad)
        shape, run = (n, h, w, c * m), fast.conv_forward
    else:
        source = random_values(rng, (n, h, w, c * m), np.float32)
        exact = brute_backprop_input(source, f, h, w, (1, 1), (1, 1), pad)
        exact_abs = brute_backprop_input(np.abs(source), np.abs(f), h, w, (1, 1), (1, 1), pad)
        shape, run = (n, h, w, c), fast.backprop_input
    planar_source = np.ascontiguousarray(source.transpose(0, 3, 1, 2)).transpose(0, 2, 3, 1)  # NCHW memory
    size = math.prod(shape)
    buffer = np.full(size + 32, 7.0, np.float32)
    shift = (-buffer.ctypes.data) % 64 // 4 + line_offset // 4
    out_nchw = buffer[shift:shift + size].reshape(shape[0], shape[3], h, w)
    run(planar_source, f, out_nchw.transpose(0, 2, 3, 1), 1, 1, 1, 1, *pad)
    check(out_nchw.transpose(0, 2, 3, 1), exact, exact_abs, 9, np.dtype(np.float32))
    assert (buffer[:shift] == 7).all() and (buffer[shift + size:] == 7).all()
    assert [kernel for kernel, _ in calls] == [kernels._planar_blocks_kernel_for(streamed)]
