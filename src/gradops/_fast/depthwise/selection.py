"""The selection table of the depthwise filter-row microkernels: which generated microkernel
(``row_template.py``) computes a block of a segment whose taps come in whole filter rows, per
filter row size, block and CPU tier.

A row segment of ``n`` positions (``rows._taps_rows_for``) goes in blocks of 8 positions, or of 7
when ``n`` is a multiple of 7 and not of 8 (7x7 and 14x14 layers; ``seven``); a remainder is one
more block of 8 ending at ``n``, except that 3-tap rows take a remainder of 4 to 7 in a block of 4
(``four``). Sizes without a ``seven`` or ``four`` kernel use the blocks of 8 instead. The plan
(``plan._tap_paths``) decides which sizes a call may meet; the kernel built for it compiles only
the microkernels those sizes select.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..target import Target
from . import row_microkernels_ascending, row_microkernels_descending


@dataclass(frozen=True)
class RowBlocks:
    """Microkernel name stems (``row_template.RowMicrokernel.name`` without the direction) of one
    filter row size: blocks of 8 positions, of 7 (None: none of its own), of 4 (None: none)."""

    eight: str
    seven: str | None = None
    four: str | None = None


ROW_KERNELS = {
    # Literal counts 7 and 8, each its own copy: 3-tap blocks are short, and a run-time count
    # would test it inside them.
    3: RowBlocks(eight="row3_8", seven="row3_7", four="row3_4"),
    # One kernel takes 7 or 8 at run time: two copies of the 5-tap blocks made a first NHWC
    # backprop-input call compile for 33.1 against 28.8 CPU s.
    5: RowBlocks(eight="row5_8or7", seven="row5_8or7"),
    7: RowBlocks(eight="row7_8"),
}


def row_sizes(target: Target) -> tuple[int, ...]:
    """The filter row sizes that take these microkernels on ``target``. Rows of 7 taps only with
    32 vector registers (AVX-512), which hold ``row7_8``'s 8 sums, a weight and up to 14 source
    vectors; with AVX2's 16 they spill, and tap by tap (``taps._taps_blocked``) was faster."""
    return (3, 5, 7) if target.avx512 else (3, 5)


def row_microkernel(stem: str, ascending: bool):
    """The generated microkernel ``stem`` for filter rows read ascending (the forward) or
    descending (the adjoint)."""
    module = row_microkernels_ascending if ascending else row_microkernels_descending
    return getattr(module, f"{stem}_{'ascending' if ascending else 'descending'}")
