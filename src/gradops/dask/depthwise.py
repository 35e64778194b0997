"""The TensorFlow depthwise family on dask arrays (SPEC 5): ``depthwise_conv2d_native``,
``depthwise_conv2d_native_backprop_input`` and ``depthwise_conv2d_native_backprop_filter``.

N, H and W may be split; C (and C*M) stays one chunk: an input chunked along C is rechunked to
one chunk there. Each block calls the in-memory operator on its range of the source, with
EXPLICIT paddings chosen so that the block's positions are the full call's positions (SPEC 5.3,
5.4): along H, output block ``[a, b)`` of the forward op reads input rows
``[a*s - pt, (b-1)*s - pt + eff)`` clipped to ``[0, H)``, and the clipped parts become the
block's pads. A block's taps are the full call's taps in the same order, and taps in the padding
are skipped in both, so the forward op and the input gradient give the in-memory call's bits
(the fast backend fixes each element's order by the problem alone, see
``_fast/depthwise/__init__.py``; the reference sums each element's taps in (ky, kx) order in
float64).

Default output chunks follow the source's chunks (``_graph.chunks_by_reads``): a block takes the
rows whose windows (forward) or whose reaching dY rows (dX) start in one source chunk. Those that
lie in it are computed from that chunk in place, those that read across its end from a small
joined range, in the block's one task. Strided outputs start their chunks on the stride.

The filter gradient is a sum over every (n, oy, ox): each dY block contributes the in-memory
filter gradient of its block, computed in the accumulation type (float32 for float16,
bfloat16 and float32; float64 for float64); the partial sums are added pairwise in a fixed tree
by block index and rounded once to T. The result is the same bits on every run and scheduler
for a given chunking. Against the in-memory call, both are sums of the same terms ``dY * X`` in
the accumulation type in different orders: they differ by at most
``(terms + blocks) * u * sum(|dY * X|)`` per filter element (``u`` = 2**-24 for float32
accumulation, 2**-53 for float64), plus one rounding to T for the half types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import dask.array as da
import numpy as np

from ..depthwise import (DepthwiseConv2dNativeBackpropFilterDesc, DepthwiseConv2dNativeBackpropInputDesc,
                         DepthwiseConv2dNativeDesc, DepthwiseGeometry, _check_tensor, _check_sizes,
                         depthwise_conv2d_native_backprop_filter as numpy_backprop_filter,
                         depthwise_conv2d_native_backprop_input as numpy_backprop_input,
                         depthwise_conv2d_native as numpy_forward)
from .._backend import resolve_backend
from ..errors import ShapeError
from ._graph import (AxisSplit, as_dask, builds_graph, chunks_by_reads, gather, output_chunks, Range, shape_proxy,
                     split_axes, tree_sum)

__all__ = ["depthwise_conv2d_native", "depthwise_conv2d_native_backprop_input",
           "depthwise_conv2d_native_backprop_filter"]


@dataclass(frozen=True)
class _Spatial:
    """One spatial axis of the full call."""

    n_in: int
    n_out: int
    stride: int
    dilation: int
    filter_size: int
    pad_before: int

    @property
    def effective(self) -> int:
        return (self.filter_size - 1) * self.dilation + 1

    def window_reads(self, a: int, b: int) -> tuple[Range, tuple[int, int]] | None:
        """Outputs ``[a, b)``: the input rows they read and the block's (before, after) pads;
        None when every tap lies in the padding (the sum is +0)."""
        start = a * self.stride - self.pad_before
        end = (b - 1) * self.stride - self.pad_before + self.effective
        lo, hi = min(max(start, 0), self.n_in), min(max(end, 0), self.n_in)
        if hi <= lo:
            return None
        return (lo, hi), (lo - start, end - hi)

    def gradient_reads(self, a: int, b: int) -> tuple[Range, tuple[int, int], int] | None:
        """dX rows ``[a, b)``: the dY rows whose windows reach them, the block's pads, and the end
        of the rows they reach (rows from there to ``b`` get nothing: +0); None if none does."""
        s, pt = self.stride, self.pad_before
        first = -(-(a + pt - (self.effective - 1)) // s)  # the first window ending at or after a
        first = min(max(first, 0), (a + pt) // s)  # so that the block's pad before is >= 0
        last = min(self.n_out, (b - 1 + pt) // s + 1)
        if last <= first:
            return None
        reached = (last - 1) * s - pt + self.effective  # end of the last window
        if reached <= a:
            return None
        end = min(b, reached)
        return (first, last), (a + pt - first * s, reached - end), end


class _Layout:
    """Axis roles of a data_format: which axes are N, H, W and C."""

    def __init__(self, data_format: str) -> None:
        self.data_format = data_format
        self.n, self.h, self.w, self.c = (data_format.index(axis) for axis in "NHWC")

    def explicit_paddings(self, h_pads: tuple[int, int], w_pads: tuple[int, int]) -> list[int]:
        pads = [0] * 8
        pads[2 * self.h: 2 * self.h + 2] = h_pads
        pads[2 * self.w: 2 * self.w + 2] = w_pads
        return pads

    def shape(self, n: Any, h: Any, w: Any, c: Any) -> tuple:
        result = [None] * 4
        result[self.n], result[self.h], result[self.w], result[self.c] = n, h, w, c
        return tuple(result)


def _axes(geometry: DepthwiseGeometry, desc: Any) -> tuple[_Spatial, _Spatial]:
    stride_h, stride_w, dil_h, dil_w = desc._kernel_attrs
    return (_Spatial(geometry.in_height, geometry.out_height, stride_h, dil_h, geometry.filter_height,
                     geometry.pad_top),
            _Spatial(geometry.in_width, geometry.out_width, stride_w, dil_w, geometry.filter_width,
                     geometry.pad_left))


@dataclass(frozen=True, eq=False)
class _Block:
    """One block task: the in-memory call to make and where its result goes."""

    function: Callable
    arguments: dict
    out_shape: tuple[int, ...]  # the block's full shape (zeros where nothing reaches)
    result_shape: tuple[int, ...] | None  # the in-memory call's shape; None: nothing reaches the block
    dtype: np.dtype
    accumulate: np.dtype | None = None  # filter gradient: operands cast to the accumulation type


def _block(parameters: _Block, *sources: np.ndarray | None, out: np.ndarray | None = None) -> np.ndarray:
    """The block's result, into ``out`` when given (a part of a larger block, ``_graph.gather``):
    the in-memory call's result where it reaches (``result_shape``), +0 after it."""
    reached = parameters.result_shape
    if reached is not None and parameters.accumulate is not None:
        sources = tuple(s.astype(parameters.accumulate, copy=False) for s in sources)  # exact widening
    if reached == parameters.out_shape and out is None:
        return parameters.function(*sources, **parameters.arguments)
    if out is None:
        out = np.zeros(parameters.out_shape, dtype=parameters.dtype)
    elif reached != parameters.out_shape:
        out[...] = 0
    if reached is not None:
        parameters.function(*sources, **parameters.arguments, out=out[tuple(slice(0, n) for n in reached)])
    return out


def _common(desc: Any, backend: str | None) -> tuple[_Layout, str]:
    return _Layout(desc.data_format), resolve_backend(backend)


@builds_graph
def depthwise_conv2d_native(input: Any, filter: np.ndarray, strides: Sequence[int], padding: str, *,
                            explicit_paddings: Sequence[int] = (), data_format: str = "NHWC",
                            dilations: Sequence[int] = (1, 1, 1, 1), chunks: Any = None,
                            backend: str | None = None) -> da.Array:
    """:func:`gradops.depthwise_conv2d_native` on a dask ``input`` (``filter`` a NumPy array):
    the same bits for any chunking of N, H and W. ``chunks``: the output's (C*M one chunk)."""
    x = as_dask("input", input)
    T = _check_tensor("input", shape_proxy(x), "").dtype
    desc = DepthwiseConv2dNativeDesc(T, strides, padding, explicit_paddings, data_format, dilations)
    filt = _check_tensor("filter", filter, "", T)
    geometry = desc.geometry(x.shape, filt.shape)
    layout, backend = _common(desc, backend)
    x = x.rechunk({layout.c: -1})
    h_axis, w_axis = _axes(geometry, desc)
    out_shape = geometry.output_shape(data_format)
    blocks = None
    if chunks is None:
        chunks, blocks = split_axes(layout.shape(x.chunks[layout.n], _window_chunks(h_axis, x.chunks[layout.h]),
                                                 _window_chunks(w_axis, x.chunks[layout.w]), (out_shape[layout.c],)))
    chunks = _output_chunks(chunks, out_shape, layout)

    def plan_block(ranges: tuple[Range, ...]) -> tuple[list, _Block]:
        out_block = tuple(b - a for a, b in ranges)
        reads = [h_axis.window_reads(*ranges[layout.h]), w_axis.window_reads(*ranges[layout.w])]
        if None in reads:
            return [None], _Block(numpy_forward, {}, out_block, None, T)
        (h_range, h_pads), (w_range, w_pads) = reads
        need = layout.shape(ranges[layout.n], h_range, w_range, (0, geometry.channels))
        arguments = dict(filter=filt, strides=desc.strides, padding="EXPLICIT", data_format=data_format,
                         explicit_paddings=layout.explicit_paddings(h_pads, w_pads), dilations=desc.dilations,
                         backend=backend)
        return [need], _Block(numpy_forward, arguments, out_block, out_block, T)

    token = ("forward", desc, filt.tobytes(), filt.shape, backend)
    return gather("depthwise-forward", [x], chunks, plan_block, _block, T, token, blocks)


@builds_graph
def depthwise_conv2d_native_backprop_input(input_sizes: Any, filter: np.ndarray, out_backprop: Any,
                                           strides: Sequence[int], padding: str, *,
                                           explicit_paddings: Sequence[int] = (), data_format: str = "NHWC",
                                           dilations: Sequence[int] = (1, 1, 1, 1), chunks: Any = None,
                                           backend: str | None = None) -> da.Array:
    """:func:`gradops.depthwise_conv2d_native_backprop_input` on a dask ``out_backprop``: the same
    bits for any chunking of N, H and W. ``chunks``: dX's (C one chunk)."""
    prefix = DepthwiseConv2dNativeBackpropInputDesc.ERROR_PREFIX
    T = _check_tensor("filter", filter, prefix).dtype
    desc = DepthwiseConv2dNativeBackpropInputDesc(T, strides, padding, explicit_paddings, data_format, dilations)
    dy = as_dask("out_backprop", out_backprop)
    _check_tensor("out_backprop", shape_proxy(dy), prefix, T)
    geometry = desc.geometry(input_sizes, filter.shape, dy.shape)
    sizes = _check_sizes("input_sizes", input_sizes, prefix, "input")
    layout, backend = _common(desc, backend)
    dy = dy.rechunk({layout.c: -1})
    h_axis, w_axis = _axes(geometry, desc)
    blocks = None
    if chunks is None:
        chunks, blocks = split_axes(layout.shape(dy.chunks[layout.n], _reader_chunks(h_axis, dy.chunks[layout.h]),
                                                 _reader_chunks(w_axis, dy.chunks[layout.w]), (sizes[layout.c],)))
    chunks = _output_chunks(chunks, sizes, layout)

    def plan_block(ranges: tuple[Range, ...]) -> tuple[list, _Block]:
        out_block = tuple(b - a for a, b in ranges)
        reads = [h_axis.gradient_reads(*ranges[layout.h]), w_axis.gradient_reads(*ranges[layout.w])]
        if None in reads:
            return [None], _Block(numpy_backprop_input, {}, out_block, None, T)
        (h_range, h_pads, h_end), (w_range, w_pads, w_end) = reads
        (a_h, _), (a_w, _) = ranges[layout.h], ranges[layout.w]
        result = layout.shape(out_block[layout.n], h_end - a_h, w_end - a_w, geometry.channels)
        need = layout.shape(ranges[layout.n], h_range, w_range, (0, geometry.channels * geometry.multiplier))
        arguments = dict(strides=desc.strides, padding="EXPLICIT", data_format=data_format,
                         explicit_paddings=layout.explicit_paddings(h_pads, w_pads), dilations=desc.dilations,
                         backend=backend)
        return [need], _Block(_backprop_input, dict(arguments, input_sizes=result, filter=filter),
                              out_block, result, T)

    token = ("backprop_input", desc, filter.tobytes(), filter.shape, sizes, backend)
    return gather("depthwise-backprop-input", [dy], chunks, plan_block, _block, T, token, blocks)


def _backprop_input(out_backprop: np.ndarray, *, input_sizes: tuple, filter: np.ndarray, **arguments: Any
                    ) -> np.ndarray:
    return numpy_backprop_input(input_sizes, filter, out_backprop, **arguments)


@builds_graph
def depthwise_conv2d_native_backprop_filter(input: Any, filter_sizes: Any, out_backprop: Any,
                                            strides: Sequence[int], padding: str, *,
                                            explicit_paddings: Sequence[int] = (), data_format: str = "NHWC",
                                            dilations: Sequence[int] = (1, 1, 1, 1),
                                            backend: str | None = None) -> da.Array:
    """:func:`gradops.depthwise_conv2d_native_backprop_filter` on dask ``input`` and
    ``out_backprop``: per-block partial sums in the accumulation type, added in a fixed tree
    (module notes: deterministic for a given chunking of ``out_backprop``, within a documented
    bound of the in-memory call). The blocks are ``out_backprop``'s chunks of N, H and W."""
    prefix = DepthwiseConv2dNativeBackpropFilterDesc.ERROR_PREFIX
    x = as_dask("input", input)
    T = _check_tensor("input", shape_proxy(x), prefix).dtype
    desc = DepthwiseConv2dNativeBackpropFilterDesc(T, strides, padding, explicit_paddings, data_format, dilations)
    dy = as_dask("out_backprop", out_backprop)
    _check_tensor("out_backprop", shape_proxy(dy), prefix, T)
    geometry = desc.geometry(x.shape, filter_sizes, dy.shape)
    layout, backend = _common(desc, backend)
    x, dy = x.rechunk({layout.c: -1}), dy.rechunk({layout.c: -1})
    h_axis, w_axis = _axes(geometry, desc)
    accumulate = np.dtype(np.float64) if T == np.float64 else np.dtype(np.float32)
    blocks = [dy.chunks[layout.n], dy.chunks[layout.h], dy.chunks[layout.w]]
    count = int(np.prod([len(b) for b in blocks]))
    filter_shape = geometry.filter_shape
    starts = [np.concatenate(([0], np.cumsum(b)[:-1])) for b in blocks]

    def plan_block(ranges: tuple[Range, ...]) -> tuple[list, _Block]:
        (flat, _), rest = ranges[0], ranges[1:]
        i_n, i_h, i_w = np.unravel_index(flat, [len(b) for b in blocks])
        n_range, h_out, w_out = ((int(s[i]), int(s[i] + b[i])) for s, b, i in zip(starts, blocks, (i_n, i_h, i_w)))
        reads = [h_axis.window_reads(*h_out), w_axis.window_reads(*w_out)]
        partial_shape = (1, *filter_shape)
        if None in reads:
            return [None, None], _Block(_partial, {}, partial_shape, None, accumulate)
        (h_range, h_pads), (w_range, w_pads) = reads
        x_need = layout.shape(n_range, h_range, w_range, (0, geometry.channels))
        dy_need = layout.shape(n_range, h_out, w_out, (0, geometry.channels * geometry.multiplier))
        arguments = dict(filter_sizes=filter_shape, strides=desc.strides, padding="EXPLICIT",
                         data_format=data_format, explicit_paddings=layout.explicit_paddings(h_pads, w_pads),
                         dilations=desc.dilations, backend=backend)
        return [x_need, dy_need], _Block(_partial, arguments, partial_shape, partial_shape, accumulate, accumulate)

    token = ("backprop_filter", desc, filter_shape, backend)
    partials = gather("depthwise-filter-partials", [x, dy], ((1,) * count, *((n,) for n in filter_shape)),
                      plan_block, _block, accumulate, token)
    return tree_sum("depthwise-backprop-filter", partials, accumulate, token).astype(T)


def _partial(x: np.ndarray, dy: np.ndarray, *, filter_sizes: tuple, **arguments: Any) -> np.ndarray:
    return numpy_backprop_filter(x, filter_sizes, dy, **arguments)[None]


def _window_chunks(axis: _Spatial, input_chunks: Sequence[int]) -> AxisSplit:
    """Forward output rows grouped by the input chunks their windows read (``chunks_by_reads``)."""
    if axis.n_out == 0:
        return AxisSplit((0,), (1,))
    first = np.arange(axis.n_out) * axis.stride - axis.pad_before
    last = first + axis.effective - 1
    return chunks_by_reads(np.clip(first, 0, axis.n_in - 1), np.clip(last, 0, axis.n_in - 1), input_chunks)


def _reader_chunks(axis: _Spatial, dy_chunks: Sequence[int]) -> AxisSplit:
    """dX rows grouped by the dY chunks whose windows reach them (``chunks_by_reads``)."""
    rows = np.arange(axis.n_in) + axis.pad_before
    first = -(-(rows - (axis.effective - 1)) // axis.stride)
    last = rows // axis.stride
    top = max(axis.n_out - 1, 0)
    return chunks_by_reads(np.clip(first, 0, top), np.clip(np.maximum(last, first), 0, top), dy_chunks)


def _output_chunks(chunks: Any, shape: Sequence[int], layout: _Layout) -> tuple[tuple[int, ...], ...]:
    """The caller's (or default) chunks, checked; C stays one chunk (SPEC 5.2: C*M outputs read
    their channel's M filters)."""
    normal = output_chunks("chunks", chunks, tuple(shape))
    if len(normal[layout.c]) != 1:
        raise ShapeError.expected(f"chunks[{layout.c}]", "one chunk along C (the channel axis is not split)",
                                  normal[layout.c])
    return normal
