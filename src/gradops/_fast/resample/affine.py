"""Microkernels of step 2 for NCHW rows (unit size 1): the columns of an affine span, whose
sources are ``q * t + base + k`` (2x up- or downsampling; found by ``taps._affine``), computed by
loops with constant strides that LLVM vectorises (package docstring; SPEC 3.4, 3.7). Padding
slots are masked to -0.0, the exact additive identity (``_masked``), which the direct NHWC
writers use as well.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .codecs import _store


@njit(inline="always")
def _masked(weight, value):
    """One tap read through a padded table: ``weight * value``, or -0.0 (the additive identity)
    for a padding slot of weight 0, so that whatever the padding reads never reaches the sum."""
    return np.float32(-0.0) if weight == 0 else weight * value


@njit(inline="always")
def _masked_sum(weight, value):
    """``_masked`` for pure sums (nearest): ``value``, or -0.0 for a padding slot."""
    return np.float32(-0.0) if weight == 0 else value


@njit(inline="always")
def _affine_span(dst, o, row_sum, weight, t_lo, t_hi, base0, base1, phases, q, slots, zero):
    """Columns ``j = phases * t + p`` of an affine span (see ``taps._affine``):
    ``dst[o + j] = zero + sum over k < slots of weight[k, j] * row_sum[q * t + base_p + k]``.
    Inlined with literal ``phases``, ``q`` and ``slots`` so that LLVM sees constant strides and
    vectorises the loads as interleaved groups."""
    for t in range(t_lo, t_hi):
        for p in range(phases):
            j = np.uint64(phases) * t + np.uint64(p)
            a = np.uint64(q) * t + (base0 if p == 0 else base1)
            total = _masked(weight[0, j], row_sum[a])
            if slots >= 2:
                total += _masked(weight[1, j], row_sum[a + np.uint64(1)])
            if slots == 4:
                total += _masked(weight[2, j], row_sum[a + np.uint64(2)]) \
                    + _masked(weight[3, j], row_sum[a + np.uint64(3)])
            _store(dst, o + j, zero + total)


@njit(inline="always")
def _store_affine(dst, o, row_sum, weight, t_lo, t_hi, base0, base1, phases, slots, zero):
    """``_affine_span`` for the supported shapes: one phase reading every second source column
    (gradient of a 2x upsampling, forward 2x downsampling; two or four slots) or two phases
    reading consecutive ones (gradient of a 2x downsampling, forward 2x upsampling; one, two or
    four slots). The weights double as the padding mask, so nearest sums multiply by them too
    (by 1: exact)."""
    zero = np.float32(zero)
    if phases == 1 and slots == 2:
        _affine_span(dst, o, row_sum, weight, t_lo, t_hi, base0, base1, 1, 2, 2, zero)
    elif phases == 1:
        _affine_span(dst, o, row_sum, weight, t_lo, t_hi, base0, base1, 1, 2, 4, zero)
    elif slots == 1:
        _affine_span(dst, o, row_sum, weight, t_lo, t_hi, base0, base1, 2, 1, 1, zero)
    elif slots == 2:
        _affine_span(dst, o, row_sum, weight, t_lo, t_hi, base0, base1, 2, 1, 2, zero)
    else:
        _affine_span(dst, o, row_sum, weight, t_lo, t_hi, base0, base1, 2, 1, 4, zero)
