"""Fixtures for every test and doctest (``privframe/`` and ``tests/``).

privframe records the ledgers it opens in a per-user state file
(:func:`privframe.ledger.state_file`). Tests and doctests must never write
the real one, in the home directory: each gets its own, empty state directory.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_state_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Point PRIVFRAME_STATE_DIR at a fresh directory (subprocesses inherit it)."""
    state = tmp_path_factory.mktemp("privframe-state")
    monkeypatch.setenv("PRIVFRAME_STATE_DIR", str(state))
    return state
