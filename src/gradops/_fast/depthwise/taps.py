"""Tap runs of one row segment: ``acc[a + j] = +0 + sum over taps t, in order, of src[s_t + j] *
weight_t`` for any set of taps (SPEC 5.4; the summation order is the package docstring's).

* Planar runs (``_scaled1``, ``_scaled4``; planar rows are ``[k][position]``, one scalar weight
  per (k, tap)) take their taps 4 at a time: one load and store of the accumulator per 4.
* Channels-last runs (``_taps_blocked``; rows are ``[position][k]``, so one tap covers a contiguous
  run of (position, k) and a SIMD vector spans consecutive k) go in blocks of 4 positions x 2
  vectors of k (``_taps_4x2``): 8 sums stay in registers over all the taps, so each weight
  vector is loaded once per block and no partial sum goes through memory. The channels past the
  last whole vector go through masked vectors (``_channel_tail``).

Taps that reach only padding are never passed here (``planes.py`` lists the taps of a segment).
The faster paths for whole filter rows are in ``rows.py``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import row_njit, simd
from .codecs import _put

# Planar runs: a group of 4 taps loads and stores the accumulator once: a[j] + p0 + p1 evaluates
# as (a[j] + p0) + p1, the same additions in the same order as one tap at a time. The first group
# of a plane writes 0 + p0 + ... instead of reading a zeroed accumulator (0 + p0 keeps the sum's
# start at +0, as a zeroed accumulator would).
_ZERO = np.float32(0)


@row_njit
def _scaled1(acc, a0, n, src, s0, f0, first):
    a = acc[a0:a0 + n]
    x0 = src[s0:s0 + n]
    if first:
        for j in range(n):
            a[j] = _ZERO + x0[j] * f0
    else:
        for j in range(n):
            a[j] += x0[j] * f0


@row_njit
def _scaled4(acc, a0, n, src, s0, s1, s2, s3, f0, f1, f2, f3, first):
    a = acc[a0:a0 + n]
    x0 = src[s0:s0 + n]
    x1 = src[s1:s1 + n]
    x2 = src[s2:s2 + n]
    x3 = src[s3:s3 + n]
    if first:
        for j in range(n):
            a[j] = _ZERO + x0[j] * f0 + x1[j] * f1 + x2[j] * f2 + x3[j] * f3
    else:
        for j in range(n):
            a[j] = a[j] + x0[j] * f0 + x1[j] * f1 + x2[j] * f2 + x3[j] * f3



@njit(inline="always")
def _taps_4x2(acc, a, step, pitch, src, s, wt, taps, j, count, lanes, stream):
    """Positions 0-3 x vectors j, j + lanes of ``_taps_blocked``: 8 accumulators in registers."""
    b0 = simd.zeros(acc)
    b1 = b2 = b3 = c0 = c1 = c2 = c3 = b0
    for t in range(count):
        w = simd.load(wt, taps[t] + j)
        v = simd.load(wt, taps[t] + j + lanes)
        p = s[t] + j
        b0 = simd.muladd(b0, simd.load(src, p), w)
        c0 = simd.muladd(c0, simd.load(src, p + lanes), v)
        b1 = simd.muladd(b1, simd.load(src, p + pitch), w)
        c1 = simd.muladd(c1, simd.load(src, p + pitch + lanes), v)
        b2 = simd.muladd(b2, simd.load(src, p + 2 * pitch), w)
        c2 = simd.muladd(c2, simd.load(src, p + 2 * pitch + lanes), v)
        b3 = simd.muladd(b3, simd.load(src, p + 3 * pitch), w)
        c3 = simd.muladd(c3, simd.load(src, p + 3 * pitch + lanes), v)
    p = a + j
    _put(acc, p, b0, stream)
    _put(acc, p + lanes, c0, stream)
    _put(acc, p + step, b1, stream)
    _put(acc, p + step + lanes, c1, stream)
    _put(acc, p + 2 * step, b2, stream)
    _put(acc, p + 2 * step + lanes, c2, stream)
    _put(acc, p + 3 * step, b3, stream)
    _put(acc, p + 3 * step + lanes, c3, stream)


@njit(inline="always")
def _taps_4x1(acc, a, step, pitch, src, s, wt, taps, j, count, stream):
    """Positions 0-3 x vector j of ``_taps_blocked``."""
    b0 = simd.zeros(acc)
    b1 = b2 = b3 = b0
    for t in range(count):
        w = simd.load(wt, taps[t] + j)
        p = s[t] + j
        b0 = simd.muladd(b0, simd.load(src, p), w)
        b1 = simd.muladd(b1, simd.load(src, p + pitch), w)
        b2 = simd.muladd(b2, simd.load(src, p + 2 * pitch), w)
        b3 = simd.muladd(b3, simd.load(src, p + 3 * pitch), w)
    p = a + j
    _put(acc, p, b0, stream)
    _put(acc, p + step, b1, stream)
    _put(acc, p + 2 * step, b2, stream)
    _put(acc, p + 3 * step, b3, stream)


@njit(inline="always")
def _taps_1x4(acc, a, src, s, wt, taps, j, count, lanes, stream):
    """One position x vectors j .. j + 3 lanes of ``_taps_blocked``: 4 independent sums (one sum
    alone would wait on the latency of each addition)."""
    b0 = simd.zeros(acc)
    b1 = b2 = b3 = b0
    for t in range(count):
        p = s[t] + j
        w = taps[t] + j
        b0 = simd.muladd(b0, simd.load(src, p), simd.load(wt, w))
        b1 = simd.muladd(b1, simd.load(src, p + lanes), simd.load(wt, w + lanes))
        b2 = simd.muladd(b2, simd.load(src, p + 2 * lanes), simd.load(wt, w + 2 * lanes))
        b3 = simd.muladd(b3, simd.load(src, p + 3 * lanes), simd.load(wt, w + 3 * lanes))
    _put(acc, a + j, b0, stream)
    _put(acc, a + j + lanes, b1, stream)
    _put(acc, a + j + 2 * lanes, b2, stream)
    _put(acc, a + j + 3 * lanes, b3, stream)


@njit(inline="always")
def _channel_tail(acc, a, step, width, pitch, positions, src, so, shift, wt, taps, count, k0):
    """Channels ``k0 .. width`` (fewer than a vector) of ``positions`` positions: ``acc[a + p*step
    + k] = +0 + sum over t, in order, of src[so[t] + shift + p*pitch + k] * wt[taps[t] + k]``, in
    the first lanes of one masked vector per position (same products and additions per lane as
    the full vectors; the lanes past ``width`` are neither read nor written), since scalar sums
    here would cost more than the whole vectors before them."""
    n = width - k0
    if n <= 0:
        return
    for p in range(positions):
        b = simd.zeros(acc)
        for t in range(count):
            b = simd.muladd(b, simd.load_first(src, so[t] + shift + p * pitch + k0, n),
                            simd.load_first(wt, taps[t] + k0, n))
        simd.store_first(acc, a + p * step + k0, b, n)


@row_njit
def _taps_blocked(acc, a0, step, width, pitch, n_pos, src, so, wt, taps, count, shifted, stream):
    """``acc[a0 + q*step + j] = +0 + sum over t < count, in order, of src[so[t] + q*pitch + j] *
    wt[taps[t] + j]`` for q < n_pos, j < width (channels-last positions; ``step`` >= ``width``
    spaces the accumulator's positions, e.g. every ``sw``-th position of a dx row). Blocks of 4
    positions x 2 vectors keep 8 accumulators in registers over all taps: each weight vector is
    loaded once per block, and no partial sum goes through memory. Every lane and the masked tail
    compute the same products and additions in the same order. ``stream``: whole vectors are
    written with non-temporal stores (each on a 64-byte line)."""
    lanes = simd.lanes(acc)
    q = 0
    while q < n_pos:
        block = 4 if n_pos - q >= 4 else 1
        a = a0 + q * step
        for t in range(count):
            shifted[t] = so[t] + q * pitch
        j = 0
        if block == 4:
            while j + 2 * lanes <= width:
                _taps_4x2(acc, a, step, pitch, src, shifted, wt, taps, j, count, lanes, stream)
                j += 2 * lanes
            while j + lanes <= width:
                _taps_4x1(acc, a, step, pitch, src, shifted, wt, taps, j, count, stream)
                j += lanes
        else:
            while j + 4 * lanes <= width:
                _taps_1x4(acc, a, src, shifted, wt, taps, j, count, lanes, stream)
                j += 4 * lanes
            while j + lanes <= width:
                b = simd.zeros(acc)
                for t in range(count):
                    b = simd.muladd(b, simd.load(src, shifted[t] + j), simd.load(wt, taps[t] + j))
                _put(acc, a + j, b, stream)
                j += lanes
        _channel_tail(acc, a, step, width, pitch, block, src, shifted, 0, wt, taps, count, j)
        q += block
