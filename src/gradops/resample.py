"""Resample family: DML_RESAMPLE, RESAMPLE1, RESAMPLE2, RESAMPLE_GRAD and RESAMPLE_GRAD1 (SPEC 3).

Every operator is linear and separable. Along each axis, forward output index ``o`` reads the
float32 input coordinate ``x = (o - OutputPixelOffset) / Scale - InputPixelOffset`` (SPEC 3.2)
and takes one tap (nearest, SPEC 3.3) or two (linear, SPEC 3.4) from
:func:`gradops._resample_plan.axis_taps`. An N-D tap is the product of one tap per axis.
The GRAD ops return the exact adjoint ``dX = J^T dY`` of their forward op (SPEC 3.6).

Nearest rounding rules: RESAMPLE, RESAMPLE1 and RESAMPLE_GRAD use ``floor(x + 0.5)`` (ties go
up); RESAMPLE2 and RESAMPLE_GRAD1 use ``floor`` (DECREASING) or ``ceil`` (INCREASING).

GRAD offsets [DECISION, SPEC 0.5 / 3.6]: by default ("per-tensor") a GRAD op's
``InputPixelOffsets`` belong to its ``InputGradientTensor`` (forward output space) and its
``OutputPixelOffsets`` to ``OutputGradientTensor`` (forward input space), so the gradient of a
forward op with offsets (ipo, opo) is called with (opo, ipo);
:func:`resample_grad_params_from_forward` does the swap. ``offset_convention="doc-literal"``
reads the GRAD offsets as the forward op's instead.

Numerics (SPEC 3.7): coordinates in float32; the reference backend accumulates in float64 and
rounds once to the output type (float32 or float16).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ._arrays import check_input, prepare_out
from ._backend import resolve_backend
from ._resample_desc import (OPS, Resample1Desc, Resample2Desc, ResampleDesc, ResampleGrad1Desc,
                             ResampleGradDesc)
# The names other modules and the tests reach through gradops.resample (layers: _resample_params,
# _resample_reference, _resample_desc).
from ._resample_params import (_NUMPY_FIELDS, _PLAN_CACHE, _RESAMPLE, _RESAMPLE1, _RESAMPLE2, _RESAMPLE_GRAD,
                               _RESAMPLE_GRAD1, OFFSET_CONVENTIONS, RESAMPLE_DTYPES, AxisDirection,
                               InterpolationMode, _cached_axis_taps, _float32_values, _Plan, _plan, _sizes,
                               resample_grad_params_from_forward)
from ._resample_reference import _dispatch

__all__ = [
    "InterpolationMode", "AxisDirection", "OFFSET_CONVENTIONS",
    "resample", "resample1", "resample2", "resample_grad", "resample_grad1",
    "resample_grad_params_from_forward",
    "ResampleDesc", "Resample1Desc", "Resample2Desc", "ResampleGradDesc", "ResampleGrad1Desc",
]


# --- NumPy functions -------------------------------------------------------------------------

def resample(x: np.ndarray, output_sizes: Sequence[int], *, mode: Any = "nearest",
             scales: Sequence[float] | None = None, out: np.ndarray | None = None,
             backend: str | None = None) -> np.ndarray:
    """``DML_RESAMPLE`` (v0): RESAMPLE1 on the half-pixel grid, nearest rule ``floor(x + 0.5)``.

    ``x``: float32 or float16, 4-D, any strides. ``output_sizes``: the output shape (any axis
    may change). ``scales`` default to ``fl32(output_sizes / x.shape)`` per axis.
    """
    x = check_input("x", x, dtypes=RESAMPLE_DTYPES, ranks=_RESAMPLE.ranks)
    output_sizes = _sizes("output_sizes", output_sizes, x.ndim, "one per axis of x")
    plan = _plan(_RESAMPLE, x.shape, output_sizes, _NUMPY_FIELDS, x.itemsize, mode=mode, scales=scales)
    return _run(x, plan, out, backend, gradient=False)


def resample1(x: np.ndarray, output_sizes: Sequence[int], *, mode: Any = "nearest",
              scales: Sequence[float] | None = None, input_pixel_offsets: Sequence[float] | None = None,
              output_pixel_offsets: Sequence[float] | None = None, out: np.ndarray | None = None,
              backend: str | None = None) -> np.ndarray:
    """``DML_RESAMPLE1``: 4-D resample with per-axis scales and pixel offsets (SPEC 3.2/3.3).

    Nearest uses ``floor(x + 0.5)`` (ties go to the larger index). Offsets default to the
    half-pixel grid (input 0.5, output -0.5), scales to ``fl32(output_sizes / x.shape)``.
    """
    x = check_input("x", x, dtypes=RESAMPLE_DTYPES, ranks=_RESAMPLE1.ranks)
    output_sizes = _sizes("output_sizes", output_sizes, x.ndim, "one per axis of x")
    plan = _plan(_RESAMPLE1, x.shape, output_sizes, _NUMPY_FIELDS, x.itemsize, mode=mode, scales=scales,
                 input_pixel_offsets=input_pixel_offsets, output_pixel_offsets=output_pixel_offsets)
    return _run(x, plan, out, backend, gradient=False)


def resample2(x: np.ndarray, output_sizes: Sequence[int], *, mode: Any = "nearest", rounding_direction: Any = None,
              scales: Sequence[float] | None = None, input_pixel_offsets: Sequence[float] | None = None,
              output_pixel_offsets: Sequence[float] | None = None, out: np.ndarray | None = None,
              backend: str | None = None) -> np.ndarray:
    """``DML_RESAMPLE2``: 1..4-D resample; nearest rounds with ``rounding_direction``
    ("decreasing" = floor, "increasing" = ceil), which nearest mode requires and linear ignores.
    Defaults as :func:`resample1`.
    """
    x = check_input("x", x, dtypes=RESAMPLE_DTYPES, ranks=_RESAMPLE2.ranks)
    output_sizes = _sizes("output_sizes", output_sizes, x.ndim, "one per axis of x")
    plan = _plan(_RESAMPLE2, x.shape, output_sizes, _NUMPY_FIELDS, x.itemsize, mode=mode,
                 rounding_direction=rounding_direction, scales=scales, input_pixel_offsets=input_pixel_offsets, output_pixel_offsets=output_pixel_offsets)
    return _run(x, plan, out, backend, gradient=False)


def resample_grad(dy: np.ndarray, input_sizes: Sequence[int], *, mode: Any = "nearest",
                  scales: Sequence[float] | None = None, input_pixel_offsets: Sequence[float] | None = None,
                  output_pixel_offsets: Sequence[float] | None = None, offset_convention: str = "per-tensor",
                  out: np.ndarray | None = None, backend: str | None = None) -> np.ndarray:
    """``DML_RESAMPLE_GRAD``: the exact adjoint of RESAMPLE1 (SPEC 3.6), 4-D.

    ``dy`` has the forward output's shape; ``input_sizes`` is the forward input's shape, i.e. the
    shape of the returned gradient. ``scales`` are the forward scales (default
    ``fl32(dy.shape / input_sizes)``). The offsets are the GRAD op's own (SPEC 3.6, per-tensor):
    ``input_pixel_offsets`` = the forward output offsets, ``output_pixel_offsets`` = the forward
    input offsets. They default to the half-pixel grid (-0.5, 0.5), so with default arguments
    this is exactly the gradient of :func:`resample1`. With ``offset_convention="doc-literal"``
    the offsets are read as the forward op's (defaults 0.5, -0.5).
    """
    dy = check_input("dy", dy, dtypes=RESAMPLE_DTYPES, ranks=_RESAMPLE_GRAD.ranks)
    input_sizes = _sizes("input_sizes", input_sizes, dy.ndim, "one per axis of dy")
    plan = _plan(_RESAMPLE_GRAD, input_sizes, dy.shape, _NUMPY_FIELDS, dy.itemsize, mode=mode, scales=scales,
                 input_pixel_offsets=input_pixel_offsets, output_pixel_offsets=output_pixel_offsets,
                 offset_convention=offset_convention)
    return _run(dy, plan, out, backend, gradient=True)


def resample_grad1(dy: np.ndarray, input_sizes: Sequence[int], *, mode: Any = "nearest",
                   rounding_direction: Any = None, scales: Sequence[float] | None = None,
                   input_pixel_offsets: Sequence[float] | None = None,
                   output_pixel_offsets: Sequence[float] | None = None, offset_convention: str = "per-tensor",
                   out: np.ndarray | None = None, backend: str | None = None) -> np.ndarray:
    """``DML_RESAMPLE_GRAD1``: the exact adjoint of RESAMPLE2 (SPEC 3.6), 1..4-D.

    Arguments as :func:`resample_grad`, plus ``rounding_direction`` as in :func:`resample2`.
    With default offsets and scales it is exactly the gradient of :func:`resample2`.
    """
    dy = check_input("dy", dy, dtypes=RESAMPLE_DTYPES, ranks=_RESAMPLE_GRAD1.ranks)
    input_sizes = _sizes("input_sizes", input_sizes, dy.ndim, "one per axis of dy")
    plan = _plan(_RESAMPLE_GRAD1, input_sizes, dy.shape, _NUMPY_FIELDS, dy.itemsize, mode=mode,
                 rounding_direction=rounding_direction, scales=scales, input_pixel_offsets=input_pixel_offsets,
                 output_pixel_offsets=output_pixel_offsets, offset_convention=offset_convention)
    return _run(dy, plan, out, backend, gradient=True)


def _run(source: np.ndarray, plan: _Plan, out: np.ndarray | None, backend: str | None, *,
         gradient: bool) -> np.ndarray:
    name = "dy" if gradient else "x"
    shape = plan.forward_in if gradient else plan.forward_out
    out = prepare_out(out, shape=shape, dtype=source.dtype, inputs={name: source}, like=source,
                      size_field="input_sizes" if gradient else "output_sizes")
    _dispatch(source, out, plan, resolve_backend(backend), gradient=gradient)
    return out
