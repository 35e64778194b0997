"""Memoised validation (gradops._memo): a remembered answer is only returned for arguments the
check would treat alike, and every bad argument still raises after good ones were cached."""

import numpy as np
import pytest

import gradops
from gradops._memo import memoized, typed_key

F32 = np.float32


def test_typed_key_tells_apart_values_that_hash_alike():
    assert len({typed_key(1), typed_key(1.0), typed_key(True), typed_key(np.int64(1))}) == 4
    assert typed_key([1, 2]) != typed_key((1, 2))
    assert typed_key([1, [2, 3]]) == typed_key([1, [2, 3]])
    # nesting and element types are kept, whatever the elements' values
    nested = [[1, 2], [[1], 2], [[1, 2]], [int, 1, 2], [1, int, 2], [(1, 2)], ["1", 2], [None, 2],
              [1, 2.0], [True, 2], [np.int64(1), 2], (1, 2), [], ()]
    assert len({typed_key(value) for value in nested}) == len(nested)
    # floats to the bit, strings apart from the numbers they spell
    assert len({typed_key(value) for value in (0.0, -0.0, 1e-300, 1.0000000000000002, "1", b"1")}) == 6
    with pytest.raises(TypeError):
        typed_key((lambda: 1,))  # nothing that does not pickle is a key


def test_typed_key_keys_small_arrays_by_dtype_shape_and_values():
    sizes = np.array([1, 4, 4, 2], np.int32)
    assert typed_key((sizes, "SAME")) == typed_key((np.array([1, 4, 4, 2], np.int32), "SAME"))
    others = [np.array([1, 4, 4, 2], np.int64), np.array([1, 4, 4, 3], np.int32),
              np.array([[1, 4], [4, 2]], np.int32), np.array([1, 4, 4, 2], np.float32), [1, 4, 4, 2], (1, 4, 4, 2),
              np.array([1, 4, 4, 2], ">i4")]
    assert len({typed_key((sizes, "SAME"))} | {typed_key((other, "SAME")) for other in others}) == 1 + len(others)
    with pytest.raises(TypeError):
        typed_key((np.zeros(65, np.int32),))  # large arrays are no key
    with pytest.raises(TypeError):
        typed_key((np.array(["a"]),))  # nor arrays of anything but numbers


def test_memoized_checks_once_and_never_caches_a_failure():
    calls = []

    def check(value):
        calls.append(value)
        if value < 0:
            raise ValueError(value)
        return value * 2

    table: dict = {}
    assert memoized(table, (3,), lambda: check(3)) == 6
    assert memoized(table, (3,), lambda: check(3)) == 6
    assert calls == [3]
    for _ in range(2):
        with pytest.raises(ValueError):
            memoized(table, (-1,), lambda: check(-1))
    assert calls == [3, -1, -1]
    assert memoized(table, (np.zeros(100),), lambda: check(5)) == 10  # no key: checked each time
    assert memoized(table, (np.zeros(100),), lambda: check(5)) == 10
    assert calls == [3, -1, -1, 5, 5]


def _backprop_input(**attributes):
    dy = np.ones((1, 4, 4, 2), F32)
    filt = np.ones((3, 3, 2, 1), F32)
    args = dict(strides=[1, 1, 1, 1], padding="SAME") | attributes
    return gradops.depthwise_conv2d_native_backprop_input((1, 4, 4, 2), filt, dy, backend="reference", **args)


@pytest.mark.parametrize("attributes, field", [
    (dict(strides=[1, 1.0, 1, 1]), "strides"),
    (dict(strides=[1, True, 1, 1]), "strides"),
    (dict(dilations=[1, 1, 1.0, 1]), "dilations"),
    (dict(padding="EXPLICIT", explicit_paddings=[0, 0, 1, 1.0, 1, 1, 0, 0]), "explicit_paddings"),
])
def test_depthwise_attributes_that_equal_valid_ones_still_raise(attributes, field):
    """After the valid integer attributes were cached, the same values as floats or bools (equal
    and hashing alike) are still refused, as they are on a first call."""
    expected = _backprop_input()
    np.testing.assert_array_equal(_backprop_input(), expected)  # cached now
    with pytest.raises(gradops.GradopsError, match=f"^{field}"):
        _backprop_input(**attributes)


def test_depthwise_geometry_is_checked_per_shape():
    """A remembered geometry is never used for other shapes: a dy that does not fit input_sizes
    raises after a matching one was cached."""
    filt = np.ones((3, 3, 2, 1), F32)
    args = dict(strides=[1, 1, 1, 1], padding="VALID", backend="reference")
    gradops.depthwise_conv2d_native_backprop_input((1, 4, 4, 2), filt, np.ones((1, 2, 2, 2), F32), **args)
    with pytest.raises(gradops.GradopsError, match=r"^out_backprop\.shape\[1\]"):
        gradops.depthwise_conv2d_native_backprop_input((1, 4, 4, 2), filt, np.ones((1, 3, 2, 2), F32), **args)
    sizes = np.array([1, 4, 4, 2], np.int32)  # keyed by its dtype, shape and values
    out = gradops.depthwise_conv2d_native_backprop_input(sizes, filt, np.ones((1, 2, 2, 2), F32), **args)
    assert out.shape == (1, 4, 4, 2)
    with pytest.raises(gradops.GradopsError, match=r"^input_sizes\.dtype"):
        gradops.depthwise_conv2d_native_backprop_input(sizes.astype(np.int64), filt, np.ones((1, 2, 2, 2), F32),
                                                       **args)
    sizes[3] = 3  # the same array, other values
    with pytest.raises(gradops.GradopsError, match=r"^filter\.shape\[2\]"):
        gradops.depthwise_conv2d_native_backprop_input(sizes, filt, np.ones((1, 2, 2, 2), F32), **args)
