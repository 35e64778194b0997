"""gradops' operators as torch custom operators, ``torch.ops.gradops.*``.

Each is registered with ``torch.library.custom_op`` (opaque to ``torch.compile``, so a compiled
graph calls it without a break), has a fake kernel that allocates its output by the same rule
as the real one (:func:`~gradops.torch._convert.empty_like_format`, hence the same strides), and
the forward ops have an autograd formula whose backward calls gradops' gradient operators:

==============================================  ===================================================
op                                              gradops call
==============================================  ===================================================
``depthwise_conv2d(x, weight, ...)``            ``depthwise_conv2d_native`` (NCHW, EXPLICIT pads)
``depthwise_conv2d_backward_input``             ``depthwise_conv2d_native_backprop_input``
``depthwise_conv2d_backward_weight``            ``depthwise_conv2d_native_backprop_filter``
``interpolate(x, output_size, ...)``            ``DmlResampleParams.from_torch(...).forward``
``interpolate_backward``                        ``DmlResampleParams.from_torch(...).gradient``
``relu(x)`` / ``relu_backward(y, dy)``          ``relu`` / ``relu_grad``
==============================================  ===================================================

The ops take torch's tensors in torch's layouts: the depthwise weight is ``[C*M, 1, kh, kw]``,
seen without a copy as TensorFlow's filter ``[kh, kw, C, M]`` (SPEC 5.1: output channel
``c*M + m`` in both); padding is ``[top, bottom, left, right]`` (the functional API resolves
torch's ``padding`` argument). The backward ops have no autograd formula of their own, so
double backward is not supported.
"""

# No ``from __future__ import annotations``: custom_op reads the schema from real annotations.
from functools import lru_cache
from typing import Optional, Sequence

import torch
from torch._prims_common import suggest_memory_format

from ..depthwise import (depthwise_conv2d_native, depthwise_conv2d_native_backprop_filter,
                         depthwise_conv2d_native_backprop_input)
from ..relu import relu as relu_native
from ..relu import relu_grad
from ..conventions import DmlResampleParams
from ._convert import as_numpy, empty_in_format, empty_like_format, flat_arrays_if_dense, use_torch_threads

__all__ = ["depthwise_conv2d", "depthwise_conv2d_backward_input", "depthwise_conv2d_backward_weight",
           "interpolate", "interpolate_backward", "relu", "relu_backward", "conv_output_size"]


def conv_output_size(size, kernel: int, stride: int, pad_before: int, pad_after: int, dilation: int):
    """torch's (and TF EXPLICIT's) output length; works on symbolic sizes too."""
    return (size + pad_before + pad_after - dilation * (kernel - 1) - 1) // stride + 1


def _tf_filter(weight: torch.Tensor, channels: int) -> torch.Tensor:
    """``[C*M, 1, kh, kw]`` as ``[kh, kw, C, M]``: a view when the weight is contiguous."""
    out_channels, _, kh, kw = weight.shape
    return weight.reshape(channels, out_channels // channels, kh, kw).permute(2, 3, 0, 1)


def _tf_attributes(stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int]) -> dict:
    """The NCHW ``tf.raw_ops`` attributes of a torch depthwise call."""
    top, bottom, left, right = padding
    return dict(strides=(1, 1, *stride), padding="EXPLICIT", explicit_paddings=(0, 0, 0, 0, top, bottom, left, right),
                data_format="NCHW", dilations=(1, 1, *dilation))


def _depthwise_output_shape(x: torch.Tensor, weight: torch.Tensor, stride: Sequence[int], padding: Sequence[int],
                            dilation: Sequence[int]) -> tuple:
    batch, _, height, width = x.shape
    return (batch, weight.shape[0],
            conv_output_size(height, weight.shape[2], stride[0], padding[0], padding[1], dilation[0]),
            conv_output_size(width, weight.shape[3], stride[1], padding[2], padding[3], dilation[1]))


@torch.library.custom_op("gradops::depthwise_conv2d", mutates_args=(), device_types="cpu")
def depthwise_conv2d(x: torch.Tensor, weight: torch.Tensor, stride: Sequence[int], padding: Sequence[int],
                     dilation: Sequence[int]) -> torch.Tensor:
    backend = use_torch_threads()
    y = empty_like_format(x, _depthwise_output_shape(x, weight, stride, padding, dilation))
    depthwise_conv2d_native(as_numpy(x), as_numpy(_tf_filter(weight, x.shape[1])),
                                       out=as_numpy(y), backend=backend, **_tf_attributes(stride, padding, dilation))
    return y


@depthwise_conv2d.register_fake
def _(x, weight, stride, padding, dilation):
    return empty_like_format(x, _depthwise_output_shape(x, weight, stride, padding, dilation))


@torch.library.custom_op("gradops::depthwise_conv2d_backward_input", mutates_args=(), device_types="cpu")
def depthwise_conv2d_backward_input(dy: torch.Tensor, weight: torch.Tensor, input_like: torch.Tensor,
                                    stride: Sequence[int], padding: Sequence[int],
                                    dilation: Sequence[int]) -> torch.Tensor:
    """dx in the memory format of the forward input ``input_like`` (only its shape, dtype and
    strides are read)."""
    backend = use_torch_threads()
    dx = empty_like_format(input_like, input_like.shape)
    depthwise_conv2d_native_backprop_input(
        list(input_like.shape), as_numpy(_tf_filter(weight, input_like.shape[1])), as_numpy(dy), out=as_numpy(dx),
        backend=backend, **_tf_attributes(stride, padding, dilation))
    return dx


@depthwise_conv2d_backward_input.register_fake
def _(dy, weight, input_like, stride, padding, dilation):
    return empty_like_format(input_like, input_like.shape)


@torch.library.custom_op("gradops::depthwise_conv2d_backward_weight", mutates_args=(), device_types="cpu")
def depthwise_conv2d_backward_weight(x: torch.Tensor, dy: torch.Tensor, weight_size: Sequence[int],
                                     stride: Sequence[int], padding: Sequence[int],
                                     dilation: Sequence[int]) -> torch.Tensor:
    backend = use_torch_threads()
    dweight = x.new_empty(tuple(weight_size))
    channels = x.shape[1]
    tf_dfilter = _tf_filter(dweight, channels)
    depthwise_conv2d_native_backprop_filter(
        as_numpy(x), list(tf_dfilter.shape), as_numpy(dy), out=as_numpy(tf_dfilter), backend=backend,
        **_tf_attributes(stride, padding, dilation))
    return dweight


@depthwise_conv2d_backward_weight.register_fake
def _(x, dy, weight_size, stride, padding, dilation):
    return x.new_empty(tuple(weight_size))


def _depthwise_setup_context(ctx, inputs, output):
    x, weight, stride, padding, dilation = inputs
    ctx.save_for_backward(x, weight)
    ctx.attributes = (stride, padding, dilation)


def _depthwise_backward(ctx, dy):
    x, weight = ctx.saved_tensors
    dx = dweight = None
    if ctx.needs_input_grad[0]:
        dx = torch.ops.gradops.depthwise_conv2d_backward_input(dy, weight, x, *ctx.attributes)
    if ctx.needs_input_grad[1]:
        dweight = torch.ops.gradops.depthwise_conv2d_backward_weight(x, dy, list(weight.shape), *ctx.attributes)
    return dx, dweight, None, None, None


depthwise_conv2d.register_autograd(_depthwise_backward, setup_context=_depthwise_setup_context)


# --- interpolate ---------------------------------------------------------------------------------

@lru_cache(maxsize=256)
def _resample_params(input_shape: tuple[int, ...], output_size: tuple[int, ...], mode: str, align_corners: bool,
                     scale_factor: Optional[tuple[float, ...]]) -> DmlResampleParams:
    """SPEC 6.2's mapping; torch uses ``scale_factor`` instead of the sizes when it is given."""
    linear = mode not in ("nearest", "nearest-exact")
    return DmlResampleParams.from_torch(input_shape, None if scale_factor else output_size, mode,
                                        align_corners if linear else None, scale_factor or None)


def _interpolate_output_shape(x: torch.Tensor, output_size: Sequence[int]) -> tuple:
    return (*x.shape[:2], *output_size)


@torch.library.custom_op("gradops::interpolate", mutates_args=(), device_types="cpu")
def interpolate(x: torch.Tensor, output_size: Sequence[int], mode: str, align_corners: bool,
                scale_factor: Optional[Sequence[float]]) -> torch.Tensor:
    backend = use_torch_threads()
    shape = _interpolate_output_shape(x, output_size)
    y = empty_like_format(x, shape)
    params = _resample_params(tuple(x.shape), tuple(output_size), mode, align_corners,
                              tuple(scale_factor) if scale_factor else None)
    params.forward(as_numpy(x), shape, out=as_numpy(y), backend=backend)
    return y


@interpolate.register_fake
def _(x, output_size, mode, align_corners, scale_factor):
    return empty_like_format(x, _interpolate_output_shape(x, output_size))


@torch.library.custom_op("gradops::interpolate_backward", mutates_args=(), device_types="cpu")
def interpolate_backward(dy: torch.Tensor, input_size: Sequence[int], channels_last: bool, mode: str,
                         align_corners: bool, scale_factor: Optional[Sequence[float]]) -> torch.Tensor:
    """dx of shape ``input_size``, channels_last when the forward input was."""
    backend = use_torch_threads()
    dx = empty_in_format(dy, input_size, channels_last)
    params = _resample_params(tuple(input_size), tuple(dy.shape[2:]), mode, align_corners,
                              tuple(scale_factor) if scale_factor else None)
    params.gradient(as_numpy(dy), tuple(input_size), out=as_numpy(dx), backend=backend)
    return dx


@interpolate_backward.register_fake
def _(dy, input_size, channels_last, mode, align_corners, scale_factor):
    return empty_in_format(dy, input_size, channels_last)


def _interpolate_setup_context(ctx, inputs, output):
    x, output_size, mode, align_corners, scale_factor = inputs
    # Like torch's own upsample backward, keep the input's shape and memory format, not its data.
    ctx.attributes = (list(x.shape), suggest_memory_format(x) == torch.channels_last, mode, align_corners,
                      scale_factor)


def _interpolate_backward(ctx, dy):
    dx = torch.ops.gradops.interpolate_backward(dy, *ctx.attributes) if ctx.needs_input_grad[0] else None
    return dx, None, None, None, None


interpolate.register_autograd(_interpolate_backward, setup_context=_interpolate_setup_context)


# --- ReLU ------------------------------------------------------------------------------------------

@torch.library.custom_op("gradops::relu", mutates_args=(), device_types="cpu")
def relu(x: torch.Tensor) -> torch.Tensor:
    backend = use_torch_threads()
    y = torch.empty_like(x)
    source, target = flat_arrays_if_dense(x, y)
    relu_native(source, out=target, backend=backend)
    return y


@relu.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("gradops::relu_backward", mutates_args=(), device_types="cpu")
def relu_backward(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """``y > 0 ? dy : +0`` (SPEC 4.2) in ``y``'s memory format; ``y`` is the forward output
    (``relu(x) > 0`` exactly where ``x > 0``)."""
    backend = use_torch_threads()
    dx = torch.empty_like(y)
    y_view, dy_view, dx_view = flat_arrays_if_dense(y, dy, dx)
    relu_grad(y_view, dy_view, out=dx_view, backend=backend)
    return dx


@relu_backward.register_fake
def _(y, dy):
    return torch.empty_like(y)


def _relu_setup_context(ctx, inputs, output):
    ctx.save_for_backward(output)


def _relu_backward(ctx, dy):
    (y,) = ctx.saved_tensors
    return torch.ops.gradops.relu_backward(y, dy)


relu.register_autograd(_relu_backward, setup_context=_relu_setup_context)
