"""Fast depthwise convolution family (SPEC 5.2-5.4, 5.6): forward, backprop input, backprop filter.

Arrays arrive as NHWC-indexed views of any strides (NCHW data as a transposed view): x / dx
``[N, H, W, C]``, y / dy ``[N, OH, OW, C*M]``, filter / dfilter ``[fh, fw, C, M]``. Channel
``k = c*M + m`` (SPEC 5.2). Every kernel is a gather: each output element is computed by one
thread, in an order fixed by the problem alone, so results are bit-identical whatever the thread
count or schedule, and NCHW gives the same bits as NHWC.

* Summation order of one output element. Forward: taps (ky, kx) ascending, from +0. Backprop
  input: for each m, taps (ky, kx) ascending from +0, then the M partial sums added in m order.
  Backprop filter: 2 lanes per filter element, lane ``ox % 2`` summing its (row, ox) terms in
  order; lane 0 + lane 1; then row chunks, a number fixed by the shapes alone
  (``plan._filter_chunks``, never by the thread count), added in order.
* Precision. float16 / bfloat16 load as float32 (bit-exact decoding), accumulate in float32 and
  round once, to nearest even; float32 accumulates in float32, float64 in float64.

The modules, from the host down (each docstring says how its part works):

* here: the entry points ``conv_forward``, ``backprop_input`` and ``backprop_filter``, called by
  ``gradops.depthwise`` with NHWC-indexed views; they take the host's decisions and hand a kernel
  to ``pool.share``.
* ``plan``: the host's decisions, in plain Python (row layout, rows read in place or staged,
  streaming stores, weight table, jobs, taps that read only padding), and the tuning constants.
* ``kernels``: the forward and backprop-input kernel factories and the planar stride-1 kernel,
  the parallel job drivers; ``filter``: the backprop-filter kernel and its reduction.
* ``staging``: source rows to float rows of the canonical layouts; ``planes``: one residue plane
  of an output row, split into segments by the taps that reach them.
* ``rows``, ``taps``: the register-blocked microkernels (whole filter rows; any taps). The
  filter-row blocks and the tiles of any taps are generated, one template per family
  (``row_template`` writes ``row_microkernels_ascending`` and ``_descending``,
  ``tile_template`` writes ``tile_microkernels``); ``selection`` holds the tables that say which
  of them a call uses on the code-generation target's tier.
* ``writers``: dx rows from a row buffer, their M sums added, rounded, streamed.
* ``codecs``: element loads and stores (half decoding and encoding) and vector stores.

Importing this package imports every module, so numba's ``@overload`` registrations
(``codecs``, ``writers``) are in place before any kernel compiles. A cached kernel is checked
against every source of ``gradops._fast`` (``_fast/__init__.py``), so editing a module it calls
recompiles it.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from ..._depthwise_reference import REFERENCE_KERNELS, no_run, reference_run, zeros_run
from .. import first_calls, simd
from ..pool import share, thread_count
from ..strided import element_aligned
from ..codecs import FLOAT, HALF_KINDS
from .filter import _backprop_filter_kernel_for, _combine_chunks
from .call_plans import CallPlan, filter_plan, forward_plan, input_plan, table_layout
from .kernels import _backprop_input_kernel_for, _forward_kernel_for, _planar_blocks_kernel_for
from .ordered import ordered_fits, ordered_run
from .plan import (_MAX_EMPTY_PLANES, PlanarBlocks, _kernel_buffer, _kernel_record, _kernel_view, _live_taps,
                   _line_offset, _planar_block_rows, _positions_line_offset, _weights, filter_line_shift)

__all__ = ["conv_forward", "backprop_input", "backprop_filter", "first_calls", "ordered_fits", "ordered_run"]

_REFERENCE_NAMES = {"forward": "conv_forward", "input": "backprop_input", "filter": "backprop_filter"}


def _run_planar_blocks(src, src_off, src_st, wv, out, out_off, out_st, sizes, shift_y, shift_x, adjoint,
                       dtype) -> None:
    """``sizes``: (batch, out_h, out_w, src_h, src_w, out planes, M); jobs of ``_planar_block_rows`` rows."""
    batch, out_h, out_w, src_h, src_w, planes, mult = sizes
    block_rows = _planar_block_rows(out_h, out_w, shift_x)
    geo = _kernel_record(PlanarBlocks, batch, out_h, out_w, src_h, src_w, planes, mult, block_rows)
    stream = (dtype not in HALF_KINDS and out_st[2] == 1 and out.nbytes >= simd.STREAMING_THRESHOLD_BYTES
              and _rows_on_lines(out, out_off, out_st))
    share(_planar_blocks_kernel_for(stream), batch * planes * -(-out_h // block_rows), src.nbytes + out.nbytes, src,
          src_off, src_st, wv, out, out_off, out_st, geo, shift_y, shift_x, adjoint, HALF_KINDS.get(dtype, FLOAT))


def _rows_on_lines(out: np.ndarray, out_off: int, out_st: np.ndarray) -> bool:
    """Whether every planar row of a flat view starts on a 64-byte line: streamed, each row's
    stores then fill whole lines, and no line is written both streamed and plainly (such a line
    is read from memory first, which made a streamed NumPy ``out=``, 16 bytes past a line, slower
    than plain stores; docs/performance.md, "Depthwise")."""
    line = simd.LINE_BYTES // out.itemsize
    return _line_offset(out, out_off) == 0 and all(int(s) % line == 0 for s in (out_st[0], out_st[1], out_st[3]))


Runner = Callable[[np.ndarray, np.ndarray, np.ndarray], None]


def _crop(role: str, taps: tuple, crop_h: int, crop_w: int, a: np.ndarray, b: np.ndarray, out: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The operands without the taps left out by ``_live_taps`` and the positions before the crop."""
    if role == "forward":
        return a[:, crop_h:, crop_w:], b[taps], out
    if role == "input":
        return a, b[taps], out[:, crop_h:, crop_w:]
    return a[:, crop_h:, crop_w:], b, out[taps]


def _entry_point(role: str) -> Callable[[Callable[..., Runner]], Callable[..., None]]:
    """Wraps ``prepare(a, b, out, *attrs) -> run`` of non-empty operands and an element-aligned
    ``out`` into the entry point ``entry(a, b, out, *attrs)``, and its own ``entry.prepare``.

    ``entry.prepare`` takes every decision that the operands' layouts (shapes, strides, dtypes)
    and the attributes fix, and returns ``run(a, b, out)``, which computes operands of those
    layouts (``gradops.depthwise`` keeps it for the calls that follow): an empty output needs
    nothing, an empty operand means a sum over no taps (zeros), and an output view whose strides
    are not whole elements is computed into a temporary and copied. ``role`` says which operands
    are the input-space tensor and the filter ("forward": x, filter, y; "input": dy, filter, dx;
    "filter": x, dy, dfilter), so that taps reading only padding are left out
    (:func:`_live_taps`)."""
    def wrap(prepare_compute: Callable[..., Runner]) -> Callable[..., None]:
        def prepare(a: np.ndarray, b: np.ndarray, out: np.ndarray, stride_h: int, stride_w: int, dil_h: int,
                    dil_w: int, pad_top: int, pad_left: int) -> Runner:
            if out.size == 0:
                return no_run
            if a.size == 0 or b.size == 0:
                return zeros_run
            space = out if role == "input" else a
            filter_shape = out.shape if role == "filter" else b.shape
            output_space = a if role == "input" else (b if role == "filter" else out)
            rows = _live_taps(space.shape[1], output_space.shape[1], filter_shape[0], stride_h, dil_h, pad_top)
            cols = _live_taps(space.shape[2], output_space.shape[2], filter_shape[1], stride_w, dil_w, pad_left)
            if rows is None or cols is None:
                return zeros_run  # every tap reads padding
            (k0h, k1h, crop_h, pad_top, dil_h), (k0w, k1w, crop_w, pad_left, dil_w) = rows, cols
            crop = None
            if (k0h, k1h + 1, k0w, k1w + 1, crop_h, crop_w) != (0, filter_shape[0], 0, filter_shape[1], 0, 0):
                crop = (np.s_[k0h:k1h + 1, k0w:k1w + 1], crop_h, crop_w)
                a, b, out = _crop(role, *crop, a, b, out)
            space = out if role == "input" else a
            output_space = a if role == "input" else (b if role == "filter" else out)
            if output_space.shape[2] == 1:
                stride_w = 1  # one output column: the stride is never applied
            attrs = (stride_h, stride_w, dil_h, dil_w, pad_top, pad_left)
            if stride_w > space.shape[2] + _MAX_EMPTY_PLANES:
                # Residue planes (one per stride step) would be mostly empty and grow with the stride
                run = functools.partial(reference_run, REFERENCE_KERNELS[_REFERENCE_NAMES[role]], attrs)
            elif element_aligned(out):
                run = prepare_compute(a, b, out, *attrs)
            else:
                run = functools.partial(_through_temporary,
                                        prepare_compute(a, b, np.empty(out.shape, out.dtype), *attrs))
            if crop is None:
                return run
            # dx positions before the crop, and filter taps left out, get nothing
            return functools.partial(_cropped, role, crop, run)

        @functools.wraps(prepare_compute)
        def entry(a: np.ndarray, b: np.ndarray, out: np.ndarray, *attrs: int) -> None:
            prepare(a, b, out, *attrs)(a, b, out)
        entry.prepare = prepare
        return entry
    return wrap


def _through_temporary(run: Runner, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    target = np.empty(out.shape, out.dtype)
    run(a, b, target)
    np.copyto(out, target)


def _cropped(role: str, crop: tuple, run: Runner, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    if role != "forward":
        out[...] = 0
    run(*_crop(role, *crop, a, b, out))


@_entry_point("forward")
def conv_forward(x: np.ndarray, filt: np.ndarray, out: np.ndarray, stride_h: int, stride_w: int, dil_h: int,
                 dil_w: int, pad_top: int, pad_left: int) -> Runner:
    """y[b, oy, ox, c*M+m] = sum_{ky,kx} x[b, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw, c] * F[ky, kx, c, m]
    (SPEC 5.4) into ``out`` [N, OH, OW, C*M]."""
    batch, in_h, in_w, chans = x.shape
    _, out_h, out_w, width = out.shape
    _, x_off, x_st = _kernel_view(x, True)
    _, y_off, y_st = _kernel_view(out, False)
    layout = _plan_layout(x, x_st, out, y_st, filt, (stride_h, stride_w, dil_h, dil_w, pad_top, pad_left))
    planned = _planned(forward_plan, layout, table_layout(out.dtype, (x_st[2], x_st[3]), in_w, chans, width),
                       y_off, y_st, width)
    moved = x.nbytes + out.nbytes

    def run(x: np.ndarray, filt: np.ndarray, out: np.ndarray) -> None:
        x_buf, y_buf = _kernel_buffer(x, True), _kernel_buffer(out, False)
        plan, wv = planned(filt, out, y_buf)
        if plan.shifts is not None:
            _run_planar_blocks(x_buf, x_off, x_st, wv, y_buf, y_off, y_st, (batch, out_h, out_w, in_h, in_w, width,
                               filt.shape[3]), *plan.shifts, False, out.dtype)
            return
        share(_forward_kernel_for(plan.path), plan.items, moved, x_buf, x_off, x_st,
              x_buf if plan.direct_in else plan.rows_stand_in, plan.direct_in, wv, y_buf, y_off, y_st,
              y_buf if plan.direct_out else plan.out_stand_in, plan.direct_out, plan.geo, plan.planar,
              plan.rows_per_job, *plan.margins, plan.phase)
    return run


@_entry_point("input")
def backprop_input(dy: np.ndarray, filt: np.ndarray, out: np.ndarray, stride_h: int, stride_w: int, dil_h: int,
                   dil_w: int, pad_top: int, pad_left: int) -> Runner:
    """dx = the adjoint of ``conv_forward`` applied to dy (SPEC 5.4), into ``out`` [N, H, W, C]."""
    batch, in_h, in_w, chans = out.shape
    _, out_h, out_w, width = dy.shape
    _, dy_off, dy_st = _kernel_view(dy, True)
    _, dx_off, dx_st = _kernel_view(out, False)
    layout = _plan_layout(dy, dy_st, out, dx_st, filt, (stride_h, stride_w, dil_h, dil_w, pad_top, pad_left))
    planned = _planned(input_plan, layout, table_layout(out.dtype, (dy_st[2], dy_st[3]), out_w, width, width),
                       dx_off, dx_st, chans)
    moved = dy.nbytes + out.nbytes

    def run(dy: np.ndarray, filt: np.ndarray, out: np.ndarray) -> None:
        dy_buf, dx_buf = _kernel_buffer(dy, True), _kernel_buffer(out, False)
        plan, wv = planned(filt, out, dx_buf)
        if plan.shifts is not None:
            _run_planar_blocks(dy_buf, dy_off, dy_st, wv, dx_buf, dx_off, dx_st, (batch, in_h, in_w, out_h, out_w,
                               chans, filt.shape[3]), *plan.shifts, True, out.dtype)
            return
        share(_backprop_input_kernel_for(plan.path), plan.items, moved, dy_buf, dy_off, dy_st,
              dy_buf if plan.direct_in else plan.rows_stand_in, plan.direct_in, wv, dx_buf, dx_off, dx_st,
              dx_buf if plan.direct_out else plan.out_stand_in, plan.direct_out, plan.stream_rows,
              plan.stream_in_place, plan.geo, plan.planar, plan.rows_per_job, *plan.margins, plan.phase)
    return run


def _planned(plan_function: Callable[..., CallPlan], layout: tuple, table: tuple[type, bool, int], out_off: int,
             out_st: np.ndarray, out_chans: int) -> Callable[[np.ndarray, np.ndarray, np.ndarray],
                                                           tuple[CallPlan, np.ndarray]]:
    """A run's ``planned(filt, out, out_buf) -> (plan, weight table)``: ``plan_function``
    (``forward_plan`` or ``input_plan``) for the run's ``layout`` (``_plan_layout``) and the
    facts of this call's data (``_data_facts``), kept per facts; ``table``: ``table_layout``'s
    answer for the run, as the plan function's own."""
    acc, _, pitch = table
    plans: dict = {}

    def planned(filt: np.ndarray, out: np.ndarray, out_buf: np.ndarray) -> tuple[CallPlan, np.ndarray]:
        weights, finite = _weights(filt, acc, pitch)
        facts = _data_facts(finite, out, out_buf, out_off, out_st, out_chans)
        plan = plans.get(facts) or plans.setdefault(facts, plan_function(*layout, *facts))
        return plan, weights
    return planned


def _plan_layout(src: np.ndarray, src_st: np.ndarray, out: np.ndarray, out_st: np.ndarray, filt: np.ndarray,
                 attrs: tuple) -> tuple:
    """The start of a call plan's key (``call_plans``) that the layouts and attributes fix; the
    rest is ``_data_facts``, which a run keys its plans by (hashing the whole key again on every
    call cost microseconds)."""
    return src.shape, tuple(src_st.tolist()), out.shape, tuple(out_st.tolist()), out.dtype, filt.shape, attrs


def _data_facts(finite: bool, out: np.ndarray, out_buf: np.ndarray, out_off: int, out_st: np.ndarray,
                out_chans: int) -> tuple[bool, int, int, int]:
    """The end of a call plan's key (``call_plans``) that the layout does not fix: whether the
    filter's weights are all ``finite`` (``_weights`` tells); for an output large enough to
    stream, how many bytes past a 64-byte line its positions (``out_chans`` each) all start
    (``_positions_line_offset``; -1: not at one point, and for smaller outputs, which are not
    asked: the address costs a ctypes object); the thread count and the streaming threshold
    (tests lower it)."""
    line_offset = (_positions_line_offset(out_buf, out_off, out_st, out_chans)
                   if out.nbytes >= simd.STREAMING_THRESHOLD_BYTES else -1)
    return finite, line_offset, thread_count(), simd.STREAMING_THRESHOLD_BYTES


@_entry_point("filter")
def backprop_filter(x: np.ndarray, dy: np.ndarray, out: np.ndarray, stride_h: int, stride_w: int, dil_h: int,
                    dil_w: int, pad_top: int, pad_left: int) -> Runner:
    """dF[ky, kx, c, m] = sum_{b,oy,ox} dy[b, oy, ox, c*M+m] * x[b, iy, ix, c] over in-range (iy, ix)
    (SPEC 5.4), into ``out`` [fh, fw, C, M]."""
    _, x_off, x_st = _kernel_view(x, True)
    _, dy_off, dy_st = _kernel_view(dy, True)
    _, out_off, out_st = _kernel_view(out, False)
    plan = filter_plan(x.shape, tuple(x_st.tolist()), dy.shape, tuple(dy_st.tolist()), out.dtype, out.shape,
                       (stride_h, stride_w, dil_h, dil_w, pad_top, pad_left))
    fh, fw, _, mult = out.shape
    partial_shape = (plan.chunks, fh * fw, dy.shape[3])
    moved = x.nbytes + dy.nbytes

    def run(x: np.ndarray, dy: np.ndarray, out: np.ndarray) -> None:
        x_buf, dy_buf = _kernel_buffer(x, True), _kernel_buffer(dy, True)
        shift = filter_line_shift(x_buf, x_off, dy_buf, dy_off) if plan.walks_from_lines else 0
        partial = np.empty(partial_shape, plan.acc)
        share(_backprop_filter_kernel_for(*plan.path), plan.chunks, moved, x_buf, x_off, x_st,
              x_buf if plan.direct_x else plan.rows_stand_in, plan.direct_x, dy_buf, dy_off, dy_st,
              dy_buf if plan.direct_dy else plan.rows_stand_in, plan.direct_dy, partial, plan.geo, plan.kind,
              plan.group_rows, shift)
        _combine_chunks(partial, _kernel_buffer(out, False), out_off, out_st, fw, mult, plan.kind)
    return run
