"""ONNX's own Resize node tests through ``DmlResampleParams.from_onnx`` (SPEC 6.4), and the
from_onnx rules they pin: the output size as length_resized [DECISION], extrapolation_value,
half_pixel_symmetric's float32 offset."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from gradops import DescriptorError, UnsupportedError
from gradops.conventions import DmlResampleParams

onnx = pytest.importorskip("onnx")
helper = onnx.helper


def _node_tests() -> list:
    """``onnx.backend.test.case.node.collect_testcases("Resize")`` without generating every other
    operator's cases (12 s on a loaded 2-core machine): a case module's classes export their cases
    when it is imported, and ``collect_testcases`` keeps those of its ``_TargetOpType``."""
    import importlib

    from onnx.backend.test.case import node

    node._TargetOpType = "Resize"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        importlib.import_module("onnx.backend.test.case.node.resize")
    cases = [case for case in node._NodeTestCases if case.model.graph.node[0].op_type == "Resize"]
    return [case for case in cases if _attributes(case).get("mode", "nearest") in ("nearest", "linear")
            and not _attributes(case).get("antialias", 0)]


def _attributes(case) -> dict:
    values = {a.name: helper.get_attribute_value(a) for a in case.model.graph.node[0].attribute}
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in values.items()}


NODE_TESTS = {case.name: case for case in _node_tests()}
# ONNX's expected output uses length_resized = in * scale = 2.4 on the 4 -> 2 axis (x = 3/1.4);
# gradops takes the output size 2 (x = 3), as ONNX Runtime's CPU and DML kernels do [DECISION].
LENGTH_RESIZED_DECISION = "test_resize_downsample_scales_linear_align_corners"
EXTRAPOLATION = "test_resize_tf_crop_and_resize_extrapolation_value"


def from_onnx_arguments(case) -> tuple[np.ndarray, np.ndarray, dict]:
    """x, ONNX's expected y, and from_onnx's keyword arguments for one node test: ``axes``,
    ``roi``, ``scales`` and ``keep_aspect_ratio_policy`` expanded to every axis as ONNX
    defines them (an axis not listed keeps scale 1 and roi [0, 1])."""
    node = case.model.graph.node[0]
    attrs = _attributes(case)
    inputs, outputs = case.data_sets[0]
    named = dict(zip([name for name in node.input if name], inputs))
    x, y = inputs[0], outputs[0]
    rank = x.ndim
    axes = [a % rank for a in attrs.get("axes", range(rank))]
    scales, roi = [1.0] * rank, [0.0] * rank + [1.0] * rank
    kwargs: dict = {"mode": attrs.get("mode", "nearest"),
                    "coordinate_transformation_mode": attrs.get("coordinate_transformation_mode", "half_pixel"),
                    "nearest_mode": attrs.get("nearest_mode", "round_prefer_floor"),
                    "extrapolation_value": attrs.get("extrapolation_value", 0.0)}
    if "roi" in named and named["roi"].size:
        for i, a in enumerate(axes):
            roi[a], roi[a + rank] = float(named["roi"][i]), float(named["roi"][i + len(axes)])
    if "scales" in named and named["scales"].size:
        for i, a in enumerate(axes):
            scales[a] = float(named["scales"][i])
        kwargs["scales"] = scales
    elif attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":  # one scale for every listed axis
        ratios = [np.float32(named["sizes"][i]) / np.float32(x.shape[a]) for i, a in enumerate(axes)]
        common = min(ratios) if attrs["keep_aspect_ratio_policy"] == "not_larger" else max(ratios)
        for a in axes:
            scales[a] = float(common)
        kwargs["scales"] = scales
    if kwargs["coordinate_transformation_mode"] == "tf_crop_and_resize":
        kwargs["roi"] = roi
    return x, y, kwargs


def test_the_node_tests_are_collected():
    assert len(NODE_TESTS) >= 20
    assert {LENGTH_RESIZED_DECISION, EXTRAPOLATION} <= set(NODE_TESTS)


@pytest.mark.parametrize("name", sorted(set(NODE_TESTS) - {LENGTH_RESIZED_DECISION, EXTRAPOLATION}))
def test_onnx_node_test_through_from_onnx(name):
    x, y, kwargs = from_onnx_arguments(NODE_TESTS[name])
    params = DmlResampleParams.from_onnx(x.shape, y.shape, **kwargs)
    result = params.forward(x, y.shape, backend="reference")
    if kwargs["mode"] == "nearest":
        np.testing.assert_array_equal(result, y)
    else:
        np.testing.assert_allclose(result, y, rtol=1e-5, atol=1e-6)


def test_align_corners_follows_the_output_size_not_onnx_reference():
    x, y, kwargs = from_onnx_arguments(NODE_TESTS[LENGTH_RESIZED_DECISION])
    np.testing.assert_allclose(y.ravel(), [1, 1 + 3 / 1.4], rtol=1e-6)  # ONNX: x = 1 * 3 / (2.4 - 1)
    result = DmlResampleParams.from_onnx(x.shape, y.shape, **kwargs).forward(x, y.shape, backend="reference")
    np.testing.assert_array_equal(result.ravel(), [1, 4])  # the decision: x = 1 * 3 / (2 - 1) = 3, X[0, 3] = 4


def test_align_corners_decision_is_onnxruntimes():
    ort = pytest.importorskip("onnxruntime")
    case = NODE_TESTS[LENGTH_RESIZED_DECISION]
    session = ort.InferenceSession(case.model.SerializeToString(), providers=["CPUExecutionProvider"])
    inputs = case.data_sets[0][0]
    feeds = {i.name: value for i, value in zip(session.get_inputs(), inputs)}
    np.testing.assert_array_equal(session.run(None, feeds)[0].ravel(), [1, 4])


def test_extrapolation_value_raises_where_the_roi_leaves_the_input():
    x, y, kwargs = from_onnx_arguments(NODE_TESTS[EXTRAPOLATION])
    assert kwargs["extrapolation_value"] == 10.0
    with pytest.raises(UnsupportedError, match=r"^roi\[6\]: axis 2's roi \(0.4, 1.2\) samples outside the input"):
        DmlResampleParams.from_onnx(x.shape, y.shape, **kwargs)


def test_extrapolation_value_is_accepted_where_no_sample_leaves_the_input():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    roi = [0, 0, 0.25, 0.5, 1, 1, 0.75, 1.0]
    params = DmlResampleParams.from_onnx(x.shape, (1, 1, 3, 3), "linear", "tf_crop_and_resize", roi=roi,
                                         extrapolation_value=10.0)
    # x = start (in-1) + o (end - start)(in-1)/(out-1): rows 0.75, 1.5, 2.25; columns 1.5, 2.25, 3
    rows, columns = np.array([0.75, 1.5, 2.25]), np.array([1.5, 2.25, 3.0])
    np.testing.assert_allclose(params.forward(x, (1, 1, 3, 3), backend="reference")[0, 0],
                               4 * rows[:, None] + columns[None, :], rtol=1e-6)
    # One output sample sits at the roi's centre (0.85 here); an axis of size 1 never leaves its input.
    DmlResampleParams.from_onnx((1, 1, 1, 4), (1, 1, 1, 1), "nearest", "tf_crop_and_resize",
                                roi=[0, 0, -2, 0.5, 1, 1, 3, 1.2])
    with pytest.raises(UnsupportedError, match=r"^roi\[3\]"):
        DmlResampleParams.from_onnx((1, 1, 1, 4), (1, 1, 1, 2), "nearest", "tf_crop_and_resize",
                                    roi=[0, 0, 0, -0.5, 1, 1, 1, 1])
    with pytest.raises(DescriptorError, match="^extrapolation_value"):
        DmlResampleParams.from_onnx(x.shape, (1, 1, 3, 3), "linear", "tf_crop_and_resize", roi=roi,
                                    extrapolation_value="10")


def test_half_pixel_symmetric_offset_is_float32_like_onnxruntime():
    # 3 -> 7: fl32(fl32(7/3) * 3) = 7 exactly, so the offset is 0 and x = (o + 0.5) * 3/7 - 0.5:
    # -0.29, 0.14, 0.57, 1, 1.43, 1.86, 2.29 -> floor (clamped) 0, 0, 0, 1, 1, 1, 2.
    params = DmlResampleParams.from_onnx((3,), (7,), "nearest", "half_pixel_symmetric", "floor")
    assert params.input_pixel_offsets == (0.5,)
    result = params.forward(np.array([1, 4, 7], np.float32), (7,), backend="reference")
    np.testing.assert_array_equal(result, [1, 1, 1, 4, 4, 4, 7])


@pytest.mark.parametrize("nearest_mode, direction, shift", [
    ("round_prefer_floor", "increasing", 0.5), ("round_prefer_ceil", "decreasing", -0.5),
    ("floor", "decreasing", 0.0), ("ceil", "increasing", 0.0)])
def test_nearest_modes_map_to_a_rounding_direction_and_an_offset(nearest_mode, direction, shift):
    params = DmlResampleParams.from_onnx((4,), (6,), "nearest", "asymmetric", nearest_mode)
    assert (params.rounding_direction, params.input_pixel_offsets) == (direction, (shift,))
    # asymmetric 4 -> 6: x = o * 2/3 = 0, 0.67, 1.33, 2, 2.67, 3.33 (no ties)
    expected = {"round_prefer_floor": [0, 1, 1, 2, 3, 3], "round_prefer_ceil": [0, 1, 1, 2, 3, 3],
                "floor": [0, 0, 1, 2, 2, 3], "ceil": [0, 1, 2, 2, 3, 3]}[nearest_mode]
    np.testing.assert_array_equal(params.forward(np.arange(4, dtype=np.float32), (6,), backend="reference"),
                                  expected)
