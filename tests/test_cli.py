"""The gradops command line end to end, in a subprocess as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


def gradops(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gradops.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def error_lines(stderr: str) -> list[str]:
    """stderr without the compile-progress lines a cold kernel cache adds (README "First calls"):
    what remains of a failure must be one line."""
    return [line for line in stderr.strip().splitlines() if not line.startswith("gradops: compiling ")]


# What ``import gradops`` must not load: the compiler and its LLVM binding (the fast backend loads
# them on its first call), the integrations' frameworks (gradops.torch, .jax and .dask load them),
# and the CLI's and benchmark's libraries. Import time itself is measured, not asserted (README
# "First calls"): a timed test fails on a loaded machine.
_HEAVY_MODULES = ("numba", "llvmlite", "torch", "jax", "tensorflow", "dask", "distributed", "rich", "scipy",
                  "matplotlib", "hypothesis", "onnx", "onnxruntime")


def test_import_is_cheap_and_compiles_nothing():
    code = "import sys, gradops; print(' '.join(sorted({name.split('.')[0] for name in sys.modules})))"
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout.split())
    assert "gradops" in loaded
    assert loaded.isdisjoint(_HEAVY_MODULES), sorted(loaded.intersection(_HEAVY_MODULES))


def test_examples_command_reports_every_match():
    result = gradops("examples")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "MISMATCH" not in result.stdout
    assert "E11" in result.stdout and "E17" in result.stdout
    assert "checks match the SPEC section 7 numbers" in result.stdout


def test_ops_lists_every_operator():
    result = gradops("ops")
    assert result.returncode == 0
    for name in ("DML_OPERATOR_ACTIVATION_RELU", "DML_OPERATOR_ACTIVATION_RELU_GRAD"):
        assert name in result.stdout


def test_run_relu_grad_from_json(tmp_path):
    np.save(tmp_path / "dy.npy", np.array([[1, 2, 3], [4, 5, 6]], np.float16))
    spec = {"operator": "DML_OPERATOR_ACTIVATION_RELU_GRAD", "DataType": "FLOAT16",
            "inputs": {"InputTensor": [[1, -2, "nan"], [0, 5, "inf"]], "InputGradientTensor": {"file": "dy.npy"}}}
    (tmp_path / "op.json").write_text(json.dumps(spec))
    result = gradops("run", "op.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "OutputGradientTensor: shape [2, 3] float16" in result.stdout
    with np.load(tmp_path / "op.out.npz") as out:
        np.testing.assert_array_equal(out["OutputGradientTensor"], [[1, 0, 0], [0, 5, 6]])
        assert out["OutputGradientTensor"].dtype == np.float16


def test_run_strided_descriptor_writes_through_strides(tmp_path):
    # OutputTensor rows padded to 4 elements: the padding element comes back as written (zero).
    spec = {"operator": "ACTIVATION_RELU", "InputTensor": {"DataType": "FLOAT32", "Sizes": [2, 3]},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [2, 3], "Strides": [4, 1]},
            "inputs": {"InputTensor": [-1, 2, -3, 4, -5, 6]}}
    (tmp_path / "relu.json").write_text(json.dumps(spec))
    result = gradops("run", "relu.json", "-o", str(tmp_path / "y.npz"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    with np.load(tmp_path / "y.npz") as out:
        np.testing.assert_array_equal(out["OutputTensor"], [[0, 2, 0], [4, 0, 6]])


@pytest.mark.parametrize("content, message", [
    ("{not json", "invalid JSON at line 1"),
    ('{"operator": "DML_OPERATOR_CONVOLUTION"}', "operator: expected one of"),
    ('{"operator": "relu_grad", "inputs": {"InputTensor": [1, 2]}}', "inputs.InputGradientTensor: missing"),
    ('{"operator": "relu_grad", "InputTensor": {"DataType": "FLOAT32", "Sizes": [0]}, '
     '"inputs": {"InputTensor": [], "InputGradientTensor": []}}', "InputTensor.Sizes[0]: expected an integer >= 1"),
    ('{"operator": "relu", "Bogus": 1, "inputs": {}}', "JSON: expected only the fields"),
    ('[1, 2]', "expected a JSON object"),
])
def test_run_errors_are_one_line(tmp_path, content, message):
    (tmp_path / "bad.json").write_text(content)
    result = gradops("run", "bad.json", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and lines[0].startswith("gradops: error: ") and message in lines[0], result.stderr


def test_run_missing_file(tmp_path):
    result = gradops("run", str(tmp_path / "absent.json"))
    assert result.returncode == 2 and "cannot read" in result.stderr and "Traceback" not in result.stderr


# --- issue 27: every failure is one line and exit status 2 ----------------------------------------

def _one_line_error(result: subprocess.CompletedProcess, fragment: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and lines[0].startswith("gradops: error: ") and fragment in lines[0], result.stderr


@pytest.mark.parametrize("name, content, fragment", [
    ("nonutf8", b'{"operator": "relu\xff"}', "expected UTF-8 text, got byte 0xff"),
    ("deep", b"[" * 100000 + b"]" * 100000, "nested less deeply"),
    ("int8", b'{"operator": "relu", "DataType": "INT8", "feature_level": "5.1", "inputs": {"InputTensor": [300]}}',
     "inputs.InputTensor: expected numbers convertible to int8"),
    ("emptynpy", b'{"operator": "relu", "inputs": {"InputTensor": {"file": "empty.npy"}}}',
     "inputs.InputTensor: cannot read empty.npy"),
    ("huge", b'{"operator": "DepthwiseConv2dNativeBackpropInput", "T": "float", "input_sizes": [1, 100000, 100000, 1],'
     b' "strides": [1, 100000, 100000, 1], "padding": "SAME", "filter": [[[[1.0]]]], "out_backprop": [[[[1.0]]]]}',
     "input_sizes: the output of shape (1, 100000, 100000, 1) needs"),  # 1e10 elements
])
def test_run_failure_modes_are_one_line(tmp_path, name, content, fragment):
    (tmp_path / "empty.npy").write_bytes(b"")
    (tmp_path / f"{name}.json").write_bytes(content)
    _one_line_error(gradops("run", f"{name}.json", cwd=tmp_path), fragment)


def test_run_output_in_a_missing_folder_leaves_nothing(tmp_path):
    (tmp_path / "ok.json").write_text('{"operator": "relu", "inputs": {"InputTensor": [1.0, -2.0]}}')
    _one_line_error(gradops("run", "ok.json", "-o", "missing/out.npz", cwd=tmp_path), "--output: cannot write")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.json"]
    result = gradops("run", "ok.json", "-o", "out.npz", cwd=tmp_path)
    assert result.returncode == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["ok.json", "out.npz"]


def test_fifo_inputs_are_refused_without_blocking(tmp_path):
    import os

    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "op.json").write_text('{"operator": "relu", "inputs": {"InputTensor": {"file": "fifo"}}}')
    _one_line_error(gradops("run", "fifo", cwd=tmp_path), "not a regular file")
    _one_line_error(gradops("run", "op.json", cwd=tmp_path), "inputs.InputTensor: cannot read fifo: not a regular file")


def test_check_unknown_op_is_an_error():
    _one_line_error(gradops("check", "--op", "Bogus"), "--op: expected part of an operator name")


def test_python_dash_m_gradops_runs_the_cli():
    result = subprocess.run([sys.executable, "-m", "gradops", "ops"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and "DML_OPERATOR_ACTIVATION_RELU_GRAD" in result.stdout


def test_unexpected_errors_are_one_line_too(tmp_path, monkeypatch, capsys):
    from gradops import cli, registry

    def broken(path):
        raise RuntimeError("something\nunforeseen")

    monkeypatch.setattr(registry, "read_json", broken)
    assert cli.main(["run", str(tmp_path / "x.json")]) == 2
    assert capsys.readouterr().err == ("gradops: error: unexpected RuntimeError: something unforeseen "
                                       "(GRADOPS_TRACEBACK=1 shows where)\n")
