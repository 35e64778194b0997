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

from typing import Any, Callable, Sequence

import numpy as np

from ._arrays import allocate_output, check_disjoint, check_input, output_allocator, prepare_out
from ._backend import resolve_backend
from ._memo import find_run, remember
from ._resample_desc import (OPS, Resample1Desc, Resample2Desc, ResampleDesc, ResampleGrad1Desc,
                             ResampleGradDesc)
# The names other modules and the tests reach through gradops.resample (layers: _resample_params,
# _resample_reference, _resample_desc).
from ._resample_params import (_NUMPY_FIELDS, _PLAN_CACHE, _RESAMPLE, _RESAMPLE1, _RESAMPLE2, _RESAMPLE_GRAD,
                               _RESAMPLE_GRAD1, OFFSET_CONVENTIONS, RESAMPLE_DTYPES, AxisDirection,
                               InterpolationMode, _cached_axis_taps, _float32_values, _Op, _Plan, _plan, _sizes,
                               resample_grad_params_from_forward)
from ._resample_reference import prepare_dispatch

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
    return _call(_RESAMPLE, x, output_sizes, out, backend, mode=mode, scales=scales)


def resample1(x: np.ndarray, output_sizes: Sequence[int], *, mode: Any = "nearest",
              scales: Sequence[float] | None = None, input_pixel_offsets: Sequence[float] | None = None,
              output_pixel_offsets: Sequence[float] | None = None, out: np.ndarray | None = None,
              backend: str | None = None) -> np.ndarray:
    """``DML_RESAMPLE1``: 4-D resample with per-axis scales and pixel offsets (SPEC 3.2/3.3).

    Nearest uses ``floor(x + 0.5)`` (ties go to the larger index). Offsets default to the
    half-pixel grid (input 0.5, output -0.5), scales to ``fl32(output_sizes / x.shape)``.
    """
    return _call(_RESAMPLE1, x, output_sizes, out, backend, mode=mode, scales=scales,
                 input_pixel_offsets=input_pixel_offsets, output_pixel_offsets=output_pixel_offsets)


def resample2(x: np.ndarray, output_sizes: Sequence[int], *, mode: Any = "nearest", rounding_direction: Any = None,
              scales: Sequence[float] | None = None, input_pixel_offsets: Sequence[float] | None = None,
              output_pixel_offsets: Sequence[float] | None = None, out: np.ndarray | None = None,
              backend: str | None = None) -> np.ndarray:
    """``DML_RESAMPLE2``: 1..4-D resample; nearest rounds with ``rounding_direction``
    ("decreasing" = floor, "increasing" = ceil), which nearest mode requires and linear ignores.
    Defaults as :func:`resample1`.
    """
    return _call(_RESAMPLE2, x, output_sizes, out, backend, mode=mode, rounding_direction=rounding_direction,
                 scales=scales, input_pixel_offsets=input_pixel_offsets, output_pixel_offsets=output_pixel_offsets)


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
    return _call(_RESAMPLE_GRAD, dy, input_sizes, out, backend, mode=mode, scales=scales,
                 input_pixel_offsets=input_pixel_offsets, output_pixel_offsets=output_pixel_offsets,
                 offset_convention=offset_convention)


def resample_grad1(dy: np.ndarray, input_sizes: Sequence[int], *, mode: Any = "nearest",
                   rounding_direction: Any = None, scales: Sequence[float] | None = None,
                   input_pixel_offsets: Sequence[float] | None = None,
                   output_pixel_offsets: Sequence[float] | None = None, offset_convention: str = "per-tensor",
                   out: np.ndarray | None = None, backend: str | None = None) -> np.ndarray:
    """``DML_RESAMPLE_GRAD1``: the exact adjoint of RESAMPLE2 (SPEC 3.6), 1..4-D.

    Arguments as :func:`resample_grad`, plus ``rounding_direction`` as in :func:`resample2`.
    With default offsets and scales it is exactly the gradient of :func:`resample2`.
    """
    return _call(_RESAMPLE_GRAD1, dy, input_sizes, out, backend, mode=mode, rounding_direction=rounding_direction,
                 scales=scales, input_pixel_offsets=input_pixel_offsets, output_pixel_offsets=output_pixel_offsets,
                 offset_convention=offset_convention)


# Runs prepared by earlier calls (``_call``), in a table of ``_memo``'s size.
_CALLS: dict = {}


def _call(op: _Op, source: Any, sizes: Any, out: Any, backend: str | None, **parameters: Any) -> np.ndarray:
    """``op`` on ``source`` (``dy`` of a gradient, else ``x``) with ``sizes`` (``input_sizes`` of a
    gradient, else ``output_sizes``) and the op's other ``parameters``, keyword by keyword, through
    the run prepared by the first call with the same arguments, layouts and backend (``_prepare``;
    ``_memo.find_run`` says what the key holds), as depthwise's calls. The run checks on every call
    what the addresses decide (an ``out`` overlapping ``source``). A call whose preparation raises
    keeps nothing."""
    key, run = find_run(_CALLS, op, (sizes, *parameters.values()), (source,), out, backend)
    if run is None:
        run, source, out = _prepare(op, source, sizes, out, backend, parameters)
        if key is not None:
            remember(_CALLS, key, run)
    return run(source, out)


def _prepare(op: _Op, source: Any, sizes: Any, out: Any, backend: str | None,
             parameters: dict) -> tuple[Callable[[np.ndarray, np.ndarray | None], np.ndarray], np.ndarray, np.ndarray]:
    """Check a call (SPEC 3.1); return the run of calls like it, its source as an array and its
    output (``out`` checked, or a fresh one)."""
    gradient = op.gradient
    name, size_field = ("dy", "input_sizes") if gradient else ("x", "output_sizes")
    source = check_input(name, source, dtypes=RESAMPLE_DTYPES, ranks=op.ranks)
    sizes = _sizes(size_field, sizes, source.ndim, f"one per axis of {name}")
    forward_in, forward_out = (sizes, source.shape) if gradient else (source.shape, sizes)
    plan = _plan(op, forward_in, forward_out, _NUMPY_FIELDS, source.itemsize, **parameters)
    shape, dtype = (plan.forward_in if gradient else plan.forward_out), source.dtype
    # The key tells fresh calls from out= calls: only a run of fresh ones allocates, with the
    # allocator that makes this call's output too.
    allocate = output_allocator(size_field, shape, dtype, source) if out is None else None
    out = allocate() if allocate else prepare_out(out, shape=shape, dtype=dtype, inputs={name: source},
                                                  size_field=size_field)
    compute = prepare_dispatch(source, out, plan, resolve_backend(backend), gradient=gradient)

    def run(source: np.ndarray, out: np.ndarray | None) -> np.ndarray:
        if out is None:
            out = allocate()
        else:
            check_disjoint(out, {name: source})
        compute(source, out)
        return out
    return run, source, out


def run_plan(source: np.ndarray, plan: _Plan, backend: str | None, *, gradient: bool,
             out: np.ndarray | None = None) -> np.ndarray:
    """``plan``'s op on ``source`` into ``out`` (default: a fresh output), with nothing prepared or
    checked (what ``gradops.dask``'s block tasks run, on arrays and a plan checked when the graph
    was built, into outputs they made)."""
    if out is None:
        shape = plan.forward_in if gradient else plan.forward_out
        out = allocate_output("input_sizes" if gradient else "output_sizes", shape, source.dtype, source)
    prepare_dispatch(source, out, plan, resolve_backend(backend), gradient=gradient)(source, out)
    return out
