"""Host side: every decision made from shapes, strides and dtype before a kernel runs (package
docstring; SPEC 3.3-3.7), in plain Python and NumPy.

``_contract_plan`` (cached per geometry) assigns the axes their roles, describes both arrays as
flat buffers (``_flat``, ``_flat_buffer``), builds the tables (``taps.py``) and the column
blocks (``tuning.ROW_ELEMENTS``), picks the starting zero (-0.0 forward, +0.0 gradient), whether
the column axis goes first (``_columns_first_fits``) and which branches of the kernel the call can
take (the ``path`` of ``kernels._contract_kernel``). ``_streams`` decides per call, from the
output's address as well, whether it is written with non-temporal stores; it reads
``simd.STREAMING_THRESHOLD_BYTES`` through the module at each call, so that a changed threshold
takes effect at once.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple, Sequence

import numpy as np

from ..._resample_plan import tap_key
from .. import half, simd
from ..strided import flat_view
from .taps import _column_table, _identity_taps, _is_identity, _outer_table
from .tuning import ROW_ELEMENTS

Taps = Sequence[tuple[np.ndarray, np.ndarray]]

RANK = 4

_FORWARD_ZERO = -0.0   # identity of IEEE addition: -0 + v == v bit for bit, -0 + -0 == -0
_GRADIENT_ZERO = 0.0   # the scatter of SPEC 3.6 starts from +0


def _pad(src: np.ndarray, dst: np.ndarray, taps: Taps) -> tuple[np.ndarray, np.ndarray, list]:
    """Fixed rank 4: leading size-1 axes with identity taps."""
    missing = RANK - dst.ndim
    lead = (np.newaxis,) * missing
    return src[lead], dst[lead], [_identity_taps(1)] * missing + list(taps)


def _axis_order(dst: np.ndarray) -> list[int]:
    """Outermost first; the innermost axis is dst's smallest stride among axes longer than 1."""
    return sorted(range(dst.ndim), key=lambda d: (dst.shape[d] > 1, -abs(dst.strides[d])))


def _flat(array: np.ndarray, bits: bool = False) -> tuple[np.ndarray, int, np.ndarray]:
    if array.dtype == np.float16:
        array = array.view(np.uint16)
    elif bits:
        array = array.view(np.uint32)
    buffer, offset, strides = flat_view(array)
    strides[np.array(array.shape) == 1] = 1  # size-1 axes: any stride; 1 keeps "packed" tests simple
    return buffer, offset, strides


# How ``_contract`` writes an output (``_streams``), besides 0, plain stores
IN_PLACE, STAGED = 1, 2


def _streams(buffer: np.ndarray, offset: int, strides: np.ndarray, shape: np.ndarray) -> int:
    """How ``_contract`` writes this output. ``IN_PLACE``: with non-temporal stores straight from
    its sums, which skip reading each output line before writing it: a float32 output of at least
    ``simd.STREAMING_THRESHOLD_BYTES`` made of packed pixels (NHWC) of whole vectors that all
    start on a 64-byte line (gradops' fresh outputs start on one); float16 outputs of pixels of
    whole lines (32k channels) too, where the CPU converts half in hardware; only their four-slot
    pixels stream, the others are stored as without the flag. ``STAGED``: such a float32 output
    whose pixels are off the lines (NumPy's own large buffers start 16 bytes past one): each work
    item's pixels are summed into a row of the thread's own, then streamed from there. 0: plain
    stores."""
    lanes = simd.VECTOR_BYTES // buffer.itemsize
    units = shape[4]
    pixel_rows = (buffer.nbytes >= simd.STREAMING_THRESHOLD_BYTES and strides[4] == 1 and strides[3] == units
                  and units % lanes == 0)
    if not pixel_rows:
        return 0
    on_lines = ((buffer.ctypes.data + buffer.itemsize * offset) % simd.VECTOR_BYTES == 0
                and all(shape[d] == 1 or strides[d] % lanes == 0 for d in range(3)))
    if buffer.dtype == np.float32:
        return IN_PLACE if on_lines else STAGED
    return IN_PLACE if on_lines and buffer.dtype == np.uint16 and half.HARDWARE_HALF else 0


def _flat_buffer(array: np.ndarray, axes: tuple) -> np.ndarray:
    """The flat buffer of ``flat_view`` (see strided.py) for ``array`` viewed as ``axes``."""
    if _dense(array.shape, array.strides, array.itemsize):
        flat = array.ravel(order="K")  # a view: the memory from the lowest address, in order
    else:
        view = array[(np.newaxis,) * (RANK - array.ndim)].transpose(axes[0])[axes[1]]
        flat = flat_view(view)[0]
    return flat.view(np.uint16) if flat.dtype == np.float16 else flat


@lru_cache(maxsize=256)
def _dense(shape: tuple, strides: tuple, itemsize: int) -> bool:
    """Whether an array fills its memory without gaps, all strides positive (any axis order)."""
    expected = itemsize
    for stride, n in sorted((stride, n) for stride, n in zip(strides, shape) if n > 1):
        if stride != expected:
            return False
        expected *= n
    return True


class ContractPlan(NamedTuple):
    """Every argument of ``kernels._contract`` that depends on the geometry only (not the data
    pointers, not ``stream``): one record for numba, made once per geometry by ``_contract_plan``.
    Arrays are int64 unless said; the five axes are in role order (package docstring)."""

    src_strides: np.ndarray  # element strides of the source buffer
    dst_strides: np.ndarray
    dst_shape: np.ndarray
    ptr0: np.ndarray  # axes 0-2: CSR tables of (source index, float32 weight) per destination index
    src0: np.ndarray
    weight0: np.ndarray
    ptr1: np.ndarray
    src1: np.ndarray
    weight1: np.ndarray
    ptr2: np.ndarray
    src2: np.ndarray
    weight2: np.ndarray
    block_columns: int  # axis 3: destination columns per block
    block_first: np.ndarray  # the first source column each block reads
    block_count: np.ndarray  # how many it reads
    column_identity: bool  # axis 3 is not resampled
    slot: np.ndarray  # uint32 [column, slot]: 1 + source column relative to the block's first, 0 = padding
    slot_weight: np.ndarray  # float32, the same shape
    affine: np.ndarray  # affine span (``affine._affine_span``): phases, slots, first and end column
    affine_base: np.ndarray
    affine_weight: np.ndarray
    weighted: bool  # some weight is not 1
    zero: float  # the sums' starting value (_FORWARD_ZERO or _GRADIENT_ZERO)
    max_taps: int  # most product taps of one work item
    columns_first: bool  # ``_columns_first_fits``


@lru_cache(maxsize=64)
def _contract_plan(transpose: bool, src_shape: tuple, src_strides: tuple, dst_shape: tuple, dst_strides: tuple,
                   itemsize: int, tap_keys: tuple) -> tuple:
    """Axis roles, work items, buffer offsets, the kernel's ``ContractPlan``, the same as a plain
    tuple (what the kernel takes: numba types a plain tuple's fields in its C dispatcher, a named
    one's in Python, 1.8 us more per call on a Sapphire Rapids Xeon) and its ``path``."""
    src = np.lib.stride_tricks.as_strided(np.empty(0, f"u{itemsize}"), src_shape, src_strides)
    dst = np.lib.stride_tricks.as_strided(np.empty(0, f"u{itemsize}"), dst_shape, dst_strides)
    taps = [(np.frombuffer(index, np.int64).reshape(-1, 2), np.frombuffer(weight, np.float32).reshape(-1, 2))
            for index, weight in tap_keys]
    src, dst, taps = _pad(src, dst, taps)
    n_in = dst.shape if transpose else src.shape  # forward input sizes
    identity = [_is_identity(*taps[d], n_in[d]) for d in range(RANK)]
    order = _axis_order(dst)
    # Role assignment (package docstring): a non-resampled innermost axis becomes the unit axis.
    if identity[order[-1]] and dst.shape[order[-1]] > 1:
        outer, column, unit = [None] + order[:2], order[2], order[3]
    else:
        outer, column, unit = order[:3], order[3], None
    axes = (tuple(d for d in outer + [column, unit] if d is not None),
            tuple(np.newaxis if d is None else slice(None) for d in outer + [column, unit]))
    _, src_offset, src_strides = _flat(src.transpose(axes[0])[axes[1]])
    dst_view = dst.transpose(axes[0])[axes[1]]
    _, dst_offset, dst_strides = _flat(dst_view)
    dst_shape = np.array(dst_view.shape, dtype=np.int64)
    outer_tables = [_outer_table(*tap_key(*taps[d]), n_in[d], transpose) if d is not None
                    else _outer_table(*tap_key(*_identity_taps(1)), 1, transpose) for d in outer]
    units = int(dst_shape[4])
    block_columns = max(1, ROW_ELEMENTS // units)
    block_first, block_count, slot, slot_weight, affine, affine_base, affine_weight = _column_table(
        *tap_key(*taps[column]), n_in[column], transpose, block_columns)
    weighted = not (all(np.all(table[2] == 1) for table in outer_tables) and np.all(slot_weight[slot != 0] == 1))
    max_taps = max(1, int(np.prod([np.diff(table[0]).max() for table in outer_tables])))
    columns_first = _columns_first_fits(itemsize, src_strides, dst_strides, units, block_first.size, slot, affine,
                                        affine_weight, bool(weighted))
    plan = ContractPlan(src_strides, dst_strides, dst_shape, *outer_tables[0], *outer_tables[1], *outer_tables[2],
                        block_columns, block_first, block_count, bool(identity[column]), slot, slot_weight,
                        affine, affine_base, affine_weight, bool(weighted),
                        _GRADIENT_ZERO if transpose else _FORWARD_ZERO, max_taps, bool(columns_first))
    # Which branches of _contract this plan can take (see kernels._contract_kernel), from the conditions
    # the kernel tests; pixel sums also need consecutive slots, which the kernel tests itself.
    pixels = (units > 1 and src_strides[4] == 1 and src_strides[3] == units and dst_strides[4] == 1
              and not identity[column])
    direct_slots = int(slot.shape[1]) if pixels and slot.shape[1] <= 2 else 0  # pixels read directly
    pixel_sums = bool(pixels and itemsize == 4 and not weighted)
    tap_counts = [np.diff(table[0]) for table in outer_tables]
    item_taps = (int(np.prod([counts.min() for counts in tap_counts])), max_taps)  # fewest, most
    narrow = _narrow_fits(units, bool(identity[column]), block_first.size, src_strides)
    row_sum = not narrow and _row_sum_needed(bool(columns_first), direct_slots, pixel_sums, slot, item_taps)
    path = (columns_first, direct_slots, int(weighted), pixel_sums, row_sum, bool(identity[column]), units == 1,
            narrow)
    items = int(np.prod(dst_shape[:3])) * block_first.size
    return axes, items, src_offset, dst_offset, plan, tuple(plan), path


def _narrow_fits(units: int, column_identity: bool, blocks: int, src_strides: np.ndarray) -> bool:
    """Whether every work item of a plan is an NCHW row that ``narrow._narrow_rows`` computes: unit
    size 1, the column axis resampled, one column block, the source's columns contiguous
    (``_contract``'s ``src_packed``), as the kernel tests it."""
    return bool(units == 1 and not column_identity and blocks == 1 and src_strides[4] == 1 and src_strides[3] == 1)


def _row_sum_needed(columns_first: bool, direct_slots: int, pixel_sums: bool, slot: np.ndarray,
                    item_taps: tuple[int, int]) -> bool:
    """Whether some work item reaches ``_contract``'s row-sum branch: not when the branches before
    it take every item (their conditions, as the kernel tests them): columns first, items of one
    or more taps; pixels read directly, items of one or two taps (``item_taps``: the fewest and
    the most of any item, products of the outer axes' counts); pixel sums, every item when the
    real slots of each column are consecutive source columns (``rows._consecutive_slots``). A
    kernel built without the branch compiles without the row sum and its writers (issue 23)."""
    fewest, most = item_taps
    if columns_first and fewest >= 1 or direct_slots and fewest >= 1 and most <= 2:
        return False
    real = slot[:, 1:] != 0
    broken = real & ((slot[:, :-1] == 0) | (slot[:, 1:] != slot[:, :-1] + 1))
    return not (pixel_sums and not broken.any())


def _columns_first_fits(itemsize: int, src_strides: np.ndarray, dst_strides: np.ndarray, units: int, blocks: int,
                        slot: np.ndarray, affine: np.ndarray, affine_weight: np.ndarray, weighted: bool) -> bool:
    """Whether ``_contract`` sums the column axis first (``_half_columns_first``): weighted
    float16 NHWC rows of packed pixels of whole vectors, in one column block, whose 4-slot
    columns form an affine span of one phase (4 consecutive source columns advancing by 2: linear
    2x gradients) with no padding slot inside it (the span reads every slot's column)."""
    lo, hi = affine[2], affine[3]
    return bool(itemsize == 2 and half.HARDWARE_HALF and weighted and blocks == 1
                and src_strides[4] == 1 and src_strides[3] == units and dst_strides[4] == 1 and dst_strides[3] == units
                and units % (simd.VECTOR_BYTES // 4) == 0 and slot.shape[1] == 4 and affine[0] == 1 and affine[1] == 4
                and np.all(affine_weight[:, lo:hi] != 0))
