"""Budgets are exact rationals: even splits fit, nothing is rounded in anyone's disfavour.

End to end: an Accountant, a Session's releases, a report spec, the SQLite ledger
(new files and files written by the float-based schema 1), what people are
shown, and the noise each release draws for the exact share it is charged.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sqlite3
from fractions import Fraction
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl
import pytest

import privframe as pf
from privframe.accounting.accountant import Accountant
from privframe.accounting.ledger import APPLICATION_ID, SCHEMA_VERSION, SQLiteLedger
from privframe.api.cli import main
from privframe.api.html import session_html
from privframe.api.query import Query
from privframe.api.report import ExitCode
from privframe.mechanisms import quantiles
from privframe.mechanisms.noise import Randomness, SystemRandomness
from privframe.plan.planner import plan_release

THIRD = Fraction(1, 10)


def _frame(n: int = 60) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "user": list(range(n)),
            "region": ["north", "south"] * (n // 2),
            "amount": [float(i % 40) for i in range(n)],
        }
    )


def _query(sess: pf.Session) -> Query:
    return (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=2)
        .group_by("region", keys=["north", "south"])
        .agg(pf.count(), pf.mean("amount", bounds=(0, 40)), pf.sum("amount", bounds=(0, 40)))
    )


class _CountingRandomness(Randomness):
    """The OS CSPRNG, counting the words drawn: to see that a refusal draws nothing."""

    def __init__(self) -> None:
        self.drawn = 0

    def words(self, n: int) -> npt.NDArray[np.uint64]:
        self.drawn += n
        return SystemRandomness().words(n)


# --------------------------------------------------------------------------- splits


def test_three_releases_of_a_third_use_a_session_budget_exactly() -> None:
    rng = _CountingRandomness()
    sess = pf.Session(_frame(), "user", pf.zCDP(0.3), rng=rng)
    for _ in range(3):
        out = _query(sess).release(rho=0.1)
        assert out.shape[0] == 2
    assert sess.remaining == pf.zCDP(0)
    assert [e.exact_rho for e in sess.ledger] == [THIRD] * 3
    drawn = rng.drawn
    with pytest.raises(pf.BudgetExceededError, match="rho=0 remains"):
        _query(sess).release(rho=1e-9)
    assert rng.drawn == drawn  # refused before any noise was drawn
    assert len(sess.ledger) == 3


def test_ten_tenths_and_five_fifths_of_a_session_budget_fit() -> None:
    for parts, rho in ((10, 0.1), (5, 0.2)):
        sess = pf.Session(_frame(), "user", pf.zCDP(1.0))
        for _ in range(parts):
            _query(sess).release(rho=rho)
        assert sess.spent == pf.zCDP(1)
        assert sess.remaining == pf.zCDP(0)


@pytest.mark.parametrize(("budget", "parts"), [(0.2, 3), (0.1, 7), (0.3, 11), (0.9, 7)])
def test_splits_computed_in_floats_spend_the_budget(budget: float, parts: int) -> None:
    # budget / parts sums past the budget by float rounding: the last release spends
    # exactly what remains, with its noise calibrated to that, instead of being refused.
    sess = pf.Session(_frame(), "user", pf.zCDP(budget))
    for _ in range(parts):
        _query(sess).release(rho=budget / parts)
    assert sess.spent.exact_rho <= Fraction(repr(budget))
    assert sess.remaining.exact_rho < Fraction(1, 10**15)
    last = plan_release(_query(sess).plan, True, sess.ledger[-1].exact_rho)
    assert sum(m.exact_share for m in last.measurements) == sess.ledger[-1].exact_rho


def test_the_remaining_rho_as_a_float_can_be_spent() -> None:
    sess = pf.Session(_frame(), "user", pf.zCDP(1.0))
    _query(sess).release(rho=1 / 3)
    _query(sess).release(rho=0.2 / 7)
    _query(sess).release(rho=sess.remaining.rho)
    assert sess.remaining.exact_rho < Fraction(1, 10**15)
    with pytest.raises(pf.BudgetExceededError):
        _query(sess).release(rho=1e-6)  # more than float rounding over what is left


@pytest.mark.parametrize(
    ("total", "each", "n"),
    [("", "rho = 0.1", 3), ("rho = 0.3", "share = 0.1", 10)],
    ids=["rho", "share"],
)
def test_a_report_spec_of_even_parts_fits_and_runs(
    tmp_path: Path, total: str, each: str, n: int
) -> None:
    _frame(200).write_parquet(tmp_path / "data.parquet")
    spec = tmp_path / "spec.toml"
    queries = "".join(
        f"""
[[queries]]
name = "q{i}"
group_by = ["region"]
keys = ["north", "south"]
aggregates = [{{ kind = "count" }}, {{ kind = "mean", column = "amount", bounds = [0, 40] }}]
{each}
"""
        for i in range(n)
    )
    spec.write_text(
        f"""
[report]
title = "Even parts"
{total}

[data]
path = "data.parquet"
privacy_unit = "user"

[budget]
rho = 0.3
ledger = "ledger.sqlite"

[contributions]
max_groups = 1
max_rows_per_group = 2
"""
        + queries
    )
    assert main(["report", str(spec), "--out", str(tmp_path / "out")]) == ExitCode.OK
    with Accountant(pf.zCDP(0.3), tmp_path / "ledger.sqlite") as acct:
        assert sum(e.exact_rho for e in acct.entries) == Fraction(3, 10)
        assert len({e.exact_rho for e in acct.entries}) == 1
        assert acct.remaining == pf.zCDP(0)
    # A second run finds nothing left: refused as a whole, nothing spent.
    assert main(["report", str(spec), "--out", str(tmp_path / "again")]) == ExitCode.OVER_BUDGET


# --------------------------------------------------------------------------- noise


@pytest.mark.parametrize("rho", [0.1, 0.3, 1 / 3, Fraction(2, 7)])
def test_noise_is_calibrated_to_the_exact_share_it_is_charged(rho: object) -> None:
    sess = pf.Session(_frame(), "user", pf.zCDP(1.0))
    query = (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=3)
        .group_by("region", keys=["north", "south"])
        .agg(
            pf.count(),
            pf.mean("amount", bounds=(0, 40)),
            pf.var("amount", bounds=(0.5, 39.25)),
            pf.median("amount", bounds=(0, 40)),
        )
    )
    plan = plan_release(query.plan, True, rho)  # type: ignore[arg-type]
    asked = rho if isinstance(rho, Fraction) else Fraction(repr(rho))
    for m in plan.measurements:
        # Δ²/(2σ²) <= the share, checked in exact rationals, in the units σ is drawn in.
        assert Fraction(m.l2_units) ** 2 / (2 * Fraction(m.sigma_units) ** 2) <= m.exact_share
    charged = sum((m.exact_share for m in (*plan.measurements, *plan.quantiles)), Fraction(0))
    assert plan.cost.exact_rho == charged == asked
    # The quantile is charged its share; the exponential mechanism's own cost is within it.
    (median,) = plan.quantiles
    assert 0 < quantiles.cost(median.eta, 0.5, plan.limits.squares) <= median.exact_share


def test_a_release_with_a_median_is_charged_exactly_the_rho_asked() -> None:
    # It was charged 2^-55 less, leaving 2.8e-17 that release(rho=sess.remaining.rho)
    # then spent on pure noise.
    sess = pf.Session(_frame(), "user", pf.zCDP(1.0))
    query = (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=2)
        .group_by("region", keys=["north", "south"])
        .agg(pf.count(), pf.median("amount", bounds=(0, 40)))
    )
    query.release(rho=0.5)
    assert sess.spent.exact_rho == sess.remaining.exact_rho == Fraction(1, 2)
    assert sess.ledger[-1].exact_rho == Fraction(1, 2)
    query.release(rho=sess.remaining.rho)
    assert sess.remaining == pf.zCDP(0)
    with pytest.raises(pf.BudgetExceededError, match="rho=0 remains"):
        query.release(rho=1e-12)
    assert len(sess.ledger) == 2


def test_the_shares_of_a_release_add_up_to_exactly_the_rho_asked() -> None:
    sess = pf.Session(_frame(), "user", pf.zCDP(1.0))
    plan = plan_release(_query(sess).plan, True, 0.1, {"count": 3.0, "amount_sum": 7.0})
    assert sum(m.exact_share for m in plan.measurements) == THIRD
    assert plan.cost == pf.zCDP(0.1)


# --------------------------------------------------------------------------- display


def test_people_are_shown_rounded_figures() -> None:
    assert repr(pf.zCDP(1.0) - pf.zCDP(0.1)) == "zCDP(rho=0.9, delta=0.0)"
    assert repr(pf.zCDP(0.1) + pf.zCDP(0.2)) == "zCDP(rho=0.3, delta=0.0)"
    assert repr(pf.ApproxDP(1.0, 1e-6) - pf.ApproxDP(0.1, 1e-7)) == (
        "ApproxDP(epsilon=0.9, delta=9e-07)"
    )
    # What no short decimal shows exactly is rounded, and marked so.
    assert repr(pf.zCDP(Fraction(1, 3))) == "zCDP(rho≈0.333333, delta=0.0)"
    converted = repr(pf.Session(_frame(), "user", pf.ApproxDP(1, 1e-6).to_zcdp()).remaining)
    assert re.fullmatch(r"zCDP\(rho≈0\.\d{6}, delta=0\.0\)", converted), converted
    sess = pf.Session(_frame(), "user", pf.zCDP(0.3))
    for _ in range(3):
        _query(sess).release(rho=0.1)
    report = str(sess.report())
    assert re.search(r"^remaining +0 \|", report, re.MULTILINE)
    assert "e-1" not in report  # no 1.39e-17 left over
    assert "spent 0.3 of 0.3 (0 remaining)" in session_html(sess)
    assert "release costs rho = 0.1 (zCDP)" in str(_query(sess).explain(rho=0.1))


def test_the_guarantee_table_adds_up_and_names_each_delta() -> None:
    acct = Accountant(pf.zCDP(1.0, delta=1e-6))
    acct.spend(pf.zCDP(0.3, delta=2e-7), label="selection")
    r = acct.report()
    assert r.spent + r.remaining == r.budget  # exactly, in rho and in delta spent outright
    lines = str(r).splitlines()
    header = lines[1]
    assert header.index("delta spent outright") < header.index("|") < header.index("epsilon")
    rows = {line.split()[0]: line.split("|")[0].split()[1:] for line in lines[2:5]}
    # The additive columns show the budget's own delta (1e-06, not 2e-06), and add up.
    assert rows == {
        "budget": ["1", "1e-06"],
        "spent": ["0.3", "2e-07"],
        "remaining": ["0.7", "8e-07"],
    }
    assert any("do not add up" in line for line in lines)
    assert any(
        "the conversion's slack 1e-06 + the row's delta spent outright" in line for line in lines
    )


def test_a_refusal_names_the_exact_difference_when_six_digits_cannot() -> None:
    acct = Accountant(pf.zCDP(0.3))
    acct.spend(pf.zCDP(0.2))
    with pytest.raises(pf.BudgetExceededError, match=r"by rho=1/10000000000000000000"):
        acct.spend(pf.zCDP(Fraction(1, 10) + Fraction(1, 10**19)))


# --------------------------------------------------------------------------- ledger file


def test_a_ledger_file_stores_budgets_and_spends_exactly(tmp_path: Path) -> None:
    path = tmp_path / "exact.ledger"
    with Accountant(pf.zCDP(Fraction(1, 3), delta=1e-7), path) as acct:
        for _ in range(3):
            acct.spend(pf.zCDP(Fraction(1, 9), delta=Fraction(1, 3 * 10**7)))
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'budget_rho'").fetchone() == ("1/3",)
    assert set(conn.execute("SELECT rho, delta, typeof(rho) FROM entries")) == {
        ("1/9", "1/30000000", "text")
    }
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    conn.close()
    with Accountant(pf.zCDP(Fraction(1, 3), delta=1e-7), path) as again:
        assert again.spent == pf.zCDP(Fraction(1, 3), delta=1e-7)
        assert again.remaining == pf.zCDP(0)
        with pytest.raises(pf.BudgetExceededError):
            again.spend(pf.zCDP(5e-324))
    with pytest.raises(pf.LedgerError, match="larger"):
        Accountant(pf.zCDP(Fraction(1, 3) + Fraction(1, 10**30), delta=1e-7), path)


def _old_ledger(
    path: Path, budget_rho: float, spends: list[float | tuple[float, float]], delta: float = 0.0
) -> None:
    """A ledger file as privframe wrote it with schema 1 (REAL costs, the budget's repr).

    ``spends`` are ρ, or (ρ, δ) pairs.
    """

    def canonical(value: object) -> str:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE entries (
            idx INTEGER PRIMARY KEY, time TEXT NOT NULL, label TEXT NOT NULL,
            rho REAL NOT NULL, delta REAL NOT NULL, description TEXT NOT NULL,
            seeded INTEGER NOT NULL, hash TEXT NOT NULL
        );
        """
    )
    conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
    conn.execute("PRAGMA user_version=1")
    meta = {
        "format": "privframe-ledger",
        "schema": "1",
        "ledger_id": "00000000-0000-0000-0000-000000000001",
        "created": "2025-01-01T00:00:00.000000+00:00",
        "budget_rho": repr(budget_rho),
        "budget_delta": repr(delta),
    }
    payload = canonical({k: meta[k] for k in meta})
    head = hashlib.sha256(b"privframe-ledger\x00" + payload.encode()).hexdigest()
    meta["genesis"] = head
    for i, spend in enumerate(spends):
        rho, spent_delta = spend if isinstance(spend, tuple) else (spend, 0.0)
        entry = {
            "index": i,
            "time": "2025-01-01T00:00:00.000000+00:00",
            "label": f"old{i}",
            "rho": rho.hex(),
            "delta": spent_delta.hex(),
            "description": '""',
            "seeded": False,
        }
        head = hashlib.sha256(bytes.fromhex(head) + canonical(entry).encode()).hexdigest()
        conn.execute(
            "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (i, entry["time"], entry["label"], rho, spent_delta, '""', 0, head),
        )
    meta["head"], meta["count"] = head, str(len(spends))
    conn.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
    conn.close()


def test_an_old_float_ledger_reopens_with_the_budget_typed(tmp_path: Path) -> None:
    path = tmp_path / "old.ledger"
    _old_ledger(path, 0.3, [0.1, 0.1])
    with Accountant(pf.zCDP(0.3), path) as acct:  # not "a larger budget"
        entries = acct.entries
        assert [e.legacy_floats for e in entries] == [True, True]
        # Old charges count at their binary value: what that privframe charged.
        assert acct.spent.exact_rho == 2 * Fraction(0.1) > Fraction(2, 10)
        with pytest.raises(pf.BudgetExceededError):
            acct.spend(pf.zCDP(0.1))
        acct.spend(acct.remaining, label="the rest")
        assert acct.spent == pf.zCDP(0.3)
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT rho, typeof(rho) FROM entries ORDER BY idx").fetchall()
    assert [kind for _, kind in rows] == ["real", "real", "text"]
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    conn.close()
    with SQLiteLedger(path, pf.zCDP(0.3)) as ledger:  # the hash chain verifies across both
        assert len(ledger) == 3
        assert ledger.totals()[0] == Fraction(3, 10)


def test_an_old_float_ledger_refuses_a_larger_budget(tmp_path: Path) -> None:
    path = tmp_path / "old.ledger"
    _old_ledger(path, 0.3, [0.1])
    larger = Fraction(3, 10) + Fraction(1, 10**30)
    with pytest.raises(pf.LedgerError, match="larger budget"):
        Accountant(pf.zCDP(larger), path)
    with pytest.raises(pf.LedgerError, match="larger budget"):
        Accountant(pf.zCDP(0.30000000000000004), path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (1,)  # a refusal changes nothing
    conn.close()


def test_an_old_ledger_of_a_converted_budget_reopens_with_it(tmp_path: Path) -> None:
    budget = pf.ApproxDP(1.0, 1e-6).to_zcdp()
    path = tmp_path / "old.ledger"
    _old_ledger(path, budget.rho, [budget.rho / 2])  # stored as repr of the float
    with Accountant(pf.ApproxDP(1.0, 1e-6).to_zcdp(), path) as acct:
        assert acct.remaining.exact_rho == budget.exact_rho - Fraction(budget.rho / 2)
    # A bare ApproxDP budget is spent as (epsilon, delta) now: the message says what to pass.
    with pytest.raises(pf.LedgerError, match=r"\.to_zcdp\(\)"):
        Accountant(pf.ApproxDP(1.0, 1e-6), path)


def test_an_old_ledger_opens_in_a_session_and_adopts_its_data(tmp_path: Path) -> None:
    path = tmp_path / "old.ledger"
    _old_ledger(path, 1.0, [0.25])
    sess = pf.Session(_frame(), "user", pf.zCDP(1.0), path)
    assert sess.spent == pf.zCDP(0.25)
    _query(sess).release(rho=0.25)
    assert sess.remaining == pf.zCDP(0.5)
    copy = tmp_path / "copy.ledger"
    shutil.copy(path, copy)
    with pytest.raises(pf.LedgerError, match="privacy unit"):
        pf.Session(_frame(), None, pf.zCDP(1.0), copy)


def test_an_old_ledger_whose_delta_was_spent_in_floats_still_spends_rho(tmp_path: Path) -> None:
    # Schema 1 charged the float 1e-9, a few ulps above the 1e-9 typed: the δ part is
    # past the budget by that much, which must not block releases that spend ρ alone.
    path = tmp_path / "old.ledger"
    _old_ledger(path, 0.3, [(0.125, 1e-9)], delta=1e-9)
    with Accountant(pf.zCDP(0.3, delta=1e-9), path) as acct:
        assert acct.spent.exact_delta == Fraction(1e-9) > Fraction(1, 10**9)  # not undercounted
        assert acct.remaining == pf.zCDP(0.175)
        acct.spend(pf.zCDP(0.175), label="rho alone")
        with pytest.raises(pf.BudgetExceededError, match="delta"):
            acct.spend(pf.zCDP(0, delta=1e-30))
        assert acct.remaining == pf.zCDP(0)


def test_a_ledger_past_a_smaller_budgets_delta_refuses_every_spend(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with Accountant(pf.zCDP(1, delta=Fraction(1, 10**6)), path) as acct:
        acct.spend(pf.zCDP(0.1, delta=5e-7))
    with Accountant(pf.zCDP(1, delta=Fraction(1, 10**7)), path) as acct:
        with pytest.raises(pf.BudgetExceededError, match="already holds more than this budget"):
            acct.spend(pf.zCDP(0.5))
        assert len(acct.entries) == 1
        assert "nothing remains" in str(acct.report())
        assert "spent + remaining = budget" not in str(acct.report())


def test_a_rho_the_library_returns_is_never_charged_below_its_exact_value() -> None:
    gen = np.random.default_rng(11)
    for sensitivity, sigma in zip(
        gen.uniform(0.1, 10, 3000), gen.uniform(0.01, 100, 3000), strict=True
    ):
        rho = pf.accounting.gaussian_rho(float(sensitivity), float(sigma))
        exact_rho = Fraction(float(sensitivity)) ** 2 / (2 * Fraction(float(sigma)) ** 2)
        assert pf.zCDP(rho).exact_rho >= exact_rho
