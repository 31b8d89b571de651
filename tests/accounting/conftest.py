"""The accounting tests' fixture ``make``: an accountant on each kind of ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

import privframe as pf
from privframe.accounting.accountant import Accountant


@pytest.fixture(params=["memory", "file"])
def make(request: pytest.FixtureRequest, tmp_path: Path):
    """Build an accountant on an in-memory or a file ledger."""

    def build(budget: pf.Budget, **kw: object) -> Accountant:
        ledger = None if request.param == "memory" else tmp_path / "spend.ledger"
        return Accountant(budget, ledger, **kw)  # type: ignore[arg-type]

    return build
