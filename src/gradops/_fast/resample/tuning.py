"""The fast resample's tuning constants, in one place, each with why it has its value (how each
was measured: docs/performance.md). Plain numbers: the host-side plan (``plan.py``, ``taps.py``)
reads them per call, the kernel (``kernels.py``) as constants fixed when it compiles.
"""

from ..target import codegen_target, last_level_cache_bytes

# Elements of one row sum (columns x U): longer rows are split into column blocks, so that long
# 1-D/2-D cases still run in parallel and the row sum stays in L1/L2.
ROW_ELEMENTS = 8192

# Sources at least half the last-level cache (16 MiB of a 32 MiB L3) prefetch the next row sum's
# rows (``_store_units``, ``_combine4``); smaller ones are mostly in the caches, where the
# prefetches cost more than they hide. Fixed in the kernel when it compiles, for this host.
PREFETCH_SOURCE_BYTES = last_level_cache_bytes() // 2

# The shortest affine span (``taps._affine``) worth its own loops: one register of float32 lanes
# of the code-generation target (16 with AVX-512, 8 elsewhere); shorter runs of such columns read
# the slot table like the others. Both give the same bits (an affine span sums what the slots do).
AFFINE_MIN_COLUMNS = 16 if codegen_target().avx512 else 8
