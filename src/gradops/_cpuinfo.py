"""The host CPU as Linux describes it in ``/proc/cpuinfo``: one reader for the fast backend's
host facts (``_fast.target.host_vendor``) and the benchmarks' tiers and reports (vendor, model
name, flags)."""

from __future__ import annotations

import platform


def cpuinfo_field(*names: str) -> str:
    """The value of the first ``/proc/cpuinfo`` line that starts with one of ``names`` (CPU 0's),
    or "" where there is no such line or file (not Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith(names):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def cpu_flags() -> set[str]:
    """The CPU's feature flags as Linux lists them (x86 ``flags``, ARM ``Features``); empty where
    there is no such line (not Linux)."""
    return set(cpuinfo_field("flags", "Features").split())


def cpu_vendor() -> str:
    """The CPU's vendor as Linux names it ("AuthenticAMD", "GenuineIntel"; "" where it does not
    say)."""
    return cpuinfo_field("vendor_id")


def cpu_model() -> str:
    """The CPU's model name, for reports: Linux's, else the platform's, else "unknown CPU"."""
    return cpuinfo_field("model name") or platform.processor() or "unknown CPU"
