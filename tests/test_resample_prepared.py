"""Prepared resample calls (``gradops.resample._call``): a call with the op, sizes, parameters,
array layouts and backend of an earlier one reuses the run that call prepared. These tests check
that such a call still follows its own data and addresses, and still refuses what only it gets
wrong.

Values are small integers, so every nearest sum is exact in float32 and the brute-force block
sums and repeats below give the exact bits.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import gradops
from gradops import _resample_reference
from gradops.errors import AliasingError, DataTypeError, DescriptorError, ShapeError

resample = importlib.import_module("gradops.resample")  # the module; ``gradops.resample`` is the function


def _integers(rng, shape):
    return rng.integers(-4, 5, size=shape).astype(np.float32)


def _block_sums(dy):
    """The nearest 2x gradient on H and W (half-pixel grid): each dx element sums its 2x2 block."""
    n, c, h, w = dy.shape
    return dy.reshape(n, c, h // 2, 2, w // 2, 2).sum(axis=(3, 5))


def _repeats(x):
    """The nearest 2x forward on H and W."""
    return x.repeat(2, axis=2).repeat(2, axis=3)


def _nhwc_memory(shape, dtype=np.float32):
    """An NCHW-shaped array whose memory is NHWC (channels innermost)."""
    n, c, h, w = shape
    return np.empty((n, h, w, c), dtype).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("with_out", [False, True])
def test_repeated_gradient_calls_follow_their_data(backend, layout, with_out, monkeypatch):
    monkeypatch.setenv("GRADOPS_BACKEND", backend)
    rng = np.random.default_rng(1)
    for _ in range(3):
        dy = _integers(rng, (2, 3, 8, 12))
        if layout == "nhwc":
            dy = np.ascontiguousarray(dy.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        out = _nhwc_memory((2, 3, 4, 6)) if layout == "nhwc" else np.empty((2, 3, 4, 6), np.float32)
        dx = resample.resample_grad(dy, [2, 3, 4, 6], scales=[1, 1, 2, 2], out=out if with_out else None)
        assert (dx is out) == with_out
        np.testing.assert_array_equal(dx, _block_sums(dy))
    assert len(resample._CALLS) == 1  # the first call's run served the other two


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_repeated_forward_calls_follow_their_data(backend, mode, monkeypatch):
    """Nearest forward calls copy bits (a selection), linear ones sum: both kinds of prepared run.
    The linear results are checked against the reference backend, on data its float64 sums
    round alike."""
    monkeypatch.setenv("GRADOPS_BACKEND", backend)
    rng = np.random.default_rng(2)
    for _ in range(3):
        x = _integers(rng, (1, 2, 5, 7))
        y = resample.resample1(x, [1, 2, 10, 14], mode=mode)
        expected = _repeats(x) if mode == "nearest" else resample.resample1(x, [1, 2, 10, 14], mode=mode,
                                                                            backend="reference")
        np.testing.assert_array_equal(y, expected)
    assert len(resample._CALLS) == (1 if mode == "nearest" else 2)  # linear: the checks, backend="reference"


def test_each_out_layout_gets_its_own_run():
    rng = np.random.default_rng(3)
    dy = _integers(rng, (1, 4, 6, 6))
    for out in (np.empty((1, 4, 3, 3), np.float32), _nhwc_memory((1, 4, 3, 3)), np.empty((1, 4, 3, 3), np.float32),
                _nhwc_memory((1, 4, 3, 3))):
        out[...] = np.nan
        np.testing.assert_array_equal(resample.resample_grad(dy, (1, 4, 3, 3), scales=(1, 1, 2, 2), out=out),
                                      _block_sums(dy))
    assert len(resample._CALLS) == 2


def test_an_out_overlapping_the_source_is_refused_on_every_call():
    rng = np.random.default_rng(4)
    x = _integers(rng, (1, 2, 4, 4))
    resample.resample1(x, x.shape, mode="linear", out=np.empty_like(x))
    before = x.copy()
    with pytest.raises(AliasingError, match="`x`"):
        resample.resample1(x, x.shape, mode="linear", out=x)  # the same layout as the first out
    np.testing.assert_array_equal(x, before)


def test_a_read_only_out_is_refused_after_a_writeable_one():
    rng = np.random.default_rng(5)
    dy = _integers(rng, (1, 2, 4, 4))
    out = np.empty((1, 2, 2, 2), np.float32)
    resample.resample_grad(dy, (1, 2, 2, 2), out=out)
    out.flags.writeable = False
    with pytest.raises(AliasingError, match="writeable"):
        resample.resample_grad(dy, (1, 2, 2, 2), out=out)


def test_bad_arguments_of_a_known_layout_still_raise():
    rng = np.random.default_rng(6)
    dy = _integers(rng, (1, 2, 4, 4))
    resample.resample_grad(dy, [1, 2, 2, 2], scales=[1, 1, 2, 2])
    with pytest.raises(DescriptorError, match=r"scales\[0\]"):
        resample.resample_grad(dy, [1, 2, 2, 2], scales=[True, 1, 2, 2])  # True == 1, yet not a number here
    with pytest.raises(ShapeError, match=r"input_sizes\[1\]"):
        resample.resample_grad(dy, [1, 2.0, 2, 2], scales=[1, 1, 2, 2])  # 2.0 == 2, yet not a size
    with pytest.raises(DataTypeError, match="dy.dtype"):
        resample.resample_grad(dy.astype(np.float64), [1, 2, 2, 2], scales=[1, 1, 2, 2])
    with pytest.raises(DescriptorError, match="backend"):
        resample.resample_grad(dy, [1, 2, 2, 2], scales=[1, 1, 2, 2], backend="fastest")
    with pytest.raises(ShapeError, match="out.shape"):
        resample.resample_grad(dy, [1, 2, 2, 2], scales=[1, 1, 2, 2], out=np.empty((1, 2, 2, 3), np.float32))
    with pytest.raises(ShapeError, match="out.shape"):  # a call whose preparation raised kept nothing
        resample.resample_grad(dy, [1, 2, 2, 2], scales=[1, 1, 2, 2], out=np.empty((1, 2, 2, 3), np.float32))


def test_the_backend_follows_the_environment_between_calls(monkeypatch):
    rng = np.random.default_rng(7)
    dy = _integers(rng, (1, 2, 4, 6))
    seen = []
    reference = _resample_reference._run_reference
    monkeypatch.setattr(_resample_reference, "_run_reference", lambda *a, **k: seen.append(1) or reference(*a, **k))
    monkeypatch.setenv("GRADOPS_BACKEND", "fast")
    fast = resample.resample_grad(dy, (1, 2, 2, 3), scales=(1, 1, 2, 2))
    monkeypatch.setenv("GRADOPS_BACKEND", "reference")
    exact = resample.resample_grad(dy, (1, 2, 2, 3), scales=(1, 1, 2, 2))
    assert seen == [1]
    np.testing.assert_array_equal(fast, exact)
    np.testing.assert_array_equal(exact, _block_sums(dy))


class _Tagged(np.ndarray):
    pass


def test_small_arrays_are_keyed_and_operands_that_cannot_be_are_prepared_per_call():
    """Sizes and scales given as small arrays are part of the key, by value: the second call
    reuses the first one's run. An ndarray subclass as the source is no key: every such call is
    prepared for itself, and remembered nowhere."""
    rng = np.random.default_rng(8)
    dy = _integers(rng, (1, 2, 4, 4))
    for sizes, source, scales, runs in ((np.array([1, 2, 2, 2]), dy, (1, 1, 2, 2), 1),
                                        ([1, 2, 2, 2], dy.view(_Tagged), None, 0),
                                        ([1, 2, 2, 2], dy, np.array([1, 1, 2, 2], np.float32), 1)):
        resample._CALLS.clear()
        for _ in range(2):
            np.testing.assert_array_equal(resample.resample_grad(source, sizes, scales=scales), _block_sums(dy))
        assert len(resample._CALLS) == runs


@pytest.mark.parametrize("operator", ["resample1", "resample_grad"])
def test_arrays_not_aligned_to_their_elements_are_staged(backend, operator):
    """Fields of a packed structured array: strides of 5 bytes, so no kernel can index their
    float32 elements; the fast backend copies the source and computes into a temporary."""
    rng = np.random.default_rng(9)
    packed = np.dtype([("tag", "u1"), ("value", "<f4")])
    for _ in range(2):
        data = _integers(rng, (1, 2, 4, 6))
        source = np.zeros(data.shape, packed)["value"]
        source[...] = data
        target = np.zeros(data.shape if operator == "resample1" else (1, 2, 2, 3), packed)
        out = target["value"] if operator == "resample_grad" else np.zeros((1, 2, 8, 12), packed)["value"]
        assert out.strides[-1] == 5 and source.strides[-1] == 5
        if operator == "resample1":
            result = gradops.resample1(source, (1, 2, 8, 12), out=out, backend=backend)
            np.testing.assert_array_equal(result, _repeats(data))
        else:
            result = gradops.resample_grad(source, (1, 2, 2, 3), out=out, backend=backend)
            np.testing.assert_array_equal(result, _block_sums(data))
        assert result is out
