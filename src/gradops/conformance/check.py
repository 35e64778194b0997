"""``gradops check``: gradops against the installed frameworks, live (SPEC sections 4.4, 5.6, 6).

For every operator and every framework convention that an installed framework can express,
both sides run on edge cases and seeded random cases, and the outcome is one row of a table
(:mod:`.verdict`): ``agrees``, ``known`` (every difference is a divergence the SPEC documents,
named with its section), ``differs`` (unexplained), ``skipped`` (not installed) or ``absent``
(the framework has no such operator: ONNX defines no ReLU gradient).

The peers, each imported lazily and once (:mod:`.peers`): TensorFlow, PyTorch and JAX
(:mod:`.check_relu`, :mod:`.check_resample`, :mod:`.check_depthwise`), and ONNX's two
implementations, onnxruntime's CPU provider and the ``onnx`` package's reference evaluator
(:mod:`.check_onnx`). Resample conventions go through
:class:`gradops.conventions.DmlResampleParams`, the documented framework -> DirectML mappings.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from . import check_depthwise, check_onnx, check_relu, check_resample
from .peers import FRAMEWORKS, Missing, framework
from .verdict import Probe, Row, Trial, finish, judge

__all__ = ["FRAMEWORKS", "Probe", "Row", "Trial", "judge", "print_report", "probes", "run_checks"]


def probes() -> list[Probe]:
    """Every row of the table, operator by operator."""
    every = check_relu.probes() + check_resample.probes() + check_depthwise.probes() + check_onnx.probes()
    operators = list(dict.fromkeys(p.operator for p in every))
    return sorted(every, key=lambda p: operators.index(p.operator))


def run_checks(ops: Sequence[str] = (), frameworks: Sequence[str] = (), backend: str | None = None,
               seed: int = 0) -> list[Row]:
    """Run every selected probe; ``ops`` and ``frameworks`` filter (substring / exact name)."""
    rows = []
    for probe in probes():
        if ops and not any(o.lower() in probe.operator.lower() for o in ops):
            continue
        if frameworks and probe.framework not in frameworks:
            continue
        row = Row(probe.operator, probe.framework, probe.convention)
        if probe.run is None:
            row.status, row.detail = "absent", probe.reason
            rows.append(row)
            continue
        try:
            framework(probe.framework)
            for trial in probe.run(np.random.default_rng(seed), backend):
                judge(row, trial)
            finish(row)
        except Missing as exc:
            row.status, row.detail = "skipped", str(exc)
        rows.append(row)
    return rows


_STYLES = {"agrees": "green", "known": "yellow", "differs": "red bold", "skipped": "dim", "absent": "dim"}
_LABELS = {"agrees": "agrees", "known": "known divergence", "differs": "DIFFERS", "skipped": "skipped",
           "absent": "no such operator"}


def print_report(rows: Sequence[Row]) -> int:
    """Print the table; return the number of rows that differ without a documented reason."""
    from rich.markup import escape
    from rich.table import Table

    from ..cli import _console

    table = Table(title="gradops against the installed frameworks (SPEC 4.4, 5.6, 6)")
    for column in ("operator", "framework", "convention", "result", "detail"):
        table.add_column(column, overflow="fold")
    for row in rows:
        style = _STYLES[row.status]
        table.add_row(escape(row.operator), row.framework, escape(row.convention),
                      f"[{style}]{_LABELS[row.status]}[/{style}]", escape(row.detail))
    console = _console()
    console.print(table)
    counts = {status: sum(r.status == status for r in rows) for status in _LABELS}
    console.print(", ".join(f"{counts[s]} {_LABELS[s]}" for s in _LABELS))
    return counts["differs"]
