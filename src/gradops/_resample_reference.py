"""Running a resample plan: the fast kernels, or the reference backend, separable and vectorised
over everything but the axes and the 2 taps, accumulating in float64 and rounding once (SPEC 3.7)."""

from __future__ import annotations

from functools import partial
from typing import Callable

import numpy as np

from ._arrays import require_memory
from ._backend import fast_module
from ._resample_params import Taps, _Plan


_REFERENCE_ARRAYS = 4


def _dispatch(source: np.ndarray, out: np.ndarray, plan: _Plan, backend: str, *, gradient: bool) -> None:
    """Run the forward op (``out = J source``) or its adjoint (``out = J^T source``)."""
    prepare_dispatch(source, out, plan, backend, gradient=gradient)(source, out)


def prepare_dispatch(source: np.ndarray, out: np.ndarray, plan: _Plan, backend: str, *,
                     gradient: bool) -> Callable[[np.ndarray, np.ndarray], None]:
    """What :func:`_dispatch` runs, for every call whose ``source`` and ``out`` have these dtypes,
    shapes and strides: the fast backend's prepared run, or the reference backend."""
    if backend == "fast":
        fast = fast_module("resample")
        if gradient:
            return fast.prepare_backward(source, out, plan.taps, plan.tap_key)
        return fast.prepare_forward(source, out, plan.taps, plan.tap_key, plan.selection)
    return partial(_run_reference, plan=plan, gradient=gradient)


def _run_reference(source: np.ndarray, out: np.ndarray, *, plan: _Plan, gradient: bool) -> None:
    # float64 intermediates: the source's copy, and at most two arrays and a contribution of
    # the larger of source and result alive per axis step
    nbytes = _REFERENCE_ARRAYS * 8 * max(source.size, out.size)
    require_memory("backend", nbytes,
                   lambda: f"the reference backend's float64 intermediates for shapes {source.shape} -> "
                           f"{out.shape} need about {nbytes / 2**30:.3g} GiB (backend='fast' needs none)")
    result = _adjoint_reference(source, plan.taps, out.shape) if gradient else _forward_reference(source, plan.taps)
    np.copyto(out, result)


# --- reference backend: separable, vectorised over everything but the axes and the 2 taps ----

def _is_identity(index: np.ndarray, weight: np.ndarray, n_in: int) -> bool:
    return (index.shape[0] == n_in and bool(np.all(weight[:, 0] == 1)) and not np.any(weight[:, 1])
            and bool(np.array_equal(index[:, 0], np.arange(n_in))))


def _along(vector: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """``vector`` shaped to broadcast along ``axis`` of an ``ndim``-D array."""
    return vector.reshape((-1,) + (1,) * (ndim - 1 - axis))


def _forward_reference(x: np.ndarray, taps: Taps) -> np.ndarray:
    """``Y = J X`` in float64, one axis at a time (the N-D taps are products of axis taps, so the
    same nonzero taps are summed). Axes that shrink go first to keep the intermediates small."""
    y = np.asarray(x, dtype=np.float64)
    order = sorted(range(x.ndim), key=lambda d: taps[d][0].shape[0] / x.shape[d])
    for axis in order:
        index, weight = taps[axis]
        if not _is_identity(index, weight, y.shape[axis]):
            y = _gather_axis(y, axis, index, weight)
    return y


def _gather_axis(y: np.ndarray, axis: int, index: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``result[..., o, ...] = sum_k weight[o, k] * y[..., index[o, k], ...]`` over taps with a
    nonzero weight (SPEC 3.4: a zero-weight tap is not read, so 0 * inf never happens, and an
    input read with weight 1 alone is copied exactly, -0 included)."""
    n_out = index.shape[0]
    result: np.ndarray | None = None
    for k in range(index.shape[1]):
        rows = np.flatnonzero(weight[:, k])
        if rows.size == 0:
            continue
        contribution = np.take(y, index[rows, k], axis=axis)
        if np.any(weight[rows, k] != 1):
            contribution *= _along(weight[rows, k].astype(np.float64), axis, y.ndim)
        selection = (slice(None),) * axis + (rows,)
        if result is None:
            if rows.size == n_out:
                result = contribution
                continue
            shape = list(y.shape)
            shape[axis] = n_out
            result = np.zeros(shape)
            result[selection] = contribution
        else:
            result[selection] += contribution
    assert result is not None, "axis_taps gives every output a first tap of nonzero weight"
    return result


def _adjoint_reference(dy: np.ndarray, taps: Taps, input_sizes: tuple[int, ...]) -> np.ndarray:
    """``dX = J^T dY`` in float64, the transposed 1-D operator applied axis by axis (SPEC 3.6).
    Axes whose gradient shrinks go first."""
    g = dy
    order = sorted(range(dy.ndim), key=lambda d: input_sizes[d] / dy.shape[d])
    for axis in order:
        index, weight = taps[axis]
        if not _is_identity(index, weight, input_sizes[axis]):
            g = _scatter_axis(g, axis, index, weight, input_sizes[axis])
    return np.asarray(g, dtype=np.float64)


def _scatter_axis(g: np.ndarray, axis: int, index: np.ndarray, weight: np.ndarray, n_in: int) -> np.ndarray:
    """``result[..., i, ...] = sum over (o, k) with index[o, k] == i and weight[o, k] != 0 of
    weight[o, k] * g[..., o, ...]``, summed in float64.

    Each tap column ``index[:, k]`` is non-decreasing in ``o`` (every float32 step of the
    coordinate map, the rounding and the clamps are monotone), so the outputs feeding one input
    form a contiguous run and the scatter is a segmented sum (``np.add.reduceat``).
    """
    shape = list(g.shape)
    shape[axis] = n_in
    result = np.zeros(shape)
    for k in range(index.shape[1]):
        rows = np.flatnonzero(weight[:, k])
        if rows.size == 0:
            continue
        targets = index[rows, k]
        contribution = g if rows.size == g.shape[axis] else np.take(g, rows, axis=axis)
        if np.any(weight[rows, k] != 1):
            contribution = contribution * _along(weight[rows, k].astype(np.float64), axis, g.ndim)
        starts = np.flatnonzero(np.concatenate(([True], targets[1:] != targets[:-1])))
        if starts.size < rows.size:
            contribution = np.add.reduceat(contribution, starts, axis=axis, dtype=np.float64)
        result[(slice(None),) * axis + (targets[starts],)] += contribution
    return result
