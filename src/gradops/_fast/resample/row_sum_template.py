"""The one template of the resample row-sum microkernels (``row_sum_microkernels.py`` is its
output): step 1 of the package docstring, and the same sum of four rows as vectors.

Every member adds R = 1, 2 or 4 rows of terms, associated as the package docstring says (SPEC
3.4, 3.7):

    R = 4: (t0 + t1) + (t2 + t3)        R = 2: t0 + t1        R = 1: t0

where ``t_r = w_r * row_r`` when ``weighted`` and ``row_r`` otherwise (nearest: every weight is
1, and dropping the product leaves the same bits). Two shapes:

* ``add_rows{R}_{weighted|plain}``: ``acc[a + c] = (zero if first else acc[a + c]) + sum`` for
  ``c < n``, ``row_r = _load(src, b_r + c)`` (float32 or float16 bits, ``codecs.py``): the row
  sum of ``rows._sum_rows``. Writing the first group instead of clearing ``acc`` first saves a
  pass over ``acc``.
* ``slots4_{weighted|plain}_vector``: the vector ``zero + sum`` with ``row_r = row_sum[s_r + u:]``
  (R = 4): a four-slot NHWC pixel of step 2 (``writers._store_slots4``, ``columns_first``);
  ``terms4_weighted_vector``: the weighted sum of four vectors already loaded (the columns-first
  spans, which keep their sources in registers).

Names encode the specialisation; ``selection.py`` says which a call uses. Regenerate with
``python -m gradops._fast.resample.row_sum_template``; a test checks that the generated module
is current.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

GENERATED = Path(__file__).with_name("row_sum_microkernels.py")


def association(terms: list[str], add=lambda a, b: f"({a} + {b})") -> str:
    """``terms`` (1, 2 or 4 expressions) added in the documented association, two at a time by
    ``add`` (scalar ``+`` unless told; ``vector_association``: ``simd.add``)."""
    if len(terms) == 1:
        return terms[0]
    if len(terms) == 2:
        return add(*terms)
    return add(add(terms[0], terms[1]), add(terms[2], terms[3]))


def vector_association(terms: list[str]) -> str:
    """``association`` of vector expressions, through ``simd.add``."""
    return association(terms, lambda a, b: f"simd.add({a}, {b})")


def njit_header(name: str, parameters: str, doc: str) -> list[str]:
    """The lines that open a generated microkernel: two blank lines, the inlined ``njit``, the
    signature and the one-line docstring."""
    return ["", "", "", '@njit(inline="always")', f"def {name}({parameters}):", f'    """{doc}"""']


def kind(weighted: bool) -> str:
    return "weighted" if weighted else "plain"


@dataclass(frozen=True)
class AddRows:
    """``acc[a + c] = (zero if first else acc[a + c]) + sum of ``rows`` source rows``."""

    rows: int
    weighted: bool

    @property
    def name(self) -> str:
        return f"add_rows{self.rows}_{kind(self.weighted)}"

    @property
    def parameters(self) -> list[str]:
        return ([f"b{r}" for r in range(self.rows)] + ([f"w{r}" for r in range(self.rows)] if self.weighted else []))


@dataclass(frozen=True)
class Slots4Vector:
    """The vector ``zero + sum`` of four slots of the row sum."""

    weighted: bool

    @property
    def name(self) -> str:
        return f"slots4_{kind(self.weighted)}_vector"


@dataclass(frozen=True)
class Terms4Vector:
    """The weighted sum of four loaded vectors."""

    @property
    def name(self) -> str:
        return "terms4_weighted_vector"


# The family: what the selection table (``selection.ROW_SUMS``, ``selection.SLOT_SUMS``) chooses from.
FAMILY = (tuple(AddRows(rows, weighted) for rows in (4, 2, 1) for weighted in (True, False))
          + tuple(Slots4Vector(weighted) for weighted in (True, False)) + (Terms4Vector(),))


def _add_rows(kernel: AddRows) -> str:
    terms = [f"t{r} = {'w%d * ' % r if kernel.weighted else ''}_load(src, b{r} + c)" for r in range(kernel.rows)]
    what = f"{kernel.rows} row{'s' if kernel.rows > 1 else ''}{', weighted' if kernel.weighted else ''}"
    return "\n".join([
        *njit_header(kernel.name, f"acc, a, src, {', '.join(kernel.parameters)}, n, first, zero", f"Row sum of {what}."),
        "    for c in range(n):",
        *(f"        {term}" for term in terms),
        f"        acc[a + c] = (zero if first else acc[a + c]) + {association([f't{r}' for r in range(kernel.rows)])}",
    ])


def _slots4_vector(kernel: Slots4Vector) -> str:
    rows = [f"r{k}" for k in range(4)]
    if kernel.weighted:
        total = f"{Terms4Vector().name}({', '.join(rows)}, w0, w1, w2, w3)"
    else:
        total = vector_association(rows)
    return "\n".join([
        *njit_header(kernel.name, f"row_sum, u, s0, s1, s2, s3{', w0, w1, w2, w3' if kernel.weighted else ''}, zero",
                     f"The vector at u of four slots{', weighted' if kernel.weighted else ''}."),
        *(f"    r{k} = simd.load(row_sum, s{k} + u)" for k in range(4)),
        f"    return simd.add(zero, {total})",
    ])


def _terms4_vector(kernel: Terms4Vector) -> str:
    terms = [f"simd.mul(w{k}, p{k})" for k in range(4)]
    return "\n".join([
        *njit_header(kernel.name, "p0, p1, p2, p3, w0, w1, w2, w3", "The weighted sum of four vectors."),
        f"    return {vector_association(terms)}",
    ])


def _function(kernel) -> str:
    if isinstance(kernel, AddRows):
        return _add_rows(kernel)
    if isinstance(kernel, Slots4Vector):
        return _slots4_vector(kernel)
    return _terms4_vector(kernel)


def generate() -> dict[Path, str]:
    """The text of the generated module."""
    header = '''"""GENERATED by ``python -m gradops._fast.resample.row_sum_template``: do not edit.

The row-sum microkernels of the resample kernels; the template's docstring says what each
computes and in which order, ``selection.py`` which of them a call uses.
"""

from __future__ import annotations

from numba import njit

from .. import simd
from .codecs import _load'''
    return {GENERATED: header + "".join(_function(kernel) for kernel in FAMILY) + "\n"}


if __name__ == "__main__":
    for path, text in generate().items():
        path.write_text(text)
        print(f"wrote {path}")
