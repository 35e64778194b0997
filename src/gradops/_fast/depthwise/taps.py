"""Tap runs of one row segment: ``acc[a + j] = +0 + sum over taps t, in order, of src[s_t + j] *
weight_t`` for any set of taps (SPEC 5.4; the summation order is the package docstring's).

* Planar runs (``_scaled1``, ``_scaled4``; planar rows are ``[k][position]``, one scalar weight
  per (k, tap)) take their taps 4 at a time: one load and store of the accumulator per 4.
* Channels-last runs (``_taps_blocked``; rows are ``[position][k]``, so one tap covers a contiguous
  run of (position, k) and a SIMD vector spans consecutive k) go in tiles of 4 positions x 2
  vectors of k and smaller (generated from ``tile_template.py``): 8 sums stay in registers over
  all the taps, so each weight vector is loaded once per tile and no partial sum goes through
  memory. The channels past the last whole vector go through masked vectors (``_channel_tail``).

Taps that reach only padding are never passed here (``planes.py`` lists the taps of a segment).
The faster paths for whole filter rows are in ``rows.py``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import row_njit, simd
from ..target import codegen_target
from .selection import TILE_KERNELS, tier, tile_microkernel

# The tiles of ``_taps_blocked`` on the code-generation target (fixed per process).
_TILES = TILE_KERNELS[tier(codegen_target())]
_TILE_VECTOR_BYTES = _TILES.vector_bytes
_four_by_two, _four_by_one, _one_by_four, _one_by_one = (
    tile_microkernel(name) for name in (_TILES.four_by_two, _TILES.four_by_one, _TILES.one_by_four, _TILES.one_by_one))

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
    spaces the accumulator's positions, e.g. every ``sw``-th position of a dx row), in the tiles
    of this CPU tier (``selection.TILE_KERNELS``): 4 positions x 2 vectors, then x 1, for blocks
    of 4 positions; 1 x 4, then 1 x 1, for the last ones. Every lane and the masked tail compute
    the same products and additions in the same order. ``stream``: whole vectors are written with
    non-temporal stores (each on a 64-byte line)."""
    lanes = _TILE_VECTOR_BYTES // acc.itemsize
    q = 0
    while q < n_pos:
        block = 4 if n_pos - q >= 4 else 1
        a = a0 + q * step
        for t in range(count):
            shifted[t] = so[t] + q * pitch
        j = 0
        if block == 4:
            while j + 2 * lanes <= width:
                _four_by_two(acc, a, step, pitch, src, shifted, wt, taps, j, count, stream)
                j += 2 * lanes
            while j + lanes <= width:
                _four_by_one(acc, a, step, pitch, src, shifted, wt, taps, j, count, stream)
                j += lanes
        else:
            while j + 4 * lanes <= width:
                _one_by_four(acc, a, step, pitch, src, shifted, wt, taps, j, count, stream)
                j += 4 * lanes
            while j + lanes <= width:
                _one_by_one(acc, a, step, pitch, src, shifted, wt, taps, j, count, stream)
                j += lanes
        _channel_tail(acc, a, step, width, pitch, block, src, shifted, 0, wt, taps, count, j)
        q += block
