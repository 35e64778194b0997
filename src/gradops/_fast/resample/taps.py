"""Host side: the per-axis tables the kernel reads, built from the forward taps of
``axis_taps`` (SPEC 3.2-3.4) in plain NumPy, before any kernel runs.

Outer axes get CSR tables (destination index -> source indices, weights; ``_outer_table``), the
column axis a padded slot table per column block and its affine span (``_column_table``,
``_affine``); the gradient's tables are the transposed ones (``transpose_taps``, SPEC 3.6), zero
weights dropped (SPEC 3.4). Tables are small (one entry per index of one axis) and cached by
content, so repeated calls with the same geometry pay only a hash of the tap tables.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..._resample_plan import transpose_taps
from .tuning import AFFINE_MIN_COLUMNS


def _is_identity(index: np.ndarray, weight: np.ndarray, n_in: int) -> bool:
    """Whether forward taps ``(index, weight)`` are the identity (an axis that is not resampled)."""
    n_out = index.shape[0]
    return n_out == n_in and bool(np.all(index[:, 0] == np.arange(n_out))) and bool(np.all(weight[:, 0] == 1)) \
        and bool(np.all(weight[:, 1] == 0))


def _csr(index: np.ndarray, weight: np.ndarray, n_in: int, transpose: bool) -> tuple[np.ndarray, ...]:
    """Destination index -> (source indices, weights) as CSR, zero weights dropped (SPEC 3.4):
    the forward taps, or their transpose for the gradient."""
    if transpose:
        return transpose_taps(index, weight, n_in)
    keep = weight != 0
    ptr = np.zeros(index.shape[0] + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=ptr[1:])
    return ptr, index[keep].astype(np.int64), weight[keep].astype(np.float32)


@lru_cache(maxsize=256)
def _outer_table(index_bytes: bytes, weight_bytes: bytes, n_in: int, transpose: bool) -> tuple[np.ndarray, ...]:
    index = np.frombuffer(index_bytes, dtype=np.int64).reshape(-1, 2)
    weight = np.frombuffer(weight_bytes, dtype=np.float32).reshape(-1, 2)
    return _csr(index, weight, n_in, transpose)


@lru_cache(maxsize=256)
def _column_table(index_bytes: bytes, weight_bytes: bytes, n_in: int, transpose: bool,
                  block_columns: int) -> tuple[np.ndarray, ...]:
    """Tables of the column axis: ``block_first, block_count, slot, slot_weight`` (see
    ``_contract`` in kernels.py) and ``affine, affine_base, affine_weight`` (see ``affine._affine_span``)."""
    index = np.frombuffer(index_bytes, dtype=np.int64).reshape(-1, 2)
    weight = np.frombuffer(weight_bytes, dtype=np.float32).reshape(-1, 2)
    ptr, source, tap_weight = _csr(index, weight, n_in, transpose)
    n_dst = ptr.size - 1
    counts = np.diff(ptr)
    blocks = -(-n_dst // block_columns)
    tap_block = np.repeat(np.arange(n_dst) // block_columns, counts)
    block_first = np.zeros(blocks, dtype=np.int64)
    block_count = np.zeros(blocks, dtype=np.int64)
    if source.size:
        lo = np.full(blocks, np.iinfo(np.int64).max)
        hi = np.full(blocks, -1)
        np.minimum.at(lo, tap_block, source)
        np.maximum.at(hi, tap_block, source)
        read = hi >= 0
        block_first[read] = lo[read]
        block_count[read] = hi[read] - lo[read] + 1
    slots = int(counts.max()) if n_dst else 0
    slots = slots if slots <= 2 else -(-slots // 4) * 4  # the kernel sums 1, 2 or 4m slots
    slot = np.zeros((n_dst, slots), dtype=np.uint32)
    slot_weight = np.zeros((n_dst, slots), dtype=np.float32)
    rank_in_row = np.arange(source.size) - np.repeat(ptr[:-1], counts)
    columns = np.repeat(np.arange(n_dst), counts)
    slot[columns, rank_in_row] = 1 + source - block_first[tap_block]
    slot_weight[columns, rank_in_row] = tap_weight
    return (block_first, block_count, slot, slot_weight) + _affine(ptr, source, tap_weight, block_columns)


# Affine spans: the (phases, q) shapes _store_affine has loops for.
_AFFINE_SHAPES = ((1, 2), (2, 1))


def _affine(ptr: np.ndarray, source: np.ndarray, tap_weight: np.ndarray,
            block_columns: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The longest run of destination columns ``j = phases * t + p`` whose sources are the
    consecutive columns ``q * t + base[p] + k``, ``k < count_j <= 4`` (with two phases, one of
    them may be empty throughout: it then reads, masked, where the other one does). Returns
    ``affine = (phases, slots, lo, hi)`` (phases 0: none), ``base`` and ``weight[k, j]`` (0 for
    padding slots)."""
    n_dst = ptr.size - 1
    counts = np.diff(ptr)
    column = np.repeat(np.arange(n_dst), counts)
    rank = np.arange(source.size) - np.repeat(ptr[:-1], counts)
    first = np.zeros(n_dst, dtype=np.int64)
    first[column[rank == 0]] = source[rank == 0]
    consecutive = np.ones(n_dst, dtype=bool)
    np.logical_and.at(consecutive, column, source - first[column] == rank)
    real = (counts > 0) & (counts <= 4) & consecutive
    best = (0, 0, 0, (0, 0))
    for phases, q in _AFFINE_SHAPES:
        if block_columns % phases:  # a column block must not split the phases of one t
            continue
        t, p = np.divmod(np.arange(n_dst), phases)
        offset = first - q * t
        base = [None] * phases
        for phase in range(phases):
            values, hits = np.unique(offset[real & (p == phase)], return_counts=True)
            if values.size:
                base[phase] = int(values[np.argmax(hits)])
        match = real & (offset == np.array([-1 if b is None else b for b in base])[p]) \
            & np.isin(p, [phase for phase in range(phases) if base[phase] is not None])
        candidates = [(match, base)]
        for empty in range(phases if phases == 2 else 0):
            if base[1 - empty] is not None:
                borrowed = list(base)
                borrowed[empty] = base[1 - empty]
                candidates.append((np.where(p == empty, counts == 0, match), borrowed))
        for mask, bases in candidates:
            lo, hi = _longest_run(mask, phases)
            if hi - lo > best[1] - best[0]:
                best = (lo, hi, phases, tuple(0 if b is None else b for b in bases))
    lo, hi, phases, base = best
    q_of = dict((p, q) for p, q in _AFFINE_SHAPES)
    if hi - lo < AFFINE_MIN_COLUMNS:
        return np.zeros(4, np.int64), np.zeros(2, np.int64), np.zeros((2, n_dst), np.float32)
    most = counts[lo:hi].max()
    slots = 1 if phases == 2 and most <= 1 else (2 if most <= 2 else 4)
    # Padding slots read (masked) past a column's sources: keep every read inside the row.
    last_read = q_of[phases] * (np.arange(n_dst) // phases) + np.take(base, np.arange(n_dst) % phases) + slots - 1
    while hi > lo and last_read[hi - phases:hi].max() > source.max():
        hi -= phases
    if hi - lo < AFFINE_MIN_COLUMNS:
        return np.zeros(4, np.int64), np.zeros(2, np.int64), np.zeros((2, n_dst), np.float32)
    weight = np.zeros((slots, n_dst), dtype=np.float32)
    span = (column >= lo) & (column < hi)
    weight[rank[span], column[span]] = tap_weight[span]
    return np.array([phases, slots, lo, hi], np.int64), np.array(base + (0,) * (2 - len(base)), np.int64), weight


def _longest_run(mask: np.ndarray, align: int) -> tuple[int, int]:
    """The longest run ``[lo, hi)`` of True in ``mask`` with ``lo`` and ``hi`` multiples of ``align``."""
    if align == 2:  # both columns of a pair must match
        pairs = mask[: mask.size // 2 * 2].reshape(-1, 2).all(axis=1)
        lo, hi = _longest_run(pairs, 1)
        return 2 * lo, 2 * hi
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    if not starts.size:
        return 0, 0
    longest = int(np.argmax(stops - starts))
    return int(starts[longest]), int(stops[longest])


def _identity_taps(n: int) -> tuple[np.ndarray, np.ndarray]:
    index = np.repeat(np.arange(n, dtype=np.int64)[:, None], 2, axis=1)
    weight = np.zeros((n, 2), dtype=np.float32)
    weight[:, 0] = 1
    return index, weight
