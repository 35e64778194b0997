"""gradops' operators with torch's argument conventions, differentiable by torch autograd.

Every argument is checked here, before any kernel runs: a bad one raises a
:class:`~gradops.GradopsError` naming it. The calls then go to the custom operators of
:mod:`gradops.torch.ops`, which ``torch.compile`` keeps in its graph.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from ..errors import DescriptorError, ShapeError, UnsupportedError
from . import ops
from ._convert import check_tensor

__all__ = ["depthwise_conv2d", "interpolate", "relu", "DEPTHWISE_DTYPES", "INTERPOLATE_DTYPES", "RELU_DTYPES"]

# The dtypes of the gradops operators behind each function (README "Using it").
DEPTHWISE_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
INTERPOLATE_DTYPES = (torch.float32, torch.float16)
RELU_DTYPES = (torch.float32, torch.float16, torch.int32, torch.int16, torch.int8)

_LINEAR_RANKS = {"linear": 3, "bilinear": 4, "trilinear": 5}  # tensor rank each linear mode requires
_NEAREST_MODES = ("nearest", "nearest-exact")


def _pair(name: str, value: Any, minimum: int) -> tuple[int, int]:
    """An int or a pair of ints, each >= ``minimum``, as torch's ``_pair``."""
    items = (value, value) if isinstance(value, int) else value
    if (not isinstance(items, (tuple, list)) or len(items) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in items)):
        raise DescriptorError.expected(name, "an int or a pair of ints", value)
    for i, v in enumerate(items):
        if v < minimum:
            raise DescriptorError.expected(f"{name}[{i}]", f"an int >= {minimum}", v)
    return int(items[0]), int(items[1])


def _depthwise_padding(padding: Any, stride: tuple[int, int], dilation: tuple[int, int],
                       kernel: tuple[int, int]) -> list[int]:
    """torch's ``padding`` as [top, bottom, left, right]. ``"same"`` pads ``d*(k-1)`` in total
    with the odd element after (bottom/right), as torch's ``_convolution_mode`` does for even
    kernels; torch allows it only with stride 1."""
    if padding == "valid":
        return [0, 0, 0, 0]
    if padding == "same":
        if stride != (1, 1):
            raise DescriptorError.expected("padding", "an int or a pair with stride != 1 (torch allows "
                                           "padding='same' only with stride 1)", padding)
        pads = []
        for k, d in zip(kernel, dilation):
            total = d * (k - 1)
            pads += [total // 2, total - total // 2]
        return pads
    if isinstance(padding, str):
        raise DescriptorError.expected("padding", "an int, a pair of ints, 'same' or 'valid'", padding)
    pad_h, pad_w = _pair("padding", padding, 0)
    return [pad_h, pad_h, pad_w, pad_w]


def depthwise_conv2d(x: torch.Tensor, weight: torch.Tensor, stride: int | Sequence[int] = 1,
                     padding: int | Sequence[int] | str = 0, dilation: int | Sequence[int] = 1) -> torch.Tensor:
    """``F.conv2d(x, weight, stride=stride, padding=padding, dilation=dilation, groups=C)``.

    ``x``: ``[N, C, H, W]`` (NCHW or channels_last, any strides); ``weight``: ``[C*M, 1, kh, kw]``
    of the same dtype (float32, float16, bfloat16 or float64). ``padding``: an int, a pair,
    ``"same"`` (stride 1 only) or ``"valid"``. The result keeps ``x``'s memory format;
    gradients reach ``x`` and ``weight`` through gradops' backprop-input and backprop-filter.
    """
    x = check_tensor("x", x, dtypes=DEPTHWISE_DTYPES, ranks=(4,))
    weight = check_tensor("weight", weight, dtypes=(x.dtype,), ranks=(4,))
    channels = x.shape[1]
    if weight.shape[1] != 1 or channels == 0 or weight.shape[0] % channels != 0:
        raise ShapeError.expected("weight.shape", f"[C*M, 1, kh, kw] with C = x.shape[1] = {channels}",
                                  tuple(weight.shape))
    stride = _pair("stride", stride, 1)
    dilation = _pair("dilation", dilation, 1)
    kernel = (weight.shape[2], weight.shape[3])
    pads = _depthwise_padding(padding, stride, dilation, kernel)
    for axis, name in ((0, "height"), (1, "width")):
        size = x.shape[2 + axis]
        out = ops.conv_output_size(size, kernel[axis], stride[axis], pads[2 * axis], pads[2 * axis + 1],
                                   dilation[axis])
        if out < 1:
            raise ShapeError(f"x.shape[{2 + axis}]", f"the padded {name} {size} + {pads[2 * axis]} + "
                             f"{pads[2 * axis + 1]} is smaller than the dilated kernel "
                             f"{dilation[axis] * (kernel[axis] - 1) + 1}")
    return torch.ops.gradops.depthwise_conv2d(x, weight, list(stride), pads, list(dilation))


def interpolate(x: torch.Tensor, size: int | Sequence[int] | None = None,
                scale_factor: float | Sequence[float] | None = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None) -> torch.Tensor:
    """``F.interpolate`` for ``mode`` ``"nearest"``, ``"nearest-exact"`` (3-, 4- or 5-D),
    ``"linear"`` (3-D), ``"bilinear"`` (4-D) and ``"trilinear"`` (5-D), float32 or float16.

    Pass exactly one of ``size`` and ``scale_factor``; ``align_corners`` is for the linear modes
    only. With ``scale_factor`` (and ``recompute_scale_factor`` not True) the factor reaches the
    index computation, as in torch (SPEC 6.2). The result keeps ``x``'s memory format.
    """
    x = check_tensor("x", x, dtypes=INTERPOLATE_DTYPES, ranks=(3, 4, 5))
    if mode not in _NEAREST_MODES and mode not in _LINEAR_RANKS:
        raise UnsupportedError("mode", f"expected 'nearest', 'nearest-exact', 'linear', 'bilinear' or 'trilinear' "
                               f"(DirectML resamples with nearest and linear modes only), got {mode!r}")
    if mode in _LINEAR_RANKS and x.dim() != _LINEAR_RANKS[mode]:
        raise ShapeError.expected("x.dim()", f"{_LINEAR_RANKS[mode]} for mode {mode!r}", x.dim())
    if mode in _NEAREST_MODES and align_corners is not None:
        raise DescriptorError.expected("align_corners", "None with the nearest modes (as torch requires)",
                                       align_corners)
    if align_corners is not None and not isinstance(align_corners, bool):
        raise DescriptorError.expected("align_corners", "None or a bool", align_corners)
    if (size is None) == (scale_factor is None):
        raise DescriptorError("size", "pass exactly one of size and scale_factor (as torch requires)")
    spatial = x.dim() - 2
    if size is not None:
        sizes = [size] * spatial if isinstance(size, int) else list(size)
        if len(sizes) != spatial or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1
                                            for n in sizes):
            raise DescriptorError.expected("size", f"an int >= 1 or {spatial} of them", size)
        factors = None
    else:
        factors = [scale_factor] * spatial if isinstance(scale_factor, (int, float)) else list(scale_factor)
        if len(factors) != spatial or not all(isinstance(f, (int, float)) and not isinstance(f, bool)
                                              and math.isfinite(f) and f > 0 for f in factors):
            raise DescriptorError.expected("scale_factor", f"a number > 0 or {spatial} of them", scale_factor)
        factors = [float(f) for f in factors]
        # torch: floor(float(input size) * scale_factor), in double precision
        sizes = [math.floor(float(n) * f) for n, f in zip(x.shape[2:], factors)]
        for d, n in enumerate(sizes):
            if n < 1:
                raise ShapeError.expected(f"scale_factor[{d}]", "a factor giving an output size >= 1",
                                          factors[d])
        if recompute_scale_factor:
            factors = None
    for d, n in enumerate(x.shape):
        if n == 0:
            raise ShapeError.expected(f"x.shape[{d}]", "a size >= 1 (gradops' resample has no empty tensors)", n)
    return torch.ops.gradops.interpolate(x, sizes, mode, bool(align_corners), factors)


def relu(x: torch.Tensor) -> torch.Tensor:
    """``F.relu``: ``x > 0 ? x : +0`` element-wise (SPEC 4.3; NaN gives +0, where torch keeps
    NaN). The gradient is gradops' ``relu_grad``, ``x > 0 ? dy : +0`` (SPEC 4.2). Any rank from
    1 to 8, any strides; the result has ``x``'s strides when ``x`` is dense."""
    x = check_tensor("x", x, dtypes=RELU_DTYPES, ranks=range(1, 9))
    if x.numel() == 0:
        raise ShapeError.expected("x.shape", "sizes >= 1 (gradops' ReLU has no empty tensors)", tuple(x.shape))
    return torch.ops.gradops.relu(x)
