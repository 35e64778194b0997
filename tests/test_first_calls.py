"""First calls (gradops._fast.first_calls, issue 23): a call whose kernel is not compiled yet is
answered by the family's NumPy tier, in the kernels' own order, while a compile process compiles
the kernel; later calls run the kernel. The tier must give the kernels' bits, the gate must
refuse a compile only where a NumPy tier answers, and the compile process must fill the cache."""

from __future__ import annotations

import json
import os
import pickle
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from gradops._fast import depthwise as fast
from gradops._fast import first_calls
from gradops._fast.depthwise import ordered
from gradops._fast.depthwise.ordered import ordered_run

from fast_depthwise_cases import BF16, DTYPES, as_layout, bits, empty_like_layout, out_size, random_case
from test_fast_depthwise_filter_order import CASES as FILTER_ORDER_CASES
from test_fast_depthwise_filter_order import lane_order_backprop_filter

KERNELS = ("conv_forward", "backprop_input", "backprop_filter")

# The filter-order cases (heads and tails of 16-position blocks, channel tails, strides, dilations,
# multipliers, 5x5, more rows than chunks), and stride 2 with a multiplier, 7x7, and rows of
# 32 channels read in place
CASES = FILTER_ORDER_CASES + [
    (1, 12, 20, 8, 2, 3, 3, (2, 2), (1, 1), (1, 1)),
    (1, 16, 18, 32, 1, 3, 3, (1, 1), (1, 1), (1, 1)),
    (3, 10, 9, 16, 1, 7, 7, (2, 2), (1, 1), (3, 3)),
]


def _operands(case, dtype, layout, rng):
    """The three kernels' operands and output shapes, in ``layout`` (NHWC-indexed views)."""
    n, h, w, c, m, fh, fw, stride, dil, pad = case
    oh, ow = out_size(h, fh, stride[0], dil[0], pad[0], pad[0]), out_size(w, fw, stride[1], dil[1], pad[1], pad[1])
    x = rng.standard_normal((n, h, w, c)).astype(dtype)
    f = rng.standard_normal((fh, fw, c, m)).astype(dtype)
    dy = rng.standard_normal((n, oh, ow, c * m)).astype(dtype)
    return {"conv_forward": (as_layout(x, layout), f, (n, oh, ow, c * m)),
            "backprop_input": (as_layout(dy, layout), f, (n, h, w, c)),
            "backprop_filter": (as_layout(x, layout), as_layout(dy, layout), (fh, fw, c, m))}


def _output(kernel, shape, dtype, layout):
    return np.empty(shape, dtype) if kernel == "backprop_filter" else empty_like_layout(shape, dtype, layout)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["NHWC", "NCHW", "strided"])
def test_the_numpy_tier_gives_the_kernels_bits(case, dtype, layout):
    """Every kernel path (planar and channels-last rows, staged and in place, residue planes,
    multipliers, half types) against the tier, bit for bit."""
    attrs = (*case[7], *case[8], *case[9])
    for kernel, (a, b, shape) in _operands(case, dtype, layout, np.random.default_rng(sum(case[:5]))).items():
        by_kernel, by_tier = _output(kernel, shape, dtype, layout), _output(kernel, shape, dtype, layout)
        getattr(fast, kernel)(a, b, by_kernel, *attrs)
        ordered_run(kernel, attrs, a, b, by_tier)
        np.testing.assert_array_equal(bits(by_tier), bits(by_kernel), err_msg=kernel)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_numpy_filter_gradient_follows_the_documented_lane_order(dtype):
    """Against the independent scalar model of test_fast_depthwise_filter_order, on random cases."""
    rng = np.random.default_rng(7)
    for _ in range(6):
        case = random_case(rng)
        x = rng.standard_normal((case["n"], case["h"], case["w"], case["c"])).astype(dtype)
        dy = rng.standard_normal((case["n"], case["oh"], case["ow"], case["c"] * case["m"])).astype(dtype)
        expected = lane_order_backprop_filter(x, dy, case["fh"], case["fw"], case["stride"], case["dil"],
                                              case["pad"], dtype)
        out = np.empty(expected.shape, dtype)
        ordered_run("backprop_filter", (*case["stride"], *case["dil"], *case["pad"]), x, dy, out)
        np.testing.assert_array_equal(bits(out), bits(expected))


@pytest.mark.parametrize("terms_bytes", [ordered._TERMS_BYTES, 1, 3 * 9 * 15 * 2 * 6 * 4], ids=["default", "chunk", "3chunks"])
def test_the_numpy_filter_gradient_sums_long_lanes_in_order(monkeypatch, terms_bytes):
    """Chunks of many rows and blocks (80 dy rows in 10 chunks, 15 blocks a row), summed all ten,
    one or three chunks at a time (``_TERMS_BYTES``): against the scalar lane model."""
    monkeypatch.setattr(ordered, "_TERMS_BYTES", terms_bytes)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 40, 30, 3)).astype(np.float32)
    dy = rng.standard_normal((2, 40, 30, 6)).astype(np.float32)
    expected = lane_order_backprop_filter(x, dy, 3, 3, (1, 1), (1, 1), (1, 1), np.float32)
    out = np.empty(expected.shape, np.float32)
    ordered_run("backprop_filter", (1, 1, 1, 1, 1, 1), x, dy, out)
    np.testing.assert_array_equal(bits(out), bits(expected))


def test_the_numpy_tier_skips_taps_in_the_padding_and_rounds_once():
    """An inf weight reaching only padding leaves the sum finite (SPEC 5.4); a float32 sum past
    float16's range rounds to inf, and bfloat16 rounds the float32 sum once, to nearest even."""
    x = np.ones((1, 2, 2, 1), np.float32)
    f = np.ones((3, 3, 1, 1), np.float32)
    f[0, 0] = np.inf
    y = np.empty((1, 2, 2, 1), np.float32)
    ordered_run("conv_forward", (1, 1, 1, 1, 1, 1), x, f, y)
    assert y[0, 0, 0, 0] == 4 and np.isinf(y[0, 1, 1, 0])
    dx = np.empty((1, 2, 2, 1), np.float32)
    ordered_run("backprop_input", (1, 1, 1, 1, 1, 1), x, f, dx)
    assert dx[0, 1, 1, 0] == 4 and np.isinf(dx[0, 0, 0, 0])
    big = np.full((1, 1, 2, 1), 60000, np.float16)
    y16 = np.empty((1, 1, 1, 1), np.float16)
    ordered_run("conv_forward", (1, 1, 1, 1, 0, 0), big, np.ones((1, 2, 1, 1), np.float16), y16)
    assert np.isinf(y16[0, 0, 0, 0]) and y16[0, 0, 0, 0] > 0
    # 1 + 2**-8 + 2**-16 in bfloat16: the float32 sum (exact) rounds up to 1 + 2**-7
    terms = np.array([1, 2.0 ** -8, 2.0 ** -16], np.float32).astype(BF16).reshape(1, 1, 3, 1)
    y_bf16 = np.empty((1, 1, 1, 1), BF16)
    ordered_run("conv_forward", (1, 1, 1, 1, 0, 0), terms, np.ones((1, 3, 1, 1), BF16), y_bf16)
    assert float(y_bf16[0, 0, 0, 0]) == 1 + 2.0 ** -7


# --- the gate --------------------------------------------------------------------------------

class _Dispatcher:
    """Stands in for a numba dispatcher that a compile process can make (a recipe)."""

    gradops_recipe = ("gradops._fast.pool", "_cancel", None)


def test_the_gate_refuses_a_compile_only_in_a_gated_call(monkeypatch):
    monkeypatch.setattr(first_calls, "_compiles", first_calls._Compiles())
    first_calls.before_compile(_Dispatcher(), ())  # not gated: compiles here
    first_calls.thread_state.gated = True
    try:
        with pytest.raises(first_calls.KernelNotReady) as refused:
            first_calls.before_compile(_Dispatcher(), ("signature",))
        assert refused.value.recipe == _Dispatcher.gradops_recipe and refused.value.signature == ("signature",)
        # a kernel the compile process failed on compiles in the calling process
        first_calls._compiles._status[(_Dispatcher.gradops_recipe, ("signature",))] = "failed"
        first_calls.before_compile(_Dispatcher(), ("signature",))
    finally:
        first_calls.thread_state.gated = False


def test_a_helper_thread_never_compiles():
    errors = []

    def helper():
        first_calls.thread_state.helper = True
        try:
            first_calls.before_compile(_Dispatcher(), ())
        except first_calls.KernelNotReady as error:
            errors.append(error)

    thread = threading.Thread(target=helper)
    thread.start()
    thread.join()
    assert len(errors) == 1


def test_a_refused_call_runs_the_numpy_tier_and_asks_for_the_kernel(monkeypatch):
    asked, ran = [], []
    monkeypatch.setattr(first_calls._compiles, "request", lambda recipe, signature: asked.append((recipe, signature)))
    monkeypatch.setenv("GRADOPS_FIRST_CALLS", "numpy")

    def compute(out):
        out[0] = 1  # written before the missing kernel was met: the tier writes everything
        first_calls.before_compile(_Dispatcher(), ("signature",))
        ran.append("kernel")

    fits = [True]
    run = first_calls.gated(compute, lambda out: out.__setitem__(slice(None), 2), lambda out: fits[0])
    out = np.zeros(3)
    run(out)
    assert ran == [] and asked == [(_Dispatcher.gradops_recipe, ("signature",))] and list(out) == [2, 2, 2]
    assert not getattr(first_calls.thread_state, "gated", False)
    monkeypatch.setenv("GRADOPS_FIRST_CALLS", "compile")  # compiles (here: the stand-in runs) instead
    run(out)
    assert ran == ["kernel"] and out[0] == 1
    # a call too large for the NumPy tier compiles in the calling process, and asks for nothing
    monkeypatch.setenv("GRADOPS_FIRST_CALLS", "numpy")
    fits[0], asked[:] = False, []
    out[:] = 0
    run(out)
    assert ran == ["kernel", "kernel"] and asked == [] and out[0] == 1


def test_the_numpy_tier_declines_what_would_not_fit_in_half_the_memory_limit(monkeypatch):
    dy, f = np.empty((1, 64, 64, 32), np.float32), np.empty((3, 3, 32, 2), np.float32)
    dx = np.empty((1, 64, 64, 32), np.float32)  # the tier: dy, f, 3 x 2 sums per dx element: 3.502 MiB
    monkeypatch.setattr(ordered, "memory_limit_bytes", lambda: 8 << 20)  # GRADOPS_MEMORY_LIMIT_MB=8
    assert fast.ordered_fits("backprop_input", dy, f, dx)
    monkeypatch.setattr(ordered, "memory_limit_bytes", lambda: 7 << 20)
    assert not fast.ordered_fits("backprop_input", dy, f, dx)


def test_a_forked_child_asks_again_for_what_its_parent_was_still_compiling():
    compiles = first_calls._Compiles()
    compiles._status = {("pending", ()): "pending", ("done", ()): "done", ("failed", ()): "failed"}
    compiles._asked = {3: ("pending", ())}
    compiles.forget_process()
    assert compiles.status() == {("done", ()): "done", ("failed", ()): "failed"} and compiles._process is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_the_compile_process_ends_with_its_parent_even_while_a_fork_of_it_lives(monkeypatch):
    compiles = first_calls._Compiles()
    service = compiles._running()
    child = os.fork()
    if child == 0:  # pragma: no cover - the forked child
        compiles.forget_process()  # what os.register_at_fork runs in a child
        time.sleep(5)
        os._exit(0)
    try:
        service.stdin.close()
        assert service.wait(timeout=60) == 0
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)


def test_kernels_are_found_again_from_their_recipes():
    from gradops._fast.depthwise.filter import _backprop_filter_kernel_for, _combine_chunks
    from gradops._fast.depthwise.kernels import _backprop_input_kernel_for
    from gradops._fast.resample.kernels import _contract_kernel, _select
    path = (False, False, False, False, True, 3, False, 0)
    for kernel in (_backprop_input_kernel_for(path), _backprop_filter_kernel_for("registers", 0), _combine_chunks,
                   _contract_kernel((False, 0, 1, False, True, False, True, False)), _select):
        assert first_calls.make_kernel(first_calls.recipe_of(kernel)) is kernel
        assert pickle.loads(pickle.dumps(first_calls.recipe_of(kernel))) == first_calls.recipe_of(kernel)


# --- the compile process -----------------------------------------------------------------------

def test_the_compile_process_fills_the_cache_and_reports_failures(tmp_path):
    """A small kernel (pool._cancel) compiled on request lands in the cache a later process loads;
    a recipe that names nothing is reported failed; the end of the input ends the process."""
    from numba import types
    requests = b""
    for number, recipe in enumerate([("gradops._fast.pool", "_cancel", None), ("gradops._fast.pool", "_nothing", None)]):
        frame = pickle.dumps((number, recipe, (types.Array(types.int64, 1, "C"),)))
        requests += struct.pack("<Q", len(frame)) + frame
    environment = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    service = subprocess.Popen([sys.executable, "-m", "gradops._fast.compile_service"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, env=environment)
    service.stdin.write(requests)
    service.stdin.flush()
    lines = [service.stdout.readline().decode().strip() for _ in range(2)]
    service.stdin.close()  # the parent is done: the process ends
    assert service.wait(timeout=60) == 0
    assert lines[0] == "0 ok" and lines[1].startswith("1 failed AttributeError"), lines
    assert any("_cancel" in path.name for path in tmp_path.rglob("*.nbi"))


FIRST_CALLS_SCRIPT = textwrap.dedent("""
    import json, logging, time
    import numpy as np
    import gradops
    from gradops._fast import depthwise as fast
    from gradops._fast import first_calls

    tier_calls = []
    ordered_run = fast.ordered_run
    fast.ordered_run = lambda *args: (tier_calls.append(1), ordered_run(*args))[1]
    rng = np.random.default_rng(0)
    dy = rng.standard_normal((2, 6, 7, 3)).astype(np.float32)
    f = rng.standard_normal((3, 3, 3, 1)).astype(np.float32)
    def call():
        return gradops.depthwise_conv2d_native_backprop_input([2, 6, 7, 3], f, dy, [1, 1, 1, 1], "SAME")

    first = call()
    status = list(first_calls.compile_status().values())
    deadline = time.time() + 900
    while time.time() < deadline:  # each round: the kernels asked for compile, and a call runs
        while "pending" in first_calls.compile_status().values():
            time.sleep(0.5)
        before = len(tier_calls)
        later = call()
        if len(tier_calls) == before:
            break
    print(json.dumps({"status": status, "after": list(first_calls.compile_status().values()),
                      "tier_calls": len(tier_calls),
                      "same_bits": np.array_equal(first.view(np.uint32), later.view(np.uint32))}))
""")


def test_a_first_call_answers_in_numpy_while_its_kernel_compiles(tmp_path):
    """From an empty cache, in the default mode: the first call runs the NumPy tier and asks for
    its kernels; once they are compiled the calls run the kernels, with the same bits."""
    environment = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), GRADOPS_FIRST_CALLS="numpy")
    result = subprocess.run([sys.executable, "-c", FIRST_CALLS_SCRIPT], capture_output=True, text=True,
                            env=environment, timeout=1200, check=True)
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["status"] and set(report["status"]) == {"pending"}, report
    assert set(report["after"]) == {"done"}, report
    # the first call, and at most one more per kernel it met missing after the first one
    assert 1 <= report["tier_calls"] <= len(report["after"]), report
    assert report["same_bits"], report
