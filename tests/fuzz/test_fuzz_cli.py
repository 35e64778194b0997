"""Fuzz the command line in-process (issue 27): ``gradops run`` on hostile JSON documents and data
files, and every other command with hostile arguments. Each call returns an exit status (a usage
error exits 2 through argparse) and a failure prints exactly one ``gradops: error:`` line; no
exception escapes ``gradops.cli.main``."""

from __future__ import annotations

import contextlib
import io
import json
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradops import cli

from .harness import counts
from .strategies import HUGE, NUMBERS

pytestmark = pytest.mark.xdist_group("fuzz")

OPERATORS = ("DML_OPERATOR_ACTIVATION_RELU", "ACTIVATION_RELU_GRAD", "relu_grad", "DML_OPERATOR_RESAMPLE",
             "DML_OPERATOR_RESAMPLE1", "DML_OPERATOR_RESAMPLE2", "DML_OPERATOR_RESAMPLE_GRAD",
             "DML_OPERATOR_RESAMPLE_GRAD1", "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
             "DepthwiseConv2dNativeBackpropFilter", "Bogus", 3, None)
FIELDS = ("InputTensor", "OutputTensor", "InputGradientTensor", "OutputGradientTensor", "DataType", "Sizes",
          "Strides", "InterpolationMode", "RoundingDirection", "DimensionCount", "ScaleCount", "Scales",
          "InputPixelOffsets", "OutputPixelOffsets", "feature_level", "backend", "T", "strides", "padding",
          "dilations", "explicit_paddings", "data_format", "input", "filter", "out_backprop", "input_sizes",
          "filter_sizes", "file", "key")


def json_values():
    leaves = st.one_of(st.sampled_from([n for n in NUMBERS if isinstance(n, (int, float, str)) or n is None]),
                       st.sampled_from(HUGE), st.sampled_from(["nan", "inf", "FLOAT16", "INT8", "SAME", "NCHW",
                                                               "LINEAR", "data.npy", "empty.npy", "fifo"]),
                       st.floats(allow_nan=False), st.integers(-300, 300))
    return st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(FIELDS), inner, max_size=4)), max_leaves=12)


@st.composite
def documents(draw):
    """A JSON operator document: a valid skeleton with hostile values, or hostile bytes."""
    kind = draw(st.sampled_from(["document", "document", "document", "bytes", "deep", "array"]))
    if kind == "bytes":
        return draw(st.binary(max_size=40))
    if kind == "deep":
        depth = draw(st.sampled_from([10, 1000, 100000]))
        return ("[" * depth + "]" * depth).encode()
    if kind == "array":
        return json.dumps(draw(st.lists(json_values(), max_size=3))).encode()
    doc = {"operator": draw(st.sampled_from(OPERATORS))}
    doc.update(draw(st.dictionaries(st.sampled_from(FIELDS), json_values(), max_size=6)))
    inputs = draw(st.dictionaries(st.sampled_from(FIELDS[:4] + ("input", "filter", "out_backprop")),
                                  st.one_of(json_values(), st.fixed_dictionaries(
                                      {"file": st.sampled_from(["data.npy", "data.npz", "empty.npy", "fifo",
                                                                "missing.npy", ".", "junk.npy"])})), max_size=3))
    if draw(st.booleans()):
        doc["inputs"] = inputs
    else:
        doc.update(inputs)
    return json.dumps(doc, allow_nan=True).encode()


def run_cli(args: list[str]) -> tuple[int, str]:
    counts["cli " + args[0]] += 1
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = cli.main(args)
        except SystemExit as exc:  # argparse's usage errors
            status = exc.code if isinstance(exc.code, int) else 2
    text = stderr.getvalue()
    if status == 2 and "usage:" not in text:
        # compile-progress lines (a cold kernel cache, README "First calls") are not part of the error
        lines = [line for line in text.strip().splitlines() if not line.startswith("gradops: compiling ")]
        assert len(lines) == 1 and lines[0].startswith("gradops: error: "), text
    assert "Traceback" not in text, text
    return status, text


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli")
    np.save(path / "data.npy", np.array([[1, -2], [3, 4]], np.float32))
    np.savez(path / "data.npz", a=np.ones(3, np.float16), b=np.ones(2, np.int8))
    (path / "empty.npy").write_bytes(b"")
    (path / "junk.npy").write_bytes(b"\x93NUMPY\x01\x00junk")
    os.mkfifo(path / "fifo")
    return path


@given(documents(), st.sampled_from([None, "out.npz", "missing/out.npz", "."]))
def test_run(folder, document, output):
    (folder / "op.json").write_bytes(document)
    args = ["run", str(folder / "op.json")] + (["-o", str(folder / output)] if output else [])
    status, _ = run_cli(args)
    assert status in (0, 2)
    assert not list(folder.glob(".*.tmp")), "a temporary output file was left behind"


@given(st.sampled_from([["run", "fifo"], ["run", "."], ["run", "missing.json"], ["ops"], ["examples", "--only", "E999"],
                        ["check", "--op", "Bogus"], ["check", "--op", ""], ["vectors", "check", "missing-dir"],
                        ["vectors", "check", "."], ["bench", "--bogus"], ["bogus"], [], ["run"],
                        ["check", "--framework", "bogus"]]))
def test_other_commands(folder, args):
    args = [str(folder / a) if a in ("fifo", ".", "missing.json") else a for a in args]
    if args[:2] == ["check", "--op"] and args[2] == "":
        args[2] = "no operator has this in its name"
    status, _ = run_cli(args or ["--help"])
    assert status in (0, 1, 2)
