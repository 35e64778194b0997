"""The selected filter-row microkernels keep their sums in registers on the tier they are selected
for (``selection.ROW_KERNELS``, ``selection.NINE_ROWS``): each is compiled, not run, for a CPU of
each tier (a Zen 3 for AVX2, a Sapphire Rapids for AVX-512, as ``gradops bench --isa`` names
them), inside a loop over vectors of channels, and the loop's assembly may reload no more than
``_HARNESS_RELOADS`` vectors from the stack. On AVX2 the adjoint's 8-position blocks of 5 and 7
taps reloaded 14-18 (their sums spilled, and ran at 0.55-0.65 of the 7-position blocks' rate);
the blocks chosen reload 1-3. A register-starved choice in the table fails here on any host."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gradops.bench.isa import tier_env

# The loop around a microkernel reloads one vector from the stack by itself (numba 0.68, LLVM 22);
# a spilling microkernel reloads one or more per sum and tap.
_HARNESS_RELOADS = 3

# Selected although they spill: AVX2 keeps 3-tap rows in 64-byte vectors (two registers each),
# since 32-byte blocks of 8 and 7 positions, which do not spill, were no faster on S2's D3, B3, B2
# and F1 (docs/performance.md, "Depthwise").
_KNOWN_SPILLS = {"narrow": ("row3_8_64b", "row3_7_64b", "row3_4_64b")}

# The AVX2 tier as ``gradops bench --isa avx2`` makes it; AVX-512 as a Sapphire Rapids's own features.
_TIERS = {
    "narrow": tier_env("avx2"),
    "wide": {"NUMBA_CPU_NAME": "sapphirerapids", "NUMBA_CPU_FEATURES": ""},
}

_PROBE = r"""
import json, re
from numba import njit, types
from gradops._fast.depthwise import selection
from gradops._fast.target import codegen_target

target = codegen_target()
tier = selection.tier(target)
chosen = []
for size in selection.row_sizes(target):
    for ascending in (True, False):
        blocks = selection.row_blocks(target, size, ascending)
        chosen += [(stem, ascending, size * size, positions, blocks.vector_bytes) for stem, positions in blocks.stems()]
nine = selection.NINE_ROWS[tier]
if nine.stem is not None:
    chosen += [(nine.stem, ascending, 9, nine.positions, nine.multiple_bytes) for ascending in (True, False)]

reloads = {}
for stem, ascending, count, positions, vector_bytes in sorted(set(chosen)):
    kernel = selection.row_microkernel(stem, ascending)

    def make(kernel, count, positions, lanes):
        def loop(acc, src, low, wt, taps, width, pitch):
            for j in range(0, width, lanes):
                kernel(acc, 0, width, pitch, src, low, wt, taps, j, count, False, positions)
        return njit(loop)

    loop = make(kernel, count, positions, vector_bytes // 4)
    f32, i64 = types.float32[::1], types.int64[::1]
    loop.compile((f32, f32, i64, f32, i64, types.int64, types.int64))
    assembly = list(loop.inspect_asm().values())[0]
    name = kernel.__name__
    reloads[name] = len(re.findall(r"v\w+\s+-?\d*\(%rsp\), %[xyz]mm", assembly))
print(json.dumps({"tier": tier, "reloads": reloads}))
"""


@pytest.mark.parametrize("tier", sorted(_TIERS))
def test_selected_row_microkernels_keep_their_sums_in_registers(tier, tmp_path):
    env = dict(os.environ, **_TIERS[tier], NUMBA_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["tier"] == tier
    assert report["reloads"], "no microkernel selected"
    spilling = {name: count for name, count in report["reloads"].items()
                if count > _HARNESS_RELOADS and not name.startswith(_KNOWN_SPILLS.get(tier, ()))}
    assert not spilling, f"{tier}: vectors reloaded from the stack: {spilling}"
