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
from ..._depthwise_reference import _taps
from ..codecs import encode_sums
from .plan import _LANES, _filter_chunks


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
    if kernel == "conv_forward":
        working = out.size  # the sums
    elif kernel == "backprop_input":
        working = out.size * b.shape[3]  # a sum per m
    else:  # x per channel k, and the terms of a dy row
        working = a.size * (b.shape[3] // a.shape[3]) + out.size * (b.shape[2] + _LANES)
    size = 8 if out.dtype == np.float64 else 4
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
    # per tap (ky, kx) and dy column: the x column it reads, and whether that is inside x
    kx, ox = np.arange(fw)[:, None], np.arange(out_w)[None, :]
    columns = ox * stride_w - pad_left + kx * dil_w
    inside = (columns >= 0) & (columns < in_w)
    columns = np.clip(columns, 0, in_w - 1)
    blocks = -(-out_w // _LANES)
    rows = batch * out_h
    chunks = _filter_chunks(rows, out_w)
    terms = np.full((fh, fw, blocks * _LANES, width), -0.0, x.dtype)  # -0: no term
    total = None
    for chunk in range(chunks):
        lanes = np.zeros((fh, fw, _LANES, width), x.dtype)
        for row in range(chunk * rows // chunks, (chunk + 1) * rows // chunks):
            image, oy = divmod(row, out_h)
            terms[...] = -0.0
            for ky in range(fh):
                iy = oy * stride_h - pad_top + ky * dil_h
                if 0 <= iy < in_h:
                    products = dy[image, oy][None] * x[image, iy][columns]  # [kx, ox, k]
                    terms[ky, :, :out_w] = np.where(inside[:, :, None], products, -0.0)
            for block in range(blocks):
                lanes += terms[:, :, block * _LANES:(block + 1) * _LANES]
        chunk_sum = lanes[:, :, 0]
        for lane in range(1, _LANES):
            chunk_sum = chunk_sum + lanes[:, :, lane]
        total = chunk_sum if total is None else total + chunk_sum
    return total.reshape(shape)


_SUMS = {"conv_forward": _forward, "backprop_input": _backprop_input, "backprop_filter": _backprop_filter}
