"""Prepared depthwise calls (``gradops.depthwise._call``): a call with the attributes, sizes, array
layouts and backend of an earlier one reuses the run that call prepared. These tests check that
such a call still follows its own data, and still refuses what only it gets wrong.

Values are small integers, so every sum is exact in float32 and the brute-force loops of
``fast_depthwise_cases`` give the exact bits.
"""

from __future__ import annotations

import numpy as np
import pytest

from gradops import depthwise
from gradops.errors import AliasingError, DataTypeError, DescriptorError

from fast_depthwise_cases import brute_backprop_filter, brute_backprop_input, brute_forward

PADS = [0, 0, 1, 1, 1, 1, 0, 0]


def _integers(rng, shape):
    return rng.integers(-4, 5, size=shape).astype(np.float32)


def _nhwc(array, data_format):
    return array.transpose(0, 2, 3, 1) if data_format == "NCHW" else array


def _in_format(array, data_format):
    return array.transpose(0, 3, 1, 2) if data_format == "NCHW" else array


def _op_and_exact(op, rng, data_format, channels):
    """(a call of ``op`` on new integer data, its exact result) for one fixed layout."""
    n, h, w, c, m = 2, 6, 7, channels, 2
    x = _integers(rng, (n, h, w, c))
    f = _integers(rng, (3, 3, c, m))
    dy = _integers(rng, (n, h, w, c * m))
    attrs = dict(strides=[1, 1, 1, 1], padding="EXPLICIT", explicit_paddings=PADS, data_format=data_format)
    if data_format == "NCHW":
        attrs["explicit_paddings"] = [0, 0, 0, 0, 1, 1, 1, 1]
    x_f, dy_f = _in_format(x, data_format), _in_format(dy, data_format)
    if op == "forward":
        return (lambda: depthwise.depthwise_conv2d_native(x_f, f, **attrs),
                _in_format(brute_forward(x, f, h, w, (1, 1), (1, 1), (1, 1)), data_format))
    if op == "input":
        sizes = list(x_f.shape)
        return (lambda: depthwise.depthwise_conv2d_native_backprop_input(sizes, f, dy_f, **attrs),
                _in_format(brute_backprop_input(dy, f, h, w, (1, 1), (1, 1), (1, 1)), data_format))
    return (lambda: depthwise.depthwise_conv2d_native_backprop_filter(x_f, list(f.shape), dy_f, **attrs),
            brute_backprop_filter(x, dy, 3, 3, (1, 1), (1, 1), (1, 1)))


@pytest.mark.parametrize("channels", [3, 64])  # 64: channels-last rows staged with zero margins
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("op", ["forward", "input", "filter"])
def test_repeated_calls_follow_their_data(backend, op, data_format, channels, monkeypatch):
    monkeypatch.setenv("GRADOPS_BACKEND", backend)
    rng = np.random.default_rng(3)
    for _ in range(3):
        call, exact = _op_and_exact(op, rng, data_format, channels)
        np.testing.assert_array_equal(call(), exact.astype(np.float32))
    assert len(depthwise._CALLS) == 1  # the first call's run served the other two


def test_a_filter_that_turns_infinite_gets_its_own_plan():
    """Zero margins are only used with finite weights (0 * inf is NaN): a prepared run must ask
    each call's filter, in either order."""
    rng = np.random.default_rng(4)
    dy = _integers(rng, (1, 5, 9, 64))
    dy[0, 2, 4] = 0
    finite = _integers(rng, (3, 3, 64, 1))
    infinite = finite.copy()
    infinite[1, 0, 5, 0] = infinite[0, 2, 7, 0] = np.inf  # edge taps: they meet the zero margins
    for f in (finite, infinite, finite, infinite):
        args = ([1, 5, 9, 64], f, dy, [1, 1, 1, 1], "EXPLICIT")
        fast = depthwise.depthwise_conv2d_native_backprop_input(*args, explicit_paddings=PADS, backend="fast")
        exact = depthwise.depthwise_conv2d_native_backprop_input(*args, explicit_paddings=PADS, backend="reference")
        np.testing.assert_array_equal(fast, exact)  # NaN where they are the same NaN
    assert np.isnan(fast).any() and np.isinf(fast).any()


def test_an_out_overlapping_an_operand_is_refused_on_every_call():
    rng = np.random.default_rng(5)
    x, f = _integers(rng, (1, 4, 4, 8)), _integers(rng, (3, 3, 8, 1))
    attrs = dict(strides=[1, 1, 1, 1], padding="SAME")
    depthwise.depthwise_conv2d_native(x, f, out=np.empty_like(x), **attrs)
    before = x.copy()
    with pytest.raises(AliasingError, match="input"):
        depthwise.depthwise_conv2d_native(x, f, out=x, **attrs)  # the same layout as the first out
    np.testing.assert_array_equal(x, before)


def test_a_read_only_out_is_refused_after_a_writeable_one():
    rng = np.random.default_rng(6)
    x, f = _integers(rng, (1, 4, 4, 8)), _integers(rng, (3, 3, 8, 1))
    out = np.empty_like(x)
    depthwise.depthwise_conv2d_native(x, f, [1, 1, 1, 1], "SAME", out=out)
    out.flags.writeable = False
    with pytest.raises(AliasingError, match="writeable"):
        depthwise.depthwise_conv2d_native(x, f, [1, 1, 1, 1], "SAME", out=out)


def test_bad_arguments_of_a_known_layout_still_raise():
    rng = np.random.default_rng(7)
    x, f = _integers(rng, (1, 4, 4, 8)), _integers(rng, (3, 3, 8, 1))
    depthwise.depthwise_conv2d_native(x, f, [1, 1, 1, 1], "SAME")
    with pytest.raises(DescriptorError, match="strides"):
        depthwise.depthwise_conv2d_native(x, f, [1, 1.0, 1, 1], "SAME")  # 1.0 == 1, yet not an int
    with pytest.raises(DataTypeError, match="filter.dtype"):
        depthwise.depthwise_conv2d_native(x, f.astype(np.float64), [1, 1, 1, 1], "SAME")
    with pytest.raises(DescriptorError, match="backend"):
        depthwise.depthwise_conv2d_native(x, f, [1, 1, 1, 1], "SAME", backend="fastest")


def test_the_backend_follows_the_environment_between_calls(monkeypatch):
    rng = np.random.default_rng(8)
    x, f = _integers(rng, (1, 4, 4, 8)), _integers(rng, (3, 3, 8, 1))
    seen = []
    reference = depthwise.REFERENCE_KERNELS["conv_forward"]
    monkeypatch.setitem(depthwise.REFERENCE_KERNELS, "conv_forward", lambda *a: seen.append(1) or reference(*a))
    monkeypatch.setenv("GRADOPS_BACKEND", "fast")
    fast = depthwise.depthwise_conv2d_native(x, f, [1, 1, 1, 1], "SAME")
    monkeypatch.setenv("GRADOPS_BACKEND", "reference")
    exact = depthwise.depthwise_conv2d_native(x, f, [1, 1, 1, 1], "SAME")
    assert seen == [1]
    np.testing.assert_array_equal(fast, exact)


class _Tagged(np.ndarray):
    pass


def test_sizes_given_as_an_array_are_keyed_and_operands_that_cannot_be_are_prepared_per_call():
    """``input_sizes`` as TensorFlow takes it (an int32 array) is part of the key, by value: the
    second call reuses the first one's run. An ndarray subclass as an operand is no key: every
    such call is prepared for itself, and remembered nowhere."""
    rng = np.random.default_rng(9)
    dy, f = _integers(rng, (1, 4, 4, 8)), _integers(rng, (3, 3, 8, 1))
    exact = brute_backprop_input(dy, f, 4, 4, (1, 1), (1, 1), (1, 1)).astype(np.float32)
    for sizes, filt, runs in ((np.array([1, 4, 4, 8], np.int32), f, 1), ([1, 4, 4, 8], f.view(_Tagged), 0)):
        depthwise._CALLS.clear()
        for _ in range(2):
            dx = depthwise.depthwise_conv2d_native_backprop_input(sizes, filt, dy, [1, 1, 1, 1], "SAME")
            np.testing.assert_array_equal(dx, exact)
        assert len(depthwise._CALLS) == runs


def test_an_out_call_whose_output_a_fresh_call_could_not_allocate_still_runs(monkeypatch):
    """Only a run of fresh calls checks the size of the outputs it allocates: with the memory limit
    between the input's size and the output's (channel multiplier 2), an ``out=`` call runs, again
    and again, and a fresh call is refused, naming the field that sizes the output."""
    from gradops import _arrays
    from gradops.errors import ShapeError
    monkeypatch.setattr(_arrays, "memory_limit_bytes", lambda: 3000)  # input 2048 bytes, output 4096
    rng = np.random.default_rng(10)
    x, f = _integers(rng, (1, 8, 8, 8)), _integers(rng, (3, 3, 8, 2))
    exact = brute_forward(x, f, 8, 8, (1, 1), (1, 1), (1, 1)).astype(np.float32)
    for _ in range(2):
        out = np.full((1, 8, 8, 16), np.nan, np.float32)
        depthwise.depthwise_conv2d_native(x, f, [1, 1, 1, 1], "SAME", out=out)
        np.testing.assert_array_equal(out, exact)
    with pytest.raises(ShapeError, match="filter.shape"):
        depthwise.depthwise_conv2d_native(x, f, [1, 1, 1, 1], "SAME")
