"""Running gradops' NumPy operators inside JAX programs: the part the three ops share.

Every op is a ``jax.custom_vjp`` whose forward and backward each call one gradops operator through
``jax.pure_callback``. The callback gets JAX's host buffers (zero-copy NumPy views on CPU) and
returns a NumPy array that XLA copies into its own buffer. XLA treats the callback as pure: under
``jit`` a callback whose result is unused (e.g. the filter gradient when only the input gradient
is needed) is removed, and none is ever run twice for the same values.

``vmap``: the callbacks use ``vmap_method="expand_dims"`` (or ``"broadcast_all"`` for element-wise
ops): each operand arrives with one leading axis per ``vmap`` level, of size 1 where that operand is
not batched. An op whose leading axes can be folded into an axis it already loops over (the
depthwise batch axis, an unresampled resize axis) makes one gradops call; otherwise
:func:`each_example` makes one call per example.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import jax
import ml_dtypes
import numpy as np

from ..errors import DataTypeError

__all__ = ["BFLOAT16", "call", "check_array", "each_example", "folded", "leading_shape", "to_host"]

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def check_array(name: str, value: Any) -> None:
    """``value`` is a JAX array, a tracer of one, or a NumPy array. Lists and scalars are refused,
    as gradops' NumPy functions refuse them: they carry no dtype."""
    if not isinstance(value, (jax.Array, np.ndarray)):
        raise DataTypeError.expected(name, "a JAX or NumPy array", value)


def to_host(value: Any) -> np.ndarray:
    """The NumPy view of a callback operand (no copy for a CPU buffer)."""
    return np.asarray(value)


def call(host_function: Callable[..., np.ndarray], shape: Sequence[int], dtype: Any, *operands: Any,
         vmap_method: str = "expand_dims") -> jax.Array:
    """``host_function(*operands)`` as a ``jax.pure_callback`` returning an array of ``shape`` and
    ``dtype``."""
    result = jax.ShapeDtypeStruct(tuple(shape), dtype)
    return jax.pure_callback(host_function, result, *operands, vmap_method=vmap_method)


def leading_shape(arrays: Sequence[np.ndarray], ranks: Sequence[int]) -> tuple[int, ...]:
    """The ``vmap`` axes in front of operands whose own ranks are ``ranks``, broadcast together."""
    return tuple(np.broadcast_shapes(*(a.shape[:a.ndim - r] for a, r in zip(arrays, ranks))))


def each_example(function: Callable[..., np.ndarray], arrays: Sequence[np.ndarray], ranks: Sequence[int],
                 shape: Sequence[int], dtype: Any) -> np.ndarray:
    """``function`` on every example of the leading ``vmap`` axes (an operand with a size-1 axis
    is shared by all examples), stacked into an array of ``leading + shape``."""
    leading = leading_shape(arrays, ranks)
    out = np.empty(leading + tuple(shape), dtype)
    for index in np.ndindex(*leading):
        parts = [a[tuple(i if n > 1 else 0 for i, n in zip(index, a.shape))] for a in arrays]
        out[index] = function(*parts)
    return out


def folded(array: np.ndarray, rank: int) -> np.ndarray:
    """``array`` with its leading ``vmap`` axes and its first own axis merged into one (a view:
    callback operands are C-contiguous)."""
    return array.reshape((math.prod(array.shape[:array.ndim - rank + 1]),) + array.shape[array.ndim - rank + 1:])
