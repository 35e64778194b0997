"""The one template of the resample column microkernels (``column_microkernels.py`` is its
output): step 2 of the package docstring for NHWC pixels, where each of K slots adds a run of
``units`` elements of the row sum, and the columns-first spans of float16 rows.

Every member adds its slots in the association of ``row_sum_template`` (SPEC 3.4, 3.7):
``(t0 + t1) + (t2 + t3)``, ``t0 + t1`` or ``t0``, ``t_k = w_k * row_sum[s_k + u]`` when
``weighted``, ``row_sum[s_k + u]`` otherwise (nearest: weights of 1).

* ``store_slots4_{weighted|plain}``: ``dst[b + u] = zero + sum`` for ``start <= u < n``,
  rounded once to dst's type (``codecs._store``): the elements of a four-slot pixel past its
  whole vectors (``writers._store_slots4``);
* ``add_slots{K}_{weighted|plain}``: ``vector[u] += sum`` for ``u < n``: a group of slots added
  to a pixel summed in ``vector`` first (strided dst, more than four slots);
* ``slots4_{weighted|plain}_{store|stream|stream_half}``: the whole vectors of a four-slot pixel
  (``row_sum_template``'s ``slots4_..._vector``) from u = 0, written with plain, non-temporal or
  non-temporal float16 stores; returns the first element not written;
* ``half_span_{V}v``: the affine span of ``columns_first._half_column_sums`` for V vectors of
  channels: ``cc[c0 + j * units + u + e] = (w0 * p0 + w1 * p1) + (w2 * p2 + w3 * p3)`` with
  ``w_k = span_weight[k, j]`` and ``p_k`` the float16 source at pixel ``2 * j + base + k``; each
  column's last two source pixels are the next column's first two, kept in registers.

Names encode the specialisation; ``selection.py`` says which a call uses. Regenerate with
``python -m gradops._fast.resample.column_template``; a test checks that the generated module
is current.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .row_sum_template import Slots4Vector, Terms4Vector, association, kind

GENERATED = Path(__file__).with_name("column_microkernels.py")


@dataclass(frozen=True)
class SlotRun:
    """``slots`` runs of the row sum into a pixel: ``into`` "store" (dst) or "add" (vector)."""

    into: str
    slots: int
    weighted: bool

    @property
    def name(self) -> str:
        return f"{self.into}_slots{self.slots}_{kind(self.weighted)}"


@dataclass(frozen=True)
class Slots4Vectors:
    """The whole vectors of a four-slot pixel, written with ``put``."""

    weighted: bool
    put: str

    @property
    def name(self) -> str:
        return f"slots4_{kind(self.weighted)}_{self.put}"


@dataclass(frozen=True)
class HalfSpan:
    """The columns-first span for ``vectors`` vectors of channels."""

    vectors: int

    @property
    def name(self) -> str:
        return f"half_span_{self.vectors}v"


# The family: what the selection tables (``selection.SLOT_RUNS``, ``SLOT_VECTOR_RUNS``,
# ``HALF_SPANS``) choose from.
FAMILY = ((SlotRun("store", 4, True), SlotRun("store", 4, False))
          + (SlotRun("add", 4, True), SlotRun("add", 4, False), SlotRun("add", 1, True))
          + tuple(Slots4Vectors(weighted, put) for weighted in (True, False)
                  for put in ("store", "stream", "stream_half"))
          + (HalfSpan(4), HalfSpan(1)))

_PUTS = {"store": "simd.store", "stream": "simd.store_stream", "stream_half": "simd.store_stream_half"}
_PUT_WORDS = {"store": "plain stores", "stream": "non-temporal stores", "stream_half": "non-temporal float16 stores"}


def _njit(name: str, parameters: str, doc: str) -> list[str]:
    return ["", "", "", '@njit(inline="always")', f"def {name}({parameters}):", f'    """{doc}"""']


def _slots(kernel) -> tuple[str, str]:
    """The slot parameters of a kernel: ``s0, ...`` and (weighted) ``w0, ...``."""
    slots = ", ".join(f"s{k}" for k in range(kernel.slots if isinstance(kernel, SlotRun) else 4))
    weights = ", " + slots.replace("s", "w") if kernel.weighted else ""
    return slots, weights


def _slot_run(kernel: SlotRun) -> str:
    slots, weights = _slots(kernel)
    terms = [f"t{k} = {'w%d * ' % k if kernel.weighted else ''}row_sum[s{k} + u]" for k in range(kernel.slots)]
    total = association([f"t{k}" for k in range(kernel.slots)])
    what = f"{kernel.slots} slot{'s' if kernel.slots > 1 else ''}{', weighted' if kernel.weighted else ''}"
    if kernel.into == "store":
        head = _njit(kernel.name, f"dst, b, start, n, row_sum, {slots}{weights}, zero",
                     f"A pixel of {what}, stored from start.")
        return "\n".join([*head, "    for u in range(start, n):", *(f"        {term}" for term in terms),
                          f"        _store(dst, b + u, zero + {total})"])
    head = _njit(kernel.name, f"vector, n, row_sum, {slots}{weights}", f"{what.capitalize()}, added to a pixel.")
    return "\n".join([*head, "    for u in range(n):", *(f"        {term}" for term in terms),
                      f"        vector[u] += {total}"])


def _slots4_vectors(kernel: Slots4Vectors) -> str:
    slots, weights = _slots(kernel)
    vector = Slots4Vector(kernel.weighted).name
    head = _njit(kernel.name, f"dst, b, n, row_sum, {slots}{weights}, zero",
                 f"The whole vectors of a four-slot pixel{', weighted' if kernel.weighted else ''}, "
                 f"with {_PUT_WORDS[kernel.put]}; returns where they end.")
    lines = [*head, "    lanes = np.uint64(simd.lanes(row_sum))", "    z = simd.splat(row_sum, zero)"]
    if kernel.weighted:
        lines += ["    v0, v1 = simd.splat(row_sum, w0), simd.splat(row_sum, w1)",
                  "    v2, v3 = simd.splat(row_sum, w2), simd.splat(row_sum, w3)"]
    lines += ["    u = np.uint64(0)", "    while u + lanes <= n:",
              f"        value = {vector}(row_sum, u, {slots}{', v0, v1, v2, v3' if kernel.weighted else ''}, z)",
              f"        {_PUTS[kernel.put]}(dst, b + u, value)", "        u += lanes", "    return u"]
    return "\n".join(lines)


def _half_span(kernel: HalfSpan) -> str:
    vectors = kernel.vectors
    head = _njit(kernel.name, "cc, c0, src, row, units, u, lo, hi, base, span_weight",
                 f"The columns-first span for {vectors} vector{'s' if vectors > 1 else ''} of channels from u.")

    def at(base: str, v: int) -> str:
        return base if v == 0 else f"{base} + l{v}"

    def loads(k: int, indent: str) -> list[str]:
        return [f"{indent}p{k}_{v} = simd.load_half(src, {at('b', v)})" for v in range(vectors)]

    lines = [*head, "    n = np.uint64(units)"]
    if vectors > 1:
        lines.append("    l1 = np.uint64(simd.lanes(cc))")
        lines += [f"    l{v} = {v} * l1" for v in range(2, vectors)]
    lines += ["    b = np.uint64(row + (2 * lo + base) * units + u)", *loads(0, "    "), "    b += n",
              *loads(1, "    "), "    for j in range(lo, hi):"]
    lines += [f"        w{k} = simd.splat(cc, span_weight[{k}, j])" for k in range(4)]
    lines += ["        b = np.uint64(row + (2 * j + base + 2) * units + u)", *loads(2, "        "), "        b += n",
              *loads(3, "        "), "        o = np.uint64(c0 + j * units + u)"]
    terms = Terms4Vector().name
    lines += [f"        simd.store(cc, {at('o', v)}, {terms}(p0_{v}, p1_{v}, p2_{v}, p3_{v}, w0, w1, w2, w3))"
              for v in range(vectors)]
    lines += [f"        p0_{v}, p1_{v} = p2_{v}, p3_{v}" for v in range(vectors)]
    return "\n".join(lines)


def _function(kernel) -> str:
    if isinstance(kernel, SlotRun):
        return _slot_run(kernel)
    if isinstance(kernel, Slots4Vectors):
        return _slots4_vectors(kernel)
    return _half_span(kernel)


def generate() -> dict[Path, str]:
    """The text of the generated module."""
    header = '''"""GENERATED by ``python -m gradops._fast.resample.column_template``: do not edit.

The column microkernels of the resample kernels (step 2 for NHWC pixels, the columns-first
spans); the template's docstring says what each computes and in which order, ``selection.py``
which of them a call uses.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import simd
from .codecs import _store
from .row_sum_microkernels import slots4_plain_vector, slots4_weighted_vector, terms4_weighted_vector'''
    return {GENERATED: header + "".join(_function(kernel) for kernel in FAMILY) + "\n"}


if __name__ == "__main__":
    for path, text in generate().items():
        path.write_text(text)
        print(f"wrote {path}")
