"""``pool.share``'s kernels run by a foreign team's thread through a native entry (``team_share``):
the arguments packed into words, rebuilt by the entry, the kernel run with role ALONE.

Each case runs the whole call through the entry alone, on this thread (no caller's share), so
that any argument the words garble, or a chunk the entry skips, shows in the output. It must
have the bits of the same call run as usual (the entry changes which thread computes a chunk,
never its sums), which the kernels' own tests compare with brute-force sums. The torch team
itself is tested in ``test_openmp_team.py``."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("numba")

import numba  # noqa: E402

import gradops  # noqa: E402
from gradops._fast import depthwise, first_calls, pool, relu, resample, team_share  # noqa: E402

_ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _through_entry_alone(kernel, items, moved_bytes, *args, wake_bytes=None):
    """``pool.share`` as a team thread would run it with no caller: every chunk through the entry."""
    chunks = min(items, 7)
    counters = np.zeros(3, np.int64)
    values = (counters, pool.lane_words(), chunks, *args)
    words = np.full(team_share.WORDS, -1, np.int64)
    address = team_share.pack_words(words, values)
    assert words[0] == team_share.fingerprint(numba.typeof(values))
    entry = team_share.team_entry(first_calls.recipe_of(kernel), numba.typeof(values))
    _ENTRY(entry)(address)
    assert counters[0] >= chunks and counters[1] == chunks  # every chunk claimed and computed


@pytest.fixture
def same_bits_through_entry(monkeypatch):
    """``check(call, *arguments, **attributes)``: the fast call's bits through the entry alone
    equal its bits as usual."""
    monkeypatch.setenv("GRADOPS_FIRST_CALLS", "compile")

    def check(call, *arguments, **attributes):
        usual = call(*arguments, **attributes, backend="fast")
        with monkeypatch.context() as patched:
            for module in (depthwise, resample, relu):
                patched.setattr(module, "share", _through_entry_alone)
            through_entry = call(*arguments, **attributes, backend="fast")
        assert np.array_equal(_bits(through_entry), _bits(usual)), call.__name__
    return check


def _bits(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).view(np.uint8)


def _random(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def test_the_depthwise_kernels_run_from_their_words(same_bits_through_entry):
    """Forward, backprop input and the filter gradient (stride 2, multiplier 2, SAME padding:
    every geometry word matters), float32 and float16."""
    rng = np.random.default_rng(1)
    for dtype in (np.float32, np.float16):
        x, f = _random(rng, (2, 13, 11, 6), dtype), _random(rng, (3, 3, 6, 2), dtype)
        dy = _random(rng, (2, 7, 6, 12), dtype)
        attrs = dict(strides=(1, 2, 2, 1), padding="SAME")
        same_bits_through_entry(gradops.depthwise_conv2d_native, x, f, **attrs)
        same_bits_through_entry(gradops.depthwise_conv2d_native_backprop_input, x.shape, f, dy, **attrs)
        same_bits_through_entry(gradops.depthwise_conv2d_native_backprop_filter, x, f.shape, dy, **attrs)


def test_the_resample_kernels_run_from_their_words(same_bits_through_entry):
    """A linear gradient (the contraction kernel, whose plan record holds arrays, floats and
    flags) and a nearest forward (the select kernel)."""
    rng = np.random.default_rng(2)
    same_bits_through_entry(gradops.resample_grad, _random(rng, (2, 3, 10, 14)), (2, 3, 4, 6), mode="linear")
    same_bits_through_entry(gradops.resample, _random(rng, (2, 3, 5, 7)), (2, 3, 15, 21))


def test_the_strided_relu_select_runs_from_its_words(same_bits_through_entry):
    rng = np.random.default_rng(3)
    x, dy = _random(rng, (6, 10, 10))[:, ::2, 1:], _random(rng, (6, 10, 10))[:, 1::2, :-1]
    same_bits_through_entry(gradops.relu_grad, x, dy)


def test_arguments_the_words_cannot_carry_leave_the_kernel_to_the_helpers():
    """Arguments that need more words than an entry reads (its team would read past them), or of
    a type the words do not carry, are refused when the packer is typed; the kernel then runs
    without a team (``packed`` returns 0), and is not packed again."""
    words = np.zeros(team_share.WORDS, np.int64)
    too_many = tuple(np.zeros(1) for _ in range(90))
    with pytest.raises(numba.core.errors.TypingError, match="words"):
        team_share.pack_words(words, too_many)

    def kernel():
        """A stand-in: only its identity matters here."""
    assert team_share.packed(kernel, words, too_many) == 0
    assert team_share.packed(kernel, words, (np.zeros(3, np.int64),)) == 0  # not tried again
    assert team_share.packed(len, words, ("a string",)) == 0
    assert team_share.packed(max, words, (np.zeros(3, np.int64), 7)) != 0
    assert words[2:5].tolist() == [3, 8, 7]  # after the address: the shape, the stride in bytes; then 7


def test_an_entry_compiled_in_one_process_loads_from_the_disk_cache_in_another():
    """The entry's cache key is text (the kernel's recipe, the values' types): a second process
    finds it without compiling (``compile_if_missing=False``), although it made other numba types
    first. Keyed by the pickle of the closure (numba's way), it would not: a numba type pickles
    with its number in the process's sequence of types, and a dispatcher with a per-process id;
    every process would compile its entries again (about two seconds each)."""
    program = textwrap.dedent("""
        import json, sys, numpy as np, numba
        if sys.argv[1] == "load":  # types made first: later ones get other numbers than in the first process
            made_first = [numba.types.Array(numba.types.float32, ndim, "A") for ndim in range(1, 9)]
        from gradops._fast import pool, relu, team_share
        values = (np.zeros(3, np.int64), pool.lane_words(), 1, np.array([5, 7], np.int64),
                  np.zeros(4, np.uint32), 0, np.array([1, 1], np.int64), np.zeros(4, np.uint32), 0,
                  np.array([1, 1], np.int64), np.zeros(4, np.uint32), 0, np.array([1, 1], np.int64),
                  np.uint32(0x7f800000))
        recipe = ("gradops._fast.relu", "_select_strided", None)
        print(json.dumps(bool(team_share.team_entry(recipe, numba.typeof(values),
                                                     compile_if_missing=sys.argv[1] == "compile"))))
    """)
    env = {**os.environ, "GRADOPS_FIRST_CALLS": "compile"}

    def run(how: str) -> bool:
        done = subprocess.run([sys.executable, "-c", program, how], env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    assert run("compile")
    assert run("load")


def test_an_entry_that_cannot_be_made_leaves_the_kernel_to_the_helpers(monkeypatch, caplog):
    """Making the entry raises (a compile error, say): the call goes on without the team, with a
    warning, and the entry is not tried again; a kernel it needs that is not ready yet
    (``KernelNotReady``) only defers it."""
    monkeypatch.setenv("GRADOPS_FIRST_CALLS", "compile")
    values = (np.zeros(3, np.int64), pool.lane_words(), 1, 5)
    values_type = numba.typeof(values)
    signature = (values_type[0], values_type[1], numba.types.int64, values_type[2], values_type[3])

    class Kernel:
        gradops_recipe = ("a.module", "a_kernel", None)
        overloads = {signature: None}
    stamp = team_share.fingerprint(values_type)
    tries = []

    def not_ready(*arguments, **options):
        tries.append("not ready")
        raise first_calls.KernelNotReady(None, ())
    monkeypatch.setattr(team_share, "team_entry", not_ready)
    assert team_share.entry_for(Kernel, stamp, values) == 0
    assert (Kernel, stamp) not in team_share._entries

    def failing(*arguments, **options):
        tries.append("failed")
        raise RuntimeError("no entry today")
    monkeypatch.setattr(team_share, "team_entry", failing)
    assert team_share.entry_for(Kernel, stamp, values) == 0
    assert team_share.entry_for(Kernel, stamp, values) == 0
    assert tries == ["not ready", "failed"]
    assert "no entry today" in caplog.text
