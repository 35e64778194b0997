"""gradops.dask on a real distributed cluster: random chunkings (hypothesis) of every operator,
compared with the in-memory NumPy call of the same backend, bit for bit for the gather
operators, and within the documented bound (and run to run bit for bit) for the filter
gradient. The cluster (2 worker processes, 1 thread each) is started once for the module; the
xdist group keeps every test of this module on one pytest worker."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import gradops  # noqa: E402
import gradops.dask as gd  # noqa: E402

pytestmark = [pytest.mark.dask, pytest.mark.xdist_group("dask")]

BACKENDS = ["fast", "reference"]
CLUSTER_SETTINGS = settings(max_examples=10, deadline=None, derandomize=True,
                            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1, dashboard_address=":0",
                                  worker_dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        yield c


def bits(array: np.ndarray) -> np.ndarray:
    """The raw bytes of every element: equal bits, -0 and NaN payloads included."""
    return np.ascontiguousarray(array).view(np.uint8)


def assert_same_bits(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if not np.array_equal(bits(got), bits(expected)):
        differ = np.flatnonzero((bits(got) != bits(expected)).reshape(expected.size, -1).any(axis=1))
        raise AssertionError(f"{differ.size} of {expected.size} elements differ, first at flat index {differ[0]}: "
                             f"{got.reshape(-1)[differ[0]]!r} vs {expected.reshape(-1)[differ[0]]!r}")


@st.composite
def partitions(draw, size: int) -> tuple[int, ...]:
    """A random chunking of one axis: sizes >= 1 summing to ``size``."""
    cuts = draw(st.sets(st.integers(1, size - 1), max_size=min(size - 1, 4))) if size > 1 else set()
    edges = [0, *sorted(cuts), size]
    return tuple(b - a for a, b in zip(edges, edges[1:]))


def chunked(draw, array: np.ndarray, split: tuple[int, ...] | None = None) -> da.Array:
    """``array`` as a dask array chunked at random along the axes in ``split`` (all by default)."""
    axes = range(array.ndim) if split is None else split
    chunks = tuple(draw(partitions(n)) if axis in axes else (n,) for axis, n in enumerate(array.shape))
    return da.from_array(array, chunks=chunks)


def random_values(rng: np.random.Generator, shape: tuple[int, ...], dtype) -> np.ndarray:
    """Normal values with some -0 and exact zeros, so that signs of zero are tested too."""
    values = rng.standard_normal(shape)
    values[rng.random(shape) < 0.1] = -0.0
    values[rng.random(shape) < 0.05] = 0.0
    return values.astype(dtype)


# --- element-wise ----------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@CLUSTER_SETTINGS
@given(data=st.data(), shape=st.lists(st.integers(1, 9), min_size=1, max_size=4).map(tuple),
       dtype=st.sampled_from(["float32", "float16", "int32"]))
def test_relu_and_relu_grad_any_chunking(client, backend, data, shape, dtype):
    rng = np.random.default_rng(len(shape) * 1000 + sum(shape))
    x = (random_values(rng, shape, np.float64) * 10).astype(dtype)
    dy = (random_values(rng, shape, np.float64) * 10).astype(dtype)
    x_dask, dy_dask = chunked(data.draw, x), chunked(data.draw, dy)  # different chunkings, unified
    assert_same_bits(gd.relu(x_dask, backend=backend).compute(), gradops.relu(x, backend=backend))
    assert_same_bits(gd.relu_grad(x_dask, dy_dask, backend=backend).compute(),
                     gradops.relu_grad(x, dy, backend=backend))


# --- resample family -------------------------------------------------------------------------

RESAMPLE_OPS = {
    "resample": (gradops.resample, gd.resample, False),
    "resample1": (gradops.resample1, gd.resample1, False),
    "resample2": (gradops.resample2, gd.resample2, False),
    "resample_grad": (gradops.resample_grad, gd.resample_grad, True),
    "resample_grad1": (gradops.resample_grad1, gd.resample_grad1, True),
}
OFFSETS = st.sampled_from([-0.5, 0.0, 0.5, 0.25, -1.25, 1.5, 0.3])


@st.composite
def resample_calls(draw, name: str):
    """A random call: sizes, mode, scales (default, exact or fractional) and offsets."""
    rank = 4 if name in ("resample", "resample1", "resample_grad") else draw(st.integers(1, 4))
    n_in = tuple(draw(st.lists(st.integers(1, 9), min_size=rank, max_size=rank)))
    n_out = tuple(draw(st.lists(st.integers(1, 12), min_size=rank, max_size=rank)))
    kwargs = {"mode": draw(st.sampled_from(["nearest", "linear"]))}
    if name in ("resample2", "resample_grad1"):
        kwargs["rounding_direction"] = draw(st.sampled_from(["increasing", "decreasing"]))
    if draw(st.booleans()):
        kwargs["scales"] = [o / i * draw(st.sampled_from([1.0, 0.9, 1.1, 0.75])) for i, o in zip(n_in, n_out)]
    if name != "resample" and draw(st.booleans()):
        kwargs["input_pixel_offsets"] = draw(st.lists(OFFSETS, min_size=rank, max_size=rank))
        kwargs["output_pixel_offsets"] = draw(st.lists(OFFSETS, min_size=rank, max_size=rank))
    return n_in, n_out, kwargs


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(RESAMPLE_OPS))
@CLUSTER_SETTINGS
@given(data=st.data(), dtype=st.sampled_from(["float32", "float16"]), explicit_chunks=st.booleans())
def test_resample_family_same_bits_for_any_chunking(client, backend, name, data, dtype, explicit_chunks):
    numpy_op, dask_op, gradient = RESAMPLE_OPS[name]
    n_in, n_out, kwargs = data.draw(resample_calls(name))
    source_shape, result_shape = (n_out, n_in) if gradient else (n_in, n_out)
    rng = np.random.default_rng(sum(n_in) * 97 + sum(n_out))
    source = random_values(rng, source_shape, dtype)
    # The innermost resampled axis and the axes inside it stay one chunk; an axis whose size
    # changes is surely resampled, so the axes before the innermost such axis may be split.
    changed = [d for d, (i, o) in enumerate(zip(n_in, n_out)) if i != o]
    splittable = changed[-1] if changed else 0
    chunks = tuple(data.draw(partitions(n)) if d < splittable else (n,) for d, n in enumerate(result_shape)) \
        if explicit_chunks else None
    expected = numpy_op(source, result_shape, backend=backend, **kwargs)
    got = dask_op(chunked(data.draw, source), result_shape, chunks=chunks, backend=backend, **kwargs)
    if chunks is not None:
        assert got.chunks == chunks
    assert_same_bits(got.compute(), expected)


def test_resample_default_chunks_follow_the_input(client):
    """Fractional 3/7 downsampling: the outputs whose first tap lies in one input chunk form one
    block, one task: those whose two taps lie in that chunk, computed from it in place, and those
    whose taps straddle its end, from its last row and a cut of the next chunk's first row (a task
    of its own, so that only the cut travels)."""
    x = da.from_array(np.arange(280, dtype=np.float32).reshape(1, 70, 4, 1), chunks=(1, 10, 4, 1))
    y = gd.resample1(x, (1, 30, 8, 1), mode="linear")
    t = (np.arange(30, dtype=np.float32) + np.float32(0.5)) / np.float32(30 / 70)  # SPEC 3.2, in float32
    coordinate = np.clip(t - np.float32(0.5), 0, 69)
    first = np.floor(coordinate)  # SPEC 3.4: the first linear tap; the second one, if its weight is not 0
    last = np.where(coordinate > first, first + 1, first)
    expected = [len(list(group)) for _, group in itertools.groupby(first // 10)]
    straddling = len({chunk for chunk, other in zip(first // 10, last // 10) if other != chunk})
    assert y.chunks[1] == tuple(expected) and len(expected) == 7 and straddling == 2
    assert len(y.dask.layers[y.name]) == len(expected) + straddling  # the blocks and the cuts, no other task
    assert_same_bits(y.compute(), gradops.resample1(x.compute(), (1, 30, 8, 1), mode="linear"))


def test_resample_tasks_carry_a_few_numbers_not_tap_tables():
    """A block task holds each axis's scale, offsets and sizes, from which the worker builds the
    taps: the 2048-wide axis's tables (2048 x 2 taps of int64 + float32, 48 KB) were in every
    block's task, pickled and sent on every run."""
    import pickle

    dy = da.zeros((2, 64, 2048, 4), dtype=np.float32, chunks=(1, 16, 2048, 4))
    dx = gd.resample_grad(dy, (2, 32, 1024, 4), mode="linear")
    sizes = [len(pickle.dumps(task)) for task in dx.dask.layers[dx.name].values()]
    assert len(sizes) > 8 and max(sizes) < 4096, sorted(sizes)[-3:]


def test_benchmark_input_is_spread_evenly(client):
    """The benchmark's input: each worker holds an equal run of consecutive images (a run that
    found 5 of 8 blocks on one worker timed that worker's extra block), with the values
    ``_source_rows`` gives in this process, at row chunks too."""
    from gradops.dask.bench import _keys, _placed_source, _source_rows

    shape = (4, 6, 3, 2)
    data = _placed_source(client, shape, ((1, 1, 1, 1), (4, 2), -1, -1), "test-bench-source")
    blocks = _keys(data)
    held = {worker: sorted(key[1:] for key in keys if key in blocks) for worker, keys in client.has_what().items()}
    assert sorted(held.values()) == [[(0, 0, 0, 0), (0, 1, 0, 0), (1, 0, 0, 0), (1, 1, 0, 0)],
                                     [(2, 0, 0, 0), (2, 1, 0, 0), (3, 0, 0, 0), (3, 1, 0, 0)]]
    expected = np.random.default_rng((3, 5)).random(shape[2:], dtype=np.float32) - np.float32(0.5)
    values = data.compute()
    assert_same_bits(values[3, 5], expected)
    assert_same_bits(values, _source_rows(range(4), range(6), shape[1:]))


# --- depthwise family ------------------------------------------------------------------------

@st.composite
def depthwise_calls(draw):
    """A random call whose output is not empty: shapes, attributes and a dtype."""
    data_format = draw(st.sampled_from(["NHWC", "NCHW"]))
    n, h, w, c, m = (draw(st.integers(1, 2)), draw(st.integers(1, 10)), draw(st.integers(1, 10)),
                     draw(st.integers(1, 3)), draw(st.integers(1, 2)))
    fh, fw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sh, sw, dh, dw = (draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 2)),
                      draw(st.integers(1, 2)))
    padding = draw(st.sampled_from(["SAME", "VALID", "EXPLICIT"]))
    pads = [draw(st.integers(0, 2)) for _ in range(4)]
    spatial = (1, 2) if data_format == "NHWC" else (2, 3)
    attrs = {"strides": [1, 1, 1, 1], "dilations": [1, 1, 1, 1], "padding": padding, "data_format": data_format}
    for axis, s, d in zip(spatial, (sh, sw), (dh, dw)):
        attrs["strides"][axis], attrs["dilations"][axis] = s, d
    if padding == "EXPLICIT":
        explicit = [0] * 8
        explicit[2 * spatial[0]: 2 * spatial[0] + 2] = pads[:2]
        explicit[2 * spatial[1]: 2 * spatial[1] + 2] = pads[2:]
        attrs["explicit_paddings"] = explicit
    shape = (n, h, w, c) if data_format == "NHWC" else (n, c, h, w)
    dtype = draw(st.sampled_from(["float32", "float16", "float64", "bfloat16"]))
    return shape, (fh, fw, c, m), attrs, dtype


def depthwise_operands(shape, filter_shape, attrs, dtype):
    import ml_dtypes

    dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(sum(shape) * 31 + sum(filter_shape))
    x, filt = random_values(rng, shape, dtype), random_values(rng, filter_shape, dtype)
    try:
        y_shape = gradops.depthwise_conv2d_native(x, filt, backend="reference", **attrs).shape
    except gradops.ShapeError:  # a negative output size (SPEC 5.3): no call to compare
        assume(False)
    assume(0 not in y_shape)
    return x, filt, random_values(rng, y_shape, dtype)


def spatial_and_batch(attrs) -> tuple[int, int, int]:
    return (0, 1, 2) if attrs["data_format"] == "NHWC" else (0, 2, 3)


@pytest.mark.parametrize("backend", BACKENDS)
@CLUSTER_SETTINGS
@given(data=st.data(), call=depthwise_calls(), explicit_chunks=st.booleans())
def test_depthwise_forward_and_backprop_input_same_bits(client, backend, data, call, explicit_chunks):
    shape, filter_shape, attrs, dtype = call
    x, filt, dy = depthwise_operands(shape, filter_shape, attrs, dtype)
    split = spatial_and_batch(attrs)
    y = gradops.depthwise_conv2d_native(x, filt, backend=backend, **attrs)
    chunks = tuple(data.draw(partitions(n)) if a in split else (n,) for a, n in enumerate(y.shape)) \
        if explicit_chunks else None
    assert_same_bits(gd.depthwise_conv2d_native(chunked(data.draw, x), filt, chunks=chunks, backend=backend,
                                                **attrs).compute(), y)
    dx = gradops.depthwise_conv2d_native_backprop_input(shape, filt, dy, backend=backend, **attrs)
    chunks = tuple(data.draw(partitions(n)) if a in split else (n,) for a, n in enumerate(shape)) \
        if explicit_chunks else None
    got = gd.depthwise_conv2d_native_backprop_input(shape, filt, chunked(data.draw, dy), chunks=chunks,
                                                    backend=backend, **attrs)
    assert_same_bits(got.compute(), dx)


def sum_of_magnitudes(x, dy, filter_shape, attrs) -> np.ndarray:
    """``sum |dY * X|`` per filter element, by brute force over SPEC 5.4's loop (float64)."""
    nhwc = attrs["data_format"] == "NHWC"
    x64 = np.abs(x.astype(np.float64) if nhwc else x.astype(np.float64).transpose(0, 2, 3, 1))
    dy64 = np.abs(dy.astype(np.float64) if nhwc else dy.astype(np.float64).transpose(0, 2, 3, 1))
    fh, fw, c, m = filter_shape
    n, h, w, _ = x64.shape
    _, oh, ow, _ = dy64.shape
    hs, ws = (1, 2) if nhwc else (2, 3)
    sh, sw, dh, dw = attrs["strides"][hs], attrs["strides"][ws], attrs["dilations"][hs], attrs["dilations"][ws]
    pt, pl = _pads(h, w, oh, ow, fh, fw, sh, sw, dh, dw, attrs, hs, ws)
    total = np.zeros(filter_shape)
    for ky in range(fh):
        for kx in range(fw):
            for oy in range(oh):
                for ox in range(ow):
                    iy, ix = oy * sh - pt + ky * dh, ox * sw - pl + kx * dw
                    if 0 <= iy < h and 0 <= ix < w:
                        total[ky, kx] += np.einsum("nc,ncm->cm", x64[:, iy, ix],
                                                   dy64[:, oy, ox].reshape(n, c, m))
    return total


def _pads(h, w, oh, ow, fh, fw, sh, sw, dh, dw, attrs, hs, ws) -> tuple[int, int]:
    if attrs["padding"] == "VALID":
        return 0, 0
    if attrs["padding"] == "EXPLICIT":
        return attrs["explicit_paddings"][2 * hs], attrs["explicit_paddings"][2 * ws]
    need_h = max(0, (oh - 1) * sh + (fh - 1) * dh + 1 - h)  # SPEC 5.3: SAME puts the odd pad after
    need_w = max(0, (ow - 1) * sw + (fw - 1) * dw + 1 - w)
    return need_h // 2, need_w // 2


def test_depthwise_default_chunks_one_task_per_input_chunk(client):
    """3x3 SAME, stride 1, rows in chunks of 5: output row r reads rows r-1..r+1 (SPEC 5.3), so
    the rows whose first read lies in chunk k are 5k..5k+5 (the last one reads across into chunk
    k+1), the first block starts at row 0 and the last ends at row 19. One task per block and one
    cut of the next chunk's first row for each of the three boundaries, no other task; the forward
    op and the input gradient alike, with the in-memory call's bits."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 20, 6, 2)).astype(np.float32)
    filt = rng.standard_normal((3, 3, 2, 1)).astype(np.float32)
    chunked_x = da.from_array(x, chunks=(1, 5, 6, 2))
    for got, expected in [
            (gd.depthwise_conv2d_native(chunked_x, filt, [1, 1, 1, 1], "SAME"),
             gradops.depthwise_conv2d_native(x, filt, [1, 1, 1, 1], "SAME")),
            (gd.depthwise_conv2d_native_backprop_input(x.shape, filt, chunked_x, [1, 1, 1, 1], "SAME"),
             gradops.depthwise_conv2d_native_backprop_input(x.shape, filt, x, [1, 1, 1, 1], "SAME"))]:
        assert got.chunks == ((1,), (6, 5, 5, 4), (6,), (2,))
        assert len(got.dask.layers[got.name]) == 4 + 3
        assert_same_bits(got.compute(), expected)


@pytest.mark.parametrize("backend", BACKENDS)
@CLUSTER_SETTINGS
@given(data=st.data(), call=depthwise_calls())
def test_depthwise_backprop_filter_deterministic_and_within_bound(client, backend, data, call):
    shape, filter_shape, attrs, dtype = call
    x, filt, dy = depthwise_operands(shape, filter_shape, attrs, dtype)
    x_dask, dy_dask = chunked(data.draw, x), chunked(data.draw, dy, spatial_and_batch(attrs))
    got = gd.depthwise_conv2d_native_backprop_filter(x_dask, filter_shape, dy_dask, backend=backend, **attrs)
    first, second = got.compute(), got.compute()
    assert_same_bits(first, second)
    expected = gradops.depthwise_conv2d_native_backprop_filter(x, filter_shape, dy, backend=backend, **attrs)
    assert first.dtype == expected.dtype
    n_h_w = np.prod([dy.shape[a] for a in spatial_and_batch(attrs)])
    blocks = np.prod([len(dy_dask.chunks[a]) for a in spatial_and_batch(attrs)])
    unit = 2.0 ** -53 if dtype == "float64" else 2.0 ** -24
    bound = (n_h_w + blocks) * unit * sum_of_magnitudes(x, dy, filter_shape, attrs)
    if dtype in ("float16", "bfloat16"):  # plus one rounding to T of each result
        bound += np.abs(expected.astype(np.float64)) * (2.0 ** -10 if dtype == "float16" else 2.0 ** -7) + 2.0 ** -24
    difference = np.abs(first.astype(np.float64) - expected.astype(np.float64))
    assert np.all(difference <= bound)


# --- validation when the graph is built, threads ---------------------------------------------

def test_errors_are_raised_when_the_graph_is_built():
    x = da.zeros((2, 3, 4, 5), dtype=np.float32, chunks=2)
    with pytest.raises(gradops.ShapeError, match=r"^dy\.shape: expected \(2, 3, 4, 5\)"):
        gd.relu_grad(x, da.zeros((2, 3, 4, 6), dtype=np.float32))
    with pytest.raises(gradops.DescriptorError, match=r"^scales\[1\]: expected a float32 value > 0"):
        gd.resample1(x, (2, 3, 8, 10), scales=[1, -2, 2, 2])
    with pytest.raises(gradops.DescriptorError, match=r"^rounding_direction: required"):
        gd.resample_grad1(x, (2, 3, 2, 2))
    with pytest.raises(gradops.ShapeError, match=r"^chunks\[2\]: expected chunk sizes >= 1 summing to 8"):
        gd.resample1(x, (2, 3, 8, 10), chunks=((2,), (3,), (4, 3), (10,)))
    with pytest.raises(gradops.ShapeError, match=r"^chunks"):
        gd.resample_grad(x, (2, 3, 2, 2), chunks=((1, 1), (3,)))
    with pytest.raises(gradops.ShapeError, match=r"^chunks\[2\]: expected one chunk along axis 2"):
        gd.resample1(x, (2, 3, 8, 5), chunks=((2,), (3,), (4, 4), (5,)))
    with pytest.raises(gradops.DataTypeError, match=r"^x\.dtype"):
        gd.resample(x.astype(np.int32), (2, 3, 8, 10))
    with pytest.raises(gradops.ShapeError, match=r"^chunks\[3\]: expected one chunk along C"):
        gd.depthwise_conv2d_native(x, np.zeros((3, 3, 5, 1), np.float32), [1, 1, 1, 1], "SAME",
                                   chunks=((2,), (3,), (4,), (2, 3)))
    with pytest.raises(gradops.ShapeError, match=r"^filter\.shape\[2\]"):
        gd.depthwise_conv2d_native(x, np.zeros((3, 3, 4, 1), np.float32), [1, 1, 1, 1], "SAME")
    with pytest.raises(gradops.ShapeError, match=r"^out_backprop\.shape\[1\]"):
        gd.depthwise_conv2d_native_backprop_input((2, 9, 4, 5), np.zeros((3, 3, 5, 1), np.float32), x,
                                                  [1, 1, 1, 1], "SAME")
    with pytest.raises(gradops.GradopsError, match=r"^x: expected a dask\.array\.Array"):
        gd.relu([1.0, 2.0])


def test_a_channel_split_input_is_rechunked():
    x = da.from_array(np.ones((1, 4, 4, 6), np.float32), chunks=(1, 2, 2, 2))
    y = gd.depthwise_conv2d_native(x, np.ones((3, 3, 6, 2), np.float32), [1, 1, 1, 1], "SAME")
    assert y.chunks[3] == (12,)


def test_blocks_run_with_one_fast_backend_thread():
    numba = pytest.importorskip("numba")
    from gradops.dask._graph import _on_one_thread

    before = numba.get_num_threads()
    assert _on_one_thread(numba.get_num_threads) == 1
    assert numba.get_num_threads() == before


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("mode,sizes", [("linear", (2, 24, 40, 32)), ("nearest", (2, 24, 40, 32)),
                                        ("linear", (2, 7, 9, 32)), ("nearest", (2, 5, 3, 16))])
def test_resample_gradients_of_nhwc_images_same_bits(client, backend, dtype, mode, sizes):
    """Gradients of 2x and fractional upsampling of channels-last images, the fast kernels'
    pixel paths (rows read directly, nearest pixel sums, float16 columns first), with blocks of
    one and several rows."""
    rng = np.random.default_rng(7)
    dy = random_values(rng, (sizes[0], 2 * sizes[1], 2 * sizes[2] - 3, sizes[3]), dtype)
    expected = gradops.resample_grad(dy, sizes, mode=mode, backend=backend)
    forward = gradops.resample1(expected, dy.shape, mode=mode, backend=backend)
    for chunks in [lambda a: (1, 1, -1, -1), lambda a: (2, 5, -1, -1), lambda a: (1, (3, 1, a.shape[1] - 4), -1, -1)]:
        got = gd.resample_grad(da.from_array(dy, chunks=chunks(dy)), sizes, mode=mode, backend=backend)
        assert_same_bits(got.compute(), expected)
        got = gd.resample1(da.from_array(expected, chunks=chunks(expected)), dy.shape, mode=mode, backend=backend)
        assert_same_bits(got.compute(), forward)


def test_readme_dask_snippet_runs():
    """The README's Dask snippet (a ```py block: tests/test_readme.py runs only the ```python
    blocks, which must not need dask) runs as written and gives the in-memory call's bits."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme[readme.index("### Dask"):]
    (snippet,) = re.findall(r"```py\n(.*?)```", section[:section.index("\n### ")], flags=re.S)
    namespace: dict = {}
    exec(compile(snippet, "README.md", "exec"), namespace)  # noqa: S102 - our own documentation
    expected = gradops.resample_grad(namespace["dy_stack"].compute(), (8, 128, 128, 16), mode="linear")
    assert_same_bits(namespace["dx_stack"].compute(scheduler="threads"), expected)


def test_graphs_of_arrays_larger_than_memory_are_built():
    """A dask array may exceed memory and DirectML's 2^32-1 elements: the graph is still built
    (validated without the whole-array size limits), while the NumPy API keeps refusing such an
    operand, naming its field. Nothing is computed."""
    big = da.zeros((4096, 256, 256, 64), dtype=np.float32, chunks=(8, 256, 256, 64))  # 64 GiB
    filt = np.ones((3, 3, 64, 1), np.float32)
    graphs = [gd.relu_grad(big, big), gd.resample_grad1(big, (4096, 128, 128, 64), mode="linear"),
              gd.resample2(big, (4096, 512, 512, 64), mode="linear"),
              gd.depthwise_conv2d_native(big, filt, [1, 1, 1, 1], "SAME"),
              gd.depthwise_conv2d_native_backprop_input(list(big.shape), filt, big, [1, 1, 1, 1], "SAME"),
              gd.depthwise_conv2d_native_backprop_filter(big, [3, 3, 64, 1], big, [1, 1, 1, 1], "SAME")]
    assert [g.shape for g in graphs] == [big.shape, (4096, 128, 128, 64), (4096, 512, 512, 64), big.shape,
                                         big.shape, (3, 3, 64, 1)]
    stand_in = np.broadcast_to(np.zeros((), np.float32), big.shape)
    with pytest.raises(gradops.ShapeError, match=r"^x\.shape"):
        gradops.relu_grad(stand_in, stand_in)
    with pytest.raises(gradops.ShapeError, match=r"^input\.shape"):
        gradops.depthwise_conv2d_native(stand_in, filt, [1, 1, 1, 1], "SAME")


def test_benchmark_runs_and_checks_its_result(capsys):
    """``python -m gradops.dask.bench`` end to end at one small size (its own LocalCluster): the
    dask result is compared with the in-memory one digest by digest before anything is timed,
    a row reports both sides and dask's floor (do-nothing tasks: above 1 by what they took), and
    ``--breakdown`` a row of where the dask time went. Timings are not judged here (benchmarks,
    not tests)."""
    from gradops.dask import bench

    assert bench.main(["--gib", "0.03", "--chunk-mib", "8", "--reps", "1", "--only", "relu_grad", "--breakdown"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| relu_grad")]
    assert len(rows) == 2  # the table's row and the breakdown's
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[1:3] == ["8", "4"]  # one 32 MiB image in four 8 MiB row blocks
    assert len(cells) == 7 and float(cells[-3]) > 0 and float(cells[-2]) > 0 and float(cells[-1]) > 1
    cells = [cell.strip() for cell in rows[1].strip("|").split("|")]
    assert cells[1:3] == ["8", "4"]  # four tasks: one per block, no other
    first, between, busiest, after = map(float, cells[4:])
    # the workers' times carry distributed's estimate of their clock's offset to the scheduler's
    # (scheduler_delay), off by a few milliseconds: the last task may seem to end after the run
    assert first > 0 and between >= 0 and busiest > 0 and abs(after) < 1e3


def test_out_of_core_example_runs_and_verifies(tmp_path, capsys):
    """``python -m gradops.dask.example`` (the README's out-of-core example) end to end at a small
    size (its own LocalCluster): dy written to zarr in 8 row chunks, dx written back, and every
    image read back from the store with the in-memory call's bits."""
    from gradops.dask import example

    arguments = ["--store", str(tmp_path), "--gib", "0.00025", "--height", "32", "--width", "32",
                 "--channels", "4", "--chunk-mib", "0.008", "--verify", "4"]
    assert example.main(arguments) == 0
    out = capsys.readouterr().out
    assert example.stack_shape(0.00025, 32, 32, 4) == (4, 64, 64, 4)
    assert "dy chunks (1, 8, 64, 4)" in out and out.count("same bits as the in-memory call") == 4, out
    assert (tmp_path / "dx.zarr").exists()
