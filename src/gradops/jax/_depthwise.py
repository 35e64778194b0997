"""``gradops.jax.depthwise_conv2d``: TensorFlow's depthwise convolution (SPEC 5) as a JAX function.

The forward op is gradops' ``DepthwiseConv2dNative``; the gradients are ``..._BackpropInput``
(with respect to ``x``) and ``..._BackpropFilter`` (with respect to ``filter``), its exact adjoints.
It equals ``lax.conv_general_dilated(x, filter.reshape(kh, kw, 1, C * M), strides, padding,
rhs_dilation=dilations, dimension_numbers=(fmt, "HWIO", fmt), feature_group_count=C)`` (SPEC 6.5).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any, Callable, Sequence

import jax
import numpy as np

from .._backend import resolve_backend
from ..depthwise import (DEPTHWISE_DTYPES, DepthwiseConv2dNativeBackpropFilterDesc,
                         DepthwiseConv2dNativeBackpropInputDesc, DepthwiseConv2dNativeDesc)
from ..errors import DataTypeError, DescriptorError, ShapeError
from ._host import call, check_array, each_example, folded, view

__all__ = ["depthwise_conv2d"]

_DATA_FORMATS = ("NHWC", "NCHW")
_RANK = 4


@dataclass(frozen=True)
class _Conv:
    """One validated configuration: the three TensorFlow descriptors (which share T and every
    attribute) and the gradops backend."""

    forward: DepthwiseConv2dNativeDesc
    backprop_input: DepthwiseConv2dNativeBackpropInputDesc
    backprop_filter: DepthwiseConv2dNativeBackpropFilterDesc
    backend: str

    def output_shape(self, x_shape: Sequence[int], filter_shape: Sequence[int]) -> tuple[int, ...]:
        """Checks the shapes against each other and the attributes (SPEC 5.2, 5.3)."""
        geometry = self.forward._geometry(tuple(x_shape), "x.shape", tuple(filter_shape), "filter.shape", None)
        return geometry.output_shape(self.forward.data_format)


def depthwise_conv2d(x: Any, filter: Any, strides: int | Sequence[int] = (1, 1),
                     padding: str | Sequence[Sequence[int]] = "SAME", dilations: int | Sequence[int] = (1, 1),
                     data_format: str = "NHWC", *, backend: str | None = None) -> jax.Array:
    """Depthwise 2-D convolution with TensorFlow's arguments, differentiable in ``x`` and ``filter``.

    ``x``: ``[N, H, W, C]`` (``data_format="NHWC"``) or ``[N, C, H, W]`` (``"NCHW"``); ``filter``:
    ``[kh, kw, C, M]``, the same dtype (float16, bfloat16, float32 or float64). Output channel
    ``c * M + m`` is input channel ``c`` with filter ``[:, :, c, m]``; no filter flip.
    ``strides`` and ``dilations``: an int or ``(height, width)``. ``padding``: ``"SAME"`` (the odd
    pad goes after), ``"VALID"`` or ``((top, bottom), (left, right))``. ``backend``: gradops'
    backend, ``None`` for the default (``GRADOPS_BACKEND``).
    """
    check_array("x", x)
    check_array("filter", filter)
    if np.dtype(x.dtype) not in DEPTHWISE_DTYPES:
        raise DataTypeError.expected("x.dtype", "float16, bfloat16, float32 or float64", str(x.dtype))
    if filter.dtype != x.dtype:
        raise DataTypeError.expected("filter.dtype", f"{x.dtype} (the dtype of x)", str(filter.dtype))
    if x.ndim != _RANK:
        raise ShapeError.expected("x.ndim", f"4 ([N, H, W, C] or [N, C, H, W]), shape {tuple(x.shape)}", x.ndim)
    if filter.ndim != _RANK:
        raise ShapeError.expected("filter.ndim", f"4 ([kh, kw, C, M]), shape {tuple(filter.shape)}", filter.ndim)
    conv = _configuration(np.dtype(x.dtype), _pair("strides", strides), _padding(padding),
                          _pair("dilations", dilations), _data_format(data_format), resolve_backend(backend))
    conv.output_shape(x.shape, filter.shape)
    return _differentiable(conv)(x, filter)


# --- arguments -------------------------------------------------------------------------------

def _pair(name: str, value: Any) -> tuple[int, int]:
    """An int or a (height, width) pair of ints >= 1."""
    items = (value, value) if _is_int(value) else value
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence) or len(items) != 2 \
            or not all(_is_int(v) for v in items):
        raise DescriptorError.expected(name, "an int or a (height, width) pair of ints", value)
    for i, v in enumerate(items):
        if v < 1:
            raise DescriptorError.expected(f"{name}[{i}]", "an int >= 1", v)
    return int(items[0]), int(items[1])


def _padding(value: Any) -> str | tuple[tuple[int, int], tuple[int, int]]:
    """``"SAME"``, ``"VALID"`` or ((top, bottom), (left, right)) of ints >= 0."""
    if isinstance(value, str):
        if value not in ("SAME", "VALID"):
            raise DescriptorError.expected("padding", "'SAME', 'VALID' or ((top, bottom), (left, right))", value)
        return value
    if not isinstance(value, Sequence) or len(value) != 2:
        raise DescriptorError.expected("padding", "'SAME', 'VALID' or ((top, bottom), (left, right))", value)
    pairs = []
    for i, pair in enumerate(value):
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2 \
                or not all(_is_int(p) for p in pair):
            raise DescriptorError.expected(f"padding[{i}]", "a (before, after) pair of ints", pair)
        if min(pair) < 0:
            raise DescriptorError.expected(f"padding[{i}]", "pads >= 0", tuple(pair))
        pairs.append((int(pair[0]), int(pair[1])))
    return pairs[0], pairs[1]


def _data_format(value: Any) -> str:
    if not isinstance(value, str) or value not in _DATA_FORMATS:
        raise DescriptorError.expected("data_format", "'NHWC' or 'NCHW'", value)
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


@lru_cache(maxsize=256)
def _configuration(dtype: np.dtype, strides: tuple[int, int], padding: Any, dilations: tuple[int, int],
                   data_format: str, backend: str) -> _Conv:
    """The TensorFlow attributes (4-element strides and dilations in ``data_format`` order, and
    8 explicit paddings when ``padding`` is pairs) as the three descriptors."""
    def in_format(height: Any, width: Any, other: Any) -> list[Any]:
        return [other, height, width, other] if data_format == "NHWC" else [other, other, height, width]

    if isinstance(padding, str):
        tf_padding, explicit = padding, []
    else:
        tf_padding = "EXPLICIT"
        explicit = [p for pair in in_format(padding[0], padding[1], (0, 0)) for p in pair]
    attrs = dict(T=dtype, strides=in_format(*strides, 1), padding=tf_padding, explicit_paddings=explicit,
                 data_format=data_format, dilations=in_format(*dilations, 1))
    return _Conv(DepthwiseConv2dNativeDesc(**attrs), DepthwiseConv2dNativeBackpropInputDesc(**attrs),
                 DepthwiseConv2dNativeBackpropFilterDesc(**attrs), backend)


# --- the JAX function and its host callbacks ---------------------------------------------------

@lru_cache(maxsize=256)
def _differentiable(conv: _Conv) -> Callable[[Any, Any], jax.Array]:
    """``conv``'s forward op with its two gradient ops as a ``jax.custom_vjp`` function."""
    def forward(x: Any, filt: Any) -> jax.Array:
        shape = conv.output_shape(x.shape, filt.shape)
        return call(partial(_forward_host, conv, shape), shape, x.dtype, x, filt)

    @jax.custom_vjp
    def depthwise(x: Any, filt: Any) -> jax.Array:
        return forward(x, filt)

    def depthwise_forward(x: Any, filt: Any) -> tuple[jax.Array, tuple[Any, Any]]:
        return forward(x, filt), (x, filt)

    def depthwise_backward(residuals: tuple[Any, Any], dy: Any) -> tuple[jax.Array, jax.Array]:
        x, filt = residuals
        dx = call(partial(_backprop_input_host, conv, tuple(x.shape)), x.shape, x.dtype, filt, dy)
        dfilter = call(partial(_backprop_filter_host, conv, tuple(filt.shape)), filt.shape, filt.dtype, x, dy)
        return dx, dfilter

    depthwise.defvjp(depthwise_forward, depthwise_backward)
    return depthwise


def _shared(array: np.ndarray) -> bool:
    """Whether a callback operand is the same for every ``vmap`` example (its leading axes are 1)."""
    return all(n == 1 for n in array.shape[:-_RANK])


def _forward_host(conv: _Conv, y_shape: tuple[int, ...], out: np.ndarray | None, x: np.ndarray,
                  filt: np.ndarray) -> np.ndarray:
    if _shared(filt):  # vmap examples of x become more batch rows of one call
        rows = folded(x, _RANK)
        y = conv.forward(rows, filt.reshape(filt.shape[-_RANK:]), backend=conv.backend,
                         out=view(out, (rows.shape[0],) + y_shape[1:]))
        return y.reshape(x.shape[:-_RANK + 1] + y_shape[1:])
    return each_example(partial(conv.forward, backend=conv.backend), out, (x, filt), (_RANK, _RANK), y_shape,
                        filt.dtype)


def _backprop_input_host(conv: _Conv, x_shape: tuple[int, ...], out: np.ndarray | None, filt: np.ndarray,
                         dy: np.ndarray) -> np.ndarray:
    if _shared(filt):
        dy_rows = folded(dy, _RANK)
        rows_shape = (dy_rows.shape[0],) + x_shape[1:]
        dx = conv.backprop_input(rows_shape, filt.reshape(filt.shape[-_RANK:]), dy_rows, backend=conv.backend,
                                 out=view(out, rows_shape))
        return dx.reshape(dy.shape[:-_RANK + 1] + x_shape[1:])

    def one(filt: np.ndarray, dy: np.ndarray, out: np.ndarray) -> np.ndarray:
        return conv.backprop_input(x_shape, filt, dy, backend=conv.backend, out=out)
    return each_example(one, out, (filt, dy), (_RANK, _RANK), x_shape, dy.dtype)


def _backprop_filter_host(conv: _Conv, filter_shape: tuple[int, ...], out: np.ndarray | None, x: np.ndarray,
                          dy: np.ndarray) -> np.ndarray:
    """Each ``vmap`` example has its own filter gradient (a sum over its batch): one call each."""
    def one(x: np.ndarray, dy: np.ndarray, out: np.ndarray) -> np.ndarray:
        return conv.backprop_filter(x, filter_shape, dy, backend=conv.backend, out=out)
    return each_example(one, out, (x, dy), (_RANK, _RANK), filter_shape, dy.dtype)
