"""Staging: source rows to float rows of the canonical layouts, and the column map of the taps.

Forward and backprop input convert the source rows a job needs once into a small ring of float
rows (or read them in place when they already are float rows of the canonical layout). Canonical
layouts: ``channels-last`` rows are ``[position][k]``, positions ``pitch`` apart
(``plan._pitch``); ``planar`` rows (chosen when W is the unit-stride axis, e.g. NCHW) are
``[k][position]``. Strided rows are staged as ``s`` residue planes (``planes.py``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import row_njit
from .codecs import _load_one, _load_run


@njit(inline="always")
def _column_taps(fw, dil_w, pad_left, stride_w, out_w, in_w):
    """Row kx = (ox_lo, ox_hi, r, q_shift) for filter column kx: ``ix = ox*stride_w + shift`` for
    ox in [ox_lo, ox_hi) lands in [0, in_w); residue plane r = shift mod stride_w holds ix at q =
    ox + q_shift. The same for every row, so computed once per call (it takes four divisions)."""
    table = np.empty((fw, 4), np.int64)
    for kx in range(fw):
        shift = kx * dil_w - pad_left
        r = shift % stride_w
        table[kx, 0] = max(0, -(shift // stride_w))
        table[kx, 1] = min(out_w, (in_w - 1 - shift) // stride_w + 1)
        table[kx, 2] = r
        table[kx, 3] = (shift - r) // stride_w
    return table


@njit(inline="always")
def _clear_margins(ring, first, rows, row_len, margin_l, n_pos, margin_r, pitch):
    """Zero the ``margin_l`` positions before and the ``margin_r`` after the ``n_pos`` staged ones
    of each of ``rows`` ring rows, ``row_len`` apart from ``first`` (``plan._zero_margins``,
    ``plan._forward_margins``): staging writes only the positions between them."""
    for slot in range(rows if margin_l + margin_r else 0):
        start = first + slot * row_len
        ring[start:start + margin_l * pitch] = 0
        ring[start + (margin_l + n_pos) * pitch:start + (margin_l + n_pos + margin_r) * pitch] = 0


@row_njit
def _stage_channels_last(src, base, pos_stride, ch_stride, n_pos, channels, repeat, planes, plane_len,
                         pitch, ring, dst, kind):
    """Row ``src[base + p*pos_stride + c*ch_stride]`` to ``ring[dst + ((p % planes)*plane_len +
    p // planes)*pitch + c*repeat + i]`` for i < repeat (channel c repeated ``repeat`` times, so a
    forward tap's x run lines up with its C*M outputs; ``pitch`` >= C*M spaces the positions)."""
    if repeat == 1 and planes == 1 and pos_stride == channels == pitch and ch_stride == 1:
        _load_run(src, base, 1, n_pos * channels, ring, dst, kind)
        return
    for p in range(n_pos):
        r = p % planes
        d = dst + (r * plane_len + p // planes) * pitch
        s = base + p * pos_stride
        if repeat == 1:
            _load_run(src, s, ch_stride, channels, ring, d, kind)
        else:
            for c in range(channels):
                value = _load_one(src, s + c * ch_stride, kind)
                for i in range(repeat):
                    ring[d + c * repeat + i] = value


@row_njit
def _stage_planar(src, base, pos_stride, ch_stride, n_pos, channels, planes, plane_len, ring, dst, kind):
    """Row ``src[base + p*pos_stride + c*ch_stride]`` to ``ring[dst + (c*planes + p % planes)*plane_len
    + p // planes]``."""
    for c in range(channels):
        for r in range(min(planes, n_pos)):
            count = (n_pos - r + planes - 1) // planes
            _load_run(src, base + c * ch_stride + r * pos_stride, planes * pos_stride, count, ring,
                      dst + (c * planes + r) * plane_len, kind)
