"""The accountant's batches: ``spend_all`` records every spend or none, even across processes."""

from __future__ import annotations

import multiprocessing
import warnings
from fractions import Fraction
from pathlib import Path

import pytest

import privframe as pf
from privframe.accounting.accountant import Accountant, Spend
from privframe.errors import (
    BudgetExceededError,
    InvalidArgumentError,
    InvalidBudgetError,
    InvalidValueError,
    SeededRandomnessWarning,
)


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
