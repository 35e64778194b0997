"""Host-side decisions of the depthwise kernels, in plain Python before any kernel runs: from
shapes, strides and dtype alone, how rows are laid out, read and written, and how the work is cut
into jobs (SPEC 5.4 fixes what is summed; these choices only pick the code that sums it, never
the order of the sums).

* Layout: ``planar`` rows (``[k][position]``, when W is the unit-stride axis, e.g. NCHW) or
  ``channels-last`` rows (``[position][k]``), positions ``pitch`` apart (``_pitch``).
* Rows read in place ("direct", when they already are float rows of the canonical layout,
  ``_direct_rows``) or staged, with zero margins for wide stride-1 rows (``_zero_margins``,
  ``_forward_margins``).
* A dx beyond the cache written with non-temporal stores: straight from the registers when its
  positions start on 64-byte lines (``_positions_line_offset``) or, with stride 1, all at the
  same point of one (vectors that start on the lines, ``planes._fill_plane_blocked``), else from
  a row buffer (``_streams_rows``); with plain stores where the host's stores of a block conflict
  (``_streams_step``).
* The weight table (``_weights``), the jobs (``_rows_per_job``, ``_planar_block_rows``), and
  the filter taps that read only padding, which are left out (``_live_taps``).

The tuning constants are here, each with its reason; how each was measured is in
docs/performance.md ("Depthwise").
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
from numba import njit

from .. import half, simd
from ..pool import thread_count
from ..strided import aligned_input, flat_buffer, flat_view
from ..target import codegen_target, data_cache_bytes, host_avx512, host_vendor, last_level_cache_bytes
from ..codecs import HALF_KINDS
from .selection import FILTER_PASS_TAPS, FILTER_VECTOR_BYTES, NINE_BLOCKS, NINE_ROWS, row_sizes, tier

# Forward / backprop input: jobs handed out per thread, enough to balance the load and no more,
# since each job reads the source rows around its block again (``_rows_per_job``).
_JOBS_PER_THREAD = 16
# Backprop filter: independent partial sums per filter element (lane ``ox % 2``), so that the
# additions of one element do not wait on each other (``lanes``).
_LANES = 2
# Backprop filter: the width of the lanes' registers (``selection.FILTER_VECTOR_BYTES``). A
# constant of the target, as ``_ROW_SIZES`` is, so that a kernel compiles one variant only.
_FILTER_VECTOR_BYTES = FILTER_VECTOR_BYTES[tier(codegen_target())]
# Backprop filter: rows of at least this many positions keep their lanes in registers
# (``lanes._lane_rows``), narrower ones in memory (``lanes._lane_rows_in_memory``).
_FILTER_REGISTER_POSITIONS = 16
# Backprop filter: row chunks reduced separately, then combined in order; a number fixed by the
# problem alone, never by the thread count, so that the bits are too (``_filter_chunks``): up to
# _CHUNKS, enough to balance the load; about _CHUNK_POSITIONS dy positions (rows x OW) each, since
# a chunk pays for its lanes (zeroed, through registers, added) however few its rows; but at
# least _MIN_CHUNKS, to share small problems between threads.
_CHUNKS = 64
_CHUNK_POSITIONS = 256
_MIN_CHUNKS = 8
_PREFETCH_POSITIONS = 16  # rows read in place: how far ahead of a block of taps to prefetch
# ``_taps9_rows`` over rows read in place: how far ahead of the positions being computed to
# prefetch the newest row (the others were read for the previous output row).
_PREFETCH_AHEAD_BYTES = 8192
# Forward and backprop input request the next staged x / dy row from a source at least half the
# last-level cache (16 MiB of a 32 MiB L3; smaller ones are mostly in the caches; fixed in the
# kernels when they compile) while the current output row is summed, in equal shares
# over the blocks of ``_taps_rows`` and over the parts of ``_NINE_POSITIONS`` positions of
# ``_taps9_rows`` (the CPU does not keep one burst of line prefetches in flight), else at once.
_PREFETCH_STAGED_BYTES = last_level_cache_bytes() // 2
_NINE_POSITIONS = 8  # positions of ``_taps9_rows`` per share of that request
# Outputs beyond the cache are streamed (non-temporal stores) as the blocks of positions are
# summed, a block's positions ``step`` bytes apart, or from the row buffer. On an AMD Zen 3 (no
# AVX-512), with steps that are multiples of 2048 bytes (512 float32 channels; 256 at stride 2),
# streaming was the slowest way to write and plain stores in place the fastest; the Intel Xeon and
# the AMD Zen 4 (AVX-512) stream such outputs faster than they store them plainly
# (docs/performance.md, "Depthwise"). Per host (``target.host_vendor``, ``target.host_avx512``):
# the step whose multiples are not streamed.
_STREAM_STEP_CONFLICTS = {("AuthenticAMD", False): 2048}
# Filter row sizes with microkernels of their own on this target (``selection.row_sizes``).
_ROW_SIZES = row_sizes(codegen_target())
# Forward and backprop input read stride-1 x / dy rows in place only up to this many bytes per
# position (one pair of float32 vectors, whose 9-tap segments run in ``_taps9_2x2``); wider rows
# are staged with zero margins, which makes each row one segment. Backprop's strided dy rows stay
# in place (staging did not pay).
_IN_PLACE_ROW_BYTES = 128
# Backprop filter: channels-last rows read in place are summed a group at a time, each pass of
# taps keeping its lanes in registers over the group (``lanes._lane_rows``), as long as the
# group's lines of one vector of channels (its dy rows, and the x rows they read) fill at most
# this share of the L1 data cache, where the passes revisit them.
_FILTER_GROUP_L1_SHARE = 0.5
# Backprop filter, narrow rows (``narrow_lanes``): the share of L2 a group of rows takes, and the
# most taps per pass (``selection.FILTER_PASS_TAPS``).
_FILTER_NARROW_L2_SHARE = 0.5
_FILTER_PASS_TAPS = FILTER_PASS_TAPS[tier(codegen_target())]
# ``_planar_blocks_kernel``: about this many elements per block of rows, so that a job's staged
# rows and accumulators stay in cache.
_PLANAR_BLOCK_ELEMENTS = 8192
# A column stride this much beyond the input's width runs on the reference kernels (float64 sums):
# the strided layouts stage one residue plane per stride step, whatever the width.
_MAX_EMPTY_PLANES = 64


def _accumulator(dtype: np.dtype) -> type:
    return np.float64 if dtype == np.float64 else np.float32


def _kernel_view(array: np.ndarray, readonly: bool) -> tuple[np.ndarray, int, np.ndarray]:
    """(flat buffer, offset, element strides) of any view; half types as their uint16 bits.
    Inputs always go in read-only, so a caller's writeable flag does not double the kernel
    specialisations numba compiles."""
    buffer, offset, strides = flat_view(_kernel_array(array))
    if readonly:
        buffer.flags.writeable = False
    return buffer, offset, strides


def _kernel_buffer(array: np.ndarray, readonly: bool) -> np.ndarray:
    """The flat buffer of :func:`_kernel_view` alone, for a layout whose offset and strides are known."""
    buffer = flat_buffer(_kernel_array(array))
    if readonly:
        buffer.flags.writeable = False
    return buffer


def _kernel_array(array: np.ndarray) -> np.ndarray:
    """An element-aligned ``array`` (else a contiguous copy), half types as their uint16 bits."""
    array = aligned_input(array)
    return array.view(np.uint16) if array.dtype in HALF_KINDS else array


def _no_rows(dtype: type) -> np.ndarray:
    """The stand-in for a "direct" input buffer when the rows are staged instead."""
    rows = np.empty(0, dtype)
    rows.flags.writeable = False
    return rows


def _is_planar(pos_stride: int, ch_stride: int, n_pos: int, n_ch: int) -> bool:
    """Planar rows when positions, not channels, are the unit-stride axis (NCHW data)."""
    return (n_pos == 1 or pos_stride == 1) and not (n_ch == 1 or ch_stride == 1)


def _direct_rows(strides: np.ndarray, n_pos: int, width: int, planar: bool) -> bool:
    """Whether rows already are float rows of the canonical layout: channels-last
    ``[position][k]`` with k contiguous, or planar with unit position stride."""
    if planar:
        return n_pos == 1 or strides[2] == 1
    return (width == 1 or strides[3] == 1) and (n_pos == 1 or strides[2] == width)


def _positions_line_offset(buffer: np.ndarray, offset: int, strides: np.ndarray, chans: int) -> int:
    """How many bytes past a 64-byte line every channels-last position of a flat view starts (0:
    on the lines), when they all start at the same point of a line and span whole lines (unit
    channel stride); else -1."""
    return _line_offset(buffer, offset) if _whole_lines(strides, chans, buffer.itemsize) else -1


def _whole_lines(strides, chans: int, itemsize: int) -> bool:
    """Whether channels-last positions of ``chans`` channels at these element strides (unit channel
    stride) span whole 64-byte lines, and so do rows and images: every position then starts at the
    same point of a line as the view's first element."""
    line = simd.LINE_BYTES // itemsize
    return bool(strides[3] == 1 and chans % line == 0 and all(s % line == 0 for s in strides[:3]))


def _line_offset(buffer: np.ndarray, offset: int) -> int:
    """How many bytes past a 64-byte line element ``offset`` of ``buffer`` starts."""
    return (buffer.ctypes.data + offset * buffer.itemsize) % simd.LINE_BYTES


def filter_line_shift(x_buf: np.ndarray, x_off: int, dy_buf: np.ndarray, dy_off: int) -> int:
    """How many elements past a multiple of the kernel's vector width (``_FILTER_VECTOR_BYTES``)
    the filter gradient's x and dy rows start when both start at the same point of a 64-byte
    line, else 0 (``lanes._lane_rows``' ``shift``). Asked only of a plan whose positions, rows and
    images span whole lines (``_whole_lines``; ``call_plans.filter_plan``'s
    ``walks_from_lines``), so one offset holds for all of them."""
    x_at, dy_at = _line_offset(x_buf, x_off), _line_offset(dy_buf, dy_off)
    # a vector that starts on a multiple of its width never spans two lines
    return x_at % _FILTER_VECTOR_BYTES // x_buf.itemsize if x_at == dy_at and x_at % x_buf.itemsize == 0 else 0


def _weights(filt: np.ndarray, acc: type, pitch: int) -> tuple[np.ndarray, bool]:
    """The filter as ``[tap][k]`` floats of type ``acc``, flat: tap ``t``'s weights start at
    ``t * pitch``, zeros after its C*M; and whether every weight is finite (the call plan's
    ``finite``). Half filters are decoded by NumPy first (exactly)."""
    return _weight_table(filt if filt.dtype == acc else filt.astype(acc), pitch)


@njit(cache=True, nogil=True)
def _weight_table(filt, pitch):
    """``_weights`` in one pass, which costs a third of NumPy's copy and finite test. The table
    starts on a 64-byte line, so that with a pitch of whole lines no vector load of the row
    kernels spans two lines."""
    fh, fw, chans, mult = filt.shape
    line = simd.LINE_BYTES // filt.itemsize
    raw = np.empty(fh * fw * pitch + line, filt.dtype)
    start = (-raw.ctypes.data) % simd.LINE_BYTES // filt.itemsize
    finite = True
    for ky in range(fh):
        for kx in range(fw):
            row = start + (ky * fw + kx) * pitch
            for c in range(chans):
                for m in range(mult):
                    weight = filt[ky, kx, c, m]
                    raw[row + c * mult + m] = weight
                    finite &= np.isfinite(weight)
            raw[row + chans * mult:row + pitch] = 0
    return raw[start:start + fh * fw * pitch], finite


def _pitch(width: int, acc: type, planar: bool) -> int:
    """Distance between consecutive positions of channels-last staged rows and between the taps of
    the weight table: C*M, plus one cache line when C*M elements span a multiple of 512 bytes.
    Without it, one vector of channels at 8-12 consecutive positions of 3-5 rows (what a block of
    taps reads) falls into 2-4 of the 64 sets of a 32 KiB L1 and evicts itself."""
    size = np.dtype(acc).itemsize
    if planar or (width * size) % 512:
        return width
    return width + 64 // size


def _taps_per_plane(taps: int, stride: int, dilation: int) -> int:
    """The most taps of one filter axis of ``taps`` that one residue plane holds: every
    (stride / gcd(stride, dilation))-th. Vertically, in the adjoint, the filter rows that reach
    one dx row."""
    return -(-taps // (stride // math.gcd(stride, dilation)))


def _tap_paths(filter_rows: int, fw: int, stride_w: int, dil_w: int, width: int, acc: type,
               planar: bool) -> tuple[int, bool]:
    """Which channels-last tap paths a forward or backprop-input call may take (``planes.
    _fill_plane_blocked``), so that its kernel compiles those and no others: ``longest_row``, the
    largest of ``_ROW_SIZES`` that a residue plane's filter rows can have (0: none), and ``nine``,
    whether a segment can have 9 taps that keep their weights in registers. ``filter_rows``: the
    most filter rows that reach one output row. A residue plane holds ``_taps_per_plane`` taps of
    a filter row, which read consecutive positions when the dilation divides the stride; segments
    at the edges hold fewer taps. Rows narrower
    than a vector take none of these paths. A segment that these rule out gets the same bits from
    ``taps._taps_blocked``."""
    itemsize = np.dtype(acc).itemsize
    lanes = simd.VECTOR_BYTES // itemsize
    if planar or width < lanes:  # the row paths compute whole vectors of channels
        return 0, False
    row_taps = _taps_per_plane(fw, stride_w, dil_w)
    longest_row = max((size for size in _ROW_SIZES if size <= row_taps), default=0) if stride_w % dil_w == 0 else 0
    # float64 rows take their 9 taps in the 3-tap rows: a first float64 call compiled both 9-tap
    # paths for 10.2-10.3 CPU s, over issue 23's 10 s (8.3-8.9 without); no suite has float64.
    # 9 taps in 3-tap rows take the tier's NINE_ROWS; dilated ones NINE_BLOCKS
    nine_taps = NINE_ROWS[tier(codegen_target())] if longest_row >= 3 else NINE_BLOCKS
    nine = itemsize <= 4 and filter_rows * row_taps >= 9 and nine_taps.fits(width * itemsize)
    return longest_row, nine


def _rows_per_job(batch: int, rows: int) -> int:
    """Output rows per job: about ``_JOBS_PER_THREAD`` jobs per thread balance the load, and no
    more, since each job reads the source rows around its block again (a 3x3 filter: 2 rows).
    Results do not depend on it: every output row is summed whole inside one job."""
    return min(rows, max(1, math.ceil(batch * rows / (_JOBS_PER_THREAD * thread_count()))))


def _streams_rows(nbytes: int, dtype: np.dtype, dx_st: tuple, chans: int, mult: int, stride_w: int, planar: bool,
                  streaming_bytes: int) -> bool:
    """Whether backprop input writes dx rows from its row buffer with non-temporal stores as it
    finishes them (``stream_rows``): a dx beyond the cache whose rows are one run each
    (channels-last, stride 1), either float16 with M = 1 where the CPU converts half in hardware,
    rounded on the way out (``_stream_row``), or float with M = 2, the two sums of each element
    added in vectors on the way out (``_pair_sums_run``). Any row start: the partial lines at its
    ends take plain stores."""
    one_run = stride_w == 1 and not planar and dx_st[3] == 1 and dx_st[2] == chans and nbytes >= streaming_bytes
    half_rows = dtype == np.float16 and half.HARDWARE_HALF and mult == 1
    pair_rows = dtype not in HALF_KINDS and mult == 2
    return one_run and (half_rows or pair_rows)


def _filter_chunks(rows: int, out_w: int) -> int:
    """Row chunks of the backprop filter for ``rows`` = N*OH dy rows of ``out_w`` positions."""
    return min(_CHUNKS, rows, max(_MIN_CHUNKS, -(-rows * out_w // _CHUNK_POSITIONS)))


def _filter_l1_lines() -> int:
    """The lines of one vector of channels a backprop-filter group of rows may take
    (``_FILTER_GROUP_L1_SHARE`` of L1), where the passes of taps revisit them."""
    return int(data_cache_bytes(1) * _FILTER_GROUP_L1_SHARE) // simd.LINE_BYTES


def _filter_group_rows(direct: bool, fh: int, sh: int, dh: int, out_w: int, in_w: int, chunk_rows: int) -> int:
    """Rows per group of the backprop-filter kernel (``_FILTER_GROUP_L1_SHARE``): 1 unless its
    channels-last rows are read in place (``direct``); at most a chunk's rows."""
    if not direct:
        return 1
    budget = _filter_l1_lines()
    rows = 1
    while rows < chunk_rows and (rows + 1) * out_w + (rows * sh + (fh - 1) * dh + 1) * in_w <= budget:
        rows += 1
    return rows


def _filter_narrow_rows(fh: int, sh: int, dh: int, in_h: int, out_h: int, out_w: int, in_w: int, position_bytes: int,
                        chunk_rows: int) -> int:
    """Rows per group of the backprop filter's narrow rows (``narrow_lanes``): as many as a chunk
    has while one vector of channels of the group's dy and x rows fits the L1 budget of
    ``_filter_group_rows`` and the whole rows (``position_bytes`` a position) fit
    ``_FILTER_NARROW_L2_SHARE`` of L2, where the group is brought before its vectors are read.
    The x rows of a group that starts an image: ``in_h`` per whole image, at most that many for
    the rest (small images: whole images a group, each x row staged once)."""
    l1_lines = _filter_l1_lines()
    l2_positions = int(data_cache_bytes(2) * _FILTER_NARROW_L2_SHARE) // position_bytes

    def positions(rows: int) -> int:
        images, rest = divmod(rows, out_h)
        x_rows = images * in_h + (min(in_h, (rest - 1) * sh + (fh - 1) * dh + 1) if rest else 0)
        return rows * out_w + x_rows * in_w

    rows = 1
    while rows < chunk_rows and positions(rows + 1) <= min(l1_lines, l2_positions):
        rows += 1
    return rows


def filter_pass_taps(fw: int) -> int:
    """Taps of a filter row per pass of ``narrow_lanes._row_pass``: all ``fw`` where their lanes
    (2 each), the pair of dy vectors and the x vectors fit the registers, else the fewest passes
    of equal size (``_FILTER_PASS_TAPS``)."""
    passes = -(-fw // _FILTER_PASS_TAPS)
    return -(-fw // passes)


def _streams_step(step_bytes: int) -> bool:
    """Whether an output whose blocks store positions ``step_bytes`` apart is streamed when it is
    beyond the cache (``_STREAM_STEP_CONFLICTS``); if not, its blocks store in place, plainly."""
    conflict = _STREAM_STEP_CONFLICTS.get((host_vendor(), host_avx512()))
    return conflict is None or step_bytes % conflict != 0


def _zero_margins(fw: int, dil_w: int, pad_left: int, out_w: int, in_w: int) -> tuple[int, int]:
    """Zero dy positions to stage left and right of each row for the stride-1 adjoint, where dx
    column ix reads dy column ix + pad_left - kx*dil_w: with them every tap reaches every dx
    column. A tap reaching a margin adds x*0 = +-0 to a sum that started at +0, which leaves it
    unchanged bit for bit (a sum from +0 is never -0; x + +-0 = x otherwise), given finite
    weights. Each margin is the filter's reach (fw - 1)*dil_w less that side's padding, at least 0
    (out_w = in_w + pad_left + pad_right - reach)."""
    reach = (fw - 1) * dil_w
    return max(0, reach - pad_left), max(0, in_w + pad_left - out_w)


def _forward_margins(fw: int, dil_w: int, pad_left: int, out_w: int, in_w: int) -> tuple[int, int]:
    """Zero x positions to stage left and right of each row for the stride-1 forward, where y
    column ox reads x column ox - pad_left + kx*dil_w: with them every tap reaches every y column
    (exact for finite weights, as in ``_zero_margins``). The padding on each side, or (0, 0) when
    either exceeds the filter's reach (fw - 1)*dil_w: a row buffer that grows with the padding,
    not the filter, would hold mostly zeros."""
    reach = (fw - 1) * dil_w
    margins = pad_left, max(0, out_w - 1 - pad_left + reach - (in_w - 1))
    return margins if max(margins) <= reach else (0, 0)


class Geometry(NamedTuple):
    """One call's sizes and attributes as the row kernels read them (the ``geo`` argument): the
    NHWC-indexed sizes of the input space (x / dx) and of the output space (y / dy), the filter's,
    its strides, dilations and leading paddings (SPEC 5.4), and ``pitch`` (``_pitch``; 0 where a
    kernel stages no channels-last rows). A record of int64 for numba, unpacked in one line."""

    batch: int
    in_h: int
    in_w: int
    chans: int
    mult: int
    out_h: int
    out_w: int
    fh: int
    fw: int
    stride_h: int
    stride_w: int
    dil_h: int
    dil_w: int
    pad_top: int
    pad_left: int
    pitch: int = 0


class PlanarBlocks(NamedTuple):
    """The sizes ``_planar_blocks_kernel`` reads (its ``geo`` argument): the batch, the output
    and source planes' heights and widths, the number of output planes, M, and the rows per job
    (``_planar_block_rows``). A record of int64 for numba, unpacked in one line."""

    batch: int
    out_h: int
    out_w: int
    src_h: int
    src_w: int
    planes: int
    mult: int
    block_rows: int


def _kernel_record(record: type, *sizes: int) -> tuple:
    """A ``Geometry`` or ``PlanarBlocks`` of ``sizes`` as the kernels take it: its fields, in
    order, as a plain tuple of Python ints (numba types them as int64). numba types a plain
    tuple in its C dispatcher and a named tuple's fields in Python: 0.3 against 1.2 us per call."""
    return tuple(record(*map(int, sizes)))


def _geometry(*sizes: int) -> tuple:
    """The kernels' ``geo`` argument (``Geometry``; ``_kernel_record``)."""
    return _kernel_record(Geometry, *sizes)


def _tap_shifts(fh: int, fw: int, step_y: int, step_x: int, start_y: int, start_x: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per tap (ky, kx) in order: the source offset ``start + k*step`` of each axis."""
    ky, kx = np.divmod(np.arange(fh * fw, dtype=np.int64), fw)
    return start_y + ky * step_y, start_x + kx * step_x



def _planar_block_rows(out_h: int, out_w: int, shift_x: np.ndarray) -> int:
    """Output rows per job of ``_planar_blocks_kernel``: blocks of about ``_PLANAR_BLOCK_ELEMENTS``."""
    pitch = out_w + int(shift_x.max() - shift_x.min())
    return max(1, min(out_h, _PLANAR_BLOCK_ELEMENTS // pitch))


# Pure in its integer arguments and called twice per call: remembered (NumPy's small-array calls
# in it cost as much as a small call's kernel).
@functools.lru_cache(maxsize=1024)
def _live_taps(in_size: int, out_size: int, taps: int, stride: int, dilation: int, pad: int
               ) -> tuple[int, int, int, int, int] | None:
    """The taps of one filter axis that read inside the input, for some output position ``o``:
    tap ``k`` reads input ``k*dilation - pad + o*stride`` (SPEC 5.4). Returns ``(first, last, crop,
    pad', dilation')``: only taps first..last, read as a filter of their own with ``pad'`` and
    ``dilation'`` from input position ``crop`` on (no input before ``crop`` is read), or None when
    no tap reads the input. The other taps read only padding: the kernels would skip them, so
    leaving them out gives the same bits, and no staging buffer grows with a dilation or padding
    beyond the sizes of the operands."""
    start = np.arange(taps, dtype=np.int64) * dilation - pad  # the input position each tap reads at o = 0
    first_output = np.maximum(0, -(start // stride))  # the first o that reads at or after position 0
    live = np.flatnonzero((first_output < out_size) & (start + first_output * stride <= in_size - 1))
    if live.size == 0:
        return None
    first, last = int(live[0]), int(live[-1])
    first_start = first * dilation - pad
    return first, last, max(0, first_start), max(0, -first_start), dilation if last > first else 1
