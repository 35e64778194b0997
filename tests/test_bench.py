"""The benchmark harness (``gradops bench``, suite S1 of benchmarks SUITE.md).

Never asserts timings: only the suite definitions (typed in from SUITE.md and SPEC), the check,
the summary logic, and the JSON a quick run produces.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gradops import GradopsError
from gradops.bench.measure import compare
from gradops.bench.orchestrate import best_machine, fastest_rounds
from gradops.bench.report import best_cell, summarise
from gradops.bench.runners import Runner
from gradops.bench.suite import suite
from gradops.bench.workloads import NotAvailable, gradops_function

S1_IDS = ["R1", "R2", "N1", "N2", "N3", "L1", "L2", "L3", "D1", "D2", "D3", "D4", "D5", "D6", "D7", "P1", "P2"]


def test_suite_s1_matches_suite_md():
    s1 = suite()
    assert list(s1) == S1_IDS
    assert s1["R1"].shape == (16, 64, 128, 128) and s1["R1"].dtype == "float32"
    assert s1["R2"].dtype == "float16"
    for wid in ("N1", "N2", "L1", "L3"):
        assert (s1[wid].forward_input, s1[wid].forward_output) == ((16, 64, 64, 64), (16, 64, 128, 128))
    assert (s1["L2"].forward_input, s1["L2"].forward_output) == ((16, 64, 128, 128), (16, 64, 64, 64))
    assert (s1["N3"].forward_input, s1["N3"].forward_output) == ((8, 32, 100, 100), (8, 32, 150, 50))
    assert (s1["P1"].forward_input, s1["P1"].forward_output) == ((8, 32, 20, 20), (8, 32, 46, 54))
    assert (s1["P2"].forward_input, s1["P2"].forward_output) == ((8, 32, 20, 20), (8, 32, 92, 108))
    assert [s1[w].grid for w in ("N1", "N2", "N3", "P1", "P2")] == ["half_pixel", "asymmetric", "half_pixel",
                                                                      "half_pixel", "asymmetric"]
    assert s1["L3"].dtype == s1["D7"].dtype == "float16"
    d2 = s1["D2"]
    assert d2.input_nhwc == (32, 112, 112, 64) and d2.stride == 2 and d2.dy_nhwc() == (32, 56, 56, 64)
    assert s1["D3"].input_nhwc == (32, 14, 14, 512)
    assert (s1["D4"].input_nhwc, s1["D4"].kernel, s1["D4"].multiplier) == ((8, 56, 56, 128), 5, 2)
    assert s1["D5"].dilation == 2 and s1["D6"].data_format == "NCHW"
    assert s1["D6"].result_shape() == (32, 32, 112, 112)


def test_quick_suite_keeps_every_parameter():
    full, quick = suite(), suite(quick=True)
    assert list(quick) == S1_IDS
    for wid in S1_IDS:
        a, b = full[wid].describe(), quick[wid].describe()
        for key in ("operator", "dtype", "layout", "mode", "grid", "stride", "dilation", "padding", "data_format"):
            assert a.get(key) == b.get(key), (wid, key)
        if "gradops_kwargs" in a:
            assert a["gradops_kwargs"] == b["gradops_kwargs"], wid  # same scales and offsets


def test_resample_grad_parameters_follow_spec_6():
    """SPEC 6.1 / 6.2 forward parameters, swapped for the GRAD op (SPEC 3.6); N and C are identity
    axes with grad offsets (-0.5, 0.5)."""
    s1 = suite()
    n1, n2, l1, l2 = (s1[w].grad_kwargs() for w in ("N1", "N2", "L1", "L2"))
    assert n1 == {"mode": "nearest", "rounding_direction": "decreasing", "scales": (1.0, 1.0, 2.0, 2.0),
                  "input_pixel_offsets": (-0.5, -0.5, -0.5, -0.5), "output_pixel_offsets": (0.5, 0.5, 0.0, 0.0)}
    assert n2["input_pixel_offsets"] == (-0.5, -0.5, 0.0, 0.0)
    assert n2["output_pixel_offsets"] == (0.5, 0.5, 0.0, 0.0)
    assert l1 == {"mode": "linear", "scales": (1.0, 1.0, 2.0, 2.0), "input_pixel_offsets": (-0.5,) * 4,
                  "output_pixel_offsets": (0.5,) * 4}
    assert l2["scales"] == (1.0, 1.0, 0.5, 0.5)
    assert s1["P1"].scales()[2:] == (float(np.float32(46 / 20)), float(np.float32(54 / 20)))


def test_depthwise_same_padding_and_sizes():
    s1 = suite()
    assert s1["D1"].pads() == ((1, 1), (1, 1))
    assert s1["D2"].pads() == ((0, 1), (0, 1))  # odd total: the extra element after (SPEC 5.3)
    assert s1["D4"].pads() == ((2, 2), (2, 2))
    assert s1["D5"].pads() == ((2, 2), (2, 2))  # effective filter 5
    assert s1["D6"].in_format([1, 2, 3, 4]) == [1, 4, 2, 3]
    inputs = suite(quick=True)["D6"].inputs()
    assert inputs["dy"].shape == (2, 8, 12, 12) and inputs["filter"].shape == (3, 3, 8, 1)


def test_bytes_and_flops():
    s1 = suite()
    assert s1["R1"].bytes_moved() == 3 * 16 * 64 * 128 * 128 * 4 and s1["R1"].flops() == 0
    assert s1["R2"].bytes_moved() == 3 * 16 * 64 * 128 * 128 * 2
    assert s1["N1"].bytes_moved() == (16 * 64 * 64 * 64 + 16 * 64 * 128 * 128) * 4
    assert s1["L1"].flops() == 2 * 4 * 16 * 64 * 128 * 128
    assert s1["D1"].flops() == 2 * 32 * 112 * 112 * 32 * 9
    assert s1["D4"].bytes_moved() == (8 * 56 * 56 * 128 + 8 * 56 * 56 * 256 + 5 * 5 * 128 * 2) * 4


def test_inputs_are_deterministic():
    w = suite(quick=True)["R1"]
    a, b = w.inputs(), w.inputs()
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["x"], suite(quick=True)["R2"].inputs()["x"].astype(np.float32))


def test_missing_gradops_function_is_not_available():
    with pytest.raises(NotAvailable, match="not implemented"):
        gradops_function("no_such_operator")


def test_compare_flags_wrong_answers():
    reference = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert compare(reference.copy(), reference, 0.0)["passed"]
    wrong = reference.copy()
    wrong[1, 2, 3] += 1
    check = compare(wrong, reference, 1e-5)
    assert not check["passed"] and check["mismatched_elements"] == 1 and check["relative_error"] == 1 / 23
    assert compare(wrong, reference, 0.05)["passed"]
    wrong[0, 0, 0] = np.nan
    assert not compare(wrong, reference, 1.0)["passed"]
    assert not compare(reference[:1], reference, 1.0)["passed"]


def test_framework_reference_is_the_torch_tf_nearest_index():
    """P1's H axis: 20 -> 46, half-pixel. At o = 34, (o + 0.5) * 20/46 is exactly 15 in reals;
    float32 34.5 * fl32(20/46) rounds below 15 (PyTorch / TF pick row 14), while DirectML's
    34.5 / fl32(46/20) gives 15 (SPEC 3.7)."""
    w = suite(quick=True)["P1"]
    rows, cols = w.framework_indices()
    assert rows[34] == 14 and rows[33] == 14 and rows[35] == 15
    assert rows[0] == 0 and rows[-1] == 19 and cols[-1] == 19
    dy = w.inputs()["dy"]
    dx = w.framework_reference(dy)
    expected = np.zeros(w.forward_input)
    for o, i in enumerate(rows):  # brute-force scatter
        for p, j in enumerate(cols):
            expected[:, :, i, j] += dy[:, :, o, p]
    np.testing.assert_allclose(dx, expected, rtol=1e-12, atol=1e-12)
    assert suite(quick=True)["L1"].framework_reference(dy) is None


def _variant(output, median, passed=True, layout="NCHW", convention=None):
    check = {"passed": passed, "relative_error": 0.0 if passed else 0.5, "mismatched_elements": 0 if passed else 9,
             "elements": 100, "tolerance": 2e-5}
    if convention is not None:
        check["framework_convention"] = {"passed": convention}
    return {"layout": layout, "output": output, "status": "ok", "cold_s": 1.0, "median_s": median,
            "min_s": median / 2, "check": check}


def test_summary_ignores_wrong_answers_and_counts_framework_conventions():
    entry = {"bytes_moved": 10**9, "flops": 0, "results": {
        "gradops": {"status": "ok", "variants": [_variant("fresh", 0.4), _variant("out", 0.2),
                                                  _variant("fresh", 0.3, layout="channels_last")]},
        "torch": {"status": "ok", "variants": [_variant("fresh", 0.1, passed=False),
                                                _variant("fresh", 0.6, layout="channels_last"),
                                                _variant("out", 0.5, passed=False, convention=True)]},
        "tf": {"status": "n/a", "reason": "rejected"},
        "jax": {"status": "skipped", "reason": "not installed"},
    }}
    machine = {"status": "ok", "bandwidth": {"bytes_per_s": 1e10}, "matmul": {"flops_per_s": 1e11}}
    summary = summarise(entry, machine)
    assert summary["lower_bound_s"] == pytest.approx(0.1)
    fresh, out = summary["fresh"], summary["out"]
    assert fresh["gradops"]["layout"] == "channels_last" and fresh["gradops"]["median_s"] == 0.3
    assert fresh["peers"]["torch"]["layout"] == "channels_last"  # the faster variant was wrong
    assert fresh["fastest_peer"] == "torch" and fresh["ratio_to_fastest_peer"] == pytest.approx(0.5)
    assert fresh["ratio_to_lower_bound"] == pytest.approx(3.0)
    assert fresh["peers"]["tf"]["status"] == "n/a" and fresh["peers"]["jax"]["status"] == "skipped"
    assert out["peers"]["torch"]["check"] == "framework convention"
    assert out["ratio_to_fastest_peer"] == pytest.approx(0.4)
    only_wrong = {"status": "ok", "variants": [_variant("fresh", 0.1, passed=False)]}
    assert best_cell(only_wrong, "fresh")["status"] == "wrong"
    assert best_cell(only_wrong, "out")["status"] == "none"


@pytest.mark.peers
def test_quick_run_end_to_end(tmp_path, monkeypatch, capsys):
    """gradops and PyTorch on three quick workloads, JAX reported as not installed; each worker is
    a real process and every result is checked against the reference."""
    pytest.importorskip("torch")
    from gradops.cli import main

    real_installed = Runner.installed
    monkeypatch.setattr(Runner, "installed", lambda self: self.name != "jax" and real_installed(self))
    report_path = tmp_path / "bench.json"
    code = main(["bench", "--quick", "--only", "R1", "N1", "P1", "--peers", "torch", "jax", "--reps", "2",
                 "--json", str(report_path)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "fresh outputs" in printed and "preallocated outputs" in printed and "first call" in printed
    report = json.loads(report_path.read_text())
    assert report["quick"] and report["reps"] == 2 and report["machine"]["status"] == "ok"
    assert report["machine"]["bandwidth"]["bytes_per_s"] > 0 and report["machine"]["matmul"]["flops_per_s"] > 0
    assert [w["id"] for w in report["workloads"]] == ["R1", "N1", "P1"]
    for workload in report["workloads"]:
        assert workload["reference"]["status"] == "ok", workload["reference"]
        assert workload["summary"]["lower_bound_s"] > 0
        assert workload["results"]["jax"] == {"status": "skipped", "reason": "not installed"}
        gradops, torch = workload["results"]["gradops"], workload["results"]["torch"]
        assert gradops["status"] == "ok", gradops
        assert torch["status"] == "ok", torch
        assert gradops["variants"][0]["output"] == "fresh"  # its cold call is a user's first call
        for variant in gradops["variants"] + torch["variants"]:
            assert variant["status"] == "ok", variant
            assert len(variant["times_s"]) == 2 and variant["cold_s"] > 0
            assert isinstance(variant["check"]["passed"], bool) and variant["check"]["elements"] > 0
        for output in ("fresh", "out"):
            summary = workload["summary"][output]
            assert summary["fastest_peer"] == "torch" and summary["peers"]["jax"]["status"] == "skipped"
            assert summary["ratio_to_lower_bound"] is None or summary["ratio_to_lower_bound"] > 0
    p1_torch = report["workloads"][2]["results"]["torch"]["variants"]
    # PyTorch rounds P1's exact ties the other way (SPEC 3.7) and matches its own convention.
    assert all(not v["check"]["passed"] and v["check"]["framework_convention"]["passed"] for v in p1_torch)
    assert all(v["check"]["passed"] for v in report["workloads"][1]["results"]["torch"]["variants"])


def test_rounds_keep_each_variants_fastest_round():
    rejected = {"layout": "NCHW", "output": "fresh", "status": "n/a", "reason": "rejected"}
    first = {"status": "ok", "variants": [_variant("fresh", 0.4), _variant("out", 0.2), rejected]}
    second = {"status": "ok", "variants": [_variant("fresh", 0.3), _variant("out", 0.25),
                                           _variant("fresh", 0.9, layout="NCHW")]}
    failed = {"status": "error", "reason": "worker timed out after 1800 s"}
    merged = fastest_rounds(fastest_rounds(fastest_rounds(None, first), failed), second)
    fresh, out, nchw = merged["variants"]
    assert fresh["median_s"] == 0.3 and fresh["round_medians_s"] == [0.4, 0.3]
    assert out["median_s"] == 0.2 and out["round_medians_s"] == [0.2, 0.25]
    assert nchw["median_s"] == 0.9 and nchw["round_medians_s"] == [0.9]  # timed in one round only
    assert fastest_rounds(failed, first)["variants"][0]["round_medians_s"] == [0.4]
    assert fastest_rounds(None, failed) == failed


def test_rounds_alternate_the_order_of_the_contenders(monkeypatch):
    from gradops.bench import orchestrate

    calls = []

    def fake_worker(peer, options, *, workload=None, ref=None):
        calls.append(peer)
        if peer == "machine":
            return {"status": "ok", "bandwidth": {"bytes_per_s": 1e10}, "matmul": {"flops_per_s": 1e11}}
        if peer == "reference":
            return {"status": "ok"}
        return {"status": "ok", "variants": [_variant("fresh", 0.1 * len(calls))]}

    monkeypatch.setattr(orchestrate, "run_worker", fake_worker)
    monkeypatch.setattr(Runner, "installed", lambda self: self.name != "jax")
    report = orchestrate.run_suite(orchestrate.Options(workloads=["N1"], peers=["torch", "jax", "tf"], rounds=3,
                                                       quick=True))
    assert calls == ["machine", "reference", "gradops", "torch", "tf", "tf", "torch", "gradops",
                     "gradops", "torch", "tf", "machine"]
    results = report["workloads"][0]["results"]
    assert list(results) == ["gradops", "torch", "jax", "tf"]
    assert results["jax"]["status"] == "skipped"
    assert results["gradops"]["variants"][0]["round_medians_s"] == pytest.approx([0.3, 0.8, 0.9])
    assert report["rounds"] == 3


def test_lower_bound_uses_the_best_machine_measurement():
    slow = {"status": "ok", "bandwidth": {"bytes_per_s": 1e10}, "matmul": {"flops_per_s": 2e11}}
    fast = {"status": "ok", "bandwidth": {"bytes_per_s": 2e10}, "matmul": {"flops_per_s": 1e11}}
    best = best_machine(slow, fast, {"status": "error", "reason": "timed out"})
    assert best["bandwidth"]["bytes_per_s"] == 2e10 and best["matmul"]["flops_per_s"] == 2e11
    assert len(best["runs"]) == 3
    assert best_machine({"status": "error", "reason": "x"})["status"] == "error"


def test_markdown_table_has_both_policies_and_the_bound():
    from gradops.bench.report import markdown

    entry = {"id": "N1", "bytes_moved": 10**9, "flops": 0, "results": {
        "gradops": {"status": "ok", "variants": [_variant("fresh", 0.4), _variant("out", 0.2)]},
        "torch": {"status": "ok", "variants": [_variant("fresh", 0.5), _variant("out", 0.25)]},
    }}
    machine = {"status": "ok", "bandwidth": {"bytes_per_s": 1e10}, "matmul": {"flops_per_s": 1e11}}
    entry["summary"] = summarise(entry, machine)
    table = markdown({"workloads": [entry]}).splitlines()
    assert len(table) == 3
    assert table[2] == "| N1 | 400 | 500 PyTorch | 0.80 | 200 | 250 PyTorch | 0.80 | 100 | 2.00 |"


def test_isa_tiers_follow_the_cpu_flags():
    from gradops.bench.isa import host_tier, resolve_tier, tier_env

    zen4, zen3 = {"avx2", "fma", "avx512f", "avx512bw"}, {"avx2", "fma", "f16c"}
    assert host_tier(zen4) == "avx512" and host_tier(zen3) == "avx2"
    assert resolve_tier("native", zen3) == "avx2" and resolve_tier("avx2", zen4) == "avx2"
    with pytest.raises(GradopsError, match="^--isa: this CPU \\(avx2\\) cannot run the avx512 tier"):
        resolve_tier("avx512", zen3)
    env = tier_env("avx2")
    # numba must not take the host's features (AVX-512) when only the CPU name is given.
    cpuinfo = Path("/proc/cpuinfo")
    amd = cpuinfo.exists() and "AuthenticAMD" in cpuinfo.read_text()
    assert env["NUMBA_CPU_NAME"] == ("znver3" if amd else "x86-64-v3") and env["NUMBA_CPU_FEATURES"] == ""
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert tier_env("avx512") == {}


def test_avx2_tier_worker_generates_avx2_code(tmp_path):
    """A gradops worker of the avx2 tier compiles for a Zen 3: its kernels use no 512-bit register."""
    import subprocess
    import sys

    from gradops.bench.orchestrate import worker_env

    probe = ("import numpy as np, gradops\n"
             "from gradops._fast import relu\n"
             "gradops.relu_grad(np.ones(64, np.float32), np.ones(64, np.float32), backend='fast')\n"
             "kernel = relu._select_alone\n"
             "asm = kernel.inspect_asm(kernel.signatures[0])\n"
             "print('zmm' in asm, 'ymm' in asm)\n")
    env = worker_env("gradops", "avx2") | {"NUMBA_CACHE_DIR": str(tmp_path)}
    printed = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert printed.stdout.split() == ["False", "True"], printed


def test_suite_s2_layers_and_symmetric_padding():
    from gradops.bench.workloads import DepthwiseFilterWorkload, DepthwiseForwardWorkload, DepthwiseWorkload

    s2 = suite(name="S2")
    assert set(suite()).isdisjoint(s2)
    b1, b4, b6 = s2["B1"], s2["B4"], s2["B6"]
    # PyTorch's padding k // 2: a stride-2 3x3 layer halves 112, 5x5 and 7x7 layers keep the size.
    assert b1.pads() == ((1, 1), (1, 1)) and b1.dy_nhwc() == (32, 56, 56, 96)
    assert b4.pads() == ((2, 2), (2, 2)) and b4.dy_nhwc() == (32, 28, 28, 240)
    assert b6.pads() == ((3, 3), (3, 3)) and b6.dy_nhwc() == (32, 56, 56, 96)
    assert b1.tf_attributes()["explicit_paddings"] == [0, 0, 1, 1, 1, 1, 0, 0]
    nchw = DepthwiseWorkload("x", "x", "float32", input_nhwc=(1, 8, 8, 4), kernel=5, padding="EXPLICIT",
                             data_format="NCHW")
    assert nchw.explicit_paddings() == [0, 0, 0, 0, 2, 2, 2, 2] and nchw.result_shape() == (1, 4, 8, 8)
    assert isinstance(s2["F1"], DepthwiseForwardWorkload) and s2["F1"].result_shape() == (32, 56, 56, 144)
    assert isinstance(s2["W3"], DepthwiseFilterWorkload) and s2["W3"].result_shape() == (5, 5, 1152, 1)
    assert [s2[i].dtype for i in ("B8", "U6")] == ["float16", "float16"]
    assert s2["A1"].bytes_moved() == 3 * 16 << 10 and s2["A4"].bytes_moved() == 3 * 256 << 20


def test_depthwise_forward_and_filter_grad_peers_agree(tmp_path):
    """PyTorch's grouped convolution and its weight gradient, mapped from TF's filter layout, match
    gradops' reference on quick S2 layers (each worker a real process)."""
    pytest.importorskip("torch")
    from gradops.cli import main

    report_path = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--only", "F2", "W4", "--peers", "torch", "--reps", "1",
                 "--json", str(report_path)]) == 0
    report = json.loads(report_path.read_text())
    assert report["suite"] == "S2"
    for workload in report["workloads"]:
        for name in ("gradops", "torch"):
            variants = workload["results"][name]["variants"]
            assert variants and all(v["status"] == "ok" and v["check"]["passed"] for v in variants), variants


def test_size_sweep_doubles_twice_per_step_and_charts(tmp_path):
    from gradops.bench.report import sweep_chart
    from gradops.bench.suite import SWEEP_BYTES, SWEEP_FAMILIES

    sweep = suite(name="sweep")
    assert len(sweep) == len(SWEEP_FAMILIES) * len(SWEEP_BYTES) and SWEEP_BYTES[0] == 16 << 10
    for family in SWEEP_FAMILIES:
        sizes = [4 * np.prod(w.result_shape()) for i, w in sweep.items() if i.startswith(family)]
        assert sizes == list(SWEEP_BYTES), family  # 16 KiB ... 256 MiB of float32 output
    entries = [w.describe() | {"summary": {o: {"ratio_to_fastest_peer": 0.5 + i / 40} for o in ("fresh", "out")}}
               for i, w in enumerate(sweep.values())]
    report = {"workloads": entries, "reps": 7, "platform": {"processor": "test CPU", "tier": "avx2"}}
    sweep_chart(report, str(tmp_path / "sweep.png"))
    assert (tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_report_named_gz_is_compressed(tmp_path):
    """``--json NAME.json.gz`` writes gzip (the magic bytes 1f 8b), plain JSON otherwise; both
    read back to the same report."""
    import gzip

    from gradops.bench.cli import write_report

    report = {"suite": "S2", "workloads": [{"id": "A1", "ratio": 2.45}]}
    write_report(str(tmp_path / "r.json.gz"), report)
    write_report(str(tmp_path / "r.json"), report)
    assert (tmp_path / "r.json.gz").read_bytes()[:2] == b"\x1f\x8b"
    assert json.loads(gzip.decompress((tmp_path / "r.json.gz").read_bytes())) == report
    assert json.loads((tmp_path / "r.json").read_text()) == report


def test_ab_inprocess_times_the_base_package_it_is_given(tmp_path):
    """benchmarks/ab_inprocess.py must call the base package for A: a base whose relu_grad answers
    zeros gives different bits. (Until this test it patched a name the workloads do not read, and
    compared the tree with itself.)"""
    import subprocess
    import sys
    from pathlib import Path

    base = tmp_path / "gradops_zeros"
    base.mkdir()
    (base / "__init__.py").write_text("import numpy as np\n\n\ndef relu_grad(x, dy, out=None, backend=None):\n"
                                      "    return np.zeros_like(dy)\n")
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "ab_inprocess.py"
    printed = subprocess.run([sys.executable, str(script), "--base", str(tmp_path), "--name", "gradops_zeros",
                              "--rounds", "1", "--calls", "1", "A1"], capture_output=True, text=True, timeout=300)
    assert printed.returncode == 0, printed.stderr
    assert "same bits: False" in printed.stdout


def test_the_full_sweep_runs_every_size():
    """``gradops bench --suite sweep`` runs 16 KiB to 256 MiB (it ran the four sizes ``--quick``
    keeps, up to 1 MiB, until 2026-11-26); ``--only`` and the workers take every id."""
    import argparse

    from gradops.bench.cli import add_arguments, selected_workloads

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    full = selected_workloads(parser.parse_args(["--suite", "sweep"]))
    assert len(full) == 32 and full[-4:] == ("SR256M", "SN256M", "SL256M", "SD256M")
    assert selected_workloads(parser.parse_args(["--suite", "sweep", "--quick"]))[-1] == "SD1M"
    assert selected_workloads(parser.parse_args(["--only", "SD256M", "A1"])) == ("SD256M", "A1")
