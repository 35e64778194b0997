"""Microkernels of step 1, the row sum (package docstring; SPEC 3.4, 3.7), and the other sums
of whole source rows: ``_product_taps`` lists a work item's source rows and weights,
``_sum_rows`` adds up to four source rows per pass (``_add_rows``, which
calls the generated microkernels of ``row_sum_template.py`` that ``selection.ROW_SUMS`` names),
``_pixel_sums`` sums nearest NHWC pixels straight from their source
rows, ``_prefetch_part`` requests the rows the next work item adds.

Row helpers are inlined into their callers by numba (``inline="always"``): a real call per row
costs reference counting on every array argument and hides constant arguments from LLVM. Hot
loops index the flat buffers with unsigned integers: NumPy-style negative index wraparound code
would stop LLVM from vectorising them, and slicing inside the row loop would cost reference-count
updates.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

from .. import simd
from .codecs import _load
from .selection import ROW_SUMS, row_sum_microkernel


@njit(inline="always")
def _product_taps(tap_base, tap_weight, src_offset, s0, s1, s2, ptr0, src0, weight0, ptr1, src1, weight1, ptr2, src2,
                  weight2, i0, i1, i2):
    """The source rows of work item ``(i0, i1, i2)``: every product of its taps on the three outer
    axes, axis 0 outermost, each row's flat offset in ``tap_base`` and its weight, ``(w0 * w1) *
    w2`` rounded to float32 at each product (SPEC 3.7), in ``tap_weight``; returns how many."""
    taps = np.int64(0)  # not Literal[int](0): see _fast/__init__
    for k0 in range(ptr0[i0], ptr0[i0 + 1]):
        for k1 in range(ptr1[i1], ptr1[i1 + 1]):
            w01 = np.float32(weight0[k0]) * weight1[k1]
            for k2 in range(ptr2[i2], ptr2[i2 + 1]):
                tap_base[taps] = src_offset + src0[k0] * s0 + src1[k1] * s1 + src2[k2] * s2
                tap_weight[taps] = w01 * weight2[k2]
                taps += 1
    return taps


@njit(inline="always")
def _next_item(i0, i1, i2, n1, n2):
    """The work item after ``(i0, i1, i2)``, axis 2 fastest (no division per item)."""
    i2 += 1
    if i2 == n2:
        i2 = 0
        i1 += 1
        if i1 == n1:
            i1 = 0
            i0 += 1
    return i0, i1, i2


@njit(inline="always")
def _prefetch_part(src, ahead, ahead_rows, first, last):
    """Requests ``src[ahead[r] + first : ahead[r] + last]`` into L2 for ``r < ahead_rows``, one
    prefetch per 64-byte line: the source rows the next work item adds, a share per part of this
    item's loop, so that their memory reads overlap its sums instead of following them."""
    for r in range(ahead_rows):
        simd.prefetch_l2_range(src, ahead[r] + first, ahead[r] + last)


# Step 1's microkernels (``row_sum_template.py``), per (rows per pass, weighted): ``selection.ROW_SUMS``.
_add4_weighted, _add4_plain, _add2_weighted, _add2_plain, _add1_weighted, _add1_plain = (
    row_sum_microkernel(ROW_SUMS[rows, weighted]) for rows in (4, 2, 1) for weighted in (True, False))


@njit(inline="always")
def _add_rows(acc, a, src, b0, b1, b2, b3, w0, w1, w2, w3, n, rows, weighted, first, zero):
    """``acc[a + c] = (zero if first else acc[a + c]) + sum over the first ``rows`` (1, 2 or 4)
    of ``w_r * src[b_r + c]``, summed as ((r0 + r1) + (r2 + r3)), for ``c < n``: the generated
    microkernel of ``rows`` and ``weighted``."""
    if rows == 4:
        if weighted:
            _add4_weighted(acc, a, src, b0, b1, b2, b3, w0, w1, w2, w3, n, first, zero)
        else:
            _add4_plain(acc, a, src, b0, b1, b2, b3, n, first, zero)
    elif rows == 2:
        if weighted:
            _add2_weighted(acc, a, src, b0, b1, w0, w1, n, first, zero)
        else:
            _add2_plain(acc, a, src, b0, b1, n, first, zero)
    elif weighted:
        _add1_weighted(acc, a, src, b0, w0, n, first, zero)
    else:
        _add1_plain(acc, a, src, b0, n, first, zero)


@njit(inline="always")
def _sum_rows(acc, start, src, bases, weights, taps, shift, count, step, weighted, zero):
    """``acc[start + c] = zero + sum over t < taps of weights[t] * src[bases[t] + shift + c * step]``
    for ``c < count``. Unit steps add four (then two, one) source rows per pass over ``acc``."""
    zero = np.float32(zero)
    a = np.uint64(start)
    n = np.uint64(count)
    if taps == 0 or step != 1:
        for c in range(n):
            acc[a + c] = zero
    if step != 1:
        for t in range(taps):
            for c in range(count):
                acc[a + np.uint64(c)] += weights[t] * _load(src, np.uint64(bases[t] + shift + c * step))
        return
    t = 0
    while t < taps:
        rows = 4 if taps - t >= 4 else (2 if taps - t >= 2 else 1)
        last = t + rows - 1
        _add_rows(acc, a, src, np.uint64(bases[t] + shift), np.uint64(bases[min(t + 1, last)] + shift),
                  np.uint64(bases[min(t + 2, last)] + shift), np.uint64(bases[last] + shift),
                  weights[t], weights[min(t + 1, last)], weights[min(t + 2, last)], weights[last],
                  n, rows, weighted, t == 0, zero)
        t += rows


def _pixel_sums(dst, base, d3, src, tap_base, taps, shift, slot, column0, columns, units, vector, zero):
    """``dst[base + j * d3 + u] = zero + sum over t < taps of (-0.0 + sum over k < count of
    src[tap_base[t] + shift + (first + k) * units + u])``, in that order, for column ``c = column0
    + j`` whose ``count`` real slots are the consecutive source columns from ``first`` (see
    ``_consecutive_slots``): unweighted (nearest) NHWC pixels of float32 read straight from their
    source rows. Skipping the padding slots gives what adding their -0.0 would. Whole vectors are
    summed in registers, the units past them in ``vector``. A no-op for other types, which never
    get here."""


@overload(_pixel_sums, inline="always")
def _pixel_sums_impl(dst, base, d3, src, tap_base, taps, shift, slot, column0, columns, units, vector, zero):
    if dst.dtype != types.float32:
        return lambda dst, base, d3, src, tap_base, taps, shift, slot, column0, columns, units, vector, zero: None
    return _pixel_sums_float32


def _pixel_sums_float32(dst, base, d3, src, tap_base, taps, shift, slot, column0, columns, units, vector, zero):
    n = np.uint64(units)
    one = np.uint32(1)
    lanes = np.uint64(simd.lanes(dst))
    for j in range(columns):
        c = np.uint64(column0 + j)
        out = np.uint64(base + j * d3)
        count = 0
        for k in range(slot.shape[1]):
            count += slot[c, k] != 0
        first = np.uint64(shift) + (max(slot[c, 0], one) - one) * n
        u = np.uint64(0)
        while u + lanes <= n:
            acc = simd.splat(dst, zero)
            for t in range(taps):
                column = np.uint64(tap_base[t]) + first + u
                row = simd.splat(dst, -0.0)
                for _ in range(count):
                    row = simd.add(row, simd.load(src, column))
                    column += n
                acc = simd.add(acc, row)
            simd.store(dst, out + u, acc)
            u += lanes
        if u < n:
            rest = n - u
            for i in range(rest):
                vector[i] = zero
            for t in range(taps):
                column = np.uint64(tap_base[t]) + first + u
                for i in range(rest):
                    vector[rest + i] = -0.0
                for _ in range(count):
                    for i in range(rest):
                        vector[rest + i] += src[column + i]
                    column += n
                for i in range(rest):
                    vector[i] += vector[rest + i]
            for i in range(rest):
                dst[out + u + i] = vector[i]


@njit(inline="always")
def _consecutive_slots(slot):
    """Whether every column's real slots (nonzero) come first and are consecutive source columns."""
    for c in range(slot.shape[0]):
        for k in range(1, slot.shape[1]):
            if slot[c, k] != 0 and (slot[c, k - 1] == 0 or slot[c, k] != slot[c, k - 1] + 1):
                return False
    return True
