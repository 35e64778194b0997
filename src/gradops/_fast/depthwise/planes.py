"""One residue plane of one output row (SPEC 5.4): the taps that reach the row are listed with
the columns they reach, and the row splits into segments of columns reached by the same taps;
each segment goes to the fastest tap path that fits it (``rows.py``, then ``taps.py`` for the
rest). Taps in the padding are skipped: they are never multiplied by 0, except in the staged
stride-1 rows with zero margins (backprop input's dy, the forward's wide x rows) and in the
planar stride-1 blocks, where that is exact (``plan._zero_margins``, ``plan._forward_margins``,
``kernels._planar_blocks_kernel_for``).

A stride ``s`` makes the column map ``ix = ox*s + shift`` non-contiguous in x-space, so x-space
rows are split into ``s`` residue planes (``ix = q*s + r``, plane r holds q = 0, 1, ...); within
a plane every tap's columns are contiguous again. No modulo runs in an inner loop.

The plane functions are compiled once per type signature and called, as are the row paths and
``_taps_blocked`` (see ``_fast/__init__``). Callers pass ``stream`` as a literal True / False, so
numba compiles one specialisation of each with the stores fixed (a ``stream`` tested at each
store is much slower), and the tap paths of their plan (``plan._tap_paths``) as literals, so that
a 3x3 filter compiles the 3-tap row paths and no others.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

from .. import row_njit, simd
from ..numba_internals import NO_REFCOUNT
from ..target import codegen_target
from .rows import _filter_rows, _taps9_2x2, _taps9_rows_for, _taps_rows_for
from .selection import NINE_BLOCKS, NINE_ROWS, fits_rows, tier
from .taps import _scaled1, _scaled4, _taps_blocked


@njit(inline="always")
def _insert_sorted(values, count, value):
    """Insert ``value`` into the sorted distinct ``values[:count]``; return the new count."""
    position = count
    while position > 0 and values[position - 1] > value:
        position -= 1
    if position > 0 and values[position - 1] == value:
        return count
    for i in range(count, position, -1):
        values[i] = values[i - 1]
    values[position] = value
    return count + 1


@njit(inline="always")
def _segments(lo, hi, nt, n_pos, bounds):
    """Sort the distinct column bounds 0, n_pos, lo[t], hi[t] into ``bounds``; return how many.
    Between two consecutive bounds each tap reaches every column or none."""
    count = _insert_sorted(bounds, _insert_sorted(bounds, 0, 0), n_pos)
    for t in range(nt):
        count = _insert_sorted(bounds, _insert_sorted(bounds, count, lo[t]), hi[t])
    return count



def _fill_plane_blocked(acc, base, step, width, pitch, n_pos, src, so, tap, lo, hi, nt, wt, scratch, prefetch,
                        stream, ahead_src, ahead, ahead_n, longest_row, nine, ascending, phase, wt_phased, phased):
    """Channels-last plane of ``n_pos`` positions: for q < n_pos, j < width,
    ``acc[base + q*step + j] = sum over taps t with lo[t] <= q < hi[t], in order, of
    src[so[t] + q*pitch + j] * wt[tap[t]*pitch + j]`` (0 where no tap reaches), one segment of
    columns reached by the same taps at a time. ``ahead_src[ahead : ahead + ahead_n]`` is
    requested once: spread over the filter rows' paths if the first segment goes there, else
    into L2 at its start. ``longest_row``, ``nine`` (0 or 1), ``ascending``: the call's tap
    paths (``plan._tap_paths``; the forward's filter rows read ascending positions, the
    adjoint's descending ones), literal constants: a kernel is compiled per set (the overload
    below). ``phased`` (a literal; ``stream`` is then False): the positions start ``phase``
    elements before a 64-byte line, and the filter-row paths stream vectors that start on the
    lines (``phased_rows`` below); ``wt_phased`` is ``wt`` with each tap's channels rotated by
    ``phase``."""
    raise NotImplementedError("compiled by numba only")


@overload(_fill_plane_blocked, jit_options=NO_REFCOUNT)  # see row_njit in _fast/__init__
def _fill_plane_blocked_paths(acc, base, step, width, pitch, n_pos, src, so, tap, lo, hi, nt, wt, scratch, prefetch,
                              stream, ahead_src, ahead, ahead_n, longest_row, nine, ascending, phase, wt_phased,
                              phased):
    """``_fill_plane_blocked`` for one set of tap paths: a segment whose taps come in filter rows
    of a size up to ``longest_row`` (``rows._filter_rows``, in the call's direction) goes to that
    size's row function, 9 taps whose weights fit in registers (``nine``) to ``_taps9_rows`` or
    ``_taps9_2x2``, and what they leave to ``_taps_blocked``. A segment the set rules out gets the
    same bits from ``_taps_blocked``; only the paths the set allows are compiled."""
    paths = (longest_row, nine, ascending, phased)
    if not all(isinstance(path, types.Literal) for path in paths):
        return None
    longest, nine_taps, up, phased_path = (path.literal_value for path in paths)  # nine: 0 or 1
    rows3, rows5, rows7 = (_taps_rows_for(size, up) for size in (3, 5, 7))
    taps9_rows = _taps9_rows_for(up)
    # the rules of NINE_BLOCKS (_taps9_2x2) and the tier's NINE_ROWS (_taps9_rows), as plain ints for numba
    nine_rows = NINE_ROWS[tier(codegen_target())]
    rows_multiple, rows_max = nine_rows.multiple_bytes, nine_rows.max_row_bytes
    blocks_multiple, blocks_max = NINE_BLOCKS.multiple_bytes, NINE_BLOCKS.max_row_bytes
    sign = 1 if up else -1

    @njit(inline="always")
    def row_paths(acc, a0, step, width, pitch, n, src, sub_so, wt, sub_tap, count, size, shifted, prefetch, stream,
                  ahead_src, ahead, ahead_n):
        """The special path of a segment (``size``: its filter rows, ``rows._filter_rows``): how many
        of its first positions it computed (0: none fits)."""
        row_bytes = width * acc.itemsize
        if nine_taps and count == 9 and longest >= 3 and size == 3 and fits_rows(row_bytes, rows_multiple, rows_max):
            return taps9_rows(acc, a0, step, width, pitch, n, src, sub_so, wt, sub_tap, shifted, prefetch,
                              stream, ahead_src, ahead, ahead_n)
        if nine_taps and count == 9 and longest == 0 and fits_rows(row_bytes, blocks_multiple, blocks_max):
            return _taps9_2x2(acc, a0, step, width, pitch, n, src, sub_so, wt, sub_tap, stream)
        if longest >= 3 and size == 3:
            return rows3(acc, a0, step, width, pitch, n, src, sub_so, wt, sub_tap, count, shifted, prefetch,
                         stream, ahead_src, ahead, ahead_n)
        if longest >= 5 and size == 5:
            return rows5(acc, a0, step, width, pitch, n, src, sub_so, wt, sub_tap, count, shifted, prefetch,
                         stream, ahead_src, ahead, ahead_n)
        if longest >= 7 and size == 7:
            return rows7(acc, a0, step, width, pitch, n, src, sub_so, wt, sub_tap, count, shifted, prefetch,
                         stream, ahead_src, ahead, ahead_n)
        return 0

    @njit(inline="always")
    def phased_rows(acc, a0, step, width, pitch, n, src, sub_so, wt, wt_phased, sub_tap, count, size, shifted,
                    prefetch, ahead_src, ahead, ahead_n, phase):
        """A stride-1 segment whose positions start ``phase`` elements before a 64-byte line
        (``step`` = ``pitch`` = ``width``, a multiple of a line): the row paths run on vectors that
        start on the lines and stream them. Vector j of position q then holds channels ``phase + j``
        of q, and past ``width`` the first channels of q + 1, whose sources are the next positions
        of the same rows and whose weights the rotated table gives: the same products, added in the
        same order, as the positions' own vectors. The last position's last vector would reach past
        the segment, so at most n - 1 positions run so, ``done``. Then the first ``phase`` channels of
        the first position, with plain stores, and the other channels of position ``done``, which
        start on a line: its whole vectors streamed, its partial line plain. No line is written
        both ways (such a line is read from memory first). Returns how many positions are done (the
        rest go to ``_taps_blocked``)."""
        if n < 3:
            return 0
        for t in range(count):
            sub_so[t] += phase
        done = row_paths(acc, a0 + phase, step, width, pitch, n - 1, src, sub_so, wt_phased, sub_tap, count, size,
                         shifted, prefetch, True, ahead_src, ahead, ahead_n)
        for t in range(count):
            sub_so[t] -= phase
        if done == 0:
            return 0
        _taps_blocked(acc, a0, step, phase, pitch, 1, src, sub_so, wt, sub_tap, count, shifted, False)
        for t in range(count):
            sub_so[t] += done * pitch + phase
            sub_tap[t] += phase
        _taps_blocked(acc, a0 + done * step + phase, step, width - phase, pitch, 1, src, sub_so, wt, sub_tap, count,
                      shifted, True)
        for t in range(count):
            sub_so[t] -= done * pitch + phase
            sub_tap[t] -= phase
        return done + 1

    def fill(acc, base, step, width, pitch, n_pos, src, so, tap, lo, hi, nt, wt, scratch, prefetch, stream,
             ahead_src, ahead, ahead_n, longest_row, nine, ascending, phase, wt_phased, phased):
        bounds, sub_so, sub_tap, shifted = scratch[0], scratch[1], scratch[2], scratch[3]
        for segment in range(_segments(lo, hi, nt, n_pos, bounds) - 1):
            q0, q1 = bounds[segment], bounds[segment + 1]
            count = np.int64(0)
            for t in range(nt):
                if lo[t] <= q0 and q1 <= hi[t]:
                    sub_so[count], sub_tap[count] = so[t] + q0 * pitch, tap[t] * pitch
                    count += 1
            if count == 0:
                for q in range(q0, q1):
                    acc[base + q * step:base + q * step + width] = 0
                continue
            # A special path computes the first ``done`` positions; the rest go to _taps_blocked.
            size = sign * _filter_rows(sub_so, count, pitch)  # < 0: rows in the other direction
            a0, n = base + q0 * step, q1 - q0
            if size <= 0 or size > longest:  # the row paths spread the request over their work
                simd.prefetch_l2_range(ahead_src, ahead, ahead + ahead_n)
            if phased_path:
                done = phased_rows(acc, a0, step, width, pitch, n, src, sub_so, wt, wt_phased, sub_tap, count, size,
                                   shifted, prefetch, ahead_src, ahead, ahead_n, phase)
            else:
                done = row_paths(acc, a0, step, width, pitch, n, src, sub_so, wt, sub_tap, count, size, shifted,
                                 prefetch, stream, ahead_src, ahead, ahead_n)
            ahead_n = 0
            for t in range(count):
                sub_so[t] += done * pitch
            _taps_blocked(acc, base + (q0 + done) * step, step, width, pitch, q1 - q0 - done, src, sub_so, wt,
                          sub_tap, count, shifted, stream)

    return fill


@row_njit
def _fill_plane_scaled(acc, base, n_pos, src, so, ch, weight, lo, hi, nt, scratch):
    """Planar plane of ``n_pos`` positions: ``acc[base + q] = sum over taps t with lo[t] <= q <
    hi[t], in order, of src[so[t] + ch + q] * weight[t]`` (0 where no tap reaches); segments as in
    ``_fill_plane_blocked``."""
    bounds, sub_so, sub_weight = scratch[0], scratch[1], scratch[2]
    for segment in range(_segments(lo, hi, nt, n_pos, bounds) - 1):
        q0, q1 = bounds[segment], bounds[segment + 1]
        a0, n = base + q0, q1 - q0
        count = np.int64(0)
        for t in range(nt):
            if lo[t] <= q0 and q1 <= hi[t]:
                sub_so[count], sub_weight[count] = so[t] + ch + q0, t
                count += 1
        if count == 0:
            acc[a0:a0 + n] = 0
        t = 0
        while count - t >= 4:
            _scaled4(acc, a0, n, src, sub_so[t], sub_so[t + 1], sub_so[t + 2], sub_so[t + 3], weight[sub_weight[t]],
                     weight[sub_weight[t + 1]], weight[sub_weight[t + 2]], weight[sub_weight[t + 3]], t == 0)
            t += 4
        while t < count:
            _scaled1(acc, a0, n, src, sub_so[t], weight[sub_weight[t]], t == 0)
            t += 1
