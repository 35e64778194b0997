"""The conformance corpus (gradops vectors): deterministic export, replay on both backends,
failure detection, and expected outputs confirmed by an independent brute-force replayer.

The brute-force replayer below reads a corpus the way another runtime would, following only
docs/vectors.md (JSON + raw little-endian buffers + strides), and recomputes each case with
per-element loops written from the SPEC formulas (4.2, 4.3, 3.2-3.6, 5.3-5.4). It shares no
code with gradops.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from gradops.cli import main as gradops_main
from gradops.conformance.format import Comparison, Layout, dumps
from gradops.conformance.vectors import FAMILIES, check, export

NUMPY_TYPES = {"FLOAT32": np.float32, "FLOAT16": np.float16, "FLOAT64": np.float64, "INT32": np.int32,
               "INT16": np.int16, "INT8": np.int8, "BFLOAT16": ml_dtypes.bfloat16}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("vectors") / "corpus"
    export(directory)
    return directory


def files_of(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def case_documents(corpus: Path) -> list[tuple[Path, dict]]:
    manifest = json.loads((corpus / "manifest.json").read_text())
    return [(corpus / entry["file"], json.loads((corpus / entry["file"]).read_text())) for entry in manifest["cases"]]


# --- export -----------------------------------------------------------------------------------------

def test_export_twice_gives_identical_bytes(corpus, tmp_path):
    export(tmp_path / "again")
    first, second = files_of(corpus), files_of(tmp_path / "again")
    assert first.keys() == second.keys()
    assert [k for k in first if first[k] != second[k]] == []


def test_reexport_over_a_previous_corpus_replaces_it(tmp_path):
    target = tmp_path / "c"
    export(target, ["relu"])
    (target / "relu" / "stale.bin").write_bytes(b"x")
    with pytest.raises(ValueError, match="not part of its corpus"):
        export(target, ["relu"])
    (target / "relu" / "stale.bin").unlink()
    export(target, ["relu"])
    other = tmp_path / "foreign"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="manifest.json"):
        export(other, ["relu"])
    assert (other / "notes.txt").read_text() == "mine"


def test_manifest_and_case_files(corpus):
    manifest = json.loads((corpus / "manifest.json").read_text())
    assert manifest["format"] == "gradops-conformance-vectors"
    assert manifest["format_version"] == 1
    assert manifest["gradops_version"]
    assert set(manifest["families"]) == set(FAMILIES)
    assert manifest["case_count"] == len(manifest["cases"]) == sum(manifest["families"].values())
    ids = [c["id"] for c in manifest["cases"]]
    assert len(ids) == len(set(ids))
    total = sum(len(data) for data in files_of(corpus).values())
    assert total < 5_000_000, "the default corpus stays small (a few MB)"
    text = (corpus / "manifest.json").read_text()
    assert text == dumps(json.loads(text)), "JSON is written in its canonical, sorted form"


def test_corpus_covers_the_required_topics(corpus):
    docs = [doc for _, doc in case_documents(corpus)]
    tags = {t for doc in docs for t in doc["tags"]}
    spec_refs = {s for doc in docs for s in doc["spec"]}
    examples = {f"E{i}" for i in range(1, 20)} - {"E20"}
    assert examples <= spec_refs, f"worked examples missing: {sorted(examples - spec_refs)}"
    assert "E20" in spec_refs
    for tag in ("tie", "clamp", "crop", "size-1", "batch-axis", "channel-axis", "strided", "broadcast", "float16",
                "special-values", "nan-payload", "random", "dilation", "explicit", "same-odd-padding",
                "multiplier", "nchw", *(f"rank-{r}" for r in range(1, 9))):
        assert tag in tags, tag
    rules = {doc["outputs"][name]["compare"]["rule"] for doc in docs for name in doc["outputs"]}
    assert rules == {"bitwise", "ulps", "tolerance"}
    operators = {doc["operator"] for doc in docs}
    assert operators == {"DML_OPERATOR_ACTIVATION_RELU", "DML_OPERATOR_ACTIVATION_RELU_GRAD", "DML_OPERATOR_RESAMPLE",
                         "DML_OPERATOR_RESAMPLE1", "DML_OPERATOR_RESAMPLE2", "DML_OPERATOR_RESAMPLE_GRAD",
                         "DML_OPERATOR_RESAMPLE_GRAD1", "DepthwiseConv2dNative",
                         "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter"}


def test_padding_bytes_are_poison(corpus):
    # Every byte of a buffer that no described element covers is 0xFF (docs/vectors.md).
    path, doc = next((p, d) for p, d in case_documents(corpus) if d["id"] == "relu/layout-padded-rows-relu-grad-float32")
    for binding in (*doc["inputs"].values(), *doc["outputs"].values()):
        raw = (path.parent / binding["file"]).read_bytes()
        covered = np.zeros(len(raw), bool)
        size = np.dtype(NUMPY_TYPES[binding["DataType"]]).itemsize
        for index in np.ndindex(*binding["Sizes"]):
            offset = size * sum(i * s for i, s in zip(index, binding["Strides"]))
            covered[offset:offset + size] = True
        assert len(raw) == binding["TotalTensorSizeInBytes"]
        assert not covered.all()
        assert set(np.frombuffer(raw, np.uint8)[~covered].tolist()) == {0xFF}


# --- replay -----------------------------------------------------------------------------------------

def test_check_passes_on_the_exported_corpus(corpus, backend, capsys):
    assert gradops_main(["vectors", "check", str(corpus), "--backend", backend]) == 0
    out = capsys.readouterr().out
    manifest = json.loads((corpus / "manifest.json").read_text())
    assert f"{manifest['case_count']} of {manifest['case_count']} cases pass" in out
    assert out.count("PASS ") == manifest["case_count"]  # one line per case


def test_corrupted_expected_output_makes_check_fail(tmp_path, capsys):
    export(tmp_path / "c", ["relu", "resample"])
    corrupted = {"relu/e11-relu-grad-float32": b"\x01\x00\x80\x7f",  # a NaN payload where inf is expected
                 "resample/e5-resample2-linear-float32": np.float32(1e-3).tobytes()}  # 1e-3 vs 0: beyond atol
    for case_id, new_bytes in corrupted.items():
        path = tmp_path / "c" / f"{case_id}.json"
        doc = json.loads(path.read_text())
        (binding,) = doc["outputs"].values()
        raw = bytearray((path.parent / binding["file"]).read_bytes())
        raw[:len(new_bytes)] = new_bytes  # element [0, ..., 0] lives at byte offset 0 (docs/vectors.md)
        (path.parent / binding["file"]).write_bytes(bytes(raw))
    status = gradops_main(["vectors", "check", str(tmp_path / "c"), "--backend", "reference", "-q"])
    out = capsys.readouterr().out
    assert status == 2
    assert "FAIL  relu/e11-relu-grad-float32  OutputGradientTensor: 1 of 10 elements differ (bitwise); first at [0]" \
        in out
    assert "FAIL  resample/e5-resample2-linear-float32" in out and "(rtol 1e-05" in out
    assert out.count("FAIL") == 2


def test_check_reports_unreadable_cases_as_errors(tmp_path):
    export(tmp_path / "c", ["relu"])
    (tmp_path / "c" / "relu" / "e17-relu-float16.InputTensor.bin").write_bytes(b"\x00\x00")
    results = {r.id: r for r in check(tmp_path / "c", "reference")}
    assert results["relu/e17-relu-float16"].status == "error"
    assert "holds 2 bytes, expected TotalTensorSizeInBytes = 16" in results["relu/e17-relu-float16"].message
    assert sum(r.status != "pass" for r in results.values()) == 1


def test_check_of_a_missing_corpus_is_a_one_line_error(tmp_path, capsys):
    assert gradops_main(["vectors", "check", str(tmp_path)]) == 2
    assert "no manifest.json" in capsys.readouterr().err


# --- comparison rules ---------------------------------------------------------------------------------

def test_comparison_rules():
    f32 = np.float32
    expected = np.array([1.0, -0.0, np.nan, np.inf, 1e-30, 100], f32)
    bitwise = Comparison("bitwise")
    assert not bitwise.mismatches(expected.copy(), expected).any()
    actual = expected.copy()
    actual[1] = 0.0  # the sign of zero counts for bitwise
    assert bitwise.mismatches(actual, expected).tolist() == [False, True, False, False, False, False]
    ulps = Comparison("ulps", max_ulps=2)
    nudged = np.nextafter(np.nextafter(expected, f32(np.inf)), f32(np.inf))
    nudged[3] = np.finfo(f32).max  # next to inf on the ordered line, but an infinity must match exactly
    assert ulps.mismatches(nudged, expected).tolist() == [False, False, False, True, False, False]
    three_ulps = np.nextafter(nudged[:1], f32(np.inf))
    assert ulps.mismatches(three_ulps, expected[:1]).tolist() == [True]
    assert not ulps.mismatches(np.array([0.0], f32), np.array([-0.0], f32)).any()
    tolerance = Comparison("tolerance", rtol=1e-3, atol=1e-6)
    assert tolerance.mismatches(np.array([1.0009, 5e-7, np.nan, -np.inf, 0, 100.2], f32), expected).tolist() == \
        [False, False, False, True, False, True]


# --- independent brute-force replay -----------------------------------------------------------------

def read_tensor(folder: Path, binding: dict) -> np.ndarray:
    """The described elements of a binding, element by element from their byte offsets."""
    raw = (folder / binding["file"]).read_bytes()
    assert len(raw) == binding["TotalTensorSizeInBytes"]
    dtype = np.dtype(NUMPY_TYPES[binding["DataType"]]).newbyteorder("<")
    result = np.zeros(binding["Sizes"], dtype)
    for index in np.ndindex(*binding["Sizes"]):
        offset = dtype.itemsize * sum(i * s for i, s in zip(index, binding["Strides"]))
        result[index] = np.frombuffer(raw, dtype, count=1, offset=offset)[0]
    return result


def brute_relu(doc: dict, tensors: dict) -> dict:
    x = tensors["InputTensor"]
    if doc["operator"] == "DML_OPERATOR_ACTIVATION_RELU":
        values, output = x, "OutputTensor"
    else:
        values, output = tensors["InputGradientTensor"], "OutputGradientTensor"
    result = np.zeros(x.shape, x.dtype)  # +0 everywhere, then the select of SPEC 4.2 / 4.3
    for index in np.ndindex(*x.shape):
        if x[index] > 0:  # exact IEEE comparison: NaN is not > 0
            result[index] = values[index]
    return {output: result}


def axis_taps(n_in: int, n_out: int, scale: float, ipo: float, opo: float, mode: str, rule: str) -> list[list]:
    """SPEC 3.2-3.4 for one axis, in float32 with one rounding per step: for each output index
    the list of (input index, weight) taps of nonzero weight."""
    f = np.float32
    taps = []
    for o in range(n_out):
        x = f(f(f(o) - f(opo)) / f(scale)) - f(ipo)
        if mode == "nearest":
            i = math.floor(f(x + f(0.5))) if rule == "half_up" else (math.floor(x) if rule == "floor" else math.ceil(x))
            taps.append([(min(max(i, 0), n_in - 1), 1.0)])
            continue
        xc = min(max(x, f(0)), f(n_in - 1))
        i0 = math.floor(xc)
        i1 = min(i0 + 1, n_in - 1)
        w1 = f(xc - f(i0))
        w0 = f(f(1) - w1)
        taps.append([(i, float(w)) for i, w in ((i0, w0), (i1, w1)) if w != 0])
    return taps


def brute_resample(doc: dict, tensors: dict) -> dict:
    desc = doc["desc"]
    op = doc["operator"].removeprefix("DML_OPERATOR_")
    gradient = op.startswith("RESAMPLE_GRAD")
    source_name, target_name = (("InputGradientTensor", "OutputGradientTensor") if gradient
                                else ("InputTensor", "OutputTensor"))
    source = tensors[source_name]
    target_sizes = desc[target_name]["Sizes"]
    rank = source.ndim
    mode = "nearest" if desc["InterpolationMode"].endswith("NEAREST_NEIGHBOR") else "linear"
    if op in ("RESAMPLE2", "RESAMPLE_GRAD1"):
        rule = "floor" if desc["RoundingDirection"].endswith("DECREASING") else "ceil"
    else:
        rule = "half_up"
    if op == "RESAMPLE":  # v0: RESAMPLE1 on the half-pixel grid
        ipo, opo = [0.5] * rank, [-0.5] * rank
    elif gradient:  # per-tensor convention: forward ipo = GRAD OutputPixelOffsets (SPEC 3.6)
        ipo, opo = desc["OutputPixelOffsets"], desc["InputPixelOffsets"]
    else:
        ipo, opo = desc["InputPixelOffsets"], desc["OutputPixelOffsets"]
    forward_in, forward_out = (target_sizes, source.shape) if gradient else (source.shape, target_sizes)
    taps = [axis_taps(forward_in[d], forward_out[d], desc["Scales"][d], ipo[d], opo[d], mode, rule)
            for d in range(rank)]
    result = np.zeros(target_sizes, np.float64)
    for o in np.ndindex(*forward_out):
        for combination in np.ndindex(*[len(taps[d][o[d]]) for d in range(rank)]):
            chosen = [taps[d][o[d]][k] for d, k in enumerate(combination)]
            i = tuple(index for index, _ in chosen)
            weight = math.prod(w for _, w in chosen)
            if gradient:
                result[i] += weight * float(source[o])  # scatter: dX = J^T dY
            else:
                result[o] += weight * float(source[i])
    return {target_name: result.astype(source.dtype)}


def tf_window(size: int, k: int, s: int, d: int, padding: str, pads: list[int]) -> tuple[int, int]:
    """(output size, pad before), SPEC 5.3."""
    eff = (k - 1) * d + 1
    if padding == "VALID":
        return int((size - eff + s) / s), 0
    if padding == "SAME":
        out = (size + s - 1) // s
        return out, max(0, (out - 1) * s + eff - size) // 2
    return int((size + pads[0] + pads[1] - eff + s) / s), pads[0]


def brute_depthwise(doc: dict, tensors: dict) -> dict:
    attrs = doc["attrs"]
    fmt = attrs["data_format"]
    h_axis, w_axis = (1, 2) if fmt == "NHWC" else (2, 3)
    op = doc["operator"]
    filt_shape = tensors["filter"].shape if "filter" in tensors else tuple(tensors["filter_sizes"])
    in_shape = tensors["input"].shape if "input" in tensors else tuple(tensors["input_sizes"])
    to_nhwc = (lambda a: a) if fmt == "NHWC" else (lambda a: np.transpose(a, (0, 2, 3, 1)))
    batch, height, width = in_shape[0], in_shape[h_axis], in_shape[w_axis]
    fh, fw, channels, multiplier = filt_shape
    pads = attrs["explicit_paddings"] or [0] * 8
    oh, pt = tf_window(height, fh, attrs["strides"][h_axis], attrs["dilations"][h_axis], attrs["padding"],
                       pads[2 * h_axis:2 * h_axis + 2])
    ow, pl = tf_window(width, fw, attrs["strides"][w_axis], attrs["dilations"][w_axis], attrs["padding"],
                       pads[2 * w_axis:2 * w_axis + 2])
    sh, sw, dh, dw = attrs["strides"][h_axis], attrs["strides"][w_axis], attrs["dilations"][h_axis], \
        attrs["dilations"][w_axis]
    x = to_nhwc(tensors["input"]).astype(np.float64) if "input" in tensors else None
    f = tensors["filter"].astype(np.float64) if "filter" in tensors else None
    dy = to_nhwc(tensors["out_backprop"]).astype(np.float64) if "out_backprop" in tensors else None
    dtype = next(t.dtype for n, t in tensors.items() if not n.endswith("_sizes"))
    y = np.zeros((batch, oh, ow, channels * multiplier))
    dx = np.zeros((batch, height, width, channels))
    df = np.zeros((fh, fw, channels, multiplier))
    for b, oy, ox, c, m, ky, kx in np.ndindex(batch, oh, ow, channels, multiplier, fh, fw):
        iy, ix = oy * sh - pt + ky * dh, ox * sw - pl + kx * dw
        if not (0 <= iy < height and 0 <= ix < width):
            continue  # a tap in the padding contributes nothing (SPEC 5.4)
        if op == "DepthwiseConv2dNative":
            y[b, oy, ox, c * multiplier + m] += x[b, iy, ix, c] * f[ky, kx, c, m]
        elif op == "DepthwiseConv2dNativeBackpropInput":
            dx[b, iy, ix, c] += dy[b, oy, ox, c * multiplier + m] * f[ky, kx, c, m]
        else:
            df[ky, kx, c, m] += dy[b, oy, ox, c * multiplier + m] * x[b, iy, ix, c]
    result = {"DepthwiseConv2dNative": y, "DepthwiseConv2dNativeBackpropInput": dx,
              "DepthwiseConv2dNativeBackpropFilter": df}[op]
    if op != "DepthwiseConv2dNativeBackpropFilter" and fmt == "NCHW":
        result = np.transpose(result, (0, 3, 1, 2))
    return {"output": result.astype(dtype)}


BRUTE_FORCE = {"relu": brute_relu, "resample": brute_resample, "depthwise": brute_depthwise}


def brute_force_sample(corpus: Path) -> list[tuple[Path, dict]]:
    """Every worked-example case and every case with at most 600 output elements whose index
    in the manifest is even: a sample across all families, kept fast for per-element loops."""
    sample = []
    for position, (path, doc) in enumerate(case_documents(corpus)):
        outputs = sum(math.prod(b["Sizes"]) for b in doc["outputs"].values())
        work = outputs * (64 if doc["id"].startswith("depthwise") else 1)
        if "worked-example" in doc["tags"] or (position % 2 == 0 and work <= 600 * 64 and outputs <= 600):
            sample.append((path, doc))
    return sample


def test_expected_outputs_match_an_independent_brute_force(corpus):
    sample = brute_force_sample(corpus)
    families = {doc["id"].split("/")[0] for _, doc in sample}
    assert families == set(FAMILIES)
    assert len(sample) >= 200
    failures = []
    for path, doc in sample:
        tensors = {name: read_tensor(path.parent, b) for name, b in doc["inputs"].items()}
        computed = BRUTE_FORCE[doc["id"].split("/")[0]](doc, tensors)
        for name, binding in doc["outputs"].items():
            expected = read_tensor(path.parent, binding)
            rule = Comparison.from_json(binding["compare"], name)
            if expected.shape != computed[name].shape or rule.mismatches(computed[name], expected).any():
                failures.append(f"{doc['id']}.{name}")
    assert failures == []


def test_brute_force_reproduces_spec_numbers(corpus):
    """The brute force itself against numbers typed in from SPEC section 7 (so that a bug
    shared by the brute force and gradops could not hide)."""
    documents = {doc["id"]: (path, doc) for path, doc in case_documents(corpus)}

    def run(case_id: str) -> np.ndarray:
        path, doc = documents[case_id]
        tensors = {name: read_tensor(path.parent, b) for name, b in doc["inputs"].items()}
        (result,) = BRUTE_FORCE[case_id.split("/")[0]](doc, tensors).values()
        return result.astype(np.float64).ravel()

    np.testing.assert_array_equal(run("resample/e1-resample1-half-pixel-float32"), [3, 4, 4])
    np.testing.assert_array_equal(run("resample/e1-resample1-half-pixel-grad-float32"), [0, 0, 4, 11])
    np.testing.assert_array_equal(run("resample/e1-resample2-dec-half-pixel-grad-float32"), [9, 6, 0, 0])
    np.testing.assert_array_equal(run("resample/e2-grad-scale3"), [20, 20, 7, 0, 0])
    np.testing.assert_array_equal(run("resample/e4-grad1-dec"), [10, 0, 20, 0])
    np.testing.assert_array_equal(run("resample/e4-grad1-inc"), [0, 10, 0, 20])
    np.testing.assert_allclose(run("resample/e5-grad1-linear-float32"), [2, 25 / 6, 19 / 3, 8.5], rtol=1e-6)
    np.testing.assert_array_equal(run("resample/e7-clamp-grad"), [1, 2, 3, 15])
    np.testing.assert_array_equal(run("resample/e9-grad1-1d"), [10, 5])
    np.testing.assert_array_equal(run("resample/e18-grad-float16-accumulation"), [4096])
    x_bits = run("relu/e11-relu-grad-float32")
    np.testing.assert_array_equal(x_bits, [np.inf, np.nan, 0, 0, 0, 0, -0.0, 0, 2, 0])
    assert np.signbit(x_bits).tolist() == [False] * 6 + [True] + [False] * 3
    np.testing.assert_array_equal(run("depthwise/e12-backprop-input-float32")[:5], [15, 34, 20, 44, 25])
    np.testing.assert_array_equal(run("depthwise/e14-backprop-input-dilation2")[[0, 4, 12, 20, 24]], [7, -7, 14, 7, 7])
    np.testing.assert_array_equal(run("depthwise/e16-backprop-filter"), [12, 1, 16, 2, 24, 4, 28, 5])


def test_layout_round_trip_with_broadcast_strides():
    layout = Layout("FLOAT16", (2, 3), (0, 1), 8)
    values = np.array([[1, 2, 3], [1, 2, 3]], np.float16)
    raw = layout.encode(values)
    assert raw == np.array([1, 2, 3], np.float16).tobytes() + b"\xff\xff"
    np.testing.assert_array_equal(layout.view(raw), values)
    with pytest.raises(ValueError, match="must be equal"):
        layout.encode(np.array([[1, 2, 3], [4, 5, 6]], np.float16))


def test_cli_export_prints_a_summary(tmp_path, capsys):
    assert gradops_main(["vectors", "export", str(tmp_path / "c"), "--family", "relu"]) == 0
    assert "cases (relu" in capsys.readouterr().out
    shutil.rmtree(tmp_path / "c")
