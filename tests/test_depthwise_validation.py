"""Depthwise validation (SPEC 5.5): every row raises a GradopsError subclass naming the argument at
fault, with TensorFlow's wording where practical; never a crash, also where TF itself crashes or
silently accepts nonsense. Each case: (call, error type, field, fragment of the message)."""

from __future__ import annotations

import numpy as np
import pytest

from gradops import (AliasingError, DataTypeError, DepthwiseConv2dNativeBackpropInputDesc, DepthwiseConv2dNativeDesc,
                     DescriptorError, GradopsError, ShapeError, depthwise_conv2d_native,
                     depthwise_conv2d_native_backprop_filter, depthwise_conv2d_native_backprop_input)

X = np.ones((1, 5, 5, 2), np.float32)
F = np.ones((3, 3, 2, 1), np.float32)
DY = np.ones((1, 5, 5, 2), np.float32)
S1 = [1, 1, 1, 1]


def forward(**kw):
    args = {"input": X, "filter": F, "strides": S1, "padding": "SAME", **kw}
    return lambda: depthwise_conv2d_native(**args, backend="reference")


def backprop_input(**kw):
    args = {"input_sizes": [1, 5, 5, 2], "filter": F, "out_backprop": DY, "strides": S1, "padding": "SAME", **kw}
    return lambda: depthwise_conv2d_native_backprop_input(**args, backend="reference")


def backprop_filter(**kw):
    args = {"input": X, "filter_sizes": [3, 3, 2, 1], "out_backprop": DY, "strides": S1, "padding": "SAME", **kw}
    return lambda: depthwise_conv2d_native_backprop_filter(**args, backend="reference")


ATTRIBUTE_CASES = [
    # strides
    ("strides 3 values", backprop_input(strides=[1, 1, 1]), DescriptorError, "strides",
     "Sliding window strides field must specify 4 dimensions, got 3 values"),
    ("strides 5 values", forward(strides=[1, 1, 1, 1, 1]), DescriptorError, "strides", "must specify 4 dimensions"),
    ("strides scalar", backprop_input(strides=1), DescriptorError, "strides", "a list of 4 integers"),
    ("strides string", backprop_input(strides="1111"), DescriptorError, "strides", "a list of 4 integers"),
    ("strides None", backprop_filter(strides=None), DescriptorError, "strides", "a list of 4 integers"),
    ("stride float", backprop_input(strides=[1, 1.5, 1, 1]), DescriptorError, "strides[1]", "an integer"),
    ("stride bool", backprop_input(strides=[1, True, 1, 1]), DescriptorError, "strides[1]", "an integer"),
    ("stride zero", backprop_input(strides=[1, 0, 0, 1]), DescriptorError, "strides[1]",
     "Stride must be > 0, but got 0"),
    ("stride negative", forward(strides=[1, 1, -1, 1]), DescriptorError, "strides[2]",
     "Stride must be > 0, but got -1"),
    ("stride beyond int32", backprop_input(strides=[1, 2**40, 2**40, 1]), DescriptorError, "strides[1]",
     "Attr strides has value 1099511627776 out of range for an int32"),
    ("batch stride", backprop_input(strides=[2, 1, 1, 1]), DescriptorError, "strides",
     "Current implementation does not yet support strides in the batch and depth dimensions."),
    ("depth stride NHWC", backprop_filter(strides=[1, 1, 1, 2]), DescriptorError, "strides", "batch and depth"),
    ("depth stride NCHW", backprop_input(strides=[1, 2, 1, 1], data_format="NCHW"), DescriptorError, "strides",
     "batch and depth"),
    # dilations
    ("dilations 3 values", backprop_input(dilations=[1, 1, 1]), DescriptorError, "dilations",
     "Sliding window dilations field must specify 4 dimensions"),
    ("dilation zero", backprop_input(dilations=[1, 0, 1, 1]), DescriptorError, "dilations[1]",
     "Dilated rates should be larger than 0."),
    ("dilation negative", backprop_filter(dilations=[1, 1, -2, 1]), DescriptorError, "dilations[2]",
     "Dilated rates should be larger than 0."),
    ("dilation float", forward(dilations=[1, 2.0, 1, 1]), DescriptorError, "dilations[1]", "an integer"),
    ("batch dilation", backprop_input(dilations=[2, 1, 1, 1]), DescriptorError, "dilations",
     "Current implementation does not yet support dilations in the batch and depth dimensions."),
    ("depth dilation NCHW", forward(dilations=[1, 2, 1, 1], data_format="NCHW"), DescriptorError, "dilations",
     "batch and depth"),
    # padding, data_format
    ("padding lower case", backprop_input(padding="same"), DescriptorError, "padding",
     """Value for attr 'padding' of "same" is not in the list of allowed values: "SAME", "VALID", "EXPLICIT\""""),
    ("padding None", forward(padding=None), DescriptorError, "padding", "not in the list of allowed values"),
    ("data_format", backprop_input(data_format="NHCW"), DescriptorError, "data_format",
     """Value for attr 'data_format' of "NHCW" is not in the list of allowed values: "NHWC", "NCHW\""""),
    # explicit_paddings
    ("paddings without EXPLICIT", backprop_input(explicit_paddings=[0, 0, 1, 1, 1, 1, 0, 0]), DescriptorError,
     "explicit_paddings", "explicit_paddings attribute must be empty if the padding attribute is not EXPLICIT"),
    ("EXPLICIT without paddings", backprop_input(padding="EXPLICIT"), DescriptorError, "explicit_paddings",
     "explicit_paddings attribute must contain 8 values, but got: 0"),
    ("EXPLICIT with 4 paddings", forward(padding="EXPLICIT", explicit_paddings=[0, 0, 1, 1]), DescriptorError,
     "explicit_paddings", "explicit_paddings attribute must contain 8 values, but got: 4"),
    ("negative padding", backprop_input(padding="EXPLICIT", explicit_paddings=[0, 0, -1, 1, 1, 1, 0, 0]),
     DescriptorError, "explicit_paddings[2]", "All elements of explicit_paddings must be nonnegative"),
    ("float padding", backprop_input(padding="EXPLICIT", explicit_paddings=[0, 0, 1, 1, 0.5, 1, 0, 0]),
     DescriptorError, "explicit_paddings[4]", "an integer"),
    ("padding beyond int32", backprop_input(padding="EXPLICIT", explicit_paddings=[0, 0, 2**40, 0, 0, 0, 0, 0]),
     DescriptorError, "explicit_paddings[2]", "out of range for an int32"),
    ("batch padding", backprop_filter(padding="EXPLICIT", explicit_paddings=[1, 0, 1, 1, 1, 1, 0, 0]),
     DescriptorError, "explicit_paddings",
     "Nonzero explicit padding in the batch or depth dimensions is not supported"),
    ("depth padding NCHW", backprop_input(padding="EXPLICIT", data_format="NCHW",
                                          explicit_paddings=[0, 0, 0, 1, 1, 1, 1, 1]),
     DescriptorError, "explicit_paddings", "Nonzero explicit padding in the batch or depth dimensions"),
    ("paddings not a list", backprop_input(padding="EXPLICIT", explicit_paddings=3), DescriptorError,
     "explicit_paddings", "a list of 8 integers"),
    # the backend
    ("backend", lambda: depthwise_conv2d_native(X, F, S1, "SAME", backend="gpu"), DescriptorError, "backend",
     "'auto', 'fast' or 'reference'"),
]

TENSOR_CASES = [
    # dtypes (T in {half, bfloat16, float, double}; all tensors share T)
    ("int32 filter", backprop_input(filter=F.astype(np.int32)), DataTypeError, "filter.dtype",
     "Value for attr 'T' of int32 is not in the list of allowed values: half, bfloat16, float, double"),
    ("complex input", forward(input=X.astype(np.complex64)), DataTypeError, "input.dtype", "Value for attr 'T'"),
    ("list filter", backprop_input(filter=F.tolist()), DataTypeError, "filter", "a NumPy array"),
    ("mismatched out_backprop", backprop_input(out_backprop=DY.astype(np.float64)), DataTypeError,
     "out_backprop.dtype", "float32 (T"),
    ("mismatched filter (forward)", forward(filter=F.astype(np.float16)), DataTypeError, "filter.dtype", "float32"),
    ("mismatched out_backprop (filter grad)", backprop_filter(out_backprop=DY.astype(np.float16)), DataTypeError,
     "out_backprop.dtype", "float32"),
    ("descriptor T", lambda: DepthwiseConv2dNativeDesc("int32", S1, "SAME"), DataTypeError, "T",
     "Value for attr 'T'"),
    ("descriptor T None", lambda: DepthwiseConv2dNativeDesc(None, S1, "SAME"), DataTypeError, "T",
     "Value for attr 'T'"),
    ("descriptor T vs array", lambda: DepthwiseConv2dNativeBackpropInputDesc("double", S1, "SAME")(
        [1, 5, 5, 2], F, DY), DataTypeError, "filter.dtype", "float64"),
    # ranks
    ("input rank 3", forward(input=X[0]), ShapeError, "input.ndim", "input must be 4-dimensional"),
    ("filter rank 3", backprop_input(filter=F[0]), ShapeError, "filter.ndim",
     "DepthwiseConv2DBackpropInput: filter must be 4-dimensional"),
    ("out_backprop rank 5", backprop_filter(out_backprop=DY[None]), ShapeError, "out_backprop.ndim",
     "DepthwiseConv2DBackpropFilter: out_backprop must be 4-dimensional"),
    # input_sizes / filter_sizes (TF: int32, 1-D, 4 values, each >= 0)
    ("input_sizes 3 values", backprop_input(input_sizes=[1, 5, 5]), ShapeError, "input_sizes",
     "DepthwiseConv2DBackpropInput: input must be 4-dimensional"),
    ("input_sizes int64", backprop_input(input_sizes=np.array([1, 5, 5, 2], np.int64)), DataTypeError,
     "input_sizes.dtype", "int32"),
    ("input_sizes float array", backprop_input(input_sizes=np.array([1, 5, 5, 2], np.float32)), DataTypeError,
     "input_sizes.dtype", "int32"),
    ("input_sizes 2-D", backprop_input(input_sizes=np.array([[1, 5], [5, 2]], np.int32)), ShapeError,
     "input_sizes.ndim", "input_sizes input must be 1-dim, not 2"),
    ("input_sizes floats", backprop_input(input_sizes=[1.0, 5, 5, 2]), DataTypeError, "input_sizes[0]",
     "an integer"),
    ("input_sizes nested", backprop_input(input_sizes=[[1, 5], [5, 2]]), DataTypeError, "input_sizes[0]",
     "an integer"),
    ("input_sizes None", backprop_input(input_sizes=None), DataTypeError, "input_sizes", "4 integers"),
    ("input_sizes negative", backprop_input(input_sizes=[1, -5, 5, 2]), ShapeError, "input_sizes[1]",
     "Dimension 1 of input_sizes must be >= 0"),
    ("input_sizes beyond int32", backprop_input(input_sizes=[1, 5, 5, 2**33]), ShapeError, "input_sizes[3]",
     "int32"),
    ("filter_sizes 3 values", backprop_filter(filter_sizes=[3, 3, 2]), ShapeError, "filter_sizes",
     "DepthwiseConv2DBackpropFilter: filter must be 4-dimensional"),
    ("filter_sizes negative", backprop_filter(filter_sizes=[3, -3, 2, 1]), ShapeError, "filter_sizes[1]",
     "Dimension 1 of filter_sizes must be >= 0"),
    # shapes that disagree
    ("forward depth", forward(filter=np.ones((3, 3, 3, 1), np.float32)), ShapeError, "filter.shape[2]",
     "input and filter must have the same depth: 2 vs 3"),
    ("input grad in_depth", backprop_input(input_sizes=[1, 5, 5, 3]), ShapeError, "filter.shape[2]",
     "DepthwiseConv2DBackpropInput: input and filter must have the same in_depth"),
    ("filter grad in_depth", backprop_filter(filter_sizes=[3, 3, 3, 1]), ShapeError, "filter_sizes[2]",
     "DepthwiseConv2DBackpropFilter: input and filter must have the same in_depth"),
    ("input grad out_depth", backprop_input(out_backprop=np.ones((1, 5, 5, 3), np.float32)), ShapeError,
     "out_backprop.shape[3]", "DepthwiseConv2DBackpropInput: depth_multiplier * in_depth not equal to out_depth"),
    ("filter grad out_depth", backprop_filter(filter_sizes=[3, 3, 2, 2]), ShapeError, "out_backprop.shape[3]",
     "DepthwiseConv2DBackpropFilter: depth_multiplier * in_depth not equal to out_depth"),
    ("NCHW out_depth", backprop_input(input_sizes=[1, 2, 5, 5], out_backprop=np.ones((1, 5, 5, 2), np.float32),
                                      data_format="NCHW"), ShapeError, "out_backprop.shape[1]",
     "depth_multiplier * in_depth not equal to out_depth"),
    ("input grad batch", backprop_input(input_sizes=[2, 5, 5, 2]), ShapeError, "out_backprop.shape[0]",
     "DepthwiseConv2DBackpropInput: input and out_backprop must have the same batch size"),
    ("filter grad batch", backprop_filter(out_backprop=np.ones((2, 5, 5, 2), np.float32)), ShapeError,
     "out_backprop.shape[0]", "input and out_backprop must have the same batch size"),
    ("rows", backprop_input(out_backprop=np.ones((1, 4, 5, 2), np.float32)), ShapeError, "out_backprop.shape[1]",
     "DepthwiseConv2DBackpropInput: Number of rows of out_backprop doesn't match computed: actual = 4, computed = 5"),
    ("cols", backprop_filter(out_backprop=np.ones((1, 5, 4, 2), np.float32)), ShapeError, "out_backprop.shape[2]",
     "Number of cols of out_backprop doesn't match computed: actual = 4, computed = 5"),
    ("NCHW rows", backprop_input(input_sizes=[1, 2, 5, 5], out_backprop=np.ones((1, 2, 3, 5), np.float32),
                                 data_format="NCHW"), ShapeError, "out_backprop.shape[2]",
     "Number of rows of out_backprop doesn't match computed: actual = 3, computed = 5"),
    ("dilated rows", backprop_input(dilations=[1, 2, 2, 1], padding="VALID"), ShapeError, "out_backprop.shape[1]",
     "actual = 5, computed = 1"),  # TF's CPU kernel would ignore the dilation and accept this
    ("negative output", forward(input=np.ones((1, 2, 2, 2), np.float32), filter=np.ones((7, 7, 2, 1), np.float32),
                                strides=[1, 2, 2, 1], padding="VALID"), ShapeError, "input.shape[1]",
     "Computed output size would be negative: -1 [input_size: 2, effective_filter_size: 7, stride: 2]"),
    ("negative output (input grad)", backprop_input(input_sizes=[1, 5, 2, 2], padding="VALID",
                                                    dilations=[1, 1, 3, 1]), ShapeError, "input_sizes[2]",
     "Computed output size would be negative: -4 [input_size: 2, effective_filter_size: 7, stride: 1]"),
    ("negative output NCHW", backprop_filter(input=np.ones((1, 2, 5, 1), np.float32), filter_sizes=[1, 3, 2, 1],
                                             out_backprop=np.ones((1, 2, 5, 1), np.float32), padding="VALID",
                                             data_format="NCHW"), ShapeError, "input.shape[3]",
     "Computed output size would be negative: -1"),
    # an output too large to address: every input is empty, so only the result's size is at fault
    ("huge result", backprop_input(input_sizes=[1, 2**20, 2**20, 2**31 - 1],
                                   filter=np.ones((1, 1, 2**31 - 1, 0), np.float32),
                                   out_backprop=np.ones((1, 2**20, 2**20, 0), np.float32),
                                   padding="VALID"), ShapeError, "input_sizes", "NumPy can address"),
]


@pytest.mark.parametrize("label, call, error, field, fragment", ATTRIBUTE_CASES + TENSOR_CASES,
                         ids=[case[0] for case in ATTRIBUTE_CASES + TENSOR_CASES])
def test_validation(label, call, error, field, fragment):
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, GradopsError) and isinstance(info.value, ValueError)
    assert info.value.field == field, str(info.value)
    assert str(info.value).startswith(f"{field}: "), str(info.value)
    assert fragment in str(info.value), str(info.value)


def test_each_tf_condition_of_spec_5_5_is_covered():
    """The rows of the SPEC 5.5 table, by TF wording, all appear among the cases above."""
    fragments = " | ".join(case[4] for case in ATTRIBUTE_CASES + TENSOR_CASES)
    for tf_wording in ("Sliding window strides field must specify 4 dimensions",
                       "Current implementation does not yet support strides in the batch and depth dimensions.",
                       "Stride must be > 0, but got 0", "dilations in the batch and depth dimensions",
                       "must contain 8 values, but got: 4", "All elements of explicit_paddings must be nonnegative",
                       "must be empty if the padding attribute is not EXPLICIT",
                       "Nonzero explicit padding in the batch or depth dimensions is not supported",
                       "DepthwiseConv2DBackpropInput: input must be 4-dimensional", "filter must be 4-dimensional",
                       "input and filter must have the same in_depth", "input and filter must have the same depth",
                       "depth_multiplier * in_depth not equal to out_depth",
                       "input and out_backprop must have the same batch size",
                       "Number of rows of out_backprop doesn't match computed",
                       "Number of cols of out_backprop doesn't match computed",
                       "Value for attr 'T'", "int32"):
        assert tf_wording in fragments, tf_wording


def test_unequal_strides_are_accepted():
    """SPEC 5.5 lists TF's "equal length strides" error; gradops accepts unequal strides (documented)."""
    dx = depthwise_conv2d_native_backprop_input([1, 5, 5, 2], F, np.ones((1, 5, 3, 2), np.float32), [1, 1, 2, 1],
                                                "SAME", backend="reference")
    assert dx.shape == (1, 5, 5, 2)
    assert "TensorFlow rejects" in depthwise_conv2d_native.__doc__ or "Unlike TF" in depthwise_conv2d_native.__doc__


def test_sizes_accept_int32_arrays_and_numpy_integers():
    expected = backprop_input()()
    for sizes in (np.array([1, 5, 5, 2], np.int32), [np.int64(1), np.int32(5), 5, np.uint8(2)], (1, 5, 5, 2)):
        np.testing.assert_array_equal(backprop_input(input_sizes=sizes)(), expected)
    np.testing.assert_array_equal(backprop_filter(filter_sizes=np.array([3, 3, 2, 1], np.int32))(),
                                  backprop_filter()())


def test_failed_validation_leaves_out_untouched():
    out = np.full((1, 5, 5, 2), 7, np.float32)
    with pytest.raises(ShapeError):
        depthwise_conv2d_native_backprop_input([1, 5, 5, 2], F, np.ones((1, 4, 5, 2), np.float32), S1, "SAME",
                                               out=out, backend="reference")
    with pytest.raises(DescriptorError):
        depthwise_conv2d_native_backprop_input([1, 5, 5, 2], F, DY, S1, "SAME", out=out, backend="nope")
    with pytest.raises(AliasingError):  # elements of out that overlap each other
        depthwise_conv2d_native_backprop_input([1, 5, 5, 2], F, DY, S1, "SAME",
                                               out=np.lib.stride_tricks.as_strided(out, strides=(0, 0, 0, 4)),
                                               backend="reference")
    assert np.all(out == 7)
