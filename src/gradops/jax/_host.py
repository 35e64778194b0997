"""Running gradops' NumPy operators inside JAX programs: the part the three ops share.

Every op is a ``jax.custom_vjp`` whose forward and backward each call one gradops operator from a
host callback. With ``jax.experimental.buffer_callback`` (where JAX has it) the callback gets
XLA's own input and output buffers as NumPy views and the operator writes its result straight into
the output buffer (``out=``); ``jax.pure_callback``, the fallback, copies every input into a new
array before the callback and the returned result into XLA's buffer after it, which for large
tensors costs several times as much as the operator. XLA treats either
callback as pure: under ``jit`` a callback whose result is unused (e.g. the filter gradient when
only the input gradient is needed) is removed.

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

__all__ = ["BFLOAT16", "call", "check_array", "each_example", "folded", "leading_shape", "to_host", "view"]

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def check_array(name: str, value: Any) -> None:
    """``value`` is a JAX array, a tracer of one, or a NumPy array. Lists and scalars are refused,
    as gradops' NumPy functions refuse them: they carry no dtype."""
    if not isinstance(value, (jax.Array, np.ndarray)):
        raise DataTypeError.expected(name, "a JAX or NumPy array", value)


def to_host(value: Any) -> np.ndarray:
    """The NumPy view of a callback operand (no copy for a CPU buffer)."""
    return np.asarray(value)


try:
    from jax.experimental.buffer_callback import buffer_callback as _buffer_callback
except ImportError:  # older JAX
    _buffer_callback = None

HostFunction = Callable[..., np.ndarray]


def call(host_function: HostFunction, shape: Sequence[int], dtype: Any, *operands: Any,
         vmap_method: str = "expand_dims") -> jax.Array:
    """The JAX array of ``shape`` and ``dtype`` computed by ``host_function(out, *operands)`` on
    NumPy views of the operands. ``out`` is the NumPy view of XLA's output buffer (with the
    ``vmap`` axes in front), which ``host_function`` fills and returns, or None (the fallback),
    when ``host_function`` returns a new array."""
    result = jax.ShapeDtypeStruct(tuple(shape), dtype)
    if _buffer_callback is not None:
        def in_place(context: Any, out: Any, *arrays: Any) -> None:
            host_function(to_host(out), *(to_host(a) for a in arrays))
        return _buffer_callback(in_place, result, vmap_method=vmap_method)(*operands)

    def returning(*arrays: Any) -> np.ndarray:
        return host_function(None, *(to_host(a) for a in arrays))
    return jax.pure_callback(returning, result, *operands, vmap_method=vmap_method)


def view(out: np.ndarray | None, shape: Sequence[int]) -> np.ndarray | None:
    """``out`` (C-contiguous, as XLA's buffers are) seen with ``shape``, never a copy."""
    return None if out is None else np.reshape(out, tuple(shape), copy=False)


def leading_shape(arrays: Sequence[np.ndarray], ranks: Sequence[int]) -> tuple[int, ...]:
    """The ``vmap`` axes in front of operands whose own ranks are ``ranks``, broadcast together."""
    return tuple(np.broadcast_shapes(*(a.shape[:a.ndim - r] for a, r in zip(arrays, ranks))))


def each_example(function: Callable[..., np.ndarray], out: np.ndarray | None, arrays: Sequence[np.ndarray],
                 ranks: Sequence[int], shape: Sequence[int], dtype: Any) -> np.ndarray:
    """``function(*example_arrays, out=example_out)`` on every example of the leading ``vmap``
    axes (an operand with a size-1 axis is shared by all examples), into ``out`` (or a new array)
    of ``leading + shape``."""
    leading = leading_shape(arrays, ranks)
    if out is None:
        out = np.empty(leading + tuple(shape), dtype)
    for index in np.ndindex(*leading):
        parts = [a[tuple(i if n > 1 else 0 for i, n in zip(index, a.shape))] for a in arrays]
        function(*parts, out=out[index])
    return out


def folded(array: np.ndarray, rank: int) -> np.ndarray:
    """``array`` with its leading ``vmap`` axes and its first own axis merged into one (a view:
    callback operands are C-contiguous)."""
    return array.reshape((math.prod(array.shape[:array.ndim - rank + 1]),) + array.shape[array.ndim - rank + 1:])
