"""The examples run as documented (the README's demo command runs one of them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    assert "Traceback" not in done.stderr


def test_demo_refuses_the_overspend() -> None:
    demo = EXAMPLES[0].parent / "noise_and_budget.py"
    out = subprocess.run(
        [sys.executable, str(demo)], capture_output=True, text=True, timeout=300, check=True
    ).stdout
    assert "refused before any noise was drawn" in out
    assert "rho" in out
