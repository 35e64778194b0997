"""PyTorch CPU: the raw ATen backward kernels (no autograd), NCHW and channels_last, with fresh
outputs and with ``out=`` (the ``grad_input`` overloads; depthwise has none that works).

Parameter mappings follow SPEC 6.2 (resample) and 6.5 (depthwise: ``convolution_backward`` with
``groups = C`` and the TF filter ``[fh, fw, C, M]`` viewed as ``[C*M, 1, fh, fw]``).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from ..workloads import DepthwiseFilterWorkload, DepthwiseForwardWorkload, DepthwiseWorkload, NotAvailable, Output, ReluGradWorkload, ResampleGradWorkload, Variant, Workload, \
    transpose_layout
from . import THREADS


def setup() -> dict[str, Any]:
    import torch

    torch.set_num_threads(THREADS)
    torch.set_num_interop_threads(1)
    return {"version": torch.__version__, "threads": torch.get_num_threads()}


def variants(workload: Workload, inputs: dict[str, np.ndarray]) -> list[Variant]:
    layouts = ["contiguous"] if isinstance(workload, ReluGradWorkload) else ["NCHW", "channels_last"]
    # convolution_backward.out cannot skip the weight and bias gradients: it rejects any out1/out2
    # for output_mask [True, False, False] ("Expected out tensor to have dtype nullptr").
    outputs = ["fresh"] if isinstance(workload, DepthwiseWorkload) else ["fresh", "out"]
    return [Variant(layout, output, partial(_prepare, workload, inputs, layout, output))
            for layout in layouts for output in outputs]


def _prepare(workload: Workload, inputs: dict[str, np.ndarray], layout: str, output: Output):
    import torch

    memory_format = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    dtype = getattr(torch, workload.dtype)

    def tensor(array: np.ndarray) -> torch.Tensor:
        nchw = np.ascontiguousarray(transpose_layout(array, workload.layout, "NCHW"))
        return torch.from_numpy(nchw).contiguous(memory_format=memory_format)

    def buffer(shape) -> torch.Tensor:
        return torch.empty(tuple(shape), dtype=dtype, memory_format=memory_format).fill_(float("nan"))

    def to_canonical(result: torch.Tensor) -> np.ndarray:
        return transpose_layout(result.numpy(), "NCHW", workload.layout)

    aten = torch.ops.aten
    if isinstance(workload, ReluGradWorkload):
        x, dy = tensor(inputs["x"]), tensor(inputs["dy"])
        if output == "fresh":
            return partial(aten.threshold_backward.default, dy, x, 0), to_canonical
        return partial(aten.threshold_backward.grad_input, dy, x, 0, grad_input=buffer(x.shape)), to_canonical
    if isinstance(workload, ResampleGradWorkload):
        op = {("nearest", "half_pixel"): aten._upsample_nearest_exact2d_backward,
              ("nearest", "asymmetric"): aten.upsample_nearest2d_backward,
              ("linear", "half_pixel"): aten.upsample_bilinear2d_backward}[workload.mode, workload.grid]
        args = [tensor(inputs["dy"]), list(workload.forward_output[2:]), list(workload.forward_input)]
        if workload.mode == "linear":
            args.append(False)  # align_corners
        if output == "fresh":
            return partial(op.default, *args), to_canonical
        return partial(op.grad_input, *args, grad_input=buffer(workload.forward_input)), to_canonical
    if isinstance(workload, DepthwiseForwardWorkload):
        return _depthwise_forward(workload, inputs, tensor, memory_format), to_canonical
    if isinstance(workload, DepthwiseFilterWorkload):
        return _depthwise_filter(workload, inputs, tensor, memory_format)
    assert isinstance(workload, DepthwiseWorkload)
    return _depthwise(workload, inputs, tensor, buffer, memory_format), to_canonical


def _grouped_weight(workload: DepthwiseWorkload, filt: np.ndarray) -> np.ndarray:
    """The TF filter ``[fh, fw, C, M]`` as PyTorch's grouped weight ``[C*M, 1, fh, fw]``."""
    k, _, c, m = filt.shape
    return np.ascontiguousarray(filt.transpose(2, 3, 0, 1).reshape(c * m, 1, k, k))


def _symmetric_pads(workload: DepthwiseWorkload) -> list[int]:
    (top, bottom), (left, right) = workload.pads()
    if top != bottom or left != right:
        raise NotAvailable("PyTorch pads symmetrically; this layer's padding is not")
    return [top, left]


def _depthwise_forward(workload: DepthwiseForwardWorkload, inputs, tensor, memory_format):
    import torch

    x = tensor(inputs["x"])
    weight = torch.from_numpy(_grouped_weight(workload, inputs["filter"])).contiguous(memory_format=memory_format)
    args = (x, weight, None, [workload.stride] * 2, _symmetric_pads(workload), [workload.dilation] * 2, False,
            [0, 0], workload.channels)
    return partial(torch.ops.aten.convolution.default, *args)


def _depthwise_filter(workload: DepthwiseFilterWorkload, inputs, tensor, memory_format):
    import torch

    x, dy = tensor(inputs["x"]), tensor(inputs["dy"])
    k, _, c, m = workload.filter_shape()
    weight = torch.empty((c * m, 1, k, k), dtype=x.dtype)  # only its shape is read (output_mask)
    args = (dy, x, weight, None, [workload.stride] * 2, _symmetric_pads(workload), [workload.dilation] * 2, False,
            [0, 0], c, [False, True, False])

    def call():
        return torch.ops.aten.convolution_backward.default(*args)[1]

    def to_canonical(grad: torch.Tensor) -> np.ndarray:
        return grad.numpy().reshape(c, m, k, k).transpose(2, 3, 0, 1)

    return call, to_canonical


def _depthwise(workload: DepthwiseWorkload, inputs: dict[str, np.ndarray], tensor, buffer, memory_format):
    import torch

    n, h, w, c = workload.input_nhwc
    dy = tensor(inputs["dy"])
    weight = torch.from_numpy(_grouped_weight(workload, inputs["filter"])).contiguous(memory_format=memory_format)
    # PyTorch pads symmetrically: pad min(before, after) and enlarge the input by the rest (SAME with
    # an odd total puts the extra element after), then crop dX back (SPEC 6.5).
    (top, bottom), (left, right) = workload.pads()
    pad_h, pad_w = min(top, bottom), min(left, right)
    crop_top, crop_left = top - pad_h, left - pad_w
    padded = (n, c, h + top + bottom - 2 * pad_h, w + left + right - 2 * pad_w)
    placeholder = buffer(padded)  # only its shape and layout are read (output_mask [True, False, False])
    args = (dy, placeholder, weight, None, [workload.stride] * 2, [pad_h, pad_w], [workload.dilation] * 2,
            False, [0, 0], c, [True, False, False])
    cropped = padded[2:] != (h, w)

    def crop(grad: torch.Tensor) -> torch.Tensor:
        return grad[:, :, crop_top:crop_top + h, crop_left:crop_left + w] if cropped else grad

    def call():
        return crop(torch.ops.aten.convolution_backward.default(*args)[0])

    return call
