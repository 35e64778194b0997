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


def test_import_is_cheap_and_compiles_nothing():
    code = ("import time, sys; t = time.perf_counter(); import gradops; dt = time.perf_counter() - t; "
            "print(dt); print('numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert float(out[0]) < 1.0
    assert out[1] == "False"


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
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gradops: error: ") and message in lines[0], result.stderr


def test_run_missing_file(tmp_path):
    result = gradops("run", str(tmp_path / "absent.json"))
    assert result.returncode == 2 and "cannot read" in result.stderr and "Traceback" not in result.stderr
