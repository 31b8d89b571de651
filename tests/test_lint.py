"""The codebase stays clean: lint, format, the layer contract and types are part of the suite.

* ruff: lint and format.
* import-linter: the layers of docs/architecture.md import downwards only
  (``[tool.importlinter]`` in pyproject.toml).
* mypy: privframe/ type-checks (``[tool.mypy]``), so every ``# type: ignore``
  is needed (``warn_unused_ignores``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]], ids=str)
def test_ruff(args: list[str]) -> None:
    done = _run(sys.executable, "-m", "ruff", *args)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_layers_import_downwards_only() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    done = _run(str(lint_imports), "--no-cache")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_privframe_type_checks() -> None:
    done = _run(sys.executable, "-m", "mypy", "--no-incremental")
    assert done.returncode == 0, done.stdout + done.stderr
