"""The verdict of ``gradops check``: one :class:`Trial` per input, folded into one :class:`Row`
per operator x framework x convention (SPEC 4.4, 5.6, 6).

* ``agrees``: every element matches (bitwise for selects and copies, exactly for sums of
  dyadic data, else within a relative tolerance scaled by the sum of |terms|);
* ``known``: they differ, and every difference is a divergence the SPEC documents; the row
  names the SPEC section and counts the elements or cases;
* ``differs``: an unexplained difference, shown with its first element and both values;
* ``skipped``: the framework is not installed;
* ``absent``: the framework has no such operator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

Explain = Callable[[tuple[int, ...]], "str | None"]
TrialRun = Callable[[np.random.Generator, "str | None"], "list[Trial]"]


@dataclass
class Trial:
    """gradops' result against the framework's for one input. ``theirs`` may be the exception
    the framework raised. ``rtol == 0`` means bitwise (NaN matches NaN). ``explain`` names the
    documented divergence behind a differing element (None if there is none); ``known`` names
    one behind every differing element of the trial (e.g. a kernel that ignores an attribute),
    ``raises`` one that makes the framework raise (e.g. a kernel that rejects NCHW).
    ``notes`` are documented divergences of the case itself that values cannot show (e.g. two
    implementations of one peer sizing the output differently); each counts the case once."""

    label: str
    ours: np.ndarray
    theirs: np.ndarray | BaseException
    rtol: float = 0.0
    atol: float = 0.0
    explain: Explain | None = None
    known: str | None = None
    raises: str | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Probe:
    """One row to run: ``run(rng, backend)`` gives its trials, or is None where the framework
    has no such operator (``reason`` says why)."""

    operator: str
    framework: str
    convention: str
    run: TrialRun | None
    reason: str = ""


@dataclass
class Row:
    operator: str
    framework: str
    convention: str
    status: str = "agrees"
    detail: str = ""
    trials: int = 0
    # reason -> [differing elements, raising trials, noted trials]
    known: dict[str, list[int]] = field(default_factory=dict)

    def note(self, reason: str, elements: int = 0, raised: int = 0, cases: int = 0) -> None:
        counts = self.known.setdefault(reason, [0, 0, 0])
        counts[0] += elements
        counts[1] += raised
        counts[2] += cases


def _differing(ours: np.ndarray, theirs: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    a, b = ours.astype(np.float64), theirs.astype(ours.dtype).astype(np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    if rtol == 0:
        same = (a == b) & (np.signbit(a) == np.signbit(b))
    else:
        with np.errstate(invalid="ignore"):
            same = (a == b) | (np.abs(a - b) <= atol + rtol * np.abs(b))
    return ~(same | both_nan)


def judge(row: Row, trial: Trial) -> None:
    """Fold one trial into its row (the worst outcome wins: differs > known > agrees)."""
    row.trials += 1
    for reason in trial.notes:
        row.note(reason, cases=1)
    if isinstance(trial.theirs, BaseException):
        if trial.raises:
            row.note(trial.raises, raised=1)
        else:
            _differs(row, f"{trial.label}: the framework raised {_exception_text(trial.theirs)}")
        return
    theirs = np.asarray(trial.theirs)
    if theirs.shape != trial.ours.shape:
        _differs(row, f"{trial.label}: shape {list(trial.ours.shape)} vs framework {list(theirs.shape)}")
        return
    bad = _differing(trial.ours, theirs, trial.rtol, trial.atol)
    if not bad.any():
        return
    unexplained = []
    for index in map(tuple, np.argwhere(bad)):
        reason = trial.known or (trial.explain(index) if trial.explain else None)
        if reason is None:
            unexplained.append(index)
        else:
            row.note(reason, elements=1)
    if unexplained:
        i = unexplained[0]
        _differs(row, f"{trial.label}: {len(unexplained)} of {bad.size} elements differ, first at {list(map(int, i))}: "
                      f"gradops {trial.ours[i]}, framework {theirs[i]}")


def _exception_text(exc: BaseException) -> str:
    """``Type: message`` without TensorFlow's ``{{function_node ...}}`` prefix, one line."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = text.split("}} ")[-1]
    return f"{type(exc).__name__}: {text[:100]}"


def _differs(row: Row, detail: str) -> None:
    if row.status != "differs":
        row.status, row.detail = "differs", detail


def finish(row: Row) -> Row:
    """Set the row's status and detail once every trial is judged."""
    if row.status == "agrees" and row.known:
        row.status = "known"
        parts = []
        for reason, (elements, raised, cases) in sorted(row.known.items()):
            counts = ([f"{elements} element(s) differ"] if elements else []) + \
                ([f"{raised} case(s) raised"] if raised else []) + ([f"{cases} case(s)"] if cases else [])
            parts.append(f"{reason} ({', '.join(counts)})")
        row.detail = "; ".join(parts)
    elif row.status == "agrees":
        row.detail = f"{row.trials} case(s)"
    return row

