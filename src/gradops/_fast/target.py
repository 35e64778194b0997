"""The CPU the fast kernels are generated for, as LLVM sees it.

numba compiles for the host CPU, or for ``NUMBA_CPU_NAME`` with ``NUMBA_CPU_FEATURES`` when they
are set (``gradops bench --isa avx2`` sets an AVX2 CPU, ``bench.isa.avx2_codegen_cpu``, with that
CPU's own features on an AVX-512 host). What a kernel may use depends on that target, not on the
host: F16C half conversions, 512-bit registers, cheap masked stores. A CPU name alone does not
say which features it has, so each question is put to LLVM itself: a few instructions compiled
for the target, and the assembly read back. The answers are computed once per process, on the
first fast call.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from llvmlite import binding

from .._cpuinfo import cpu_flags, cpu_vendor

_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")

# Probes, each a function whose assembly shows whether the target has an instruction.
_HALF_PROBE = """
define void @probe(<8 x float>* %src, <8 x i16>* %dst) {
  %v = load <8 x float>, <8 x float>* %src
  %h = fptrunc <8 x float> %v to <8 x half>
  %b = bitcast <8 x half> %h to <8 x i16>
  store <8 x i16> %b, <8 x i16>* %dst
  ret void
}
"""
_WIDE_PROBE = """
define void @probe(<16 x float>* %a, <16 x float>* %b) {
  %x = load <16 x float>, <16 x float>* %a
  %y = load <16 x float>, <16 x float>* %b
  %s = fadd <16 x float> %x, %y
  store <16 x float> %s, <16 x float>* %a
  ret void
}
"""


@dataclass(frozen=True)
class Target:
    """What the generated code may rely on.

    ``half``: float16 <-> float32 in hardware (x86 F16C; every 64-bit ARM), not library calls,
    which numba's JIT does not link. ``avx512``: 512-bit registers, where a masked store is one
    cheap instruction; on AVX2 a masked store is slow (microcoded on AMD), so partial vectors
    are stored lane by lane there.
    """

    cpu: str
    features: str
    half: bool
    avx512: bool


def _assembly(ir_text: str, cpu: str, features: str) -> str:
    binding.initialize_native_target()
    binding.initialize_native_asmprinter()
    module = binding.parse_assembly(ir_text)
    module.triple = binding.get_process_triple()
    machine = binding.Target.from_triple(module.triple).create_target_machine(cpu=cpu, features=features, opt=2)
    return machine.emit_assembly(module)


@cache
def codegen_target() -> Target:
    from .numba_internals import codegen_cpu

    cpu_name, cpu_features = codegen_cpu()
    cpu = cpu_name or binding.get_host_cpu_name()
    if not _X86:
        arm64 = platform.machine().lower() in ("aarch64", "arm64")
        return Target(cpu, cpu_features or "", half=arm64, avx512=False)
    if cpu_name is None:  # the host, whose features LLVM lists (no probe: free at start-up)
        host = binding.get_host_cpu_features()
        return Target(cpu, host.flatten(), half=bool(host.get("f16c")), avx512=bool(host.get("avx512f")))
    features = cpu_features or ""
    half = "vcvtps2ph" in _assembly(_HALF_PROBE, cpu, features)
    avx512 = "zmm" in _assembly(_WIDE_PROBE, cpu, features)
    return Target(cpu, features, half=half, avx512=avx512)


@cache
def host_vendor() -> str:
    """The vendor of the CPU this process runs on, as Linux names it ("AuthenticAMD",
    "GenuineIntel"; "" where it does not say): facts of the host's memory system, which the
    code-generation target (``gradops bench --isa``) leaves unchanged, are keyed by it (and by
    :func:`host_avx512`)."""
    return cpu_vendor()


@cache
def host_avx512() -> bool:
    """Whether the CPU this process runs on has AVX-512 (``avx512f`` among its flags), whatever
    the code-generation target: with the vendor, it tells apart generations of one vendor's cores
    whose memory systems were measured to differ (AMD's Zen 4 has it, its Zen 3 does not)."""
    return "avx512f" in cpu_flags()


# Cache sizes where the system does not say: a typical x86 core of the last decade (per core), and
# the L3 of the 8-core complex of an AMD Zen 3 / Zen 4 (shared), where the thresholds were measured.
_TYPICAL_DATA_CACHE_BYTES = {1: 32 << 10, 2: 512 << 10}
_TYPICAL_LAST_LEVEL_CACHE_BYTES = 32 << 20
# The most of a shared last-level cache that the thresholds count per CPU sharing it. A server's
# L3 serves all its cores and, in a VM, other tenants' too, while Linux lists only the VM's CPUs
# beside it: a 2-CPU VM on an Intel Xeon reports 480 MiB, and its forward and backprop input ran
# 2x as long with thresholds of that size as with 64 MiB's, the best of 32, 64 and 128
# (docs/performance.md, "Decisions"). Under the cap: the 32 MiB L3 of the AMD VMs' 2 CPUs.
_LAST_LEVEL_BYTES_PER_SHARING_CPU = 32 << 20
_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")  # Linux: one indexN folder per cache of CPU 0


def _cpu_count(cpu_list: str) -> int:
    """How many CPUs a Linux CPU list names ("0-3,8,10-11": 7)."""
    count = 0
    for part in cpu_list.strip().split(","):
        first, _, last = part.partition("-")
        count += int(last or first) - int(first) + 1
    return count


@cache
def _reported_caches() -> dict[int, tuple[int, int]]:
    """The data (or unified) caches of CPU 0 as Linux reports them (``_CACHES``): level -> (bytes,
    CPUs sharing it; 0 where Linux does not list them); empty where it does not report sizes, or
    says something unreadable."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    caches: dict[int, tuple[int, int]] = {}
    for index in sorted(_CACHES.glob("index[0-9]*")):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            size = (index / "size").read_text().strip()
            nbytes = int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
            shared = index / "shared_cpu_list"
            sharing = _cpu_count(shared.read_text()) if shared.exists() else 0
            caches[int((index / "level").read_text())] = (nbytes, sharing)
        except (OSError, ValueError):
            return {}
    return caches


def data_cache_bytes(level: int) -> int:
    """The size of one core's level-``level`` data (or unified) cache, as Linux reports it for
    CPU 0; a typical size where it does not."""
    return _reported_caches().get(level, (0, 0))[0] or _TYPICAL_DATA_CACHE_BYTES[level]


def last_level_cache_bytes() -> int:
    """The size of the last cache before memory (the L3 of an x86 core, shared with the cores
    Linux lists beside it), as Linux reports it for CPU 0, counted up to
    ``_LAST_LEVEL_BYTES_PER_SHARING_CPU`` per CPU sharing it where it lists them; a typical size
    where it reports no cache beyond L1. What the thresholds of data "mostly in the caches" scale
    with."""
    caches = _reported_caches()
    level = max(caches, default=0)
    nbytes, sharing = caches.get(level, (0, 0))
    if level < 2 or nbytes <= 0:
        return _TYPICAL_LAST_LEVEL_CACHE_BYTES
    return min(nbytes, sharing * _LAST_LEVEL_BYTES_PER_SHARING_CPU) if sharing else nbytes
