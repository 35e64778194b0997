"""The forward and backprop-input kernels: parallel job drivers over (image, block of rows).

Forward and backprop input run one job per (image, block of output rows) (``plan._rows_per_job``):
the source rows a job needs are staged (``staging.py``) or read in place, the taps reaching each
output row are listed and summed plane by plane (``planes.py``), and the rows are accumulated in
place or in a row buffer, then stored (and rounded) once (``writers.py``). Every output row is
summed whole inside one job, so results do not depend on the job sizes or the thread count.

Each kernel compiles the branches its call can take and no others: the factories
(``_forward_kernel_for``, ``_backprop_input_kernel_for``) take the host's choices (``plan.py``,
the entry points) as closure constants, and numba prunes a branch on a constant False before
typing it, so its callees are never compiled (issue 23, cold start). Each set is its own entry
in the disk cache.

``_planar_blocks_kernel_for(stream)``: planar rows with stride 1 and finite weights, where each
tap is one run over a whole block of rows; its output rows streamed or stored plainly.
"""

from __future__ import annotations


import numpy as np
from numba import njit

from .. import simd
from ..codecs import stream_run
from ..first_calls import kernel_factory
from ..pool import begin, claim, end, finish
from .codecs import _load_run, _store_run
from .plan import _PREFETCH_STAGED_BYTES
from .planes import _fill_plane_blocked, _fill_plane_scaled
from .staging import _clear_margins, _column_taps, _stage_channels_last, _stage_planar
from .taps import _scaled1, _scaled4
from .writers import _store_dx_row, _store_planar_dx_row, _stream_row


@njit(inline="always")
def _tap_lists(taps, wv):
    """A thread's lists of the taps that reach an output row (source offset, table row, first and
    last column, weight of ``wv``'s type) and the segment scratch of ``planes``, for ``taps``
    filter taps: made once per kernel call."""
    return (np.empty(taps, np.int64), np.empty(taps, np.int64), np.empty(taps, np.int64), np.empty(taps, np.int64),
            np.empty(taps, wv.dtype), np.empty((4, 2 * taps + 2), np.int64))


@njit(inline="always")
def _rotated(wv, pitch, width, phase):
    """The weight table (taps ``pitch`` apart) with each tap's ``width`` channels rotated by
    ``phase``: entry c is channel (c + phase) mod width, the weight of vector lanes that start
    ``phase`` channels into a position (``planes._fill_plane_blocked``)."""
    line = simd.LINE_BYTES // wv.itemsize
    raw = np.empty(wv.size + line, wv.dtype)
    start = simd.line_head(raw, 0, line)  # on a line, as the table itself
    rotated = raw[start:start + wv.size]
    for t in range(wv.size // pitch):
        for c in range(width):
            rotated[t * pitch + c] = wv[t * pitch + (c + phase) % width]
    return rotated


@kernel_factory
def _forward_kernel_for(path: tuple[bool, bool, bool, bool, int, bool, int]):
    """``_forward_kernel`` for one ``path`` = its arguments (planar, stream_in_place), whether y
    rows are streamed from the row buffer (``stream_rows``) or from the registers in vectors that
    start on the lines past the positions' starts (``phase`` > 0), its tap paths
    (``plan._tap_paths``: longest_row, nine) and the element ``kind`` (``codecs``: float, or
    which half type, so that a half kernel carries one type's conversions), as constants: numba
    prunes the branches a flag rules out before typing them, so a call compiles only its layout's
    row code, with ``stream`` = True in the tap paths of ``_fill_plane_blocked`` for a y
    streamed in place (beyond the cache), with False otherwise, never both, and only the filter
    rows its filter has (issue 23, cold start)."""
    planar_path, stream_in_place_path, stream_rows_path, phased_path, longest_row, nine, kind = path
    nine = int(nine)  # numba types a bool closure constant as bool, an int one as a literal
    plain_stores_path = not (planar_path or stream_in_place_path or phased_path)

    @njit(cache=True, nogil=True)
    def _forward_kernel(counters, epoch, role, pool_chunks, x, x_off, x_st, x_direct, direct_in, wv, y, y_off, y_st,
                        y_direct, direct_out, geo, planar, rows_per_job, margin_l, margin_r, phase):
        """``stream_in_place_path`` (channels-last, ``direct_out``, every y position on a 64-byte line):
        y is written with non-temporal stores straight from the registers, which skips the read
        for ownership of its lines, so the stores drain while the next blocks compute;
        ``stream_rows_path`` (rows of one run, off the lines): each y row summed in the row
        buffer, then streamed (``_stream_row``). ``phased_path`` (stride 1, every y position
        ``phase`` elements before a line): streamed from the registers in vectors that start on
        the lines (``planes._fill_plane_blocked``), the staged x rows placed so that their vectors
        do too, with the weight table rotated by ``phase`` (``_rotated``).
        ``margin_l`` / ``margin_r`` (stride 1, staged channels-last rows, finite weights; see
        ``_forward_margins``): zero positions on each side of every staged x row, so that every tap
        of a row reaches every y column and the row is one segment, without edges. Staged rows
        start on 64-byte lines (numba allocates on 32 bytes), so that no vector load of theirs
        spans two lines."""
        n_batch, in_h, in_w, chans, mult, out_h, out_w, fh, fw, sh, sw, dh, dw, pt, pl, pitch = geo  # plan.Geometry
        width = chans * mult
        plane_len = (in_w + sw - 1) // sw
        line = simd.LINE_BYTES // wv.itemsize
        row_len = ((pitch if not planar else chans) * (margin_l + sw * plane_len + margin_r) + line - 1) // line * line
        # distinct x rows one output row reads, and never more than x has (a dilation may exceed it)
        ring_rows = min((fh - 1) * dh + 1, in_h)
        jobs_per_image = (out_h + rows_per_job - 1) // rows_per_job
        acc_k = y_st[3] if direct_out else out_w  # planar: distance between the k planes of a row
        columns = _column_taps(fw, dw, pl, sw, out_w, in_w)
        # Staged channels-last rows of one run from beyond the caches: while an output row is summed,
        # the x row the next one stages is requested (_PREFETCH_STAGED_BYTES), so that staging it
        # does not wait on memory.
        prefetch_staged = not direct_in and not planar and x_st[3] == 1 and x_st[2] == chans \
            and x.size * x.itemsize >= _PREFETCH_STAGED_BYTES
        # This thread's buffers, made once per call: a small image's jobs are a row or two each,
        # and allocating per job cost as much as the row's sums (docs/performance.md)
        ring = np.empty(0 if direct_in else ring_rows * row_len + line, wv.dtype)
        # the first row on a line; with phased stores, each row's first position ``phase`` elements on
        placed = margin_l * pitch + phase if phased_path else 0
        ring0 = 0 if direct_in else simd.line_head(ring, placed, line)
        wt_phased = _rotated(wv, pitch, width, phase) if phased_path else wv
        tags = np.empty(ring_rows, np.int64)
        _clear_margins(ring, ring0, ring_rows, row_len, margin_l, in_w, margin_r, pitch)  # staging never writes them
        src = x_direct if direct_in else ring
        acc = y_direct if direct_out else np.empty(out_w * width, wv.dtype)
        so, tap, lo, hi, weight, scratch = _tap_lists(fh * fw, wv)
        seen = begin(counters, epoch, role)
        items = n_batch * jobs_per_image
        while True:
            pool_chunk = claim(counters)
            if pool_chunk >= pool_chunks:
                end(epoch, role, seen)
                return
            for job in range(pool_chunk * items // pool_chunks, (pool_chunk + 1) * items // pool_chunks):
                b = job // jobs_per_image
                oy0 = (job - b * jobs_per_image) * rows_per_job
                oy1 = min(out_h, oy0 + rows_per_job)
                tags[:] = -1  # no x row staged yet
                x_base = x_off + b * x_st[0]
                for oy in range(oy0, oy1):
                    nt = np.int64(0)  # not Literal[int](0): see _fast/__init__
                    # no x row requested yet; typed int64, since literals would compile second copies of
                    # _fill_plane_blocked and its row paths
                    ahead = ahead_n = np.int64(0)
                    for ky in range(fh):
                        iy = oy * sh - pt + ky * dh
                        if iy < 0 or iy >= in_h:
                            continue
                        if direct_in:
                            row = x_base + iy * x_st[1]
                        else:
                            slot = iy % ring_rows
                            row = ring0 + slot * row_len + margin_l * pitch
                            if tags[slot] != iy:
                                tags[slot] = iy
                                if planar_path:
                                    _stage_planar(x, x_base + iy * x_st[1], x_st[2], x_st[3], in_w, chans, sw,
                                                  plane_len, ring, row, kind)
                                else:
                                    _stage_channels_last(x, x_base + iy * x_st[1], x_st[2], x_st[3], in_w, chans, mult,
                                                         sw, plane_len, pitch, ring, row, kind)
                                    after = (oy + 1) * sh - pt + (fh - 1) * dh  # the next output row's last x row
                                    if prefetch_staged and oy + 1 < out_h and 0 <= after < in_h:
                                        ahead, ahead_n = x_base + after * x_st[1], in_w * chans
                        for kx in range(fw):
                            ox_lo, ox_hi, r, q_shift = columns[kx, 0], columns[kx, 1], columns[kx, 2], columns[kx, 3]
                            if ox_hi <= ox_lo:
                                continue
                            if margin_l + margin_r:  # stride 1: every column, margins included
                                lo[nt], hi[nt] = 0, out_w
                            else:
                                lo[nt], hi[nt] = ox_lo, ox_hi
                            tap[nt] = ky * fw + kx
                            if planar_path:  # x index of (c, ox): so + c*channel_stride + ox
                                # (rows read in place have unit position stride and r = 0: stride 1; with
                                # one position its stride is arbitrary, and only q = 0 is read)
                                so[nt] = row + r * plane_len + q_shift
                            else:  # x index of (ox, k): so + ox*pitch + k
                                so[nt] = row + (r * plane_len + q_shift) * pitch
                            nt += 1
                    y_row = y_off + b * y_st[0] + oy * y_st[1]
                    acc_row = y_row if direct_out else 0
                    if planar_path:
                        channel_stride = x_st[3] if direct_in else sw * plane_len
                        for k in range(width):
                            for t in range(nt):
                                weight[t] = wv[tap[t] * pitch + k]
                            _fill_plane_scaled(acc, acc_row + k * acc_k, out_w, src, so, (k // mult) * channel_stride,
                                               weight, lo, hi, nt, scratch)
                    elif stream_in_place_path:
                        _fill_plane_blocked(acc, acc_row, width, width, pitch, out_w, src, so, tap, lo, hi, nt, wv,
                                            scratch, direct_in, True, x, ahead, ahead_n, longest_row, nine, True, 0, wv,
                                            False)
                    elif phased_path:
                        _fill_plane_blocked(acc, acc_row, width, width, pitch, out_w, src, so, tap, lo, hi, nt, wv,
                                            scratch, direct_in, False, x, ahead, ahead_n, longest_row, nine, True,
                                            phase, wt_phased, True)
                    elif plain_stores_path:
                        _fill_plane_blocked(acc, acc_row, width, width, pitch, out_w, src, so, tap, lo, hi, nt, wv,
                                            scratch, direct_in, False, x, ahead, ahead_n, longest_row, nine, True, 0,
                                            wv, False)
                    if direct_out:
                        continue
                    if planar_path:
                        for k in range(width):
                            _store_run(acc, k * out_w, out_w, y, y_row + k * y_st[3], y_st[2], kind)
                    elif stream_rows_path:
                        _stream_row(acc, out_w * width, y, y_row)
                    elif y_st[3] == 1 and y_st[2] == width:
                        _store_run(acc, 0, out_w * width, y, y_row, 1, kind)
                    else:
                        for ox in range(out_w):
                            _store_run(acc, ox * width, width, y, y_row + ox * y_st[2], y_st[3], kind)
            if stream_in_place_path or stream_rows_path or phased_path:
                simd.store_fence()  # the rows are visible before the chunk is reported done
            finish(counters)

    return _forward_kernel



@kernel_factory
def _backprop_input_kernel_for(path: tuple[bool, bool, bool, bool, bool, int, bool, int]):
    """``_backprop_input_kernel`` for one ``path`` = its arguments (planar, stream_in_place,
    stream_rows, phase > 0, not direct_out), its tap paths (``plan._tap_paths``: longest_row,
    nine) and the element ``kind`` (as in ``_forward_kernel_for``), as constants: numba prunes the branches a
    False flag rules out before typing them, so a call compiles only the row code its plan runs
    (issue 23, cold start): the tap paths of ``_fill_plane_blocked`` with ``stream`` = True for a
    dx streamed in place (beyond the cache), with False otherwise, never both, and only the
    filter rows its filter has. A branch that is kept is taken on the same conditions
    (``stream_in_place`` implies ``direct_out``)."""
    planar_path, stream_in_place_path, stream_rows_path, phased_path, row_buffer_path, longest_row, nine, kind = path
    nine = int(nine)  # numba types a bool closure constant as bool, an int one as a literal
    plain_stores_path = not (stream_in_place_path or phased_path)

    @njit(cache=True, nogil=True)
    def _backprop_input_kernel(counters, epoch, role, pool_chunks, dy, dy_off, dy_st, dy_direct, direct_in, wv, dx,
                               dx_off, dx_st, dx_direct, direct_out, stream_rows, stream_in_place, geo, planar,
                               rows_per_job, margin_l, margin_r, phase):
        """dx written with non-temporal stores (``direct_out``, channels-last): ``stream_in_place``,
        straight from the registers to dx (every position on a 64-byte line), so the stores drain
        while the next blocks compute; ``stream_rows``, each dx row summed in a row buffer, then
        written as one run (rounded, or its M = 2 sums added: ``_streams_rows``). ``margin_l`` /
        ``margin_r`` (stride 1, staged rows, finite weights; see ``_zero_margins``): zero positions on
        each side of every staged dy row, so that every tap of a row reaches every dx column and the
        row is one segment, without edges. ``phase`` > 0 (stride 1, every dx position ``phase``
        elements before a line): streamed from the registers in vectors that start on the lines,
        as in the forward."""
        n_batch, in_h, in_w, chans, mult, out_h, out_w, fh, fw, sh, sw, dh, dw, pt, pl, pitch = geo  # plan.Geometry
        width = chans * mult
        line = simd.LINE_BYTES // wv.itemsize
        plane_len = (in_w + sw - 1) // sw  # dx columns per residue plane (at most)
        row_len = (margin_l + out_w + margin_r) * pitch
        ring_rows = min(((fh - 1) * dh) // sh + 1, out_h)  # distinct dy rows one dx row reads, at most all
        jobs_per_image = (in_h + rows_per_job - 1) // rows_per_job
        acc_k = dx_st[3] if direct_out else sw * plane_len  # planar: distance between the k planes of a row
        columns = _column_taps(fw, dw, pl, sw, out_w, in_w)
        # Staged channels-last rows of one run from beyond the caches: while a dx row is summed, the dy
        # row the next one stages is requested (_PREFETCH_STAGED_BYTES), so that staging it does not
        # wait on memory.
        prefetch_staged = not direct_in and not planar and dy_st[3] == 1 and dy_st[2] == width \
            and dy.size * dy.itemsize >= _PREFETCH_STAGED_BYTES
        # This thread's buffers, made once per call (as in the forward)
        # with phased stores, staged rows placed so that each row's first position, ``phase`` elements
        # on, is on a line (``row_len`` is whole lines then)
        ring = np.empty(0 if direct_in else ring_rows * row_len + (line if phased_path else 0), wv.dtype)
        ring0 = simd.line_head(ring, margin_l * pitch + phase, line) if phased_path and not direct_in else 0
        wt_phased = _rotated(wv, pitch, width, phase) if phased_path else wv
        tags = np.empty(ring_rows, np.int64)
        _clear_margins(ring, ring0, ring_rows, row_len, margin_l, out_w, margin_r, pitch)  # staging never writes them
        src = dy_direct if direct_in else ring
        if stream_rows:
            acc = np.empty(in_w * width, wv.dtype)  # one dx row of C*M sums
        else:
            # [r][q][k] or [k][r][q]
            acc = dx_direct if direct_out else np.empty(sw * plane_len * width, wv.dtype)
        combined = np.empty(sw * plane_len * chans if mult > 1 else 0, wv.dtype)  # >= one dx row
        so, tap, lo, hi, weight, scratch = _tap_lists(fh * fw, wv)
        seen = begin(counters, epoch, role)
        items = n_batch * jobs_per_image
        while True:
            pool_chunk = claim(counters)
            if pool_chunk >= pool_chunks:
                end(epoch, role, seen)
                return
            for job in range(pool_chunk * items // pool_chunks, (pool_chunk + 1) * items // pool_chunks):
                b = job // jobs_per_image
                iy0 = (job - b * jobs_per_image) * rows_per_job
                iy1 = min(in_h, iy0 + rows_per_job)
                tags[:] = -1  # no dy row staged yet
                dy_base = dy_off + b * dy_st[0]
                for iy in range(iy0, iy1):
                    dx_row = dx_off + b * dx_st[0] + iy * dx_st[1]
                    acc_row = dx_row if direct_out and not stream_rows else 0
                    ahead = ahead_n = np.int64(0)  # no dy row requested yet
                    for r in range(min(sw, in_w)):
                        n_pos = (in_w - r + sw - 1) // sw
                        nt = np.int64(0)
                        for ky in range(fh):
                            t = iy + pt - ky * dh
                            if t < 0:
                                break
                            oy = t // sh
                            if oy * sh != t or oy >= out_h:
                                continue
                            if direct_in:
                                row = dy_base + oy * dy_st[1]
                            else:
                                slot = oy % ring_rows
                                row = ring0 + slot * row_len + margin_l * pitch
                                if tags[slot] != oy:
                                    tags[slot] = oy
                                    if planar_path:
                                        _stage_planar(dy, dy_base + oy * dy_st[1], dy_st[2], dy_st[3], out_w, width, 1,
                                                      out_w, ring, row, kind)
                                    else:
                                        _stage_channels_last(dy, dy_base + oy * dy_st[1], dy_st[2], dy_st[3], out_w,
                                                             width, 1, 1, out_w, pitch, ring, row, kind)
                                        if prefetch_staged and oy + 1 < out_h:
                                            ahead, ahead_n = dy_base + (oy + 1) * dy_st[1], out_w * width
                            for kx in range(fw):
                                ox_lo, ox_hi, kx_plane = columns[kx, 0], columns[kx, 1], columns[kx, 2]
                                q_shift = columns[kx, 3]
                                if kx_plane != r or ox_hi <= ox_lo:
                                    continue
                                # dx column q = ox + q_shift of plane r reads dy column ox
                                if margin_l + margin_r:  # stride 1: column ox = q - q_shift, margins too
                                    lo[nt], hi[nt] = max(0, q_shift - margin_l), min(n_pos, q_shift + out_w + margin_r)
                                else:
                                    lo[nt], hi[nt] = ox_lo + q_shift, ox_hi + q_shift
                                tap[nt] = ky * fw + kx
                                so[nt] = row - q_shift * (1 if planar else pitch)
                                nt += 1
                        if planar_path:
                            channel_stride = dy_st[3] if direct_in else out_w
                            for k in range(width):
                                for t in range(nt):
                                    weight[t] = wv[tap[t] * pitch + k]
                                _fill_plane_scaled(acc, acc_row + k * acc_k + r * plane_len, n_pos, src, so,
                                                   k * channel_stride, weight, lo, hi, nt, scratch)
                        elif stream_in_place_path and direct_out and stream_in_place:
                            # positions r, r + sw, ... of the dx row itself
                            _fill_plane_blocked(acc, acc_row + r * width, sw * width, width, pitch, n_pos, src, so, tap,
                                                lo, hi, nt, wv, scratch, direct_in, True, dy, ahead, ahead_n,
                                                longest_row, nine, False, 0, wv, False)
                        elif phased_path and direct_out:
                            _fill_plane_blocked(acc, acc_row, width, width, pitch, n_pos, src, so, tap, lo, hi, nt, wv,
                                                scratch, direct_in, False, dy, ahead, ahead_n, longest_row, nine, False,
                                                phase, wt_phased, True)
                        elif plain_stores_path and direct_out:
                            _fill_plane_blocked(acc, acc_row + r * width, sw * width, width, pitch, n_pos, src, so, tap,
                                                lo, hi, nt, wv, scratch, direct_in, False, dy, ahead, ahead_n,
                                                longest_row, nine, False, 0, wv, False)
                        elif row_buffer_path:  # residue plane r of the row buffer, [r][q][k]
                            _fill_plane_blocked(acc, acc_row + r * plane_len * width, width, width, pitch, n_pos,
                                                src, so, tap, lo, hi, nt, wv, scratch, direct_in, False, dy, ahead,
                                                ahead_n, longest_row, nine, False, 0, wv, False)
                        ahead_n = np.int64(0)  # requested once, by the sums of the plane that staged the row
                    if stream_rows_path and stream_rows and mult == 1:
                        _stream_row(acc, in_w * chans, dx, dx_row)
                    elif row_buffer_path and planar_path and not direct_out:
                        _store_planar_dx_row(acc, combined, dx, dx_row, dx_st, in_w, chans, mult, sw, plane_len, kind)
                    elif row_buffer_path and not direct_out:
                        _store_dx_row(acc, combined, dx, dx_row, dx_st, in_w, chans, mult, sw, plane_len, kind,
                                      stream_rows)
            if stream_rows or stream_in_place or phased_path:
                simd.store_fence()  # the rows are visible before the chunk is reported done
            finish(counters)

    return _backprop_input_kernel


@kernel_factory
def _planar_blocks_kernel_for(stream: bool):
    """``_planar_blocks_kernel`` with its output rows streamed (``stream``: a float output beyond
    the cache whose rows all start on 64-byte lines, ``__init__._rows_on_lines``) or stored
    plainly, as a constant: the plain stores' loop is compiled as if the other did not exist (a
    run-time flag slowed it down; docs/performance.md, "Depthwise")."""

    @njit(cache=True, nogil=True)
    def _planar_blocks_kernel(counters, epoch, role, pool_chunks, src, src_off, src_st, wv, out, out_off, out_st,
                              geo, shift_y, shift_x, adjoint, kind):
        """Stride-1 planes (forward, and backprop input when ``adjoint``): out[y, x] of plane p is the sum
        over taps t, in order, of w * src[y + shift_y[t], x + shift_x[t]] of a source plane. A job stages
        a block of source rows with zero margins at a common pitch, so each tap is one run over the
        whole block: with finite weights a tap reaching the zero margin adds w * 0 = +-0, which leaves
        a sum that started at +0 unchanged, i.e. exactly as if the tap were skipped. Backprop input sums
        each of the M source planes of dx plane c separately, then adds the partial sums in m order."""
        n_batch, out_h, out_w, src_h, src_w, planes, mult, block_rows = geo  # plan.PlanarBlocks
        width = wv.size // shift_y.size  # C*M: columns of the [tap][k] weight table
        taps = shift_y.size
        y_lo, y_hi, x_lo, x_hi = shift_y.min(), shift_y.max(), shift_x.min(), shift_x.max()
        pitch = out_w + x_hi - x_lo
        stage_rows = block_rows + y_hi - y_lo
        parts = mult if adjoint else 1
        blocks = (out_h + block_rows - 1) // block_rows
        seen = begin(counters, epoch, role)
        items = n_batch * planes * blocks
        while True:
            pool_chunk = claim(counters)
            if pool_chunk >= pool_chunks:
                end(epoch, role, seen)
                return
            for job in range(pool_chunk * items // pool_chunks, (pool_chunk + 1) * items // pool_chunks):
                b = job // (planes * blocks)
                plane = (job // blocks) % planes
                y0 = (job % blocks) * block_rows
                rows = min(block_rows, out_h - y0)
                n = rows * pitch
                stage = np.empty(stage_rows * pitch + pitch, wv.dtype)  # + one pitch of slack read by last taps
                acc = np.empty(parts * block_rows * pitch, wv.dtype)
                offsets = np.empty(taps, np.int64)
                weight = np.empty(taps, wv.dtype)
                for t in range(taps):
                    offsets[t] = (shift_y[t] - y_lo) * pitch + shift_x[t] - x_lo
                for part in range(parts):
                    k = plane * mult + part if adjoint else plane  # weight column
                    source = k if adjoint else plane // mult
                    base = src_off + b * src_st[0] + source * src_st[3]
                    stage[:] = 0
                    for r in range(rows + y_hi - y_lo):
                        sy = y0 + y_lo + r
                        if 0 <= sy < src_h:
                            col0 = max(0, x_lo)  # source columns [x_lo, x_lo + pitch) land at stage columns 0..
                            col1 = min(src_w, x_lo + pitch)
                            if col1 > col0:
                                _load_run(src, base + sy * src_st[1] + col0 * src_st[2], src_st[2], col1 - col0, stage,
                                          r * pitch + col0 - x_lo, kind)
                    for t in range(taps):
                        weight[t] = wv[t * width + k]
                    a0 = part * block_rows * pitch
                    t = 0
                    while taps - t >= 4:
                        _scaled4(acc, a0, n, stage, offsets[t], offsets[t + 1], offsets[t + 2], offsets[t + 3],
                                 weight[t], weight[t + 1], weight[t + 2], weight[t + 3], t == 0)
                        t += 4
                    while t < taps:
                        _scaled1(acc, a0, n, stage, offsets[t], weight[t], t == 0)
                        t += 1
                for part in range(1, parts):
                    total = acc[:n]
                    term = acc[part * block_rows * pitch:part * block_rows * pitch + n]
                    for j in range(n):
                        total[j] += term[j]
                for r in range(rows):
                    start = out_off + b * out_st[0] + (y0 + r) * out_st[1] + plane * out_st[3]
                    if stream:  # a float output (the caller's rule): pruned for half types
                        stream_run(acc, r * pitch, out_w, out, start)
                    else:
                        _store_run(acc, r * pitch, out_w, out, start, out_st[2], kind)
            if stream:
                simd.store_fence()  # the rows are visible before the chunk is reported done
            finish(counters)

    return _planar_blocks_kernel
