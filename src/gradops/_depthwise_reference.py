"""Reference backend of the depthwise family (SPEC 5.4): one strided multiply-accumulate per filter
tap over NHWC-indexed views, in float64, rounded once to the output type (SPEC 5.6)."""

from __future__ import annotations

from typing import Callable

import ml_dtypes
import numpy as np

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def _tap_span(tap: int, in_size: int, out_size: int, stride: int, dilation: int,
              pad_before: int) -> tuple[slice, slice] | None:
    """The output positions ``o`` that filter tap ``tap`` connects to an input position
    ``i = o*stride - pad_before + tap*dilation`` inside ``[0, in_size)`` (SPEC 5.4), as an output
    slice and the matching strided input slice; None if every such input is padding."""
    offset = tap * dilation - pad_before
    first = max(0, -(offset // stride))  # ceil(-offset / stride)
    last = min(out_size - 1, (in_size - 1 - offset) // stride)
    if last < first:
        return None
    start = first * stride + offset
    return slice(first, last + 1), slice(start, start + (last - first) * stride + 1, stride)


def _taps(filter_height: int, filter_width: int, in_hw: tuple[int, int], out_hw: tuple[int, int],
          stride_h: int, stride_w: int, dil_h: int, dil_w: int, pad_top: int, pad_left: int):
    """Yield ``(ky, kx, (out_rows, out_cols), (in_rows, in_cols))`` for every tap that touches
    the input."""
    for ky in range(filter_height):
        rows = _tap_span(ky, in_hw[0], out_hw[0], stride_h, dil_h, pad_top)
        if rows is None:
            continue
        for kx in range(filter_width):
            cols = _tap_span(kx, in_hw[1], out_hw[1], stride_w, dil_w, pad_left)
            if cols is not None:
                yield ky, kx, (rows[0], cols[0]), (rows[1], cols[1])


def round_once(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float64 -> ``dtype`` with a single rounding to nearest even (SPEC 5.6).

    NumPy rounds float64 to float16 and float32 directly, but ml_dtypes converts float64 to
    bfloat16 through float32 (two roundings). So bfloat16 goes through float32 rounded to odd,
    which has enough spare bits to make the final rounding exact (Boldo and Melquiond, 2008).
    """
    if dtype != BFLOAT16:
        return values.astype(dtype)
    narrow = values.astype(np.float32)
    inexact = narrow != values
    away_from_zero = inexact & (np.abs(narrow) > np.abs(values))
    # Sign-magnitude bits: subtracting one moves toward zero (truncation); then force the last bit odd.
    bits = (narrow.view(np.uint32) - away_from_zero.astype(np.uint32)) | inexact.astype(np.uint32)
    return bits.view(np.float32).astype(BFLOAT16)


def _as_float64(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array, dtype=np.float64)


def _reference_conv_forward(x: np.ndarray, filt: np.ndarray, out: np.ndarray, stride_h: int, stride_w: int,
                            dil_h: int, dil_w: int, pad_top: int, pad_left: int) -> None:
    batch, height, width, channels = x.shape
    filter_height, filter_width, _, multiplier = filt.shape
    _, out_h, out_w, _ = out.shape
    x64, f64 = _as_float64(x), _as_float64(filt)
    acc = np.zeros((batch, out_h, out_w, channels, multiplier))
    for ky, kx, (out_rows, out_cols), (in_rows, in_cols) in _taps(
            filter_height, filter_width, (height, width), (out_h, out_w), stride_h, stride_w, dil_h, dil_w,
            pad_top, pad_left):
        acc[:, out_rows, out_cols] += x64[:, in_rows, in_cols, :, None] * f64[ky, kx]
    out[...] = round_once(acc.reshape(out.shape), out.dtype)


def _reference_backprop_input(dy: np.ndarray, filt: np.ndarray, out: np.ndarray, stride_h: int, stride_w: int,
                              dil_h: int, dil_w: int, pad_top: int, pad_left: int) -> None:
    batch, height, width, channels = out.shape
    filter_height, filter_width, _, multiplier = filt.shape
    _, out_h, out_w, _ = dy.shape
    dy64, f64 = _as_float64(dy).reshape(batch, out_h, out_w, channels, multiplier), _as_float64(filt)
    acc = np.zeros(out.shape)
    for ky, kx, (out_rows, out_cols), (in_rows, in_cols) in _taps(
            filter_height, filter_width, (height, width), (out_h, out_w), stride_h, stride_w, dil_h, dil_w,
            pad_top, pad_left):
        # Within one tap distinct outputs hit distinct inputs, so += on the strided view is exact.
        acc[:, in_rows, in_cols] += np.einsum("nhwcm,cm->nhwc", dy64[:, out_rows, out_cols], f64[ky, kx])
    out[...] = round_once(acc, out.dtype)


def _reference_backprop_filter(x: np.ndarray, dy: np.ndarray, out: np.ndarray, stride_h: int, stride_w: int,
                               dil_h: int, dil_w: int, pad_top: int, pad_left: int) -> None:
    batch, height, width, channels = x.shape
    filter_height, filter_width, _, multiplier = out.shape
    _, out_h, out_w, _ = dy.shape
    x64, dy64 = _as_float64(x), _as_float64(dy).reshape(batch, out_h, out_w, channels, multiplier)
    acc = np.zeros(out.shape)
    for ky, kx, (out_rows, out_cols), (in_rows, in_cols) in _taps(
            filter_height, filter_width, (height, width), (out_h, out_w), stride_h, stride_w, dil_h, dil_w,
            pad_top, pad_left):
        acc[ky, kx] = np.einsum("nhwc,nhwcm->cm", x64[:, in_rows, in_cols], dy64[:, out_rows, out_cols])
    out[...] = round_once(acc, out.dtype)


REFERENCE_KERNELS: dict[str, Callable[..., None]] = {
    "conv_forward": _reference_conv_forward,
    "backprop_input": _reference_backprop_input,
    "backprop_filter": _reference_backprop_filter,
}


# Runs of calls that need no kernel, and of the reference kernels: ``run(a, b, out)`` on NHWC
# views, as the descriptors and the fast entry points prepare them.

def no_run(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """An empty output needs nothing."""


def zeros_run(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """A sum over no taps: an empty operand, or taps that all read padding."""
    out[...] = 0


def reference_run(kernel: Callable[..., None], attrs: tuple, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """``kernel`` (one of ``REFERENCE_KERNELS``) with the attributes bound first (``functools.partial``)."""
    kernel(a, b, out, *attrs)

