"""Hypothesis profiles of the fuzz suite, chosen by ``GRADOPS_FUZZ``: ``ci`` (default, a bounded run
inside the normal test suite) or ``long`` (``make fuzz``: a campaign). ``GRADOPS_FUZZ_COUNTS=FILE``
makes each process append its calls per target, outcomes and escaped exceptions to FILE as a JSON
line; ``python tests/fuzz/report.py FILE`` sums them (``make fuzz``)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

# Hostile sizes reach the memory limit by design: a low one keeps every call (and the machine,
# which other jobs share) small. Set before gradops reads it.
os.environ.setdefault("GRADOPS_MEMORY_LIMIT_MB", "1024")

# No shrinking: a failing case is reported as generated (shrinking a slow call took minutes).
_COMMON = dict(deadline=None, derandomize=False, print_blob=True, phases=[Phase.explicit, Phase.reuse, Phase.generate],
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
settings.register_profile("ci", max_examples=int(os.environ.get("GRADOPS_FUZZ_EXAMPLES", "25")), **_COMMON)
settings.register_profile("long", max_examples=int(os.environ.get("GRADOPS_FUZZ_EXAMPLES", "2000")), **_COMMON)
settings.load_profile(os.environ.get("GRADOPS_FUZZ", "ci"))
