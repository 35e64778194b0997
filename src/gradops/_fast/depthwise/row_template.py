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
how many sums stay in registers and when the source vectors are loaded:

* ``sources_first``: all P + T - 1 source vectors and T weights of a filter row are loaded,
  then each sum takes its T taps in turn (rows of 3 and 5 taps: 8 sums, up to 12 sources and 5
  weights stay in the 32 vector registers of AVX-512);
* ``tap_major``: each tap goes over all P sums before the next (rows of 7 taps: 14 sources would
  not fit beside the 8 sums), each source vector loaded just before the first tap that reads it.

A microkernel whose P is marked ``or_one_less`` takes the count, P or P - 1, at run time: the
last sum is computed and stored only when it is P (one copy compiled for both counts).

Names encode the specialisation, as XNNPACK's do: ``row{T}_{P}[or{P-1}]_{direction}``, e.g.
``row5_8or7_descending``; the generated modules are ``row_microkernels_ascending.py`` and
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
    """One specialisation: ``taps`` per filter row, ``positions`` per block, read ``ascending``
    (or descending), scheduled ``sources_first`` or ``tap_major``; ``or_one_less``: the count of
    positions is P or P - 1, at run time."""

    taps: int
    positions: int
    ascending: bool
    schedule: str
    or_one_less: bool = False

    @property
    def name(self) -> str:
        count = f"{self.positions}or{self.positions - 1}" if self.or_one_less else f"{self.positions}"
        return f"row{self.taps}_{count}_{'ascending' if self.ascending else 'descending'}"

    def source(self, q: int, i: int) -> int:
        """The source vector that tap ``i`` of the row reads for position ``q`` of the block."""
        return q + (i if self.ascending else self.taps - 1 - i)


# The family: what the selection table (``selection.ROW_KERNELS``) may choose from.
FAMILY = tuple(
    RowMicrokernel(taps, positions, ascending, schedule, or_one_less)
    for ascending in (True, False)
    for taps, positions, schedule, or_one_less in (
        (3, 8, "sources_first", False),
        (3, 7, "sources_first", False),
        (3, 4, "sources_first", False),
        (5, 8, "sources_first", True),
        (7, 8, "tap_major", False),
    )
)


def _offset(name: str, multiple: int, unit: str = "") -> str:
    """``name + multiple * unit`` (``name + multiple`` without a unit), as a person would write it."""
    if multiple == 0:
        return name
    if not unit:
        return f"{name} + {multiple}"
    return f"{name} + {unit}" if multiple == 1 else f"{name} + {multiple} * {unit}"


def _load(v: int) -> str:
    return f"simd.load(src, {_offset('p', v, 'pitch')})"


def _taps_of(kernel: RowMicrokernel, q: int, weight: str) -> list[str]:
    """Position ``q``'s taps of one filter row, in order: ``b = b + v*w`` per tap."""
    return [f"b{q} = simd.muladd(b{q}, v{kernel.source(q, i)}, {weight}{i})" for i in range(kernel.taps)]


def _sources_first(kernel: RowMicrokernel) -> list[str]:
    last = kernel.positions - 1
    sources = kernel.positions + kernel.taps - 1
    lines = []
    for v in range(sources):
        load = _load(v)
        if kernel.or_one_less and v == sources - 1:  # read by the last position only
            load = f"{load} if positions == {kernel.positions} else v{v - 1}"
        lines.append(f"v{v} = {load}")
    lines += [f"w{i} = simd.load(wt, taps[{_offset('t', i)}] + j)" for i in range(kernel.taps)]
    for q in range(kernel.positions):
        if kernel.or_one_less and q == last:
            lines += [f"if positions == {kernel.positions}:", *(f"    {line}" for line in _taps_of(kernel, q, "w"))]
        else:
            lines += _taps_of(kernel, q, "w")
    return lines


def _tap_major(kernel: RowMicrokernel) -> list[str]:
    lines, loaded = [], set()
    for i in range(kernel.taps):
        needed = sorted({kernel.source(q, i) for q in range(kernel.positions)} - loaded)
        lines += [f"v{v} = {_load(v)}" for v in needed]
        loaded.update(needed)
        lines.append(f"w = simd.load(wt, taps[{_offset('t', i)}] + j)")
        lines += [f"b{q} = simd.muladd(b{q}, v{kernel.source(q, i)}, w)" for q in range(kernel.positions)]
    return lines


def _function(kernel: RowMicrokernel) -> str:
    t, p = kernel.taps, kernel.positions
    count = f"{p} (or {p - 1}: ``positions``, at run time)" if kernel.or_one_less else f"{p}"
    reads = "position + i" if kernel.ascending else f"position + {t - 1} - i"
    schedule = ("sources first: each sum takes its taps in turn" if kernel.schedule == "sources_first"
                else "tap by tap over every sum, each source loaded before its first tap")
    body = _sources_first(kernel) if kernel.schedule == "sources_first" else _tap_major(kernel)
    stores = []
    for q in range(p):
        store = f"_put(acc, {_offset('a + j', q, 'step')}, b{q}, stream)"
        stores += [f"if positions == {p}:", f"    {store}"] if kernel.or_one_less and q == p - 1 else [store]
    zeros = " = ".join(f"b{q}" for q in range(1, p))
    return "\n".join([
        "",
        "",
        "",
        '@njit(inline="always")',
        f"def {kernel.name}(acc, a, step, pitch, src, low, wt, taps, j, count, stream, positions):",
        f'    """{count} positions x vector j, filter rows of {t} taps; tap i reads {reads};',
        f'    {schedule}."""',
        "    b0 = simd.zeros(acc)",
        f"    {zeros} = b0",
        f"    for t in range(0, count, {t}):",
        f"        p = low[t // {t}] + j",
        *(f"        {line}" for line in body),
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
taps), weights at ``wt[taps[t] + j]``, ``count`` taps in rows of T, non-temporal stores when
``stream``, and ``positions`` (read by the ``or`` kernels only).
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
