"""The accountant: atomic spends, exact limits, persistence, concurrency."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import textwrap
import threading
import warnings
from fractions import Fraction
from pathlib import Path

import pytest

import privframe as pf
from privframe import accounting
from privframe.accounting import _numbers
from privframe.accounting.accountant import DEFAULT_REPORTING_DELTA, Accountant, BudgetReport, Spend
from privframe.errors import (
    BudgetExceededError,
    InvalidArgumentError,
    InvalidBudgetError,
    InvalidValueError,
    LedgerError,
    SeededRandomnessWarning,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["memory", "file"])
def make(request: pytest.FixtureRequest, tmp_path: Path):
    """Build an accountant on an in-memory or a file ledger."""

    def build(budget: pf.Budget, **kw: object) -> Accountant:
        ledger = None if request.param == "memory" else tmp_path / "spend.ledger"
        return Accountant(budget, ledger, **kw)  # type: ignore[arg-type]

    return build


# --------------------------------------------------------------------------- basics


def test_budget_conversion_and_reporting_delta() -> None:
    assert Accountant(pf.zCDP(1.0)).budget == pf.zCDP(1.0)
    assert Accountant(pf.zCDP(1.0)).delta == DEFAULT_REPORTING_DELTA == 1e-6
    gdp = Accountant(pf.GDP(1.0))
    assert gdp.budget == accounting.to_zcdp(pf.GDP(1.0))
    assert gdp.delta == 1e-6
    approx = Accountant(pf.ApproxDP(1.0, 1e-5))
    assert approx.budget == accounting.to_zcdp(pf.ApproxDP(1.0, 1e-5))
    assert approx.delta == 1e-5
    assert Accountant(pf.ApproxDP(1.0, 1e-5), delta=1e-8).delta == 1e-8


@pytest.mark.parametrize("budget", [1.0, "1.0", None, {"rho": 1.0}])
def test_budget_must_be_a_budget(budget: object) -> None:
    with pytest.raises(InvalidBudgetError):
        Accountant(budget)  # type: ignore[arg-type]


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-6, float("nan")])
def test_reporting_delta_validated(delta: float) -> None:
    with pytest.raises(InvalidBudgetError, match="delta"):
        Accountant(pf.zCDP(1.0), delta=delta)


@pytest.mark.parametrize("delta", [True, "1e-6"])
def test_reporting_delta_type_validated(delta: object) -> None:
    with pytest.raises(InvalidArgumentError, match="delta"):
        Accountant(pf.zCDP(1.0), delta=delta)  # type: ignore[arg-type]


def test_reporting_delta_uses_the_shared_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    # One reading rule for a number the user gives: accounting's, not a copy of it.
    seen: list[object] = []
    real = _numbers.exact

    def spy(name: str, value: object, **kw: bool) -> Fraction:
        seen.append(value)
        return real(name, value, **kw)

    monkeypatch.setattr(_numbers, "exact", spy)
    assert Accountant(pf.zCDP(1.0), delta=1e-5).delta == 1e-5
    assert seen[-1] == 1e-5  # the reporting delta, read by the same rule as budgets


@pytest.mark.parametrize("ledger", [42, b"spend.ledger", ["spend.ledger"]])
def test_ledger_argument_validated(ledger: object) -> None:
    with pytest.raises(InvalidArgumentError, match="ledger"):
        Accountant(pf.zCDP(1.0), ledger)  # type: ignore[arg-type]


def test_spend_records(make) -> None:
    acct = make(pf.zCDP(1.0, 1e-6))
    e = acct.spend(pf.zCDP(0.25), label="q1", description={"query": "count by x"})
    assert (e.index, e.label, e.rho, e.delta, e.seeded) == (0, "q1", 0.25, 0.0, False)
    assert e.description == {"query": "count by x"}
    acct.spend(pf.zCDP(0.5, 1e-9), label="q2")
    assert acct.entries[0] == e
    assert [x.label for x in acct.entries] == ["q1", "q2"]
    assert acct.spent == pf.zCDP(0.75, 1e-9)
    assert acct.remaining == pf.zCDP(0.25, Fraction(999, 10**9))  # 1e-6 − 1e-9, exactly


@pytest.mark.parametrize("cost", [pf.ApproxDP(0.1, 0.0), pf.GDP(0.1), 0.1, None])
def test_cost_must_be_zcdp(make, cost: object) -> None:
    acct = make(pf.zCDP(1.0))
    with pytest.raises(InvalidBudgetError, match="zCDP"):
        acct.spend(cost)
    with pytest.raises(InvalidBudgetError, match="zCDP"):
        acct.check(cost)
    assert acct.entries == ()


def test_bad_label_or_description_records_nothing(make) -> None:
    acct = make(pf.zCDP(1.0))
    with pytest.raises(InvalidArgumentError, match="label"):
        acct.spend(pf.zCDP(0.1), label=3)
    with pytest.raises(InvalidArgumentError, match="description"):
        acct.spend(pf.zCDP(0.1), description={1: "a"})
    with pytest.raises(InvalidArgumentError, match="description"):
        acct.spend(pf.zCDP(0.1), description=3)
    with pytest.raises(InvalidValueError, match="description"):
        acct.spend(pf.zCDP(0.1), description={"x": float("nan")})
    with pytest.raises(InvalidArgumentError, match="seeded"):
        acct.spend(pf.zCDP(0.1), seeded="yes")
    assert acct.entries == ()


# --------------------------------------------------------------------------- limits


def test_overspend_refused_and_nothing_recorded(make) -> None:
    acct = make(pf.zCDP(1.0))
    acct.spend(pf.zCDP(0.75), label="q1")
    with pytest.raises(BudgetExceededError) as err:
        acct.spend(pf.zCDP(0.5), label="q2", description={"secret": "never shown"})
    msg = str(err.value)
    assert "q2" in msg
    assert "requests rho=0.5" in msg
    assert "rho=0.75 is spent" in msg
    assert "rho=0.25 remains" in msg
    assert "never shown" not in msg
    assert len(acct.entries) == 1
    assert acct.spent.rho == 0.75


def test_check_never_spends(make) -> None:
    acct = make(pf.zCDP(1.0))
    acct.check(pf.zCDP(1.0))
    with pytest.raises(BudgetExceededError):
        acct.check(pf.zCDP(1.0000000000000002))
    assert acct.entries == ()
    assert acct.spent == pf.zCDP(0.0)


def test_delta_is_a_budget_dimension(make) -> None:
    acct = make(pf.zCDP(1.0, 1e-6))
    acct.spend(pf.zCDP(0.1, 1e-6))
    with pytest.raises(BudgetExceededError, match="delta"):
        acct.spend(pf.zCDP(0.1, 1e-12))
    acct.spend(pf.zCDP(0.1))
    assert len(acct.entries) == 2
    assert acct.remaining.delta == 0.0


@pytest.mark.parametrize(
    ("budget", "spend", "count"),
    [(0.3, 0.1, 3), (1.0, 0.1, 10), (1.0, 0.2, 5), (1.0, 0.01, 100), (0.7, 0.07, 10)],
)
def test_an_even_split_uses_the_budget_exactly(
    make, budget: float, spend: float, count: int
) -> None:
    # 0.1 is read as 1/10, not as the double 0.1000000000000000055...: an even split of
    # a budget fits exactly, leaves exactly 0, and one more spend of anything is refused.
    acct = make(pf.zCDP(budget))
    for i in range(count):
        acct.spend(pf.zCDP(spend), label=f"part {i}")
    assert acct.remaining == pf.zCDP(0)
    assert acct.spent == pf.zCDP(budget)
    assert sum(e.exact_rho for e in acct.entries) == Fraction(str(budget))
    with pytest.raises(BudgetExceededError, match="rho=0 remains"):
        acct.spend(pf.zCDP(Fraction(1, 10**300)), label="one more")
    assert len(acct.entries) == count


def test_thirds_of_a_fraction_budget_fit_exactly(make) -> None:
    acct = make(pf.zCDP(Fraction(1, 3)))
    for _ in range(3):
        acct.spend(pf.zCDP(Fraction(1, 9)))
    assert acct.remaining == pf.zCDP(0)
    with pytest.raises(BudgetExceededError):
        acct.spend(pf.zCDP(5e-324))


def test_spending_remaining_always_fits(make) -> None:
    acct = make(pf.zCDP(1.0))
    acct.spend(pf.zCDP(Fraction(1, 3)))
    acct.spend(acct.remaining)
    assert acct.spent == pf.zCDP(1.0)
    assert acct.remaining == pf.zCDP(0)


def test_exact_rational_boundary_dyadic(make) -> None:
    acct = make(pf.zCDP(1.0))
    for _ in range(8):
        acct.spend(pf.zCDP(0.125))
    assert acct.spent == pf.zCDP(1.0)
    assert acct.remaining == pf.zCDP(0.0)
    with pytest.raises(BudgetExceededError):
        acct.spend(pf.zCDP(5e-324))  # the smallest positive float does not fit


def test_point_one_plus_point_two(make) -> None:
    acct = make(pf.zCDP(0.3))
    acct.spend(pf.zCDP(0.1))
    acct.spend(pf.zCDP(0.2))  # 1/10 + 2/10 = 3/10 exactly, though 0.1 + 0.2 != 0.3 in floats
    assert sum(e.exact_rho for e in acct.entries) == Fraction(3, 10)
    assert acct.remaining == pf.zCDP(0)


def test_zero_spend_always_recorded(make) -> None:
    acct = make(pf.zCDP(0.5))
    acct.spend(pf.zCDP(0.5))
    e = acct.spend(pf.zCDP(0.0), label="public metadata")
    assert e.rho == 0.0
    assert len(acct.entries) == 2
    acct.check(pf.zCDP(0.0))


def test_spent_and_remaining_are_exact_and_show_rounded() -> None:
    acct = Accountant(pf.zCDP(1.0))
    acct.spend(pf.zCDP(0.1))
    acct.spend(pf.zCDP(0.2))
    assert acct.spent.exact_rho == Fraction(3, 10)
    assert acct.remaining.exact_rho == Fraction(7, 10)
    assert (repr(acct.spent), repr(acct.remaining)) == (
        "zCDP(rho=0.3, delta=0.0)",
        "zCDP(rho=0.7, delta=0.0)",
    )


def test_a_float_that_is_binary_is_kept_binary_when_given_as_a_fraction(make) -> None:
    # Computed values are passed as Fraction(x): their binary value, which is charged.
    acct = make(pf.zCDP(0.3))
    acct.spend(pf.zCDP(Fraction(0.1)))  # 0.1000000000000000055...
    acct.spend(pf.zCDP(0.1))
    with pytest.raises(BudgetExceededError, match=r"exceeds what remains by rho=1/\d+"):
        acct.spend(pf.zCDP(0.1))


# --------------------------------------------------------------------------- seeded


def test_seeded_spend_warns_and_flags(make) -> None:
    acct = make(pf.zCDP(1.0))
    with pytest.warns(SeededRandomnessWarning, match="demo"):
        e = acct.spend(pf.zCDP(0.1), label="demo", seeded=True)
    assert e.seeded is True
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert acct.spend(pf.zCDP(0.1)).seeded is False
    assert acct.report().n_seeded == 1
    assert "seeded" in str(acct.report())


def test_refused_seeded_spend_does_not_warn() -> None:
    acct = Accountant(pf.zCDP(0.1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(BudgetExceededError):
            acct.spend(pf.zCDP(1.0), seeded=True)


# --------------------------------------------------------------------------- report


def test_report_matches_conversions(make) -> None:
    acct = make(pf.zCDP(1.0), delta=1e-5)
    acct.spend(pf.zCDP(0.25), label="a")
    acct.spend(pf.zCDP(0.125), label="b")
    r = acct.report()
    assert isinstance(r, BudgetReport)
    spent, left = pf.zCDP(0.375), pf.zCDP(0.625)
    assert (r.budget_rho, r.spent_rho, r.remaining_rho) == (1.0, 0.375, 0.625)
    assert r.delta == 1e-5
    assert r.budget_epsilon == pf.zCDP(1.0).epsilon(1e-5)
    assert r.spent_epsilon == spent.epsilon(1e-5)
    assert r.remaining_epsilon == left.epsilon(1e-5)
    assert r.spent_mu == spent.to_gdp().mu
    assert r.remaining_mu == left.to_gdp().mu
    assert r.budget_mu == pytest.approx(2**0.5)
    assert r.n_entries == 2
    assert 0 < r.spent_epsilon < r.budget_epsilon
    # the exact Gaussian curve is reported beside, and is tighter than the general bound
    assert r.spent_epsilon_gaussian == spent.to_gdp().epsilon(1e-5)
    assert r.spent_epsilon_gaussian < r.spent_epsilon
    text = str(r)
    needles = ("rho", "epsilon", "delta=1e-05", "mu", "0.375", "0.625", "2 ledger entries", "GDP")
    for needle in needles:
        assert needle in text
    with pytest.raises(AttributeError):
        r.spent_rho = 0.0  # type: ignore[misc]


def test_report_of_approx_dp_budget_is_within_it() -> None:
    acct = Accountant(pf.ApproxDP(1.0, 1e-6))
    r = acct.report()
    assert r.delta == 1e-6
    assert r.budget_epsilon <= 1.0 + 1e-9


# --------------------------------------------------------------------------- persistence


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


# --------------------------------------------------------------------------- batches


def test_spend_all_records_every_spend_in_order(make) -> None:
    acct = make(pf.zCDP(1.0, 1e-6))
    acct.spend(pf.zCDP(0.125), label="before")
    entries = acct.spend_all(
        [
            Spend(pf.zCDP(0.25), "a", {"query": "count"}),
            Spend(pf.zCDP(0.5, 1e-9), "b"),
            Spend(pf.zCDP(0.0), "free"),
        ]
    )
    assert [(e.index, e.label) for e in entries] == [(1, "a"), (2, "b"), (3, "free")]
    assert entries[0].description == {"query": "count"}
    assert list(acct.entries)[1:] == entries
    assert acct.spent == pf.zCDP(0.875, 1e-9)
    assert acct.spend_all([]) == []
    assert len(acct.entries) == 4


def test_spend_all_fits_exactly_what_remains(make) -> None:
    acct = make(pf.zCDP(1.0))
    acct.spend_all([Spend(pf.zCDP(0.1), f"q{i}") for i in range(10)])  # ten tenths, exactly
    assert acct.remaining == pf.zCDP(0.0)


def test_spend_all_refuses_a_total_over_what_remains_and_records_nothing(make) -> None:
    acct = make(pf.zCDP(1.0))
    acct.spend(pf.zCDP(0.5), label="first")
    with pytest.raises(BudgetExceededError) as err:
        acct.spend_all(
            [Spend(pf.zCDP(0.25), "a", {"secret": "never shown"}), Spend(pf.zCDP(0.375), "b")]
        )
    msg = str(err.value)
    assert "2 spends ('a' rho=0.25, 'b' rho=0.375) refused, nothing was recorded" in msg
    assert "together they request rho=0.625" in msg
    assert "rho=0.5 is spent and rho=0.5 remains" in msg
    assert "never shown" not in msg
    assert [e.label for e in acct.entries] == ["first"]
    assert acct.spent == pf.zCDP(0.5)


def test_spend_all_checks_delta_as_a_budget_dimension(make) -> None:
    acct = make(pf.zCDP(1.0, 1e-6))
    with pytest.raises(BudgetExceededError, match=r"delta: requests 1\.2e-06"):
        acct.spend_all([Spend(pf.zCDP(0.1, 6e-7), "a"), Spend(pf.zCDP(0.1, 6e-7), "b")])
    assert acct.entries == ()


@pytest.mark.parametrize(
    ("second", "error", "match"),
    [
        (lambda: Spend(pf.zCDP(0.1), "b", {1: "a"}), InvalidArgumentError, "description"),
        (lambda: Spend(pf.zCDP(0.1), "b", {"x": float("nan")}), InvalidValueError, "description"),
        (lambda: Spend(pf.zCDP(0.1), "b", 3), InvalidArgumentError, "description"),  # type: ignore[arg-type]
        (lambda: pf.zCDP(0.1), InvalidArgumentError, r"spends\[1\] must be a"),
    ],
)
def test_spend_all_with_an_invalid_spend_records_nothing(
    make, second, error: type[Exception], match: str
) -> None:
    acct = make(pf.zCDP(1.0))
    with pytest.raises(error, match=match):
        acct.spend_all([Spend(pf.zCDP(0.1), "a"), second()])
    assert acct.entries == ()


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: Spend(0.1), InvalidBudgetError, "zCDP"),  # type: ignore[arg-type]
        (lambda: Spend(pf.GDP(0.1)), InvalidBudgetError, "zCDP"),  # type: ignore[arg-type]
        (lambda: Spend(pf.zCDP(0.1), label=3), InvalidArgumentError, "label"),  # type: ignore[arg-type]
        (lambda: Spend(pf.zCDP(0.1), seeded="yes"), InvalidArgumentError, "seeded"),  # type: ignore[arg-type]
    ],
)
def test_spend_validates_its_fields(build, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        build()


@pytest.mark.parametrize("spends", [Spend(pf.zCDP(0.1)), "ab", None, iter([Spend(pf.zCDP(0.1))])])
def test_spend_all_needs_a_sequence(make, spends: object) -> None:
    acct = make(pf.zCDP(1.0))
    with pytest.raises(InvalidArgumentError, match="sequence of Spend"):
        acct.spend_all(spends)  # type: ignore[arg-type]
    assert acct.entries == ()


def test_spend_all_warns_for_each_seeded_spend_once_recorded(make) -> None:
    acct = make(pf.zCDP(1.0))
    with pytest.warns(SeededRandomnessWarning) as caught:
        acct.spend_all([Spend(pf.zCDP(0.1), "demo", seeded=True), Spend(pf.zCDP(0.1), "real")])
    assert [str(w.message).split(" used")[0] for w in caught] == ["release 'demo'"]
    assert [e.seeded for e in acct.entries] == [True, False]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(BudgetExceededError):
            acct.spend_all([Spend(pf.zCDP(1.0), "too much", seeded=True)])


def test_spend_all_refusal_leaves_the_file_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "spend.ledger"
    with Accountant(pf.zCDP(1.0), path) as acct:
        acct.spend(pf.zCDP(0.5), label="first")
        before = path.read_bytes()
        with pytest.raises(BudgetExceededError):
            acct.spend_all([Spend(pf.zCDP(0.25), "a"), Spend(pf.zCDP(0.5), "b")])
    assert path.read_bytes() == before
    with Accountant(pf.zCDP(1.0), path) as acct:
        assert [e.label for e in acct.entries] == ["first"]


def _batch_worker(path: str, name: str, barrier, queue: multiprocessing.Queue) -> None:
    with Accountant(pf.zCDP(1.0), path) as acct:
        barrier.wait(timeout=60)
        try:
            acct.spend_all([Spend(pf.zCDP(0.3), f"{name}-1"), Spend(pf.zCDP(0.3), f"{name}-2")])
            queue.put((name, "recorded"))
        except BudgetExceededError:
            queue.put((name, "refused"))


def test_two_processes_racing_for_a_batch_one_gets_it_whole(tmp_path: Path) -> None:
    # Each asks 0.6 of 1.0: whichever commits first gets both entries, the other none.
    path = str(tmp_path / "spend.ledger")
    Accountant(pf.zCDP(1.0), path).close()
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_batch_worker, args=(path, name, barrier, queue)) for name in "AB"]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sorted(results.values()) == ["recorded", "refused"]
    winner = next(name for name, outcome in results.items() if outcome == "recorded")
    with Accountant(pf.zCDP(1.0), path) as acct:
        assert [e.label for e in acct.entries] == [f"{winner}-1", f"{winner}-2"]
        assert acct.spent.exact_rho == Fraction(3, 5)


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


def test_report_with_delta_spent_outright() -> None:
    acct = Accountant(pf.zCDP(1.0, 1e-6), delta=1e-5)
    acct.spend(pf.zCDP(0.25, 1e-7), label="partition selection")
    r = acct.report()
    assert (r.budget_delta, r.spent_delta, r.remaining_delta) == (1e-6, 1e-7, 9e-7)
    assert r.spent + r.remaining == r.budget  # exactly, in rho and in delta
    # each row is (epsilon, delta + its own delta)-DP
    assert r.spent_epsilon == pf.zCDP(0.25, 1e-7).epsilon(Fraction(101, 10**7))
    assert r.budget_epsilon == pf.zCDP(1.0, 1e-6).epsilon(Fraction(11, 10**6))
    assert r.spent_epsilon_gaussian is None  # the Gaussian curve says nothing about δ spent
    text = str(r)
    assert "delta spent outright" in text
    assert "the conversion's slack 1e-05 + the row's delta spent outright" in text


def test_pure_dp_budget_refused() -> None:
    with pytest.raises(InvalidBudgetError):
        Accountant(pf.ApproxDP(1.0, 0.0))
