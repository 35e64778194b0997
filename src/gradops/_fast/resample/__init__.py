"""Fast resample and resample gradient (SPEC 3.2-3.7): separable gathers over per-axis tap tables.

Both directions are one contraction ``dst[i] = sum over product taps of w * src[j]`` with
per-axis tables that map a destination index to its source indices:

* forward  (``Y = J X``):    the forward taps of ``axis_taps`` (zero weights dropped, SPEC 3.4);
* backward (``dX = J^T dY``): the transposed, CSR tables of ``transpose_taps``.

So the gradient is a gather too: every destination element is computed by one thread, summing
in one fixed order, and results are bit-identical whatever the thread count.

Layout. The axes are permuted by ``dst``'s strides into five roles, outermost first:
``a0, a1, a2`` (outer axes), ``a3`` (the "column" axis) and ``a4`` (the "unit" axis, of size
``U``). If ``dst``'s innermost axis is not resampled (C in NHWC) it becomes the unit axis and
the next one (W) the column axis; otherwise (W in NCHW) the innermost axis is the column axis
and the unit axis is a dummy of size 1. A work item is one index ``(i0, i1, i2)`` and one block
of columns, computed in two steps over contiguous memory:

1. ``row_sum[c, u] = sum over the taps of a0, a1, a2 of w * src[o0, o1, o2, c, u]`` over the
   source columns ``c`` that the block reads: long vectorised loops adding up to four source
   rows per pass, pure sums when every weight is 1 (nearest);
2. the column axis: a copy if it is not resampled, otherwise
   ``dst[j, u] = sum over k of w[j, k] * row_sum[slot[j, k], u]`` through a padded table of
   ``K`` slots per destination column (padding slots read a unit of ``-0.0``, the exact additive
   identity of IEEE addition). With ``U > 1`` (NHWC) each slot adds a vector of ``U`` elements.
   With ``U == 1`` (NCHW) the columns of an "affine span", where the sources are
   ``q * t + base + k`` (2x up- or downsampling), are computed by loops with constant strides
   that LLVM vectorises; the other columns read the table one by one.

float16 NHWC gradients of linear 2x upsampling (4 slots per column, advancing by 2 source
columns: an affine span of one phase) take the two steps the other way round: each source row's
columns are contracted first, once, into a ring of float32 rows that the next destination rows
reuse, ``cc[c, u] = (q0 + q1) + (q2 + q3)``, then ``dst = zero + ((p0 + p1) + (p2 + p3))`` over
the rows' ``p = w * cc`` (``_half_columns_first``). Row first, every float16 element is decoded
twice, and decoding costs these rows more than the sums do.

When step 1 would add only one or two source rows and the pixels (``U > 1``) have one or two
slots (nearest 2x gradients, N3, linear 2x downsampling), step 2 reads those rows directly. So do
the other nearest gradients of pixels (P1, P2): each source element belongs to one pixel, so the
row sum would save no work, only add a pass over it (``_pixel_sums``).

Arithmetic (SPEC 3.7): sums are float32; float16 data are decoded to float32 in the kernel
(exactly) and the result is rounded once to float16 (round to nearest even; subnormals, inf and
NaN handled). Nearest forward resampling is a pure selection and copies bits, NaN payloads
included. Sums start from -0.0 in the forward op (a -0 input read at weight 1 stays -0,
SPEC 3.4) and from +0.0 in the gradient (the scatter of SPEC 3.6 starts from zeros).

Large NHWC outputs whose pixels start on 64-byte lines are written with non-temporal stores
(``_streams``), the same sums; while a row's pixels are summed from the row sum, the source
rows the next row adds are prefetched when the source is larger than the caches hold
(``_store_units``, ``tuning.PREFETCH_SOURCE_BYTES``).

Threads: the calling thread and helper threads claim chunks of work items (see ``pool.py``).

Modules, by layer (docs/architecture.md follows a call through them):

* host side, plain Python before any kernel runs: ``plan.py`` (axis roles, flat buffers, which
  kernel branches a call can take, streaming), ``taps.py`` (the per-axis tables), ``tuning.py``
  (the measured constants);
* kernels: ``kernels.py`` (the ``_contract_kernel`` factory and ``_select``, run by
  ``pool.share``), ``narrow.py`` (``_narrow_rows``: NCHW rows of one column block, the row-sum
  branch's sums in a loop of their own);
* writers of step 2: ``writers.py`` (row stores, direct pixels, streaming stores);
* microkernels: ``rows.py`` (step 1, the row sum), ``affine.py`` (affine spans),
  ``columns_first.py`` (the float16 columns-first path); the generated ones, each family from one
  template (``row_sum_template.py`` writes ``row_sum_microkernels.py``, ``column_template.py``
  writes ``column_microkernels.py``), are chosen by the tables of ``selection.py``;
* numba plumbing: ``codecs.py`` (float32 / float16 element access overloads); the ``noalias``
  pipeline is ``_fast/numba_internals.NoAliasCompiler``;
* first calls: ``ordered.py``, the kernels' sums in NumPy, which answer a call while its kernel
  compiles in the compile process (``_fast/first_calls.py``).

This module holds the entry points the rest of gradops calls: ``prepare_forward`` and
``prepare_backward`` (the run of every call with the same layouts, decided once: what resample's
prepared calls keep), and ``resample_forward`` and ``resample_backward`` (one call). Runs reach
the kernels through this module's global ``share`` (``pool.share``), looked up at each call,
which is where a test replaces it.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..._resample_plan import is_selection, tap_key
from .. import first_calls
from ..pool import share
from ..strided import aligned_input, element_aligned, flat_buffer
from .kernels import _contract_kernel, _select
from .ordered import ordered_contract, ordered_fits, ordered_select, select_fits
from .plan import RANK, Taps, _axis_order, _contract_plan, _flat, _flat_buffer, _pad, _streams
from .taps import _is_identity

__all__ = ["prepare_backward", "prepare_forward", "resample_backward", "resample_forward"]

Run = Callable[[np.ndarray, np.ndarray], None]


def prepare_forward(x: np.ndarray, out: np.ndarray, taps: Taps, key: tuple, selection: bool) -> Run:
    """The run ``run(x, out)`` of every forward call (SPEC 3.3/3.4) whose ``x`` and ``out`` have
    these dtypes, shapes and strides: ``out[o] = sum over the product taps of (product of axis
    weights) * x[indices]``, ``taps[d]`` = ``axis_taps(...)`` of axis ``d``. ``x`` and ``out``:
    rank 1..4, float32 or float16 (the same), any strides; ``out`` must not overlap ``x``.
    ``key``: the taps as bytes (``tap_key`` of each); ``selection``: whether every tap is one
    element at weight 1 (then the bits are copied). Everything the layouts decide is decided
    here; a run works out per call only the flat buffers of its arrays and whether the output's
    address allows streaming stores."""
    if selection:
        return _prepare_select(x, out, taps)
    return _prepare_contract(x, out, taps, False, key)


def prepare_backward(dy: np.ndarray, out: np.ndarray, taps: Taps, key: tuple) -> Run:
    """The run of every gradient call (SPEC 3.6) with these layouts: ``out = J^T dy`` for the
    forward taps ``taps``, computed as a gather; ``dy`` has the forward output's shape, ``out``
    the forward input's; otherwise as :func:`prepare_forward`."""
    return _prepare_contract(dy, out, taps, True, key)


def resample_forward(x: np.ndarray, out: np.ndarray, taps: Taps, key: tuple | None = None,
                     selection: bool | None = None) -> None:
    """One forward call (:func:`prepare_forward`); ``key`` and ``selection`` are worked out here
    if the caller does not keep them."""
    if selection is None:
        selection = is_selection(taps)
    prepare_forward(x, out, taps, _tap_keys(taps, key), selection)(x, out)


def resample_backward(dy: np.ndarray, out: np.ndarray, taps: Taps, key: tuple | None = None) -> None:
    """One gradient call (:func:`prepare_backward`)."""
    prepare_backward(dy, out, taps, _tap_keys(taps, key))(dy, out)


def _tap_keys(taps: Taps, key: tuple | None) -> tuple:
    return key if key is not None else tuple(tap_key(*t) for t in taps)


def _prepare_contract(src: np.ndarray, dst: np.ndarray, taps: Taps, transpose: bool, key: tuple) -> Run:
    """``dst = J src`` (forward taps) or ``J^T src`` (``transpose``) through ``_contract``."""
    if not (element_aligned(src) and element_aligned(dst)):
        return _staged(_prepare_contract, taps, transpose, key)
    # Everything but the data pointers depends on the geometry only: planned once per geometry.
    planned = _contract_plan(transpose, src.shape, src.strides, dst.shape, dst.strides, src.itemsize, key)
    axes, items, src_offset, dst_offset, plan, record, path = planned
    kernel, moved = _contract_kernel(path), src.nbytes + dst.nbytes

    def run(src: np.ndarray, dst: np.ndarray) -> None:
        dst_buffer = _flat_buffer(dst, axes)
        # while the kernel compiles, the call runs its sums in NumPy (same bits; first_calls, ordered.py)
        first_calls.run_gated(share, (kernel, items, moved, _flat_buffer(src, axes), src_offset, dst_buffer,
                                      dst_offset, record,
                                      _streams(dst_buffer, dst_offset, plan.dst_strides, plan.dst_shape)),
                              ordered_contract, ordered_fits, (src, dst, planned))
    return run


def _prepare_select(x: np.ndarray, out: np.ndarray, taps: Taps) -> Run:
    """Nearest forward: ``_select`` copies the bits of the selected elements."""
    if not (element_aligned(x) and element_aligned(out)):
        return _staged(_prepare_select, taps)
    lead = (np.newaxis,) * (RANK - out.ndim)
    padded_x, padded_out, padded_taps = _pad(x, out, taps)
    order = _axis_order(padded_out)
    _, src_offset, src_strides = _flat(padded_x.transpose(order), bits=True)
    _, dst_offset, dst_strides = _flat(padded_out.transpose(order), bits=True)
    dst_shape = np.array([padded_out.shape[d] for d in order], dtype=np.int64)
    indices = [np.ascontiguousarray(padded_taps[d][0][:, 0], dtype=np.int64) for d in order]
    inner_identity = _is_identity(*padded_taps[order[-1]], padded_x.shape[order[-1]])
    items, moved = int(np.prod(dst_shape[:3])), x.nbytes + out.nbytes

    def bits(array: np.ndarray) -> np.ndarray:
        view = array[lead].transpose(order)
        return flat_buffer(view.view(np.uint16 if view.dtype == np.float16 else np.uint32))

    def run(x: np.ndarray, out: np.ndarray) -> None:
        first_calls.run_gated(share, (_select, items, moved, bits(x), src_offset, src_strides, bits(out), dst_offset,
                                      dst_strides, dst_shape, *indices, inner_identity),
                              ordered_select, select_fits, (x, out, taps))
    return run


def _staged(prepare: Callable[..., Run], *arguments: object) -> Run:
    """The run of arrays that are not element-aligned (strides that are not multiples of the item
    size: hand-made views): the source copied, the output computed into a fresh array and copied
    back. ``prepare(*arguments)`` prepares the aligned call: ``_prepare_contract`` (with taps,
    transpose and key) or ``_prepare_select`` (with taps)."""
    def run(src: np.ndarray, dst: np.ndarray) -> None:
        src, staged = aligned_input(src), np.empty(dst.shape, dst.dtype)
        prepare(src, staged, *arguments)(src, staged)
        np.copyto(dst, staged)
    return run
