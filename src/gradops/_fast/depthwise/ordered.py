"""The fast depthwise kernels' arithmetic in NumPy: the same products and sums, in the same
order, in the same types, so the same bits (``first_calls``: what a call runs while its kernel
compiles). The order is the one this package's docstring fixes (SPEC 5.4, 5.6):

* forward: per output element, +0, then the taps (ky, kx) ascending, each ``+ x * w`` (a product
  rounded to the accumulator, then a sum rounded);
* backprop input: per dx element and m, +0, then the taps ascending; the M sums added in m order;
* backprop filter: per filter element 2 lanes, the term of dy column ox added to lane ox % 2 in
  (row, ox) order; lane 0 + lane 1; row chunks (``plan._filter_chunks``) added in order.

A tap that reaches only padding for a position is skipped there (forward and backprop input: a
tap adds to the positions it reaches; filter: the term is -0, which leaves every sum as it is).
float16 and bfloat16 are decoded exactly to float32, summed in float32 and rounded once, as the
kernels' encoders round (``half.py``); float64 sums in float64. NaN results are NaN, their payload
bits unspecified (the kernels' vector code does not fix which operand's payload survives).

Arrays arrive as the kernels take them: NHWC-indexed views of any strides (``__init__``).
"""

from __future__ import annotations

import numpy as np

from ..._arrays import memory_limit_bytes
from ..._depthwise_reference import _tap_span, _taps
from ..codecs import encode_sums
from .plan import _LANES, _filter_chunks

# The filter gradient's terms are made for a group of chunks at a time, this many bytes of them at
# most (with the x values they read, twice this).
_TERMS_BYTES = 8 << 20


def ordered_run(kernel: str, attrs: tuple, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """``kernel`` (``conv_forward``, ``backprop_input``, ``backprop_filter``) on NHWC-indexed
    ``a``, ``b``, written into ``out``; ``attrs`` = (stride_h, stride_w, dil_h, dil_w, pad_top,
    pad_left)."""
    accumulator = np.float64 if out.dtype == np.float64 else np.float32
    a, b = a.astype(accumulator), b.astype(accumulator)  # exact for every input type
    with np.errstate(all="ignore"):  # inf and NaN are results here, as in the kernels
        out[...] = encode_sums(_SUMS[kernel](a, b, out.shape, attrs), out.dtype)


def ordered_fits(kernel: str, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> bool:
    """Whether :func:`ordered_run`'s arrays (the operands as accumulator floats, the sums and a
    tap's products, the encoded result) take at most half of ``memory_limit_bytes``: else the
    call compiles its kernel in the calling process rather than risk running out of memory."""
    size = 8 if out.dtype == np.float64 else 4
    if kernel == "conv_forward":
        working = out.size  # the sums
    elif kernel == "backprop_input":
        working = out.size * b.shape[3]  # a sum per m
    else:  # x per channel k, and a group of chunks' terms and the x values they read (_backprop_filter)
        fh, fw, _, _ = out.shape
        row_terms = fh * fw * -(-b.shape[2] // _LANES) * _LANES * b.shape[3]
        working = a.size * (b.shape[3] // a.shape[3]) + max(_TERMS_BYTES // size, row_terms)
    return (a.size + b.size + 3 * working) * size <= memory_limit_bytes() // 2


def _forward(x: np.ndarray, filt: np.ndarray, shape: tuple, attrs: tuple) -> np.ndarray:
    batch, out_h, out_w, _ = shape
    fh, fw, chans, mult = filt.shape
    sums = np.zeros((batch, out_h, out_w, chans, mult), x.dtype)
    for ky, kx, (out_rows, out_cols), (in_rows, in_cols) in _taps(fh, fw, x.shape[1:3], (out_h, out_w), *attrs):
        sums[:, out_rows, out_cols] += x[:, in_rows, in_cols, :, None] * filt[ky, kx]
    return sums.reshape(shape)


def _backprop_input(dy: np.ndarray, filt: np.ndarray, shape: tuple, attrs: tuple) -> np.ndarray:
    batch, in_h, in_w, chans = shape
    fh, fw, _, mult = filt.shape
    dy = dy.reshape(*dy.shape[:3], chans, mult)
    sums = np.zeros((batch, in_h, in_w, chans, mult), dy.dtype)
    for ky, kx, (out_rows, out_cols), (in_rows, in_cols) in _taps(fh, fw, (in_h, in_w), dy.shape[1:3], *attrs):
        sums[:, in_rows, in_cols] += dy[:, out_rows, out_cols] * filt[ky, kx]
    total = sums[..., 0]
    for m in range(1, mult):
        total = total + sums[..., m]
    return total


def _backprop_filter(x: np.ndarray, dy: np.ndarray, shape: tuple, attrs: tuple) -> np.ndarray:
    fh, fw, chans, mult = shape
    stride_h, stride_w, dil_h, dil_w, pad_top, pad_left = attrs
    batch, in_h, in_w, _ = x.shape
    _, out_h, out_w, width = dy.shape
    x = np.repeat(x, mult, axis=3)  # channel k = c*M + m reads x channel c
    # per tap column kx: the dy columns whose x column is inside x, and those x columns
    column_spans = [_tap_span(kx, in_w, out_w, stride_w, dil_w, pad_left) for kx in range(fw)]
    blocks = -(-out_w // _LANES)
    rows = batch * out_h
    chunks = _filter_chunks(rows, out_w)
    starts, stops = np.arange(chunks) * rows // chunks, np.arange(1, chunks + 1) * rows // chunks
    # Each chunk's lanes are a running sum over its rows, then their blocks of _LANES columns, in
    # order; the chunks are independent, so a step adds the same row and block of every chunk
    # at once (a chunk with fewer rows adds -0 terms, which change no sum), as many chunks at a
    # time as _TERMS_BYTES of one row's terms allow.
    together = max(1, _TERMS_BYTES // (blocks * fh * fw * _LANES * width * x.itemsize))
    chunk_sums = []
    for first in range(0, chunks, together):
        group_starts, group_stops = starts[first:first + together], stops[first:first + together]
        lanes = np.zeros((group_starts.size, fh, fw, _LANES, width), x.dtype)
        for step in range(int((group_stops - group_starts).max())):
            live = group_starts + step < group_stops
            terms = _filter_terms(x, dy, np.minimum(group_starts + step, group_stops - 1), live, column_spans,
                                  (fh, stride_h, dil_h, pad_top), blocks)
            for block in range(blocks):
                lanes += terms[:, block]
        for lanes_of_chunk in lanes:
            chunk_sum = lanes_of_chunk[:, :, 0]
            for lane in range(1, _LANES):
                chunk_sum = chunk_sum + lanes_of_chunk[:, :, lane]
            chunk_sums.append(chunk_sum)
    total = chunk_sums[0]
    for chunk_sum in chunk_sums[1:]:
        total = total + chunk_sum
    return total.reshape(shape)


def _filter_terms(x: np.ndarray, dy: np.ndarray, rows: np.ndarray, live: np.ndarray, column_spans: list,
                  vertical: tuple[int, int, int, int], blocks: int) -> np.ndarray:
    """The filter gradient's terms of dy ``rows`` (flat ``image * OH + oy``), one per chunk, as
    ``[row, block, ky, kx, lane, k]``: ``dy * x`` where the tap reads x, -0 (no term) where it
    reads padding, past the row's end, or for a row that is not ``live``."""
    fh, stride_h, dil_h, pad_top = vertical
    in_h = x.shape[1]
    _, out_h, _, width = dy.shape
    image, oy = np.divmod(rows, out_h)
    iy = oy[:, None] * stride_h - pad_top + np.arange(fh)[None, :] * dil_h  # [row, ky]
    rows_inside = ((iy >= 0) & (iy < in_h) & live[:, None])[:, :, None, None]
    x_rows = x[image[:, None], np.clip(iy, 0, in_h - 1)]  # [row, ky, ix, k]
    dy_rows = dy[image, oy][:, None]  # [row, 1, ox, k]
    terms = np.full((rows.size, fh, len(column_spans), blocks * _LANES, width), -0.0, x.dtype)
    for kx, span in enumerate(column_spans):
        if span is not None:
            out_columns, in_columns = span
            np.multiply(dy_rows[:, :, out_columns], x_rows[:, :, in_columns], out=terms[:, :, kx, out_columns],
                        where=rows_inside)
    return terms.reshape(rows.size, fh, len(column_spans), blocks, _LANES, width).transpose(0, 3, 1, 2, 4, 5)


_SUMS = {"conv_forward": _forward, "backprop_input": _backprop_input, "backprop_filter": _backprop_filter}
