"""NCHW rows (unit size 1) whose columns form one block: the work items of such a call run
through ``_narrow_rows``, a loop of its own, not inlined into ``_contract`` (package docstring).

Each work item is then one destination row: its row sum (``rows._sum_rows``, step 1) and its
columns (``affine._store_affine`` over the affine span, ``writers._store_gathered`` around it,
step 2), the same functions with the same arguments as ``_contract``'s row-sum branch takes for
such an item, so the same sums in the same order, bit for bit (SPEC 3.7). What it leaves out is
the rest of ``_contract``'s work per item: its other branches and column blocks, and the spills of
a loop that keeps all of their state live. Rows of tens of columns (nearest and linear 2x
gradients of small or odd-sized maps: a 16 KiB output, FPN's 38-column rows) spent about two
thirds of their time there (sampled with perf on a Zen 3).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..numba_internals import NO_REFCOUNT, NoAliasCompiler
from .affine import _store_affine
from .rows import _next_item, _product_taps, _sum_rows
from .writers import _store_gathered


@njit(nogil=True, cache=True, pipeline_class=NoAliasCompiler, **NO_REFCOUNT)
def _narrow_rows(dst, dst_offset, src, src_offset, plan, row_sum, tap_base, tap_weight, start, stop):
    """Work items ``[start, stop)`` of ``_contract`` for a plan of ``plan._narrow_fits`` (a
    ``plan.ContractPlan`` as a plain tuple): one destination row each, ``(i0, i1, i2)``."""
    (src_strides, dst_strides, dst_shape, ptr0, src0, weight0, ptr1, src1, weight1, ptr2, src2, weight2,
     _, block_first, block_count, _, slot, slot_weight, affine, affine_base, affine_weight, weighted, zero, _,
     _) = plan
    n1, n2, n3 = dst_shape[1], dst_shape[2], dst_shape[3]
    s0, s1, s2 = src_strides[0], src_strides[1], src_strides[2]
    d0, d1, d2, d3 = dst_strides[0], dst_strides[1], dst_strides[2], dst_strides[3]
    count = block_count[0]
    shift = block_first[0]  # the source's column stride is 1
    # The affine span (if any) inside the row, as _contract clamps it to a block of every column.
    phases, slots, lo, hi = affine[0], affine[1], affine[2], affine[3]
    lo = min(max(lo, 0), n3)
    hi = max(min(hi, n3), lo)
    if phases == 0 or d3 != 1:
        lo = hi = n3
    t_lo = np.uint64(lo // phases) if hi > lo else np.uint64(0)
    t_hi = np.uint64(hi // phases) if hi > lo else np.uint64(0)
    base0 = np.uint64(affine_base[0] + 1 - block_first[0])
    base1 = np.uint64(affine_base[1] + 1 - block_first[0])
    i2 = start % n2
    rest = start // n2
    i1 = rest % n1
    i0 = rest // n1
    for _ in range(start, stop):
        taps = _product_taps(tap_base, tap_weight, src_offset, s0, s1, s2, ptr0, src0, weight0, ptr1, src1, weight1,
                             ptr2, src2, weight2, i0, i1, i2)
        _sum_rows(row_sum, 1, src, tap_base, tap_weight, taps, shift, count, 1, weighted, zero)
        out = dst_offset + i0 * d0 + i1 * d1 + i2 * d2
        if hi > lo:
            _store_affine(dst, np.uint64(out), row_sum, affine_weight, t_lo, t_hi, base0, base1, phases, slots, zero)
        _store_gathered(dst, out, d3, row_sum, slot, slot_weight, 0, lo, weighted, zero)
        _store_gathered(dst, out + hi * d3, d3, row_sum, slot, slot_weight, hi, n3 - hi, weighted, zero)
        i0, i1, i2 = _next_item(i0, i1, i2, n1, n2)

