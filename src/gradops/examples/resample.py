"""E1-E10, E18 and E19: the resample family's worked examples (SPEC section 7).

Expected numbers are typed in from the SPEC. Nearest results are exact; linear results with
fractional weights are compared with rtol 1e-6 (float32 weights). GRAD offsets follow the
per-tensor convention of SPEC 3.6 unless a check says "doc-literal".
"""

from __future__ import annotations

import numpy as np

from ..resample import resample, resample1, resample2, resample_grad, resample_grad1
from . import Check, Example

F32 = np.float32
LINEAR_RTOL = 1e-6  # float32 weights such as 5/6 are inexact


def _a(values: object, shape: tuple[int, ...] | None = None, dtype: type = F32) -> np.ndarray:
    array = np.array(values, dtype=dtype)
    return array if shape is None else array.reshape(shape)


def _w(values: object, n: int) -> np.ndarray:
    """A 1-D list as the W axis of a [1, 1, 1, n] tensor (the 4-D-only ops)."""
    return _a(values, (1, 1, 1, n))


def _per_axis(value: float) -> list[float]:
    return [value] * 4


# --- E1: the documented example -----------------------------------------------------------------
E1_X = [[1, 2], [3, 4]]
E1_DY = [4, 5, 6]
E1_SCALES = [1, 1, 0.5, 1.5]


def _e1(backend: str | None) -> list[Check]:
    x, dy = _a(E1_X, (1, 1, 2, 2)), _a(E1_DY, (1, 1, 1, 3))
    checks = []
    forward = [  # (label, op, extra arguments, forward (ipo, opo), Y, dX)
        ("RESAMPLE1 half-pixel (0.5, -0.5)", "r1", {}, (0.5, -0.5), [3, 4, 4], [[0, 0], [4, 11]]),
        ("RESAMPLE1 TF legacy (0.5, 0)", "r1", {}, (0.5, 0.0), [1, 1, 2], [[9, 6], [0, 0]]),
        ("RESAMPLE1 (0, 0)", "r1", {}, (0.0, 0.0), [1, 2, 2], [[4, 11], [0, 0]]),
        ("RESAMPLE2 DEC (0.5, -0.5)", "r2", {"rounding_direction": "decreasing"}, (0.5, -0.5), [1, 1, 2],
         [[9, 6], [0, 0]]),
        ("RESAMPLE2 DEC (0, 0)", "r2", {"rounding_direction": "decreasing"}, (0.0, 0.0), [1, 1, 2], [[9, 6], [0, 0]]),
        ("RESAMPLE2 INC (0.5, -0.5)", "r2", {"rounding_direction": "increasing"}, (0.5, -0.5), [3, 4, 4],
         [[0, 0], [4, 11]]),
        ("RESAMPLE2 INC (1.0, -0.5)", "r2", {"rounding_direction": "increasing"}, (1.0, -0.5), [1, 1, 2],
         [[9, 6], [0, 0]]),
    ]
    for label, op, extra, (ipo, opo), y_expected, dx_expected in forward:
        fwd, grad = (resample1, resample_grad) if op == "r1" else (resample2, resample_grad1)
        y = fwd(x, (1, 1, 1, 3), scales=E1_SCALES, input_pixel_offsets=_per_axis(ipo),
                output_pixel_offsets=_per_axis(opo), backend=backend, **extra)
        # Per-tensor GRAD call: InputPixelOffsets = forward opo, OutputPixelOffsets = forward ipo.
        dx = grad(dy, (1, 1, 2, 2), scales=E1_SCALES, input_pixel_offsets=_per_axis(opo),
                  output_pixel_offsets=_per_axis(ipo), backend=backend, **extra)
        checks.append(Check(f"{label}: Y", y, _a(y_expected, (1, 1, 1, 3))))
        checks.append(Check(f"{label}: dX", dx, _a(dx_expected, (1, 1, 2, 2))))
    checks.append(Check("RESAMPLE (v0) = RESAMPLE1 half-pixel: Y",
                        resample(x, (1, 1, 1, 3), scales=E1_SCALES, backend=backend), _a([3, 4, 4], (1, 1, 1, 3))))
    checks.append(Check("GRAD1 DEC, In -0.5 / Out 0.5 (defaults)",
                        resample_grad1(dy, (1, 1, 2, 2), rounding_direction="decreasing", scales=E1_SCALES,
                                       backend=backend), _a([[9, 6], [0, 0]], (1, 1, 2, 2))))
    checks.append(Check("GRAD, In 0 / Out 0.5",
                        resample_grad(dy, (1, 1, 2, 2), scales=E1_SCALES, input_pixel_offsets=_per_axis(0),
                                      output_pixel_offsets=_per_axis(0.5), backend=backend),
                        _a([[9, 6], [0, 0]], (1, 1, 2, 2))))
    checks.append(Check("GRAD doc-literal, In 0.5 / Out 0 (= forward TF legacy offsets)",
                        resample_grad(dy, (1, 1, 2, 2), scales=E1_SCALES, input_pixel_offsets=_per_axis(0.5),
                                      output_pixel_offsets=_per_axis(0), offset_convention="doc-literal",
                                      backend=backend), _a([[9, 6], [0, 0]], (1, 1, 2, 2))))
    return checks


# --- E2: which offset does the "-0.5" remark move? -------------------------------------------------
E2_INDICES = {  # Scale: (RESAMPLE1, RESAMPLE2 DEC ipo-0.5, RESAMPLE2 DEC opo-0.5)
    1.4: ([0, 1, 1, 2, 3, 3, 4], [0, 1, 1, 2, 3, 3, 4], [0, 0, 1, 2, 3, 3, 4]),
    3.0: ([0, 0, 0, 1, 1, 1, 2], [0, 0, 0, 1, 1, 1, 2], [0, 0, 0, 0, 1, 1, 1]),
}
E2_DY = [8, 6, 6, 8, 5, 7, 7]


def _e2(backend: str | None) -> list[Check]:
    positions = np.arange(5, dtype=F32)  # resampling the indices shows which input each output reads
    checks = []
    for scale, (r1, r2_ipo, r2_opo) in E2_INDICES.items():
        y1 = resample1(positions.reshape(1, 1, 1, 5), (1, 1, 1, 7), scales=[1, 1, 1, scale], backend=backend)
        y2 = resample2(positions, (7,), rounding_direction="decreasing", scales=[scale],
                       input_pixel_offsets=[0.0], output_pixel_offsets=[-0.5], backend=backend)
        y3 = resample2(positions, (7,), rounding_direction="decreasing", scales=[scale],
                       input_pixel_offsets=[0.5], output_pixel_offsets=[-1.0], backend=backend)
        checks += [Check(f"Scale {scale}: RESAMPLE1 indices", y1, _w(r1, 7)),
                   Check(f"Scale {scale}: RESAMPLE2 DEC, ipo-0.5 indices", y2, _a(r2_ipo)),
                   Check(f"Scale {scale}: RESAMPLE2 DEC, opo-0.5 (remark as printed) indices", y3, _a(r2_opo))]
    dy = _a(E2_DY)
    checks.append(Check("Scale 3: GRAD In -0.5 / Out 0.5",
                        resample_grad(dy.reshape(1, 1, 1, 7), (1, 1, 1, 5), scales=[1, 1, 1, 3], backend=backend),
                        _w([20, 20, 7, 0, 0], 5)))
    checks.append(Check("Scale 3: GRAD1 DEC, In -0.5 / Out 0.5-0.5 (per-tensor)",
                        resample_grad1(dy, (5,), rounding_direction="decreasing", scales=[3],
                                       input_pixel_offsets=[-0.5], output_pixel_offsets=[0.0], backend=backend),
                        _a([20, 20, 7, 0, 0])))
    checks.append(Check("Scale 3 doc-literal: GRAD In 0.5 / Out -0.5",
                        resample_grad(dy.reshape(1, 1, 1, 7), (1, 1, 1, 5), scales=[1, 1, 1, 3],
                                      input_pixel_offsets=_per_axis(0.5), output_pixel_offsets=_per_axis(-0.5),
                                      offset_convention="doc-literal", backend=backend),
                        _w([20, 20, 7, 0, 0], 5)))
    checks.append(Check("Scale 3 doc-literal: GRAD1 DEC, In 0.5 / Out -0.5-0.5 (the remark fails)",
                        resample_grad1(dy, (5,), rounding_direction="decreasing", scales=[3],
                                       input_pixel_offsets=[0.5], output_pixel_offsets=[-1.0],
                                       offset_convention="doc-literal", backend=backend),
                        _a([28, 19, 0, 0, 0])))
    return checks


# --- E3: ties, 1-D upsample -------------------------------------------------------------------------
E3_X = [10, 20, 30]
E3_DY = [1, 2, 3, 4, 5, 6]


def _e3(backend: str | None) -> list[Check]:
    checks = []
    zero = {"input_pixel_offsets": [0.0], "output_pixel_offsets": [0.0]}
    for dtype in (np.float32, np.float16):
        x, dy = _a(E3_X, dtype=dtype), _a(E3_DY, dtype=dtype)
        y1 = resample1(x.reshape(1, 1, 1, 3), (1, 1, 1, 6), scales=[1, 1, 1, 2], input_pixel_offsets=_per_axis(0),
                       output_pixel_offsets=_per_axis(0), backend=backend)
        g1 = resample_grad(dy.reshape(1, 1, 1, 6), (1, 1, 1, 3), scales=[1, 1, 1, 2],
                           input_pixel_offsets=_per_axis(0), output_pixel_offsets=_per_axis(0), backend=backend)
        name = np.dtype(dtype).name
        checks += [Check(f"RESAMPLE1 {name}", y1, _a([10, 20, 20, 30, 30, 30], (1, 1, 1, 6), dtype)),
                   Check(f"RESAMPLE_GRAD {name}", g1, _a([1, 5, 15], (1, 1, 1, 3), dtype))]
        for direction, y_expected, dx_expected in (("decreasing", [10, 10, 20, 20, 30, 30], [3, 7, 11]),
                                                   ("increasing", [10, 20, 20, 30, 30, 30], [1, 5, 15])):
            y = resample2(x, (6,), rounding_direction=direction, scales=[2], backend=backend, **zero)
            dx = resample_grad1(dy, (3,), rounding_direction=direction, scales=[2], backend=backend, **zero)
            checks += [Check(f"RESAMPLE2 {direction} {name}", y, _a(y_expected, dtype=dtype)),
                       Check(f"RESAMPLE_GRAD1 {direction} {name}", dx, _a(dx_expected, dtype=dtype))]
    return checks


# --- E4: GRAD1 downsample where every sample is a tie --------------------------------------------
E4_DY = [10, 20]


def _e4(backend: str | None) -> list[Check]:
    dy = _a(E4_DY)
    grad1 = {"scales": [0.5], "input_pixel_offsets": [-0.5], "output_pixel_offsets": [0.5], "backend": backend}
    return [
        Check("GRAD1 NEAREST DEC", resample_grad1(dy, (4,), rounding_direction="decreasing", **grad1),
              _a([10, 0, 20, 0])),
        Check("GRAD1 NEAREST INC", resample_grad1(dy, (4,), rounding_direction="increasing", **grad1),
              _a([0, 10, 0, 20])),
        Check("GRAD floor(x+0.5)", resample_grad(dy.reshape(1, 1, 1, 2), (1, 1, 1, 4), scales=[1, 1, 1, 0.5],
                                                 backend=backend), _w([0, 10, 0, 20], 4)),
        Check("GRAD1 LINEAR", resample_grad1(dy, (4,), mode="linear", **grad1), _a([5, 5, 10, 10])),
        Check("GRAD1 NEAREST DEC doc-literal (samples x = 2o - 0.5)",
              resample_grad1(dy, (4,), rounding_direction="decreasing", offset_convention="doc-literal", **grad1),
              _a([10, 20, 0, 0])),
    ]


# --- E5: fractional-scale LINEAR --------------------------------------------------------------------
E5_X = [0, 10, 20, 30]
E5_WEIGHTS = [[1, 0, 0, 0], [0.5, 0.5, 0, 0], [0, 5 / 6, 1 / 6, 0], [0, 1 / 6, 5 / 6, 0], [0, 0, 0.5, 0.5],
              [0, 0, 0, 1]]


def _e5(backend: str | None) -> list[Check]:
    x, dy = _a(E5_X), _a([1, 2, 3, 4, 5, 6])
    y = resample2(x, (6,), mode="linear", scales=[1.5], backend=backend)
    # Resampling the identity along its second axis gives the weight matrix, transposed.
    basis = resample2(np.eye(4, dtype=F32), (4, 6), mode="linear", scales=[1, 1.5], backend=backend)
    dx = resample_grad1(dy, (4,), mode="linear", scales=[1.5], backend=backend)
    y1 = resample1(x.reshape(1, 1, 1, 4), (1, 1, 1, 6), mode="linear", scales=[1, 1, 1, 1.5], backend=backend)
    return [
        Check("RESAMPLE2 LINEAR Y", y, _a([0, 5, 35 / 3, 55 / 3, 25, 30]), LINEAR_RTOL),
        Check("RESAMPLE1 LINEAR Y", y1, _w([0, 5, 35 / 3, 55 / 3, 25, 30], 6), LINEAR_RTOL),
        Check("weight rows", basis.T, _a(E5_WEIGHTS), LINEAR_RTOL),
        Check("GRAD1 LINEAR dX of dY = [1..6] (sum 21)", dx, _a([2, 25 / 6, 19 / 3, 8.5]), LINEAR_RTOL),
    ]


# --- E6: LINEAR edge clamping ------------------------------------------------------------------------
def _e6(backend: str | None) -> list[Check]:
    x = _w([1, 2, 4], 3)
    return [
        Check("RESAMPLE1 LINEAR Y", resample1(x, (1, 1, 1, 6), mode="linear", scales=[1, 1, 1, 2], backend=backend),
              _w([1, 1.25, 1.75, 2.5, 3.5, 4], 6)),
        Check("GRAD LINEAR of ones", resample_grad(np.ones((1, 1, 1, 6), F32), (1, 1, 1, 3), mode="linear",
                                                   scales=[1, 1, 1, 2], backend=backend), _w([2, 2, 2], 3)),
    ]


# --- E7: crop and clamp ------------------------------------------------------------------------------
def _e7(backend: str | None) -> list[Check]:
    x = _w([1, 2, 3, 4], 4)
    return [
        Check("out 4 at Scale 2 (crop)", resample1(x, (1, 1, 1, 4), scales=[1, 1, 1, 2], backend=backend),
              _w([1, 1, 2, 2], 4)),
        Check("out 6 at Scale 1 (clamp)", resample1(x, (1, 1, 1, 6), scales=[1, 1, 1, 1], backend=backend),
              _w([1, 2, 3, 4, 4, 4], 6)),
        Check("GRAD of the clamp case, dY = [1..6]",
              resample_grad(_w([1, 2, 3, 4, 5, 6], 6), (1, 1, 1, 4), scales=[1, 1, 1, 1], backend=backend),
              _w([1, 2, 3, 15], 4)),
    ]


# --- E8: resampling the channel and batch axes -----------------------------------------------------------
E8_X = [[1, 2], [10, 20]]


def _e8(backend: str | None) -> list[Check]:
    x = _a(E8_X, (1, 2, 1, 2))
    dy = _a([[1, 2], [3, 4], [5, 6], [7, 8]], (1, 4, 1, 2))
    channels = {"scales": [1, 2, 1, 1], "backend": backend}
    return [
        Check("NEAREST channels", resample1(x, (1, 4, 1, 2), **channels),
              _a([[1, 2], [1, 2], [10, 20], [10, 20]], (1, 4, 1, 2))),
        Check("LINEAR channels", resample1(x, (1, 4, 1, 2), mode="linear", **channels),
              _a([[1, 2], [3.25, 6.5], [7.75, 15.5], [10, 20]], (1, 4, 1, 2))),
        Check("LINEAR GRAD channels", resample_grad(dy, (1, 2, 1, 2), mode="linear", **channels),
              _a([[4.5, 6.5], [11.5, 13.5]], (1, 2, 1, 2))),
        Check("LINEAR batch 2 -> 3 at Scale 1.5",
              resample1(_a([1, 5], (2, 1, 1, 1)), (3, 1, 1, 1), mode="linear", scales=[1.5, 1, 1, 1],
                        backend=backend), _a([1, 3, 5], (3, 1, 1, 1))),
    ]


# --- E9: GRAD1 with DimensionCount 1 and 3 -------------------------------------------------------------
E9_DY3 = [[[1, 2, 3, 4], [5, 6, 7, 8]], [[9, 10, 11, 12], [13, 14, 15, 16]]]


def _e9(backend: str | None) -> list[Check]:
    dy3 = _a(E9_DY3)
    grad1 = {"input_pixel_offsets": [-0.5] * 3, "output_pixel_offsets": [0.5] * 3, "scales": [1, 2, 2],
             "backend": backend}
    return [
        Check("1-D NEAREST DEC, Scale 2.5",
              resample_grad1(_a([1, 2, 3, 4, 5]), (2,), rounding_direction="decreasing", scales=[2.5],
                             input_pixel_offsets=[-0.5], output_pixel_offsets=[0.5], backend=backend), _a([10, 5])),
        Check("3-D LINEAR", resample_grad1(dy3, (2, 1, 2), mode="linear", **grad1),
              _a([[[14.5, 21.5]], [[46.5, 53.5]]])),
        Check("3-D NEAREST INC", resample_grad1(dy3, (2, 1, 2), rounding_direction="increasing", **grad1),
              _a([[[6, 30]], [[22, 78]]])),
    ]


# --- E10: RESAMPLE v0 = RESAMPLE1 (0.5, -0.5) ---------------------------------------------------------------
E10_X = [[1, 2], [3, 4]]


def _e10(backend: str | None) -> list[Check]:
    x = _a(E10_X, (1, 1, 2, 2))
    nearest = [[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]]
    linear = [[1, 1.25, 1.75, 2], [1.5, 1.75, 2.25, 2.5], [2.5, 2.75, 3.25, 3.5], [3, 3.25, 3.75, 4]]
    checks = []
    for name, mode, expected in (("NEAREST", "nearest", nearest), ("LINEAR", "linear", linear)):
        expected_array = _a(expected, (1, 1, 4, 4))
        checks += [Check(f"RESAMPLE {name}", resample(x, (1, 1, 4, 4), mode=mode, scales=[1, 1, 2, 2],
                                                     backend=backend), expected_array),
                   Check(f"RESAMPLE1 {name} (0.5, -0.5)", resample1(x, (1, 1, 4, 4), mode=mode,
                                                                   backend=backend), expected_array)]
    return checks


# --- E18: float16 accumulation ------------------------------------------------------------------------
def _e18(backend: str | None) -> list[Check]:
    ones = np.ones(4096, np.float16)
    return [
        Check("GRAD1 NEAREST 4096 -> 1", resample_grad1(ones, (1,), rounding_direction="decreasing",
                                                        backend=backend), _a([4096], dtype=np.float16)),
        Check("GRAD1 LINEAR 4096 -> 1", resample_grad1(ones, (1,), mode="linear", backend=backend),
              _a([4096], dtype=np.float16)),
        Check("GRAD NEAREST 64x64 -> 1x1", resample_grad(ones.reshape(1, 1, 64, 64), (1, 1, 1, 1), backend=backend),
              _a([4096], (1, 1, 1, 1), np.float16)),
    ]


# --- E19: the real DirectML run ---------------------------------------------------------------------
E19_X = [[3.86005284, 45.18463077, 87.67153743, 98.78210347, 66.37414347, 3.41158349],
         [86.14930501, 95.9813372, 76.87126314, 16.52591355, 65.98782867, 25.47092156],
         [22.56010548, 92.08479613, 85.80876635, 92.63166027, 29.91620871, 75.40461275],
         [62.06375451, 1.77121588, 99.47231285, 11.44055014, 25.39634271, 67.02175102]]
E19_Y = [[95.9813372, 16.52591355, 25.47092156], [1.77121588, 11.44055014, 67.02175102]]


def _e19(backend: str | None) -> list[Check]:
    y = resample(_a(E19_X, (1, 1, 4, 6)), (1, 1, 2, 3), scales=[1, 1, 0.5, 0.5], backend=backend)
    return [Check("RESAMPLE NEAREST, what DirectML returned", y, _a(E19_Y, (1, 1, 2, 3)))]


EXAMPLES = (
    Example("E1", "The documented example [[1,2],[3,4]] -> [1,1,2] under each rule and grid (SPEC 7)",
            {"X": E1_X, "Scales": E1_SCALES, "dY": E1_DY}, _e1),
    Example("E2", "Which offset the '-0.5' remark moves: RESAMPLE2 / GRAD1 vs RESAMPLE1 / GRAD",
            {"n_in": 5, "n_out": 7, "Scales": list(E2_INDICES), "dY": E2_DY}, _e2),
    Example("E3", "Ties in a 1-D upsample, offsets (0, 0): floor(x+0.5), floor and ceil",
            {"X": E3_X, "Scale": 2, "dY": E3_DY}, _e3),
    Example("E4", "GRAD1 downsample where every sample is a tie", {"dY": E4_DY, "Scale": 0.5}, _e4),
    Example("E5", "Fractional-scale LINEAR, half-pixel, Scale 1.5", {"X": E5_X, "dY": [1, 2, 3, 4, 5, 6]}, _e5),
    Example("E6", "LINEAR edge clamping", {"X": [1, 2, 4], "Scale": 2, "dY": "ones(6)"}, _e6),
    Example("E7", "Crop and clamp (RESAMPLE1 NEAREST, half-pixel)", {"X": [1, 2, 3, 4]}, _e7),
    Example("E8", "Resampling the channel and batch axes", {"X channels": E8_X, "Scales": [1, 2, 1, 1]}, _e8),
    Example("E9", "GRAD1 with DimensionCount 1 and 3", {"dY (3-D)": E9_DY3, "Scales": [1, 2, 2]}, _e9),
    Example("E10", "RESAMPLE v0 = RESAMPLE1 on the half-pixel grid, x2", {"X": E10_X}, _e10),
    Example("E18", "float16: 4096 gradient contributions of 1.0 onto one element give 4096",
            {"dY": "ones(4096), float16"}, _e18),
    Example("E19", "Real DirectML run: a tie-only nearest downsample rounds ties up", {"X": E19_X}, _e19),
)
