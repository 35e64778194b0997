"""``gradops check``: the verdict logic (no framework needed) and live runs against the installed
frameworks (marked ``peers``)."""

from __future__ import annotations

import numpy as np
import pytest

from gradops.cli import main as gradops_main
from gradops.conformance import check, check_onnx, peers
from gradops.conformance.check import Row, Trial, judge, run_checks
from gradops.conformance.verdict import finish


def verdict(*trials: Trial) -> Row:
    row = Row("op", "fw", "conv")
    for trial in trials:
        judge(row, trial)
    return finish(row)


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


def test_case_notes_make_a_known_divergence_counted_per_case():
    ours = np.zeros(2, F32)
    row = verdict(Trial("t", ours, ours, notes=("SPEC 6.4: sizes",)), Trial("u", ours, ours, notes=("SPEC 6.4: sizes",)))
    assert (row.status, row.detail) == ("known", "SPEC 6.4: sizes (2 case(s))")


def test_missing_frameworks_are_reported_and_skipped(monkeypatch):
    monkeypatch.setitem(peers.MODULES, "jax", "gradops_no_such_framework")
    monkeypatch.setitem(peers.MODULES, "onnx", "gradops_no_such_onnx.reference")
    peers.framework.cache_clear()
    try:
        rows = run_checks(ops=["relu"], frameworks=["jax", "onnx"])
    finally:
        peers.framework.cache_clear()
    assert [(r.operator.split()[0], r.framework, r.status) for r in rows] == [
        ("relu_grad", "jax", "skipped"), ("relu_grad", "onnx", "absent"), ("relu", "jax", "skipped"),
        ("relu", "onnx", "skipped")]
    assert rows[0].detail == "gradops_no_such_framework is not installed"
    assert rows[3].detail == "gradops_no_such_onnx is not installed"
    assert rows[1].detail == check_onnx.NO_RELU_GRAD


def test_every_operator_has_a_row_for_every_framework():
    probes = check.probes()
    operators = {p.operator for p in probes}
    assert len(operators) == 7
    for operator in operators:
        assert {p.framework for p in probes if p.operator == operator} == set(check.FRAMEWORKS)
    # Only ONNX's missing ReLU gradient has no runnable row.
    assert {(p.operator, p.framework) for p in probes if p.run is None} == {
        ("relu_grad (ACTIVATION_RELU_GRAD)", "onnx"), ("relu_grad (ACTIVATION_RELU_GRAD)", "onnxruntime")}


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
def test_full_check_has_no_unexplained_difference_and_no_skipped_row(capsys):
    for name in ("tensorflow", "torch", "jax", "onnx", "onnxruntime"):
        pytest.importorskip(name)
    rows = run_checks(backend="reference")
    assert [(r.operator, r.framework, r.convention, r.detail) for r in rows if r.status == "differs"] == []
    assert [(r.operator, r.framework) for r in rows if r.status == "skipped"] == []
    details = " ".join(r.detail for r in rows)
    # Not "accumulates half in half" (SPEC 5.6): only TensorFlow's Eigen depthwise kernels show it;
    # its oneDNN kernels, on by default on Intel CPUs (TF_ENABLE_ONEDNN_OPTS), accumulate in float32.
    for expected in ("silently ignores dilations", "float16 in float16", "ReluGrad multiplies by the mask",
                     "inexact tie"):
        assert expected in details, expected
    statuses = {(r.operator.split()[0], r.framework, r.convention): r for r in rows}
    assert statuses[("resample_grad", "jax", "image.resize linear (any axes)")].status == "agrees"
    assert statuses[("DepthwiseConv2dNativeBackpropInput", "jax",
                     "lax.conv_general_dilated groups=C (+ vjp), NHWC and NCHW")].status == "agrees"
    for runtime in ("onnxruntime", "onnx"):
        for op in ("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter"):
            how = "" if op == "DepthwiseConv2dNative" else "J^T dY of "
            assert statuses[(op, runtime, f"{how}Conv group=C, NHWC and NCHW")].status == "agrees"
        # The two ONNX implementations size a fractional-scale output differently: a note in both rows.
        for operator, how in (("resample", ""), ("resample_grad", "J^T dY of ")):
            row = statuses[(operator, runtime, f"{how}Resize half_pixel (linear, 4 nearest_modes)")]
            assert row.status == "known" and check_onnx._SIZE_FROM_SCALES in row.detail
    crop = statuses[("resample", "onnxruntime", "Resize tf_crop_and_resize (linear, 4 nearest_modes)")].detail
    assert check_onnx._UNSCALED_AXIS in crop
    align = statuses[("resample", "onnx", "Resize align_corners (linear, 4 nearest_modes)")].detail
    assert check_onnx._LENGTH_RESIZED in align and check_onnx._TIE_FLOAT64 in align
    assert check.print_report(rows) == 0
    out = capsys.readouterr().out
    assert "0 DIFFERS, 0 skipped, 2 no such operator" in out


@pytest.mark.peers
def test_onnx_relu_rows_show_the_documented_divergences():
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    rows = {(r.operator.split()[0], r.framework): r for r in run_checks(ops=["relu"], frameworks=["onnxruntime", "onnx"])}
    for runtime in ("onnxruntime", "onnx"):
        assert rows[("relu_grad", runtime)].status == "absent"
        relu = rows[("relu", runtime)]
        assert relu.status == "known" and "SPEC 4.3: frameworks propagate NaN (gradops: +0)" in relu.detail


def test_check_command_without_frameworks(capsys):
    # ONNX has no ReLU gradient: its rows are absent, so no framework is imported.
    assert gradops_main(["check", "--op", "relu_grad", "--framework", "onnx", "--framework", "onnxruntime"]) == 0
    out = capsys.readouterr().out
    assert "0 agrees, 0 known divergence, 0 DIFFERS, 0 skipped, 2 no such operator" in out


@pytest.mark.peers
def test_onnx_gradient_rows_catch_a_wrong_adjoint(monkeypatch):
    # The gradient rows compare with J^T dY of ONNX's forward: the doc-literal GRAD offsets (the
    # forward's, unswapped, SPEC 3.6) are another operator, and the row must say so.
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from gradops.conventions import DmlResampleParams

    monkeypatch.setattr(DmlResampleParams, "grad_params",
                        lambda self: (self.scales, self.input_pixel_offsets, self.output_pixel_offsets))
    for runtime in ("onnxruntime", "onnx"):
        row = Row("resample_grad", runtime, "half_pixel")
        for trial in check_onnx._resize_trials(runtime, "half_pixel", True, np.random.default_rng(0), "reference"):
            judge(row, trial)
        assert finish(row).status == "differs"
