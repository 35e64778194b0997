"""Issue 27: sizes beyond what the machine can hold, dilations and paddings of 2**31-1, ndarray
subclasses and descriptor field types. Each bad input raises a GradopsError naming the field,
quickly; each extreme but valid one answers quickly with the reference backend's bits."""

from __future__ import annotations

import time

import numpy as np
import pytest

import gradops
from gradops import GradopsError, ShapeError

BACKENDS = ["reference", "fast"]
D = 2**31 - 1


def raises_quickly(field: str, call, seconds: float = 5.0) -> GradopsError:
    start = time.perf_counter()
    with pytest.raises(GradopsError) as info:
        call()
    assert time.perf_counter() - start < seconds
    assert info.value.field == field and str(info.value).startswith(f"{field}: "), str(info.value)
    return info.value


# --- sizes ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_resample_output_beyond_memory_is_refused_before_planning(backend):
    # 4 GiB of float16 output, but 2**31 tap-table rows: this stalled for over 90 s
    x = np.ones(3, np.float16)
    error = raises_quickly("output_sizes", lambda: gradops.resample2(x, (2**31,), mode="nearest",
                                                                      rounding_direction="decreasing", backend=backend))
    assert "tap tables" in str(error)


@pytest.mark.parametrize("backend", BACKENDS)
def test_huge_outputs_name_their_field(backend):
    dy = np.ones((1, 1, 1, 1), np.float32)
    raises_quickly("input_sizes", lambda: gradops.resample_grad1(dy, (2**22, 2**22, 1, 1), mode="linear",
                                                                  backend=backend))  # 64 TiB
    raises_quickly("output_sizes", lambda: gradops.resample(dy, (2**32 - 1,) * 4, backend=backend))
    x, f = np.ones((1, 3, 3, 1), np.float32), np.ones((2, 2, 1, 1), np.float32)
    raises_quickly("explicit_paddings", lambda: gradops.depthwise_conv2d_native(
        x, f, [1, 1, 1, 1], "EXPLICIT", explicit_paddings=[0, 0, D, D, D, D, 0, 0], backend=backend))
    raises_quickly("input_sizes", lambda: gradops.depthwise_conv2d_native_backprop_input(  # dx of 1e10 elements
        [1, 100000, 100000, 1], np.ones((1, 1, 1, 1), np.float32), np.ones((1, 1, 1, 1), np.float32),
        [1, 100000, 100000, 1], "SAME", backend=backend))
    dy = np.broadcast_to(np.float32(1), (1, 100000, 100000, 1))  # 1e10 elements, one in memory
    raises_quickly("out_backprop.shape", lambda: gradops.depthwise_conv2d_native_backprop_input(
        [1, 100000, 100000, 1], np.ones((1, 1, 1, 1), np.float32), dy, [1, 1, 1, 1], "VALID", backend=backend))


def test_descriptor_output_buffer_beyond_memory():
    desc = gradops.ActivationReluDesc(gradops.TensorDesc("FLOAT32", [1]),
                                      gradops.TensorDesc("FLOAT32", [1], total_tensor_size_in_bytes=2**60))
    op = desc.compile()
    raises_quickly("OutputTensor.TotalTensorSizeInBytes", lambda: op(np.ones(1, np.float32)))


def test_broadcast_input_beyond_directml_element_limit():
    dy = np.broadcast_to(np.float32(1), (2**33,))
    raises_quickly("dy.shape", lambda: gradops.resample_grad1(dy, (3,), mode="linear", backend="reference"))


# --- depthwise dilations and paddings of 2**31-1 --------------------------------------------------

def _attrs(case: str) -> dict:
    if case == "dilation, SAME":  # every tap reads padding: zeros
        return dict(strides=[1, 1, 1, 1], padding="SAME", dilations=[1, D, D, 1])
    if case == "dilation, one live tap":  # the second tap of each axis lands on the input
        return dict(strides=[1, 1, 1, 1], padding="EXPLICIT", explicit_paddings=[0, 0, D, 0, D, 0, 0, 0],
                    dilations=[1, D, D, 1])
    if case == "padding and stride":  # 4x4 output, each row and column reading one input row or none
        return dict(strides=[1, 2**30, 2**30, 1], padding="EXPLICIT", explicit_paddings=[0, 0, D, D, D, D, 0, 0])
    return dict(strides=[1, 2**30, 2**30, 1], padding="SAME")  # "stride": one output, a sum of 4 taps


@pytest.mark.parametrize("case", ["dilation, SAME", "dilation, one live tap", "padding and stride", "stride"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_extreme_dilations_and_paddings_answer_with_reference_bits(case, dtype):
    # M = 1 and, but for "stride", at most one live tap per axis: every result is one product, the
    # same in any order
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 3, 2)).astype(dtype)
    f = rng.standard_normal((2, 2, 2, 1)).astype(dtype)
    attrs = _attrs(case)
    results = {}
    for backend in BACKENDS:
        start = time.perf_counter()
        y = gradops.depthwise_conv2d_native(x, f, backend=backend, **attrs)
        dx = gradops.depthwise_conv2d_native_backprop_input(list(x.shape), f, y, backend=backend, **attrs)
        df = gradops.depthwise_conv2d_native_backprop_filter(x, list(f.shape), y, backend=backend, **attrs)
        results[backend] = y, dx, df
        assert time.perf_counter() - start < 10 or backend == "fast"  # fast may include compiling
    for got, want in zip(results["fast"][:2], results["reference"][:2]):
        if case == "stride" and dtype == np.float32:  # float32 sums against float64 sums rounded once
            np.testing.assert_allclose(got, want, rtol=1e-6)
            continue
        np.testing.assert_array_equal(got.view(np.uint16 if dtype == np.float16 else np.uint32),
                                      want.view(np.uint16 if dtype == np.float16 else np.uint32))
    np.testing.assert_allclose(results["fast"][2].astype(np.float64), results["reference"][2].astype(np.float64),
                               rtol=2e-3 if dtype == np.float16 else 1e-6)
    if case != "dilation, SAME":
        assert np.count_nonzero(results["fast"][0]) > 0


def test_fast_repeat_of_extreme_dilation_is_quick():
    x, f = np.ones((1, 3, 3, 1), np.float32), np.ones((2, 2, 1, 1), np.float32)
    attrs = _attrs("dilation, one live tap")
    gradops.depthwise_conv2d_native(x, f, backend="fast", **attrs)  # compile or load
    start = time.perf_counter()
    y = gradops.depthwise_conv2d_native(x, f, backend="fast", **attrs)
    assert time.perf_counter() - start < 1.0
    np.testing.assert_array_equal(y, x)  # tap (1, 1) reads x[oy, ox] with weight 1


# --- ndarray subclasses -----------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_masked_arrays_are_refused(backend):
    masked = np.ma.masked_array(np.ones(4, np.float32), mask=[0, 1, 0, 0])
    raises_quickly("x", lambda: gradops.relu(masked, backend=backend))
    raises_quickly("out", lambda: gradops.relu(np.ones(4, np.float32), out=masked, backend=backend))
    raises_quickly("input", lambda: gradops.depthwise_conv2d_native(
        np.ma.masked_array(np.ones((1, 2, 2, 1), np.float32)), np.ones((1, 1, 1, 1), np.float32), [1, 1, 1, 1],
        "SAME", backend=backend))


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix, the subclass users meet
@pytest.mark.parametrize("backend", BACKENDS)
def test_other_subclasses_are_read_as_base_arrays(backend):
    m = np.matrix([[1, -2], [-3, 4]], np.float32)
    y = gradops.relu(m, backend=backend)
    assert type(y) is np.ndarray
    np.testing.assert_array_equal(y, [[1, 0], [0, 4]])
    out = np.matrix(np.zeros((2, 2), np.float32))
    written = gradops.relu_grad(m, m, out=out, backend=backend)
    np.testing.assert_array_equal(np.asarray(out), [[1, 0], [0, 4]])
    assert np.shares_memory(written, out)
    up = gradops.resample2(m, (2, 4), mode="nearest", rounding_direction="decreasing", backend=backend)
    # half-pixel grid, floor: columns 0..3 read x = -0.25, 0.25, 0.75, 1.25 -> 0, 0, 0, 1 (SPEC 3.2, 3.3)
    np.testing.assert_array_equal(up, [[1, 1, 1, -2], [-3, -3, -3, 4]])


# --- descriptor fields ------------------------------------------------------------------------------

@pytest.mark.parametrize("make, field", [
    (lambda: gradops.ActivationReluDesc(None, gradops.TensorDesc("FLOAT32", [1])), "InputTensor"),
    (lambda: gradops.ActivationReluDesc(gradops.TensorDesc("FLOAT32", [1]), "x"), "OutputTensor"),
    (lambda: gradops.ActivationReluGradDesc(gradops.TensorDesc("FLOAT32", [1]), 3, gradops.TensorDesc("FLOAT32", [1])),
     "InputGradientTensor"),
    (lambda: gradops.ResampleDesc(None, gradops.TensorDesc("FLOAT32", [1] * 4), 0, 4, [1.0] * 4), "InputTensor"),
])
def test_descriptor_tensor_fields_are_type_checked(make, field):
    desc = make()
    error = raises_quickly(field, desc.validate)
    assert isinstance(error, gradops.DescriptorError)


@pytest.mark.parametrize("sizes, strides, field", [(np.zeros(2), None, "sizes[0]"), ([2, 2], [1.5, 1], "strides[0]"),
                                                   ([2, 2], [1], "strides"), ("ab", None, "sizes")])
def test_calc_buffer_tensor_size_checks_its_arguments(sizes, strides, field):
    raises_quickly(field, lambda: gradops.calc_buffer_tensor_size("FLOAT32", sizes, strides))


def test_shape_error_is_the_class_for_sizes():
    error = raises_quickly("output_sizes", lambda: gradops.resample2(np.ones(3, np.float32), (2**32 - 1,) * 1,
                                                                      mode="linear", backend="reference"))
    assert isinstance(error, ShapeError)
