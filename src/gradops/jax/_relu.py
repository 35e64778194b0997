"""``gradops.jax.relu``: DirectML ``ACTIVATION_RELU`` with ``ACTIVATION_RELU_GRAD`` as its gradient.

Both are selects (SPEC 4.2, 4.3): ``y = x > 0 ? x : +0`` and ``dx = x > 0 ? dy : +0``. They
agree with ``jax.nn.relu`` and its gradient everywhere except where JAX's own choices differ:
``jax.nn.relu`` keeps NaN (gradops gives +0), and its gradient at ``x = 0`` is 0 as here.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Any, Callable

import jax
import numpy as np

from .._backend import resolve_backend
from ..errors import DataTypeError
from ..relu import relu as numpy_relu
from ..relu import relu_grad as numpy_relu_grad
from ._host import BFLOAT16, call, check_array, view

__all__ = ["relu"]

_FLOAT_TYPES = (np.dtype(np.float32), np.dtype(np.float16), BFLOAT16)
# Integer ReLU has no gradient to define (JAX differentiates only inexact types).
_INT_TYPES = (np.dtype(np.int32), np.dtype(np.int16), np.dtype(np.int8))


def relu(x: Any, *, backend: str | None = None) -> jax.Array:
    """``x > 0 ? x : +0`` element-wise, differentiable in ``x`` (float types).

    ``x``: float32, float16, bfloat16 (computed in float32: exact, since ReLU is a select),
    int32, int16 or int8; any shape. ``backend``: gradops' backend.
    """
    check_array("x", x)
    dtype = np.dtype(x.dtype)
    if dtype not in _FLOAT_TYPES + _INT_TYPES:
        raise DataTypeError.expected("x.dtype", "float32, float16, bfloat16, int32, int16 or int8 (gradops' ReLU "
                                     "has no float64)", str(dtype))
    backend = resolve_backend(backend)
    if x.size == 0:
        return x
    if dtype in _INT_TYPES:
        return _forward(backend, x)
    if dtype == BFLOAT16:
        return _differentiable(backend)(x.astype(np.float32)).astype(BFLOAT16)
    return _differentiable(backend)(x)


def _forward(backend: str, x: Any) -> jax.Array:
    # broadcast_all: under vmap every operand has the full batch, so element-wise calls need no loop.
    return call(partial(_relu_host, backend), x.shape, x.dtype, x, vmap_method="broadcast_all")


@lru_cache(maxsize=None)
def _differentiable(backend: str) -> Callable[[Any], jax.Array]:
    """ReLU with RELU_GRAD as a ``jax.custom_vjp`` function; the residual is the input."""
    @jax.custom_vjp
    def relu_op(x: Any) -> jax.Array:
        return _forward(backend, x)

    def relu_forward(x: Any) -> tuple[jax.Array, Any]:
        return _forward(backend, x), x

    def relu_backward(x: Any, dy: Any) -> tuple[jax.Array]:
        return (call(partial(_relu_grad_host, backend), x.shape, x.dtype, x, dy, vmap_method="broadcast_all"),)

    relu_op.defvjp(relu_forward, relu_backward)
    return relu_op


def _relu_host(backend: str, out: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    # gradops' ReLU takes ranks 1..8: element-wise, so any shape runs flat
    flat = numpy_relu(x.reshape(-1), backend=backend, out=view(out, (x.size,)))
    return flat.reshape(x.shape)


def _relu_grad_host(backend: str, out: np.ndarray | None, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    flat = numpy_relu_grad(x.reshape(-1), dy.reshape(-1), backend=backend, out=view(out, (x.size,)))
    return flat.reshape(x.shape)
