"""Backprop filter (SPEC 5.4): dF[ky, kx, c, m] = sum over (b, oy, ox) of dy * x.

Summation order of one filter element: 16 lanes (``_LANES``), lane ``ox % 16`` summing its
(row, ox) terms in order; lanes added in order; then row chunks of consecutive rows, as many as
``plan._filter_chunks`` says from the shapes alone (never the thread count), added in order
(``_combine_chunks``) and rounded once. Each chunk is one job of the pool.

The microkernels that add the terms are in ``lanes``. Channels-last rows of at least 16
positions go through them with the lanes in registers, rows read in place ``group_rows`` at a
time (``plan._filter_group_rows``), so that the lanes stay in registers across rows, and staged
rows one at a time; narrower rows keep their lanes in memory (``lanes._lane_rows_in_memory``).
"""

from __future__ import annotations


import numpy as np
from numba import njit

from ..first_calls import kernel_factory
from ..pool import begin, claim, end, finish
from .codecs import _store_one
from .lanes import _NO_ROW, _add_lanes, _lane_dot, _lane_rows, _lane_rows_in_memory, lane_slots
from .plan import _LANES
from .staging import _column_taps, _stage_channels_last, _stage_planar


@kernel_factory
def _backprop_filter_kernel_for(path: tuple[bool, bool]):
    """``_backprop_filter_kernel`` for one ``path`` = (planar rows, channels-last lanes in
    registers: rows of at least 16 positions): numba prunes the branches a False flag rules out
    before typing them, so a call compiles only the lane code its rows take (issue 23, cold
    start). ``planar_path`` is the kernel's ``planar`` argument."""
    planar_path, registers_path = path

    @njit(cache=True, nogil=True)
    def _backprop_filter_kernel(counters, epoch, role, pool_chunks, x, x_off, x_st, x_direct, direct_x, dy, dy_off,
                                dy_st, dy_direct, direct_dy, partial, geo, planar, kind, group_rows, shift):
        """``partial[chunk, tap, k]``: the chunk's rows summed lane by lane, lanes added in order.
        ``shift``: rows read in place that start that many elements past a 64-byte line, walked from
        the line (``lanes._lane_rows``; 0 for any other rows)."""
        n_batch, in_h, in_w, chans, mult, out_h, out_w, fh, fw, sh, sw, dh, dw, pt, pl, _ = geo  # plan.Geometry
        width = chans * mult
        plane_len = (in_w + sw - 1) // sw
        x_row_len = (width if not planar else chans) * sw * plane_len
        ring_rows = min((fh - 1) * dh + 1, in_h)  # distinct x rows one dy row reads, at most all
        chunks = partial.shape[0]
        rows = n_batch * out_h
        columns = _column_taps(fw, dw, pl, sw, out_w, in_w)
        taps = fh * fw
        tap_lo, tap_hi = np.empty(taps, np.int64), np.empty(taps, np.int64)
        for t in range(taps):
            tap_lo[t], tap_hi[t] = columns[t % fw, 0], columns[t % fw, 1]
        # Channels-last: lanes ox % 16 >= out_w never receive a term: only whole groups of 8 are kept
        # (_lane_rows); an empty lane adds +0 to a total that started at +0 (never -0): no bit changes.
        n_lanes = _LANES if planar else min(_LANES, -(-out_w // 8) * 8)
        seen = begin(counters, epoch, role)
        items = chunks
        while True:
            pool_chunk = claim(counters)
            if pool_chunk >= pool_chunks:
                end(epoch, role, seen)
                return
            for chunk in range(pool_chunk * items // pool_chunks, (pool_chunk + 1) * items // pool_chunks):
                # [tap][lane][k] (one more slot per tap with a shift) or [tap][k][lane]
                lanes = np.zeros(taps * lane_slots(n_lanes, shift) * width, partial.dtype)
                ring = np.empty(0 if direct_x else ring_rows * x_row_len, partial.dtype)
                tags = np.full(ring_rows, -1, np.int64)
                d_rows = np.empty(group_rows, np.int64)
                x_cols = np.empty((group_rows, taps), np.int64)  # _NO_ROW: the tap reads no x row for that row
                xs = x_direct if direct_x else ring
                dy_row = np.empty(0 if direct_dy else out_w * width, partial.dtype)
                ds = dy_direct if direct_dy else dy_row
                row, chunk_end = chunk * rows // chunks, (chunk + 1) * rows // chunks
                while row < chunk_end:
                    n_rows = min(group_rows, chunk_end - row)
                    for r in range(n_rows):
                        b = (row + r) // out_h
                        oy = row + r - b * out_h
                        dy_at = dy_off + b * dy_st[0] + oy * dy_st[1]
                        if direct_dy:
                            d0, d_ch = dy_at, dy_st[3]
                        else:
                            d0, d_ch = 0, out_w
                            if planar_path:
                                _stage_planar(dy, dy_at, dy_st[2], dy_st[3], out_w, width, 1, out_w, dy_row, 0, kind)
                            else:
                                _stage_channels_last(dy, dy_at, dy_st[2], dy_st[3], out_w, width, 1, 1, out_w, width,
                                                     dy_row, 0, kind)
                        d_rows[r] = d0
                        for ky in range(fh):
                            iy = oy * sh - pt + ky * dh
                            x_cols[r, ky * fw:(ky + 1) * fw] = _NO_ROW
                            if iy < 0 or iy >= in_h:
                                continue
                            x_at = x_off + b * x_st[0] + iy * x_st[1]
                            if direct_x:
                                x_row, x_ch = x_at, x_st[3]
                            else:
                                slot = iy % ring_rows
                                x_row, x_ch = slot * x_row_len, sw * plane_len
                                if tags[slot] != b * in_h + iy:
                                    tags[slot] = b * in_h + iy
                                    if planar_path:
                                        _stage_planar(x, x_at, x_st[2], x_st[3], in_w, chans, sw, plane_len, ring,
                                                      x_row, kind)
                                    else:
                                        _stage_channels_last(x, x_at, x_st[2], x_st[3], in_w, chans, mult, sw,
                                                             plane_len, chans * mult, ring, x_row, kind)
                            for kx in range(fw):
                                t = ky * fw + kx
                                plane, q_shift = columns[kx, 2], columns[kx, 3]
                                if planar_path:
                                    x_col = x_row + plane * plane_len + q_shift  # as in the forward kernel
                                    for k in range(width):
                                        _lane_dot(lanes, (t * width + k) * _LANES, ds, d0 + k * d_ch,
                                                  xs, x_col + (k // mult) * x_ch, tap_lo[t], tap_hi[t])
                                else:
                                    x_cols[r, t] = x_row + (plane * plane_len + q_shift) * width
                    if registers_path:
                        d_next, d_next_n, x_next, x_next_n = _next_rows(row + n_rows, rows, group_rows, geo, dy_off,
                                                                        dy_st, direct_dy, x_off, x_st, direct_x)
                        _lane_rows(lanes, n_lanes, width, ds, d_rows, n_rows, xs, x_cols, tap_lo, tap_hi,
                                   d_next, d_next_n, x_next, x_next_n, shift)
                    elif not planar_path:
                        _lane_rows_in_memory(lanes, n_lanes, width, ds, d_rows, n_rows, xs, x_cols, tap_lo, tap_hi)
                    row += n_rows
                if planar_path:
                    for t in range(taps):
                        for k in range(width):
                            first = (t * width + k) * _LANES
                            total = lanes[first]
                            for lane in range(1, _LANES):
                                total += lanes[first + lane]
                            partial[chunk, t, k] = total
                else:
                    _add_lanes(lanes, n_lanes, width, partial[chunk].reshape(-1), shift)
            finish(counters)

    return _backprop_filter_kernel


@njit(inline="always")
def _next_rows(first, rows, group_rows, geo, dy_off, dy_st, direct_dy, x_off, x_st, direct_x):
    """(start, length) in dy and in x of what the group of rows from ``first`` reads first and this
    group did not: its dy rows, and the x rows below this group's (rows read in place only; the
    rows of the next group's image; lengths 0 past the last row)."""
    _, in_h, in_w, chans, mult, out_h, out_w, fh, _, sh, _, dh, _, pt, _, _ = geo  # plan.Geometry
    b, oy = first // out_h, first % out_h
    count = min(group_rows, rows - first, out_h - oy)
    iy_first = max(0, oy * sh - pt + (fh - 1) * dh)  # the last x row of its first dy row
    iy_last = min(in_h - 1, (oy + count - 1) * sh - pt + (fh - 1) * dh)
    d_n = count * out_w * chans * mult if direct_dy and count > 0 else 0
    x_n = (iy_last - iy_first + 1) * in_w * chans if direct_x and count > 0 and iy_last >= iy_first else 0
    return dy_off + b * dy_st[0] + oy * dy_st[1], d_n, x_off + b * x_st[0] + iy_first * x_st[1], x_n


@njit(cache=True, nogil=True)
def _combine_chunks(partial, out, out_off, out_st, fw, mult, kind):
    """out[ky, kx, c, m] = the chunk partials of (tap, c*M + m) added in chunk order, rounded once."""
    taps, width = partial.shape[1], partial.shape[2]
    for t in range(taps):
        for k in range(width):
            total = partial[0, t, k]
            for chunk in range(1, partial.shape[0]):
                total += partial[chunk, t, k]
            c = k // mult
            i = out_off + (t // fw) * out_st[0] + (t % fw) * out_st[1] + c * out_st[2] + (k - c * mult) * out_st[3]
            _store_one(out, i, total, kind)
