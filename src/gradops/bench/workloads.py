"""Benchmark workloads: each defined once, with its shapes, dtype, layout, DirectML / TensorFlow
parameters, deterministic inputs, and the gradops call. The suites that list them are in
``suite.py``.

Shapes are logical. Resample and ReLU workloads keep their arrays in logical NCHW order
(their *canonical* layout); a depthwise workload keeps them in its ``data_format`` order, as
TensorFlow's API takes them. Runners build other memory layouts (channels_last, NHWC) from the
canonical arrays and map their results back to it, so that one reference checks them all.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, ClassVar, Literal, Sequence

import numpy as np

Output = Literal["fresh", "out"]
Shape = tuple[int, ...]

# Channel-last <-> channel-first axis permutations of a 4-D array.
NCHW_TO_NHWC = (0, 2, 3, 1)
NHWC_TO_NCHW = (0, 3, 1, 2)


class NotAvailable(Exception):
    """A contender cannot run a workload: not implemented, not installed, or rejected by the peer.
    The message is the reason shown in the tables."""


@dataclass(frozen=True)
class Variant:
    """One way a contender runs a workload: a memory layout and an output policy.

    ``prepare()`` converts the inputs (untimed) and returns ``(call, to_canonical)``: ``call()``
    runs the operator once and returns its result, ``to_canonical(result)`` gives that result as
    a NumPy array in the workload's canonical layout for the correctness check.
    """

    layout: str
    output: Output
    prepare: Callable[[], tuple[Callable[[], Any], Callable[[Any], np.ndarray]]]


def transpose_layout(array: np.ndarray, source: str, target: str) -> np.ndarray:
    """A view of a 4-D array in ``target`` ("NCHW" or "NHWC") order."""
    if source == target:
        return array
    return array.transpose(NCHW_TO_NHWC if target == "NHWC" else NHWC_TO_NCHW)


def layout_shape(shape: Sequence[int], source: str, target: str) -> Shape:
    """A 4-D shape in ``target`` order."""
    if source == target:
        return tuple(shape)
    return tuple(shape[i] for i in (NCHW_TO_NHWC if target == "NHWC" else NHWC_TO_NCHW))


def gradops_function(name: str) -> Callable[..., np.ndarray]:
    """``gradops.<name>``, or :class:`NotAvailable` while that operator is not written yet."""
    import gradops

    function = getattr(gradops, name, None)
    if function is None:
        raise NotAvailable("not implemented")
    return function


@dataclass(frozen=True)
class Workload:
    id: str
    title: str
    dtype: str

    operator: ClassVar[str]

    @property
    def layout(self) -> str:
        """Axis order of the canonical arrays (inputs, reference, checked results)."""
        return "NCHW"

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    @property
    def tolerance(self) -> float:
        """Largest accepted ``max|result - reference| / max|reference|``. float16: ~1e-2, since
        some peers accumulate in half (SPEC 3.7, 5.6)."""
        return 1e-2 if self.dtype == "float16" else 2e-5

    def rng(self) -> np.random.Generator:
        # Seeded by the id, so every worker process regenerates the same inputs.
        return np.random.default_rng(zlib.crc32(self.id.encode()))

    def random(self, rng: np.random.Generator, shape: Shape) -> np.ndarray:
        return rng.standard_normal(shape, dtype=np.float32).astype(self.dtype, copy=False)

    def inputs(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def result_shape(self) -> Shape:
        raise NotImplementedError

    def bytes_moved(self) -> int:
        """Bytes that must move: every input read once, the output written once."""
        raise NotImplementedError

    def flops(self) -> int:
        raise NotImplementedError

    def gradops_call(self, inputs: dict[str, np.ndarray], *, out: np.ndarray | None = None,
                     backend: str | None = None) -> Callable[[], np.ndarray]:
        """The gradops call with every argument built, as the peers' calls are (the timed call).
        ``inputs`` may be views in another memory layout (same logical shape)."""
        raise NotImplementedError

    def run_gradops(self, inputs: dict[str, np.ndarray], *, out: np.ndarray | None = None,
                    backend: str | None = None) -> np.ndarray:
        return self.gradops_call(inputs, out=out, backend=backend)()

    def framework_reference(self, dy: np.ndarray) -> np.ndarray | None:
        """The peers' own result where their documented convention differs from the DirectML model
        (checked only when a peer fails the main check); ``None`` where they agree."""
        return None

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "operator": self.operator, "dtype": self.dtype,
                "layout": self.layout}


@dataclass(frozen=True)
class ReluGradWorkload(Workload):
    shape: Shape = ()

    operator: ClassVar[str] = "relu_grad"

    @property
    def tolerance(self) -> float:
        return 0.0  # a select: every contender must be bit-exact on finite data (SPEC 4.4)

    def inputs(self) -> dict[str, np.ndarray]:
        rng = self.rng()
        return {"x": self.random(rng, self.shape), "dy": self.random(rng, self.shape)}

    def result_shape(self) -> Shape:
        return self.shape

    def bytes_moved(self) -> int:
        return 3 * math.prod(self.shape) * self.itemsize

    def flops(self) -> int:
        return 0

    def gradops_call(self, inputs, *, out=None, backend=None):
        return partial(gradops_function(self.operator), inputs["x"], inputs["dy"], out=out, backend=backend)

    def describe(self) -> dict[str, Any]:
        return super().describe() | {"shape": list(self.shape)}


@dataclass(frozen=True)
class ResampleGradWorkload(Workload):
    """Gradient of a 2-D resample of the H and W axes of an NCHW tensor: ``dy`` has the forward
    output's shape, the result (dX) the forward input's."""

    mode: Literal["nearest", "linear"] = "nearest"
    grid: Literal["half_pixel", "asymmetric"] = "half_pixel"
    forward_input: Shape = ()
    forward_output: Shape = ()

    operator: ClassVar[str] = "resample_grad1"

    def scales(self) -> tuple[float, ...]:
        """DirectML Scales, ``fl32(out / in)`` per axis (SPEC 6.1 / 6.2)."""
        return tuple(float(np.float32(o / i)) for i, o in zip(self.forward_input, self.forward_output))

    def forward_offsets(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """(InputPixelOffsets, OutputPixelOffsets) of the forward RESAMPLE2 (SPEC 6.1 / 6.2):
        nearest half-pixel (TF half_pixel_centers, PyTorch nearest-exact) is DECREASING with
        (0, -0.5); nearest asymmetric (TF legacy, PyTorch nearest) DECREASING (0, 0); linear
        half-pixel (align_corners=False) (0.5, -0.5). N and C keep scale 1 with (0.5, -0.5),
        whose offsets sum to 0, so they are the identity under every rule (SPEC 3.3 pitfall)."""
        spatial = {("nearest", "half_pixel"): (0.0, -0.5), ("nearest", "asymmetric"): (0.0, 0.0),
                   ("linear", "half_pixel"): (0.5, -0.5)}[self.mode, self.grid]
        ipo = (0.5, 0.5, spatial[0], spatial[0])
        opo = (-0.5, -0.5, spatial[1], spatial[1])
        return ipo, opo

    def grad_kwargs(self) -> dict[str, Any]:
        """``resample_grad1`` keywords. The GRAD op's offsets are the forward ones swapped
        (SPEC 3.6 [DECISION]): InputPixelOffsets = forward opo, OutputPixelOffsets = forward ipo."""
        ipo, opo = self.forward_offsets()
        kwargs: dict[str, Any] = {"mode": self.mode, "scales": self.scales(),
                                  "input_pixel_offsets": opo, "output_pixel_offsets": ipo}
        if self.mode == "nearest":
            kwargs["rounding_direction"] = "decreasing"
        return kwargs

    def framework_indices(self) -> list[np.ndarray]:
        """PyTorch's and TF's nearest source index along H and W, in their float32 arithmetic:
        ``min(floor((o + 0.5) * fl32(in/out)), in-1)`` (half-pixel) or ``min(floor(o * fl32(in/out)),
        in-1)`` (asymmetric) (SPEC 6.1 / 6.2). It multiplies by in/out where DirectML divides by
        out/in, so at exact ties with an inexact ratio (P1, P2) the two pick neighbouring rows
        (SPEC 3.7)."""
        shift = np.float32(0.5 if self.grid == "half_pixel" else 0.0)
        indices = []
        for n_in, n_out in zip(self.forward_input[2:], self.forward_output[2:]):
            source = np.floor((np.arange(n_out, dtype=np.float32) + shift) * np.float32(n_in / n_out))
            indices.append(np.minimum(source, n_in - 1).astype(np.intp))
        return indices

    def framework_reference(self, dy: np.ndarray) -> np.ndarray | None:
        """dX of the frameworks' own nearest gradient (float64), computed independently of gradops
        as ``A_h^T dY A_w`` with one-hot index matrices; ``None`` for linear workloads."""
        if self.mode != "nearest":
            return None
        rows, cols = ((np.arange(n)[None, :] == index[:, None]).astype(np.float64)
                      for n, index in zip(self.forward_input[2:], self.framework_indices()))
        return rows.T @ (dy.astype(np.float64) @ cols)

    def inputs(self) -> dict[str, np.ndarray]:
        return {"dy": self.random(self.rng(), self.forward_output)}

    def result_shape(self) -> Shape:
        return self.forward_input

    def bytes_moved(self) -> int:
        return (math.prod(self.forward_input) + math.prod(self.forward_output)) * self.itemsize

    def flops(self) -> int:
        # Nearest: one add per dY element. Linear: a multiply-add per tap, 2 taps per resampled axis.
        dy_size = math.prod(self.forward_output)
        if self.mode == "nearest":
            return dy_size
        resampled_axes = sum(i != o for i, o in zip(self.forward_input, self.forward_output))
        return 2 * 2 ** resampled_axes * dy_size

    def gradops_call(self, inputs, *, out=None, backend=None):
        return partial(gradops_function(self.operator), inputs["dy"], self.forward_input, **self.grad_kwargs(),
                       out=out, backend=backend)

    def describe(self) -> dict[str, Any]:
        ipo, opo = self.forward_offsets()
        return super().describe() | {"mode": self.mode, "grid": self.grid,
                                     "forward_input": list(self.forward_input),
                                     "forward_output": list(self.forward_output),
                                     "forward_params": {"scales": list(self.scales()),
                                                        "input_pixel_offsets": list(ipo),
                                                        "output_pixel_offsets": list(opo)},
                                     "gradops_kwargs": {k: list(v) if isinstance(v, tuple) else v
                                                        for k, v in self.grad_kwargs().items()}}


@dataclass(frozen=True)
class DepthwiseWorkload(Workload):
    """TF ``DepthwiseConv2dNativeBackpropInput`` (SPEC 5). ``padding`` is ``SAME`` (S1) or
    ``EXPLICIT`` with ``(k // 2) * dilation`` on every side, the symmetric padding of the PyTorch
    models S2 takes its layers from."""

    input_nhwc: Shape = ()
    kernel: int = 3
    multiplier: int = 1
    stride: int = 1
    dilation: int = 1
    data_format: Literal["NHWC", "NCHW"] = "NHWC"
    padding: Literal["SAME", "EXPLICIT"] = "SAME"

    operator: ClassVar[str] = "depthwise_conv2d_native_backprop_input"

    @property
    def layout(self) -> str:
        return self.data_format

    @property
    def channels(self) -> int:
        return self.input_nhwc[3]

    @property
    def effective_kernel(self) -> int:
        return (self.kernel - 1) * self.dilation + 1

    def output_hw(self) -> tuple[int, int]:
        if self.padding == "SAME":  # out = ceil(in / stride) (SPEC 5.3)
            return tuple(-(-n // self.stride) for n in self.input_nhwc[1:3])  # type: ignore[return-value]
        pad = 2 * (self.kernel // 2) * self.dilation
        return tuple((n + pad - self.effective_kernel) // self.stride + 1  # type: ignore[return-value]
                     for n in self.input_nhwc[1:3])

    def pads(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """(before, after) padding of H and W; SAME with an odd total puts the extra element after
        (SPEC 5.3)."""
        if self.padding == "EXPLICIT":
            pad = (self.kernel // 2) * self.dilation
            return (pad, pad), (pad, pad)
        pads = []
        for n, out in zip(self.input_nhwc[1:3], self.output_hw()):
            need = max(0, (out - 1) * self.stride + self.effective_kernel - n)
            pads.append((need // 2, need - need // 2))
        return pads[0], pads[1]

    def explicit_paddings(self) -> list[int]:
        """TF's ``explicit_paddings`` in data_format order (empty for SAME)."""
        if self.padding == "SAME":
            return []
        (top, bottom), (left, right) = self.pads()
        return [p for pair in self.in_format([(0, 0), (top, bottom), (left, right), (0, 0)]) for p in pair]

    def dy_nhwc(self) -> Shape:
        n, _, _, c = self.input_nhwc
        return (n, *self.output_hw(), c * self.multiplier)

    def filter_shape(self) -> Shape:
        return (self.kernel, self.kernel, self.channels, self.multiplier)

    def in_format(self, nhwc: Sequence[Any]) -> list[Any]:
        """A 4-value NHWC attribute or shape in ``data_format`` order."""
        return [nhwc[i] for i in (NHWC_TO_NCHW if self.data_format == "NCHW" else range(4))]

    def tf_attributes(self) -> dict[str, Any]:
        """strides, padding, explicit_paddings, data_format and dilations, as the TF ops take them."""
        return {"strides": self.in_format([1, self.stride, self.stride, 1]), "padding": self.padding,
                "explicit_paddings": self.explicit_paddings(), "data_format": self.data_format,
                "dilations": self.in_format([1, self.dilation, self.dilation, 1])}

    def in_layout(self, rng: np.random.Generator, nhwc: Shape) -> np.ndarray:
        return np.ascontiguousarray(transpose_layout(self.random(rng, nhwc), "NHWC", self.data_format))

    def inputs(self) -> dict[str, np.ndarray]:
        rng = self.rng()
        return {"filter": self.random(rng, self.filter_shape()), "dy": self.in_layout(rng, self.dy_nhwc())}

    def result_shape(self) -> Shape:
        return tuple(self.in_format(self.input_nhwc))

    def bytes_moved(self) -> int:
        return (math.prod(self.input_nhwc) + math.prod(self.dy_nhwc())
                + math.prod(self.filter_shape())) * self.itemsize

    def flops(self) -> int:
        return 2 * math.prod(self.dy_nhwc()) * self.kernel ** 2

    def gradops_call(self, inputs, *, out=None, backend=None):
        attrs = self.tf_attributes()
        return partial(gradops_function(self.operator), self.in_format(self.input_nhwc), inputs["filter"],
                       inputs["dy"], attrs.pop("strides"), attrs.pop("padding"), **attrs, out=out, backend=backend)

    def describe(self) -> dict[str, Any]:
        return super().describe() | {"input_sizes": self.in_format(self.input_nhwc),
                                     "filter": list(self.filter_shape()), "out_backprop": list(
                                         self.in_format(self.dy_nhwc())), "stride": self.stride,
                                     "dilation": self.dilation, "padding": self.padding,
                                     "pads": [list(p) for p in self.pads()], "data_format": self.data_format}


@dataclass(frozen=True)
class DepthwiseForwardWorkload(DepthwiseWorkload):
    """TF ``DepthwiseConv2dNative``: the forward op of a training step (SPEC 5.4)."""

    operator: ClassVar[str] = "depthwise_conv2d_native"

    def inputs(self) -> dict[str, np.ndarray]:
        rng = self.rng()
        return {"x": self.in_layout(rng, self.input_nhwc), "filter": self.random(rng, self.filter_shape())}

    def result_shape(self) -> Shape:
        return tuple(self.in_format(self.dy_nhwc()))

    def gradops_call(self, inputs, *, out=None, backend=None):
        attrs = self.tf_attributes()
        return partial(gradops_function(self.operator), inputs["x"], inputs["filter"], attrs.pop("strides"),
                       attrs.pop("padding"), **attrs, out=out, backend=backend)


@dataclass(frozen=True)
class DepthwiseFilterWorkload(DepthwiseWorkload):
    """TF ``DepthwiseConv2dNativeBackpropFilter``: the weight gradient of a training step (SPEC 5.4).
    A reduction over N, H and W: every contender sums in its own order, hence a looser tolerance."""

    operator: ClassVar[str] = "depthwise_conv2d_native_backprop_filter"

    @property
    def tolerance(self) -> float:
        return 1e-2 if self.dtype == "float16" else 1e-4

    def inputs(self) -> dict[str, np.ndarray]:
        rng = self.rng()
        return {"x": self.in_layout(rng, self.input_nhwc), "dy": self.in_layout(rng, self.dy_nhwc())}

    def result_shape(self) -> Shape:
        return self.filter_shape()

    def gradops_call(self, inputs, *, out=None, backend=None):
        attrs = self.tf_attributes()
        return partial(gradops_function(self.operator), inputs["x"], list(self.filter_shape()), inputs["dy"],
                       attrs.pop("strides"), attrs.pop("padding"), **attrs, out=out, backend=backend)
