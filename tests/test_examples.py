"""Every SPEC section 7 worked example registered in gradops.examples, on both backends.

The expected numbers in gradops/examples/*.py are typed in from the SPEC; this runs each
example and requires every check to match (exact unless the example states a tolerance)."""

from __future__ import annotations

import pytest

from gradops.examples import all_examples

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
