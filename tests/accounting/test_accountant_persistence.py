"""The accountant on a ledger file: reopening it, and threads and processes spending at once."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import textwrap
import threading
from fractions import Fraction
from pathlib import Path

import pytest

import privframe as pf
from privframe.accounting.accountant import Accountant
from privframe.errors import (
    BudgetExceededError,
    LedgerError,
)

ROOT = Path(__file__).resolve().parents[2]


def test_reopen_continues(tmp_path: Path) -> None:
    path = tmp_path / "spend.ledger"
    with Accountant(pf.zCDP(1.0), path) as acct:
        acct.spend(pf.zCDP(0.25), label="q1")
        first = acct.entries
    with Accountant(pf.zCDP(1.0), str(path)) as acct:
        assert acct.entries == first
        assert acct.spent == pf.zCDP(0.25)
        acct.spend(pf.zCDP(0.75), label="q2")
        with pytest.raises(BudgetExceededError):
            acct.spend(pf.zCDP(0.125))
    with Accountant(pf.zCDP(1.0), path) as acct:
        assert [e.label for e in acct.entries] == ["q1", "q2"]
        assert acct.remaining == pf.zCDP(0.0)


def test_reopen_with_larger_budget_refused(tmp_path: Path) -> None:
    path = tmp_path / "spend.ledger"
    Accountant(pf.zCDP(1.0), path).close()
    with pytest.raises(LedgerError, match="a persisted ledger keeps its budget") as err:
        Accountant(pf.zCDP(2.0), path)
    assert "zCDP(rho=1.0" in str(err.value)
    assert "zCDP(rho=2.0" in str(err.value)


def test_reopen_with_smaller_budget_enforces_it(tmp_path: Path) -> None:
    path = tmp_path / "spend.ledger"
    with Accountant(pf.zCDP(1.0), path) as acct:
        acct.spend(pf.zCDP(0.5))
    with Accountant(pf.zCDP(0.75), path) as acct:
        assert acct.budget == pf.zCDP(0.75)
        assert acct.remaining == pf.zCDP(0.25)
        with pytest.raises(BudgetExceededError):
            acct.spend(pf.zCDP(0.5))
        acct.spend(pf.zCDP(0.25))
    with Accountant(pf.zCDP(0.25), path) as acct:  # already over this cap
        assert acct.spent == pf.zCDP(1.0) - pf.zCDP(0.25)
        assert acct.remaining == pf.zCDP(0.0)
        with pytest.raises(BudgetExceededError):
            acct.spend(pf.zCDP(1e-9))
        acct.spend(pf.zCDP(0.0))  # zero cost still fits and is recorded
        assert acct.report().remaining_rho == 0.0


def test_foreign_file_is_not_reset(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("my notes\n")
    with pytest.raises(LedgerError, match="not a SQLite database"):
        Accountant(pf.zCDP(1.0), path)
    assert path.read_text() == "my notes\n"


def test_truncated_ledger_keeps_no_fresh_budget(tmp_path: Path) -> None:
    path = tmp_path / "spend.ledger"
    with Accountant(pf.zCDP(1.0), path) as acct:
        acct.spend(pf.zCDP(0.9))
    with open(path, "r+b") as fh:
        fh.truncate(0)
    with pytest.raises(LedgerError, match="not a privframe ledger"):
        Accountant(pf.zCDP(1.0), path)


def test_copy_of_open_ledger_keeps_its_spends(tmp_path: Path) -> None:
    path = tmp_path / "spend.ledger"
    copy = tmp_path / "copy.ledger"
    with Accountant(pf.zCDP(1.0), path) as acct:
        acct.spend(pf.zCDP(0.9), label="q1")
        copy.write_bytes(path.read_bytes())  # only the main file
    with Accountant(pf.zCDP(1.0), copy) as again:
        assert [e.label for e in again.entries] == ["q1"]
        assert again.remaining.rho <= 0.1


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="does not exist"):
        Accountant(pf.zCDP(1.0), tmp_path / "missing" / "spend.ledger")


def test_closed_accountant(tmp_path: Path) -> None:
    acct = Accountant(pf.zCDP(1.0), tmp_path / "spend.ledger")
    acct.close()
    with pytest.raises(LedgerError, match="closed"):
        acct.spend(pf.zCDP(0.1))


# --------------------------------------------------------------------------- concurrency


def _hammer(acct: Accountant, n: int, cost: float, successes: list[int]) -> None:
    ok = 0
    for _ in range(n):
        try:
            acct.spend(pf.zCDP(cost))
            ok += 1
        except BudgetExceededError:
            pass
    successes.append(ok)


def test_threads_never_exceed_budget(make) -> None:
    acct = make(pf.zCDP(1.0))
    successes: list[int] = []
    threads = [threading.Thread(target=_hammer, args=(acct, 25, 0.01, successes)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    entries = acct.entries
    assert sum(successes) == len(entries) == 100  # 100 x 1/100 = 1 exactly
    assert sum(e.exact_rho for e in entries) == 1
    assert [e.index for e in entries] == list(range(100))


def test_threads_with_separate_accountants_on_one_file(tmp_path: Path) -> None:
    path = tmp_path / "spend.ledger"
    accts = [Accountant(pf.zCDP(0.5), path) for _ in range(4)]
    successes: list[int] = []
    threads = [threading.Thread(target=_hammer, args=(a, 30, 0.01, successes)) for a in accts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = sum(e.exact_rho for e in accts[0].entries)
    assert total == Fraction(1, 2)
    assert sum(successes) == len(accts[0].entries) == 50
    for a in accts:
        a.close()


def _process_worker(path: str, n: int, cost: float, queue: multiprocessing.Queue) -> None:
    successes: list[int] = []
    with Accountant(pf.zCDP(1.0), path) as acct:
        _hammer(acct, n, cost, successes)
    queue.put(successes[0])


def test_processes_never_exceed_budget(tmp_path: Path) -> None:
    # The processes also race to create the file: exactly one creates it.
    path = str(tmp_path / "spend.ledger")
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_process_worker, args=(path, 40, 0.01, queue)) for _ in range(3)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    with Accountant(pf.zCDP(1.0), path) as acct:
        entries = acct.entries
    assert sum(results) == len(entries) == 100
    assert sum(e.exact_rho for e in entries) == 1
    assert [e.index for e in entries] == list(range(100))


def test_crash_right_after_spend_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "spend.ledger"
    code = textwrap.dedent(
        f"""
        import os
        import privframe as pf
        from privframe.accounting.accountant import Accountant
        acct = Accountant(pf.zCDP(1.0), {str(path)!r})
        acct.spend(pf.zCDP(0.25), label="before-crash")
        os._exit(1)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=60)
    assert proc.returncode == 1, proc.stderr.decode()
    with Accountant(pf.zCDP(1.0), path) as acct:
        assert [(e.label, e.rho) for e in acct.entries] == [("before-crash", 0.25)]
        assert acct.remaining == pf.zCDP(0.75)
