"""``gradops.jax.resize``: ``jax.image.resize(x, shape, method, antialias=False)`` (SPEC 6.3).

Every axis whose size changes is resampled, batch and channel axes included, as JAX does:
nearest picks ``floor((o + 0.5) * in / out)``, linear interpolates on the half-pixel grid with
the edge samples clamped. ``DmlResampleParams.from_jax`` gives the DirectML RESAMPLE2 parameters;
the forward op is ``resample2`` and the gradient ``resample_grad1``, its exact adjoint. Axes that
are not resampled are merged (DirectML resamples at most 4 axes, SPEC 3.1), so any rank works as
long as the resampled axes and the runs of unresampled ones between them number at most 4.

Nearest at exact ties, where ``(o + 0.5) * in / out`` is an integer: DirectML's correctly
rounded quotient ``(o + 0.5) / fl32(out / in)`` (SPEC 3.7) can land just below it when ``out / in``
is not a float32 (14 -> 1 reads index 6, not 7), and so can jit-compiled JAX, whose XLA CPU code
multiplies by ``fl32(in * fl32(1 / out))`` instead of dividing (10 -> 25, output 2 reads index 0
where the coordinate is exactly 1; JAX under ``jax.disable_jit()`` reads 1). gradops.jax picks the
exact ``floor((o + 0.5) * in / out)``, the formula of JAX's source: the Scale of a nearest axis is
the float32 nearest ``out / in`` that picks those indices. For the 65280 pairs of different sizes
up to 256, that is ``fl32(out / in)`` for 63949 and the next float32 towards zero for the others.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from typing import Any, Callable, Sequence

import jax
import numpy as np

from .._backend import resolve_backend
from .._resample_plan import axis_taps
from ..conventions import DmlResampleParams, _shape
from ..errors import DataTypeError, ShapeError, UnsupportedError
from ._host import BFLOAT16, call, check_array, each_example, view

__all__ = ["resize"]

# gradops' resample operators take float32 and float16 (SPEC 3.1); bfloat16 runs in float32.
_DTYPES = (np.dtype(np.float32), np.dtype(np.float16), BFLOAT16)
_DML_MAX_AXES = 4
# How many float32 steps from fl32(out / in) a nearest Scale may move to reproduce JAX's picks.
_NEAREST_SCALE_STEPS = 4


@dataclass(frozen=True)
class _Resize:
    """One resize: its DirectML parameters (one axis per axis of ``x``) and shapes."""

    params: DmlResampleParams
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    backend: str

    def folded_params(self, count: int) -> DmlResampleParams:
        """The parameters with one more leading unresampled axis (``count`` vmap examples)."""
        folded = DmlResampleParams.from_jax((count,) + self.input_shape, (count,) + self.output_shape,
                                            self.params.mode)
        return replace(folded, scales=folded.scales[:1] + self.params.scales)


def resize(x: Any, shape: Sequence[int], method: str = "nearest", *, antialias: bool = False,
           backend: str | None = None) -> jax.Array:
    """``jax.image.resize(x, shape, method, antialias=False)``, differentiable in ``x``.

    ``x``: float32, float16 or bfloat16 (computed in float32 and rounded once), any rank.
    ``shape``: the output shape, one size >= 1 per axis. ``method``: ``"nearest"`` or
    ``"linear"`` (also ``"bilinear"``, ``"trilinear"``, which JAX treats alike). ``antialias=True``
    is accepted where it changes nothing (no axis shrinks with ``"linear"``), and raises
    otherwise: DirectML has no antialiased gradient. ``backend``: gradops' backend.
    """
    check_array("x", x)
    dtype = np.dtype(x.dtype)
    if dtype not in _DTYPES:
        raise DataTypeError.expected("x.dtype", "float32, float16 or bfloat16 (gradops' resample operators have "
                                     "no float64 or integer types)", str(dtype))
    if x.ndim == 0 or 0 in x.shape:
        raise ShapeError.expected("x.shape", "at least one axis, every size >= 1 (DirectML sizes are never 0)",
                                  tuple(x.shape))
    output_shape = _shape("shape", shape, ranks=(x.ndim,), what="one size per axis of x")
    params = DmlResampleParams.from_jax(x.shape, output_shape, method, antialias)  # checks method, antialias
    if params.mode == "nearest":
        scales = tuple(_nearest_scale(d, n_in, n_out) if n_in != n_out else scale
                       for d, (n_in, n_out, scale) in enumerate(zip(x.shape, output_shape, params.scales)))
        params = replace(params, scales=scales)
    if _dml_axes(x.shape, output_shape) > _DML_MAX_AXES:
        raise ShapeError("shape", f"DirectML resamples at most {_DML_MAX_AXES} axes (SPEC 3.1), counting each run "
                         f"of unresampled axes as one; {tuple(x.shape)} -> {output_shape} needs "
                         f"{_dml_axes(x.shape, output_shape)}")
    if output_shape == tuple(x.shape):
        return x  # jax.image.resize returns x unchanged too
    op = _differentiable(_Resize(params, tuple(x.shape), output_shape, resolve_backend(backend)))
    if dtype == BFLOAT16:
        return op(x.astype(np.float32)).astype(BFLOAT16)
    return op(x)


def _dml_axes(input_shape: Sequence[int], output_shape: Sequence[int]) -> int:
    """The rank DirectML sees: resampled axes, plus one per run of unresampled axes."""
    count, previous_identity = 0, False
    for n_in, n_out in zip(input_shape, output_shape):
        identity = n_in == n_out
        count += not (identity and previous_identity)
        previous_identity = identity
    return count


@lru_cache(maxsize=1024)
def _nearest_scale(axis: int, n_in: int, n_out: int) -> float:
    """The nearest Scale for one axis that picks the exact ``floor((o + 0.5) * in / out)``."""
    o = np.arange(n_out, dtype=np.int64)
    picks = np.minimum((2 * o + 1) * n_in // (2 * n_out), n_in - 1)
    nearest = np.float32(n_out) / np.float32(n_in)
    candidates = [nearest]
    for direction in (np.float32(0), np.float32(np.inf)):
        scale = nearest
        for _ in range(_NEAREST_SCALE_STEPS):
            scale = np.nextafter(scale, direction)
            candidates.append(scale)
    for scale in sorted(candidates, key=lambda s: abs(float(s) - float(nearest))):
        index, _ = axis_taps(n_in, n_out, float(scale), 0.0, -0.5, "nearest", "floor")
        if np.array_equal(index[:, 0], picks):
            return float(scale)
    raise UnsupportedError(f"shape[{axis}]", f"no DirectML nearest Scale within {_NEAREST_SCALE_STEPS} float32 "
                           f"steps of {n_out}/{n_in} picks floor((o + 0.5) * {n_in} / {n_out}) for every o")


@lru_cache(maxsize=256)
def _differentiable(op: _Resize) -> Callable[[Any], jax.Array]:
    """``op``'s forward resample with its gradient as a ``jax.custom_vjp`` function."""
    @jax.custom_vjp
    def resized(x: Any) -> jax.Array:
        return call(partial(_forward_host, op), op.output_shape, x.dtype, x)

    def resized_forward(x: Any) -> tuple[jax.Array, None]:
        return resized(x), None

    def resized_backward(_: None, dy: Any) -> tuple[jax.Array]:
        return (call(partial(_gradient_host, op), op.input_shape, dy.dtype, dy),)

    resized.defvjp(resized_forward, resized_backward)
    return resized


def _examples(op: _Resize, array: np.ndarray, own_shape: tuple[int, ...]
              ) -> tuple[np.ndarray, DmlResampleParams, tuple[int, ...], tuple[int, ...]] | None:
    """``array`` with its leading ``vmap`` axes folded into one more unresampled axis, with the
    parameters and (input, output) shapes of that call; None when the call would exceed
    DirectML's 4 axes."""
    leading = array.shape[:array.ndim - len(own_shape)]
    if not leading:
        return array, op.params, op.input_shape, op.output_shape
    count = math.prod(leading)
    input_shape, output_shape = (count,) + op.input_shape, (count,) + op.output_shape
    if _dml_axes(input_shape, output_shape) > _DML_MAX_AXES:
        return None
    return array.reshape((count,) + own_shape), op.folded_params(count), input_shape, output_shape


def _forward_host(op: _Resize, out: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    fold = _examples(op, x, op.input_shape)
    if fold is None:
        return each_example(partial(op.params.forward, output_sizes=op.output_shape, backend=op.backend), out,
                            (x,), (len(op.input_shape),), op.output_shape, x.dtype)
    rows, params, _, output_shape = fold
    y = params.forward(rows, output_shape, backend=op.backend, out=view(out, output_shape))
    return y.reshape(x.shape[:x.ndim - len(op.input_shape)] + op.output_shape)


def _gradient_host(op: _Resize, out: np.ndarray | None, dy: np.ndarray) -> np.ndarray:
    fold = _examples(op, dy, op.output_shape)
    if fold is None:
        return each_example(partial(op.params.gradient, input_sizes=op.input_shape, backend=op.backend), out,
                            (dy,), (len(op.output_shape),), op.input_shape, dy.dtype)
    rows, params, input_shape, _ = fold
    dx = params.gradient(rows, input_shape, backend=op.backend, out=view(out, input_shape))
    return dx.reshape(dy.shape[:dy.ndim - len(op.output_shape)] + op.input_shape)
