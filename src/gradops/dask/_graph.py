"""The blockwise machinery shared by every gradops.dask operator: chunk boundaries, the input
range each output block reads, and the task graph that hands each block its input (halo
included) and calls the in-memory gradops operator on it.

Every operator here is a gather: output block ``b`` reads, along each axis, one contiguous range
of each source array (its "needs"). The graph gives each output block one task that cuts the
parts of the source chunks overlapping that range, joins them (``np.block``) and calls the block
function. Ranges may reach any number of neighbouring chunks, so any chunking of the split axes
is computable; the operators choose default output chunks aligned with their input chunks so
that a block reads its own chunk plus a small halo.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import operator
from typing import Any, Callable, Sequence

import dask.array as da
import numba
import numpy as np
from dask.array.core import normalize_chunks
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from .._arrays import blockwise_validation
from .._output_cache import empty_output
from ..errors import GradopsError, ShapeError

Range = tuple[int, int]  # [lo, hi) along one axis


def as_dask(name: str, value: Any) -> da.Array:
    """A dask array (NumPy arrays are wrapped as one chunk); anything else is the caller's error."""
    if isinstance(value, da.Array):
        return value
    if isinstance(value, np.ndarray):
        return da.from_array(value, chunks=value.shape or ())
    raise GradopsError.expected(name, "a dask.array.Array (or a NumPy array)", value)


def builds_graph(function: Callable[..., da.Array]) -> Callable[..., da.Array]:
    """A public function of gradops.dask: its arguments are validated as the NumPy call's are,
    except the limits on whole-array sizes (``_arrays.blockwise_validation``): a dask array may be
    larger than memory, and each block's own call checks its sizes."""
    @functools.wraps(function)
    def build(*args: Any, **kwargs: Any) -> da.Array:
        with blockwise_validation():
            return function(*args, **kwargs)
    return build


def shape_proxy(array: da.Array) -> np.ndarray:
    """A NumPy array of ``array``'s shape and dtype that owns one element (zero strides): what
    the NumPy API's validation helpers inspect, so the graph is validated when it is built."""
    return np.broadcast_to(np.zeros((), dtype=array.dtype), array.shape)


def output_chunks(name: str, chunks: Any, shape: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """The caller's ``chunks=`` for an output of ``shape`` in dask's notation (per axis a size,
    -1 or explicit sizes), normalised; explicit sizes must be >= 1 and sum to the axis."""
    if isinstance(chunks, (tuple, list)):
        if len(chunks) != len(shape):
            raise ShapeError.expected(name, f"{len(shape)} entries, one per axis of the result {shape}", chunks)
        for axis, sizes in enumerate(chunks):
            if isinstance(sizes, (tuple, list)) and (sum(sizes) != shape[axis] or any(s < 1 for s in sizes)):
                raise ShapeError.expected(f"{name}[{axis}]", f"chunk sizes >= 1 summing to {shape[axis]}", sizes)
    try:
        return normalize_chunks(chunks, shape=shape)
    except (ValueError, TypeError) as exc:
        raise ShapeError(name, f"not a chunking of shape {shape}: {exc}") from None


def bounds(sizes: Sequence[int]) -> np.ndarray:
    """Chunk boundaries ``[0, s0, s0 + s1, ...]``."""
    return np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))


def chunks_by_reads(first: np.ndarray, last: np.ndarray, source_sizes: Sequence[int]) -> tuple[int, ...]:
    """Output chunks aligned with a source axis's chunks. Output ``o`` reads source indices
    ``first[o]..last[o]`` (both non-decreasing). Consecutive outputs that read inside the same
    source chunk form one output chunk, and so do those that read across the same boundary: a
    block then reads one chunk in place (no copy), or a few rows on either side of a boundary."""
    ends = bounds(source_sizes)[1:]
    owners = np.stack([np.searchsorted(ends, first, side="right"), np.searchsorted(ends, last, side="right")])
    starts = np.flatnonzero(np.concatenate(([True], np.any(owners[:, 1:] != owners[:, :-1], axis=0))))
    return tuple(int(n) for n in np.diff(np.append(starts, first.size)))


def _parts(chunk_bounds: list[int], lo: int, hi: int) -> list[tuple[int, slice]]:
    """The chunks that overlap ``[lo, hi)``, each with the slice of it that does."""
    chunk = bisect.bisect_right(chunk_bounds, lo) - 1
    parts = []
    while chunk_bounds[chunk] < hi:
        start, stop = chunk_bounds[chunk], chunk_bounds[chunk + 1]
        parts.append((chunk, slice(max(lo, start) - start, min(hi, stop) - start)))
        chunk += 1
    return parts


def _join(pieces: list, grid: tuple[int, ...]) -> np.ndarray:
    """The source range of one block: the parts of its chunks, joined in place. The joined
    array comes from gradops' cache of released buffers (already-mapped pages, as the
    in-memory call's outputs do), not from a fresh allocation that faults in every page."""
    if len(pieces) == 1:
        return pieces[0]
    parts = np.empty(grid, dtype=object)
    for position, part in zip(itertools.product(*map(range, grid)), pieces):
        parts[position] = part
    edges = [np.cumsum([0] + [parts[(*(0,) * axis, i, *(0,) * (len(grid) - axis - 1))].shape[axis]
                              for i in range(n)]) for axis, n in enumerate(grid)]
    joined = empty_output(tuple(int(e[-1]) for e in edges), pieces[0].dtype, None)
    for position in itertools.product(*map(range, grid)):
        joined[tuple(slice(e[i], e[i + 1]) for e, i in zip(edges, position))] = parts[position]
    return joined


def _source_task(source: da.Array, source_bounds: list[list[int]], ranges: Sequence[Range], graph: dict,
                 parts_name: str) -> tuple:
    """A task computing ``source[ranges]`` from the chunks that hold it (``source_bounds``: its
    chunk boundaries per axis). A part of a chunk is cut by its own task (added to ``graph``,
    shared by every block that reads it), so that only the part travels to the worker that runs
    the block, not the whole chunk (a halo is thin)."""
    per_axis = [_parts(axis_bounds, lo, hi) for axis_bounds, (lo, hi) in zip(source_bounds, ranges)]
    pieces = []
    for combination in itertools.product(*per_axis):
        chunk_index = tuple(chunk for chunk, _ in combination)
        key = (source.name, *chunk_index)
        cut = tuple(cut for _, cut in combination)
        if any(c.stop - c.start != b[i + 1] - b[i] for c, b, i in zip(cut, source_bounds, chunk_index)):
            part_key = (parts_name, *chunk_index, *(c.start for c in cut), *(c.stop for c in cut))
            graph.setdefault(part_key, (operator.getitem, key, cut))
            key = part_key
        pieces.append(key)
    return (_join, pieces, tuple(len(axis) for axis in per_axis))


def _on_one_thread(function: Callable, *args: Any, **kwargs: Any) -> Any:
    """Run a block with one fast-backend thread. The fast backend's thread count is numba's
    per-calling-thread setting; each dask thread runs one block at a time, so one kernel thread
    per dask thread uses the threads dask gives the worker without oversubscribing them."""
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        return function(*args, **kwargs)
    finally:
        numba.set_num_threads(previous)


def gather(label: str, sources: Sequence[da.Array], chunks: tuple[tuple[int, ...], ...],
           plan_block: Callable[[tuple[Range, ...]], tuple[Sequence[tuple[Range, ...] | None], Any]],
           block: Callable[..., np.ndarray], dtype: np.dtype, token: Any) -> da.Array:
    """A dask array of ``chunks`` whose block with output ranges ``r`` (one ``[lo, hi)`` per
    axis) is ``block(parameters, *source_blocks)``, where ``plan_block(r)`` returns, per source,
    the ranges that block reads (None: not read, ``block`` receives None) and the block's
    ``parameters``, computed once when the graph is built."""
    name = f"gradops-{label}-{tokenize(token, *(s.name for s in sources), chunks)}"
    axis_bounds = [bounds(sizes).tolist() for sizes in chunks]
    source_bounds = [[bounds(sizes).tolist() for sizes in source.chunks] for source in sources]
    graph: dict = {}
    for index in itertools.product(*(range(len(sizes)) for sizes in chunks)):
        ranges = tuple((b[i], b[i + 1]) for b, i in zip(axis_bounds, index))
        source_ranges, parameters = plan_block(ranges)
        inputs = [None if need is None else _source_task(source, edges, need, graph, f"{name}-part-{number}")
                  for number, (source, edges, need) in enumerate(zip(sources, source_bounds, source_ranges))]
        graph[(name, *index)] = (_on_one_thread, block, parameters, *inputs)
    layer = HighLevelGraph.from_collections(name, graph, dependencies=list(sources))
    return da.Array(layer, name, chunks, dtype=dtype, meta=np.empty((0,) * len(chunks), dtype=dtype))


def tree_sum(label: str, partials: da.Array, dtype: np.dtype, token: Any) -> da.Array:
    """The sum over axis 0 of ``partials`` (one block per entry along it, the other axes one
    chunk), added pairwise in a fixed tree: (p0 + p1) + (p2 + p3), ... by block index, whatever
    the scheduler runs first, so the result is the same bits on every run."""
    name = f"gradops-{label}-{tokenize(token, partials.name)}"
    rest = (0,) * (partials.ndim - 1)
    level = [(partials.name, i, *rest) for i in range(partials.numblocks[0])]
    graph: dict = {}
    depth = 0
    while len(level) > 1:
        depth += 1
        paired = []
        for i in range(0, len(level), 2):
            key = (f"{name}-{depth}", i // 2, *rest)
            graph[key] = (np.add, *level[i:i + 2]) if i + 1 < len(level) else (np.copy, level[i])
            paired.append(key)
        level = paired
    graph[(name, *rest)] = (_squeeze_first, level[0])
    layer = HighLevelGraph.from_collections(name, graph, dependencies=[partials])
    shape_chunks = tuple((n,) for n in partials.shape[1:])
    return da.Array(layer, name, shape_chunks, dtype=dtype, meta=np.empty((0,) * len(shape_chunks), dtype=dtype))


def _squeeze_first(array: np.ndarray) -> np.ndarray:
    return array[0]
