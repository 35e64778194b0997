"""Export a corpus of test vectors and replay one against gradops (docs/vectors.md).

``export(directory)`` writes ``manifest.json`` and, per case, ``<family>/<name>.json`` with
its raw ``.bin`` buffers. Output is deterministic: fixed seeds, sorted keys, stable float
formatting, no timestamps, so exporting twice gives identical bytes.

``check(directory, backend)`` reads a corpus the way another runtime would (JSON and raw
buffers only, no state shared with the exporter), runs each case through gradops and compares
every described output element with the rule of the case.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .. import __version__
from ..dml import OperatorDesc, dml_name
from ..errors import DescriptorError
from ..registry import FAMILY_MODULES
from .cases import BASE_SEED, Case, TfOp, desc_from_json, run_dml
from .format import FORMAT_NAME, FORMAT_VERSION, Comparison, Layout, as_bits, dumps

# Family name -> module with ``cases() -> list[Case]``; a family whose operator module is not
# installed yet is skipped at export (its import fails) and reported.
FAMILIES = {
    "relu": "gradops.conformance.cases_relu",
    "resample": "gradops.conformance.cases_resample",
    "depthwise": "gradops.conformance.cases_depthwise",
}
MANIFEST = "manifest.json"


def build_cases(families: Iterable[str] | None = None) -> list[Case]:
    """Every case of the selected families (all by default), in a stable order."""
    selected = list(FAMILIES) if families is None else list(families)
    unknown = set(selected) - set(FAMILIES)
    if unknown:
        raise DescriptorError.expected("families", f"some of {sorted(FAMILIES)}", sorted(unknown))
    cases = []
    for family in selected:
        cases.extend(importlib.import_module(FAMILIES[family]).cases())
    return cases


def manifest_document(cases: Sequence[Case]) -> dict[str, Any]:
    families: dict[str, int] = {}
    for case in cases:
        families[case.family] = families.get(case.family, 0) + 1
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "gradops_version": __version__,
        "base_seed": BASE_SEED,
        "case_count": len(cases),
        "families": families,
        "cases": [{"id": c.id, "file": f"{c.family}/{c.name}.json", "api": c.api, "operator": c.operator,
                   "tags": sorted(c.tags)} for c in cases],
    }


def export(directory: Path, families: Iterable[str] | None = None) -> dict[str, Any]:
    """Write the corpus into ``directory`` and return its manifest.

    ``directory`` must be absent, empty, or hold a corpus written earlier (whose files are
    replaced), so that nothing stale survives next to the new cases.
    """
    directory = Path(directory)
    _clear_previous(directory)
    cases = build_cases(families)
    manifest = manifest_document(cases)
    for case in cases:
        folder = directory / case.family
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{case.name}.json").write_text(dumps(case.document()), encoding="ascii")
        for file_name, data in case.files().items():
            (folder / file_name).write_bytes(data)
    (directory / MANIFEST).write_text(dumps(manifest), encoding="ascii")
    return manifest


def _clear_previous(directory: Path) -> None:
    """Remove a previous corpus from ``directory``; refuse (deleting nothing) if it holds any
    file that the previous corpus's manifest does not account for."""
    if not directory.exists():
        return
    if not directory.is_dir():
        raise DescriptorError(str(directory), "exists and is not a directory")
    present = {p for p in directory.rglob("*") if p.is_file()}
    if not present:
        return
    manifest = read_manifest(directory, field=f"{directory} (not empty, so it must hold a previous corpus)")
    owned = {directory / MANIFEST}
    for entry in manifest["cases"]:
        path = directory / entry["file"]
        document = read_json(path)
        owned.add(path)
        owned.update(path.parent / b["file"] for b in (*document["inputs"].values(), *document["outputs"].values()))
    foreign = sorted(str(p.relative_to(directory)) for p in present - owned)
    if foreign:
        raise DescriptorError(str(directory), f"holds files that are not part of its corpus: {foreign[:5]}")
    for path in present:
        path.unlink()
    for folder in sorted((p for p in directory.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()


# --- replay -------------------------------------------------------------------------------------

def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DescriptorError(str(path), f"cannot read: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise DescriptorError(str(path), f"invalid JSON at line {exc.lineno}: {exc.msg}") from exc


def read_manifest(directory: Path, field: str | None = None) -> dict[str, Any]:
    path = Path(directory) / MANIFEST
    if not path.exists():
        raise DescriptorError(field or str(directory), f"no {MANIFEST}: not a gradops vectors corpus")
    manifest = read_json(path)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise DescriptorError(str(path), f'expected "format": "{FORMAT_NAME}"')
    if manifest.get("format_version") != FORMAT_VERSION:
        raise DescriptorError(str(path), f"format_version {manifest.get('format_version')} is not supported "
                              f"(this gradops reads version {FORMAT_VERSION})")
    return manifest


@dataclass(frozen=True)
class CaseResult:
    """The outcome of one case: ``pass``, ``fail`` (an output differs) or ``error`` (gradops
    rejected the case or a file is unreadable)."""

    id: str
    status: str
    message: str = ""


def _dml_descriptors() -> dict[str, type[OperatorDesc]]:
    """DirectML operator type -> gradops descriptor class, from every operator family module."""
    classes = {}
    for module_name in FAMILY_MODULES:
        for obj in vars(importlib.import_module(module_name)).values():
            if isinstance(obj, type) and issubclass(obj, OperatorDesc) and "OPERATOR_TYPE" in vars(obj):
                classes[obj.OPERATOR_TYPE] = obj
    return classes


def _tf_ops() -> dict[str, TfOp]:
    try:
        module = importlib.import_module(FAMILIES["depthwise"])
    except ImportError:
        return {}
    return {op.name: op for op in module.TF_OPS}


def _read_binding(folder: Path, doc: Mapping[str, Any], field: str) -> tuple[Layout, bytes]:
    layout = Layout.from_json(doc, field)
    path = folder / str(doc["file"])
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DescriptorError(f"{field}.file", f"cannot read {path}: {exc.strerror}") from exc
    if len(data) != layout.total_bytes:
        raise DescriptorError(f"{field}.file", f"{path.name} holds {len(data)} bytes, expected "
                              f"TotalTensorSizeInBytes = {layout.total_bytes}")
    return layout, data


def replay_case(folder: Path, document: Mapping[str, Any], backend: str, *,
                dml_descriptors: Mapping[str, type[OperatorDesc]], tf_ops: Mapping[str, TfOp]
                ) -> dict[str, np.ndarray]:
    """Run one case document through gradops; returns each output's described elements."""
    inputs = {name: _read_binding(folder, doc, f"inputs.{name}") for name, doc in document["inputs"].items()}
    out_layouts = {name: Layout.from_json(doc, f"outputs.{name}") for name, doc in document["outputs"].items()}
    operator = document["operator"]
    if document["api"] == "DirectML":
        if operator not in dml_descriptors:
            raise DescriptorError("operator", f"{operator} is not implemented by this gradops")
        desc_cls = dml_descriptors[operator]
        desc = desc_from_json(desc_cls, document["desc"])
        desc.validate(document["feature_level"])  # the case also claims the feature level it needs
        buffers = run_dml(desc, [inputs[dml_name(n)][1] for n in desc_cls.INPUTS], backend)
        return {name: out_layouts[name].view(b) for name, b in zip(map(dml_name, desc_cls.OUTPUTS), buffers)}
    if operator not in tf_ops:
        raise DescriptorError("operator", f"{operator} is not implemented by this gradops")
    op = tf_ops[operator]
    arrays = {name: np.array(layout.view(data)) for name, (layout, data) in inputs.items()}
    return {op.output: op.run(arrays, document["attrs"], backend)}


def compare_outputs(folder: Path, document: Mapping[str, Any], actual: Mapping[str, np.ndarray]) -> list[str]:
    """One message per output that fails its comparison rule (empty when all pass)."""
    problems = []
    for name, doc in document["outputs"].items():
        layout, data = _read_binding(folder, doc, f"outputs.{name}")
        expected = layout.view(data)
        rule = Comparison.from_json(doc.get("compare"), f"outputs.{name}.compare")
        result = np.asarray(actual[name])
        if result.shape != expected.shape or result.dtype != expected.dtype:
            problems.append(f"{name}: shape {list(result.shape)} {result.dtype}, expected "
                            f"{list(expected.shape)} {expected.dtype}")
            continue
        bad = rule.mismatches(result, expected)
        if bad.any():
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            problems.append(f"{name}: {int(bad.sum())} of {bad.size} elements differ ({rule.describe()}); first "
                            f"at {list(first)}: got {_show(result[first])}, expected {_show(expected[first])}")
    return problems


def _show(value: np.generic) -> str:
    bits = int(as_bits(np.asarray(value).reshape(1))[0])
    width = 2 * np.asarray(value).dtype.itemsize
    return f"{value!s} (0x{bits:0{width}x})"


def check(directory: Path, backend: str | None = None, only: Sequence[str] = ()) -> list[CaseResult]:
    """Replay every case of the corpus in ``directory`` (or those whose id contains one of
    ``only``) with ``backend``; one :class:`CaseResult` per case, in manifest order."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    dml_descriptors, tf_ops = _dml_descriptors(), _tf_ops()
    results = []
    for entry in manifest["cases"]:
        if only and not any(pattern in entry["id"] for pattern in only):
            continue
        path = directory / entry["file"]
        try:
            document = read_json(path)
            actual = replay_case(path.parent, document, backend or "auto", dml_descriptors=dml_descriptors,
                                 tf_ops=tf_ops)
            problems = compare_outputs(path.parent, document, actual)
        except Exception as exc:  # noqa: BLE001 - one broken case is reported, the others still run
            results.append(CaseResult(entry["id"], "error", f"{type(exc).__name__}: {exc}"))
            continue
        results.append(CaseResult(entry["id"], "fail" if problems else "pass", "; ".join(problems)))
    return results
