"""``gradops check``: the verdict logic (no framework needed) and live runs against the installed
frameworks (marked ``peers``)."""

from __future__ import annotations

import numpy as np
import pytest

from gradops.cli import main as gradops_main
from gradops.conformance import check
from gradops.conformance.check import Row, Trial, judge, run_checks


def verdict(*trials: Trial) -> Row:
    row = Row("op", "fw", "conv")
    for trial in trials:
        judge(row, trial)
    return check._finish(row)


F32 = np.float32


def test_bitwise_trials_distinguish_signed_zero_and_match_nan():
    ours = np.array([1, np.nan, 0.0], F32)
    assert verdict(Trial("t", ours, ours.copy())).status == "agrees"
    row = verdict(Trial("t", ours, np.array([1, np.nan, -0.0], F32)))
    assert row.status == "differs"
    assert "first at [2]: gradops 0.0, framework -0.0" in row.detail


def test_tolerance_trials():
    ours = np.array([100.0, 1.0], F32)
    close = np.array([100.0005, 1.0], F32)
    assert verdict(Trial("t", ours, close, rtol=1e-5, atol=0.0)).status == "agrees"
    assert verdict(Trial("t", ours, np.array([100.01, 1.0], F32), rtol=1e-5, atol=0.0)).status == "differs"


def test_explained_elements_make_a_known_divergence_and_others_still_differ():
    ours = np.array([0.0, 0.0, 5.0], F32)
    theirs = np.array([np.nan, 0.0, 5.0], F32)

    def explain(index):
        return "SPEC 4.2: reason" if index == (0,) else None

    row = verdict(Trial("t", ours, theirs, explain=explain))
    assert row.status == "known"
    assert row.detail == "SPEC 4.2: reason (1 element(s) differ)"
    row = verdict(Trial("t", ours, np.array([np.nan, 1.0, 5.0], F32), explain=explain))
    assert row.status == "differs" and "first at [1]" in row.detail


def test_exceptions_are_known_only_when_documented():
    ours = np.zeros(2, F32)
    row = verdict(Trial("t", ours, ValueError("{{function_node x}} boom")), Trial("u", ours, ours))
    assert row.status == "differs"
    assert row.detail == "t: the framework raised ValueError: boom"
    row = verdict(Trial("t", ours, RuntimeError("no"), raises="SPEC 5.6: rejects"))
    assert (row.status, row.detail) == ("known", "SPEC 5.6: rejects (1 case(s) raised)")
    # A reason documented for differing values does not excuse an exception.
    assert verdict(Trial("t", ours, RuntimeError("no"), known="SPEC 5.6: ignores")).status == "differs"


def test_shape_mismatch_differs():
    row = verdict(Trial("t", np.zeros((2, 3), F32), np.zeros((3, 2), F32)))
    assert row.status == "differs" and "shape [2, 3] vs framework [3, 2]" in row.detail


def test_missing_frameworks_are_reported_and_skipped(monkeypatch):
    monkeypatch.setitem(check._MODULES, "jax", "gradops_no_such_framework")
    check.framework.cache_clear()
    try:
        rows = run_checks(ops=["relu"], frameworks=["jax", "onnx"])
    finally:
        check.framework.cache_clear()
    assert [(r.framework, r.status) for r in rows] == [("jax", "skipped")] * 2 + [("onnx", "skipped")] * 2
    assert rows[0].detail == "gradops_no_such_framework is not installed"


def test_every_operator_has_a_row_for_every_framework():
    probes = check.probes()
    operators = {p.operator for p in probes}
    assert len(operators) == 7
    for operator in operators:
        assert {p.framework for p in probes if p.operator == operator} == set(check.FRAMEWORKS)


# --- live, against the installed frameworks ----------------------------------------------------------

@pytest.mark.peers
def test_relu_rows_show_the_documented_divergences():
    pytest.importorskip("tensorflow")
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    rows = {(r.operator.split()[0], r.framework): r for r in run_checks(ops=["relu"], backend="reference")}
    assert rows[("relu_grad", "jax")].status == "agrees"
    tf = rows[("relu_grad", "tensorflow")]
    assert tf.status == "known"
    assert "inf*0 = NaN" in tf.detail and "keeps the sign" in tf.detail
    assert rows[("relu_grad", "pytorch")].detail.startswith("SPEC 4.2: threshold_backward passes dY where X is NaN")
    assert "propagate NaN" in rows[("relu", "pytorch")].detail
    assert not [r for r in rows.values() if r.status == "differs"]


@pytest.mark.peers
def test_full_check_has_no_unexplained_difference(capsys):
    pytest.importorskip("tensorflow")
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    rows = run_checks(backend="reference")
    assert [(r.operator, r.framework, r.convention, r.detail) for r in rows if r.status == "differs"] == []
    details = " ".join(r.detail for r in rows)
    for expected in ("silently ignores dilations", "accumulates half in half", "float16 in float16",
                     "ReluGrad multiplies by the mask", "inexact tie"):
        assert expected in details, expected
    statuses = {(r.operator.split()[0], r.framework, r.convention): r.status for r in rows}
    assert statuses[("resample_grad", "jax", "image.resize linear (any axes)")] == "agrees"
    assert statuses[("DepthwiseConv2dNativeBackpropInput", "jax",
                     "lax.conv_general_dilated groups=C (+ vjp), NHWC and NCHW")] == "agrees"
    assert check.print_report(rows) == 0
    out = capsys.readouterr().out
    assert "0 DIFFERS" in out and "skipped" in out


def test_check_command_without_frameworks(capsys):
    # Only ONNX depthwise rows: all skipped (no runtime), so no framework is imported.
    assert gradops_main(["check", "--op", "Depthwise", "--framework", "onnx"]) == 0
    out = capsys.readouterr().out
    assert out.count("skipped") >= 3 and "0 agrees, 0 known divergence, 0 DIFFERS, 3 skipped" in out
