"""Per-axis tap tables of the DirectML resample family (SPEC 3.2-3.4): the math every backend shares.

Resampling is separable: along each axis, forward output index ``o`` reads at most two input
indices with float32 weights, and an N-D tap is the product of one tap per axis. The tables
are computed once per descriptor (DirectML's "compile once, dispatch many") and used by the
reference (forward gather, gradient scatter) and by the fast kernels (forward gather, gradient
gather through the transposed table).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

# Nearest-neighbour rounding rules (SPEC 3.3):
#   "half_up": floor(x + 0.5), RESAMPLE / RESAMPLE1 / RESAMPLE_GRAD (ties go to the larger index)
#   "floor":   RESAMPLE2 / GRAD1 with DML_AXIS_DIRECTION_DECREASING
#   "ceil":    RESAMPLE2 / GRAD1 with DML_AXIS_DIRECTION_INCREASING
Rule = Literal["half_up", "floor", "ceil"]
Mode = Literal["nearest", "linear"]


def sample_coordinates(n_out: int, scale: float, input_pixel_offset: float,
                       output_pixel_offset: float) -> np.ndarray:
    """Continuous input coordinate read by each forward output index, SPEC 3.2 [DECISION]:
    ``x = fl32(fl32(fl32(o - opo) / S) - ipo)``, IEEE float32 with one rounding per step and a
    true (correctly rounded) division, never a reciprocal."""
    o = np.arange(n_out, dtype=np.float32)
    t = o - np.float32(output_pixel_offset)
    with np.errstate(over="ignore"):  # a tiny Scale may overflow to inf; the clamp handles it
        t = t / np.float32(scale)
    return t - np.float32(input_pixel_offset)


def axis_taps(n_in: int, n_out: int, scale: float, input_pixel_offset: float, output_pixel_offset: float,
              mode: Mode, rule: Rule) -> tuple[np.ndarray, np.ndarray]:
    """Forward taps of one axis: ``index`` int64[n_out, 2] and ``weight`` float32[n_out, 2].

    Nearest (SPEC 3.3): one tap of weight 1 at the rounded, clamped index; the second tap has
    weight 0. Linear (SPEC 3.4): clamp x into [0, n_in-1], ``i0 = floor(x)``,
    ``i1 = min(i0+1, n_in-1)``, ``w1 = x - i0`` (exact), ``w0 = fl32(1 - w1)``.
    A tap of weight exactly 0 is not a tap [DECISION 3.4]: consumers skip it.
    """
    x = sample_coordinates(n_out, scale, input_pixel_offset, output_pixel_offset)
    last = np.float32(n_in - 1)
    index = np.zeros((n_out, 2), dtype=np.int64)
    weight = np.zeros((n_out, 2), dtype=np.float32)
    if mode == "nearest":
        if rule == "half_up":
            rounded = np.floor(x + np.float32(0.5))
        elif rule == "floor":
            rounded = np.floor(x)
        else:
            rounded = np.ceil(x)
        index[:, 0] = np.clip(rounded, 0, last).astype(np.int64)
        index[:, 1] = index[:, 0]
        weight[:, 0] = 1
        return index, weight
    xc = np.clip(x, np.float32(0), last)
    i0 = np.floor(xc)
    w1 = xc - i0
    index[:, 0] = i0.astype(np.int64)
    index[:, 1] = np.minimum(index[:, 0] + 1, n_in - 1)
    weight[:, 0] = np.float32(1) - w1
    weight[:, 1] = w1
    return index, weight


def transpose_taps(index: np.ndarray, weight: np.ndarray, n_in: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The gradient's gather table for one axis, as CSR over input indices.

    Returns ``ptr`` int64[n_in+1], ``out_index`` int64[nnz] and ``out_weight`` float32[nnz]: the
    forward outputs that read input ``i`` are ``out_index[ptr[i]:ptr[i+1]]``, in ascending order,
    with their weights. Zero-weight taps are dropped (SPEC 3.4).
    """
    n_out = index.shape[0]
    outputs = np.repeat(np.arange(n_out, dtype=np.int64), index.shape[1])
    inputs, weights = index.reshape(-1), weight.reshape(-1)
    keep = weights != 0
    outputs, inputs, weights = outputs[keep], inputs[keep], weights[keep]
    order = np.lexsort((outputs, inputs))  # by input index, then output index
    ptr = np.zeros(n_in + 1, dtype=np.int64)
    np.cumsum(np.bincount(inputs, minlength=n_in), out=ptr[1:])
    return ptr, outputs[order], weights[order]


def tap_key(index: np.ndarray, weight: np.ndarray) -> tuple[bytes, bytes]:
    """One axis's taps as bytes (int64 indices, float32 weights): a hashable cache key, the form
    in which the fast backend receives and caches its tables."""
    return (np.ascontiguousarray(index, dtype=np.int64).tobytes(),
            np.ascontiguousarray(weight, dtype=np.float32).tobytes())


def is_selection(taps) -> bool:
    """Whether the per-axis forward taps ``[(index, weight), ...]`` take one source element at
    weight 1 on every axis (nearest, SPEC 3.3): the forward op is then a selection and copies bits."""
    return all(bool(np.all(weight[:, 1] == 0) and np.all(weight[:, 0] == 1)) for _, weight in taps)
