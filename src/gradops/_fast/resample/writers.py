"""Writers of step 2, the column axis (package docstring; SPEC 3.4, 3.7): each computes a
destination row's columns from the row sum or straight from the source rows and stores them,
rounded once to the output type, with plain or non-temporal stores.

* ``_store_run``: a copy (the column axis is not resampled);
* ``_store_gathered``: NCHW columns through the padded slot table, one by one;
* ``_store_units``: NHWC pixels from the row sum, four-slot pixels through ``_store_slots4``,
  which also streams them; pixels summed in memory first through the generated microkernels
  of ``column_template.py`` (``selection.SLOT_RUNS``);
* ``_store_direct``: NHWC pixels of one or two slots read straight from one or two source rows
  (``_direct_units``, streamed by ``_stream_direct``);
* ``_store_pixel_sums``: nearest float32 NHWC pixels summed straight from their source rows.

``_store_direct`` and ``_store_pixel_sums`` are called once per row and not inlined, which keeps
the kernel (and how LLVM optimises its NCHW loops) small; ``_store_direct`` is compiled per
(slots, weighted) of the plan, ``_stream_direct`` once per literal ``(taps, slots, weighted)``;
the others are inlined into their callers.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit, types
from numba.extending import overload

from .. import half, simd
from ..numba_internals import NO_REFCOUNT, NoAliasCompiler
from .affine import _masked, _masked_sum
from .codecs import _load, _store
from .rows import _pixel_sums, _prefetch_part
from .selection import SLOT_RUNS, SLOT_SUMS, column_microkernel, row_sum_microkernel

# Pixels summed in memory first (``column_template.py``): ``selection.SLOT_RUNS``.
_add_slots4_weighted, _add_slots4_plain, _add_slots1_weighted = (
    column_microkernel(SLOT_RUNS[key]) for key in ((4, True), (4, False), (1, True)))
# A vector of a four-slot pixel (``row_sum_template.py``): ``selection.SLOT_SUMS``.
_slots4_weighted, _slots4_plain = row_sum_microkernel(SLOT_SUMS[True]), row_sum_microkernel(SLOT_SUMS[False])


def _stream_direct(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots, weighted,
                   zero):
    """``_direct_units`` (the same sums) in vectors written with non-temporal stores, for a row
    of pixels that start on 64-byte lines (``units`` a multiple of the lane count). float32
    only: nothing else streams, so other types get a no-op."""


# prefer_literal: one specialisation per (taps, slots, weighted), whose branches fold away, as the
# literal arguments of _direct_units do.
@overload(_stream_direct, prefer_literal=True)
def _stream_direct_impl(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots,
                        weighted, zero):
    if dst.dtype != types.float32:
        return lambda dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots, \
            weighted, zero: None

    def stream(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots, weighted, zero):
        n = np.uint64(units)
        lanes = np.uint64(simd.lanes(dst))
        z, row0, row1 = simd.splat(dst, zero), simd.splat(dst, w0), simd.splat(dst, w1)
        for j in range(columns):
            out = np.uint64(base + j * d3)
            s0, s1, v0, v1 = _outer_slots(slot, weight, column0 + j, slots, n)
            for u in range(np.uint64(0), n, lanes):
                first = _slot_vector(src, b0 + s0 + u, v0, weighted)
                if slots == 2:
                    first = simd.add(first, _slot_vector(src, b0 + s1 + u, v1, weighted))
                if weighted:
                    first = simd.mul(row0, first)
                if taps == 2:
                    second = _slot_vector(src, b1 + s0 + u, v0, weighted)
                    if slots == 2:
                        second = simd.add(second, _slot_vector(src, b1 + s1 + u, v1, weighted))
                    first = simd.add(first, simd.mul(row1, second) if weighted else second)
                simd.store_stream(dst, out + u, simd.add(z, first))
    return stream


@njit(inline="always")
def _slot_vector(src, start, weight, weighted):
    """``_masked`` / ``_masked_sum`` of one vector: a padding slot (weight 0, reading the block's
    first column as the scalar code does) gives -0.0; selects, not branches."""
    value = simd.load(src, start)
    term = simd.choose(weighted, simd.mul(simd.splat(src, weight), value), value)
    return simd.choose(weight == 0, simd.splat(src, -0.0), term)


def _store_slots4(dst, b, row_sum, s0, s1, s2, s3, w0, w1, w2, w3, n, weighted, zero, stream):
    """``dst[b + u] = zero + ((w0 * row_sum[s0 + u] + w1 * row_sum[s1 + u]) + (w2 * row_sum[s2 + u]
    + w3 * row_sum[s3 + u]))`` for ``u < n`` (the products dropped when not ``weighted``);
    ``stream``: with non-temporal stores (see ``_contract`` in kernels.py)."""


@overload(_store_slots4, inline="always")
def _store_slots4_impl(dst, b, row_sum, s0, s1, s2, s3, w0, w1, w2, w3, n, weighted, zero, stream):
    vectors = dst.dtype == types.float32
    # float16 bits (``_streams``: whole 64-byte lines per pixel): float32 vectors of the row sum,
    # rounded to float16 as they are stored (as ``half.encode``).
    half_lines = dst.dtype == types.uint16 and half.HARDWARE_HALF

    def store(dst, b, row_sum, s0, s1, s2, s3, w0, w1, w2, w3, n, weighted, zero, stream):
        u = np.uint64(0)
        if half_lines and stream:
            lanes = np.uint64(simd.lanes(row_sum))
            z = simd.splat(row_sum, zero)
            if weighted:
                v0, v1 = simd.splat(row_sum, w0), simd.splat(row_sum, w1)
                v2, v3 = simd.splat(row_sum, w2), simd.splat(row_sum, w3)
                while u + lanes <= n:
                    simd.store_stream_half(dst, b + u, _slots4_weighted(row_sum, u, s0, s1, s2, s3, v0, v1, v2, v3, z))
                    u += lanes
            else:
                while u + lanes <= n:
                    simd.store_stream_half(dst, b + u, _slots4_plain(row_sum, u, s0, s1, s2, s3, z))
                    u += lanes
        if vectors:
            # Explicit vectors: for NHWC pixels of a few vectors, LLVM's vectorised loop spends
            # more on its set-up and remainder than on the pixel.
            lanes = np.uint64(simd.lanes(dst))
            z = simd.splat(dst, zero)
            if weighted:
                v0, v1, v2, v3 = simd.splat(dst, w0), simd.splat(dst, w1), simd.splat(dst, w2), simd.splat(dst, w3)
                if stream:
                    while u + lanes <= n:
                        simd.store_stream(dst, b + u, _slots4_weighted(row_sum, u, s0, s1, s2, s3, v0, v1, v2, v3, z))
                        u += lanes
                else:
                    while u + lanes <= n:
                        simd.store(dst, b + u, _slots4_weighted(row_sum, u, s0, s1, s2, s3, v0, v1, v2, v3, z))
                        u += lanes
            elif stream:
                while u + lanes <= n:
                    simd.store_stream(dst, b + u, _slots4_plain(row_sum, u, s0, s1, s2, s3, z))
                    u += lanes
            else:
                while u + lanes <= n:
                    simd.store(dst, b + u, _slots4_plain(row_sum, u, s0, s1, s2, s3, z))
                    u += lanes
        if weighted:
            for i in range(u, n):
                _store(dst, b + i, zero + ((w0 * row_sum[s0 + i] + w1 * row_sum[s1 + i])
                                           + (w2 * row_sum[s2 + i] + w3 * row_sum[s3 + i])))
        else:
            for i in range(u, n):
                _store(dst, b + i, zero + ((row_sum[s0 + i] + row_sum[s1 + i])
                                           + (row_sum[s2 + i] + row_sum[s3 + i])))
    return store


@njit(inline="always")
def _store_run(dst, base, step, values, start, count):
    """``dst[base + j * step] = values[start + j]`` for ``j < count``, rounded to dst's type."""
    v = np.uint64(start)
    if step == 1:
        b = np.uint64(base)
        for j in range(np.uint64(count)):
            _store(dst, b + j, values[v + j])
    else:
        for j in range(count):
            _store(dst, np.uint64(base + j * step), values[v + np.uint64(j)])


@njit(inline="always")
def _store_gathered(dst, base, step, row_sum, slot, weight, column0, count, weighted, zero):
    """``dst[base + j * step] = zero + sum over k of weight[c, k] * row_sum[slot[c, k]]`` with
    ``c = column0 + j``, ``j < count`` (unit size 1): one register accumulator per column.
    Tables have 1, 2 or 4m slots, summed in groups of four."""
    zero = np.float32(zero)
    slots = slot.shape[1]
    first = np.uint64(column0)
    for j in range(np.uint64(count)):
        c = first + j
        out = np.uint64(base + np.int64(j) * step)
        if slots == 1:
            v = row_sum[slot[c, 0]]
            _store(dst, out, zero + (weight[c, 0] * v if weighted else v))
        elif slots == 2:
            if weighted:
                _store(dst, out, zero + (weight[c, 0] * row_sum[slot[c, 0]] + weight[c, 1] * row_sum[slot[c, 1]]))
            else:
                _store(dst, out, zero + (row_sum[slot[c, 0]] + row_sum[slot[c, 1]]))
        else:
            acc = zero
            for k in range(np.uint64(0), np.uint64(slots), np.uint64(4)):
                k1, k2, k3 = k + np.uint64(1), k + np.uint64(2), k + np.uint64(3)
                if weighted:
                    acc += ((weight[c, k] * row_sum[slot[c, k]] + weight[c, k1] * row_sum[slot[c, k1]])
                            + (weight[c, k2] * row_sum[slot[c, k2]] + weight[c, k3] * row_sum[slot[c, k3]]))
                else:
                    acc += ((row_sum[slot[c, k]] + row_sum[slot[c, k1]])
                            + (row_sum[slot[c, k2]] + row_sum[slot[c, k3]]))
            _store(dst, out, acc)


@njit(inline="always")
def _outer_slots(slot, weight, column, slots, n):
    """(start, start, weight, weight) of the first and the last slot of ``column`` in a source row
    of ``n``-element columns; a padding slot (0) starts at the row's first column (its weight 0
    masks what it reads)."""
    c = np.uint64(column)
    one = np.uint32(1)
    return ((max(slot[c, 0], one) - one) * n, (max(slot[c, slots - 1], one) - one) * n,
            weight[c, 0], weight[c, slots - 1])


@njit(inline="always")
def _direct_units(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots, weighted,
                  zero):
    """``dst[base + j * d3 + u] = zero + sum over t < taps of w_t * sum over k < slots of
    weight[c, k] * src[b_t + (slot[c, k] - 1) * units + u]``, ``c = column0 + j``: the column
    axis read straight from one or two source rows, skipping the row sum. Inlined with literal
    ``taps``, ``slots`` and ``weighted``. Padding slots read the block's first column, masked."""
    n = np.uint64(units)
    for j in range(columns):
        out = np.uint64(base + j * d3)
        s0, s1, v0, v1 = _outer_slots(slot, weight, column0 + j, slots, n)
        for u in range(n):
            if weighted:
                first = _masked(v0, _load(src, b0 + s0 + u))
                if slots == 2:
                    first += _masked(v1, _load(src, b0 + s1 + u))
            else:
                first = _masked_sum(v0, _load(src, b0 + s0 + u))
                if slots == 2:
                    first += _masked_sum(v1, _load(src, b0 + s1 + u))
            if taps == 2:
                if weighted:
                    second = _masked(v0, _load(src, b1 + s0 + u))
                    if slots == 2:
                        second += _masked(v1, _load(src, b1 + s1 + u))
                    total = w0 * first + w1 * second
                else:
                    second = _masked_sum(v0, _load(src, b1 + s0 + u))
                    if slots == 2:
                        second += _masked_sum(v1, _load(src, b1 + s1 + u))
                    total = first + second
            else:
                total = w0 * first if weighted else first
            _store(dst, out + u, zero + total)


@njit(inline="always")
def _direct_row(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots, weighted,
                zero, stream):
    """``_direct_units``, or with ``stream`` ``_stream_direct``, with literal ``taps``, ``slots``
    and ``weighted``."""
    if stream:
        _stream_direct(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots,
                       weighted, zero)
    else:
        _direct_units(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots,
                      weighted, zero)


def _store_direct(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots, weighted,
                  zero, stream):
    """``_direct_units`` for one or two source rows (``taps``, per row) and pixels of ``slots``
    (1 or 2) slots, ``weighted`` or not (both fixed by the call's plan, literals): the compiled
    function of ``_store_direct_for``."""


@overload(_store_direct, inline="always", prefer_literal=True)
def _store_direct_impl(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots,
                       weighted, zero, stream):
    if not (isinstance(slots, types.IntegerLiteral) and isinstance(weighted, types.IntegerLiteral)):
        return None
    store = _store_direct_for(slots.literal_value, bool(weighted.literal_value))
    return lambda dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, slots, weighted, \
        zero, stream: store(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, zero,
                            stream)


@functools.cache
def _store_direct_for(slots: int, weighted: bool):
    """``_store_direct`` for pixels of ``slots`` slots, ``weighted`` or not, as closure constants:
    a call compiles the two row loops (one or two source rows) of its plan, each plain and
    streamed, not those of every (slots, weighted) (issue 23, cold start: 7.3 of a first NHWC
    forward call's 15.4 CPU s went to all eight). Called once per row and not inlined, which keeps
    ``_contract`` (and how LLVM optimises its NCHW loops) small; no reference counting of its
    array arguments (``_nrt=False``, see ``_fast/__init__``)."""
    @njit(nogil=True, cache=True, pipeline_class=NoAliasCompiler, **NO_REFCOUNT)
    def _store_direct_rows(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, taps, zero,
                           stream):
        """``stream``: with non-temporal stores (``_stream_direct``). The closure constants are
        pruned before typing: only one ``weighted`` branch is compiled."""
        zero = np.float32(zero)
        if weighted:
            if taps == 1:
                _direct_row(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, 1, slots,
                            True, zero, stream)
            else:
                _direct_row(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, 2, slots,
                            True, zero, stream)
        elif taps == 1:
            _direct_row(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, 1, slots, False,
                        zero, stream)
        else:
            _direct_row(dst, base, d3, src, b0, b1, w0, w1, slot, weight, column0, columns, units, 2, slots, False,
                        zero, stream)

    return _store_direct_rows


@njit(nogil=True, cache=True, pipeline_class=NoAliasCompiler, **NO_REFCOUNT)
def _store_pixel_sums(dst, base, d3, src, tap_base, taps, shift, slot, column0, columns, units, vector, zero):
    """``_pixel_sums``, called once per row and not inlined (as ``_store_direct``)."""
    _pixel_sums(dst, base, d3, src, tap_base, taps, shift, slot, column0, columns, units, vector,
                np.float32(zero))


@njit(inline="always")
def _store_units(dst, base, d3, d4, row_sum, vector, slot, weight, column0, columns, units, weighted, zero, stream,
                 src, ahead, ahead_rows, row_elements):
    """``dst[base + j * d3 + u * d4] = zero + sum over k of weight[c, k] * row_sum[slot[c, k] * units + u]``
    with ``c = column0 + j``: destination columns of ``units`` elements (NHWC: pixels). One, two
    or four slots go straight to a unit-stride ``dst``; otherwise the slots are summed (four per
    pass) into ``vector`` first. One call per row: array arguments cost reference counting per
    call.

    Meanwhile the ``ahead_rows`` source runs ``src[ahead[r] : ahead[r] + row_elements]`` (the rows
    the next work item adds) are prefetched into L2, a share of their lines per column: the
    memory reads of the next row sum overlap these sums instead of following them."""
    zero = np.float32(zero)
    n = np.uint64(units)
    slots = np.uint64(slot.shape[1])
    per_column = simd.line_share(row_elements, columns, simd.LINE_BYTES // src.itemsize)
    for j in range(columns):
        c = np.uint64(column0 + j)
        b = np.uint64(base + j * d3)
        _prefetch_part(src, ahead, ahead_rows, j * per_column, min((j + 1) * per_column, row_elements))
        s0 = slot[c, 0] * n
        w0 = weight[c, 0]
        # One and two slots stay written out here: as inlined microkernels called per pixel,
        # numba kept a reference count increment and decrement of dst and row_sum per pixel
        # (and _store_slots4 keeps its loops: as microkernels they added to every NHWC compile).
        if slots == 1 and d4 == 1:
            if weighted:
                for u in range(n):
                    _store(dst, b + u, zero + w0 * row_sum[s0 + u])
            else:
                for u in range(n):
                    _store(dst, b + u, zero + row_sum[s0 + u])
            continue
        if slots == 2 and d4 == 1:
            s1 = slot[c, 1] * n
            w1 = weight[c, 1]
            if weighted:
                for u in range(n):
                    _store(dst, b + u, zero + (w0 * row_sum[s0 + u] + w1 * row_sum[s1 + u]))
            else:
                for u in range(n):
                    _store(dst, b + u, zero + (row_sum[s0 + u] + row_sum[s1 + u]))
            continue
        if slots == 4 and d4 == 1:
            _store_slots4(dst, b, row_sum, s0, slot[c, 1] * n, slot[c, 2] * n, slot[c, 3] * n, w0, weight[c, 1],
                          weight[c, 2], weight[c, 3], n, weighted, zero, stream)
            continue
        for u in range(n):
            vector[u] = zero
        k = np.uint64(0)
        while k < slots:
            if slots - k < 4:  # one or two slots, strided dst
                _add_slots1_weighted(vector, n, row_sum, slot[c, k] * n, weight[c, k])
                k += np.uint64(1)
                continue
            k1, k2, k3 = k + np.uint64(1), k + np.uint64(2), k + np.uint64(3)
            s0, s1, s2, s3 = slot[c, k] * n, slot[c, k1] * n, slot[c, k2] * n, slot[c, k3] * n
            if weighted:
                _add_slots4_weighted(vector, n, row_sum, s0, s1, s2, s3, weight[c, k], weight[c, k1], weight[c, k2],
                                     weight[c, k3])
            else:
                _add_slots4_plain(vector, n, row_sum, s0, s1, s2, s3)
            k += np.uint64(4)
        if d4 == 1:
            for u in range(n):
                _store(dst, b + u, vector[u])
        else:
            for u in range(units):
                _store(dst, np.uint64(base + j * d3 + u * d4), vector[np.uint64(u)])
