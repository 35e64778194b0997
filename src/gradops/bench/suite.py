"""Suites S1 (benchmarks SUITE.md) and S2 (layers of real networks): lists of workloads."""

from __future__ import annotations

from functools import partial
from typing import Callable

from .workloads import (DepthwiseFilterWorkload, DepthwiseForwardWorkload, DepthwiseWorkload, ReluGradWorkload,
                        ResampleGradWorkload, Shape, Workload)


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


def _s2(quick: bool) -> list[Workload]:
    """Suite S2: layers of real networks at their real shapes (batch 32 unless noted): the
    depthwise layers of MobileNetV2, EfficientNet-B0 and ConvNeXt-T in all three ops of a training
    step, padded symmetrically as their PyTorch models are; the resampling of FPN, U-Net and
    segmentation heads; ReLU gradients from 16 KiB to 256 MiB. ``quick`` shrinks N and C."""
    def nhwc(n, h, w, c):
        return (min(n, 2), h, w, min(c, 12)) if quick else (n, h, w, c)

    def nchw(n, c, h, w):
        return (min(n, 2), min(c, 3), h, w) if quick else (n, c, h, w)

    def backprop(id, title, shape, kernel=3, stride=1, dtype="float32", workload=DepthwiseWorkload):
        return workload(id, title, dtype, input_nhwc=nhwc(*shape), kernel=kernel, stride=stride,
                        padding="EXPLICIT")

    forward = partial(backprop, workload=DepthwiseForwardWorkload)
    filter_grad = partial(backprop, workload=DepthwiseFilterWorkload)

    def resample(id, title, mode, grid, forward_input, forward_output, dtype="float32"):
        return ResampleGradWorkload(id, title, dtype, mode=mode, grid=grid, forward_input=nchw(*forward_input),
                                    forward_output=nchw(*forward_output))

    mbv2_s2, mbv2_56, mbv2_14 = (32, 112, 112, 96), (32, 56, 56, 144), (32, 14, 14, 576)
    effnet_28, effnet_7, convnext_56 = (32, 28, 28, 240), (32, 7, 7, 1152), (32, 56, 56, 96)
    batch1 = (1, 112, 112, 32)
    return [
        backprop("B1", "MobileNetV2 3x3 stride 2, 112x112x96", mbv2_s2, stride=2),
        backprop("B2", "MobileNetV2 3x3, 56x56x144", mbv2_56),
        backprop("B3", "MobileNetV2 3x3, 14x14x576", mbv2_14),
        backprop("B4", "EfficientNet-B0 5x5, 28x28x240", effnet_28, kernel=5),
        backprop("B5", "EfficientNet-B0 5x5, 7x7x1152", effnet_7, kernel=5),
        backprop("B6", "ConvNeXt-T 7x7, 56x56x96", convnext_56, kernel=7),
        backprop("B7", "MobileNetV2 3x3, batch 1, 112x112x32", batch1),
        backprop("B8", "B2 in float16", mbv2_56, dtype="float16"),
        forward("F1", "forward: B2's layer", mbv2_56),
        forward("F2", "forward: B4's layer (5x5)", effnet_28, kernel=5),
        forward("F3", "forward: B6's layer (7x7)", convnext_56, kernel=7),
        forward("F4", "forward: B7's layer (batch 1)", batch1),
        filter_grad("W1", "filter grad: MobileNetV2 3x3, 112x112x32", (32, 112, 112, 32)),
        filter_grad("W2", "filter grad: B2's layer", mbv2_56),
        filter_grad("W3", "filter grad: B5's layer (5x5, 7x7x1152)", effnet_7, kernel=5),
        filter_grad("W4", "filter grad: B6's layer (7x7)", convnext_56, kernel=7),
        resample("U1", "FPN nearest 2x (asymmetric), 25x38 -> 50x76, 256 channels", "nearest", "asymmetric",
                 (8, 256, 25, 38), (8, 256, 50, 76)),
        resample("U2", "nearest 3x (half-pixel)", "nearest", "half_pixel", (8, 64, 32, 32), (8, 64, 96, 96)),
        resample("U3", "U-Net bilinear 2x, 96 channels", "linear", "half_pixel", (8, 96, 56, 56),
                 (8, 96, 112, 112)),
        resample("U4", "segmentation head bilinear 4x, 21 classes", "linear", "half_pixel", (4, 21, 64, 64),
                 (4, 21, 256, 256)),
        resample("U5", "bilinear 1.5x", "linear", "half_pixel", (8, 64, 40, 40), (8, 64, 60, 60)),
        resample("U6", "U3 in float16", "linear", "half_pixel", (8, 96, 56, 56), (8, 96, 112, 112),
                 dtype="float16"),
        resample("U7", "nearest 4x (asymmetric)", "nearest", "asymmetric", (8, 32, 28, 28), (8, 32, 112, 112)),
        ReluGradWorkload("A1", "ReLU grad, 16 KiB", "float32", shape=nchw(1, 16, 16, 16)),
        ReluGradWorkload("A2", "ReLU grad, 512 KiB", "float32", shape=nchw(8, 64, 16, 16)),
        ReluGradWorkload("A3", "ReLU grad, 4 MiB", "float32", shape=nchw(8, 32, 64, 64)),
        ReluGradWorkload("A4", "ReLU grad, 256 MiB", "float32", shape=nchw(64, 64, 128, 128)),
    ]


# The size sweep: one workload per family and size, 16 KiB to 256 MiB of output, in powers of 4.
SWEEP_FAMILIES = {"SR": "ReLU grad", "SN": "nearest grad 2x", "SL": "linear grad 2x",
                  "SD": "depthwise backprop input 3x3"}
SWEEP_BYTES = tuple(1 << k for k in range(14, 29, 2))


def _size_label(nbytes: int) -> str:
    return f"{nbytes >> 20}M" if nbytes >= 1 << 20 else f"{nbytes >> 10}K"


def _sweep(quick: bool) -> list[Workload]:
    """Each family's output (dX; the ReLU grad's result) grows from 16 KiB to 256 MiB of float32:
    the spatial size first (up to 128 x 128), then the batch. ``quick`` keeps the four smallest."""
    workloads: list[Workload] = []
    for nbytes in SWEEP_BYTES[:4] if quick else SWEEP_BYTES:
        k = nbytes.bit_length() - 1 - 2  # log2 of the float32 elements
        side = 1 << min((k - 4) // 2, 7)
        nchw = (max(1, (1 << k) // (16 * side * side)), 16, side, side)
        side = 1 << min((k - 5) // 2, 7)
        nhwc = (max(1, (1 << k) // (32 * side * side)), side, side, 32)
        label = _size_label(nbytes)
        workloads += [
            ReluGradWorkload(f"SR{label}", f"ReLU grad, {label}B", "float32", shape=nchw),
            ResampleGradWorkload(f"SN{label}", f"nearest grad 2x, {label}B", "float32", mode="nearest",
                                 grid="half_pixel", forward_input=nchw,
                                 forward_output=(*nchw[:2], 2 * nchw[2], 2 * nchw[3])),
            ResampleGradWorkload(f"SL{label}", f"linear grad 2x, {label}B", "float32", mode="linear",
                                 grid="half_pixel", forward_input=nchw,
                                 forward_output=(*nchw[:2], 2 * nchw[2], 2 * nchw[3])),
            DepthwiseWorkload(f"SD{label}", f"depthwise backprop input 3x3, {label}B", "float32", input_nhwc=nhwc),
        ]
    return workloads


SUITES: dict[str, Callable[[bool], list[Workload]]] = {"S1": _s1, "S2": _s2, "sweep": _sweep}


def suite(quick: bool = False, name: str = "S1") -> dict[str, Workload]:
    """One suite's workloads by id, in their listed order (S1: SUITE.md's)."""
    return {w.id: w for w in SUITES[name](quick)}


def all_workloads(quick: bool = False) -> dict[str, Workload]:
    """Every suite's workloads by id (ids are unique across suites)."""
    return {w.id: w for make in SUITES.values() for w in make(quick)}


WORKLOAD_IDS: tuple[str, ...] = tuple(all_workloads())
