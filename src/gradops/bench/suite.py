"""Suite S1 (benchmarks SUITE.md): every workload defined once, with its shapes, dtype, layout,
DirectML / TensorFlow parameters, deterministic inputs, and the gradops call.

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
    """TF ``DepthwiseConv2dNativeBackpropInput`` with SAME padding (SPEC 5)."""

    input_nhwc: Shape = ()
    kernel: int = 3
    multiplier: int = 1
    stride: int = 1
    dilation: int = 1
    data_format: Literal["NHWC", "NCHW"] = "NHWC"

    operator: ClassVar[str] = "depthwise_conv2d_native_backprop_input"

    @property
    def layout(self) -> str:
        return self.data_format

    @property
    def channels(self) -> int:
        return self.input_nhwc[3]

    def output_hw(self) -> tuple[int, int]:
        # SAME: out = ceil(in / stride) (SPEC 5.3).
        return tuple(-(-n // self.stride) for n in self.input_nhwc[1:3])  # type: ignore[return-value]

    def pads(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """(before, after) padding of H and W; an odd total puts the extra element after (SPEC 5.3)."""
        effective = (self.kernel - 1) * self.dilation + 1
        pads = []
        for n, out in zip(self.input_nhwc[1:3], self.output_hw()):
            need = max(0, (out - 1) * self.stride + effective - n)
            pads.append((need // 2, need - need // 2))
        return pads[0], pads[1]

    def dy_nhwc(self) -> Shape:
        n, _, _, c = self.input_nhwc
        return (n, *self.output_hw(), c * self.multiplier)

    def filter_shape(self) -> Shape:
        return (self.kernel, self.kernel, self.channels, self.multiplier)

    def in_format(self, nhwc: Sequence[int]) -> list[int]:
        """A 4-value NHWC attribute or shape in ``data_format`` order."""
        return [nhwc[i] for i in (NHWC_TO_NCHW if self.data_format == "NCHW" else range(4))]

    def inputs(self) -> dict[str, np.ndarray]:
        rng = self.rng()
        dy = self.random(rng, self.dy_nhwc())
        return {"filter": self.random(rng, self.filter_shape()),
                "dy": np.ascontiguousarray(transpose_layout(dy, "NHWC", self.data_format))}

    def result_shape(self) -> Shape:
        return tuple(self.in_format(self.input_nhwc))

    def bytes_moved(self) -> int:
        return (math.prod(self.input_nhwc) + math.prod(self.dy_nhwc())
                + math.prod(self.filter_shape())) * self.itemsize

    def flops(self) -> int:
        return 2 * math.prod(self.dy_nhwc()) * self.kernel ** 2

    def gradops_call(self, inputs, *, out=None, backend=None):
        spatial = [1, self.stride, self.stride, 1]
        dilations = [1, self.dilation, self.dilation, 1]
        return partial(gradops_function(self.operator), self.in_format(self.input_nhwc), inputs["filter"],
                       inputs["dy"], self.in_format(spatial), "SAME", data_format=self.data_format,
                       dilations=self.in_format(dilations), out=out, backend=backend)

    def describe(self) -> dict[str, Any]:
        return super().describe() | {"input_sizes": self.in_format(self.input_nhwc),
                                     "filter": list(self.filter_shape()), "out_backprop": list(
                                         self.in_format(self.dy_nhwc())), "stride": self.stride,
                                     "dilation": self.dilation, "padding": "SAME",
                                     "data_format": self.data_format}


def _s1(quick: bool) -> list[Workload]:
    """Suite S1 as SUITE.md lists it; ``quick`` keeps every parameter and ratio but shrinks N, C
    and (where the ratio allows) H and W, for tests and smoke runs."""
    def pick(full, small):
        return small if quick else full

    up = pick(((16, 64, 64, 64), (16, 64, 128, 128)), ((2, 8, 8, 8), (2, 8, 16, 16)))  # (in, out)
    down = up[::-1]
    n3 = pick(((8, 32, 100, 100), (8, 32, 150, 50)), ((2, 4, 10, 10), (2, 4, 15, 5)))
    nc = pick((8, 32), (2, 4))
    p1, p2 = ((nc + (20, 20), nc + (46, 54)), (nc + (20, 20), nc + (92, 108)))
    d1 = pick((32, 112, 112, 32), (2, 12, 12, 8))
    d2 = pick((32, 112, 112, 64), (2, 12, 12, 8))
    d3 = pick((32, 14, 14, 512), (2, 7, 7, 16))
    d4 = pick((8, 56, 56, 128), (2, 10, 10, 8))
    relu = pick((16, 64, 128, 128), (2, 8, 16, 16))
    half_pixel = "half-pixel centres (PyTorch nearest-exact, TF half_pixel_centers)"

    def resample(id: str, title: str, dtype: str, mode: str, grid: str, shapes: tuple[Shape, Shape]):
        return ResampleGradWorkload(id, title, dtype, mode=mode, grid=grid, forward_input=shapes[0],
                                    forward_output=shapes[1])

    return [
        ReluGradWorkload("R1", "ReLU grad", "float32", shape=relu),
        ReluGradWorkload("R2", "ReLU grad, float16", "float16", shape=relu),
        resample("N1", f"nearest grad, {half_pixel}, 2x", "float32", "nearest", "half_pixel", up),
        resample("N2", "nearest grad, asymmetric (PyTorch nearest, TF legacy), 2x", "float32", "nearest",
                 "asymmetric", up),
        resample("N3", "nearest grad, half-pixel, ratios 1.5 x 0.5", "float32", "nearest", "half_pixel", n3),
        resample("L1", "linear grad, half-pixel (bilinear align_corners=False), 2x", "float32", "linear",
                 "half_pixel", up),
        resample("L2", "linear grad, half-pixel, 0.5x downsample", "float32", "linear", "half_pixel", down),
        resample("L3", "L1 in float16", "float16", "linear", "half_pixel", up),
        DepthwiseWorkload("D1", "depthwise backprop input, 3x3, stride 1", "float32", input_nhwc=d1),
        DepthwiseWorkload("D2", "depthwise backprop input, 3x3, stride 2", "float32", input_nhwc=d2, stride=2),
        DepthwiseWorkload("D3", "depthwise backprop input, 3x3, 14x14x512", "float32", input_nhwc=d3),
        DepthwiseWorkload("D4", "depthwise backprop input, 5x5, multiplier 2", "float32", input_nhwc=d4,
                          kernel=5, multiplier=2),
        DepthwiseWorkload("D5", "D1 with dilations 2", "float32", input_nhwc=d1, dilation=2),
        DepthwiseWorkload("D6", "D1 in NCHW", "float32", input_nhwc=d1, data_format="NCHW"),
        DepthwiseWorkload("D7", "D1 in float16", "float16", input_nhwc=d1),
        resample("P1", "nearest grad, half-pixel, ratios 2.3 x 2.7", "float32", "nearest", "half_pixel", p1),
        resample("P2", "nearest grad, asymmetric, ratios 4.6 x 5.4", "float32", "nearest", "asymmetric", p2),
    ]


def suite(quick: bool = False) -> dict[str, Workload]:
    """Suite S1 by workload id, in SUITE.md order."""
    return {w.id: w for w in _s1(quick)}


WORKLOAD_IDS: tuple[str, ...] = tuple(suite(quick=True))
