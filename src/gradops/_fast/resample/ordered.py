"""The fast resample kernels' arithmetic in NumPy: the same products and sums, in the same order,
in the same types, so the same bits (``first_calls``: what a call runs while its kernel compiles).

``_contract`` (kernels.py) takes, per work item, one of four branches, and the order of its sums
depends on the branch (package docstring; SPEC 3.4, 3.7). This module follows the same plan
(``plan._contract_plan``: its ``ContractPlan`` and ``path``) through the same branch conditions,
vectorised over the work items that have the same number of taps on each outer axis (so the same
tap count, which is all a branch condition reads of an item):

* row sum (``rows._sum_rows``): ``zero + G0 + G1 + ...`` over groups of four (then two, one)
  source rows, each ``(t0 + t1) + (t2 + t3)``, where the source's units are contiguous; else
  ``zero + t0 + t1 + ...`` one row at a time, always weighted; then the column axis:
  a copy (not resampled); NCHW columns through the slots (``writers._store_gathered``: 1, 2 or
  groups of 4 slots; an affine span's loops sum the same terms alike); NHWC pixels
  (``writers._store_units``: 1, 2 or 4 slots in one sum, else a pixel summed in memory slot
  group by slot group);
* pixels read directly (``writers._direct_units``): ``zero + (w0 * (s0 + s1) + w1 * (s0' + s1'))``;
* pixel sums (``rows._pixel_sums``): ``zero + (-0.0 + s00 + s01 ...) + (-0.0 + s10 ...) ...``;
* columns first (``columns_first._half_columns_first``): each source row's columns as
  ``(t0 + t1) + (t2 + t3)``, then the weighted row sum of those rows.

A padding slot reads the padding unit, -0.0 (weighted: ``0 * -0.0 == -0.0``), as the masked
reads of the kernel give. Products are float32 (``w * x`` rounded, then summed); float16 data is
decoded exactly and the result rounded once (``codecs.encode_sums``). Nearest forward copies bits
(``ordered_select``). NaN results are NaN, their payload bits unspecified, as the kernels' vector
code leaves them.
"""

from __future__ import annotations

import numpy as np

from ..._arrays import memory_limit_bytes
from ..codecs import encode_sums
from .plan import RANK, ContractPlan
from .rows import _consecutive_slots


def ordered_contract(src: np.ndarray, dst: np.ndarray, planned: tuple) -> None:
    """Writes into ``dst`` what ``kernels._contract_kernel(path)`` writes for ``plan``, from
    ``src`` (both as a run of ``_prepare_contract`` passes them, rank 1-4; ``planned``: what
    ``plan._contract_plan`` returned for them, with the axes in role order, the plan and the path)."""
    axes, plan, path = planned[0], planned[4], planned[6]
    lead = (np.newaxis,) * (RANK - src.ndim)
    source = src[lead].transpose(axes[0])[axes[1]].astype(np.float32)  # float16: exact
    target = dst[lead].transpose(axes[0])[axes[1]]
    slot = _global_slots(plan)
    with np.errstate(all="ignore"):  # inf and NaN are results here, as in the kernel
        for rows, taps in _item_classes(source, plan):
            shape = tuple(index.size for index in rows) + target.shape[3:]
            target[rows] = encode_sums(_item_sums(source, shape, taps, plan, slot, path, dst.dtype), dst.dtype)


def ordered_select(x: np.ndarray, out: np.ndarray, taps) -> None:
    """Nearest forward (``kernels._select``): the bits of the selected elements."""
    out[...] = x[np.ix_(*(np.asarray(index[:, 0]) for index, _ in taps))]


def select_fits(x: np.ndarray, out: np.ndarray, taps) -> bool:
    """Whether :func:`ordered_select`'s selection (a copy of ``out``'s size) takes at most half of
    ``memory_limit_bytes``."""
    return out.nbytes <= memory_limit_bytes() // 2


def ordered_fits(src: np.ndarray, dst: np.ndarray, planned: tuple) -> bool:
    """Whether :func:`ordered_contract`'s arrays (the source as float32, a work item class's
    source rows, their row sum and the column sums) take at most half of ``memory_limit_bytes``."""
    axes, plan = planned[0], planned[4]
    source_columns = src[(np.newaxis,) * (RANK - src.ndim)].transpose(axes[0])[axes[1]].shape[3]
    row_sums = int(np.prod(plan.dst_shape[:3])) * source_columns * int(plan.dst_shape[4])
    working = src.size + (plan.max_taps + 3) * row_sums + 4 * dst.size
    return 4 * working <= memory_limit_bytes() // 2


def _item_classes(source: np.ndarray, plan: ContractPlan):
    """Per class of work items with the same tap count on each outer axis: the items' index (for
    ``np.ix_``-style assignment) and their taps in the kernel's order (``k0``, ``k1``, ``k2``
    nested), each a float32 weight ``(w0 * w1) * w2`` per item and the item's source row."""
    tables = [(plan.ptr0, plan.src0, plan.weight0), (plan.ptr1, plan.src1, plan.weight1),
              (plan.ptr2, plan.src2, plan.weight2)]
    per_axis = []
    for ptr, _, _ in tables:
        counts = np.diff(ptr)
        per_axis.append([(int(c), np.flatnonzero(counts == c)) for c in np.unique(counts)])
    for (c0, i0), (c1, i1), (c2, i2) in ((a, b, c) for a in per_axis[0] for b in per_axis[1] for c in per_axis[2]):
        taps = []
        for j0 in range(c0):
            k0 = tables[0][0][i0] + j0
            for j1 in range(c1):
                k1 = tables[1][0][i1] + j1
                w01 = tables[0][2][k0][:, None] * tables[1][2][k1][None, :]  # float32, as in the kernel
                for j2 in range(c2):
                    k2 = tables[2][0][i2] + j2
                    weight = w01[:, :, None] * tables[2][2][k2][None, None, :]
                    taps.append((weight[..., None, None],
                                 source[np.ix_(tables[0][1][k0], tables[1][1][k1], tables[2][1][k2])]))
        yield np.ix_(i0, i1, i2), taps


def _item_sums(source, shape: tuple, taps, plan: ContractPlan, slot: np.ndarray, path: tuple, dtype) -> np.ndarray:
    """The float32 sums of one class of work items (``shape``: theirs in the output), by the
    branch ``_contract`` takes for them; ``slot``: ``_global_slots(plan)``."""
    columns_first_path, direct_slots, _, pixel_sums_path, row_sum_path, identity_path, affine_path, narrow_path = path
    zero = np.float32(plan.zero)
    units = int(plan.dst_shape[4])
    s3, s4, d4 = plan.src_strides[3], plan.src_strides[4], plan.dst_strides[4]
    src_packed = s4 == 1 and s3 == units
    slots = slot.shape[1]
    pixels = units > 1 and src_packed and d4 == 1 and not plan.column_identity
    if columns_first_path and plan.columns_first and taps:
        return _columns_first(taps, plan, slot, zero)
    if direct_slots and pixels and slots <= 2 and 1 <= len(taps) <= 2:
        return _direct(taps, plan, slot, zero)
    if pixel_sums_path and dtype == np.float32 and pixels and not plan.weighted and _consecutive_slots(plan.slot):
        return _pixel_sums(taps, slot, zero, shape)
    if not (row_sum_path or narrow_path):  # narrow rows: the row-sum branch's sums (narrow.py)
        raise AssertionError("the plan left a work item without a branch")
    if not taps:
        row_sum = np.full(shape[:3] + source.shape[3:], zero)
    elif src_packed or s4 == 1:  # unit steps: rows in groups
        row_sum = _grouped_sum([w * x if plan.weighted else x for w, x in taps], zero)
    else:
        row_sum = zero + taps[0][0] * taps[0][1]
        for w, x in taps[1:]:
            row_sum = row_sum + w * x
    if identity_path:
        return row_sum
    if affine_path:
        return _columns_nchw(row_sum, plan, slot, zero)
    return _pixels_from_row_sum(row_sum, plan, slot, zero)


def _grouped_sum(terms: list, zero):
    """``zero + G0``, then ``+ G1``, ...: groups of four (then two, one) terms, each
    ``(t0 + t1) + (t2 + t3)`` (``rows._sum_rows`` with unit steps)."""
    total, t = None, 0
    while t < len(terms):
        size = 4 if len(terms) - t >= 4 else (2 if len(terms) - t >= 2 else 1)
        part = _association(terms[t:t + size])
        total = zero + part if total is None else total + part
        t += size
    return total


def _association(terms: list):
    """1, 2 or 4 terms as ``t0``, ``t0 + t1``, ``(t0 + t1) + (t2 + t3)`` (row_sum_template.py)."""
    if len(terms) == 1:
        return terms[0]
    if len(terms) == 2:
        return terms[0] + terms[1]
    return (terms[0] + terms[1]) + (terms[2] + terms[3])


def _padded(rows: np.ndarray) -> np.ndarray:
    """``rows`` with the padding unit (-0.0) as column 0, so that slot ``s`` reads column ``s``."""
    padding = np.full(rows.shape[:3] + (1,) + rows.shape[4:], -0.0, np.float32)
    return np.concatenate([padding, rows], axis=3)


def _global_slots(plan: ContractPlan) -> np.ndarray:
    """The slot table with the block offsets added: 1 + the source column, 0 for padding."""
    block = np.arange(plan.slot.shape[0]) // plan.block_columns
    slot = plan.slot.astype(np.int64)
    return np.where(slot == 0, 0, slot + plan.block_first[block][:, None])


def _column_shape(row_sum: np.ndarray, slot: np.ndarray) -> tuple:
    """The shape of the destination columns of ``row_sum``'s work items."""
    return row_sum.shape[:3] + (slot.shape[0],) + row_sum.shape[4:]


def _slot_terms(padded: np.ndarray, slot: np.ndarray, weight: np.ndarray, weighted: bool) -> list:
    """Slot ``k`` of every column: ``weight * padded[slot]`` (or the value when not ``weighted``)."""
    return [(weight[:, k, None] * padded[..., slot[:, k], :]) if weighted else padded[..., slot[:, k], :]
            for k in range(slot.shape[1])]


def _columns_nchw(row_sum: np.ndarray, plan: ContractPlan, slot: np.ndarray, zero) -> np.ndarray:
    """Unit size 1: every column through its slots (``_store_gathered``). The columns of an affine
    span (``_affine_span``) sum the same terms in the same association: ``zero + m0``, ``zero +
    (m0 + m1)``, ``zero + ((m0 + m1) + (m2 + m3))``, a masked padding slot -0.0 like a padding
    slot's term here; where the table has more slots than the span, the extra ones add -0.0."""
    terms = _slot_terms(_padded(row_sum), slot, plan.slot_weight, plan.weighted)
    if 1 <= len(terms) <= 2:
        sums = zero + _association(terms)
    else:  # also a table without slots: every column reads nothing
        sums = np.full(_column_shape(row_sum, slot), zero)
        for k in range(0, len(terms), 4):
            sums = sums + _association(terms[k:k + 4])
    return sums


def _pixels_from_row_sum(row_sum: np.ndarray, plan: ContractPlan, slot: np.ndarray, zero) -> np.ndarray:
    """NHWC pixels (``_store_units``): one, two or four slots in one sum into a unit-stride output;
    else the pixel summed in memory from ``zero``: one or two slots one at a time, always weighted
    (``add_slots1_weighted``), 4m slots four at a time."""
    padded = _padded(row_sum)
    if plan.dst_strides[4] == 1 and slot.shape[1] in (1, 2, 4):
        return zero + _association(_slot_terms(padded, slot, plan.slot_weight, plan.weighted))
    sums = np.full(_column_shape(row_sum, slot), zero)
    if slot.shape[1] < 4:
        for term in _slot_terms(padded, slot, plan.slot_weight, True):
            sums = sums + term
        return sums
    terms = _slot_terms(padded, slot, plan.slot_weight, plan.weighted)
    for k in range(0, len(terms), 4):
        sums = sums + _association(terms[k:k + 4])
    return sums


def _direct(taps: list, plan: ContractPlan, slot: np.ndarray, zero) -> np.ndarray:
    """Pixels of one or two slots read straight from one or two source rows (``_direct_units``)."""
    first_slot, last_slot = slot[:, 0], slot[:, -1]
    w_first, w_last = plan.slot_weight[:, 0, None], plan.slot_weight[:, -1, None]

    def row_part(rows):
        padded = _padded(rows)
        part = padded[..., first_slot, :]
        part = w_first * part if plan.weighted else part
        if slot.shape[1] == 2:
            last = padded[..., last_slot, :]
            part = part + (w_last * last if plan.weighted else last)
        return part

    (w0, x0), (w1, x1) = taps[0], taps[-1]
    first = row_part(x0)
    if len(taps) == 2:
        second = row_part(x1)
        total = w0 * first + w1 * second if plan.weighted else first + second
    else:
        total = w0 * first if plan.weighted else first
    return zero + total


def _pixel_sums(taps: list, slot: np.ndarray, zero, shape: tuple) -> np.ndarray:
    """Nearest float32 pixels summed straight from their source rows (``_pixel_sums``): per
    source row ``-0.0 + v0 + v1 ...`` over its slots (a padding slot adds -0.0: no change), the
    rows added to ``zero`` in order."""
    total = None
    for _, rows in taps:
        padded = _padded(rows)
        row = np.float32(-0.0)
        for k in range(slot.shape[1]):
            row = row + padded[..., slot[:, k], :]
        total = zero + row if total is None else total + row
    return total if total is not None else np.full(shape, zero)


def _columns_first(taps: list, plan: ContractPlan, slot: np.ndarray, zero) -> np.ndarray:
    """float16 columns first (``_half_columns_first``): each source row's columns as ``(t0 + t1)
    + (t2 + t3)`` over the 4 slots, always weighted (``_half_column_sums``; the affine span's loops
    read the same slots), then the weighted row sum of those rows from ``zero``."""
    return _grouped_sum([w * _association(_slot_terms(_padded(x), slot, plan.slot_weight, True)) for w, x in taps],
                        zero)
