"""Ledger files of PureDP and ApproxDP budgets: their kind, reopening, concurrency, crashes, damage.

The guarantees of a zCDP ledger file hold for the other kinds: no overspend
from threads or processes sharing it, nothing lost to a crash right after a
spend, and tampering detected. A file keeps its kind: opened with a budget
of another kind it is refused, saying what to pass.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import subprocess
import sys
import textwrap
import threading
from fractions import Fraction
from pathlib import Path

import pytest

import privframe as pf
from privframe.accounting._composition import Composition, description_events
from privframe.accounting.accountant import Accountant
from privframe.accounting.events import LaplaceEvent
from privframe.accounting.ledger import SQLiteLedger
from privframe.errors import BudgetExceededError, LedgerError

ROOT = Path(__file__).resolve().parents[2]
LAPLACE = {"events": [LaplaceEvent(20.0).to_dict()]}  # ε = 0.05

# --------------------------------------------------------------------------- kind


@pytest.mark.parametrize(
    ("created", "opened", "says"),
    [
        (pf.PureDP(1.0), pf.zCDP(1.0), "is a PureDP ledger"),
        (pf.PureDP(1.0), pf.ApproxDP(1.0, 1e-6), "with the ApproxDP budget"),
        (pf.ApproxDP(1.0, 1e-6), pf.PureDP(1.0), "is an ApproxDP ledger"),
        (pf.ApproxDP(1.0, 1e-6), pf.zCDP(0.1), "Pass an ApproxDP budget no larger than"),
        (pf.zCDP(1.0), pf.PureDP(1.0), "a ledger keeps the kind of budget"),
        (pf.zCDP(1.0), pf.ApproxDP(1.0, 1e-6), "a ledger keeps the kind of budget"),
    ],
)
def test_a_ledger_of_one_kind_refuses_to_open_as_another(
    tmp_path: Path, created: pf.Budget, opened: pf.Budget, says: str
) -> None:
    path = tmp_path / "kind.ledger"
    Accountant(created, path).close()
    with pytest.raises(LedgerError) as err:
        Accountant(opened, path)
    message = str(err.value)
    assert says in message
    assert type(created).__name__ in message
    assert type(opened).__name__ in message


@pytest.mark.parametrize(
    ("budget", "larger"),
    [
        (pf.PureDP(1.0), pf.PureDP(1.5)),
        (pf.ApproxDP(1.0, 1e-6), pf.ApproxDP(1.5, 1e-6)),
        (pf.ApproxDP(1.0, 1e-6), pf.ApproxDP(1.0, 2e-6)),
    ],
)
def test_reopening_with_a_larger_budget_is_refused(
    tmp_path: Path, budget: pf.Budget, larger: pf.Budget
) -> None:
    path = tmp_path / "spend.ledger"
    Accountant(budget, path).close()
    with pytest.raises(LedgerError, match="a persisted ledger keeps its budget") as err:
        Accountant(larger, path)
    assert repr(budget) in str(err.value)
    assert repr(larger) in str(err.value)


def test_reopening_continues_and_enforces_a_smaller_budget(tmp_path: Path) -> None:
    path = tmp_path / "pure.ledger"
    with Accountant(pf.PureDP(1.0), path) as acct:
        acct.spend(pf.PureDP(0.5), label="q1")
    with Accountant(pf.PureDP(0.75), path) as acct:
        assert acct.spent == pf.PureDP(0.5)
        assert acct.remaining == pf.PureDP(0.25)
        with pytest.raises(BudgetExceededError):
            acct.spend(pf.PureDP(0.5))
        acct.spend(pf.PureDP(0.25))
    with SQLiteLedger(path, pf.PureDP(0.1)) as ledger:
        assert ledger.kind is pf.PureDP
        assert ledger.budget == pf.PureDP(1.0)
        assert [e.cost for e in ledger.entries] == [pf.PureDP(0.5), pf.PureDP(0.25)]


def test_the_kind_is_in_the_meta_table_and_the_chain_root(tmp_path: Path) -> None:
    zcdp, pure = tmp_path / "z.ledger", tmp_path / "p.ledger"
    Accountant(pf.zCDP(1.0), zcdp).close()
    Accountant(pf.PureDP(1.0), pure).close()

    def meta(path: Path) -> dict[str, str]:
        conn = sqlite3.connect(path)
        try:
            return dict(conn.execute("SELECT key, value FROM meta").fetchall())
        finally:
            conn.close()

    assert "model" not in meta(zcdp)  # a zCDP file is what it always was
    assert meta(pure)["model"] == "pure_dp"
    assert meta(pure)["budget_rho"] == "1/1"
    assert meta(pure)["budget_delta"] == "0/1"
    # Changing the kind (either way) breaks the chain's root: refused as damage.
    for path, sql in [
        (pure, "UPDATE meta SET value = 'approx_dp' WHERE key = 'model'"),
        (zcdp, "INSERT INTO meta(key, value) VALUES ('model', 'pure_dp')"),
    ]:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute(sql)
        conn.close()
        with pytest.raises(LedgerError, match="modified outside privframe"):
            Accountant(pf.PureDP(1.0), path)


@pytest.mark.parametrize(
    ("budget", "cost", "sql"),
    [
        (pf.PureDP(1.0), pf.PureDP(0.25), "UPDATE entries SET rho = '1/8' WHERE idx = 0"),
        (pf.ApproxDP(1.0, 1e-6), pf.ApproxDP(0.25, 1e-7), "DELETE FROM entries WHERE idx = 1"),
        (pf.ApproxDP(1.0, 1e-6), pf.ApproxDP(0.25, 1e-7), "UPDATE entries SET delta = '0/1'"),
        (pf.PureDP(1.0), pf.PureDP(0.25), "UPDATE entries SET delta = '1/10' WHERE idx = 1"),
    ],
)
def test_tampering_with_entries_is_detected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: pf.Budget, cost: pf.Budget, sql: str
) -> None:
    path = tmp_path / "spend.ledger"
    with Accountant(budget, path) as acct:
        acct.spend(cost, label="a", description=LAPLACE)
        acct.spend(cost, label="b")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(sql)
    conn.close()
    monkeypatch.setenv("PRIVFRAME_STATE_DIR", str(tmp_path / "another-user"))
    with pytest.raises(LedgerError, match="modified outside privframe"):
        Accountant(budget, path)


# --------------------------------------------------------------------------- concurrency


def _hammer(acct: Accountant, n: int, cost: pf.Budget, successes: list[int]) -> None:
    ok = 0
    for _ in range(n):
        try:
            acct.spend(cost, description=LAPLACE)
            ok += 1
        except BudgetExceededError:
            pass
    successes.append(ok)


def _composed(entries: object) -> Composition:
    """The charge of a ledger's entries, folded afresh."""
    state = Composition()
    for e in entries:  # type: ignore[attr-defined]
        state = state.add(e.exact_rho, e.exact_delta, description_events(e.description))
    return state


def test_threads_never_exceed_a_pure_budget(make) -> None:
    acct = make(pf.PureDP(1.0))
    successes: list[int] = []
    threads = [
        threading.Thread(target=_hammer, args=(acct, 25, pf.PureDP(0.01), successes))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    entries = acct.entries
    assert sum(successes) == len(entries) == 100
    assert sum(e.exact_rho for e in entries) == 1


def test_threads_with_separate_accountants_never_exceed_an_approx_budget(tmp_path: Path) -> None:
    path = tmp_path / "approx.ledger"
    budget, cost = pf.ApproxDP(2.0, 1e-5), pf.ApproxDP(0.05, 1e-8)
    accts = [Accountant(budget, path) for _ in range(4)]
    successes: list[int] = []
    threads = [threading.Thread(target=_hammer, args=(a, 40, cost, successes)) for a in accts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    entries = accts[0].entries
    state = _composed(entries)
    assert sum(successes) == len(entries) == state.count
    assert state.epsilon <= 2
    assert state.delta <= Fraction(1, 10**5)
    assert state.add(Fraction(1, 20), Fraction(1, 10**8), description_events(LAPLACE)).epsilon > 2
    assert [a.spent for a in accts] == [accts[0].spent] * 4
    for a in accts:
        a.close()


def _process_worker(
    path: str, budget: pf.Budget, cost: pf.Budget, n: int, queue: multiprocessing.Queue
) -> None:
    successes: list[int] = []
    with Accountant(budget, path) as acct:
        _hammer(acct, n, cost, successes)
    queue.put(successes[0])


def _run_processes(path: str, budget: pf.Budget, cost: pf.Budget, n: int) -> int:
    # The processes also race to create the file: exactly one creates it.
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=_process_worker, args=(path, budget, cost, n, queue)) for _ in range(3)
    ]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    return sum(results)


def test_processes_never_exceed_a_pure_budget(tmp_path: Path) -> None:
    path = str(tmp_path / "pure.ledger")
    successes = _run_processes(path, pf.PureDP(1.0), pf.PureDP(0.01), 40)
    with Accountant(pf.PureDP(1.0), path) as acct:
        entries = acct.entries
    assert successes == len(entries) == 100
    assert sum(e.exact_rho for e in entries) == 1
    assert [e.index for e in entries] == list(range(100))


def test_processes_never_exceed_an_approx_budget(tmp_path: Path) -> None:
    path = str(tmp_path / "approx.ledger")
    budget, cost = pf.ApproxDP(2.0, 1e-5), pf.ApproxDP(0.05, 1e-8)
    successes = _run_processes(path, budget, cost, 30)
    with Accountant(budget, path) as acct:
        entries = acct.entries
        spent = acct.spent
    state = _composed(entries)
    assert successes == len(entries) == state.count
    assert [e.index for e in entries] == list(range(len(entries)))
    assert spent == pf.ApproxDP(state.epsilon, state.delta)
    assert state.epsilon <= 2
    assert state.delta <= Fraction(1, 10**5)
    assert state.basic_epsilon > 2  # more fitted than basic composition allows
    assert state.add(Fraction(1, 20), Fraction(1, 10**8), description_events(LAPLACE)).epsilon > 2


@pytest.mark.parametrize(
    ("budget", "cost", "left"),
    [
        (pf.PureDP(1.0), pf.PureDP(0.25), pf.PureDP(0.75)),
        (pf.ApproxDP(1.0, 1e-6), pf.ApproxDP(0.25, 1e-7), pf.ApproxDP(0.75, 9e-7)),
    ],
)
def test_a_crash_right_after_a_spend_loses_nothing(
    tmp_path: Path, budget: pf.Budget, cost: pf.Budget, left: pf.Budget
) -> None:
    path = tmp_path / "spend.ledger"
    code = textwrap.dedent(
        f"""
        import os
        import privframe as pf
        from privframe.accounting.accountant import Accountant
        acct = Accountant(pf.{budget!r}, {str(path)!r})
        acct.spend(pf.{cost!r}, label="before-crash")
        os._exit(1)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=60)
    assert proc.returncode == 1, proc.stderr.decode()
    with Accountant(budget, path) as acct:
        assert [e.label for e in acct.entries] == ["before-crash"]
        assert acct.remaining == left
