"""The cache sizes the fast kernels' plans take from the machine (``_fast/target.data_cache_bytes``,
``last_level_cache_bytes``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradops._fast import target


def _cache(folder: Path, name: str, level: int, kind: str, size: str, shared: str | None = None) -> None:
    index = folder / name
    index.mkdir()
    (index / "level").write_text(f"{level}\n")
    (index / "type").write_text(f"{kind}\n")
    (index / "size").write_text(f"{size}\n")
    if shared is not None:
        (index / "shared_cpu_list").write_text(f"{shared}\n")


@pytest.fixture
def caches(tmp_path, monkeypatch):
    monkeypatch.setattr(target, "_CACHES", tmp_path)
    target._reported_caches.cache_clear()
    yield tmp_path
    target._reported_caches.cache_clear()


def test_sizes_come_from_the_data_and_unified_caches(caches):
    _cache(caches, "index0", 1, "Instruction", "64K")
    _cache(caches, "index1", 1, "Data", "48K")
    _cache(caches, "index2", 2, "Unified", "2048K")
    assert target.data_cache_bytes(1) == 48 << 10
    assert target.data_cache_bytes(2) == 2 << 20


def test_typical_sizes_where_the_system_does_not_say(caches):
    assert target.data_cache_bytes(1) == 32 << 10
    _cache(caches, "index0", 2, "Unified", "garbled")
    assert target.data_cache_bytes(2) == 512 << 10


def test_the_last_level_is_the_largest_level_reported(caches):
    """An x86 core's L3, shared (the streaming and prefetch thresholds scale with it); an L2 where
    it is the last level (many ARM cores); the 32 MiB the thresholds were measured on where the
    system reports no cache beyond L1."""
    _cache(caches, "index0", 1, "Data", "32K")
    assert target.last_level_cache_bytes() == 32 << 20
    target._reported_caches.cache_clear()
    _cache(caches, "index1", 2, "Unified", "1024K")
    assert target.last_level_cache_bytes() == 1 << 20
    target._reported_caches.cache_clear()
    _cache(caches, "index2", 3, "Unified", "96M")
    assert target.last_level_cache_bytes() == 96 << 20 and target.data_cache_bytes(2) == 1 << 20


def test_a_shared_last_level_counts_at_most_32_mib_per_cpu_sharing_it(caches):
    """A 2-CPU VM on an Intel Xeon reports the socket's 480 MiB L3 beside its 2 CPUs: 64 MiB of it
    count. The AMD VMs' 32 MiB for 2 CPUs, and a bare-metal server's L3 beside its many CPUs,
    count whole."""
    _cache(caches, "index0", 2, "Unified", "2048K", shared="0")
    _cache(caches, "index1", 3, "Unified", "491520K", shared="0-1")
    assert target.last_level_cache_bytes() == 64 << 20
    target._reported_caches.cache_clear()
    (caches / "index1" / "size").write_text("32768K\n")
    assert target.last_level_cache_bytes() == 32 << 20
    target._reported_caches.cache_clear()
    (caches / "index1" / "size").write_text("105M\n")
    (caches / "index1" / "shared_cpu_list").write_text("0-55,112-167\n")
    assert target.last_level_cache_bytes() == 105 << 20
    target._reported_caches.cache_clear()
    (caches / "index1" / "shared_cpu_list").write_text("0,2\n")
    assert target.last_level_cache_bytes() == 64 << 20
