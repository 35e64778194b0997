"""SPEC section 2: data types, DMLCalcBufferTensorSize, TensorDesc validation, buffer binding."""

from __future__ import annotations

import numpy as np
import pytest

import gradops
from gradops import (ActivationReluGradDesc, BindingError, DataType, DataTypeError, DescriptorError,
                     FeatureLevel, ShapeError, TensorDesc, calc_buffer_tensor_size)


def test_data_type_names_and_values():
    # SPEC 2.1, the header's values.
    expected = {"UNKNOWN": 0, "FLOAT32": 1, "FLOAT16": 2, "UINT32": 3, "UINT16": 4, "UINT8": 5, "INT32": 6,
                "INT16": 7, "INT8": 8, "FLOAT64": 9, "UINT64": 10, "INT64": 11, "UINT4": 12, "INT4": 13}
    assert {m.name: m.value for m in DataType} == expected
    assert DataType.of("DML_TENSOR_DATA_TYPE_FLOAT16") is DataType.FLOAT16
    assert DataType.of("float32") is DataType.FLOAT32
    assert DataType.of(2) is DataType.FLOAT16
    assert DataType.of(np.dtype("int8")) is DataType.INT8
    assert DataType.FLOAT16.numpy_dtype == np.float16
    with pytest.raises(DataTypeError, match="DataType"):
        DataType.of("FLOAT128")
    with pytest.raises(DataTypeError, match="packed 4-bit"):
        DataType.INT4.numpy_dtype


def test_feature_level_values():
    assert FeatureLevel.of("5.1") is FeatureLevel.FL_5_1
    assert FeatureLevel.of("DML_FEATURE_LEVEL_3_0") == 0x3000
    assert FeatureLevel.of(0x6400) is FeatureLevel.FL_6_4
    with pytest.raises(gradops.FeatureLevelError, match="feature_level"):
        FeatureLevel.of("9.9")


@pytest.mark.parametrize("data_type, sizes, strides, expected", [
    # Every number of SPEC 2.2.
    ("FLOAT32", (1, 1, 2, 3), None, 24),
    ("FLOAT16", (1, 1, 3, 5), None, 32),  # 30 rounds up to a multiple of 4
    ("FLOAT32", (2, 3, 4, 5), (0, 1, 0, 0), 12),  # per-channel broadcast: lastIndex 2
    ("UINT8", (1, 1, 1, 5), None, 8),
    ("FLOAT16", (1, 1, 3, 3), (9, 9, 4, 1), 24),  # rows padded to 4: lastIndex 10 -> 22 -> 24
    ("INT4", (1, 1, 1, 5), None, 4),  # 20 bits -> 3 bytes -> 4
    ("UNKNOWN", (2, 2), None, 0),
])
def test_calc_buffer_tensor_size(data_type, sizes, strides, expected):
    assert calc_buffer_tensor_size(data_type, sizes, strides) == expected


def test_tensor_desc_defaults():
    desc = TensorDesc("FLOAT16", [1, 1, 3, 5])
    assert desc.sizes == (1, 1, 3, 5) and desc.strides is None
    assert desc.element_strides == (15, 15, 5, 1)
    assert desc.size_in_bytes == 32
    desc.validate()


@pytest.mark.parametrize("kwargs, error, field", [
    (dict(data_type="UNKNOWN", sizes=(2,)), DataTypeError, "X.DataType"),
    (dict(data_type="FLOAT32", sizes=()), ShapeError, "X.DimensionCount"),
    (dict(data_type="FLOAT32", sizes=(1,) * 9), ShapeError, "X.DimensionCount"),
    (dict(data_type="FLOAT32", sizes=(2, 0, 3)), ShapeError, "X.Sizes[1]"),
    (dict(data_type="FLOAT32", sizes=(2, 3), strides=(1,)), DescriptorError, "X.Strides"),
    (dict(data_type="FLOAT32", sizes=(2, 3), total_tensor_size_in_bytes=20), DescriptorError,
     "X.TotalTensorSizeInBytes"),
    (dict(data_type="FLOAT32", sizes=(2, 3), guaranteed_base_offset_alignment=6), DescriptorError,
     "X.GuaranteedBaseOffsetAlignment"),
    (dict(data_type="FLOAT32", sizes=(2, 3), guaranteed_base_offset_alignment=2), DescriptorError,
     "X.GuaranteedBaseOffsetAlignment"),  # a power of two, but below the element size
    (dict(data_type="FLOAT32", sizes=(2, 3), flags=2), DescriptorError, "X.Flags"),
    (dict(data_type="FLOAT32", sizes=(65536, 65536)), ShapeError, "X.Sizes"),  # 2^32 elements
])
def test_tensor_desc_rules(kwargs, error, field):
    with pytest.raises(error) as info:
        TensorDesc(**kwargs).validate("X")
    assert str(info.value).startswith(field + ":")


def test_tensor_desc_construction_rejects_non_integers():
    with pytest.raises(DescriptorError, match=r"Sizes\[1\]: expected an integer"):
        TensorDesc("FLOAT32", (2, 2.5))
    with pytest.raises(DescriptorError, match=r"Strides\[0\]"):
        TensorDesc("FLOAT32", (2,), strides=(-1,))
    with pytest.raises(DescriptorError, match="TotalTensorSizeInBytes"):
        TensorDesc("FLOAT32", (2,), total_tensor_size_in_bytes=-4)


def test_alignment_accepts_power_of_two_at_least_element_size():
    TensorDesc("FLOAT16", (4,), guaranteed_base_offset_alignment=2).validate()
    TensorDesc("FLOAT32", (4,), guaranteed_base_offset_alignment=16).validate()


@pytest.mark.parametrize("sizes, strides, ok", [
    ((2, 3), (0, 1), False),  # broadcast
    ((2, 3), (2, 1), False),  # rows overlap
    ((2, 3), (3, 1), True),
    ((2, 3), (4, 1), True),  # padded rows
    ((2, 3), (1, 2), True),  # column-major
    ((1, 3), (0, 1), True),  # a 0 stride on a size-1 axis aliases nothing
    ((2, 2), (3, 2), True),  # interleaved: offsets 0, 2, 3, 5
    ((3, 2), (1, 2), False),  # offsets 0,2,1,3,2,4: 2 twice
])
def test_output_strides_must_not_alias(sizes, strides, ok):
    desc = TensorDesc("FLOAT32", sizes, strides)
    desc.validate("X")  # any strides are fine on an input
    if ok:
        desc.validate("Y", output=True)
    else:
        with pytest.raises(DescriptorError, match=r"^Y\.Strides: an output tensor may not alias"):
            desc.validate("Y", output=True)


def _relu_grad_desc(x, dy, dx):
    return ActivationReluGradDesc(x, dy, dx)


def test_binding_reads_strided_inputs_and_writes_through_output_strides():
    # X is a padded 2x3 view (row stride 4), dY broadcasts one row (stride 0), dX has padded rows.
    x_buf = np.array([1, -1, 2, 99, -3, 4, -5, 99], dtype=np.float32)
    dy_buf = np.array([10, 20, 30], dtype=np.float32)
    dx_buf = np.full(8, 7.0, dtype=np.float32)
    desc = _relu_grad_desc(TensorDesc("FLOAT32", (2, 3), (4, 1)), TensorDesc("FLOAT32", (2, 3), (0, 1)),
                           TensorDesc("FLOAT32", (2, 3), (4, 1)))
    (result,) = desc.compile()(x_buf, dy_buf, dx_buf)
    assert result is dx_buf
    np.testing.assert_array_equal(dx_buf, [10, 0, 30, 7, 0, 20, 0, 7])  # padding untouched


def test_binding_allocates_outputs_and_accepts_bytes():
    desc = _relu_grad_desc(*(TensorDesc("FLOAT16", (3,)) for _ in range(3)))
    # Bound buffers must hold TotalTensorSizeInBytes: 6 bytes of data rounded up to 8.
    x = np.array([1, -1, 2, 0], np.float16).tobytes()
    dy = bytearray(np.array([5, 6, 7, 0], np.float16).tobytes())
    with pytest.raises(BindingError, match="at least 8 bytes"):
        desc.compile()(x[:6], dy)
    (out,) = desc.compile(feature_level="3.0")(x, dy)
    assert out.nbytes == 8  # TotalTensorSizeInBytes: 6 bytes rounded up to 8
    np.testing.assert_array_equal(out[:6].view(np.float16), [5, 0, 7])


def test_binding_errors():
    desc = _relu_grad_desc(*(TensorDesc("FLOAT32", (4,)) for _ in range(3)))
    compiled = desc.compile()
    small = np.zeros(3, np.float32)
    ok = np.zeros(4, np.float32)
    with pytest.raises(BindingError, match="^InputGradientTensor: expected a buffer of at least 16 bytes"):
        compiled(ok, small, ok.copy())
    readonly = np.zeros(4, np.float32)
    readonly.flags.writeable = False
    with pytest.raises(BindingError, match="^OutputGradientTensor: expected a writeable buffer"):
        compiled(ok, ok, readonly)
    with pytest.raises(BindingError, match="^buffers: "):
        compiled(ok)
    with pytest.raises(BindingError, match="^InputTensor: expected a NumPy array or bytes-like"):
        compiled([1.0, 2.0], ok, ok.copy())


def test_failed_binding_leaves_outputs_untouched():
    desc = _relu_grad_desc(*(TensorDesc("FLOAT32", (4,)) for _ in range(3)))
    out = np.full(4, 3.0, np.float32)
    with pytest.raises(BindingError):
        desc.compile()(np.ones(4, np.float32), np.ones(2, np.float32), out)
    np.testing.assert_array_equal(out, 3.0)


def test_in_place_binding_on_one_buffer():
    # DirectML lets an element-wise output alias its input: bind the same buffer twice.
    buf = np.array([-1, 2, -3, 4], np.float32)
    desc = gradops.ActivationReluDesc(TensorDesc("FLOAT32", (4,)), TensorDesc("FLOAT32", (4,)))
    desc.compile()(buf, buf)
    np.testing.assert_array_equal(buf, [0, 2, 0, 4])
