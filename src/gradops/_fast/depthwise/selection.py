"""The selection tables of the depthwise channels-last microkernels, per CPU tier: which
generated filter-row microkernel (``row_template.py``) computes a block of a segment whose taps
come in whole filter rows, per filter row size (``ROW_KERNELS``), which computes the 9 taps of a
3x3 filter with their weights in registers (``NINE_ROWS``), and which tiles
(``tile_template.py``) compute a segment of any taps (``TILE_KERNELS``).

A row segment of ``n`` positions (``rows._taps_rows_for``) goes in blocks of P positions (8 or
7, per tier, size and direction: ``RowBlocks.positions``, ``row_blocks``), or of 7 when ``n`` is
a multiple of 7 and not of P (7x7 and 14x14 layers; ``seven``); a remainder is one more block of
P ending at ``n``. 3-tap rows take a remainder of exactly 4, and segments of 4 to 7 positions, in
a block of 4 (``four``). Sizes without a ``seven`` or ``four`` microkernel use the blocks of P
instead. The plan (``plan._tap_paths``) decides which sizes a call may meet; the kernel built for
it compiles only the microkernels those sizes select.

Tiers: ``wide``, targets with 32 vector registers of 64 bytes (AVX-512); ``narrow``, the others
(AVX2: 16 registers of 32 bytes).
"""

from __future__ import annotations

from dataclasses import dataclass

from numba.extending import register_jitable

from ..target import Target
from . import row_microkernels_ascending, row_microkernels_descending, tile_microkernels


@dataclass(frozen=True)
class RowBlocks:
    """Microkernel stems (``row_template.RowMicrokernel.stem``: the name without the direction)
    of one filter row size: blocks of ``positions`` positions (``main``), of 7 (None: none of its
    own), of 4 (None: none), all with vectors of ``vector_bytes``; ``forward``: the blocks of
    filter rows read ascending (the forward), where they differ from these (the adjoint's)."""

    vector_bytes: int
    positions: int
    main: str
    seven: str | None = None
    four: str | None = None
    forward: RowBlocks | None = None

    def read(self, ascending: bool) -> RowBlocks:
        """The blocks of these filter rows read ``ascending`` (the forward) or descending."""
        return self.forward if ascending and self.forward is not None else self

    def stems(self) -> tuple[tuple[str, int], ...]:
        """(stem, positions per block) of each microkernel these blocks name."""
        return tuple((stem, positions) for stem, positions in ((self.main, self.positions), (self.seven, 7),
                                                               (self.four, 4)) if stem is not None)


ROW_KERNELS = {
    "wide": {
        # Literal counts 7 and 8, each its own copy: 3-tap blocks are short, and a run-time
        # count would test it inside them.
        3: RowBlocks(64, 8, main="row3_8_64b", seven="row3_7_64b", four="row3_4_64b"),
        # One microkernel takes 7 or 8 at run time: two copies of the 5-tap blocks made a first
        # NHWC backprop-input call compile for 33.1 against 28.8 CPU s.
        5: RowBlocks(64, 8, main="row5_8or7_64b", seven="row5_8or7_64b"),
        7: RowBlocks(64, 8, main="row7_8_64b"),
    },
    # 16 registers of 32 bytes. 3-tap rows keep 64-byte vectors (two registers each): 32-byte
    # blocks, which do not spill, were no faster. 5- and 7-tap rows use 32-byte vectors, tap by tap
    # (with 64-byte vectors the 7-tap rows spilled and lost to tap by tap). The adjoint's go in
    # blocks of 7 positions: its blocks of 8 spilled sums to the stack (each multiply-then-add needs
    # a register for the product); the forward's blocks of 8 did not, and beat 7 on S2's F3
    # (docs/performance.md, "Depthwise").
    "narrow": {
        3: RowBlocks(64, 8, main="row3_8_64b", seven="row3_7_64b", four="row3_4_64b"),
        5: RowBlocks(32, 7, main="row5_7_32b",
                     forward=RowBlocks(32, 8, main="row5_8or7_32b", seven="row5_8or7_32b")),
        7: RowBlocks(32, 7, main="row7_7_32b", forward=RowBlocks(32, 8, main="row7_8_32b")),
    },
}


def row_blocks(target: Target, size: int, ascending: bool) -> RowBlocks:
    """The blocks of filter rows of ``size`` taps read ``ascending`` (the forward) or descending
    (the adjoint) on ``target``."""
    return ROW_KERNELS[tier(target)][size].read(ascending)


@register_jitable
def fits_rows(width_bytes, multiple_bytes, max_row_bytes):
    """Whether a row of ``width_bytes`` (its channels' sums) is a whole number of
    ``multiple_bytes`` and at most ``max_row_bytes``: the rule of ``NineTaps``, on plain ints, so
    that the plans (Python) and the compiled planes (``planes.py``) apply the same one."""
    return width_bytes % multiple_bytes == 0 and width_bytes <= max_row_bytes


@dataclass(frozen=True)
class NineTaps:
    """The 9 taps of a 3x3 filter with their weight vectors in registers: ``stem``, the generated
    microkernel (``row_template``'s ``nine`` schedule) that computes ``positions`` positions of
    one vector of channels (None: blocks of two positions x two 64-byte vectors, 18 weight
    vectors: ``rows._rows9_2x2`` for whole filter rows, ``rows._taps9_2x2`` for dilated taps);
    rows whose width in bytes is a multiple of ``multiple_bytes`` and at most ``max_row_bytes``
    take it (``fits_rows``)."""

    stem: str | None
    positions: int
    multiple_bytes: int
    max_row_bytes: int

    def fits(self, width_bytes: int) -> bool:
        return fits_rows(width_bytes, self.multiple_bytes, self.max_row_bytes)


# The 9 taps of a dilated 3x3 filter (not in filter rows), on every tier: wider rows than two
# pairs of 64-byte vectors were slower that way (docs/performance.md, "Depthwise").
NINE_BLOCKS = NineTaps(None, 2, 128, 256)

# The 9 taps of whole 3x3 filter rows (``rows._taps9_rows_for``), per tier.
NINE_ROWS = {
    "wide": NINE_BLOCKS,
    # 18 weight vectors of 64 bytes are 36 AVX2 registers: the 2x2 blocks spilled them and their
    # sources to the stack on every position pair (perf on a Zen 3: most of B7's kernel time).
    # 9 weights and 6 sums of 32 bytes fit 16 registers; a block's vectors of channels go in turn,
    # so its source lines serve every channel while they are in L1.
    "narrow": NineTaps("rows3x3_6_32b", 6, 32, 256),
}


@dataclass(frozen=True)
class Tiles:
    """Tile microkernel names (``tile_template.TileMicrokernel.name``) of ``taps._taps_blocked``:
    4 positions x 2 vectors, 4 x 1 (the channels past the pairs), 1 x 4 and 1 x 1 (the last
    positions), all with vectors of ``vector_bytes``."""

    vector_bytes: int
    four_by_two: str
    four_by_one: str
    one_by_four: str
    one_by_one: str


TILE_KERNELS = {
    "wide": Tiles(64, "taps_4x2_64b", "taps_4x1_64b", "taps_1x4_64b", "taps_1x1_64b"),
    # 32-byte vectors: a 4x2 tile's 8 sums and 2 weights fit AVX2's 16 registers (in 64-byte
    # vectors they would take them all). Measured the same as 64-byte tiles at the AVX2 tier on an
    # AVX-512 host (docs/performance.md); not yet on a Zen 3.
    "narrow": Tiles(32, "taps_4x2_32b", "taps_4x1_32b", "taps_1x4_32b", "taps_1x1_32b"),
}

# The backprop filter's vectors of channels (``lanes._lane_rows``): one register. A pass keeps 6
# accumulators; in 64-byte vectors (two AVX2 registers each) they would take 12 of the 16.
FILTER_VECTOR_BYTES = {"wide": 64, "narrow": 32}

# The backprop filter's narrow rows (``narrow_lanes._row_pass``): the most taps of a filter row per
# pass, two lanes each in registers beside a pair of dy vectors and the x vectors (AVX-512: 14
# lanes of 32 registers; AVX2: 8 of 16). AVX2 passes of 4 beat passes of 3, which fill a 7-tap row
# up to 9 (docs/performance.md, "Depthwise").
FILTER_PASS_TAPS = {"wide": 7, "narrow": 4}


def tier(target: Target) -> str:
    """The table's tier of the code-generation target."""
    return "wide" if target.avx512 else "narrow"


def row_sizes(target: Target) -> tuple[int, ...]:
    """The filter row sizes that take these microkernels on ``target``."""
    return tuple(ROW_KERNELS[tier(target)])


def tile_microkernel(name: str):
    """The generated tile microkernel ``name``."""
    return getattr(tile_microkernels, name)


def row_microkernel(stem: str, ascending: bool):
    """The generated microkernel ``stem`` for filter rows read ascending (the forward) or
    descending (the adjoint)."""
    module = row_microkernels_ascending if ascending else row_microkernels_descending
    return getattr(module, f"{stem}_{'ascending' if ascending else 'descending'}")
