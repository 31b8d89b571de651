"""The server's ledgers under concurrent spenders and crashes, on SQLite and PostgreSQL.

Many threads, then several processes, spend through Accountants on ledgers of
one pool whose budgets and cap bind; a spender killed (SIGKILL) at several
points leaves a ledger that verifies, whose totals are its entries, and that
holds every spend it returned. All amounts are exact, so every total is
checked with ``==``.
"""

from __future__ import annotations

import multiprocessing
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from fractions import Fraction

import pytest
from postgres_service import database_url, postgres_url  # noqa: F401  (fixtures)

import privframe as pf
from privframe.accounting.accountant import Accountant
from privframe.accounting.ledger import DatabaseLedgers
from privframe.errors import BudgetExceededError

STEP = pf.zCDP(Fraction(1, 100))
POOL = "sales"


def _spend(acct: Accountant, times: int, label: str) -> int:
    """``times`` spends of STEP; how many were recorded (the others refused)."""
    recorded = 0
    for i in range(times):
        try:
            acct.spend(STEP, label=f"{label}-{i}")
            recorded += 1
        except BudgetExceededError:
            pass
    return recorded


def _check_consistent(ledgers: DatabaseLedgers, budgets: dict[str, Fraction], cap: Fraction) -> int:
    """Every ledger verifies and stays within budget; the pool is their sum, within the cap."""
    total, count = Fraction(0), 0
    for ledger_id, budget in budgets.items():
        ledger = ledgers.open(ledger_id)
        ledger.verify()
        spent = ledger.totals()[0]
        assert spent == sum(e.exact_rho for e in ledger.entries)
        assert spent <= budget
        total += spent
        count += len(ledger)
    assert ledgers.pool_spent(POOL).exact_rho == total
    assert total <= cap
    return count


def test_sixteen_threads_never_overspend_a_ledger_or_the_cap(database_url: str) -> None:  # noqa: F811
    # One shared ledger (budget 1, wanted 2 by 8 threads) and 8 own ledgers (budget 0.2, wanted
    # 0.25 each): together they could take 2.6, so the cap of 2.5 binds, exactly.
    budgets = {"shared/sales": Fraction(1)} | {f"own{i}/sales": Fraction(1, 5) for i in range(8)}
    cap = Fraction(5, 2)
    with DatabaseLedgers(database_url) as ledgers:
        for ledger_id, budget in budgets.items():
            ledgers.create(ledger_id, POOL, pf.zCDP(budget))
        ledgers.set_cap(POOL, pf.zCDP(cap))
        shared = Accountant(pf.zCDP(1), ledger=ledgers.open("shared/sales"))
        own = [Accountant(pf.zCDP(1), ledger=ledgers.open(f"own{i}/sales")) for i in range(8)]
        accountants = [shared] * 8 + own
        recorded = [0] * 16
        barrier = threading.Barrier(16)

        def spender(i: int) -> None:
            barrier.wait()
            recorded[i] = _spend(accountants[i], 25, f"t{i}")

        threads = [threading.Thread(target=spender, args=(i,)) for i in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert _check_consistent(ledgers, budgets, cap) == sum(recorded)
        assert ledgers.pool_spent(POOL).exact_rho == cap  # the cap was the binding limit
        assert sum(recorded) == 250


def _process_spender(url: str, ledger_ids: list[str], times: int) -> int:
    with DatabaseLedgers(url) as ledgers:
        accountants = [Accountant(pf.zCDP(1), ledger=ledgers.open(i)) for i in ledger_ids]
        recorded = 0
        for i in range(times):
            recorded += _spend(accountants[i % len(accountants)], 1, f"p{os.getpid()}-{i}")
        return recorded


@pytest.mark.slow
def test_four_processes_never_overspend_a_ledger_or_the_cap(database_url: str) -> None:  # noqa: F811
    # Each process alternates between the shared ledger (budget 0.5, wanted 1 in all) and its
    # own (budget 0.2, wanted 0.25): 1.3 could fit the ledgers, the cap of 1.2 binds.
    budgets = {"shared/sales": Fraction(1, 2)} | {f"own{i}/sales": Fraction(1, 5) for i in range(4)}
    cap = Fraction(6, 5)
    with DatabaseLedgers(database_url) as ledgers:
        for ledger_id, budget in budgets.items():
            ledgers.create(ledger_id, POOL, pf.zCDP(budget))
        ledgers.set_cap(POOL, pf.zCDP(cap))
    context = multiprocessing.get_context("spawn")
    with context.Pool(4) as pool:
        jobs = [(database_url, ["shared/sales", f"own{i}/sales"], 50) for i in range(4)]
        recorded = pool.starmap(_process_spender, jobs)
    with DatabaseLedgers(database_url) as ledgers:
        assert _check_consistent(ledgers, budgets, cap) == sum(recorded)
        assert ledgers.pool_spent(POOL).exact_rho == cap
    assert sum(recorded) == 120


_CHILD = """
import sys
import privframe as pf
from privframe.accounting.accountant import Accountant
from privframe.accounting.ledger import DatabaseLedgers

ledgers = DatabaseLedgers(sys.argv[1])
acct = Accountant(pf.zCDP(1000, 0.5), ledger=ledgers.open("crash/sales"))
for i in range(100000):
    entry = acct.spend(pf.zCDP(0.001, 1e-9), label=f"spend {i}", description={"i": i})
    print(entry.index, flush=True)
"""


def _spend_until_killed(url: str, lines: int) -> int:
    """Run a spender, SIGKILL it once it printed ``lines`` entry indexes; the last one printed."""
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert child.stdout is not None
    assert child.stderr is not None
    buffer, deadline = b"", time.monotonic() + 120
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        while buffer.count(b"\n") < lines:
            if time.monotonic() > deadline or child.poll() is not None:
                child.kill()
                child.wait(timeout=30)
                pytest.fail(f"the spender stopped early: {child.stderr.read().decode()[-2000:]}")
            if selector.select(timeout=1.0):
                buffer += os.read(child.stdout.fileno(), 4096)
    child.send_signal(signal.SIGKILL)  # wherever it is: mid-transaction, mid-commit, in between
    child.wait(timeout=30)
    child.stdout.close()
    child.stderr.close()
    return int(buffer[: buffer.rfind(b"\n")].split()[-1])


@pytest.mark.slow
def test_a_spender_killed_at_any_point_leaves_a_consistent_ledger(
    database_url: str,  # noqa: F811
) -> None:
    with DatabaseLedgers(database_url) as ledgers:
        ledgers.create("crash/sales", POOL, pf.zCDP(1000, 0.5))
    before = 0
    for lines in (1, 7, 40):
        last_returned = _spend_until_killed(database_url, lines)
        with DatabaseLedgers(database_url) as ledgers:
            ledger = ledgers.open("crash/sales")
            ledger.verify()  # the hash chain, and the totals against the entries
            entries = list(ledger.entries)
            assert len(entries) > last_returned >= before  # every returned spend is there
            assert [e.index for e in entries] == list(range(len(entries)))
            assert ledger.totals() == (
                sum(e.exact_rho for e in entries),
                sum(e.exact_delta for e in entries),
            )
            assert ledgers.pool_spent(POOL) == pf.zCDP(*ledger.totals())
            before = len(entries)
