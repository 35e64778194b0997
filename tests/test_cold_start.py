"""Cold start (issue 23): first calls say when they compile, ``gradops warmup`` fills the kernel
cache ahead, and a read-only install caches in the user cache directory. Each check runs new
processes with their own empty cache; ReLU's kernels compile in about a second."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gradops
from gradops import warmup
from gradops.errors import DescriptorError

pytest.importorskip("numba")

SOURCE_ROOT = Path(gradops.__file__).resolve().parents[1]

# SPEC 4.2's select on one vector: X > 0 ? dY : +0 (NaN X gives +0).
FIRST_CALL = """
import logging, sys
import numpy as np
import gradops
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s: %(message)s")
x = np.array([1, -2, np.nan, 0], np.float32)
dy = np.array([5, 6, 7, 8], np.float32)
print(gradops.relu_grad(x, dy, backend="fast").tolist())
"""


def run_python(code: str, env: dict, *, wrapper: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*wrapper, sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=600, cwd="/")


def environment(cache: Path | None, source_root: Path = SOURCE_ROOT, **extra: str) -> dict:
    env = {name: value for name, value in os.environ.items() if name not in ("NUMBA_CACHE_DIR", "GRADOPS_BACKEND")}
    env.update(PYTHONPATH=str(source_root), **extra)
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = str(cache)
    return env


def compile_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("gradops: compiling")]


def test_a_first_call_logs_each_kernel_it_compiles_and_a_later_process_loads_them(tmp_path):
    env = environment(tmp_path / "cache")
    first = run_python(FIRST_CALL, env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split("\n")[0] == "[5.0, 0.0, 0.0, 0.0]"
    assert compile_lines(first.stderr) == [
        "gradops: compiling relu kernel select_alone for float32 (first use; cached afterwards)"]
    second = run_python(FIRST_CALL, env)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    assert compile_lines(second.stderr) == []


def test_warmup_cases_cover_each_op_with_its_own_dtypes():
    every = warmup.cases()
    # ReLU: 2 ops x 5 dtypes, resample: 5 x 2, depthwise: 3 x 4; each in NCHW and NHWC
    assert len(every) == (2 * 5 + 5 * 2 + 3 * 4) * 2
    chosen = warmup.cases(["resample_grad", "depthwise_conv2d_native"], ["bfloat16"], ["NHWC"])
    assert [str(case) for case in chosen] == ["depthwise_conv2d_native bfloat16 NHWC"]


@pytest.mark.parametrize("field, arguments", [("ops", (["relu_gradient"], None)), ("dtypes", (None, ["float8"]))])
def test_warmup_rejects_unknown_names(field, arguments):
    with pytest.raises(DescriptorError, match=f"^{field}: expected one of"):
        warmup.cases(*arguments)


def test_warmup_command_compiles_into_the_cache(tmp_path):
    env = environment(tmp_path / "cache")
    result = subprocess.run([sys.executable, "-m", "gradops.cli", "warmup", "--ops", "relu_grad", "--dtypes",
                             "float32", "--layouts", "NCHW", "--jobs", "1"], env=env, capture_output=True, text=True,
                            timeout=600, cwd="/")
    assert result.returncode == 0, result.stderr
    assert "ready: relu_grad float32 NCHW" in result.stdout
    after = run_python(FIRST_CALL, env)
    assert after.returncode == 0, after.stderr
    assert compile_lines(after.stderr) == []


def test_warmup_command_reports_a_bad_name_as_a_usage_error(tmp_path):
    result = subprocess.run([sys.executable, "-m", "gradops.cli", "warmup", "--dtypes", "float8"],
                            env=environment(tmp_path / "cache"), capture_output=True, text=True, timeout=600, cwd="/")
    assert result.returncode == 2
    assert result.stderr.startswith("gradops: error: dtypes: expected one of")


def _read_only_wrapper(package_root: Path) -> tuple[str, ...]:
    """A command prefix that runs a process with ``package_root`` read-only. root passes any
    permission check, so it gets a read-only bind mount in a private mount namespace; others
    get the write permissions removed."""
    if os.geteuid() != 0:
        for path in [package_root, *package_root.rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)
        return ()
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind -o ro {package_root} {package_root}"],
                           capture_output=True) if shutil.which("unshare") else None
    if probe is None or probe.returncode != 0:
        pytest.skip("running as root without a private mount namespace: no read-only directory to test")
    return ("unshare", "-m", "sh", "-c", f'mount --bind -o ro {package_root} {package_root} && exec "$0" "$@"')


def test_a_read_only_install_caches_in_the_user_cache_directory(tmp_path):
    package_root = tmp_path / "site-packages"
    shutil.copytree(SOURCE_ROOT / "gradops", package_root / "gradops",
                    ignore=shutil.ignore_patterns("__pycache__"))
    user_cache = tmp_path / "user-cache"
    env = environment(None, package_root, XDG_CACHE_HOME=str(user_cache))
    wrapper = _read_only_wrapper(package_root)
    try:
        runs = [run_python(FIRST_CALL, env, wrapper=wrapper) for _ in range(2)]
    finally:
        for path in [package_root, *package_root.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
    for run in runs:
        assert run.returncode == 0, run.stderr
        assert run.stdout.split("\n")[0] == "[5.0, 0.0, 0.0, 0.0]"
    assert len(compile_lines(runs[0].stderr)) == 1
    assert compile_lines(runs[1].stderr) == []  # loaded from the user cache
    assert list((user_cache / "numba").rglob("relu._select_alone-*.nbi"))
    assert not list(package_root.rglob("*.nbi"))


def test_the_users_own_numba_compiles_are_not_logged_and_never_fail(caplog):
    """numba announces every compile in the process; the compile log must skip the user's own
    functions, including those made without a module (``exec`` with bare globals)."""
    numba = pytest.importorskip("numba")
    import gradops._fast  # noqa: F401 - registers the compile log
    namespace: dict = {}
    exec("def add_one(x):\n    return x + 1\n", namespace)
    assert namespace["add_one"].__module__ is None
    with caplog.at_level("DEBUG", logger="gradops"):
        assert numba.njit(namespace["add_one"])(41) == 42
        assert numba.njit(lambda x: x * 2)(21) == 42
    assert [r for r in caplog.records if r.name == "gradops"] == []
