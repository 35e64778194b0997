"""The parallel kernels (package docstring; SPEC 3.3-3.7) and the factory that builds them.

``_contract_kernel(path)`` builds ``_contract``, the one kernel of every weighted call and every
gradient, with only the branches its plan can take (``plan._contract_plan``); ``_select`` copies
the bits of a nearest forward call. Both are run by ``pool.share``: the calling thread and the
helpers claim chunks of work items. Per work item ``_contract`` lists the product taps of the
outer axes, then takes one of the paths: columns first (``columns_first.py``), pixels read
directly (``writers._store_direct``, ``writers._store_pixel_sums``), or the row sum
(``rows._sum_rows``) followed by the column axis (``writers._store_run``,
``affine._store_affine`` with ``writers._store_gathered``, or ``writers._store_units``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import simd
from ..codecs import stream_run
from ..first_calls import kernel_factory
from ..numba_internals import NoAliasCompiler
from ..pool import begin, claim, end, finish
from .affine import _store_affine
from .codecs import _float32
from .columns_first import _columns_first
from .narrow import _narrow_rows
from .rows import _consecutive_slots, _next_item, _product_taps, _sum_rows
from .tuning import PREFETCH_SOURCE_BYTES
from .plan import IN_PLACE, STAGED
from .writers import _store_direct, _store_gathered, _store_pixel_sums, _store_run, _store_units


@njit(inline="always")
def _rows_ahead(ahead, tap_base, taps, shift, src_offset, s0, s1, s2, ptr0, src0, ptr1, src1, ptr2, src2, i0, i1,
                i2):
    """Writes to ``ahead`` the source rows (``+ shift``) of work item ``(i0, i1, i2)`` that are not
    among the ``taps`` rows of ``tap_base`` (the current item's); returns how many. With linear
    2x upsampling, two of the next dx row's four dy rows."""
    rows = 0
    for k0 in range(ptr0[i0], ptr0[i0 + 1]):
        for k1 in range(ptr1[i1], ptr1[i1 + 1]):
            for k2 in range(ptr2[i2], ptr2[i2 + 1]):
                row = src_offset + src0[k0] * s0 + src1[k1] * s1 + src2[k2] * s2
                read = False
                for t in range(taps):
                    read = read or tap_base[t] == row
                if not read and rows < ahead.size:
                    ahead[rows] = row + shift
                    rows += 1
    return rows


# Kernels. Arrays are flat buffers indexed ``offset + sum(i[d] * strides[d])`` (see _fast/strided.py),
# axes already permuted into the five roles of the package docstring. Both kernels are run by
# ``pool.share``: each thread claims chunks of work items from ``counters`` until none is left.

@kernel_factory
def _contract_kernel(path: tuple[bool, int, int, bool, bool, bool, bool, bool]):
    """``_contract`` for the plans of one ``path`` (``_contract_plan``): each flag says whether a
    branch of the kernel can be taken at all. numba prunes a branch on a constant False before
    typing it, so a call compiles the code its plan can run and nothing else (issue 23, cold
    start); a branch that is kept is taken on the same conditions as in the kernel with every
    flag True. Each path is its own entry in the disk cache (numba keys closures by the values
    of their free variables). ``direct_slots``: 0 where pixels are never read directly, else the
    slots of the plan's pixels (1 or 2), with ``direct_weighted`` (0 or 1), so that the direct
    path compiles the rows of its pixels only (``writers._store_direct_for``); ``row_sum_path``:
    False where the branches before the row sum take every work item (``plan._row_sum_needed``);
    ``narrow_path``: every work item is an NCHW row of one block (``plan._narrow_fits``), which
    ``narrow._narrow_rows`` computes instead of the row-sum branch, with the same sums."""
    (columns_first_path, direct_slots, direct_weighted, pixel_sums_path, row_sum_path, identity_path,
     affine_path, narrow_path) = path
    direct_path = direct_slots > 0

    @njit(nogil=True, cache=True, pipeline_class=NoAliasCompiler)
    def _contract(counters, epoch, role, chunks, src, src_offset, dst, dst_offset, plan, stream):
        """``dst = sum of w * src`` over the product of the outer CSR tables (axes 0-2) and the
        column table (axis 3) of ``plan`` (a ``plan.ContractPlan`` as a plain tuple, unpacked in
        its field order); axis 4 is not resampled.
        ``block_first[b]`` / ``block_count[b]``: source columns read by destination columns
        ``[b * block_columns, (b + 1) * block_columns)``; ``slot[j, k]`` is 1 + the source column
        of slot ``k`` of column ``j`` relative to its block's first one, or 0 (padding). A work item
        is (i0, i1, i2, column block).

        ``stream`` (see ``plan._streams``): ``IN_PLACE``, pixels of one or two slots read directly
        (float32), or of four from the row sum, are written with non-temporal stores; ``STAGED``,
        each work item's pixels are written to ``staged``, a row of this thread's at the same
        columns, then streamed to dst from there (``codecs.stream_run``); the same sums."""
        (src_strides, dst_strides, dst_shape, ptr0, src0, weight0, ptr1, src1, weight1, ptr2, src2, weight2,
         block_columns, block_first, block_count, column_identity, slot, slot_weight, affine, affine_base,
         affine_weight, weighted, zero, max_taps, columns_first) = plan
        seen = begin(counters, epoch, role)
        units = dst_shape[4]
        # row_sum[0:units] is the padding unit (-0.0) that padding slots point at.
        # + 4: an affine span's padding slots may read up to 3 elements past the block's data.
        row_sum = np.empty(units * (1 + block_count.max()) + 4, np.float32)
        row_sum[:] = -0.0
        vector = np.empty(2 * units, np.float32)  # a pixel's sum, and (_pixel_sums) one dy row's part of it
        tap_base = np.empty(max_taps, np.int64)
        tap_weight = np.empty(max_taps, np.float32)
        ahead = np.empty(max_taps, np.int64)  # source rows to prefetch (_store_units)
        prefetch = src.size * src.itemsize >= PREFETCH_SOURCE_BYTES
        items = dst_shape[0] * dst_shape[1] * dst_shape[2] * block_first.size
        n1, n2, n3 = dst_shape[1], dst_shape[2], dst_shape[3]
        s0, s1, s2, s3, s4 = src_strides[0], src_strides[1], src_strides[2], src_strides[3], src_strides[4]
        d0, d1, d2, d3, d4 = dst_strides[0], dst_strides[1], dst_strides[2], dst_strides[3], dst_strides[4]
        src_packed = s4 == 1 and s3 == units   # a block's source columns form one contiguous run
        dst_packed = d4 == 1 and d3 == units
        direct_units = units > 1 and src_packed and d4 == 1 and not column_identity and slot.shape[1] <= 2
        # Nearest gradients sum each source element into one pixel: the row sum saves no work.
        # float32 only: float16 pixels of a few vectors, converted one value at a time, are slower.
        pixel_sums = _float32(dst) and units > 1 and src_packed and d4 == 1 and not column_identity \
            and not weighted and _consecutive_slots(slot)
        blocks = block_first.size
        narrow = units == 1 and not column_identity and blocks == 1 and src_packed  # plan._narrow_fits
        ring = 2 * max_taps if columns_first else 0  # rows of column sums (_half_columns_first)
        cc = np.empty(ring * n3 * units, np.float32)
        tags = np.full(ring, -1, np.int64)
        cc_base = np.empty(max_taps, np.int64)
        ring_next = 0
        in_place = stream == IN_PLACE  # the writers' flag
        staged = np.empty(n3 * units if stream == STAGED else 0, dst.dtype)
        while True:
            chunk = claim(counters)
            if chunk >= chunks:
                end(epoch, role, seen)
                return
            start = chunk * items // chunks
            if narrow_path and narrow:
                _narrow_rows(dst, dst_offset, src, src_offset, plan, row_sum, tap_base, tap_weight, start,
                             (chunk + 1) * items // chunks)
                finish(counters)
                continue
            # Unflatten the first item once, then step the counters (no division per item).
            block = start % blocks
            rest = start // blocks
            i2 = rest % n2
            rest //= n2
            i1 = rest % n1
            i0 = rest // n1
            for _ in range(start, (chunk + 1) * items // chunks):
                taps = _product_taps(tap_base, tap_weight, src_offset, s0, s1, s2, ptr0, src0, weight0, ptr1, src1,
                                     weight1, ptr2, src2, weight2, i0, i1, i2)
                count = block_count[block]
                shift = block_first[block] * s3
                column0 = block * block_columns
                columns = min(block_columns, n3 - column0)
                out = dst_offset + i0 * d0 + i1 * d1 + i2 * d2 + column0 * d3
                if stream == STAGED:
                    target, at = staged, column0 * units
                else:
                    target, at = dst, out
                if columns_first_path and columns_first and taps > 0:
                    ahead_rows = 0
                    if prefetch and i2 + 1 < n2:
                        ahead_rows = _rows_ahead(ahead, tap_base, taps, shift, src_offset, s0, s1, s2, ptr0, src0,
                                                 ptr1, src1, ptr2, src2, i0, i1, i2 + 1)
                    ring_next = _columns_first(target, at, src, tap_base, tap_weight, taps, cc, tags, cc_base,
                                               ring_next, row_sum, units, slot, slot_weight, block_first[0], columns,
                                               affine, affine_base, affine_weight, zero, in_place, ahead, ahead_rows,
                                               count * units)
                elif direct_path and direct_units and 1 <= taps <= 2:
                    # NHWC pixels of one or two slots from one or two source rows: read them directly.
                    _store_direct(target, at, d3, src, np.uint64(tap_base[0] + shift),
                                  np.uint64(tap_base[taps - 1] + shift),
                                  tap_weight[0], tap_weight[taps - 1], slot, slot_weight, column0, columns, units, taps,
                                  direct_slots, direct_weighted, zero, in_place and _float32(dst))
                elif pixel_sums_path and pixel_sums:
                    _store_pixel_sums(target, at, d3, src, tap_base, taps, shift, slot, column0, columns, units, vector,
                                      zero)
                elif row_sum_path:
                    # Step 1: the row sum, as one contiguous run or one run of ``units`` per column.
                    for c in range(1 if src_packed else count):
                        _sum_rows(row_sum, (c + 1) * units, src, tap_base, tap_weight, taps, shift + c * s3,
                                  count * units if src_packed else units, 1 if src_packed else s4, weighted, zero)
                    # Step 2: the column axis.
                    if identity_path:
                        for j in range(1 if dst_packed else columns):
                            _store_run(target, at + j * d3, 1 if dst_packed else d4, row_sum, (j + 1) * units,
                                       columns * units if dst_packed else units)
                    elif affine_path:
                        # The affine span (if any) inside the block; the columns around it go through the slots.
                        phases, slots, lo, hi = affine[0], affine[1], affine[2], affine[3]
                        lo = min(max(lo, column0), column0 + columns)
                        hi = max(min(hi, column0 + columns), lo)
                        if phases == 0 or d3 != 1:
                            lo = hi = column0 + columns
                        if hi > lo:
                            # Source columns relative to the block's first one, + 1 for the padding unit.
                            _store_affine(target, np.uint64(at - column0), row_sum, affine_weight,
                                          np.uint64(lo // phases),
                                          np.uint64(hi // phases), np.uint64(affine_base[0] + 1 - block_first[block]),
                                          np.uint64(affine_base[1] + 1 - block_first[block]), phases, slots, zero)
                        for part in range(2):
                            first = column0 if part == 0 else hi
                            _store_gathered(target, at + (first - column0) * d3, d3, row_sum, slot, slot_weight, first,
                                            lo - column0 if part == 0 else column0 + columns - hi, weighted, zero)
                    else:
                        ahead_rows = 0
                        if prefetch and src_packed and block + 1 == blocks and i2 + 1 < n2:
                            ahead_rows = _rows_ahead(ahead, tap_base, taps, shift, src_offset, s0, s1, s2, ptr0, src0,
                                                     ptr1, src1, ptr2, src2, i0, i1, i2 + 1)
                        _store_units(target, at, d3, d4, row_sum, vector, slot, slot_weight, column0, columns, units,
                                     weighted, zero, in_place, src, ahead, ahead_rows, count * units)
                if stream == STAGED:
                    stream_run(staged, at, columns * units, dst, out)
                block += 1
                if block == blocks:
                    block = 0
                    i0, i1, i2 = _next_item(i0, i1, i2, n1, n2)
            if stream:
                simd.store_fence()  # the streamed lines are visible before the chunk is reported done
            finish(counters)

    return _contract


@njit(nogil=True, cache=True)
def _select(counters, epoch, role, chunks, src, src_offset, src_strides, dst, dst_offset, dst_strides, dst_shape,
            index0, index1, index2, index3, inner_identity):
    """Nearest forward: ``dst[o] = src[index0[o0], ..., index3[o3]]``, copying raw bits. A work
    item is a row (o0, o1, o2)."""
    seen = begin(counters, epoch, role)
    n1, n2, n3 = dst_shape[1], dst_shape[2], dst_shape[3]
    s0, s1, s2, s3 = src_strides[0], src_strides[1], src_strides[2], src_strides[3]
    d0, d1, d2, d3 = dst_strides[0], dst_strides[1], dst_strides[2], dst_strides[3]
    unit = inner_identity and s3 == 1 and d3 == 1
    rows = dst_shape[0] * n1 * n2
    while True:
        chunk = claim(counters)
        if chunk >= chunks:
            end(epoch, role, seen)
            return
        start = chunk * rows // chunks
        i2 = start % n2
        rest = start // n2
        i1 = rest % n1
        i0 = rest // n1
        for _ in range(start, (chunk + 1) * rows // chunks):
            base = src_offset + index0[i0] * s0 + index1[i1] * s1 + index2[i2] * s2
            out = dst_offset + i0 * d0 + i1 * d1 + i2 * d2
            if unit:
                b = np.uint64(base)
                o = np.uint64(out)
                for j in range(np.uint64(n3)):
                    dst[o + j] = src[b + j]
            else:
                for j in range(n3):
                    dst[np.uint64(out + j * d3)] = src[np.uint64(base + index3[j] * s3)]
            i0, i1, i2 = _next_item(i0, i1, i2, n1, n2)
        finish(counters)
