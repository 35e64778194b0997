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

from ..suite import (DepthwiseWorkload, ReluGradWorkload, ResampleGradWorkload, Variant, Workload, layout_shape,
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
    else:
        assert isinstance(workload, DepthwiseWorkload)
        forward = _depthwise_forward(workload, inputs["filter"], order)
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


def _depthwise_forward(workload: DepthwiseWorkload, filt: np.ndarray, order: str) -> Callable:
    import jax.numpy as jnp
    from jax import lax

    k, _, c, m = filt.shape
    kernel = jnp.asarray(filt.reshape(k, k, 1, c * m))
    return partial(lax.conv_general_dilated, rhs=kernel, window_strides=(workload.stride,) * 2,
                   padding=list(workload.pads()), rhs_dilation=(workload.dilation,) * 2,
                   dimension_numbers=(order, "HWIO", order), feature_group_count=c)
