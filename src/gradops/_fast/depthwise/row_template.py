"""The one template of the depthwise filter-row microkernels (``row_microkernels_*.py``).

A filter row of dilation 1 reads consecutive channels-last positions, so neighbouring outputs
share their source vectors: a block of P positions and one vector of channels needs P + T - 1
source vectors for its P * T (position, tap) products (T taps per row), not P * T. Every
microkernel of this family computes, for one vector ``j`` of channels and P positions,

    acc[a + q*step + j] = +0 + sum over the taps t < count, in order, of
                          src[low[t // T] + j + (q + i_t)*pitch] * wt[taps[t] + j]

where ``i_t`` is tap t's place in its row (``t % T``) when the row is read ascending (the
forward), and ``T - 1 - t % T`` when it is read descending (the adjoint walks the filter row
backwards). Every sum adds its taps in that order from +0 (SPEC 5.4; the same products and
additions as ``taps._taps_blocked``), so every microkernel gives the same bits; they differ in
the width of their vectors (64 or 32 bytes: ``simd.zeros_of``, ``simd.load_as``), how many sums
stay in registers and when the source vectors are loaded:

* ``sources_first``: all P + T - 1 source vectors and T weights of a filter row are loaded,
  then each sum takes its T taps in turn (rows of 3 and 5 taps: 8 sums, up to 12 sources and 5
  weights stay in the 32 vector registers of AVX-512);
* ``tap_major``: each tap goes over all P sums before the next (rows of 7 taps: 14 sources would
  not fit beside the 8 sums), each source vector loaded just before the first tap that reads it.
* ``nine``: the three filter rows of a 3x3 filter at once (``count`` is 9), their 9 weight
  vectors loaded first and kept in registers beside the P sums, tap by tap over every sum (AVX2:
  9 weights and 6 sums of 32 bytes fill 15 of its 16 registers; each source vector is loaded
  once for the three taps of its row that read it, as the loads of one address are merged).

A microkernel whose P is marked ``or_one_less`` takes the count, P or P - 1, at run time: the
last sum is computed and stored only when it is P (one copy compiled for both counts).

Names encode the specialisation, as XNNPACK's do: ``row{T}_{P}[or{P-1}]_{W}b_{direction}``,
e.g. ``row5_8or7_32b_descending``; the generated modules are ``row_microkernels_ascending.py`` and
``row_microkernels_descending.py``. ``selection.py`` says which of them a call uses. Regenerate with
``python -m gradops._fast.depthwise.row_template`` after changing this file; a test checks
that the generated module is current.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# The generated modules, one per direction (a file of both would exceed 600 lines).
GENERATED = {ascending: Path(__file__).with_name(f"row_microkernels_{'ascending' if ascending else 'descending'}.py")
             for ascending in (True, False)}


@dataclass(frozen=True)
class RowMicrokernel:
    """One specialisation: ``taps`` per filter row, ``positions`` per block, vectors of
    ``vector_bytes``, read ``ascending`` (or descending), scheduled ``sources_first`` or
    ``tap_major``; ``or_one_less``: the count of positions is P or P - 1, at run time."""

    taps: int
    positions: int
    vector_bytes: int
    ascending: bool
    schedule: str
    or_one_less: bool = False

    @property
    def stem(self) -> str:
        """The name without the direction: what the selection table names (``rows3x3_...``: the
        ``nine`` schedule, three rows of 3 taps at once)."""
        count = f"{self.positions}or{self.positions - 1}" if self.or_one_less else f"{self.positions}"
        rows = "rows3x3" if self.schedule == "nine" else f"row{self.taps}"
        return f"{rows}_{count}_{self.vector_bytes}b"

    @property
    def name(self) -> str:
        return f"{self.stem}_{'ascending' if self.ascending else 'descending'}"

    def source(self, q: int, i: int) -> int:
        """The source vector that tap ``i`` of the row reads for position ``q`` of the block."""
        return q + (i if self.ascending else self.taps - 1 - i)


# The family: what the selection table (``selection.ROW_KERNELS``) chooses from, per CPU tier,
# each in the directions it is selected for (the forward reads filter rows ascending, the adjoint
# descending).
_BOTH, _FORWARD, _ADJOINT = (True, False), (True,), (False,)
FAMILY = tuple(
    RowMicrokernel(taps, positions, vector_bytes, ascending, schedule, or_one_less)
    for taps, positions, vector_bytes, schedule, or_one_less, directions in (
        (3, 8, 64, "sources_first", False, _BOTH),
        (3, 7, 64, "sources_first", False, _BOTH),
        (3, 4, 64, "sources_first", False, _BOTH),
        (5, 8, 64, "sources_first", True, _BOTH),
        (7, 8, 64, "tap_major", False, _BOTH),
        (5, 8, 32, "tap_major", True, _FORWARD),
        (7, 8, 32, "tap_major", False, _FORWARD),
        (5, 7, 32, "tap_major", False, _ADJOINT),
        (7, 7, 32, "tap_major", False, _ADJOINT),
        (3, 6, 32, "nine", False, _BOTH),
    )
    for ascending in directions
)


def offset_expression(name: str, multiple: int, unit: str = "") -> str:
    """``name + multiple * unit`` (``name + multiple`` without a unit), as a person would write it."""
    if multiple == 0:
        return name
    if not unit:
        return f"{name} + {multiple}"
    return f"{name} + {unit}" if multiple == 1 else f"{name} + {multiple} * {unit}"


def _load(v: int) -> str:
    """Source vector ``v`` (of the width of the sums, ``b0``)."""
    return f"simd.load_as(b0, src, {offset_expression('p', v, 'pitch')})"


def _weight(i: int) -> str:
    return f"simd.load_as(b0, wt, taps[{offset_expression('t', i)}] + j)"


def _source_loads(kernel: RowMicrokernel, sources: list[int]) -> list[str]:
    """Loads of ``sources``; with a count of P - 1, the source read by the last position alone
    (P + T - 2, in either direction) is not read then, and stands in for itself with another."""
    lines = []
    for v in sources:
        load = _load(v)
        if kernel.or_one_less and v == kernel.positions + kernel.taps - 2:
            load = f"{load} if positions == {kernel.positions} else v{v - 1}"
        lines.append(f"v{v} = {load}")
    return lines


def _taps_of(kernel: RowMicrokernel, q: int, weight: str) -> list[str]:
    """Position ``q``'s taps of one filter row, in order: ``b = b + v*w`` per tap."""
    return [f"b{q} = simd.muladd(b{q}, v{kernel.source(q, i)}, {weight}{i})" for i in range(kernel.taps)]


def _sources_first(kernel: RowMicrokernel) -> list[str]:
    last = kernel.positions - 1
    lines = _source_loads(kernel, list(range(kernel.positions + kernel.taps - 1)))
    lines += [f"w{i} = {_weight(i)}" for i in range(kernel.taps)]
    for q in range(kernel.positions):
        if kernel.or_one_less and q == last:
            lines += [f"if positions == {kernel.positions}:", *(f"    {line}" for line in _taps_of(kernel, q, "w"))]
        else:
            lines += _taps_of(kernel, q, "w")
    return lines


def _tap_major(kernel: RowMicrokernel) -> list[str]:
    """With a count of P - 1 the last sum is computed all the same (from a stand-in source) and
    not stored: a test per tap would split the block."""
    lines, loaded = [], set()
    for i in range(kernel.taps):
        needed = sorted({kernel.source(q, i) for q in range(kernel.positions)} - loaded)
        lines += _source_loads(kernel, needed)
        loaded.update(needed)
        lines.append(f"w = {_weight(i)}")
        lines += [f"b{q} = simd.muladd(b{q}, v{kernel.source(q, i)}, w)" for q in range(kernel.positions)]
    return lines


def _nine(kernel: RowMicrokernel) -> list[str]:
    """The 9 weights first, then filter row r's taps in order, each over every sum (the loop over
    ``count`` unrolled: row r reads from ``low[r]``)."""
    lines = [f"w{t} = simd.load_as(b0, wt, taps[{t}] + j)" for t in range(9)]
    for r in range(3):
        lines.append(f"p = low[{r}] + j")
        for i in range(kernel.taps):
            lines += [f"b{q} = simd.muladd(b{q}, {_load(kernel.source(q, i))}, w{3 * r + i})"
                      for q in range(kernel.positions)]
    return lines


def _function(kernel: RowMicrokernel) -> str:
    t, p = kernel.taps, kernel.positions
    count = f"{p} (or {p - 1}: ``positions``, at run time)" if kernel.or_one_less else f"{p}"
    reads = "position + i" if kernel.ascending else f"position + {t - 1} - i"
    schedule = {"sources_first": "sources first: each sum takes its taps in turn",
                "tap_major": "tap by tap over every sum, each source loaded before its first tap",
                "nine": "the 9 taps of 3 rows (count 9), weights in registers, tap by tap"}[kernel.schedule]
    body = {"sources_first": _sources_first, "tap_major": _tap_major, "nine": _nine}[kernel.schedule](kernel)
    stores = []
    for q in range(p):
        store = f"_put(acc, {offset_expression('a + j', q, 'step')}, b{q}, stream)"
        stores += [f"if positions == {p}:", f"    {store}"] if kernel.or_one_less and q == p - 1 else [store]
    zeros = " = ".join(f"b{q}" for q in range(1, p))
    return "\n".join([
        "",
        "",
        "",
        '@njit(inline="always")',
        f"def {kernel.name}(acc, a, step, pitch, src, low, wt, taps, j, count, stream, positions):",
        f'    """{count} positions x a {kernel.vector_bytes}-byte vector at j, filter rows of {t} taps;',
        f'    tap i reads {reads}; {schedule}."""',
        f"    b0 = simd.zeros_of(acc, {kernel.vector_bytes})",
        f"    {zeros} = b0",
        *((f"    {line}" for line in body) if kernel.schedule == "nine" else (
            f"    for t in range(0, count, {t}):",
            f"        p = low[t // {t}] + j",
            *(f"        {line}" for line in body))),
        *(f"    {line}" for line in stores),
    ])


def generate() -> dict[Path, str]:
    """The text of each generated module."""
    return {path: _module(ascending) for ascending, path in GENERATED.items()}


def _module(ascending: bool) -> str:
    direction = "ascending" if ascending else "descending"
    header = f'''"""GENERATED by ``python -m gradops._fast.depthwise.row_template``: do not edit.

The filter-row microkernels of the depthwise tap paths that read filter rows {direction}; the
template's docstring says what each computes and in which order, ``selection.py`` which of them a
call uses. Each takes ``(acc, a, step, pitch, src, low, wt, taps, j, count, stream, positions)``:
sums at ``acc[a + j + q*step]``, source positions ``pitch`` apart from ``low[r] + j`` (row r of
taps), weights at ``wt[taps[t] + j]``, ``count`` taps in rows of T (the ``rows3x3`` kernels take
the 9 of three rows, whatever ``count`` says), non-temporal stores when ``stream``, and
``positions`` (read by the ``or`` kernels only).
"""

from __future__ import annotations

from numba import njit

from .. import simd
from .codecs import _put'''
    return header + "".join(_function(kernel) for kernel in FAMILY if kernel.ascending == ascending) + "\n"


if __name__ == "__main__":
    for path, text in generate().items():
        path.write_text(text)
        print(f"wrote {path}")
