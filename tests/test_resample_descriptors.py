"""Resample family: the DirectML descriptors (fields, validation, compile) and the operator
registry and ``gradops run`` JSON documents (SPEC 3, 4).

Expected numbers are written out by hand here or come from SPEC section 7; NumPy functions and
worked examples are in test_resample.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from field_errors import raises

import gradops
from gradops import (AliasingError, AxisDirection, DataTypeError, DescriptorError, FeatureLevelError,
                     InterpolationMode, Resample1Desc, Resample2Desc, ResampleDesc, ResampleGrad1Desc,
                     ResampleGradDesc, ShapeError, TensorDesc, UnsupportedError, resample, resample1, resample2,
                     resample_grad, resample_grad1)
from gradops.cli import main as cli_main


# --- descriptors ---------------------------------------------------------------------------------------

def tdesc(sizes, data_type="FLOAT32", strides=None, **kw):
    return TensorDesc(data_type, tuple(sizes), strides, **kw)


def make_desc(cls, source, target, **overrides):
    rank = len(source.sizes)
    tensors = ("input_gradient_tensor", "output_gradient_tensor") if cls in (ResampleGradDesc, ResampleGrad1Desc) \
        else ("input_tensor", "output_tensor")
    kw = {tensors[0]: source, tensors[1]: target, "interpolation_mode": "LINEAR", "scales": [1.0] * rank}
    if cls is ResampleDesc:
        kw["scale_count"] = rank
    else:
        kw.update(dimension_count=rank, input_pixel_offsets=[0.0] * rank, output_pixel_offsets=[0.0] * rank)
    if cls in (Resample2Desc, ResampleGrad1Desc):
        kw["rounding_direction"] = "DECREASING"
    kw.update(overrides)
    return cls(**kw)


ALL_DESCS = [ResampleDesc, Resample1Desc, Resample2Desc, ResampleGradDesc, ResampleGrad1Desc]


def test_descriptor_classvars_and_fields():
    from dataclasses import fields

    expected = {
        ResampleDesc: ("DML_OPERATOR_RESAMPLE", 96, 0x2000, ["input_tensor", "output_tensor", "interpolation_mode",
                                                             "scale_count", "scales"]),
        Resample1Desc: ("DML_OPERATOR_RESAMPLE1", 116, 0x2100, ["input_tensor", "output_tensor", "interpolation_mode",
                                                               "dimension_count", "scales", "input_pixel_offsets",
                                                               "output_pixel_offsets"]),
        Resample2Desc: ("DML_OPERATOR_RESAMPLE2", 161, 0x5100, ["input_tensor", "output_tensor", "interpolation_mode",
                                                               "rounding_direction", "dimension_count", "scales",
                                                               "input_pixel_offsets", "output_pixel_offsets"]),
        ResampleGradDesc: ("DML_OPERATOR_RESAMPLE_GRAD", 134, 0x3000,
                           ["input_gradient_tensor", "output_gradient_tensor", "interpolation_mode",
                            "dimension_count", "scales", "input_pixel_offsets", "output_pixel_offsets",
                            "offset_convention"]),
        ResampleGrad1Desc: ("DML_OPERATOR_RESAMPLE_GRAD1", 162, 0x5100,
                            ["input_gradient_tensor", "output_gradient_tensor", "interpolation_mode",
                             "rounding_direction", "dimension_count", "scales", "input_pixel_offsets",
                             "output_pixel_offsets", "offset_convention"]),
    }
    for cls, (name, value, level, names) in expected.items():
        assert (cls.OPERATOR_TYPE, cls.OPERATOR_VALUE, int(cls.FEATURE_LEVEL)) == (name, value, level)
        assert [f.name for f in fields(cls)] == names
        assert issubclass(cls, gradops.dml.OperatorDesc)
    desc = make_desc(Resample2Desc, tdesc([2]), tdesc([3]), interpolation_mode=0, rounding_direction="increasing")
    assert desc.interpolation_mode is InterpolationMode.NEAREST_NEIGHBOR
    assert desc.rounding_direction is AxisDirection.INCREASING
    assert hash(desc) == hash(make_desc(Resample2Desc, tdesc([2]), tdesc([3]), interpolation_mode=0,
                                        rounding_direction=0))


S4, T4 = tdesc([1, 1, 2, 3]), tdesc([1, 1, 4, 6])


@pytest.mark.parametrize("build, level, error, field", [
    (lambda: make_desc(ResampleDesc, S4, T4), "1.0", FeatureLevelError, "feature_level"),
    (lambda: make_desc(Resample1Desc, S4, T4), "2.0", FeatureLevelError, "feature_level"),
    (lambda: make_desc(ResampleGradDesc, T4, S4), "2.1", FeatureLevelError, "feature_level"),
    (lambda: make_desc(Resample2Desc, S4, T4), "5.0", FeatureLevelError, "feature_level"),
    (lambda: make_desc(ResampleGrad1Desc, T4, S4), 0x5000, FeatureLevelError, "feature_level"),
    (lambda: make_desc(Resample1Desc, tdesc([2, 3]), tdesc([4, 6])), None, ShapeError, "InputTensor.DimensionCount"),
    (lambda: make_desc(ResampleDesc, S4, tdesc([1, 4, 6])), None, ShapeError, "OutputTensor.DimensionCount"),
    (lambda: make_desc(ResampleGradDesc, tdesc([1, 1, 4, 6, 1]), S4), None, ShapeError,
     "InputGradientTensor.DimensionCount"),
    (lambda: make_desc(Resample2Desc, tdesc([1] * 5), tdesc([1] * 5)), None, ShapeError,
     "InputTensor.DimensionCount"),
    (lambda: make_desc(ResampleGrad1Desc, tdesc([4, 6]), tdesc([2])), None, ShapeError,
     "OutputGradientTensor.DimensionCount"),
    (lambda: make_desc(Resample1Desc, S4, T4, dimension_count=3), None, ShapeError, "DimensionCount"),
    (lambda: make_desc(ResampleDesc, S4, T4, scale_count=5), None, ShapeError, "ScaleCount"),
    (lambda: make_desc(ResampleGrad1Desc, tdesc([4, 6]), tdesc([2, 3]), dimension_count=True), None, ShapeError,
     "DimensionCount"),
    (lambda: make_desc(Resample1Desc, S4, T4, scales=[1, 1, 2]), None, DescriptorError, "Scales"),
    (lambda: make_desc(ResampleDesc, S4, T4, scales=[1, 1, 2]), None, DescriptorError, "Scales"),
    (lambda: make_desc(Resample2Desc, S4, T4, input_pixel_offsets=[0.5] * 3), None, DescriptorError,
     "InputPixelOffsets"),
    (lambda: make_desc(ResampleGradDesc, T4, S4, output_pixel_offsets=[0.5] * 5), None, DescriptorError,
     "OutputPixelOffsets"),
    (lambda: make_desc(Resample1Desc, S4, tdesc([1, 1, 4, 6], "FLOAT16")), None, DataTypeError,
     "OutputTensor.DataType"),
    (lambda: make_desc(ResampleGrad1Desc, tdesc([4], "FLOAT16"), tdesc([2], "FLOAT32")), None, DataTypeError,
     "OutputGradientTensor.DataType"),
    (lambda: make_desc(Resample1Desc, tdesc([1, 1, 2, 3], "FLOAT64"), tdesc([1, 1, 4, 6], "FLOAT64")), None,
     DataTypeError, "InputTensor.DataType"),
    (lambda: make_desc(ResampleGradDesc, tdesc([1, 1, 4, 6], "INT32"), tdesc([1, 1, 2, 3], "INT32")), None,
     DataTypeError, "InputGradientTensor.DataType"),
    (lambda: make_desc(Resample2Desc, tdesc([2], "INT8"), tdesc([4], "INT8")), None, UnsupportedError,
     "InputTensor.DataType"),
    (lambda: make_desc(Resample1Desc, S4, T4, scales=[1, 1, 0, 1]), None, DescriptorError, "Scales[2]"),
    (lambda: make_desc(ResampleDesc, S4, T4, scales=[1, 1, 1, -1]), None, DescriptorError, "Scales[3]"),
    (lambda: make_desc(Resample2Desc, S4, T4, scales=[1, np.nan, 1, 1]), None, DescriptorError, "Scales[1]"),
    (lambda: make_desc(ResampleGradDesc, T4, S4, scales=[np.inf, 1, 1, 1]), None, DescriptorError, "Scales[0]"),
    (lambda: make_desc(Resample1Desc, S4, T4, input_pixel_offsets=[0, np.nan, 0, 0]), None, DescriptorError,
     "InputPixelOffsets[1]"),
    (lambda: make_desc(ResampleGrad1Desc, T4, S4, output_pixel_offsets=[0, 0, np.inf, 0]), None, DescriptorError,
     "OutputPixelOffsets[2]"),
    (lambda: make_desc(Resample2Desc, S4, T4, output_pixel_offsets=[0, 0, 0, -np.inf]), None, DescriptorError,
     "OutputPixelOffsets[3]"),
    (lambda: make_desc(Resample1Desc, S4, T4, interpolation_mode=2), None, DescriptorError, "InterpolationMode"),
    (lambda: make_desc(ResampleDesc, S4, T4, interpolation_mode="CUBIC"), None, DescriptorError, "InterpolationMode"),
    (lambda: make_desc(Resample2Desc, S4, T4, rounding_direction=2), None, DescriptorError, "RoundingDirection"),
    (lambda: make_desc(ResampleGrad1Desc, T4, S4, rounding_direction=None), None, DescriptorError,
     "RoundingDirection"),
    (lambda: make_desc(ResampleGradDesc, T4, S4, offset_convention="swapped"), None, DescriptorError,
     "offset_convention"),
    (lambda: make_desc(Resample1Desc, S4, tdesc([1, 1, 4, 6], strides=[24, 24, 0, 1])), None, DescriptorError,
     "OutputTensor.Strides"),
    (lambda: make_desc(ResampleGradDesc, T4, tdesc([1, 1, 2, 3], strides=[6, 6, 2, 1])), None, DescriptorError,
     "OutputGradientTensor.Strides"),
    (lambda: make_desc(ResampleGrad1Desc, tdesc([4]), tdesc([2], strides=[0])), None, DescriptorError,
     "OutputGradientTensor.Strides"),
    (lambda: make_desc(Resample2Desc, tdesc([2, 0]), tdesc([2, 3])), None, ShapeError, "InputTensor.Sizes[1]"),
    (lambda: make_desc(Resample2Desc, tdesc([2, 3], total_tensor_size_in_bytes=8), tdesc([2, 3])), None,
     DescriptorError, "InputTensor.TotalTensorSizeInBytes"),
    (lambda: make_desc(Resample1Desc, S4, "not a tensor"), None, DescriptorError, "OutputTensor"),
])
def test_descriptor_validation(build, level, error, field):
    desc = build()
    with raises(error, field):
        desc.validate(level)
    with raises(error, field):
        desc.compile(feature_level=level)


def test_descriptor_validation_accepts_what_dml_accepts():
    # Broadcast input strides, huge finite scales, every op at its own feature level.
    make_desc(Resample1Desc, tdesc([2, 3, 4, 5], strides=[0, 1, 0, 0]), tdesc([2, 3, 4, 5])).validate("2.1")
    make_desc(Resample2Desc, tdesc([3]), tdesc([3]), scales=[3.0e38]).validate("5.1")
    make_desc(ResampleDesc, S4, T4).validate("2.0")
    make_desc(ResampleGradDesc, T4, S4).validate("3.0")
    make_desc(ResampleGrad1Desc, tdesc([4]), tdesc([2]), scales=[2.0]).validate("6.4")


def test_descriptor_compile_runs_on_padded_buffers(backend):
    """FLOAT16 RESAMPLE2 with padded rows on input (stride 4) and output (stride 8)."""
    x = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], np.float16)
    source = np.full((3, 4), 99, np.float16)
    source[:, :3] = x
    padded_output = TensorDesc("FLOAT16", (3, 6), (8, 1), total_tensor_size_in_bytes=48)  # 3 full rows of 8
    desc = Resample2Desc(TensorDesc("FLOAT16", (3, 3), (4, 1)), padded_output,
                         InterpolationMode.NEAREST_NEIGHBOR, AxisDirection.DECREASING, 2, (1.0, 2.0),
                         (0.0, 0.0), (0.0, 0.0))
    compiled = desc.compile(feature_level="5.1", backend=backend)
    target = np.full(desc.output_tensor.size_in_bytes // 2, -7, np.float16)
    compiled(source.reshape(-1), target)
    rows = target[: 3 * 8].reshape(3, 8)
    np.testing.assert_array_equal(rows[:, :6], np.repeat(x, 2, axis=1))
    assert np.all(rows[:, 6:] == -7)  # padding left as it was
    # The gradient descriptor on raw bytes; output buffers allocated when omitted.
    grad = ResampleGrad1Desc(TensorDesc("FLOAT32", (2, 4)), TensorDesc("FLOAT32", (2, 2)), "NEAREST_NEIGHBOR",
                             "DECREASING", 2, [1, 2], [0, 0], [0, 0])
    dy = np.arange(8, dtype=np.float32)
    (dx_bytes,) = grad.compile(backend=backend)(dy.tobytes())
    assert np.frombuffer(dx_bytes, np.float32).reshape(2, 2).tolist() == [[1, 5], [9, 13]]


@pytest.mark.parametrize("cls", ALL_DESCS)
def test_descriptor_matches_numpy_function(cls, backend):
    rng = np.random.default_rng(3)
    fwd_in, fwd_out = (2, 3, 5, 4), (3, 2, 7, 9)
    grad = cls in (ResampleGradDesc, ResampleGrad1Desc)
    source_shape, target_shape = (fwd_out, fwd_in) if grad else (fwd_in, fwd_out)
    data = rng.standard_normal(source_shape).astype(np.float32)
    scales = [float(np.float32(o) / np.float32(i)) * 1.1 for i, o in zip(fwd_in, fwd_out)]
    offsets = {"input_pixel_offsets": [0.25, -0.5, 0.5, 0.0], "output_pixel_offsets": [0.0, 0.5, -0.5, 1.0]}
    desc = make_desc(cls, tdesc(source_shape), tdesc(target_shape), scales=scales,
                     **({} if cls is ResampleDesc else offsets))
    (result,) = desc.compile(backend=backend)(data)
    result = np.frombuffer(result, np.float32).reshape(target_shape)
    kw = {"mode": "linear", "scales": scales, "backend": backend}
    if cls is not ResampleDesc:
        kw.update(offsets)
    if cls in (Resample2Desc, ResampleGrad1Desc):
        kw["rounding_direction"] = "decreasing"
    function = {ResampleDesc: resample, Resample1Desc: resample1, Resample2Desc: resample2,
                ResampleGradDesc: resample_grad, ResampleGrad1Desc: resample_grad1}[cls]
    np.testing.assert_array_equal(result, function(data, target_shape, **kw))


def test_compile_builds_the_taps_once():
    from gradops.resample import _cached_axis_taps

    compiled = make_desc(Resample2Desc, tdesc([5, 7]), tdesc([9, 3])).compile(backend="reference")
    lookups = _cached_axis_taps.cache_info()
    for _ in range(3):
        compiled(np.ones(35, np.float32))
    assert _cached_axis_taps.cache_info() == lookups  # dispatch reuses the compiled plan


def test_descriptor_rejects_output_overlapping_input():
    desc = make_desc(Resample2Desc, tdesc([4]), tdesc([4]))
    buffer = np.arange(4, dtype=np.float32)
    with raises(AliasingError, "OutputTensor"):
        desc.compile(backend="reference")(buffer, buffer)


# --- registry and gradops run ---------------------------------------------------------------------------

def test_registry_lists_the_five_ops():
    from gradops.registry import all_ops, find_op

    names = {op.name for op in all_ops()}
    for name in ("DML_OPERATOR_RESAMPLE", "DML_OPERATOR_RESAMPLE1", "DML_OPERATOR_RESAMPLE2",
                 "DML_OPERATOR_RESAMPLE_GRAD", "DML_OPERATOR_RESAMPLE_GRAD1"):
        assert name in names
    assert find_op("RESAMPLE_GRAD1").function == "resample_grad1"
    assert find_op("resample_grad").feature_level == "3.0"


def test_gradops_run_json(tmp_path, backend):
    document = {
        "operator": "DML_OPERATOR_RESAMPLE_GRAD1",
        "backend": backend,
        "InputGradientTensor": {"DataType": "FLOAT32", "Sizes": [2]},
        "OutputGradientTensor": {"DataType": "FLOAT32", "Sizes": [4]},
        "InterpolationMode": "DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR",
        "RoundingDirection": "DML_AXIS_DIRECTION_INCREASING",
        "DimensionCount": 1,
        "Scales": [0.5],
        "InputPixelOffsets": [-0.5],
        "OutputPixelOffsets": [0.5],
        "inputs": {"InputGradientTensor": [10, 20]},
    }
    path = tmp_path / "grad1.json"
    path.write_text(json.dumps(document))
    assert cli_main(["run", str(path)]) == 0
    with np.load(tmp_path / "grad1.out.npz") as result:
        assert result["OutputGradientTensor"].tolist() == [0, 10, 0, 20]  # E4


@pytest.mark.parametrize("operator, source_field, source, target_field, target, fields, expected", [
    ("DML_OPERATOR_RESAMPLE", "InputTensor", [[[[1, 2], [3, 4]]]], "OutputTensor", [1, 1, 1, 3],
     {"ScaleCount": 4, "Scales": [1, 1, 0.5, 1.5]}, [3, 4, 4]),  # E1, half-pixel RESAMPLE1 rule
    ("DML_OPERATOR_RESAMPLE1", "InputTensor", [[[[1, 2], [3, 4]]]], "OutputTensor", [1, 1, 1, 3],
     {"DimensionCount": 4, "Scales": [1, 1, 0.5, 1.5], "InputPixelOffsets": [0.5] * 4,
      "OutputPixelOffsets": [0, 0, 0, 0]}, [1, 1, 2]),  # E1, TF legacy grid
    ("DML_OPERATOR_RESAMPLE2", "InputTensor", [10, 20, 30], "OutputTensor", [6],
     {"RoundingDirection": "DECREASING", "DimensionCount": 1, "Scales": [2], "InputPixelOffsets": [0],
      "OutputPixelOffsets": [0]}, [10, 10, 20, 20, 30, 30]),  # E3
    ("DML_OPERATOR_RESAMPLE_GRAD", "InputGradientTensor", [[[[1, 2, 3, 4, 5, 6]]]], "OutputGradientTensor",
     [1, 1, 1, 4], {"DimensionCount": 4, "Scales": [1, 1, 1, 1], "InputPixelOffsets": [-0.5] * 4,
                    "OutputPixelOffsets": [0.5] * 4}, [1, 2, 3, 15]),  # E7
    ("DML_OPERATOR_RESAMPLE_GRAD1", "InputGradientTensor", [1, 2, 3, 4, 5], "OutputGradientTensor", [2],
     {"RoundingDirection": 1, "DimensionCount": 1, "Scales": [2.5], "InputPixelOffsets": [-0.5],
      "OutputPixelOffsets": [0.5]}, [10, 5]),  # E9
])
def test_gradops_run_json_every_operator(tmp_path, operator, source_field, source, target_field, target, fields,
                                         expected):
    document = {"operator": operator, "backend": "reference", "InterpolationMode": "NEAREST_NEIGHBOR",
                target_field: {"DataType": "FLOAT32", "Sizes": target}, "inputs": {source_field: source}, **fields}
    path = tmp_path / "op.json"
    path.write_text(json.dumps(document))
    assert cli_main(["run", str(path)]) == 0
    with np.load(tmp_path / "op.out.npz") as result:
        assert result[target_field].ravel().tolist() == expected


def test_gradops_run_json_doc_literal_and_file_data(tmp_path):
    np.save(tmp_path / "dy.npy", np.array([10, 20], np.float32))
    document = {"operator": "RESAMPLE_GRAD1", "OutputGradientTensor": {"DataType": "FLOAT32", "Sizes": [4]},
                "InterpolationMode": 0, "RoundingDirection": 1, "DimensionCount": 1, "Scales": [0.5],
                "InputPixelOffsets": [-0.5], "OutputPixelOffsets": [0.5], "OffsetConvention": "doc-literal",
                "backend": "reference", "inputs": {"InputGradientTensor": {"file": "dy.npy"}}}
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(document))
    out = tmp_path / "doc_out.npz"
    assert cli_main(["run", str(path), "-o", str(out)]) == 0
    with np.load(out) as result:
        assert result["OutputGradientTensor"].tolist() == [10, 20, 0, 0]  # E4, doc reading


def test_gradops_run_json_errors(tmp_path, capsys):
    base = {"operator": "DML_OPERATOR_RESAMPLE", "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]},
            "InterpolationMode": "LINEAR", "ScaleCount": 4, "inputs": {"InputTensor": [[[[1]]]]}}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(base))
    assert cli_main(["run", str(path)]) == 2
    assert "gradops: error: Scales: missing" in capsys.readouterr().err
    path.write_text(json.dumps({**base, "Scales": [1, 1, 2, 0]}))
    assert cli_main(["run", str(path)]) == 2
    assert "gradops: error: Scales[3]:" in capsys.readouterr().err
    no_output = {k: v for k, v in base.items() if k != "OutputTensor"}
    path.write_text(json.dumps({**no_output, "Scales": [1, 1, 2, 2]}))
    assert cli_main(["run", str(path)]) == 2
    assert "gradops: error: OutputTensor: missing" in capsys.readouterr().err


def test_gradops_run_entry_point(tmp_path):
    document = {"operator": "DML_OPERATOR_RESAMPLE", "DataType": "FLOAT16", "backend": "reference",
                "OutputTensor": {"DataType": "FLOAT16", "Sizes": [1, 1, 4, 4]},
                "InterpolationMode": "NEAREST_NEIGHBOR", "ScaleCount": 4, "Scales": [1, 1, 2, 2],
                "inputs": {"InputTensor": [[[[1, 2], [3, 4]]]]}}
    path = tmp_path / "v0.json"
    path.write_text(json.dumps(document))
    run = subprocess.run([sys.executable, "-m", "gradops.cli", "run", str(path)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    with np.load(tmp_path / "v0.out.npz") as result:
        y = result["OutputTensor"]
        assert y.dtype == np.float16
        assert y.reshape(4, 4).tolist() == [[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]]  # E10
