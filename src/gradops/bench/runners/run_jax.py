"""JAX CPU: ``jax.jit`` of ``jax.vjp`` of the forward op, NCHW and NHWC arrays, fresh outputs
(JAX has no ``out=``). The worker's CPU affinity (2 cores) bounds XLA's thread pool.

Forward ops (SPEC 6.3 / 6.5): ``jax.image.resize`` where it expresses the convention (nearest
half-pixel; linear half-pixel with ``antialias=False``); for nearest asymmetric, which resize
cannot express, a gather of the rows and columns PyTorch and TF pick (``framework_indices``);
depthwise, ``lax.conv_general_dilated`` with ``feature_group_count = C`` and the filter reshaped
to ``[fh, fw, 1, C*M]`` (index ``c*M + m`` kept).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np

from ..workloads import (DepthwiseFilterWorkload, DepthwiseForwardWorkload, DepthwiseWorkload, ReluGradWorkload, ResampleGradWorkload, Variant, Workload, layout_shape,
                     transpose_layout)


def setup() -> dict[str, Any]:
    import jax

    return {"version": jax.__version__, "devices": [str(d) for d in jax.devices()]}


def variants(workload: Workload, inputs: dict[str, np.ndarray]) -> list[Variant]:
    layouts = ["contiguous"] if isinstance(workload, ReluGradWorkload) else ["NCHW", "NHWC"]
    return [Variant(layout, "fresh", partial(_prepare, workload, inputs, layout)) for layout in layouts]


def _prepare(workload: Workload, inputs: dict[str, np.ndarray], layout: str):
    import jax
    import jax.numpy as jnp

    order = workload.layout if layout == "contiguous" else layout

    def in_order(array: np.ndarray) -> jax.Array:
        return jnp.asarray(np.ascontiguousarray(transpose_layout(array, workload.layout, order)))

    if isinstance(workload, ReluGradWorkload):
        forward, x = jax.nn.relu, in_order(inputs["x"])
    elif isinstance(workload, ResampleGradWorkload):
        forward = _resample_forward(workload, order)
        x = jnp.zeros(layout_shape(workload.forward_input, "NCHW", order), dtype=workload.dtype)
    elif isinstance(workload, DepthwiseForwardWorkload):
        conv = jax.jit(_depthwise_forward(workload, order))
        x, kernel = in_order(inputs["x"]), _hwio_kernel(inputs["filter"])
        return (lambda: conv(x, kernel).block_until_ready(),
                lambda result: transpose_layout(np.asarray(result), order, workload.layout))
    elif isinstance(workload, DepthwiseFilterWorkload):
        return _depthwise_filter(workload, inputs, order, in_order)
    else:
        assert isinstance(workload, DepthwiseWorkload)
        forward = partial(_depthwise_forward(workload, order), kernel=_hwio_kernel(inputs["filter"]))
        x = jnp.zeros(layout_shape(workload.result_shape(), workload.layout, order), dtype=workload.dtype)
    dy = in_order(inputs["dy"])
    # x is an argument, not a constant: the forward is linear in x, so XLA drops its computation.
    backward = jax.jit(lambda x, dy: jax.vjp(forward, x)[1](dy)[0])

    def call() -> jax.Array:
        return backward(x, dy).block_until_ready()

    return call, lambda result: transpose_layout(np.asarray(result), order, workload.layout)


def _resample_forward(workload: ResampleGradWorkload, order: str) -> Callable:
    import jax
    import jax.numpy as jnp

    h_axis, w_axis = (2, 3) if order == "NCHW" else (1, 2)
    shape = layout_shape(workload.forward_output, "NCHW", order)
    if workload.mode == "linear":
        return partial(jax.image.resize, shape=shape, method="linear", antialias=False)
    if workload.grid == "half_pixel":
        return partial(jax.image.resize, shape=shape, method="nearest")
    rows, cols = workload.framework_indices()
    return lambda x: jnp.take(jnp.take(x, rows, axis=h_axis), cols, axis=w_axis)


def _hwio_kernel(filt: np.ndarray):
    """The TF filter ``[fh, fw, C, M]`` as XLA's grouped ``[fh, fw, 1, C*M]`` (index ``c*M + m``)."""
    import jax.numpy as jnp

    k, _, c, m = filt.shape
    return jnp.asarray(filt.reshape(k, k, 1, c * m))


def _depthwise_forward(workload: DepthwiseWorkload, order: str) -> Callable:
    """``conv(x, kernel)`` of the workload's layer, ``kernel`` as :func:`_hwio_kernel` gives it."""
    from jax import lax

    def conv(x, kernel):
        return lax.conv_general_dilated(x, kernel, window_strides=(workload.stride,) * 2,
                                        padding=list(workload.pads()), rhs_dilation=(workload.dilation,) * 2,
                                        dimension_numbers=(order, "HWIO", order),
                                        feature_group_count=workload.channels)
    return conv


def _depthwise_filter(workload: DepthwiseFilterWorkload, inputs: dict[str, np.ndarray], order: str, in_order):
    import jax
    import jax.numpy as jnp

    k, _, c, m = workload.filter_shape()
    conv = _depthwise_forward(workload, order)
    x, dy = in_order(inputs["x"]), in_order(inputs["dy"])
    kernel = jnp.zeros((k, k, 1, c * m), dtype=workload.dtype)
    # kernel is an argument: the forward is linear in it, so XLA computes only the filter gradient.
    backward = jax.jit(lambda x, kernel, dy: jax.vjp(lambda f: conv(x, f), kernel)[1](dy)[0])

    def call() -> jax.Array:
        return backward(x, kernel, dy).block_until_ready()

    return call, lambda result: np.asarray(result).reshape(k, k, c, m)
