"""Backprop filter (SPEC 5.4): dF[ky, kx, c, m] = sum over (b, oy, ox) of dy * x.

Summation order of one filter element: 16 lanes (``_LANES``), lane ``ox % 16`` summing its
(row, ox) terms in order; lanes added in order; then a fixed number of row chunks
(``_CHUNKS``, independent of the thread count) added in order (``_combine_chunks``) and rounded
once. Each chunk is one job of the pool.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import row_njit
from ..pool import begin, claim, end, finish
from .codecs import _store_one
from .plan import _LANES
from .staging import _column_taps, _stage_channels_last, _stage_planar


@njit(cache=True, nogil=True)
def _backprop_filter_kernel(counters, epoch, role, pool_chunks, x, x_off, x_st, x_direct, direct_x, dy, dy_off, dy_st,
                            dy_direct, direct_dy, partial, geo, planar, kind):
    """``partial[chunk, tap, k]``: the chunk's rows summed lane by lane, lanes added in order."""
    n_batch, in_h, in_w, chans, mult, out_h, out_w = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6]
    fh, fw, sh, sw, dh, dw, pt, pl = geo[7], geo[8], geo[9], geo[10], geo[11], geo[12], geo[13], geo[14]
    width = chans * mult
    plane_len = (in_w + sw - 1) // sw
    x_row_len = (width if not planar else chans) * sw * plane_len
    ring_rows = min((fh - 1) * dh + 1, in_h)  # distinct x rows one dy row reads, at most all
    chunks = partial.shape[0]
    rows = n_batch * out_h
    columns = _column_taps(fw, dw, pl, sw, out_w, in_w)
    seen = begin(counters, epoch, role)
    items = chunks
    while True:
        pool_chunk = claim(counters)
        if pool_chunk >= pool_chunks:
            end(epoch, role, seen)
            return
        for chunk in range(pool_chunk * items // pool_chunks, (pool_chunk + 1) * items // pool_chunks):
            lanes = np.zeros(fh * fw * _LANES * width, partial.dtype)  # [tap][lane][k] or [tap][k][lane]
            ring = np.empty(0 if direct_x else ring_rows * x_row_len, partial.dtype)
            tags = np.full(ring_rows, -1, np.int64)
            xs = x_direct if direct_x else ring
            dy_row = np.empty(0 if direct_dy else out_w * width, partial.dtype)
            ds = dy_direct if direct_dy else dy_row
            for row in range(chunk * rows // chunks, (chunk + 1) * rows // chunks):
                b = row // out_h
                oy = row - b * out_h
                if direct_dy:
                    d0 = dy_off + b * dy_st[0] + oy * dy_st[1]
                    d_ch = dy_st[3]
                else:
                    d0, d_ch = 0, out_w
                    if planar:
                        _stage_planar(dy, dy_off + b * dy_st[0] + oy * dy_st[1], dy_st[2], dy_st[3], out_w, width, 1,
                                      out_w, dy_row, 0, kind)
                    else:
                        _stage_channels_last(dy, dy_off + b * dy_st[0] + oy * dy_st[1], dy_st[2], dy_st[3], out_w,
                                             width, 1, 1, out_w, width, dy_row, 0, kind)
                for ky in range(fh):
                    iy = oy * sh - pt + ky * dh
                    if iy < 0 or iy >= in_h:
                        continue
                    if direct_x:
                        x_row = x_off + b * x_st[0] + iy * x_st[1]
                        x_ch = x_st[3]
                    else:
                        slot = iy % ring_rows
                        x_row = slot * x_row_len
                        x_ch = sw * plane_len
                        if tags[slot] != b * in_h + iy:
                            tags[slot] = b * in_h + iy
                            if planar:
                                _stage_planar(x, x_off + b * x_st[0] + iy * x_st[1], x_st[2], x_st[3], in_w, chans, sw,
                                              plane_len, ring, x_row, kind)
                            else:
                                _stage_channels_last(x, x_off + b * x_st[0] + iy * x_st[1], x_st[2], x_st[3], in_w,
                                                     chans, mult, sw, plane_len, chans * mult, ring, x_row, kind)
                    for kx in range(fw):
                        ox_lo, ox_hi, r, q_shift = columns[kx, 0], columns[kx, 1], columns[kx, 2], columns[kx, 3]
                        if ox_hi <= ox_lo:
                            continue
                        t = ky * fw + kx
                        if planar:
                            x_col = x_row + r * plane_len + q_shift  # as in the forward kernel
                            for k in range(width):
                                _lane_dot(lanes, (t * width + k) * _LANES, ds, d0 + k * d_ch,
                                          xs, x_col + (k // mult) * x_ch, ox_lo, ox_hi)
                        else:
                            x_col = x_row + (r * plane_len + q_shift) * width
                            for ox in range(ox_lo, ox_hi):
                                lane = lanes[(t * _LANES + ox % _LANES) * width:(t * _LANES + ox % _LANES + 1) * width]
                                dd = ds[d0 + ox * width:d0 + (ox + 1) * width]
                                xx = xs[x_col + ox * width:x_col + (ox + 1) * width]
                                for k in range(width):
                                    lane[k] += dd[k] * xx[k]
            for t in range(fh * fw):
                for k in range(width):
                    if planar:
                        first, step = (t * width + k) * _LANES, 1
                    else:
                        first, step = t * _LANES * width + k, width
                    total = lanes[first]
                    for lane in range(1, _LANES):
                        total += lanes[first + lane * step]
                    partial[chunk, t, k] = total
        finish(counters)


@row_njit
def _lane_dot(lanes, base, d, d0, xs, x0, lo, hi):
    """lanes[base + ox % LANES] += d[d0 + ox] * xs[x0 + ox] for ox in [lo, hi), ox ascending."""
    ox = lo
    while ox < hi and ox % _LANES != 0:
        lanes[base + ox % _LANES] += d[d0 + ox] * xs[x0 + ox]
        ox += 1
    lane = lanes[base:base + _LANES]
    while ox + _LANES <= hi:
        dd = d[d0 + ox:d0 + ox + _LANES]
        xx = xs[x0 + ox:x0 + ox + _LANES]
        for j in range(_LANES):
            lane[j] += dd[j] * xx[j]
        ox += _LANES
    while ox < hi:
        lanes[base + ox % _LANES] += d[d0 + ox] * xs[x0 + ox]
        ox += 1


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
