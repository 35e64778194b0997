"""Fast depthwise convolution family (SPEC 5.2-5.4, 5.6): forward, backprop input, backprop filter.

Arrays arrive as NHWC-indexed views of any strides (NCHW data as a transposed view): x / dx
``[N, H, W, C]``, y / dy ``[N, OH, OW, C*M]``, filter / dfilter ``[fh, fw, C, M]``. Channel
``k = c*M + m`` (SPEC 5.2). Every kernel is a gather: each output element is computed by one
thread, in an order fixed by the problem alone, so results are bit-identical whatever the thread
count or schedule, and NCHW gives the same bits as NHWC.

* Summation order of one output element. Forward: taps (ky, kx) ascending, from +0. Backprop
  input: for each m, taps (ky, kx) ascending from +0, then the M partial sums added in m order.
  Backprop filter: 16 lanes per filter element, lane ``ox % 16`` summing its (row, ox) terms in
  order; lanes added in order; then row chunks, a number fixed by the shapes alone
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
* ``rows``, ``taps``: the register-blocked microkernels (whole filter rows; any taps).
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

from ..._depthwise_reference import REFERENCE_KERNELS
from .. import simd
from ..pool import share
from ..strided import element_aligned
from .codecs import _FLOAT, _HALF_KINDS
from .filter import _backprop_filter_kernel_for, _combine_chunks
from .kernels import _backprop_input_kernel_for, _forward_kernel_for, _planar_blocks_kernel
from .plan import (_IN_PLACE_ROW_BYTES, _LANES, _MAX_EMPTY_PLANES, PlanarBlocks, _accumulator, _direct_rows,
                   _filter_chunks, _filter_group_rows, _forward_margins, _geometry, _is_planar, _kernel_view,
                   _live_taps, _no_rows, _on_lines, _pitch, _planar_block_rows, _rows_per_job, _streams_rows,
                   _tap_paths, _tap_shifts, _taps_per_plane, _weights, _zero_margins)

__all__ = ["conv_forward", "backprop_input", "backprop_filter"]

_REFERENCE_NAMES = {"forward": "conv_forward", "input": "backprop_input", "filter": "backprop_filter"}


def _run_planar_blocks(src, src_off, src_st, wv, out, out_off, out_st, sizes, shift_y, shift_x, adjoint,
                       dtype) -> None:
    """``sizes``: (batch, out_h, out_w, src_h, src_w, out planes, M); jobs of ``_planar_block_rows`` rows."""
    batch, out_h, out_w, src_h, src_w, planes, mult = sizes
    block_rows = _planar_block_rows(out_h, out_w, shift_x)
    geo = PlanarBlocks(*map(int, (batch, out_h, out_w, src_h, src_w, planes, mult, block_rows)))
    share(_planar_blocks_kernel, batch * planes * -(-out_h // block_rows), src.nbytes + out.nbytes, src, src_off,
          src_st, wv, out, out_off, out_st, geo, shift_y, shift_x, adjoint, _HALF_KINDS.get(dtype, _FLOAT))


def _entry_point(role: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """``compute(a, b, out, *attrs)`` for non-empty operands and an element-aligned ``out``: an empty
    output needs nothing, an empty operand means a sum over no taps (zeros), and an output view
    whose strides are not whole elements is computed into a temporary and copied. ``role`` says
    which operands are the input-space tensor and the filter ("forward": x, filter, y; "input":
    dy, filter, dx; "filter": x, dy, dfilter), so that taps reading only padding are left out
    (:func:`_live_taps`)."""
    def wrap(compute: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(compute)
        def entry(a: np.ndarray, b: np.ndarray, out: np.ndarray, stride_h: int, stride_w: int, dil_h: int,
                  dil_w: int, pad_top: int, pad_left: int) -> None:
            if out.size == 0:
                return
            if a.size == 0 or b.size == 0:
                out[...] = 0
                return
            space = out if role == "input" else a
            filter_shape = out.shape if role == "filter" else b.shape
            output_space = a if role == "input" else (b if role == "filter" else out)
            rows = _live_taps(space.shape[1], output_space.shape[1], filter_shape[0], stride_h, dil_h, pad_top)
            cols = _live_taps(space.shape[2], output_space.shape[2], filter_shape[1], stride_w, dil_w, pad_left)
            if rows is None or cols is None:
                out[...] = 0  # every tap reads padding
                return
            (k0h, k1h, crop_h, pad_top, dil_h), (k0w, k1w, crop_w, pad_left, dil_w) = rows, cols
            if (k0h, k1h + 1, k0w, k1w + 1, crop_h, crop_w) != (0, filter_shape[0], 0, filter_shape[1], 0, 0):
                taps = np.s_[k0h:k1h + 1, k0w:k1w + 1]
                if role == "forward":
                    a, b = a[:, crop_h:, crop_w:], b[taps]
                elif role == "input":
                    out[...] = 0  # dx positions before the crop and taps left out get nothing
                    b, out = b[taps], out[:, crop_h:, crop_w:]
                else:
                    out[...] = 0
                    a, out = a[:, crop_h:, crop_w:], out[taps]
            space = out if role == "input" else a
            output_space = a if role == "input" else (b if role == "filter" else out)
            if output_space.shape[2] == 1:
                stride_w = 1  # one output column: the stride is never applied
            attrs = (stride_h, stride_w, dil_h, dil_w, pad_top, pad_left)
            if stride_w > space.shape[2] + _MAX_EMPTY_PLANES:
                # Residue planes (one per stride step) would be mostly empty and grow with the stride
                REFERENCE_KERNELS[_REFERENCE_NAMES[role]](a, b, out, *attrs)
                return
            if element_aligned(out):
                compute(a, b, out, *attrs)
                return
            target = np.empty(out.shape, out.dtype)
            compute(a, b, target, *attrs)
            np.copyto(out, target)
        return entry
    return wrap


@_entry_point("forward")
def conv_forward(x: np.ndarray, filt: np.ndarray, out: np.ndarray, stride_h: int, stride_w: int, dil_h: int,
                 dil_w: int, pad_top: int, pad_left: int) -> None:
    """y[b, oy, ox, c*M+m] = sum_{ky,kx} x[b, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw, c] * F[ky, kx, c, m]
    (SPEC 5.4) into ``out`` [N, OH, OW, C*M]."""
    batch, in_h, in_w, chans = x.shape
    fh, fw, _, mult = filt.shape
    _, out_h, out_w, width = out.shape
    acc = _accumulator(out.dtype)
    native = out.dtype not in _HALF_KINDS
    x_buf, x_off, x_st = _kernel_view(x, True)
    y_buf, y_off, y_st = _kernel_view(out, False)
    planar = _is_planar(x_st[2], x_st[3], in_w, chans)
    pitch = _pitch(width, acc, planar)
    wv = _weights(filt, acc, pitch)
    rows_per_job = _rows_per_job(batch, out_h)
    # Channels-last stride-1 rows wider than _IN_PLACE_ROW_BYTES are staged with zero margins
    # (finite weights, margins within the filter's reach): each row is then one segment of taps,
    # without edge positions, read from 64-byte lines (see _forward_margins). Narrower rows in the
    # canonical layout are read in place, and so are rows of jobs shorter than the filter, which
    # would stage most of their rows twice (a small batch).
    stages_wide_rows = (not planar and stride_w == 1 and width * np.dtype(acc).itemsize > _IN_PLACE_ROW_BYTES
                        and rows_per_job >= (fh - 1) * dil_h + 1)
    margins = (0, 0)
    if stages_wide_rows and np.isfinite(wv).all():
        margins = _forward_margins(fw, dil_w, pad_left, out_w, in_w)
    direct_in = (native and stride_w == 1 and (planar or mult == 1) and pitch == width and margins == (0, 0)
                 and _direct_rows(x_st, in_w, chans, planar))
    direct_out = native and _direct_rows(y_st, out_w, width, planar)
    # A y beyond the cache whose positions start on 64-byte lines is written with non-temporal
    # stores straight from the registers, as backprop input writes dx (docs/performance.md)
    stream_in_place = (direct_out and not planar and out.nbytes >= simd.STREAMING_THRESHOLD_BYTES
                       and _on_lines(y_buf, y_off, y_st, width))
    if planar and stride_h == stride_w == 1 and np.isfinite(wv).all():
        shift_y, shift_x = _tap_shifts(fh, fw, dil_h, dil_w, -pad_top, -pad_left)
        _run_planar_blocks(x_buf, x_off, x_st, wv, y_buf, y_off, y_st, (batch, out_h, out_w, in_h, in_w, width, mult),
                           shift_y, shift_x, False, out.dtype)
        return
    geo = _geometry(batch, in_h, in_w, chans, mult, out_h, out_w, fh, fw, stride_h, stride_w, dil_h, dil_w, pad_top,
                    pad_left, pitch)
    kernel = _forward_kernel_for((planar, stream_in_place, *_tap_paths(fh, fw, stride_w, dil_w, width, acc, planar),
                                  _HALF_KINDS.get(out.dtype, _FLOAT)))
    share(kernel, batch * -(-out_h // rows_per_job), x.nbytes + out.nbytes,
          x_buf, x_off, x_st, x_buf if direct_in else _no_rows(acc), direct_in, wv, y_buf, y_off, y_st,
          y_buf if direct_out else np.empty(0, acc), direct_out, geo, planar, rows_per_job, *margins)


@_entry_point("input")
def backprop_input(dy: np.ndarray, filt: np.ndarray, out: np.ndarray, stride_h: int, stride_w: int, dil_h: int,
                   dil_w: int, pad_top: int, pad_left: int) -> None:
    """dx = the adjoint of ``conv_forward`` applied to dy (SPEC 5.4), into ``out`` [N, H, W, C]."""
    batch, in_h, in_w, chans = out.shape
    fh, fw, _, mult = filt.shape
    _, out_h, out_w, width = dy.shape
    acc = _accumulator(out.dtype)
    native = out.dtype not in _HALF_KINDS
    dy_buf, dy_off, dy_st = _kernel_view(dy, True)
    dx_buf, dx_off, dx_st = _kernel_view(out, False)
    planar = _is_planar(dy_st[2], dy_st[3], out_w, width)
    pitch = _pitch(width, acc, planar)
    wv = _weights(filt, acc, pitch)
    finite = bool(np.isfinite(wv).all())
    # dy rows in the canonical layout are read in place, but stride-1 rows wider than
    # _IN_PLACE_ROW_BYTES are staged with zero margins (finite weights): each row is then one
    # segment of taps, without edge positions (see _zero_margins)
    direct_in = native and pitch == width and _direct_rows(dy_st, out_w, width, planar) and (
        stride_w != 1 or not finite or width * np.dtype(acc).itemsize <= _IN_PLACE_ROW_BYTES)
    # dx rows can be the accumulator when they have its layout and there is no m to combine:
    # channels-last residue planes write every sw-th position in place; planar ones need sw == 1
    direct_out = native and mult == 1 and (stride_w == 1 or not planar) and _direct_rows(dx_st, in_w, chans, planar)
    # A dx beyond the cache skips the read for ownership of its lines: straight from the registers
    # when its positions start on 64-byte lines; through a row buffer where that paid
    # (docs/performance.md): a strided dx (s*s times dy's size), and the rows _streams_rows picks.
    stream_out = direct_out and not planar and out.nbytes >= simd.STREAMING_THRESHOLD_BYTES
    stream_in_place = stream_out and _on_lines(dx_buf, dx_off, dx_st, chans)
    stream_rows = (stream_out and not stream_in_place and stride_w > 1) or _streams_rows(
        out, dx_st, chans, mult, stride_w, planar)
    if planar and stride_h == stride_w == 1 and finite:
        # dx[iy, ix] reads dy[iy + pt - ky*dh, ix + pl - kx*dw]
        shift_y, shift_x = _tap_shifts(fh, fw, -dil_h, -dil_w, pad_top, pad_left)
        _run_planar_blocks(dy_buf, dy_off, dy_st, wv, dx_buf, dx_off, dx_st, (batch, in_h, in_w, out_h, out_w, chans,
                           mult), shift_y, shift_x, True, out.dtype)
        return
    geo = _geometry(batch, in_h, in_w, chans, mult, out_h, out_w, fh, fw, stride_h, stride_w, dil_h, dil_w, pad_top,
                    pad_left, pitch)
    rows_per_job = _rows_per_job(batch, in_h)
    margins = _zero_margins(fw, dil_w, pad_left, out_w, in_w) if not (direct_in or planar) and stride_w == 1 else (0, 0)
    if margins != (0, 0) and not finite:
        margins = (0, 0)  # 0 * inf: the margins would turn skipped taps into NaN
    kernel = _backprop_input_kernel_for((planar, stream_in_place, stream_rows, not direct_out,
                                         *_tap_paths(_taps_per_plane(fh, stride_h, dil_h), fw, stride_w, dil_w, width,
                                                     acc, planar), _HALF_KINDS.get(out.dtype, _FLOAT)))
    share(kernel, batch * -(-in_h // rows_per_job), dy.nbytes + out.nbytes, dy_buf, dy_off, dy_st,
          dy_buf if direct_in else _no_rows(acc), direct_in, wv, dx_buf, dx_off, dx_st,
          dx_buf if direct_out else np.empty(0, acc), direct_out, stream_rows, stream_in_place, geo, planar,
          rows_per_job, *margins)


@_entry_point("filter")
def backprop_filter(x: np.ndarray, dy: np.ndarray, out: np.ndarray, stride_h: int, stride_w: int, dil_h: int,
                    dil_w: int, pad_top: int, pad_left: int) -> None:
    """dF[ky, kx, c, m] = sum_{b,oy,ox} dy[b, oy, ox, c*M+m] * x[b, iy, ix, c] over in-range (iy, ix)
    (SPEC 5.4), into ``out`` [fh, fw, C, M]."""
    batch, in_h, in_w, chans = x.shape
    fh, fw, _, mult = out.shape
    _, out_h, out_w, width = dy.shape
    acc = _accumulator(out.dtype)
    native = x.dtype not in _HALF_KINDS
    x_buf, x_off, x_st = _kernel_view(x, True)
    dy_buf, dy_off, dy_st = _kernel_view(dy, True)
    planar = _is_planar(dy_st[2], dy_st[3], out_w, width)
    direct_x = native and stride_w == 1 and (planar or mult == 1) and _direct_rows(x_st, in_w, chans, planar)
    direct_dy = native and _direct_rows(dy_st, out_w, width, planar)
    partial = np.empty((_filter_chunks(batch * out_h, out_w), fh * fw, width), acc)
    # channels-last rows of 16 positions or more keep their lanes in registers (lanes.py), rows read
    # in place a group at a time
    registers = not planar and out_w >= _LANES
    group_rows = _filter_group_rows(registers and direct_x and direct_dy, fh, stride_h, dil_h, out_w, in_w,
                                    -(-batch * out_h // partial.shape[0]))
    geo = _geometry(batch, in_h, in_w, chans, mult, out_h, out_w, fh, fw, stride_h, stride_w, dil_h, dil_w, pad_top,
                    pad_left)
    kind = _HALF_KINDS.get(out.dtype, _FLOAT)
    kernel = _backprop_filter_kernel_for((planar, registers))
    share(kernel, partial.shape[0], x.nbytes + dy.nbytes, x_buf, x_off, x_st,
          x_buf if direct_x else _no_rows(acc), direct_x, dy_buf, dy_off, dy_st, dy_buf if direct_dy else _no_rows(acc),
          direct_dy, partial, geo, planar, kind, group_rows)
    out_buf, out_off, out_st = _kernel_view(out, False)
    _combine_chunks(partial, out_buf, out_off, out_st, fw, mult, kind)
