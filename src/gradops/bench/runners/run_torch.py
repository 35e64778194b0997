"""PyTorch CPU: the raw ATen backward kernels (no autograd), NCHW and channels_last, with fresh
outputs and with ``out=`` (the ``grad_input`` overloads; depthwise has none that works).

Parameter mappings follow SPEC 6.2 (resample) and 6.5 (depthwise: ``convolution_backward`` with
``groups = C`` and the TF filter ``[fh, fw, C, M]`` viewed as ``[C*M, 1, fh, fw]``).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from ..suite import DepthwiseWorkload, Output, ReluGradWorkload, ResampleGradWorkload, Variant, Workload, \
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
    assert isinstance(workload, DepthwiseWorkload)
    return _depthwise(workload, inputs, tensor, buffer, memory_format), to_canonical


def _depthwise(workload: DepthwiseWorkload, inputs: dict[str, np.ndarray], tensor, buffer, memory_format):
    import torch

    n, h, w, c = workload.input_nhwc
    k, m = workload.kernel, workload.multiplier
    dy = tensor(inputs["dy"])
    grouped = np.ascontiguousarray(inputs["filter"].transpose(2, 3, 0, 1).reshape(c * m, 1, k, k))
    weight = torch.from_numpy(grouped).contiguous(memory_format=memory_format)
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
