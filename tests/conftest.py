"""Shared fixtures: the independently computed reference values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

_ROOT = Path(__file__).resolve().parent.parent
# The shared copy beside the checkout is authoritative; the vendored copy keeps
# the suite runnable from a bare clone.
_CANDIDATES = (
    _ROOT.parent / "shared" / "reference" / "reference_values.json",
    _ROOT / "tests" / "data" / "reference_values.json",
)


@pytest.fixture(scope="session")
def reference_values() -> dict[str, Any]:
    for path in _CANDIDATES:
        if path.is_file():
            return json.loads(path.read_text())
    searched = ", ".join(map(str, _CANDIDATES))
    raise FileNotFoundError(f"reference_values.json not found in {searched}")
