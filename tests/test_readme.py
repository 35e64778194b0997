"""The README's Python snippets run as written (in order, sharing one namespace)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 4
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - our own documentation
    np.testing.assert_array_equal(namespace["y"], [[[[1, 1, 2]]]])
    np.testing.assert_array_equal(np.frombuffer(namespace["dx_buffer"], np.float32), [10, 0, 30, 0, 20, 0])
    assert namespace["dx"].shape == (8, 56, 56, 32)
