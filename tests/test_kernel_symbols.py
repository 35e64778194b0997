"""Kernels compiled by different processes meet in numba's disk cache (``gradops warmup`` compiles in
parallel processes; pytest-xdist workers share a cache; users run several programs). numba names a
compiled function by module, qualified name, argument types and a per-process counter, so two
processes that compile different specialisations of one factory in the same order give them the
same symbol, and a process that loads both links both callers to one body: at the AVX2 tier a 5x5
depthwise forward, loaded after a 5x5 backprop input, ran the adjoint's filter rows. gradops
makes the ids random (``numba_internals.unique_symbols_across_processes``). Here: a factory of
the shape of gradops' kernel factories (a cached kernel per constant, calling an ``@overload``
whose implementation per literal calls a function of its own), two processes that each compile
one, and a third that loads both."""

from __future__ import annotations

import subprocess
import sys
import textwrap

FACTORY = textwrap.dedent('''
    import functools

    import gradops._fast  # noqa: F401 (as every gradops kernel module: its numba set-up first)
    from numba import njit, types
    from numba.extending import overload


    @functools.cache
    def _scaler(k):
        @njit  # called, and too long for LLVM to inline: a symbol of its own, one name for every k
        def scale(x):
            total = 0.0
            for i in range(10):
                total = total * 0.5 + x * k if total < 1e3 else total - x
                total = total * 0.25 + x * k * 2.0 if total < 1e4 else total - 2.0 * x
                total = total * 0.125 + x * k * 3.0 if total < 1e5 else total - 3.0 * x
                total = total * 0.5 + x * k * 4.0 if total < 1e6 else total - 4.0 * x
                total = total * 0.25 + x * k * 5.0 if total < 1e7 else total - 5.0 * x
                total = total * 0.125 + x * k * 6.0 if total < 1e8 else total - 6.0 * x
                total = total * 0.5 + x * k * 7.0 if total < 1e9 else total - 7.0 * x
                total = total * 0.25 + x * k * 8.0 if total < 1e10 else total - 8.0 * x
            for i in range(10):
                total = total / (1.0 + i) + x * k if total > -1e3 else total + x
                total = total / (2.0 + i) + x * k * 2.0 if total > -1e4 else total + 2.0 * x
                total = total / (3.0 + i) + x * k * 3.0 if total > -1e5 else total + 3.0 * x
                total = total / (4.0 + i) + x * k * 4.0 if total > -1e6 else total + 4.0 * x
            return total
        return scale


    def scaled(x, k):
        raise NotImplementedError


    @overload(scaled)
    def _scaled(x, k):
        if not isinstance(k, types.IntegerLiteral):
            return None
        scale = _scaler(k.literal_value)

        def impl(x, k):
            return scale(x)
        return impl


    @functools.cache
    def kernel(k):
        @njit(cache=True)
        def run(x):
            return scaled(x, k)
        return run
''')


def _run(tmp_path, code: str) -> str:
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_factory_kernels_from_two_processes_keep_their_own_code(tmp_path):
    (tmp_path / "factory_kernels.py").write_text(FACTORY)
    alone = [_run(tmp_path, f"import factory_kernels as f; print(f.kernel({k})(1.0))") for k in (2, 3)]
    # each what Python computes from the same source, uncompiled
    python = _run(tmp_path, "import factory_kernels as f; print(f._scaler(2).py_func(1.0)); "
                            "print(f._scaler(3).py_func(1.0))").split()
    assert [float(value) for value in alone] == [float(value) for value in python] and alone[0] != alone[1]
    # Each process above numbered its functions alike; this one loads both kernels.
    loaded = _run(tmp_path, "import factory_kernels as f; print(f.kernel(2)(1.0)); print(f.kernel(3)(1.0))")
    assert loaded.split() == alone
    assert list((tmp_path / "cache").rglob("*.nbi")), "the kernels were not cached: the test proves nothing"
