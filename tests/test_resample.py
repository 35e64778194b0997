"""Resample family: worked examples, NumPy API behaviour and argument validation.

Expected numbers come from SPEC section 7 or are written out by hand here; the brute-force
oracle, E20 and the adjoint identity are in test_resample_oracle.py; descriptors, the registry
and JSON runs in test_resample_descriptors.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from field_errors import raises

from gradops import (AliasingError, AxisDirection, DataTypeError, DescriptorError, InterpolationMode, ShapeError,
                     resample, resample1, resample2, resample_grad, resample_grad1, resample_grad_params_from_forward)
from gradops.cli import main as cli_main
from gradops.examples import all_examples


RESAMPLE_EXAMPLE_IDS = ["E1", "E2", "E3", "E4", "E5", "E6", "E7", "E8", "E9", "E10", "E18", "E19"]


def f32(values, shape=None, dtype=np.float32):
    array = np.array(values, dtype=dtype)
    return array if shape is None else array.reshape(shape)


# --- worked examples -------------------------------------------------------------------------------

@pytest.mark.parametrize("example_id", RESAMPLE_EXAMPLE_IDS)
def test_worked_example_via_registry(example_id, backend):
    (example,) = [ex for ex in all_examples() if ex.id == example_id]
    checks = example.run(backend)
    assert checks
    failed = [(c.label, c.result, c.expected) for c in checks if not c.passed]
    assert not failed


def test_examples_cli_for_resample(capsys):
    assert cli_main(["examples", "--only", *RESAMPLE_EXAMPLE_IDS, "--backend", "reference"]) == 0
    assert "MISMATCH" not in capsys.readouterr().out


class TestWorkedExamplesDirect:
    """The SPEC section 7 numbers, typed in again and called directly."""

    def test_e1_documented_example(self, backend):
        x, dy = f32([[1, 2], [3, 4]], (1, 1, 2, 2)), f32([4, 5, 6], (1, 1, 1, 3))
        scales = [1, 1, 0.5, 1.5]
        assert resample1(x, (1, 1, 1, 3), scales=scales, backend=backend).ravel().tolist() == [3, 4, 4]
        assert resample_grad(dy, (1, 1, 2, 2), scales=scales, backend=backend).ravel().tolist() == [0, 0, 4, 11]
        y = resample2(x, (1, 1, 1, 3), rounding_direction="decreasing", scales=scales, backend=backend)
        assert y.ravel().tolist() == [1, 1, 2]
        dx = resample_grad1(dy, (1, 1, 2, 2), rounding_direction=AxisDirection.DECREASING, scales=scales,
                            backend=backend)
        assert dx.ravel().tolist() == [9, 6, 0, 0]
        legacy = resample_grad(dy, (1, 1, 2, 2), scales=scales, input_pixel_offsets=[0] * 4,
                               output_pixel_offsets=[0.5] * 4, backend=backend)
        assert legacy.ravel().tolist() == [9, 6, 0, 0]

    def test_e3_ties(self, backend):
        zero = {"input_pixel_offsets": [0], "output_pixel_offsets": [0], "scales": [2], "backend": backend}
        x, dy = f32([10, 20, 30]), f32([1, 2, 3, 4, 5, 6])
        assert resample2(x, (6,), rounding_direction="decreasing", **zero).tolist() == [10, 10, 20, 20, 30, 30]
        assert resample2(x, (6,), rounding_direction="increasing", **zero).tolist() == [10, 20, 20, 30, 30, 30]
        assert resample_grad1(dy, (3,), rounding_direction="decreasing", **zero).tolist() == [3, 7, 11]
        assert resample_grad1(dy, (3,), rounding_direction="increasing", **zero).tolist() == [1, 5, 15]
        y1 = resample1(x.reshape(1, 1, 1, 3), (1, 1, 1, 6), scales=[1, 1, 1, 2], input_pixel_offsets=[0] * 4,
                       output_pixel_offsets=[0] * 4, backend=backend)
        assert y1.ravel().tolist() == [10, 20, 20, 30, 30, 30]

    def test_e4_all_ties_downsample(self, backend):
        dy = f32([10, 20])
        kw = {"scales": [0.5], "input_pixel_offsets": [-0.5], "output_pixel_offsets": [0.5], "backend": backend}
        assert resample_grad1(dy, (4,), rounding_direction="decreasing", **kw).tolist() == [10, 0, 20, 0]
        assert resample_grad1(dy, (4,), rounding_direction="increasing", **kw).tolist() == [0, 10, 0, 20]
        assert resample_grad1(dy, (4,), mode="linear", **kw).tolist() == [5, 5, 10, 10]
        assert resample_grad(dy.reshape(1, 1, 1, 2), (1, 1, 1, 4), backend=backend).ravel().tolist() == [0, 10, 0, 20]
        doc = resample_grad1(dy, (4,), rounding_direction="decreasing", offset_convention="doc-literal", **kw)
        assert doc.tolist() == [10, 20, 0, 0]

    def test_e5_fractional_linear(self, backend):
        y = resample2(f32([0, 10, 20, 30]), (6,), mode="linear", backend=backend)  # default scale fl32(6/4)
        np.testing.assert_allclose(y, [0, 5, 35 / 3, 55 / 3, 25, 30], rtol=1e-6, atol=0)
        dx = resample_grad1(f32([1, 2, 3, 4, 5, 6]), (4,), mode="linear", backend=backend)
        np.testing.assert_allclose(dx, [2, 25 / 6, 19 / 3, 8.5], rtol=1e-6, atol=0)
        assert float(np.sum(dx, dtype=np.float64)) == pytest.approx(21, rel=1e-6)

    def test_e6_e7_clamping(self, backend):
        x = f32([1, 2, 4], (1, 1, 1, 3))
        y = resample1(x, (1, 1, 1, 6), mode="linear", backend=backend)
        assert y.ravel().tolist() == [1, 1.25, 1.75, 2.5, 3.5, 4]
        ones = np.ones((1, 1, 1, 6), np.float32)
        assert resample_grad(ones, (1, 1, 1, 3), mode="linear", backend=backend).ravel().tolist() == [2, 2, 2]
        x4 = f32([1, 2, 3, 4], (1, 1, 1, 4))
        assert resample1(x4, (1, 1, 1, 6), scales=[1, 1, 1, 1], backend=backend).ravel().tolist() == [1, 2, 3, 4, 4, 4]
        dy = f32([1, 2, 3, 4, 5, 6], (1, 1, 1, 6))
        assert resample_grad(dy, (1, 1, 1, 4), scales=[1, 1, 1, 1], backend=backend).ravel().tolist() == [1, 2, 3, 15]

    def test_e8_batch_and_channel_axes(self, backend):
        x = f32([[1, 2], [10, 20]], (1, 2, 1, 2))
        y = resample1(x, (1, 4, 1, 2), mode="linear", backend=backend)
        assert y.reshape(4, 2).tolist() == [[1, 2], [3.25, 6.5], [7.75, 15.5], [10, 20]]
        dy = f32([[1, 2], [3, 4], [5, 6], [7, 8]], (1, 4, 1, 2))
        dx = resample_grad(dy, (1, 2, 1, 2), mode="linear", backend=backend)
        assert dx.reshape(2, 2).tolist() == [[4.5, 6.5], [11.5, 13.5]]
        batch = resample1(f32([1, 5], (2, 1, 1, 1)), (3, 1, 1, 1), mode="linear", backend=backend)
        assert batch.ravel().tolist() == [1, 3, 5]

    def test_e9_grad1_ranks_1_and_3(self, backend):
        dx = resample_grad1(f32([1, 2, 3, 4, 5]), (2,), rounding_direction="decreasing", scales=[2.5],
                            backend=backend)
        assert dx.tolist() == [10, 5]
        dy = f32(np.arange(1, 17), (2, 2, 4))
        assert resample_grad1(dy, (2, 1, 2), mode="linear", backend=backend).tolist() == [[[14.5, 21.5]],
                                                                                         [[46.5, 53.5]]]
        inc = resample_grad1(dy, (2, 1, 2), rounding_direction="increasing", backend=backend)
        assert inc.tolist() == [[[6, 30]], [[22, 78]]]

    def test_e10_v0(self, backend):
        x = f32([[1, 2], [3, 4]], (1, 1, 2, 2))
        assert resample(x, (1, 1, 4, 4), backend=backend).reshape(4, 4).tolist() == [
            [1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]]
        assert resample(x, (1, 1, 4, 4), mode="linear", backend=backend).reshape(4, 4).tolist() == [
            [1, 1.25, 1.75, 2], [1.5, 1.75, 2.25, 2.5], [2.5, 2.75, 3.25, 3.5], [3, 3.25, 3.75, 4]]

    def test_e18_float16_accumulates_wide(self, backend):
        ones = np.ones((1, 1, 64, 64), np.float16)
        dx = resample_grad(ones, (1, 1, 1, 1), backend=backend)
        assert dx.dtype == np.float16 and dx.item() == 4096
        dx1 = resample_grad1(np.ones(4096, np.float16), (1,), rounding_direction="increasing", backend=backend)
        assert dx1.item() == 4096

    def test_e19_ties_round_up(self, backend):
        x = f32([[3.86005284, 45.18463077, 87.67153743, 98.78210347, 66.37414347, 3.41158349],
                 [86.14930501, 95.9813372, 76.87126314, 16.52591355, 65.98782867, 25.47092156],
                 [22.56010548, 92.08479613, 85.80876635, 92.63166027, 29.91620871, 75.40461275],
                 [62.06375451, 1.77121588, 99.47231285, 11.44055014, 25.39634271, 67.02175102]], (1, 1, 4, 6))
        y = resample(x, (1, 1, 2, 3), backend=backend)
        np.testing.assert_array_equal(y.reshape(2, 3), x[0, 0, 1::2, 1::2])


# --- NumPy API behaviour -------------------------------------------------------------------------------

def test_default_scales_are_fl32_of_size_ratio(backend):
    # 3 -> 7 with scale fl32(7/3): compare with explicitly given float32 scale.
    x = f32(np.arange(1, 4), (1, 1, 1, 3))
    explicit = resample1(x, (1, 1, 1, 7), mode="linear", scales=[1, 1, 1, float(np.float32(7) / np.float32(3))],
                         backend=backend)
    np.testing.assert_array_equal(resample1(x, (1, 1, 1, 7), mode="linear", backend=backend), explicit)


def test_rounding_direction_ignored_in_linear_mode(backend):
    x = f32([0, 1, 4, 9])
    base = resample2(x, (7,), mode="linear", backend=backend)
    for direction in ("increasing", "decreasing", 0, 1, AxisDirection.INCREASING):
        np.testing.assert_array_equal(resample2(x, (7,), mode="linear", rounding_direction=direction,
                                                backend=backend), base)


def test_mode_accepts_enum_dml_names_and_ints(backend):
    x = f32([0, 1, 4, 9])
    linear = resample2(x, (7,), mode="linear", backend=backend)
    for mode in (InterpolationMode.LINEAR, "DML_INTERPOLATION_MODE_LINEAR", "LINEAR", 1):
        np.testing.assert_array_equal(resample2(x, (7,), mode=mode, backend=backend), linear)
    nearest = resample2(x, (7,), mode="nearest", rounding_direction="decreasing", backend=backend)
    for mode in (InterpolationMode.NEAREST_NEIGHBOR, "DML_INTERPOLATION_MODE_NEAREST_NEIGHBOR", 0):
        np.testing.assert_array_equal(resample2(x, (7,), mode=mode, rounding_direction=1, backend=backend), nearest)


def test_enum_values_and_coercion():
    assert InterpolationMode.NEAREST_NEIGHBOR == 0 and InterpolationMode.LINEAR == 1
    assert AxisDirection.INCREASING == 0 and AxisDirection.DECREASING == 1
    assert InterpolationMode.of("nearest") is InterpolationMode.NEAREST_NEIGHBOR
    assert InterpolationMode.of("Linear") is InterpolationMode.LINEAR
    assert InterpolationMode.of(np.int32(1)) is InterpolationMode.LINEAR
    assert AxisDirection.of("increasing") is AxisDirection.INCREASING
    assert AxisDirection.of("DML_AXIS_DIRECTION_DECREASING") is AxisDirection.DECREASING
    assert AxisDirection.of(1) is AxisDirection.DECREASING
    for bad in ("cubic", 2, -1, True, 1.0, None):
        with raises(DescriptorError, "InterpolationMode"):
            InterpolationMode.of(bad)
        with raises(DescriptorError, "RoundingDirection"):
            AxisDirection.of(bad)


def test_default_grad_offsets_are_adjoint_of_default_forward(backend):
    rng = np.random.default_rng(1)
    x = rng.integers(-8, 9, (2, 3, 5, 4)).astype(np.float32)
    dy = rng.integers(-8, 9, (3, 2, 7, 9)).astype(np.float32)
    for mode in ("nearest", "linear"):
        y = resample1(x, dy.shape, mode=mode, backend=backend)
        dx = resample_grad(dy, x.shape, mode=mode, backend=backend)
        lhs = np.dot(y.ravel().astype(np.float64), dy.ravel().astype(np.float64))
        rhs = np.dot(x.ravel().astype(np.float64), dx.ravel().astype(np.float64))
        assert lhs == pytest.approx(rhs, rel=1e-6, abs=1e-4)
        y2 = resample2(x, dy.shape, mode=mode, rounding_direction="decreasing", backend=backend)
        dx2 = resample_grad1(dy, x.shape, mode=mode, rounding_direction="decreasing", backend=backend)
        lhs = np.dot(y2.ravel().astype(np.float64), dy.ravel().astype(np.float64))
        rhs = np.dot(x.ravel().astype(np.float64), dx2.ravel().astype(np.float64))
        assert lhs == pytest.approx(rhs, rel=1e-6, abs=1e-4)


def test_grad_params_from_forward():
    scales, grad_in, grad_out = resample_grad_params_from_forward([2, 1.5], [0.5, 0.0], [-0.5, 0.25])
    assert scales == (2.0, 1.5) and grad_in == (-0.5, 0.25) and grad_out == (0.5, 0.0)
    assert resample_grad_params_from_forward([2], [0.5], [-0.5], offset_convention="doc-literal") == (
        (2.0,), (0.5,), (-0.5,))
    with raises(DescriptorError, "output_pixel_offsets"):
        resample_grad_params_from_forward([2, 2], [0.5, 0.5], [-0.5])
    with raises(DescriptorError, "scales[0]"):
        resample_grad_params_from_forward([0], [0.5], [-0.5])
    with raises(DescriptorError, "offset_convention"):
        resample_grad_params_from_forward([1], [0], [0], offset_convention="swapped")


@pytest.mark.parametrize("convention", ["per-tensor", "doc-literal"])
def test_helper_params_give_the_gradient_of_any_forward(backend, convention):
    # TF legacy nearest (0.5, 0) at scale 1.5: forward indices floor(o / 1.5 + 0.5 - 0.5)... written out:
    # x = o / 1.5 - 0.5, floor(x + 0.5) = floor(o / 1.5) -> o = 0..5 reads [0, 0, 1, 2, 2, 3].
    x = f32([1, 10, 100, 1000], (1, 1, 1, 4))
    forward = ([1, 1, 1, 1.5], [0.5] * 4, [0.0] * 4)
    y = resample1(x, (1, 1, 1, 6), scales=forward[0], input_pixel_offsets=forward[1],
                  output_pixel_offsets=forward[2], backend=backend)
    assert y.ravel().tolist() == [1, 1, 10, 100, 100, 1000]
    scales, grad_in, grad_out = resample_grad_params_from_forward(*forward, offset_convention=convention)
    dx = resample_grad(f32([1, 2, 3, 4, 5, 6], (1, 1, 1, 6)), (1, 1, 1, 4), scales=scales,
                       input_pixel_offsets=grad_in, output_pixel_offsets=grad_out, offset_convention=convention,
                       backend=backend)
    assert dx.ravel().tolist() == [3, 3, 9, 6]


def test_conventions_differ_exactly_where_spec_says(backend):
    """SPEC 3.6: the readings agree when the offsets are equal or Scale is 1, differ on the
    half-pixel grid at Scale != 1."""
    dy = f32(np.arange(1, 8))
    for ipo, opo, scale, same in ((0.0, 0.0, 1.4, True), (0.3, 0.3, 3.0, True), (-0.5, 0.5, 1.0, True),
                                  (-0.5, 0.5, 3.0, False), (-0.5, 0.5, 1.4, False)):
        n_in = 5 if scale != 1 else 7
        kw = {"rounding_direction": "decreasing", "scales": [scale], "input_pixel_offsets": [ipo],
              "output_pixel_offsets": [opo], "backend": backend}
        a = resample_grad1(dy, (n_in,), offset_convention="per-tensor", **kw)
        b = resample_grad1(dy, (n_in,), offset_convention="doc-literal", **kw)
        assert np.array_equal(a, b) == same, (ipo, opo, scale)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_any_input_strides(backend, mode):
    rng = np.random.default_rng(2)
    base = rng.standard_normal((3, 4, 10, 12)).astype(np.float32)
    views = {
        "non-contiguous": base[:, ::2, ::3, 1::2],
        "negative": base[::-1, :2, ::-3, ::-2],
        "transposed": np.transpose(base[:, :2, :4, :6], (0, 1, 3, 2)),
        "broadcast": np.broadcast_to(base[:1, :1, :1, :6], (3, 2, 4, 6)),
    }
    for name, view in views.items():
        out_shape = (2, 3, 7, 5)
        contiguous = np.ascontiguousarray(view)
        for function in (resample1, resample_grad):
            expected = function(contiguous, out_shape, mode=mode, backend=backend)
            got = function(view, out_shape, mode=mode, backend=backend)
            if mode == "nearest":  # a selection, or sums of a few float32 values (exact when wide)
                np.testing.assert_array_equal(got, expected, err_msg=f"{function.__name__} {name}")
            else:  # summation order is unspecified (SPEC 3.7): a few ulps of the operands
                np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6, err_msg=f"{function.__name__} {name}")


def test_out_argument(backend):
    dy = f32(np.arange(12), (1, 1, 3, 4))
    holder = np.full((1, 1, 6, 4), -1, np.float32)
    out = holder[:, :, ::2, :]  # strided output
    result = resample_grad(dy, (1, 1, 3, 2), backend=backend, out=out[:, :, :, :2])
    assert result.base is not None and np.shares_memory(result, holder)
    np.testing.assert_array_equal(holder[0, 0, ::2, :2], resample_grad(dy, (1, 1, 3, 2), backend="reference")[0, 0])
    assert np.all(holder[0, 0, 1::2] == -1) and np.all(holder[0, 0, :, 2:] == -1)

    fresh = np.full((1, 1, 3, 2), 7, np.float32)
    with raises(DataTypeError, "out.dtype"):
        resample_grad(dy, (1, 1, 3, 2), out=fresh.astype(np.float16), backend=backend)
    with raises(ShapeError, "out.shape"):
        resample_grad(dy, (1, 1, 3, 2), out=fresh.reshape(1, 1, 2, 3), backend=backend)
    readonly = fresh.copy()
    readonly.flags.writeable = False
    with raises(AliasingError, "out"):
        resample_grad(dy, (1, 1, 3, 2), out=readonly, backend=backend)
    shared = np.zeros(24, np.float32)
    with raises(AliasingError, "out"):
        resample1(shared[:12].reshape(1, 1, 3, 4), (1, 1, 3, 4), out=shared[6:18].reshape(1, 1, 3, 4),
                  backend=backend)
    with raises(AliasingError, "out"):
        resample1(dy, (1, 1, 3, 4), out=dy, backend=backend)
    with raises(AliasingError, "out"):
        resample1(dy, (1, 1, 2, 4), out=np.broadcast_to(np.zeros(4, np.float32), (1, 1, 2, 4)), backend=backend)
    # A failed call leaves out untouched (validation happens before any write).
    with raises(DescriptorError, "scales[3]"):
        resample_grad(dy, (1, 1, 3, 2), scales=[1, 1, 1, 0], out=fresh, backend=backend)
    assert np.all(fresh == 7)


def test_float16_rounds_once(backend):
    # 0.1 summed 10 times in float16 steps drifts; rounded once from a wide sum it is fl16(10 * fl16(0.1)).
    dy = np.full(10, 0.1, np.float16)
    dx = resample_grad1(dy, (1,), rounding_direction="decreasing", backend=backend)
    assert dx.dtype == np.float16
    assert dx.item() == np.float16(10 * float(np.float16(0.1)))
    # float16 linear forward: computed wide, rounded once to float16.
    x = np.array([0, 1, 2, 2048], np.float16)
    y = resample2(x, (8,), mode="linear", scales=[2], backend=backend)
    wide = resample2(x.astype(np.float32), (8,), mode="linear", scales=[2], backend="reference")
    np.testing.assert_array_equal(y, wide.astype(np.float16))


def test_reference_sums_in_float64_and_rounds_once():
    """The reference accumulates in float64 (SPEC 3.7); float32 sums would lose these in any order."""
    cancel = np.array([2.0 ** 24, 1, -(2.0 ** 24)], np.float32)  # in float32, 2^24 + 1 rounds to 2^24
    for mode in ("nearest", "linear"):
        assert resample_grad1(cancel, (1,), mode=mode, rounding_direction="decreasing",
                              backend="reference").item() == 1
    tiny = np.full(1025, 2.0 ** -25, np.float32)  # 1 + 1024 * 2^-25 = 1 + 2^-15 exactly
    tiny[0] = 1
    assert resample_grad1(tiny, (1,), rounding_direction="decreasing", backend="reference").item() == 1 + 2.0 ** -15


def test_zero_weight_taps_are_not_read(backend):
    """SPEC 3.4: an inf next to an integer sample coordinate does not leak NaN into it."""
    x = f32([1, np.inf, 3, 4])
    y = resample2(x, (4,), mode="linear", scales=[1], input_pixel_offsets=[0], output_pixel_offsets=[0],
                  backend=backend)
    assert y.tolist() == [1, np.inf, 3, 4]
    negative_zero = resample2(f32([-0.0, 5]), (2,), mode="linear", backend=backend)
    assert np.signbit(negative_zero[0])


def test_taps_are_cached_and_read_only():
    from gradops.resample import _PLAN_CACHE, _cached_axis_taps

    _PLAN_CACHE.clear()  # other tests may have made these calls, or filled the cache
    _cached_axis_taps.cache_clear()
    x = np.zeros((1, 1, 13, 17), np.float32)
    resample1(x, (1, 1, 29, 31), mode="linear", backend="reference")
    plans, hits = len(_PLAN_CACHE), _cached_axis_taps.cache_info().hits
    resample1(x, (1, 1, 29, 31), mode="linear", backend="reference")  # the same call: the same plan
    assert len(_PLAN_CACHE) == plans and _cached_axis_taps.cache_info().hits == hits
    resample1(x, (1, 1, 29, 31), mode="linear", scales=[1.0, 1.0, 29 / 13, 31 / 17], backend="reference")
    assert len(_PLAN_CACHE) == plans + 1 and _cached_axis_taps.cache_info().hits == hits + 4  # the same axes
    index, weight = _cached_axis_taps(13, 29, float(np.float32(29 / 13)), 0.5, -0.5, "linear", "half_up")
    assert not index.flags.writeable and not weight.flags.writeable


def test_reference_handles_benchmark_size_quickly():
    import time

    dy = np.ones((16, 64, 128, 128), np.float32)
    start = time.perf_counter()
    dx = resample_grad(dy, (16, 64, 64, 64), mode="linear", backend="reference")
    elapsed = time.perf_counter() - start
    assert np.all(dx == 4)
    assert elapsed < 20  # a few seconds on a quiet machine; generous for a shared 2-core box


# --- NumPy argument validation ---------------------------------------------------------------------

X4 = np.zeros((1, 1, 2, 3), np.float32)


@pytest.mark.parametrize("call, error, field", [
    (lambda: resample1([[1.0]], (1, 1)), DataTypeError, "x"),
    (lambda: resample1(X4.astype(np.float64), (1, 1, 2, 3)), DataTypeError, "x.dtype"),
    (lambda: resample1(np.zeros((2, 3), np.float32), (2, 3)), ShapeError, "x.ndim"),
    (lambda: resample(np.zeros((2, 3), np.float32), (2, 3)), ShapeError, "x.ndim"),
    (lambda: resample2(np.zeros((1,) * 5, np.float32), (1,) * 5, mode="linear"), ShapeError, "x.ndim"),
    (lambda: resample_grad(np.zeros(3, np.float32), (3,)), ShapeError, "dy.ndim"),
    (lambda: resample_grad1(np.zeros(3, np.int32), (3,)), DataTypeError, "dy.dtype"),
    (lambda: resample1(X4, (1, 1, 2)), ShapeError, "output_sizes"),
    (lambda: resample1(X4, (1, 1, 0, 3)), ShapeError, "output_sizes[2]"),
    (lambda: resample1(X4, (1, 1, 2.0, 3)), ShapeError, "output_sizes[2]"),
    (lambda: resample1(X4, "1123"), ShapeError, "output_sizes"),
    (lambda: resample_grad(X4, (1, 1, 2)), ShapeError, "input_sizes"),
    (lambda: resample_grad1(X4, (1, 1, 2, -3), mode="linear"), ShapeError, "input_sizes[3]"),
    (lambda: resample1(X4, (1, 1, 2, 3), mode="cubic"), DescriptorError, "mode"),
    (lambda: resample(X4, (1, 1, 2, 3), mode=2), DescriptorError, "mode"),
    (lambda: resample2(X4, (1, 1, 2, 3)), DescriptorError, "rounding_direction"),
    (lambda: resample_grad1(X4, (1, 1, 2, 3)), DescriptorError, "rounding_direction"),
    (lambda: resample2(X4, (1, 1, 2, 3), rounding_direction="up"), DescriptorError, "rounding_direction"),
    (lambda: resample2(X4, (1, 1, 2, 3), mode="linear", rounding_direction=3), DescriptorError,
     "rounding_direction"),
    (lambda: resample1(X4, (1, 1, 2, 3), scales=[1, 1, 1]), DescriptorError, "scales"),
    (lambda: resample1(X4, (1, 1, 2, 3), scales=1.0), DescriptorError, "scales"),
    (lambda: resample(X4, (1, 1, 2, 3), scales=[1, 1, 0, 1]), DescriptorError, "scales[2]"),
    (lambda: resample1(X4, (1, 1, 2, 3), scales=[1, 1, 1, -2]), DescriptorError, "scales[3]"),
    (lambda: resample1(X4, (1, 1, 2, 3), scales=[np.nan, 1, 1, 1]), DescriptorError, "scales[0]"),
    (lambda: resample1(X4, (1, 1, 2, 3), scales=[1, np.inf, 1, 1]), DescriptorError, "scales[1]"),
    (lambda: resample1(X4, (1, 1, 2, 3), scales=[1, 1e40, 1, 1]), DescriptorError, "scales[1]"),  # inf as FLOAT
    (lambda: resample1(X4, (1, 1, 2, 3), scales=[1, 1e-50, 1, 1]), DescriptorError, "scales[1]"),  # 0 as FLOAT
    (lambda: resample1(X4, (1, 1, 2, 3), scales=[1, "2", 1, 1]), DescriptorError, "scales[1]"),
    (lambda: resample1(X4, (1, 1, 2, 3), input_pixel_offsets=[0, 0, np.nan, 0]), DescriptorError,
     "input_pixel_offsets[2]"),
    (lambda: resample2(X4, (1, 1, 2, 3), mode="linear", output_pixel_offsets=[0, 0, 0, -np.inf]), DescriptorError,
     "output_pixel_offsets[3]"),
    (lambda: resample_grad(X4, (1, 1, 2, 3), input_pixel_offsets=[0, 0]), DescriptorError, "input_pixel_offsets"),
    (lambda: resample_grad(X4, (1, 1, 2, 3), offset_convention="swapped"), DescriptorError, "offset_convention"),
    (lambda: resample1(X4, (1, 1, 2, 3), backend="gpu"), DescriptorError, "backend"),
])
def test_numpy_argument_validation(call, error, field):
    with raises(error, field):
        call()


def test_plan_cache_keeps_argument_types_apart():
    """``True == 1`` as a dictionary key, but a bool is not a valid scale: a cached plan for
    ``scales=(1, ...)`` must not accept ``(True, ...)``; errors are raised again, never cached."""
    x = np.zeros((1, 1, 2, 2), np.float32)
    resample1(x, (1, 1, 2, 2), scales=(1, 1, 1, 1))
    for _ in range(2):
        with pytest.raises(DescriptorError, match=r"scales\[0\]"):
            resample1(x, (1, 1, 2, 2), scales=(True, 1, 1, 1))
    resample1(x, (1, 1, 2, 2), scales=[1.0, 1.0, 1.0, 1.0])  # lists work (and are not cached by identity)
