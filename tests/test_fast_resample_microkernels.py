"""The generated resample microkernels, each on its own (the XNNPACK way: a tester per family),
against brute-force Python loops written from the documented order alone (package docstring of
``gradops._fast.resample``, ``row_sum_template``), one float32 rounding per operation, bit for
bit, in float32 and, where a microkernel reads the source buffer, float16 bits; elements outside
the range a microkernel writes must keep their bits. Then the generated modules against their
templates and the selection tables against the families."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from numba import njit

from gradops._fast import simd
from gradops._fast.half import HARDWARE_HALF
from gradops._fast.resample import column_template, row_sum_template, selection

ROW_SUMS = {kernel.name: kernel for kernel in row_sum_template.FAMILY
            if isinstance(kernel, row_sum_template.AddRows)}
COLUMNS = {kernel.name: kernel for kernel in column_template.FAMILY}
F32 = np.float32


def _random_floats(rng, n: int) -> np.ndarray:
    """float32 values of mixed magnitude (close enough that every term counts in a sum, so that
    another association gives other bits) with signed zeros, which a sum must keep or lose
    exactly."""
    values = (rng.standard_normal(n) * 2.0 ** rng.integers(-4, 4, n)).astype(F32)
    values[rng.random(n) < 0.05] = -0.0
    values[rng.random(n) < 0.05] = 0.0
    return values


def _random_weights(rng, n: int) -> np.ndarray:
    """Interpolation-like weights, of either sign."""
    return (rng.uniform(0.1, 1.0, n) * rng.choice([-1, 1], n)).astype(F32)


def _random_half_bits(rng, n: int) -> np.ndarray:
    """float16 bits: normal and subnormal values and signed zeros (no NaN or inf: their sums
    compare as NaN or inf either way)."""
    values = (rng.standard_normal(n) * 2.0 ** rng.integers(-26, 8, n)).astype(np.float16)
    values[rng.random(n) < 0.05] = -0.0
    return values.view(np.uint16)


def _decoded(src: np.ndarray) -> np.ndarray:
    """The source as the kernels read it: float32, float16 bits decoded exactly."""
    return src.view(np.float16).astype(F32) if src.dtype == np.uint16 else src


def _assert_bits(actual: np.ndarray, expected: np.ndarray) -> None:
    np.testing.assert_array_equal(actual.view(np.uint32), expected.view(np.uint32))


def _association(t: list) -> np.float32:
    """``(t0 + t1) + (t2 + t3)``, ``t0 + t1`` or ``t0``, one float32 rounding per addition."""
    if len(t) == 4:
        return F32(F32(t[0] + t[1]) + F32(t[2] + t[3]))
    return F32(t[0] + t[1]) if len(t) == 2 else t[0]


def _jit_call(kernel, parameters: str, arguments: str, returns: bool = False):
    """A jitted ``run(parameters)`` that calls ``kernel(arguments)``: written out per arity, as
    numba does not call an inlined function with ``*args``."""
    namespace = {"__name__": __name__, "kernel": kernel, "np": np}
    exec(f"def run({parameters}):\n    {'return ' if returns else ''}kernel({arguments})\n", namespace)
    return njit(namespace["run"])


# Step 1: ``add_rows{R}_{weighted|plain}``.

def _add_rows_brute_force(acc, a, src, bases, weights, n, first, zero):
    """``acc[a + c] = (zero if first else acc[a + c]) + ((t0 + t1) + (t2 + t3))`` (R = 4),
    ``(t0 + t1)`` (R = 2) or ``t0`` (R = 1), ``t_r = w_r * src[b_r + c]`` (or ``src[b_r + c]``
    without weights), one element and one rounding at a time, on a copy of ``acc``."""
    out = acc.copy()
    values = _decoded(src)
    for c in range(n):
        t = [values[b + c] if weights is None else F32(w * values[b + c])
             for b, w in zip(bases, weights or bases)]
        out[a + c] = F32((zero if first else acc[a + c]) + _association(t))
    return out


@functools.cache
def _add_rows_harness(name: str):
    """A jitted call of microkernel ``name`` with its ``rows`` bases ``b`` (and weights ``w``)."""
    spec = ROW_SUMS[name]
    rows = [f"b[{r}]" for r in range(spec.rows)] + ([f"w[{r}]" for r in range(spec.rows)] if spec.weighted else [])
    return _jit_call(selection.row_sum_microkernel(name), "acc, a, src, b, w, n, first, zero",
                     f"acc, np.uint64(a), src, {', '.join(rows)}, np.uint64(n), first, np.float32(zero)")


@pytest.mark.parametrize("first", [True, False])
@pytest.mark.parametrize("element", ["float32", "float16"])
@pytest.mark.parametrize("name", sorted(ROW_SUMS))
def test_add_rows_against_brute_force(name, element, first):
    """Rows at scattered bases (overlapping, in any order), an odd length, a start inside
    ``acc``; from ``+0`` or ``-0`` (``zero``) or onto the running sum: the brute force's bits, and
    nothing outside ``acc[a : a + n]`` written."""
    spec = ROW_SUMS[name]
    rng = np.random.default_rng(sum(map(ord, name)) + 2 * (element == "float16") + first)
    n, a = 3 * simd.VECTOR_BYTES // 4 + 5, 7
    src = _random_half_bits(rng, 4 * n + 40) if element == "float16" else _random_floats(rng, 4 * n + 40)
    bases = [int(b) for b in rng.choice(3 * n + 30, spec.rows, replace=False)]
    weights = [F32(w) for w in _random_weights(rng, spec.rows)] if spec.weighted else None
    acc = _random_floats(rng, a + n + 9)
    for zero in (F32(0.0), F32(-0.0)):
        actual = acc.copy()
        _add_rows_harness(name)(actual, a, src, np.array(bases, np.uint64), np.array(weights or [1], F32), n, first,
                                zero)
        _assert_bits(actual, _add_rows_brute_force(acc, a, src, bases, weights, n, first, zero))


# Vectors of four slots (``slots4_{weighted|plain}_vector``) and of four loaded vectors
# (``terms4_weighted_vector``): ``zero + ((t0 + t1) + (t2 + t3))``, ``(t0 + t1) + (t2 + t3)``.

def _four_brute_force(rows, weights, zero):
    """Per element, ``zero + ((t0 + t1) + (t2 + t3))`` (or without ``zero`` if it is None),
    ``t_k = w_k * rows[k]`` (or ``rows[k]`` without weights), one rounding at a time."""
    out = np.empty(rows[0].size, F32)
    for e in range(out.size):
        t = [rows[k][e] if weights is None else F32(weights[k] * rows[k][e]) for k in range(4)]
        total = F32(F32(t[0] + t[1]) + F32(t[2] + t[3]))
        out[e] = total if zero is None else F32(zero + total)
    return out


@functools.cache
def _vector_harness(name: str, weighted: bool, loaded: bool):
    """A jitted loop over the vectors of ``out[a : a + n]`` calling ``name`` on the row sum at
    slots ``s`` (or, ``loaded``, on four vectors it loads from there first)."""
    kernel = selection.row_sum_microkernel(name)

    @njit
    def run(out, a, row_sum, s, w, zero, n):
        lanes = np.uint64(simd.lanes(out))
        z = simd.splat(out, zero)
        w0, w1, w2, w3 = simd.splat(out, w[0]), simd.splat(out, w[1]), simd.splat(out, w[2]), simd.splat(out, w[3])
        u = np.uint64(0)
        while u + lanes <= n:
            if loaded:
                value = kernel(simd.load(row_sum, s[0] + u), simd.load(row_sum, s[1] + u), simd.load(row_sum, s[2] + u),
                               simd.load(row_sum, s[3] + u), w0, w1, w2, w3)
            elif weighted:
                value = kernel(row_sum, u, s[0], s[1], s[2], s[3], w0, w1, w2, w3, z)
            else:
                value = kernel(row_sum, u, s[0], s[1], s[2], s[3], z)
            simd.store(out, np.uint64(a) + u, value)
            u += lanes
    return run


@pytest.mark.parametrize("name", [*selection.SLOT_SUMS.values(), selection.TERM_SUMS])
def test_four_vectors_against_brute_force(name):
    """Three vectors from four slots of a row sum (overlapping, in any order), from ``+0`` and
    ``-0``: the brute force's bits, nothing else in ``out`` written."""
    spec = {kernel.name: kernel for kernel in row_sum_template.FAMILY}[name]
    loaded = isinstance(spec, row_sum_template.Terms4Vector)
    weighted = loaded or spec.weighted
    rng = np.random.default_rng(sum(map(ord, name)))
    n, a = 3 * simd.VECTOR_BYTES // 4, 5
    row_sum = _random_floats(rng, 4 * n)
    s = rng.choice(3 * n, 4, replace=False).astype(np.uint64)
    w = _random_weights(rng, 4) if weighted else np.ones(4, F32)
    for zero in (F32(0.0), F32(-0.0)):
        out = _random_floats(rng, a + n + 7)
        expected = out.copy()
        expected[a:a + n] = _four_brute_force([row_sum[int(k):int(k) + n] for k in s], w if weighted else None,
                                              None if loaded else zero)
        _vector_harness(name, weighted, loaded)(out, a, row_sum, s, w, zero, n)
        _assert_bits(out, expected)


# Step 2 for NHWC pixels summed in memory first (``column_template``): ``add_slots{K}``.

@pytest.mark.parametrize("name", sorted(selection.SLOT_RUNS.values()))
def test_slot_runs_against_brute_force(name):
    """A pixel of an odd number of elements, in memory, plus K slots of a row sum (overlapping, in
    any order): ``vector[u] + ((t0 + t1) + (t2 + t3))`` (or ``+ t0``), the brute force's bits,
    and nothing past the pixel written."""
    spec = COLUMNS[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    n = 2 * simd.VECTOR_BYTES // 4 + 3
    row_sum = _random_floats(rng, 4 * n)
    slots = [int(k) for k in rng.choice(3 * n, spec.slots, replace=False)]
    weights = [F32(w) for w in _random_weights(rng, spec.slots)] if spec.weighted else None
    arguments = [f"s[{k}]" for k in range(spec.slots)]
    arguments += [f"w[{k}]" for k in range(spec.slots)] if spec.weighted else []
    vector = _random_floats(rng, n + 9)
    expected = vector.copy()
    for u in range(n):
        terms = [row_sum[k + u] if weights is None else F32(w * row_sum[k + u])
                 for k, w in zip(slots, weights or slots)]
        expected[u] = F32(vector[u] + _association(terms))
    run = _jit_call(selection.column_microkernel(name), "vector, n, row_sum, s, w",
                    f"vector, np.uint64(n), row_sum, {', '.join(arguments)}")
    run(vector, n, row_sum, np.array(slots, np.uint64), np.array(weights or [1], F32))
    _assert_bits(vector, expected)


# The columns-first spans ``half_span_{V}v``.

@pytest.mark.skipif(not HARDWARE_HALF, reason="the columns-first path needs the CPU's half conversions")
@pytest.mark.parametrize("name", sorted(selection.HALF_SPANS.values()))
def test_half_spans_against_brute_force(name):
    """Columns ``lo <= j < hi`` of a float16 source row of 2 * V vectors of channels per pixel,
    the span from channel ``u`` = V vectors in: ``cc[c0 + j * units + u + e] = (w0 * p0 + w1 *
    p1) + (w2 * p2 + w3 * p3)``, ``p_k`` = the source at pixel ``2 * j + base + k``, channel ``u +
    e``, for ``e`` < V vectors; nothing else in ``cc`` written."""
    vectors = COLUMNS[name].vectors
    rng = np.random.default_rng(sum(map(ord, name)))
    lanes = simd.VECTOR_BYTES // 4
    units, u = 2 * vectors * lanes, vectors * lanes
    columns, lo, hi, base, row, c0 = 7, 2, 6, 1, 9, 3
    src = _random_half_bits(rng, row + (2 * columns + base + 4) * units)
    span_weight = _random_weights(rng, 4 * columns).reshape(4, columns)
    cc = _random_floats(rng, c0 + columns * units + 5)
    expected = cc.copy()
    values = _decoded(src)
    for j in range(lo, hi):
        for e in range(vectors * lanes):
            p = [values[row + (2 * j + base + k) * units + u + e] for k in range(4)]
            expected[c0 + j * units + u + e] = _association([F32(span_weight[k, j] * p[k]) for k in range(4)])
    run = _jit_call(selection.column_microkernel(name), "cc, c0, src, row, units, u, lo, hi, base, span_weight",
                    "cc, c0, src, row, units, u, lo, hi, base, span_weight")
    run(cc, c0, src, row, units, u, lo, hi, base, span_weight)
    _assert_bits(cc, expected)


@pytest.mark.parametrize("template", [row_sum_template, column_template])
def test_generated_modules_are_current(template):
    """``row_sum_microkernels.py`` and ``column_microkernels.py`` are what their templates write
    (regenerate with ``python -m gradops._fast.resample.row_sum_template`` / ``column_template``)."""
    for path, text in template.generate().items():
        assert path.read_text() == text, f"{path.name} is out of date"


def test_selection_tables_cover_the_families():
    """Every name the tables give is a generated microkernel of the shape its key says, and every
    generated microkernel is selected."""
    family = {kernel.name: kernel for kernel in (*row_sum_template.FAMILY, *column_template.FAMILY)}
    for (rows, weighted), name in selection.ROW_SUMS.items():
        assert family[name] == row_sum_template.AddRows(rows, weighted)
    for weighted, name in selection.SLOT_SUMS.items():
        assert family[name] == row_sum_template.Slots4Vector(weighted)
    assert family[selection.TERM_SUMS] == row_sum_template.Terms4Vector()
    for (slots, weighted), name in selection.SLOT_RUNS.items():
        assert family[name] == column_template.SlotRun(slots, weighted)
    for vectors, name in selection.HALF_SPANS.items():
        assert family[name] == column_template.HalfSpan(vectors)
    selected = {*selection.ROW_SUMS.values(), *selection.SLOT_SUMS.values(), selection.TERM_SUMS,
                *selection.SLOT_RUNS.values(), *selection.HALF_SPANS.values()}
    assert selected == set(family)
