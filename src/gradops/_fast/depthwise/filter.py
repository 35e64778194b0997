"""Backprop filter (SPEC 5.4): dF[ky, kx, c, m] = sum over (b, oy, ox) of dy * x.

Summation order of one filter element: 2 lanes (``_LANES``), lane ``ox % 2`` summing its
(row, ox) terms in order; lane 0 + lane 1; then row chunks of consecutive rows, as many as
``plan._filter_chunks`` says from the shapes alone (never the thread count), added in order
(``_combine_chunks``) and rounded once. Each chunk is one job of the pool.

The microkernels that add the terms are in ``lanes``. The kernel reads channels-last float rows:
in place where x and dy are such rows, else staged one at a time (other types, planar layouts
such as NCHW, strides as residue planes, multipliers as repeated x channels). Rows of at least
``plan._FILTER_REGISTER_POSITIONS`` positions go through the lanes in registers, rows read in
place ``group_rows`` at a time (``plan._filter_group_rows``), so that a group's lines stay in
L1 while the passes of taps revisit them; narrower rows read in place through ``narrow_lanes``
(a vector of channels at a time, lanes in registers, ``plan._filter_narrow_rows`` rows a group);
other narrow rows keep their lanes in memory (``lanes._lane_rows_in_memory``).
"""

from __future__ import annotations


import numpy as np
from numba import njit

from ..first_calls import kernel_factory
from ..pool import begin, claim, end, finish
from .codecs import _store_one
from .lanes import _NO_ROW, _add_lanes, _lane_rows, _lane_rows_in_memory, lane_slots
from .narrow_lanes import add_narrow_lanes, narrow_rows_for
from .plan import _FILTER_VECTOR_BYTES
from .staging import _column_taps, _stage_channels_last


@kernel_factory
def _backprop_filter_kernel_for(path: str, pass_taps: int = 0):
    """``_backprop_filter_kernel`` for one ``FilterPlan.path``: "registers" (``lanes._lane_rows``),
    "narrow" (``narrow_lanes``, filter rows in passes of ``pass_taps`` taps) or "memory"
    (``lanes._lane_rows_in_memory``). numba prunes the branches the flags rule out before typing
    them, so a call compiles only the lane code its rows take (issue 23, cold start)."""
    registers_path, narrow_path = path == "registers", path == "narrow"
    narrow_rows = narrow_rows_for(pass_taps) if narrow_path else None

    @njit(cache=True, nogil=True)
    def _backprop_filter_kernel(counters, epoch, role, pool_chunks, x, x_off, x_st, x_direct, direct_x, dy, dy_off,
                                dy_st, dy_direct, direct_dy, partial, geo, kind, group_rows, shift):
        """``partial[chunk, tap, k]``: the chunk's rows summed lane by lane, lanes added in order.
        ``shift``: rows read in place that start that many elements past a multiple of the vector
        width, walked from it (``lanes._lane_rows``; 0 for any other rows)."""
        n_batch, in_h, in_w, chans, mult, out_h, out_w, fh, fw, sh, sw, dh, dw, pt, pl, _ = geo  # plan.Geometry
        width = chans * mult
        plane_len = (in_w + sw - 1) // sw
        x_row_len = width * sw * plane_len
        ring_rows = min((fh - 1) * dh + 1, in_h)  # distinct x rows one dy row reads, at most all
        chunks = partial.shape[0]
        rows = n_batch * out_h
        columns = _column_taps(fw, dw, pl, sw, out_w, in_w)
        taps = fh * fw
        tap_lo, tap_hi = np.empty(taps, np.int64), np.empty(taps, np.int64)
        for t in range(taps):
            tap_lo[t], tap_hi[t] = columns[t % fw, 0], columns[t % fw, 1]
        seen = begin(counters, epoch, role)
        items = chunks
        while True:
            pool_chunk = claim(counters)
            if pool_chunk >= pool_chunks:
                end(epoch, role, seen)
                return
            for chunk in range(pool_chunk * items // pool_chunks, (pool_chunk + 1) * items // pool_chunks):
                # [tap][lane][k], one more slot per tap before the lanes with a shift
                lanes = np.zeros(taps * lane_slots(shift) * width, partial.dtype)
                ring = np.empty(0 if direct_x else ring_rows * x_row_len, partial.dtype)
                tags = np.full(ring_rows, -1, np.int64)
                d_rows = np.empty(group_rows, np.int64)
                x_cols = np.empty((group_rows, taps), np.int64)  # _NO_ROW: the tap reads no x row for that row
                x_row_at = np.empty((group_rows, fh), np.int64)  # filter row ky's x row, or _NO_ROW
                if narrow_path:
                    v = _FILTER_VECTOR_BYTES // partial.itemsize
                    padded_fw = -(-fw // pass_taps) * pass_taps  # whole passes of a filter row
                    vector_lanes = np.zeros((width // v, fh * padded_fw * lane_slots(0) * v), partial.dtype)
                    x_buf = np.empty(group_rows * fh * (out_w + (padded_fw - 1) * dw) * v, partial.dtype)
                    staged_x_rows, slot_rows = np.empty((fh, group_rows), np.int64), np.empty(group_rows * fh, np.int64)
                    probe = np.empty(v, partial.dtype)
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
                            d0 = dy_at
                        else:
                            d0 = 0
                            _stage_channels_last(dy, dy_at, dy_st[2], dy_st[3], out_w, width, 1, 1, out_w, width,
                                                 dy_row, 0, kind)
                        d_rows[r] = d0
                        for ky in range(fh):
                            iy = oy * sh - pt + ky * dh
                            x_cols[r, ky * fw:(ky + 1) * fw] = _NO_ROW
                            x_row_at[r, ky] = _NO_ROW
                            if iy < 0 or iy >= in_h:
                                continue
                            x_at = x_off + b * x_st[0] + iy * x_st[1]
                            if direct_x:
                                x_row = x_at
                            else:
                                slot = iy % ring_rows
                                x_row = slot * x_row_len
                                if tags[slot] != b * in_h + iy:
                                    tags[slot] = b * in_h + iy
                                    _stage_channels_last(x, x_at, x_st[2], x_st[3], in_w, chans, mult, sw, plane_len,
                                                         width, ring, x_row, kind)
                            x_row_at[r, ky] = x_row
                            for kx in range(fw):
                                plane, q_shift = columns[kx, 2], columns[kx, 3]
                                x_cols[r, ky * fw + kx] = x_row + (plane * plane_len + q_shift) * width
                    if registers_path:
                        d_next, d_next_n, x_next, x_next_n = _next_rows(row + n_rows, rows, group_rows, geo, dy_off,
                                                                        dy_st, direct_dy, x_off, x_st, direct_x)
                        _lane_rows(lanes, width, ds, d_rows, n_rows, xs, x_cols, tap_lo, tap_hi, d_next, d_next_n,
                                   x_next, x_next_n, shift)
                    elif narrow_path:
                        narrow_rows(vector_lanes, width, ds, d_rows, n_rows, xs, x_row_at, tap_lo, tap_hi, out_w, in_w,
                                    fw, padded_fw, pl, dw, x_buf, staged_x_rows, slot_rows, probe)
                        # the channels past the last whole vector
                        _lane_rows_in_memory(lanes, width, ds, d_rows, n_rows, xs, x_cols, tap_lo, tap_hi,
                                             width - width % v)
                    else:
                        _lane_rows_in_memory(lanes, width, ds, d_rows, n_rows, xs, x_cols, tap_lo, tap_hi, 0)
                    row += n_rows
                if narrow_path:
                    add_narrow_lanes(lanes, vector_lanes, width, fw, padded_fw, partial[chunk].reshape(-1))
                else:
                    _add_lanes(lanes, width, partial[chunk].reshape(-1), shift)
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
