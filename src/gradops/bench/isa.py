"""CPU tiers a benchmark can run on: the host's own, or AVX2 on an AVX-512 host.

Users run gradops on AVX2 machines (Zen 3, older Xeons) and on AVX-512 ones (Zen 4, recent Xeons).
On an AVX-512 host the AVX2 tier is reproduced for every contender at once: numba generates code
for an AVX2 CPU of the host's vendor (``avx2_codegen_cpu``, with that CPU's own features, so no
AVX-512), PyTorch picks its AVX2 kernels, oneDNN and XLA cap their instruction sets. The variables
are read when each library loads, so they are set in the environment of the worker processes.
"""

from __future__ import annotations

import platform

from .._cpuinfo import cpu_flags, cpu_vendor
from ..errors import GradopsError

TIERS = ("native", "avx2", "avx512")

_TIER_ENV: dict[str, dict[str, str]] = {
    "avx2": {
        "NUMBA_CPU_FEATURES": "",  # empty: the named CPU's features, not the host's
        "ATEN_CPU_CAPABILITY": "avx2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "XLA_FLAGS": "--xla_cpu_max_isa=AVX2",
    },
    "avx512": {},
}


def avx2_codegen_cpu(vendor: str | None = None) -> str:
    """The CPU that LLVM generates the AVX2 tier's code for, on a host of ``vendor`` (Linux's
    ``vendor_id``; the host's by default). On an AMD host, a Zen 3: AMD's AVX2 core, with its own
    tuning. Elsewhere ``x86-64-v3``, the psABI level of AVX2 (AVX2, FMA, F16C, BMI2, MOVBE), which
    every AVX2 CPU runs: a Zen 3's features include AMD's SSE4A, whose ``movntsd`` LLVM emits for a
    scalar non-temporal store, an instruction an Intel CPU faults on."""
    vendor = cpu_vendor() if vendor is None else vendor
    return "znver3" if vendor == "AuthenticAMD" else "x86-64-v3"


def host_tier(flags: set[str] | None = None) -> str:
    """The widest vector tier of this CPU: ``avx512``, ``avx2``, ``sse`` (older x86) or the
    machine name elsewhere (``aarch64``: NEON)."""
    flags = cpu_flags() if flags is None else flags
    if "avx512f" in flags:
        return "avx512"
    if "avx2" in flags:
        return "avx2"
    machine = platform.machine().lower()
    return "sse" if machine in ("x86_64", "amd64") else machine


def resolve_tier(requested: str, flags: set[str] | None = None) -> str:
    """The tier a run will use; ``--isa`` names one the host cannot run: a GradopsError."""
    host = host_tier(flags)
    if requested == "native":
        return host
    if requested not in TIERS:
        raise GradopsError("--isa", f"expected one of {', '.join(TIERS)}, got {requested!r}")
    runnable = {"avx512": ("avx512",), "avx2": ("avx512", "avx2")}[requested]
    if host not in runnable:
        raise GradopsError("--isa", f"this CPU ({host}) cannot run the {requested} tier")
    return requested


def tier_env(tier: str) -> dict[str, str]:
    """Environment variables that make every contender's worker run ``tier``."""
    env = dict(_TIER_ENV.get(tier, {}))
    if tier == "avx2":
        env["NUMBA_CPU_NAME"] = avx2_codegen_cpu()
    return env
