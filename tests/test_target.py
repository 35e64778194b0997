"""The fast kernels' code-generation target: what LLVM may use, for the host or a named CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba")

from gradops._fast.target import codegen_target  # noqa: E402


def _cpuinfo_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists() or bool(os.environ.get("NUMBA_CPU_NAME")),
                    reason="the host's flags are read from Linux's /proc/cpuinfo")
def test_host_target_has_the_host_cpus_features():
    flags = _cpuinfo_flags()
    if "avx2" not in flags:
        pytest.skip("not an x86 CPU with AVX2")
    target = codegen_target()
    assert target.avx512 == ("avx512f" in flags) and target.half == ("f16c" in flags)


@pytest.mark.parametrize("cpu, half, avx512", [("znver3", True, False), ("znver4", True, True),
                                               ("haswell", True, False), ("x86-64-v3", True, False),
                                               ("generic", False, False)])
def test_named_cpu_target_has_that_cpus_features(cpu, half, avx512):
    """NUMBA_CPU_NAME with empty NUMBA_CPU_FEATURES means that CPU's own features (bench --isa avx2
    generates Zen 3 or x86-64-v3 code this way): F16C on a Zen 3, AVX-512 only from Zen 4, neither for generic
    x86-64. The answers come from LLVM, not from a table."""
    if "avx2" not in _cpuinfo_flags():
        pytest.skip("not an x86 CPU with AVX2")
    probe = "from gradops._fast.target import codegen_target as t; print(t().half, t().avx512)"
    env = dict(os.environ, NUMBA_CPU_NAME=cpu, NUMBA_CPU_FEATURES="")
    printed = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert printed.stdout.split() == [str(half), str(avx512)]


_SCALAR_STREAMING_STORE = """
define void @probe(double* %p, double %v) {
  store double %v, double* %p, align 8, !nontemporal !0
  ret void
}
!0 = !{i32 1}
"""


def test_avx2_tier_cpu_is_the_hosts_vendors():
    """The AVX2 tier's code is generated for a Zen 3 only on an AMD host: a Zen 3 has SSE4A, and
    LLVM stores a non-temporal scalar with its ``movntsd``, which an Intel CPU faults on."""
    from gradops._fast.target import _assembly
    from gradops.bench.isa import avx2_codegen_cpu

    assert avx2_codegen_cpu("AuthenticAMD") == "znver3"
    assert avx2_codegen_cpu("GenuineIntel") == avx2_codegen_cpu("") == "x86-64-v3"
    if "avx2" not in _cpuinfo_flags():
        pytest.skip("not an x86 CPU with AVX2")
    assert "movntsd" in _assembly(_SCALAR_STREAMING_STORE, "znver3", "")
    if "sse4a" not in _cpuinfo_flags():
        assert "movntsd" not in _assembly(_SCALAR_STREAMING_STORE, avx2_codegen_cpu(), "")
