"""Call plans: every decision of a depthwise call that its data does not change,
made once per geometry, memory layout, dtype, thread count and the two data-dependent facts
below, and remembered (issue 23: host-side plans).

A training step calls each layer's operators with the same shapes again and again; deciding the
staging, streaming, tap paths and job sizes from scratch took 21 us of Python per call, as much
as a batch-1 layer's kernel share on 2 threads. The key holds everything a decision reads:

* sizes, element strides and dtype of both operands, the filter's shape and the attributes;
* whether the filter's weights are all finite (zero margins and the planar blocks need it: 0 * inf
  would turn a skipped tap into NaN);
* whether the output's positions start on 64-byte lines (only asked of outputs large enough to
  stream), the thread count (job sizes) and the streaming threshold (tests lower it).

The data-dependent parts (the weight table, laid out with the plan's ``acc`` and ``pitch``, and
the flat buffers) are made per call.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from .. import simd
from ..codecs import FLOAT, HALF_KINDS
from .plan import (_FILTER_REGISTER_POSITIONS, _FILTER_VECTOR_BYTES, _IN_PLACE_ROW_BYTES, _accumulator, _direct_rows,
                   _filter_chunks, _filter_group_rows, _filter_narrow_rows, _forward_margins, _geometry, _is_planar,
                   _no_rows, _pitch, _rows_per_job, _streams_rows, _streams_step, _tap_paths, _tap_shifts,
                   _taps_per_plane, _whole_lines, _zero_margins, filter_pass_taps)


class CallPlan(NamedTuple):
    """What ``conv_forward`` / ``backprop_input`` pass their kernel besides the data."""

    path: tuple  # the kernel factory's key (``_forward_kernel_for`` / ``_backprop_input_kernel_for``)
    items: int  # jobs: batch x row blocks
    direct_in: bool  # source rows read in place (else staged)
    rows_stand_in: np.ndarray  # the empty read-only array passed where rows are staged
    direct_out: bool  # the output's rows are the accumulator
    out_stand_in: np.ndarray  # the empty array passed where they are not
    stream_rows: bool  # output rows streamed from the row buffer (``writers._stream_row``)
    stream_in_place: bool  # output streamed straight from the registers
    phase: int  # > 0: streamed from the registers in vectors this many elements past the positions' starts
    acc: type  # the sums' type, and the weight table's
    pitch: int  # the weight table's and the staged rows' distance between positions (``_pitch``)
    geo: tuple  # ``plan._geometry``
    planar: bool
    rows_per_job: int
    margins: tuple[int, int]
    # the stride-1 planar path (``_run_planar_blocks``) instead: its tap shifts, else None
    shifts: tuple[np.ndarray, np.ndarray] | None


def table_layout(dtype: np.dtype, source_strides: tuple[int, int], positions: int, channels: int, width: int
                 ) -> tuple[type, bool, int]:
    """The accumulator type, whether the source rows (``positions`` x ``channels``, with these
    position and channel strides) are planar, and the pitch of staged rows of ``width`` = C*M."""
    acc = _accumulator(dtype)
    planar = _is_planar(source_strides[0], source_strides[1], positions, channels)
    return acc, planar, _pitch(width, acc, planar)


@functools.lru_cache(maxsize=512)
def forward_plan(x_shape: tuple, x_st: tuple, y_shape: tuple, y_st: tuple, dtype: np.dtype, filter_shape: tuple,
                 attrs: tuple, finite: bool, line_offset: int, threads: int, streaming_bytes: int) -> CallPlan:
    """The forward's decisions (see ``__init__.conv_forward`` for why each is made)."""
    del threads  # in the key: _rows_per_job reads the thread count
    batch, in_h, in_w, chans = x_shape
    fh, fw, _, mult = filter_shape
    _, out_h, out_w, width = y_shape
    stride_h, stride_w, dil_h, dil_w, pad_top, pad_left = attrs
    acc, planar, pitch = table_layout(dtype, (x_st[2], x_st[3]), in_w, chans, width)
    native = dtype not in HALF_KINDS
    rows_per_job = _rows_per_job(batch, out_h)
    # Channels-last stride-1 rows wider than _IN_PLACE_ROW_BYTES are staged with zero margins
    # (finite weights, margins within the filter's reach): each row is then one segment of taps,
    # without edge positions, read from 64-byte lines (see _forward_margins). Narrower rows in the
    # canonical layout are read in place, and so are rows of jobs shorter than the filter, which
    # would stage most of their rows twice (a small batch).
    stages_wide_rows = (not planar and stride_w == 1 and width * np.dtype(acc).itemsize > _IN_PLACE_ROW_BYTES
                        and rows_per_job >= (fh - 1) * dil_h + 1)
    margins = _forward_margins(fw, dil_w, pad_left, out_w, in_w) if stages_wide_rows and finite else (0, 0)
    direct_in = (native and stride_w == 1 and (planar or mult == 1) and pitch == width and margins == (0, 0)
                 and _direct_rows(x_st, in_w, chans, planar))
    direct_out = native and _direct_rows(y_st, out_w, width, planar)
    # A y beyond the cache is written with non-temporal stores, as backprop input writes dx
    # (docs/performance.md): straight from the registers where its positions start on 64-byte
    # lines, or all at one point of a line with stride 1 (``_phase``); else from the row buffer
    # (``_stream_row``: its whole lines streamed, the partial lines at its ends plain), which
    # NumPy's `out=` arrays (16 bytes past a line) need otherwise: plain stores read every line
    # first. Channels-last rows y can be summed in (``direct_out``) are one run each, as the row
    # buffer is.
    out_bytes = math.prod(y_shape) * dtype.itemsize
    stream_out = direct_out and not planar and out_bytes >= streaming_bytes and _streams_step(width * dtype.itemsize)
    stream_in_place = stream_out and line_offset == 0
    tap_paths = _tap_paths(fh, fw, stride_w, dil_w, width, acc, planar)
    phase = _phase(line_offset, dtype, stride_w, pitch, width, tap_paths) if stream_out else 0
    stream_rows = stream_out and not stream_in_place and not phase
    direct_out = direct_out and not stream_rows  # the sums go to the row buffer first
    shifts = None
    if planar and stride_h == stride_w == 1 and finite:
        shifts = _tap_shifts(fh, fw, dil_h, dil_w, -pad_top, -pad_left)
    geo = _geometry(batch, in_h, in_w, chans, mult, out_h, out_w, fh, fw, stride_h, stride_w, dil_h, dil_w,
                    pad_top, pad_left, pitch)
    path = (planar, stream_in_place, stream_rows, phase > 0, *tap_paths, HALF_KINDS.get(dtype, FLOAT))
    return CallPlan(path, batch * -(-out_h // rows_per_job), direct_in, _no_rows(acc), direct_out,
                    np.empty(0, acc), stream_rows, stream_in_place, phase, acc, pitch, geo, planar, rows_per_job,
                    margins, shifts)


@functools.lru_cache(maxsize=512)
def input_plan(dy_shape: tuple, dy_st: tuple, dx_shape: tuple, dx_st: tuple, dtype: np.dtype, filter_shape: tuple,
               attrs: tuple, finite: bool, line_offset: int, threads: int, streaming_bytes: int) -> CallPlan:
    """Backprop input's decisions (see ``__init__.backprop_input`` for why each is made)."""
    del threads  # in the key: _rows_per_job reads the thread count
    batch, in_h, in_w, chans = dx_shape
    fh, fw, _, mult = filter_shape
    _, out_h, out_w, width = dy_shape
    stride_h, stride_w, dil_h, dil_w, pad_top, pad_left = attrs
    acc, planar, pitch = table_layout(dtype, (dy_st[2], dy_st[3]), out_w, width, width)
    native = dtype not in HALF_KINDS
    # dy rows in the canonical layout are read in place, but stride-1 rows wider than
    # _IN_PLACE_ROW_BYTES are staged with zero margins (finite weights): each row is then one
    # segment of taps, without edge positions (see _zero_margins)
    direct_in = native and pitch == width and _direct_rows(dy_st, out_w, width, planar) and (
        stride_w != 1 or not finite or width * np.dtype(acc).itemsize <= _IN_PLACE_ROW_BYTES)
    # dx rows can be the accumulator when they have its layout and there is no m to combine:
    # channels-last residue planes write every sw-th position in place; planar ones need sw == 1
    direct_out = native and mult == 1 and (stride_w == 1 or not planar) and _direct_rows(dx_st, in_w, chans, planar)
    # A dx beyond the cache skips the read for ownership of its lines: straight from the registers
    # when its positions start on 64-byte lines, or all at one point of a line with stride 1
    # (``_phase``); else through a row buffer (docs/performance.md), as NumPy's `out=` arrays (16
    # bytes past a line) need at stride 2, and the rows _streams_rows picks.
    out_bytes = math.prod(dx_shape) * dtype.itemsize
    stream_out = (direct_out and not planar and out_bytes >= streaming_bytes
                  and _streams_step(stride_w * chans * dtype.itemsize))  # residue planes: every sw-th position
    stream_in_place = stream_out and line_offset == 0
    tap_paths = _tap_paths(_taps_per_plane(fh, stride_h, dil_h), fw, stride_w, dil_w, width, acc, planar)
    phase = _phase(line_offset, dtype, stride_w, pitch, width, tap_paths) if stream_out else 0
    stream_rows = (stream_out and not stream_in_place and not phase) or _streams_rows(
        out_bytes, dtype, dx_st, chans, mult, stride_w, planar, streaming_bytes)
    shifts = None
    if planar and stride_h == stride_w == 1 and finite:
        # dx[iy, ix] reads dy[iy + pt - ky*dh, ix + pl - kx*dw]
        shifts = _tap_shifts(fh, fw, -dil_h, -dil_w, pad_top, pad_left)
    geo = _geometry(batch, in_h, in_w, chans, mult, out_h, out_w, fh, fw, stride_h, stride_w, dil_h, dil_w,
                    pad_top, pad_left, pitch)
    rows_per_job = _rows_per_job(batch, in_h)
    margins = _zero_margins(fw, dil_w, pad_left, out_w, in_w) if not (direct_in or planar) and stride_w == 1 else (0, 0)
    if margins != (0, 0) and not finite:
        margins = (0, 0)  # 0 * inf: the margins would turn skipped taps into NaN
    path = (planar, stream_in_place, stream_rows, phase > 0, not direct_out, *tap_paths, HALF_KINDS.get(dtype, FLOAT))
    return CallPlan(path, batch * -(-in_h // rows_per_job), direct_in, _no_rows(acc), direct_out,
                    np.empty(0, acc), stream_rows, stream_in_place, phase, acc, pitch, geo, planar, rows_per_job,
                    margins, shifts)


def _phase(line_offset: int, dtype: np.dtype, stride_w: int, pitch: int, width: int, tap_paths: tuple) -> int:
    """For an output streamed from the registers whose positions all start ``line_offset`` bytes
    past a 64-byte line (``plan._positions_line_offset``; -1: not at one point), how many elements
    past their starts its vectors start, on the lines: with stride 1 and sources ``pitch`` =
    ``width`` apart, a vector running past a position's channels holds the next position's first
    ones, whose sources are the next positions (``planes._fill_plane_blocked``). Only the filter
    rows' and the 9 taps' paths (``tap_paths``) stream so; without them, the row buffer. 0: not so."""
    if line_offset <= 0 or stride_w != 1 or pitch != width or not any(tap_paths):
        return 0
    return (simd.LINE_BYTES - line_offset) // dtype.itemsize


class FilterPlan(NamedTuple):
    """What ``backprop_filter`` passes its kernel besides the data, and the partial sums' shape."""

    path: tuple  # ``_backprop_filter_kernel_for``'s key: ("registers" / "narrow" / "memory", taps per pass)
    chunks: int  # row chunks, one partial sum each (``_filter_chunks``)
    acc: type  # the partial sums' type
    direct_x: bool  # x rows read in place
    direct_dy: bool  # dy rows read in place
    rows_stand_in: np.ndarray  # the empty read-only array passed where rows are staged
    geo: tuple  # ``plan._geometry`` (pitch 0)
    kind: int  # the element codec (``codecs``)
    group_rows: int  # rows read in place per group (``_filter_group_rows``)
    walks_from_lines: bool  # rows read in place may be walked from their lines (``plan.filter_line_shift``)


@functools.lru_cache(maxsize=512)
def filter_plan(x_shape: tuple, x_st: tuple, dy_shape: tuple, dy_st: tuple, dtype: np.dtype, filter_shape: tuple,
                attrs: tuple) -> FilterPlan:
    """The filter gradient's decisions (see ``__init__.backprop_filter``); none depends on the data."""
    batch, in_h, in_w, chans = x_shape
    fh, fw, _, mult = filter_shape
    _, out_h, out_w, width = dy_shape
    stride_h, stride_w, dil_h, dil_w, pad_top, pad_left = attrs
    acc = _accumulator(dtype)
    native = dtype not in HALF_KINDS
    # the kernel reads channels-last rows: planar ones (NCHW) are staged
    direct_x = native and stride_w == 1 and mult == 1 and _direct_rows(x_st, in_w, chans, False)
    direct_dy = native and _direct_rows(dy_st, out_w, width, False)
    chunks = _filter_chunks(batch * out_h, out_w)
    # wide enough rows keep their lanes in registers (lanes.py), rows read in place a group at a time
    registers = out_w >= _FILTER_REGISTER_POSITIONS
    itemsize = np.dtype(acc).itemsize
    # narrower rows read in place, with a vector of channels or more: narrow_lanes
    narrow = not registers and direct_x and direct_dy and width * itemsize >= _FILTER_VECTOR_BYTES
    chunk_rows = -(-batch * out_h // chunks)
    if narrow:
        group_rows = _filter_narrow_rows(fh, stride_h, dil_h, in_h, out_h, out_w, in_w, width * itemsize, chunk_rows)
        path = ("narrow", filter_pass_taps(fw))
    else:
        group_rows = _filter_group_rows(registers and direct_x and direct_dy, fh, stride_h, dil_h, out_w, in_w,
                                        chunk_rows)
        path = ("registers" if registers else "memory", 0)
    geo = _geometry(batch, in_h, in_w, chans, mult, out_h, out_w, fh, fw, stride_h, stride_w, dil_h, dil_w,
                    pad_top, pad_left)
    # rows read in place off the lines (NumPy's large arrays start 16 bytes past one) are walked
    # from the lines where both x and dy keep one point of a line: vectors across two lines take two
    # loads (docs/performance.md)
    walks_from_lines = (registers and direct_x and direct_dy and _whole_lines(x_st, width, itemsize)
                        and _whole_lines(dy_st, width, itemsize))
    return FilterPlan(path, chunks, acc, direct_x, direct_dy, _no_rows(acc), geo, HALF_KINDS.get(dtype, FLOAT),
                      group_rows, walks_from_lines)
