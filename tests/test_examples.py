"""Every SPEC section 7 worked example registered in gradops.examples, on both backends.

The expected numbers in gradops/examples/*.py are typed in from the SPEC; this runs each
example and requires every check to match (exact unless the example states a tolerance)."""

from __future__ import annotations

import pytest

import os

from gradops import examples as examples_module
from gradops.examples import all_examples, run_examples

EXAMPLES = all_examples()


def test_examples_are_unique_and_ordered():
    ids = [ex.id for ex in EXAMPLES]
    assert len(ids) == len(set(ids))
    assert ids == sorted(ids, key=lambda i: int(i[1:]))
    assert {"E11", "E17"} <= set(ids)


@pytest.mark.parametrize("example", EXAMPLES, ids=[ex.id for ex in EXAMPLES])
def test_example_matches_spec(example, backend):
    checks = example.run(backend)
    assert checks, f"{example.id} produced no checks"
    failed = [c.label for c in checks if not c.passed]
    assert not failed, f"{example.id}: {failed} differ from the SPEC numbers"


def test_run_examples_runs_the_families_side_by_side_and_keeps_every_check(monkeypatch):
    """``gradops examples`` runs the families in parallel processes; every chosen example's
    checks come back, and they match the SPEC numbers."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    started, executor = [], examples_module.ProcessPoolExecutor
    monkeypatch.setattr(examples_module, "ProcessPoolExecutor",
                        lambda *args, **kwargs: started.append(args) or executor(*args, **kwargs))
    chosen = [ex for ex in EXAMPLES if ex.id in ("E1", "E2", "E11", "E12")]  # three families
    results = run_examples(chosen, "reference")
    assert started == [(2,)]  # this process takes one family, two workers the others
    assert sorted(results, key=lambda i: int(i[1:])) == ["E1", "E2", "E11", "E12"]
    assert all(check.passed for checks in results.values() for check in checks)
    assert all(results.values())



def test_run_examples_runs_here_what_a_worker_could_not(monkeypatch):
    """Where processes cannot be started (a sandbox, say), the examples still run, here."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)

    def no_processes(*args, **kwargs):
        raise OSError("no processes here")
    monkeypatch.setattr(examples_module, "ProcessPoolExecutor", no_processes)
    chosen = [ex for ex in EXAMPLES if ex.id in ("E1", "E11")]
    results = run_examples(chosen, "reference")
    assert sorted(results) == ["E1", "E11"] and all(c.passed for checks in results.values() for c in checks)
