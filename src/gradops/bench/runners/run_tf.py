"""TensorFlow CPU: the raw ops, eager, NHWC, fresh outputs only (TF has no ``out=``).

Intra-op 2 / inter-op 1 threads. ``TF_ENABLE_ONEDNN_OPTS`` is set by the parent process (runner
``tf`` or ``tf-onednn``). Mappings follow SPEC 6.1. Two workloads need care (SPEC 5.6):
dilations > 1, which the CPU ``DepthwiseConv2dNativeBackpropInput`` silently ignores, are
measured as the gradient of ``tf.nn.depthwise_conv2d`` inside a ``tf.function``; NCHW is
attempted with the raw op, which TF CPU rejects, so the cell reports TF's own message.
"""

from __future__ import annotations

import os
from functools import partial
from typing import Any

import numpy as np

from ..workloads import DepthwiseFilterWorkload, DepthwiseForwardWorkload, DepthwiseWorkload, ReluGradWorkload, ResampleGradWorkload, Variant, Workload, \
    transpose_layout
from . import THREADS


def setup() -> dict[str, Any]:
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    return {"version": tf.__version__, "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
            "threads": {"intra_op": THREADS, "inter_op": 1}}


def variants(workload: Workload, inputs: dict[str, np.ndarray]) -> list[Variant]:
    if isinstance(workload, ReluGradWorkload):
        layout = "contiguous"
    elif isinstance(workload, DepthwiseWorkload):
        layout = workload.data_format + (" (tf.nn grad)" if workload.dilation > 1 else "")
    else:
        layout = "NHWC"
    return [Variant(layout, "fresh", partial(_prepare, workload, inputs))]


def _prepare(workload: Workload, inputs: dict[str, np.ndarray]):
    import tensorflow as tf

    raw = tf.raw_ops
    if isinstance(workload, ReluGradWorkload):
        x, dy = tf.constant(inputs["x"]), tf.constant(inputs["dy"])
        return partial(raw.ReluGrad, gradients=dy, features=x), lambda result: result.numpy()
    if isinstance(workload, ResampleGradWorkload):
        dy_nhwc = np.ascontiguousarray(transpose_layout(inputs["dy"], "NCHW", "NHWC"))
        n, c, h, w = workload.forward_input
        hpc = workload.grid == "half_pixel"

        def to_canonical(result):
            return transpose_layout(result.numpy(), "NHWC", "NCHW")

        if workload.mode == "nearest":
            return partial(raw.ResizeNearestNeighborGrad, grads=tf.constant(dy_nhwc), size=tf.constant(
                [h, w], tf.int32), align_corners=False, half_pixel_centers=hpc), to_canonical
        # ResizeBilinearGrad takes float32 grads whatever the output type (SPEC 6.1); the cast of a
        # float16 dY is not timed, and original_image only supplies the shape and output type.
        image = tf.zeros((n, h, w, c), dtype=workload.dtype)
        return partial(raw.ResizeBilinearGrad, grads=tf.constant(dy_nhwc.astype(np.float32)),
                       original_image=image, align_corners=False, half_pixel_centers=hpc), to_canonical
    assert isinstance(workload, DepthwiseWorkload)
    return _depthwise(workload, inputs)


def _depthwise(workload: DepthwiseWorkload, inputs: dict[str, np.ndarray]):
    import tensorflow as tf

    def to_canonical(result):
        return result.numpy()

    raw, attrs = tf.raw_ops, workload.tf_attributes()
    if isinstance(workload, DepthwiseForwardWorkload):
        return partial(raw.DepthwiseConv2dNative, input=tf.constant(inputs["x"]), filter=tf.constant(
            inputs["filter"]), **attrs), to_canonical
    if isinstance(workload, DepthwiseFilterWorkload):
        return partial(raw.DepthwiseConv2dNativeBackpropFilter, input=tf.constant(inputs["x"]), filter_sizes=
                       tf.constant(workload.filter_shape(), tf.int32), out_backprop=tf.constant(inputs["dy"]),
                       **attrs), to_canonical
    filt, dy = tf.constant(inputs["filter"]), tf.constant(inputs["dy"])
    strides = [1, workload.stride, workload.stride, 1]
    if workload.dilation == 1:
        return partial(raw.DepthwiseConv2dNativeBackpropInput,
                       input_sizes=tf.constant(workload.in_format(workload.input_nhwc), tf.int32), filter=filt,
                       out_backprop=dy, **attrs), to_canonical
    assert workload.data_format == "NHWC", "S1 dilates only NHWC workloads (D5)"
    x = tf.zeros(workload.input_nhwc, dtype=workload.dtype)

    @tf.function
    def backprop_input(x, filt, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.nn.depthwise_conv2d(x, filt, strides, "SAME", dilations=[workload.dilation] * 2)
        return tape.gradient(y, x, output_gradients=dy)

    return partial(backprop_input, x, filt, dy), to_canonical
