"""The blockwise machinery shared by every gradops.dask operator: chunk boundaries, the input
range each output block reads, and the task graph that hands each block its input (halo
included) and calls the in-memory gradops operator on it.

Every operator here is a gather: output block ``b`` reads, along each axis, one contiguous range
of each source array (its "needs"). The graph gives each output block one task that cuts the
parts of the source chunks overlapping that range, joins them (``np.block``) and calls the block
function. Ranges may reach any number of neighbouring chunks, so any chunking of the split axes
is computable; the operators choose default output chunks aligned with their input chunks so
that a block reads its own chunk plus a small halo (``chunks_by_reads``): the positions that read
inside one source chunk are computed from that chunk in place, those that read across its end
from a small joined range, both in the block's one task.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import operator
from typing import Any, Callable, NamedTuple, Sequence

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


class AxisSplit(NamedTuple):
    """An output axis split along a source axis's chunks (``chunks_by_reads``): ``parts``, runs of
    positions computed by one call each, and ``blocks``, how many consecutive parts each output
    block (one task) takes."""

    parts: tuple[int, ...]
    blocks: tuple[int, ...]


def chunks_by_reads(first: np.ndarray, last: np.ndarray, source_sizes: Sequence[int]) -> AxisSplit:
    """Output parts and blocks aligned with a source axis's chunks. Output ``o`` reads source
    indices ``first[o]..last[o]`` (both non-decreasing). Consecutive outputs that read inside the
    same source chunk form one part, which reads that chunk in place (no copy), and so do those
    that read across the same boundary, which read a few rows on either side of it. A block takes
    the parts whose first read lies in one source chunk: that chunk's part and the small one after
    it, one task per source chunk instead of three (a boundary part and the two cuts it reads)."""
    ends = bounds(source_sizes)[1:]
    owners = np.stack([np.searchsorted(ends, first, side="right"), np.searchsorted(ends, last, side="right")])
    starts = np.flatnonzero(np.concatenate(([True], np.any(owners[:, 1:] != owners[:, :-1], axis=0))))
    parts = tuple(int(n) for n in np.diff(np.append(starts, first.size)))
    block_starts = np.flatnonzero(np.concatenate(([True], owners[0, starts[1:]] != owners[0, starts[1:] - 1])))
    return AxisSplit(parts, tuple(int(n) for n in np.diff(np.append(block_starts, len(parts)))))


def split_axes(axes: Sequence[AxisSplit | Sequence[int]]) -> tuple[tuple[tuple[int, ...], ...],
                                                                    tuple[tuple[int, ...], ...]]:
    """``gather``'s ``parts`` and ``blocks`` from one entry per axis: an ``AxisSplit``, or chunks
    (one part per block)."""
    splits = [axis if isinstance(axis, AxisSplit) else AxisSplit(tuple(axis), (1,) * len(axis)) for axis in axes]
    return tuple(split.parts for split in splits), tuple(split.blocks for split in splits)


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


def _pieces(source_bounds: list[list[int]], ranges: Sequence[Range]) -> list[list[tuple[int, slice]]]:
    """Per axis, the chunks of a source (``source_bounds``: its chunk boundaries per axis) that
    hold ``ranges``, each with the slice of it that does (``_parts``)."""
    return [_parts(axis_bounds, lo, hi) for axis_bounds, (lo, hi) in zip(source_bounds, ranges)]


def _source_task(source: da.Array, source_bounds: list[list[int]], per_axis: list[list[tuple[int, slice]]],
                 graph: dict, parts_name: str, in_place: frozenset) -> tuple:
    """A task computing the range of ``source`` whose pieces are ``per_axis`` (``_pieces``) from
    the chunks that hold it. A part of a chunk is cut by its own task (added to ``graph``, shared
    by every block that reads it), so that only the part travels to the worker that runs the
    block, not the whole chunk (a halo is thin); a part of a chunk in ``in_place`` (one the
    block's task reads whole anyway) is cut inside the block's task."""
    pieces: list = []
    for combination in itertools.product(*per_axis):
        chunk_index = tuple(chunk for chunk, _ in combination)
        key = (source.name, *chunk_index)
        cut = tuple(cut for _, cut in combination)
        if any(c.stop - c.start != b[i + 1] - b[i] for c, b, i in zip(cut, source_bounds, chunk_index)):
            if key in in_place:
                pieces.append((operator.getitem, key, cut))
                continue
            part_key = (parts_name, *chunk_index, *(c.start for c in cut), *(c.stop for c in cut))
            graph.setdefault(part_key, (operator.getitem, key, cut))
            key = part_key
        pieces.append(key)
    return (_join, pieces, tuple(len(axis) for axis in per_axis))


def _read_in_place(sources: Sequence[da.Array], planned: list) -> frozenset:
    """The source chunks a block's parts read in place: those some part reads all of its range
    from (one piece per axis, ``_pieces``). The scheduler runs the block next to such a chunk, so
    a cut of it in a task of its own would only add a task."""
    return frozenset((source.name, *(pieces[0][0] for pieces in per_axis))
                     for _, reads, _ in planned for source, per_axis in zip(sources, reads)
                     if per_axis is not None and all(len(pieces) == 1 for pieces in per_axis))


def _assembled(block: Callable[..., np.ndarray], shape: tuple[int, ...], dtype: np.dtype, parts: list) -> np.ndarray:
    """An output block of several parts (``gather``'s ``blocks``): each part's ``block`` call
    writes its own region of the one output (``out=``), so nothing is copied afterwards."""
    out = empty_output(shape, dtype, None)
    for parameters, region, *inputs in parts:
        block(parameters, *inputs, out=out[region])
    return out


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


def gather(label: str, sources: Sequence[da.Array], parts: tuple[tuple[int, ...], ...],
           plan_block: Callable[[tuple[Range, ...]], tuple[Sequence[tuple[Range, ...] | None], Any]],
           block: Callable[..., np.ndarray], dtype: np.dtype, token: Any,
           blocks: tuple[tuple[int, ...], ...] | None = None) -> da.Array:
    """A dask array whose part with output ranges ``r`` (one ``[lo, hi)`` per axis; ``parts``: the
    parts' sizes per axis) is ``block(parameters, *source_blocks)``, where ``plan_block(r)``
    returns, per source, the ranges that part reads (None: not read, ``block`` receives None) and
    the part's ``parameters``, computed once when the graph is built. ``blocks``: per axis, how
    many consecutive parts each of the array's blocks takes (default one: the array's chunks are
    ``parts``). A block of several parts is one task, whose parts ``block`` writes through
    ``out=``. A block's task cuts the source chunks its parts read in place itself
    (``_read_in_place``); other chunks' parts are cut by tasks of their own. Fewer tasks, because
    each costs the scheduler and the workers as much as a kernel moving tens of MiB
    (docs/performance.md, section 3)."""
    blocks = blocks or tuple((1,) * len(sizes) for sizes in parts)
    part_bounds = [bounds(sizes).tolist() for sizes in parts]
    block_edges = [bounds(counts).tolist() for counts in blocks]
    chunks = tuple(tuple(b[e[i + 1]] - b[e[i]] for i in range(len(e) - 1)) for b, e in zip(part_bounds, block_edges))
    name = f"gradops-{label}-{tokenize(token, *(s.name for s in sources), parts, blocks)}"
    source_bounds = [[bounds(sizes).tolist() for sizes in source.chunks] for source in sources]
    graph: dict = {}
    for index in itertools.product(*(range(len(counts)) for counts in blocks)):
        spans = [range(e[i], e[i + 1]) for e, i in zip(block_edges, index)]
        planned = []  # per part: its ranges, the pieces of each source it reads, its parameters
        for part in itertools.product(*spans):
            ranges = tuple((b[i], b[i + 1]) for b, i in zip(part_bounds, part))
            needs, parameters = plan_block(ranges)
            planned.append((ranges, [None if need is None else _pieces(edges, need)
                                     for edges, need in zip(source_bounds, needs)], parameters))
        in_place = _read_in_place(sources, planned)
        tasks = [[parameters, *(None if per_axis is None else
                                _source_task(source, edges, per_axis, graph, f"{name}-part-{number}", in_place)
                                for number, (source, edges, per_axis) in enumerate(zip(sources, source_bounds, reads)))]
                 for _, reads, parameters in planned]
        if len(planned) == 1:
            graph[(name, *index)] = (_on_one_thread, block, *tasks[0])
            continue
        origin = [b[span.start] for b, span in zip(part_bounds, spans)]
        for task, (ranges, _, _) in zip(tasks, planned):
            task.insert(1, tuple(slice(lo - o, hi - o) for (lo, hi), o in zip(ranges, origin)))
        shape = tuple(sizes[i] for sizes, i in zip(chunks, index))
        graph[(name, *index)] = (_on_one_thread, _assembled, block, shape, np.dtype(dtype), tasks)
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
