"""Several private tables about the same people: Sessions sharing one accountant.

Each release reads one table and is charged to the one budget, so the
guarantees compose (ρ adds) whichever table a release read.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import privframe as pf
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

PEOPLE = pl.DataFrame({"pid": range(300), "age": [20 + i % 50 for i in range(300)]})
VISITS = pl.DataFrame({"pid": [i % 300 for i in range(900)], "site": ["a", "b", "c"] * 300})


def sessions() -> tuple[pf.Session, pf.Session]:
    people = pf.Session(
        PEOPLE,
        "pid",
        pf.zCDP(rho=1.0),
        rng=SeededRandomness(1),
        name="people",
        metadata={"age": pf.Column(bounds=(0, 100))},
        contributions=pf.Bound(max_groups=1, max_rows_per_group=1),
    )
    visits = pf.Session(
        VISITS,
        "pid",
        people.accountant,
        rng=SeededRandomness(2),
        name="visits",
        metadata={"site": pf.Column(keys=["a", "b", "c"])},
        contributions=pf.Bound(max_groups=3, max_rows_per_group=1),
    )
    return people, visits


def test_releases_from_either_table_are_charged_to_the_one_budget() -> None:
    people, visits = sessions()
    people.sql("SELECT AVG(age) FROM people", rho=0.25)
    visits.sql("SELECT site, COUNT(*) AS n FROM visits GROUP BY site", rho=0.5)
    assert people.spent.exact_rho == visits.spent.exact_rho == pf.zCDP(0.75).exact_rho
    assert [e.label for e in visits.ledger] == [
        "SELECT AVG(age) FROM people",
        "SELECT site, COUNT(*) AS n FROM visits GROUP BY site",
    ]


def test_a_release_over_what_the_other_table_left_is_refused_before_it_runs() -> None:
    people, visits = sessions()
    people.sql("SELECT COUNT(*) FROM people", rho=0.75)
    with pytest.raises(pf.BudgetExceededError, match="nothing was recorded"):
        visits.sql("SELECT COUNT(*) FROM visits", rho=0.5)
    assert len(people.ledger) == 1
    assert visits.remaining.exact_rho == pf.zCDP(0.25).exact_rho


def test_a_session_sharing_an_accountant_takes_no_ledger_of_its_own(tmp_path: Path) -> None:
    people, _ = sessions()
    with pytest.raises(pf.InvalidArgumentError, match="shared accountant keeps its own ledger"):
        pf.Session(VISITS, "pid", people.accountant, tmp_path / "ledger.sqlite")
