"""Framework conventions (SPEC 6.1-6.4, 3.3) without peers: the mapping tables typed in from
the SPEC, the parameter validation, the rank adaptation checked against a brute-force
resampler written here, and SPEC worked examples run through the conventions."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from gradops import DescriptorError, DmlResampleParams, GradopsError, ShapeError, UnsupportedError

F32 = np.float32
FLT_MAX = float(np.finfo(np.float32).max)
IDENTITY = (1.0, 0.5, -0.5)  # (S, forward ipo, forward opo) of an axis that is not resampled


def axes_of(params: DmlResampleParams) -> list[tuple[float, float, float]]:
    return list(zip(params.scales, params.input_pixel_offsets, params.output_pixel_offsets))


# --- brute force (SPEC 3.2-3.4, 3.6), loops over every element ---------------------------------------

def brute_taps(n_in: int, n_out: int, scale: float, ipo: float, opo: float, mode: str, rule: str
               ) -> list[list[tuple[int, float]]]:
    taps = []
    for o in range(n_out):
        x = F32(F32(F32(o) - F32(opo)) / F32(scale)) - F32(ipo)
        if mode == "nearest":
            k = {"half_up": math.floor(F32(x + F32(0.5))), "floor": math.floor(x), "ceil": math.ceil(x)}[rule]
            taps.append([(min(max(k, 0), n_in - 1), 1.0)])
        else:
            xc = min(max(float(x), 0.0), n_in - 1.0)
            i0 = math.floor(xc)
            w1 = xc - i0
            taps.append([(i, w) for i, w in ((i0, 1 - w1), (min(i0 + 1, n_in - 1), w1)) if w != 0])
    return taps


def brute_matrix_entries(params: DmlResampleParams, in_shape: tuple[int, ...], out_shape: tuple[int, ...]):
    """Yield (output index, input index, weight) of every nonzero entry of the forward matrix."""
    rule = "half_up" if params.operator == "RESAMPLE1" else {"decreasing": "floor", "increasing": "ceil",
                                                              None: "floor"}[params.rounding_direction]
    per_axis = [brute_taps(i, o, s, a, b, params.mode, rule)
                for i, o, (s, a, b) in zip(in_shape, out_shape, axes_of(params))]
    for out_index in itertools.product(*(range(n) for n in out_shape)):
        for combo in itertools.product(*(per_axis[d][o] for d, o in enumerate(out_index))):
            yield out_index, tuple(i for i, _ in combo), math.prod(w for _, w in combo)


def brute_forward(params, x, out_shape):
    y = np.zeros(out_shape)
    for o, i, w in brute_matrix_entries(params, x.shape, out_shape):
        y[o] += w * float(x[i])
    return y


def brute_gradient(params, dy, in_shape):
    dx = np.zeros(in_shape)
    for o, i, w in brute_matrix_entries(params, in_shape, dy.shape):
        dx[i] += w * float(dy[o])
    return dx


# --- TensorFlow table (SPEC 6.1) -------------------------------------------------------------------------

# (method, align_corners, half_pixel_centers) -> forward (ipo, opo), GRAD call (In, Out),
# equivalent RESAMPLE2 (ipo, opo): the three right-hand columns of the SPEC 6.1 table.
TF_TABLE = {
    ("nearest", False, False): ((0.5, 0.0), (0.0, 0.5), (0.0, 0.0)),
    ("nearest", True, False): ((0.0, 0.0), (0.0, 0.0), (-0.5, 0.0)),
    ("nearest", False, True): ((0.5, -0.5), (-0.5, 0.5), (0.0, -0.5)),
    ("bilinear", False, False): ((0.0, 0.0), (0.0, 0.0), (0.0, 0.0)),
    ("bilinear", True, False): ((0.0, 0.0), (0.0, 0.0), (0.0, 0.0)),
    ("bilinear", False, True): ((0.5, -0.5), (-0.5, 0.5), (0.5, -0.5)),
}


@pytest.mark.parametrize("key", TF_TABLE, ids=lambda k: f"{k[0]}-ac{int(k[1])}-hpc{int(k[2])}")
def test_tensorflow_table(key):
    method, ac, hpc = key
    forward, grad_call, resample2_offsets = TF_TABLE[key]
    params = DmlResampleParams.from_tensorflow((2, 5, 9, 3), (7, 4), method, ac, hpc)
    assert params.operator == "RESAMPLE1" and params.rounding_direction is None
    assert params.mode == ("nearest" if method == "nearest" else "linear")
    # S = fl32(1 / tf_scale): 5 -> 7 and 9 -> 4, or (in-1)/(out-1) with align_corners
    scales = (F32(1) / (F32(4) / F32(6)), F32(1) / (F32(8) / F32(3))) if ac else \
        (F32(1) / (F32(5) / F32(7)), F32(1) / (F32(9) / F32(4)))
    assert params.scales == (1.0, float(scales[0]), float(scales[1]), 1.0)
    assert axes_of(params)[0] == axes_of(params)[3] == IDENTITY
    assert (params.input_pixel_offsets[1:3], params.output_pixel_offsets[1:3]) == tuple(zip(forward, forward))
    scales_grad, grad_in, grad_out = params.grad_params()
    assert scales_grad == params.scales
    assert grad_in == (-0.5, grad_call[0], grad_call[0], -0.5)
    assert grad_out == (0.5, grad_call[1], grad_call[1], 0.5)
    equivalent = params.as_resample2()
    assert equivalent.operator == "RESAMPLE2" and equivalent.scales == params.scales
    assert equivalent.rounding_direction == ("decreasing" if method == "nearest" else None)
    assert (equivalent.input_pixel_offsets[1], equivalent.output_pixel_offsets[1]) == resample2_offsets


def test_tensorflow_scale_is_the_inverse_of_tensorflows_float32_scale():
    # 8 -> 13: TF's scale fl32(8/13) inverts to 1.6249998807907104, not 13/8 = 1.625 (SPEC 6.1)
    assert DmlResampleParams.from_tensorflow((1, 8, 8, 1), (13, 13)).scales[1] == 1.6249998807907104
    assert DmlResampleParams.from_tensorflow((1, 6, 6, 1), (4, 4)).scales[1] == 0.6666666865348816


@pytest.mark.parametrize("method", ["nearest", "bilinear"])
def test_tensorflow_align_corners_size_one(method):
    # in == 1: TF's scale is 0; DML gets S = out/in. out == 1: TF's scale is in/out.
    params = DmlResampleParams.from_tensorflow((1, 1, 5, 1), (4, 1), method, align_corners=True)
    assert params.scales[1:3] == (4.0, 0.20000000298023224)


def test_tensorflow_legacy_nearest_float32_quotient():
    """SPEC 3.2: legacy nearest 6 -> 4 reads floor(o * 1.5) = [0, 1, 3, 4]; in float32 the
    quotient 2 / fl32(2/3) rounds to 3.0 (float64 would floor to 2)."""
    x = np.arange(6, dtype=np.float32).reshape(1, 6, 1, 1)
    y = DmlResampleParams.from_tensorflow(x.shape, (4, 1)).forward(x, (1, 4, 1, 1))
    assert_array_equal(y.ravel(), [0, 1, 3, 4])


def test_tensorflow_align_corners_inexact_tie_follows_the_float32_model():
    """SPEC 3.7: align_corners 8 -> 5, TF rounds o * 1.75 = 3.5 up to 4; the float32 model
    computes 2 / fl32(4/7) = 3.4999998 and reads 3. The contract is the float32 model."""
    x = np.arange(8, dtype=np.float32).reshape(1, 8, 1, 1)
    y = DmlResampleParams.from_tensorflow(x.shape, (5, 1), align_corners=True).forward(x, (1, 5, 1, 1))
    assert_array_equal(y.ravel(), [0, 2, 3, 5, 7])


def test_tensorflow_validation():
    with pytest.raises(DescriptorError) as info:
        DmlResampleParams.from_tensorflow((1, 4, 4, 1), (2, 2), "nearest", True, True)
    assert info.value.field == "half_pixel_centers"
    for kwargs, field in [({"input_shape": (4, 4, 1)}, "input_shape"), ({"output_size": (2,)}, "output_size"),
                          ({"output_size": (2, 0)}, "output_size[1]"), ({"method": "bicubic"}, "method"),
                          ({"align_corners": 1}, "align_corners")]:
        arguments = {"input_shape": (1, 4, 4, 1), "output_size": (2, 2), **kwargs}
        with pytest.raises(GradopsError) as info:
            DmlResampleParams.from_tensorflow(**arguments)
        assert info.value.field == field


# --- PyTorch table (SPEC 6.2) -----------------------------------------------------------------------------

@pytest.mark.parametrize("mode, ac, expected", [
    ("nearest", None, ("nearest", "decreasing", 0.0, 0.0)),
    ("nearest-exact", None, ("nearest", "decreasing", 0.0, -0.5)),
    ("bilinear", False, ("linear", None, 0.5, -0.5)),
    ("bilinear", None, ("linear", None, 0.5, -0.5)),
    ("bilinear", True, ("linear", None, 0.0, 0.0)),
])
def test_torch_table(mode, ac, expected):
    dml_mode, direction, ipo, opo = expected
    params = DmlResampleParams.from_torch((2, 3, 3, 8), (7, 5), mode, ac)
    assert (params.operator, params.mode, params.rounding_direction) == ("RESAMPLE2", dml_mode, direction)
    assert axes_of(params)[:2] == [IDENTITY, IDENTITY]
    scales = (F32(6) / F32(2), F32(4) / F32(7)) if ac else (F32(7) / F32(3), F32(5) / F32(8))
    assert axes_of(params)[2:] == [(float(scales[0]), ipo, opo), (float(scales[1]), ipo, opo)]


def test_torch_scale_factor():
    # S = fl32(scale_factor); output size floor(in * factor)
    params = DmlResampleParams.from_torch((1, 1, 4, 5), mode="bilinear", scale_factor=(1.7, 0.6))
    assert params.scales[2:] == (float(F32(1.7)), float(F32(0.6)))
    x = np.zeros((1, 1, 4, 5), np.float32)
    assert params.forward(x, (1, 1, 6, 3)).shape == (1, 1, 6, 3)
    # a single number applies to every spatial axis
    assert DmlResampleParams.from_torch((1, 1, 4), mode="nearest-exact", scale_factor=2.5).scales[2] == 2.5


def test_torch_scale_factor_shortcuts():
    """torch ignores the factor where the size is unchanged (linear kernels; nearest index
    function) and maps out == 2*in to o // 2 (nearest): the mapping does the same."""
    nearest = DmlResampleParams.from_torch((1, 1, 5, 3, 4), mode="nearest", scale_factor=(1.19, 2.2, 1.5))
    assert axes_of(nearest)[2:] == [IDENTITY, (2.0, 0.0, 0.0), (1.5, 0.0, 0.0)]
    linear = DmlResampleParams.from_torch((1, 1, 5, 3), mode="bilinear", scale_factor=(1.19, 2.2))
    assert axes_of(linear)[2:] == [IDENTITY, (float(F32(2.2)), 0.5, -0.5)]
    exact = DmlResampleParams.from_torch((1, 1, 5), mode="nearest-exact", scale_factor=1.19)
    assert axes_of(exact)[2] == (float(F32(1.19)), 0.0, -0.5)
    # align_corners ignores the factor; sizes of 1 give out/in
    corners = DmlResampleParams.from_torch((1, 1, 4, 1), mode="bilinear", align_corners=True, scale_factor=(2.0, 3.0))
    assert corners.scales[2:] == (float(F32(7) / F32(3)), 3.0)


def test_torch_validation():
    cases = [
        ({"mode": "nearest", "align_corners": False}, DescriptorError, "align_corners"),
        ({"mode": "bilinear", "input_shape": (1, 1, 4)}, ShapeError, "input_shape"),
        ({"mode": "trilinear"}, ShapeError, "input_shape"),
        ({"mode": "area"}, DescriptorError, "mode"),
        ({"scale_factor": 2.0}, DescriptorError, "output_size"),
        ({"output_size": None}, DescriptorError, "output_size"),
        ({"output_size": None, "scale_factor": (2.0, -1.0)}, DescriptorError, "scale_factor[1]"),
        ({"output_size": None, "scale_factor": (0.1, 1.0)}, ShapeError, "scale_factor[0]"),
        ({"output_size": (3,)}, ShapeError, "output_size"),
        ({"input_shape": (1, 1)}, ShapeError, "input_shape"),
    ]
    for kwargs, error, field in cases:
        arguments = {"input_shape": (1, 1, 4, 4), "output_size": (3, 3), **kwargs}
        with pytest.raises(error) as info:
            DmlResampleParams.from_torch(**arguments)
        assert info.value.field == field, kwargs


# --- JAX (SPEC 6.3) -----------------------------------------------------------------------------------------

def test_jax_table():
    nearest = DmlResampleParams.from_jax((2, 3, 4, 5), (3, 3, 8, 2), "nearest")
    assert (nearest.operator, nearest.mode, nearest.rounding_direction) == ("RESAMPLE2", "nearest", "decreasing")
    assert axes_of(nearest) == [(1.5, 0.0, -0.5), IDENTITY, (2.0, 0.0, -0.5), (0.4000000059604645, 0.0, -0.5)]
    for method in ("linear", "bilinear", "trilinear"):
        linear = DmlResampleParams.from_jax((2, 3, 4, 5), (3, 3, 8, 2), method)
        assert (linear.mode, linear.rounding_direction) == ("linear", None)
        assert axes_of(linear) == [(1.5, 0.5, -0.5), IDENTITY, (2.0, 0.5, -0.5), (0.4000000059604645, 0.5, -0.5)]
    # antialias only matters for linear downsampling
    assert DmlResampleParams.from_jax((4,), (8,), "linear", antialias=True).scales == (2.0,)
    assert DmlResampleParams.from_jax((4,), (2,), "nearest", antialias=True).scales == (0.5,)


def test_jax_validation():
    for kwargs, error, field in [({"antialias": True}, UnsupportedError, "antialias"),
                                 ({"method": "cubic"}, UnsupportedError, "method"),
                                 ({"method": "area"}, DescriptorError, "method"),
                                 ({"output_shape": (2,)}, ShapeError, "output_shape")]:
        arguments = {"input_shape": (4, 4), "output_shape": (2, 4), "method": "linear", **kwargs}
        with pytest.raises(error) as info:
            DmlResampleParams.from_jax(**arguments)
        assert info.value.field == field


# --- ONNX (SPEC 6.4 and the nearest_mode table of 3.3) ---------------------------------------------------

@pytest.mark.parametrize("transform, expected", [
    ("half_pixel", [(2.0, 0.5, -0.5), (0.6000000238418579, 0.5, -0.5)]),
    ("asymmetric", [(2.0, 0.0, 0.0), (0.6000000238418579, 0.0, 0.0)]),
    ("tf_half_pixel_for_nn", [(2.0, 0.0, -0.5), (0.6000000238418579, 0.0, -0.5)]),
    ("pytorch_half_pixel", [(2.0, 0.5, -0.5), (0.6000000238418579, 0.5, -0.5)]),
    ("align_corners", [(float(F32(7) / F32(3)), 0.0, 0.0), (0.5, 0.0, 0.0)]),
])
def test_onnx_table(transform, expected):
    params = DmlResampleParams.from_onnx((1, 2, 4, 5), (1, 2, 8, 3), "linear", transform)
    assert (params.operator, params.mode, params.rounding_direction) == ("RESAMPLE2", "linear", None)
    assert axes_of(params)[2:] == expected


def test_onnx_degenerate_axes_use_flt_max():
    # pytorch_half_pixel (in <= 1 or out <= 1) and align_corners (in or out <= 1): FLT_MAX, (0, 0)
    for transform in ("pytorch_half_pixel", "align_corners"):
        params = DmlResampleParams.from_onnx((1, 4), (3, 1), "linear", transform)
        assert axes_of(params) == [(FLT_MAX, 0.0, 0.0), (FLT_MAX, 0.0, 0.0)]


def test_onnx_tf_crop_and_resize():
    params = DmlResampleParams.from_onnx((1, 4, 5), (1, 8, 3), "linear", "tf_crop_and_resize",
                                         roi=[0, 0.25, 0.2, 1, 0.75, 0.8])
    # in 4 -> out 8 over [0.25, 0.75]: x = 0.75 + o * 0.5 * 3 / 7; in 5 -> 3 over [0.2, 0.8]: x = 0.8 + o * 1.2
    assert params.axes[1] == (float(F32(7 / 1.5)), -0.75, 0.0)
    assert params.axes[2][0] == pytest.approx(2 / 2.4, rel=1e-7)
    assert params.axes[2][1:] == (float(F32(-0.8)), 0.0)
    assert params.axes[0] == (1.0, 0.0, 0.0)  # out == 1: the roi centre (0 + 1)/2 * (1 - 1) = 0
    x = np.arange(20, dtype=np.float32).reshape(1, 4, 5)
    y = params.forward(x, (1, 8, 3))
    rows = 0.75 + np.arange(8) * 1.5 / 7
    cols = 0.8 + np.arange(3) * 1.2
    assert_allclose(y[0], 5 * rows[:, None] + cols[None, :], rtol=1e-5)  # x[r, c] = 5 r + c is linear
    single = DmlResampleParams.from_onnx((6,), (1,), "linear", "tf_crop_and_resize", roi=[0.2, 0.6])
    assert single.axes[0] == (1.0, float(F32(-2.0)), 0.0)  # x = (0.2 + 0.6) / 2 * 5 = 2


def test_onnx_half_pixel_symmetric_with_scales():
    params = DmlResampleParams.from_onnx((1, 1, 4, 5), (1, 1, 8, 3), "linear", "half_pixel_symmetric",
                                         scales=[1, 1, 2.1, 0.7])
    # ipo = 0.5 - (in/2)(1 - out/(S in)): 0.5 - 2 (1 - 8/8.4) and 0.5 - 2.5 (1 - 3/3.5)
    assert params.input_pixel_offsets[2] == pytest.approx(0.5 - 2 * (1 - 8 / 8.4), rel=1e-6)
    assert params.input_pixel_offsets[3] == pytest.approx(0.5 - 2.5 * (1 - 3 / 3.5), rel=1e-6)
    assert params.scales[2:] == (float(F32(2.1)), float(F32(0.7)))
    # scales derived from the sizes: out/(S in) = 1 up to the float32 rounding of S, so ipo ~ 0.5
    derived = DmlResampleParams.from_onnx((1, 1, 4, 5), (1, 1, 8, 3), "linear", "half_pixel_symmetric")
    assert derived.input_pixel_offsets == pytest.approx((0.5,) * 4, abs=1e-6)
    assert derived.scales == (1.0, 1.0, 2.0, 0.6000000238418579)


@pytest.mark.parametrize("nearest_mode, direction, shift", [
    ("round_prefer_floor", "increasing", 0.5), ("round_prefer_ceil", "decreasing", -0.5),
    ("floor", "decreasing", 0.0), ("ceil", "increasing", 0.0)])
def test_onnx_nearest_modes(nearest_mode, direction, shift):
    params = DmlResampleParams.from_onnx((1, 1, 4, 5), (1, 1, 8, 3), "nearest", "half_pixel", nearest_mode)
    assert params.rounding_direction == direction
    assert params.input_pixel_offsets == (0.5 + shift,) * 4
    assert params.output_pixel_offsets == (-0.5,) * 4


def test_onnx_validation():
    for kwargs, error, field in [
        ({"mode": "cubic"}, UnsupportedError, "mode"),
        ({"coordinate_transformation_mode": "crop"}, DescriptorError, "coordinate_transformation_mode"),
        ({"nearest_mode": "round"}, DescriptorError, "nearest_mode"),
        ({"coordinate_transformation_mode": "tf_crop_and_resize"}, DescriptorError, "roi"),
        ({"coordinate_transformation_mode": "tf_crop_and_resize", "roi": [0, 0.5, 1, 0.5]}, UnsupportedError,
         "roi[1]"),
        ({"scales": [1, 0]}, DescriptorError, "scales[1]"),
        ({"output_shape": (1, 2, 3)}, ShapeError, "output_shape"),
    ]:
        arguments = {"input_shape": (2, 4), "output_shape": (2, 8), **kwargs}
        with pytest.raises(error) as info:
            DmlResampleParams.from_onnx(**arguments)
        assert info.value.field == field, kwargs


# --- the parameters object ----------------------------------------------------------------------------------

def test_params_are_float32_values_and_validated():
    params = DmlResampleParams("RESAMPLE2", "linear", None, [0.1, 3], (0.1, 0), (0, -0.5))
    assert params.scales == (float(F32(0.1)), 3.0) and params.input_pixel_offsets[0] == float(F32(0.1))
    bad = [
        (("RESAMPLE3", "linear", None, (1,), (0,), (0,)), "operator"),
        (("RESAMPLE1", "cubic", None, (1,), (0,), (0,)), "mode"),
        (("RESAMPLE1", "nearest", "decreasing", (1,), (0,), (0,)), "rounding_direction"),
        (("RESAMPLE2", "nearest", None, (1,), (0,), (0,)), "rounding_direction"),
        (("RESAMPLE2", "linear", None, (), (), ()), "scales"),
        (("RESAMPLE2", "linear", None, (1, 0), (0, 0), (0, 0)), "scales[1]"),
        (("RESAMPLE2", "linear", None, (1, 1e39), (0, 0), (0, 0)), "scales[1]"),
        (("RESAMPLE2", "linear", None, (1,), (math.inf,), (0,)), "input_pixel_offsets[0]"),
        (("RESAMPLE2", "linear", None, (1,), (0,), (0, 0)), "output_pixel_offsets"),
    ]
    for arguments, field in bad:
        with pytest.raises(DescriptorError) as info:
            DmlResampleParams(*arguments)
        assert info.value.field == field, arguments


def test_grad_params_swap_the_offsets():
    params = DmlResampleParams("RESAMPLE2", "nearest", "increasing", (1.5, 2), (0.25, 1), (-0.5, 0))
    assert params.grad_params() == ((1.5, 2.0), (-0.5, 0.0), (0.25, 1.0))


def test_operator_equivalents():
    r1 = DmlResampleParams("RESAMPLE1", "nearest", None, (1, 1, 2, 1.5), (0.5,) * 4, (-0.5,) * 4)
    r2 = r1.as_resample2()
    assert (r2.operator, r2.rounding_direction, r2.input_pixel_offsets) == ("RESAMPLE2", "decreasing", (0.0,) * 4)
    assert r2.output_pixel_offsets == r1.output_pixel_offsets and r2.as_resample1() == r1
    assert r1.as_resample1() is r1 and r2.as_resample2() is r2
    linear = DmlResampleParams("RESAMPLE1", "linear", None, (2,), (0.5,), (-0.5,))
    assert linear.as_resample2() == DmlResampleParams("RESAMPLE2", "linear", None, (2,), (0.5,), (-0.5,))
    with pytest.raises(UnsupportedError) as info:
        DmlResampleParams("RESAMPLE2", "nearest", "increasing", (2,), (0,), (0,)).as_resample1()
    assert info.value.field == "rounding_direction"


# --- rank adaptation, against the brute force -----------------------------------------------------------

RANK_CASES = [
    # RESAMPLE1 below 4-D: padded with leading identity axes
    (DmlResampleParams("RESAMPLE1", "nearest", None, (1.5, 0.75), (0.5, 0.5), (0.0, -0.5)), (3, 5), (4, 3)),
    (DmlResampleParams("RESAMPLE1", "linear", None, (2.5,), (0.5,), (-0.5,)), (3,), (7,)),
    # 5-D torch trilinear: N and C merge
    (DmlResampleParams.from_torch((2, 3, 2, 3, 4), (3, 2, 5), "trilinear"), (2, 3, 2, 3, 4), (2, 3, 3, 2, 5)),
    (DmlResampleParams.from_torch((2, 2, 3, 2, 2), (5, 2, 3), "nearest"), (2, 2, 3, 2, 2), (2, 2, 5, 2, 3)),
    # 6-D JAX with two separated runs of unchanged axes
    (DmlResampleParams.from_jax((2, 2, 3, 2, 2, 3), (2, 2, 4, 2, 2, 2), "linear"), (2, 2, 3, 2, 2, 3),
     (2, 2, 4, 2, 2, 2)),
    # identity axes whose offsets are not the canonical ones still merge (ONNX keeps its transform)
    (DmlResampleParams.from_onnx((2, 3, 1, 3, 4), (2, 3, 1, 6, 2), "nearest", "half_pixel", "round_prefer_floor"),
     (2, 3, 1, 3, 4), (2, 3, 1, 6, 2)),
]


@pytest.mark.parametrize("params, in_shape, out_shape", RANK_CASES)
def test_rank_adaptation_against_brute_force(params, in_shape, out_shape, backend):
    rng = np.random.default_rng(len(in_shape) * 100 + out_shape[-1])
    x = rng.uniform(0.5, 1.5, in_shape).astype(np.float32)
    dy = rng.uniform(0.5, 1.5, out_shape).astype(np.float32)
    assert_allclose(params.forward(x, out_shape, backend=backend), brute_forward(params, x, out_shape), rtol=1e-6)
    assert_allclose(params.gradient(dy, in_shape, backend=backend), brute_gradient(params, dy, in_shape), rtol=1e-6)


def test_rank_adaptation_out_argument():
    params = DmlResampleParams.from_torch((2, 3, 2, 3, 4), (3, 2, 5), "trilinear")
    x = np.random.default_rng(0).random((2, 3, 2, 3, 4), dtype=np.float32)
    out = np.full((2, 3, 3, 2, 5), np.nan, np.float32)
    assert params.forward(x, out.shape, out=out) is out
    assert_allclose(out, brute_forward(params, x, out.shape), rtol=1e-6)
    with pytest.raises(ShapeError) as info:  # a view that cannot merge N and C without a copy
        params.forward(x, out.shape, out=np.zeros((3, 2, 3, 2, 5), np.float32).transpose(1, 0, 2, 3, 4))
    assert info.value.field == "out"


def test_rank_adaptation_errors():
    six = DmlResampleParams.from_jax((2,) * 6, (3, 2, 3, 2, 3, 2), "nearest")
    with pytest.raises(ShapeError) as info:  # five runs of axes remain after merging
        six.forward(np.zeros((2,) * 6, np.float32), (3, 2, 3, 2, 3, 2))
    assert info.value.field == "x.ndim"
    params = DmlResampleParams.from_torch((1, 1, 4, 4), (2, 2))
    with pytest.raises(ShapeError) as info:
        params.forward(np.zeros((1, 4, 4), np.float32), (1, 1, 2, 2))
    assert info.value.field == "x.ndim"
    with pytest.raises(ShapeError) as info:
        params.gradient(np.zeros((1, 1, 2, 2), np.float32), (1, 1, 4))
    assert info.value.field == "input_sizes"


# --- SPEC worked examples through the conventions ----------------------------------------------------------

def test_e1_onnx_default_reproduces_the_documented_example():
    """E1: ONNX's defaults (half_pixel, round_prefer_floor -> RESAMPLE2 INC, ipo 1.0) give the
    documented [[1,2],[3,4]] -> [1,1,2] and dY [4,5,6] -> [[9,6],[0,0]]."""
    params = DmlResampleParams.from_onnx((1, 1, 2, 2), (1, 1, 1, 3), scales=(1, 1, 0.5, 1.5))
    assert (params.rounding_direction, params.input_pixel_offsets[2]) == ("increasing", 1.0)
    x = np.array([[[[1, 2], [3, 4]]]], np.float32)
    assert_array_equal(params.forward(x, (1, 1, 1, 3)).ravel(), [1, 1, 2])
    dy = np.array([4, 5, 6], np.float32).reshape(1, 1, 1, 3)
    assert_array_equal(params.gradient(dy, (1, 1, 2, 2))[0, 0], [[9, 6], [0, 0]])
    # JAX nearest (= RESAMPLE1 half-pixel) gives the other row of the E1 table: [3, 4, 4]
    half_pixel = DmlResampleParams.from_jax((1, 1, 2, 2), (1, 1, 1, 3), "nearest")
    assert_array_equal(half_pixel.forward(x, (1, 1, 1, 3)).ravel(), [3, 4, 4])
    assert_array_equal(half_pixel.gradient(dy, (1, 1, 2, 2))[0, 0], [[0, 0], [4, 11]])


@pytest.mark.parametrize("convention, y, dx", [
    (lambda: DmlResampleParams.from_torch((1, 1, 3), (6,)), [10, 10, 20, 20, 30, 30], [3, 7, 11]),
    (lambda: DmlResampleParams.from_onnx((3,), (6,), "nearest", "asymmetric", "round_prefer_ceil"),
     [10, 20, 20, 30, 30, 30], [1, 5, 15]),
    (lambda: DmlResampleParams.from_onnx((3,), (6,), "nearest", "asymmetric", "ceil"),
     [10, 20, 20, 30, 30, 30], [1, 5, 15]),
    (lambda: DmlResampleParams.from_onnx((3,), (6,), "nearest", "asymmetric", "floor"),
     [10, 10, 20, 20, 30, 30], [3, 7, 11]),
])
def test_e3_ties_on_the_asymmetric_grid(convention, y, dx):
    """E3: X = [10, 20, 30] -> 6 at Scale 2 with offsets (0, 0) samples x = o/2."""
    params = convention()
    x = np.array([10, 20, 30], np.float32).reshape((1,) * (params.rank - 1) + (3,))
    out_shape = x.shape[:-1] + (6,)
    assert_array_equal(params.forward(x, out_shape).ravel(), y)
    dy = np.arange(1, 7, dtype=np.float32).reshape(out_shape)
    assert_array_equal(params.gradient(dy, x.shape).ravel(), dx)


def test_e5_fractional_scale_linear():
    params = DmlResampleParams.from_jax((4,), (6,), "linear")
    x = np.array([0, 10, 20, 30], np.float32)
    assert_allclose(params.forward(x, (6,)), [0, 5, 35 / 3, 55 / 3, 25, 30], rtol=1e-6)
    assert_allclose(params.gradient(np.arange(1, 7, dtype=np.float32), (4,)), [2, 25 / 6, 19 / 3, 8.5], rtol=1e-6)


def test_e8_channel_and_batch_axes():
    x = np.array([[1, 2], [10, 20]], np.float32).reshape(1, 2, 1, 2)
    nearest = DmlResampleParams.from_jax(x.shape, (1, 4, 1, 2), "nearest")
    assert_array_equal(nearest.forward(x, (1, 4, 1, 2)).reshape(4, 2), [[1, 2], [1, 2], [10, 20], [10, 20]])
    linear = DmlResampleParams.from_jax(x.shape, (1, 4, 1, 2), "linear")
    assert_allclose(linear.forward(x, (1, 4, 1, 2)).reshape(4, 2), [[1, 2], [3.25, 6.5], [7.75, 15.5], [10, 20]])
    dy = np.arange(1, 9, dtype=np.float32).reshape(1, 4, 1, 2)
    assert_allclose(linear.gradient(dy, x.shape).reshape(2, 2), [[4.5, 6.5], [11.5, 13.5]])
    batch = DmlResampleParams.from_jax((2, 1), (3, 1), "linear")
    assert_allclose(batch.forward(np.array([[1], [5]], np.float32), (3, 1)).ravel(), [1, 3, 5])


def test_e19_real_directml_output_matches_the_half_pixel_nearest_conventions():
    """E19: DirectML's real RESAMPLE v0 output for a 4x6 -> 2x3 downsample (all samples exact
    ties) is what JAX nearest and torch nearest-exact (both half-pixel floor) map to."""
    x = np.array([[3.86005284, 45.18463077, 87.67153743, 98.78210347, 66.37414347, 3.41158349],
                  [86.14930501, 95.9813372, 76.87126314, 16.52591355, 65.98782867, 25.47092156],
                  [22.56010548, 92.08479613, 85.80876635, 92.63166027, 29.91620871, 75.40461275],
                  [62.06375451, 1.77121588, 99.47231285, 11.44055014, 25.39634271, 67.02175102]],
                 np.float32).reshape(1, 1, 4, 6)
    expected = np.array([[95.9813372, 16.52591355, 25.47092156], [1.77121588, 11.44055014, 67.02175102]],
                        np.float32)
    for params in (DmlResampleParams.from_jax(x.shape, (1, 1, 2, 3), "nearest"),
                   DmlResampleParams.from_torch(x.shape, (2, 3), "nearest-exact")):
        for variant in (params, params.as_resample1()):
            assert_array_equal(variant.forward(x, (1, 1, 2, 3))[0, 0], expected)
