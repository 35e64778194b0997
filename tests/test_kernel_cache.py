"""The fast kernels' disk cache is invalidated by a change to any source of the fast package, not
only the kernel's own file (gradops/_fast/__init__.py, "The disk cache's source stamp")."""

import pytest

pytest.importorskip("numba")

from numba.core import caching  # noqa: E402

from gradops import _fast  # noqa: E402
from gradops._fast import relu  # noqa: E402
from gradops._fast.depthwise import kernels  # noqa: E402


def test_a_kernel_is_stamped_with_the_whole_package():
    """Kernels of two different files share one stamp, where numba's own stamps (one per file) differ."""
    kernels_of_two_files = (relu._select_alone, kernels._planar_blocks_kernel_for(False))
    stamps = {kernel._cache._impl._locator.get_source_stamp() for kernel in kernels_of_two_files}
    own_file_stamps = {caching.InTreeCacheLocator(kernel.py_func, kernel.py_func.__code__.co_filename)
                       .get_source_stamp() for kernel in kernels_of_two_files}
    assert len(stamps) == 1 and len(own_file_stamps) == 2
    assert stamps.isdisjoint(own_file_stamps)


def test_the_stamp_changes_with_any_file_of_the_package(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "kernels.py").write_text("def kernel(): pass\n")
    helper = tmp_path / "sub" / "rows.py"
    helper.write_text("ROWS = 8\n")
    monkeypatch.setattr(_fast, "_PACKAGE", tmp_path)
    digest = _fast._package_digest.__wrapped__
    before = digest()
    assert digest() == before
    helper.write_text("ROWS = 4\n")  # the kernel's own file is unchanged
    edited = digest()
    assert edited != before
    helper.rename(tmp_path / "rows.py")  # the same bytes under another path
    assert digest() != edited


def test_files_outside_the_package_keep_numbas_locators(tmp_path):
    outside = tmp_path / "user_module.py"
    outside.write_text("def f(): pass\n")
    locator_classes = [c for c in caching.CacheImpl._locator_classes if issubclass(c, _fast._PackageStamp)]
    assert len(locator_classes) == 3
    assert all(c.from_function(lambda: None, str(outside)) is None for c in locator_classes)


def test_a_package_reached_through_a_symbolic_link_keeps_the_package_stamp(tmp_path):
    """A checkout reached through a link (``_PACKAGE`` is resolved, ``py_file`` need not be) is
    still stamped with the package's digest, not numba's per-file stamp, which two such processes
    would overwrite in each other's cache index."""
    link = tmp_path / "linked_fast"
    link.symlink_to(_fast._PACKAGE, target_is_directory=True)
    linked_file = str(link / "relu.py")
    locator_classes = [c for c in caching.CacheImpl._locator_classes if issubclass(c, _fast._PackageStamp)]
    locators = [c.from_function(relu._select_alone.py_func, linked_file) for c in locator_classes]
    assert any(locator is not None for locator in locators)
    assert all(locator.get_source_stamp() == _fast._package_digest() for locator in locators if locator is not None)
