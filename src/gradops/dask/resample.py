"""The DirectML resample family on dask arrays (SPEC 3): ``resample``, ``resample1``,
``resample2`` and their adjoints ``resample_grad``, ``resample_grad1``.

Bit-identical blocks. The full call's per-axis taps (SPEC 3.2-3.4: the float32 coordinate of
every output position, its input indices and weights) come from the NumPy API's own validation
and planning. Each output block takes the rows of those tables for its positions, with indices
shifted to its input range, and runs the in-memory kernel on that range. A block task carries
the few numbers each axis's taps are built from (``_axis_arguments``), not the tables: each
process builds an axis's tables once (``_axis``, ``_axis_block``). Tables in the tasks came to
62 KB a block for a 2048-wide axis, 3 MB a graph, which the client and the scheduler pickled
and sent again on every run. Shifting the pixel offsets by the block origin instead would not do:
``fl32(t - (ipo + i0))`` may round differently from ``fl32(t - ipo) - i0``, and move a tap.

* Forward: output block ``[a, b)`` reads the input range from its first tap to its last
  nonzero tap (taps of weight 0 are not taps, SPEC 3.4). By default output chunks follow the
  input chunks (``chunks_by_reads``): a block takes the positions whose first tap lies in one
  input chunk; those whose taps all lie in it are computed from that chunk in place, the few
  whose taps straddle its end from a small joined range, in the block's one task, for any scale.
* Gradient (``dX = J^T dY``, a gather over dY, SPEC 3.6): dX block ``[a, b)`` reads the dY
  range of the forward outputs with a nonzero tap in ``[a, b)``; taps that land outside the
  block get weight 0 there (the neighbouring block counts them). dX positions no output reads
  are +0, as in the full call. Default dX chunks follow dY's chunks in the same way, through
  the forward outputs that read each position.

A block whose rows of a resampled axis happen to be an identity map, while the full axis is
not, reads one more element so that it is not run as a copy (a copy keeps a -0 that the full
call's sum, which starts from +0, turns into +0).

Which axes split: all but the innermost resampled axis and the axes inside it, which stay one
chunk (``_whole_axes``), and a block never computes a single position of a longer axis
(``_widened``): see those two for why the fast kernels need it. The reference backend sums in
float64 and rounds once; it orders a call's axes by their size ratios (``resample.py``), so a
block may add its axes in another order than the full call, which changes the float32 result
only where the two float64 sums round to opposite sides of a float32 rounding boundary.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Sequence

import dask.array as da
import numpy as np

from .._arrays import check_input
from .._backend import resolve_backend
from .._resample_params import (_NUMPY_FIELDS, _RESAMPLE, _RESAMPLE1, _RESAMPLE2, _RESAMPLE_GRAD, _RESAMPLE_GRAD1,
                                RESAMPLE_DTYPES, AxisArguments, _axis_arguments, _cached_axis_taps, _Op, _Plan,
                                _sizes)
from ..resample import run_plan
from ..errors import ShapeError
from ._graph import (AxisSplit, as_dask, builds_graph, chunks_by_reads, gather, output_chunks, Range, shape_proxy,
                     split_axes)

__all__ = ["resample", "resample1", "resample2", "resample_grad", "resample_grad1"]


@dataclass(frozen=True, eq=False)
class _Axis:
    """One axis of the full call: its forward taps and sizes."""

    index: np.ndarray  # int64[n_out, 2], forward output -> input indices
    weight: np.ndarray  # float32[n_out, 2]
    n_in: int
    n_out: int

    @functools.cached_property
    def identity(self) -> bool:
        return _is_identity(self.index, self.weight, self.n_in)

    def forward_chunks(self, input_chunks: Sequence[int]) -> AxisSplit:
        last = np.where(self.weight[:, 1] != 0, self.index[:, 1], self.index[:, 0])
        return chunks_by_reads(self.index[:, 0], last, input_chunks)

    def gradient_chunks(self, dy_chunks: Sequence[int]) -> AxisSplit:
        """The dY rows that read each dX position; a position no output reads goes with the next
        position that is read (or the last output)."""
        nonzero = self.weight != 0
        rows = np.broadcast_to(np.arange(self.n_out)[:, None], self.index.shape)
        first = np.full(self.n_in, self.n_out - 1, dtype=np.int64)
        last = np.full(self.n_in, -1, dtype=np.int64)
        np.minimum.at(first, self.index[nonzero], rows[nonzero])
        np.maximum.at(last, self.index[nonzero], rows[nonzero])
        first = np.minimum.accumulate(first[::-1])[::-1]
        last = np.maximum(np.maximum.accumulate(last), first)
        return chunks_by_reads(first, last, dy_chunks)

    def forward_block(self, a: int, b: int) -> tuple[Range, np.ndarray, np.ndarray]:
        """The input range output block ``[a, b)`` reads, and its taps relative to that range."""
        index, weight = self.index[a:b], self.weight[a:b]
        taps = index[weight != 0]
        lo, hi = int(taps.min()), int(taps.max()) + 1
        if not self.identity and _is_identity(index - lo, weight, hi - lo):
            lo, hi = (lo - 1, hi) if lo > 0 else (lo, min(hi + 1, self.n_in))
        return (lo, hi), *_local(index - lo, weight, hi - lo)

    def gradient_block(self, a: int, b: int) -> tuple[Range, np.ndarray, np.ndarray] | None:
        """The dY range dX block ``[a, b)`` reads and the taps of the forward outputs in that range,
        with those outside ``[a, b)`` zeroed; None when no output reads the block."""
        inside = (self.index >= a) & (self.index < b) & (self.weight != 0)
        readers = np.flatnonzero(inside.any(axis=1))
        if readers.size == 0:
            return None
        lo, hi = int(readers[0]), int(readers[-1]) + 1
        weight = np.where(inside[lo:hi], self.weight[lo:hi], np.float32(0))
        if not self.identity and _is_identity(self.index[lo:hi] - a, weight, b - a):
            lo, hi = (lo - 1, hi) if lo > 0 else (lo, min(hi + 1, self.n_out))
            weight = np.where(inside[lo:hi], self.weight[lo:hi], np.float32(0))
        return (lo, hi), *_local(self.index[lo:hi] - a, weight, b - a)


@functools.lru_cache(maxsize=64)
def _axis(arguments: AxisArguments) -> _Axis:
    """The full call's axis built from ``arguments``, once per process."""
    index, weight = _cached_axis_taps(*arguments)
    return _Axis(index, weight, arguments[0], arguments[1])


@functools.lru_cache(maxsize=256)
def _axis_block(arguments: AxisArguments, gradient: bool, a: int,
                b: int) -> tuple[Range, np.ndarray, np.ndarray] | None:
    """``_Axis.gradient_block`` or ``forward_block`` of ``_axis(arguments)``, once per process:
    the graph's builder and each worker ask for the same blocks of an axis, the unsplit axes'
    whole range for every block."""
    axis = _axis(arguments)
    return axis.gradient_block(a, b) if gradient else axis.forward_block(a, b)


def _local(index: np.ndarray, weight: np.ndarray, n_in: int) -> tuple[np.ndarray, np.ndarray]:
    """Taps for a block call: zero-weight taps (never read, SPEC 3.4) clipped into the range."""
    index = np.ascontiguousarray(np.where(weight != 0, index, np.clip(index, 0, n_in - 1)), dtype=np.int64)
    weight = np.ascontiguousarray(weight, dtype=np.float32)
    index.flags.writeable = weight.flags.writeable = False  # shared by every call that asks (_axis_block)
    return index, weight


def _is_identity(index: np.ndarray, weight: np.ndarray, n_in: int) -> bool:
    """The test both backends apply to skip an axis (resample.py and _fast/resample/taps.py)."""
    return (index.shape[0] == n_in and bool(np.all(weight[:, 0] == 1)) and not np.any(weight[:, 1])
            and bool(np.array_equal(index[:, 0], np.arange(n_in))))


@dataclass(frozen=True, eq=False)
class _Block:
    """What one block task needs: each axis's arguments and the range the block computes along
    it, direction, backend, dtype."""

    axes: tuple[AxisArguments, ...]
    computed: tuple[Range, ...]  # the block's ranges, widened where _widened says
    gradient: bool
    backend: str
    dtype: np.dtype
    crop: tuple[slice, ...]  # the block within the computed range (see _widened)


def _block(parameters: _Block, source: np.ndarray | None, out: np.ndarray | None = None) -> np.ndarray:
    """The block's result, into ``out`` when given (a part of a larger block, ``_graph.gather``)."""
    if source is None:  # no output reads it: +0
        if out is None:
            return np.zeros(tuple(cut.stop - cut.start for cut in parameters.crop), dtype=parameters.dtype)
        out[...] = 0
        return out
    gradient = parameters.gradient
    local = [_axis_block(axis, gradient, a, b) for axis, (a, b) in zip(parameters.axes, parameters.computed)]
    computed = tuple(b - a for a, b in parameters.computed)
    read = tuple(hi - lo for (lo, hi), _, _ in local)
    forward_in, forward_out = (computed, read) if gradient else (read, computed)
    plan = _Plan(forward_in, forward_out, tuple((index, weight) for _, index, weight in local))
    if out is not None and all(cut.stop - cut.start == n for cut, n in zip(parameters.crop, computed)):
        return run_plan(source, plan, parameters.backend, gradient=gradient, out=out)
    result = run_plan(source, plan, parameters.backend, gradient=gradient)[parameters.crop]
    if out is None:
        return result
    out[...] = result
    return out


def _widened(a: int, b: int, size: int, resampled: bool) -> Range:
    """The range a block computes: ``[a, b)``, or two positions when ``[a, b)`` is one position
    of a longer resampled axis. The fast kernels order a call's axes by size (size-1 axes
    outermost), and the nesting of their sums over the axes' taps follows that order: two
    positions keep the full call's order. An axis that is not resampled has one tap per
    position, so where it sits in the nesting does not matter."""
    if b - a == 1 and size > 1 and resampled:
        return (a - 1, b) if a > 0 else (a, b + 1)
    return a, b


def _whole_axes(axes: Sequence[_Axis]) -> range:
    """The axes that stay one chunk: the innermost resampled axis and every axis inside it.
    The fast kernels choose how to sum along it (its slot count, affine spans, whether pixels are
    read directly) from its whole tap table, so a block gets the full call's table there."""
    resampled = [d for d, axis in enumerate(axes) if not axis.identity]
    return range(resampled[-1] if resampled else len(axes), len(axes))


def _blockwise(op: _Op, source: Any, sizes: Any, chunks: Any, backend: str | None, parameters: dict) -> da.Array:
    """Validate as the NumPy call does (same errors, same fields), plan the full call's taps and
    build one gather task per output block."""
    gradient = op.gradient
    name, sizes_name = ("dy", "input_sizes") if gradient else ("x", "output_sizes")
    source = as_dask(name, source)
    check_input(name, shape_proxy(source), dtypes=RESAMPLE_DTYPES, ranks=op.ranks)
    sizes = _sizes(sizes_name, sizes, source.ndim, f"one per axis of {name}")
    forward_in, forward_out = (sizes, source.shape) if gradient else (source.shape, sizes)
    # itemsize 0: the full output is never held in memory (each block checks its own), only the
    # plan's tap tables must fit.
    arguments = _axis_arguments(op, forward_in, forward_out, _NUMPY_FIELDS, 0, **parameters)
    backend = resolve_backend(backend)
    axes = [_axis(axis) for axis in arguments]
    whole = _whole_axes(axes)
    source = source.rechunk({d: -1 for d in whole})
    blocks = None
    if chunks is None:
        chunks, blocks = split_axes([axis.gradient_chunks(c) if gradient else axis.forward_chunks(c)
                                     for axis, c in zip(axes, source.chunks)])
    else:
        chunks = output_chunks("chunks", chunks, sizes)
        for d in whole:
            if len(chunks[d]) != 1:
                raise ShapeError.expected(f"chunks[{d}]", f"one chunk along axis {d} (the innermost resampled axis "
                                          "and the axes inside it are not split)", chunks[d])

    def plan_block(ranges: tuple[Range, ...]) -> tuple[list, _Block]:
        computed = tuple(_widened(a, b, n, not axis.identity) for (a, b), n, axis in zip(ranges, sizes, axes))
        crop = tuple(slice(a - c, b - c) for (a, b), (c, _) in zip(ranges, computed))
        block = _Block(arguments, computed, gradient, backend, source.dtype, crop)
        local = [_axis_block(axis, gradient, a, b) for axis, (a, b) in zip(arguments, computed)]
        if any(entry is None for entry in local):
            return [None], block
        return [tuple(entry[0] for entry in local)], block

    token = (op.operator_type, forward_in, forward_out, arguments, backend)
    return gather(op.operator_type.lower(), [source], chunks, plan_block, _block, source.dtype, token, blocks)


@builds_graph
def resample(x: Any, output_sizes: Sequence[int], *, mode: Any = "nearest", scales: Sequence[float] | None = None,
             chunks: Any = None, backend: str | None = None) -> da.Array:
    """:func:`gradops.resample` on a dask array, the same bits for any chunking of ``x``.
    ``chunks``: the output's chunks (default: aligned with ``x``'s, see the module notes)."""
    return _blockwise(_RESAMPLE, x, output_sizes, chunks, backend, dict(mode=mode, scales=scales))


@builds_graph
def resample1(x: Any, output_sizes: Sequence[int], *, mode: Any = "nearest", scales: Sequence[float] | None = None,
              input_pixel_offsets: Sequence[float] | None = None, output_pixel_offsets: Sequence[float] | None = None,
              chunks: Any = None, backend: str | None = None) -> da.Array:
    """:func:`gradops.resample1` on a dask array (arguments and ``chunks`` as :func:`resample`)."""
    return _blockwise(_RESAMPLE1, x, output_sizes, chunks, backend,
                      dict(mode=mode, scales=scales, input_pixel_offsets=input_pixel_offsets,
                           output_pixel_offsets=output_pixel_offsets))


@builds_graph
def resample2(x: Any, output_sizes: Sequence[int], *, mode: Any = "nearest", rounding_direction: Any = None,
              scales: Sequence[float] | None = None, input_pixel_offsets: Sequence[float] | None = None,
              output_pixel_offsets: Sequence[float] | None = None, chunks: Any = None,
              backend: str | None = None) -> da.Array:
    """:func:`gradops.resample2` on a dask array (arguments and ``chunks`` as :func:`resample`)."""
    return _blockwise(_RESAMPLE2, x, output_sizes, chunks, backend,
                      dict(mode=mode, rounding_direction=rounding_direction, scales=scales,
                           input_pixel_offsets=input_pixel_offsets, output_pixel_offsets=output_pixel_offsets))


@builds_graph
def resample_grad(dy: Any, input_sizes: Sequence[int], *, mode: Any = "nearest",
                  scales: Sequence[float] | None = None, input_pixel_offsets: Sequence[float] | None = None,
                  output_pixel_offsets: Sequence[float] | None = None, offset_convention: str = "per-tensor",
                  chunks: Any = None, backend: str | None = None) -> da.Array:
    """:func:`gradops.resample_grad` on a dask array, the same bits for any chunking of ``dy``.
    ``chunks``: the result's (dX's) chunks (default: aligned with ``dy``'s)."""
    return _blockwise(_RESAMPLE_GRAD, dy, input_sizes, chunks, backend,
                      dict(mode=mode, scales=scales, input_pixel_offsets=input_pixel_offsets,
                           output_pixel_offsets=output_pixel_offsets, offset_convention=offset_convention))


@builds_graph
def resample_grad1(dy: Any, input_sizes: Sequence[int], *, mode: Any = "nearest", rounding_direction: Any = None,
                   scales: Sequence[float] | None = None, input_pixel_offsets: Sequence[float] | None = None,
                   output_pixel_offsets: Sequence[float] | None = None, offset_convention: str = "per-tensor",
                   chunks: Any = None, backend: str | None = None) -> da.Array:
    """:func:`gradops.resample_grad1` on a dask array (arguments and ``chunks`` as
    :func:`resample_grad`)."""
    return _blockwise(_RESAMPLE_GRAD1, dy, input_sizes, chunks, backend,
                      dict(mode=mode, rounding_direction=rounding_direction, scales=scales,
                           input_pixel_offsets=input_pixel_offsets, output_pixel_offsets=output_pixel_offsets,
                           offset_convention=offset_convention))
