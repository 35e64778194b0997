"""E12-E16: TensorFlow depthwise convolution and its gradients (SPEC 5, numbers typed from SPEC 7)."""

from __future__ import annotations

import numpy as np

from ..depthwise import (DepthwiseConv2dNativeBackpropInputDesc, depthwise_conv2d_native,
                         depthwise_conv2d_native_backprop_filter, depthwise_conv2d_native_backprop_input)
from . import Check, Example

# Every number below is a small integer, exact in float16, float32 and float64.
DTYPES = ("float32", "float64", "float16")

E12_F0 = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
E12_DY0 = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
E12_DX0 = [[15, 34, 20, 44, 25], [36, 80, 46, 100, 56], [30, 64, 35, 74, 40], [66, 140, 76, 160, 86],
           [45, 94, 50, 104, 55]]
E12_Y0 = [[128, 241, 184], [441, 681, 453], [320, 457, 280]]
E12_Y1 = [[16, 33, 28], [69, 117, 87], [76, 123, 88]]
E12_INNER = 23835

E13_DX = [[1, 2, 4, 2, 4, 2], [4, 5, 10, 5, 10, 5], [8, 10, 20, 10, 20, 10], [4, 5, 10, 5, 10, 5],
          [8, 10, 20, 10, 20, 10], [4, 5, 10, 5, 10, 5]]

E14_F = [[1, 0, -1], [0, 2, 0], [1, 0, 1]]
E14_VALID_Y = [[68]]
E14_DX = [[7, 0, 0, 0, -7], [0, 0, 0, 0, 0], [0, 0, 14, 0, 0], [0, 0, 0, 0, 0], [7, 0, 0, 0, 7]]
E14_SAME_Y = [[15, 18, 32, 20, 23], [30, 33, 52, 35, 38], [42, 44, 68, 52, 56], [24, 25, 32, 45, 48],
              [29, 30, 42, 60, 63]]

E15_F1 = [[1, 2], [3, 4]]
E15_PADS_NHWC = [0, 0, 1, 0, 0, 2, 0, 0]
E15_PADS_NCHW = [0, 0, 0, 0, 1, 0, 0, 2]
E15_DX0 = [[2, 4, 4], [2, 4, 4], [1, 2, 2]]
E15_DX1 = [[4, 10, 10], [4, 10, 10], [3, 7, 7]]

E16_X = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
E16_DY1 = [[1, 0], [0, 0]]
E16_DF0 = [[12, 16], [24, 28]]
E16_DF1 = [[1, 2], [4, 5]]


def _grid(values: list, dtype: str) -> np.ndarray:
    """A 2-D grid as an NHWC tensor [1, H, W, 1]."""
    return np.array(values, dtype=dtype)[None, :, :, None]


def _e12(backend: str | None) -> list[Check]:
    checks = []
    for dtype in DTYPES:
        filt = np.stack([np.array(E12_F0), np.ones((3, 3))], axis=-1)[:, :, None, :].astype(dtype)
        dy = np.stack([np.array(E12_DY0), np.full((3, 3), 10)], axis=-1)[None].astype(dtype)
        dx = depthwise_conv2d_native_backprop_input([1, 5, 5, 1], filt, dy, [1, 2, 2, 1], "SAME", backend=backend)
        x = np.arange(1, 26).reshape(1, 5, 5, 1).astype(dtype)
        y = depthwise_conv2d_native(x, filt, [1, 2, 2, 1], "SAME", backend=backend)
        checks += [
            Check(f"BackpropInput dX[...,0] {dtype}", dx[0, :, :, 0], np.array(E12_DX0, dtype)),
            Check(f"forward Y[...,0] {dtype}", y[0, :, :, 0], np.array(E12_Y0, dtype)),
            Check(f"forward Y[...,1] {dtype}", y[0, :, :, 1], np.array(E12_Y1, dtype)),
            Check(f"<dY, Y> and <dX, X> {dtype}",
                  np.array([np.vdot(dy.astype(np.float64), y.astype(np.float64)),
                            np.vdot(dx.astype(np.float64), x.astype(np.float64))]),
                  np.array([E12_INNER, E12_INNER], np.float64)),
        ]
    return checks


def _e13(backend: str | None) -> list[Check]:
    desc = DepthwiseConv2dNativeBackpropInputDesc("float32", [1, 2, 2, 1], "SAME")
    geometry = desc.geometry([1, 6, 6, 1], (3, 3, 1, 1), (1, 3, 3, 1))
    checks = [Check("SAME in 6, k 3, s 2: out, pad_top, pad_bottom",
                    np.array([geometry.out_height, geometry.pad_top, geometry.pad_bottom]), np.array([3, 0, 1]))]
    for dtype in DTYPES:
        filt = np.arange(1, 10).reshape(3, 3, 1, 1).astype(dtype)
        dx = depthwise_conv2d_native_backprop_input([1, 6, 6, 1], filt, np.ones((1, 3, 3, 1), dtype),
                                                    [1, 2, 2, 1], "SAME", backend=backend)
        checks.append(Check(f"BackpropInput dX {dtype}", dx[0, :, :, 0], np.array(E13_DX, dtype)))
    return checks


def _e14(backend: str | None) -> list[Check]:
    checks = []
    for dtype in DTYPES:
        x = np.arange(1, 26).reshape(1, 5, 5, 1).astype(dtype)
        filt = np.array(E14_F, dtype)[:, :, None, None]
        dilated = {"dilations": [1, 2, 2, 1], "backend": backend}
        y_valid = depthwise_conv2d_native(x, filt, [1, 1, 1, 1], "VALID", **dilated)
        dx = depthwise_conv2d_native_backprop_input([1, 5, 5, 1], filt, np.full((1, 1, 1, 1), 7, dtype),
                                                    [1, 1, 1, 1], "VALID", **dilated)
        y_same = depthwise_conv2d_native(x, filt, [1, 1, 1, 1], "SAME", **dilated)
        checks += [Check(f"VALID forward Y {dtype}", y_valid[0, :, :, 0], np.array(E14_VALID_Y, dtype)),
                   Check(f"VALID BackpropInput dX {dtype}", dx[0, :, :, 0], np.array(E14_DX, dtype)),
                   Check(f"SAME forward Y {dtype}", y_same[0, :, :, 0], np.array(E14_SAME_Y, dtype))]
    return checks


def _e15(backend: str | None) -> list[Check]:
    checks = []
    for dtype in DTYPES:
        filt = np.stack([np.ones((2, 2)), np.array(E15_F1)], axis=-1)[:, :, :, None].astype(dtype)
        y = depthwise_conv2d_native(np.ones((1, 3, 3, 2), dtype), filt, [1, 1, 1, 1], "EXPLICIT",
                                    explicit_paddings=E15_PADS_NHWC, backend=backend)
        dx = depthwise_conv2d_native_backprop_input([1, 3, 3, 2], filt, np.ones((1, 3, 4, 2), dtype), [1, 1, 1, 1],
                                                    "EXPLICIT", explicit_paddings=E15_PADS_NHWC, backend=backend)
        dx_nchw = depthwise_conv2d_native_backprop_input([1, 2, 3, 3], filt, np.ones((1, 2, 3, 4), dtype),
                                                         [1, 1, 1, 1], "EXPLICIT", explicit_paddings=E15_PADS_NCHW,
                                                         data_format="NCHW", backend=backend)
        checks += [Check(f"forward output shape {dtype}", np.array(y.shape), np.array([1, 3, 4, 2])),
                   Check(f"NHWC dX[...,0] {dtype}", dx[0, :, :, 0], np.array(E15_DX0, dtype)),
                   Check(f"NHWC dX[...,1] {dtype}", dx[0, :, :, 1], np.array(E15_DX1, dtype)),
                   Check(f"NCHW dX[:,0] {dtype}", dx_nchw[0, 0], np.array(E15_DX0, dtype)),
                   Check(f"NCHW dX[:,1] {dtype}", dx_nchw[0, 1], np.array(E15_DX1, dtype))]
    return checks


def _e16(backend: str | None) -> list[Check]:
    checks = []
    for dtype in DTYPES:
        dy = np.stack([np.ones((2, 2)), np.array(E16_DY1)], axis=-1)[None].astype(dtype)
        df = depthwise_conv2d_native_backprop_filter(_grid(E16_X, dtype), [2, 2, 1, 2], dy, [1, 1, 1, 1], "VALID",
                                                     backend=backend)
        checks += [Check(f"BackpropFilter dF[:,:,0,0] {dtype}", df[:, :, 0, 0], np.array(E16_DF0, dtype)),
                   Check(f"BackpropFilter dF[:,:,0,1] {dtype}", df[:, :, 0, 1], np.array(E16_DF1, dtype))]
    return checks


EXAMPLES = (
    Example("E12", "Depthwise BackpropInput, stride 2, SAME, multiplier 2 (SPEC 5.4)",
            {"input_sizes": [1, 5, 5, 1], "F[:,:,0,0]": E12_F0, "F[:,:,0,1]": "ones", "dY[...,0]": E12_DY0,
             "dY[...,1]": 10, "strides": [1, 2, 2, 1], "padding": "SAME"}, _e12),
    Example("E13", "Depthwise SAME with odd padding: pads 0/1, the extra one after (SPEC 5.3)",
            {"input_sizes": [1, 6, 6, 1], "F": "1..9 (3x3)", "dY": "ones (3x3)", "strides": [1, 2, 2, 1],
             "padding": "SAME"}, _e13),
    Example("E14", "Depthwise dilation 2 (SPEC 5.6: honoured, unlike TF's CPU raw kernels)",
            {"X": "1..25 (5x5)", "F": E14_F, "dilations": [1, 2, 2, 1], "dY (VALID)": [[7]]}, _e14),
    Example("E15", "Depthwise EXPLICIT padding, NHWC and NCHW (SPEC 5.3)",
            {"input_sizes": [1, 3, 3, 2], "F[:,:,0,0]": "ones", "F[:,:,1,0]": E15_F1,
             "explicit_paddings (NHWC)": E15_PADS_NHWC, "explicit_paddings (NCHW)": E15_PADS_NCHW,
             "dY": "ones"}, _e15),
    Example("E16", "Depthwise BackpropFilter (SPEC 5.4)",
            {"X": E16_X, "filter_sizes": [2, 2, 1, 2], "dY[...,0]": "ones (2x2)", "dY[...,1]": E16_DY1,
             "padding": "VALID"}, _e16),
)
