"""Audit of per-unit clamping: removing one person moves no measurement more than planned.

BigQuery's ``SUM``/``COUNT``/``AVG(..., contribution_bounds_per_group => (L,
U))`` and the builder's ``per_unit_bounds=`` clamp each unit's value in a
group and need no row limit: the planner's sensitivity rests on the per-unit
stage giving each unit one row per group (``m = 1``) and the bounds clamping
that row. As :mod:`test_privacy_audit_sensitivity` does for row clamping,
this audit runs the engine exactly (no noise) on D and on D − X with the
same engine seed, for every person X and several seeds, and requires every
measurement to move by at most its planned L2 sensitivity. The data make the
bounds bind from above and below (many rows per unit and group, values far
outside the bounds, negative values) and give units more groups than
``max_groups`` allows, so that group sampling is exercised too. It is
deterministic: any violation is a real one.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import test_privacy_audit_sensitivity as sensitivity

import privframe as pf
from privframe.api.query import Query

KEYS = [f"k{i}" for i in range(4)]
SQL = (
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6, "
    "max_groups_contributed=2, privacy_unit_column=id) g, "
    "SUM(amount, contribution_bounds_per_group => (-5, 40)) AS total, "
    "COUNT(*, contribution_bounds_per_group => (0, 3)) AS n, "
    "AVG(amount, contribution_bounds_per_group => (-5, 40)) AS mean, "
    "COUNT(amount, contribution_bounds_per_group => (1, 2)) AS valued "
    "FROM data GROUP BY g"
)


def _frame() -> pl.DataFrame:
    """8 people, each with 1-7 rows in 1-4 keys; amounts from -60 to 90, some null."""
    rng = np.random.default_rng(5)
    rows = []
    for person in range(8):
        for _ in range(int(rng.integers(1, 12))):
            key = KEYS[int(rng.integers(0, 1 + person % 4))]
            amount = None if rng.random() < 0.15 else float(rng.uniform(-60, 90))
            rows.append((person, key, amount))
    return pl.DataFrame(rows, schema=["id", "g", "amount"], orient="row")


def _builder(sess: pf.Session) -> Query:
    return (
        sess.query()
        .bound(max_groups=2)
        .group_by("g", keys=KEYS)
        .agg(
            pf.sum("amount", per_unit_bounds=(-5, 40)),
            pf.count(per_unit_bounds=(0, 3)),
            pf.mean("amount", per_unit_bounds=(-5, 40)),
        )
    )


def _sql(sess: pf.Session) -> Query:
    return sess.parse_sql(SQL, metadata={"g": pf.Column(keys=KEYS)}).query


def _ungrouped(sess: pf.Session) -> Query:
    """No GROUP BY: one per-unit row per person (M = 1), clamped from below and above."""
    return sess.query().agg(
        pf.sum("amount", per_unit_bounds=(-20, 30)), pf.count(per_unit_bounds=(2, 5))
    )


@pytest.mark.parametrize("make_query", [_builder, _sql, _ungrouped], ids=lambda f: f.__name__)
def test_removing_a_person_moves_no_measurement_more_than_planned(make_query: object) -> None:
    scenario = sensitivity.Scenario(_frame(), "id", make_query)  # type: ignore[arg-type]
    assert sensitivity._violations(scenario) == []


def test_the_bounds_bind_and_units_exceed_their_groups_on_this_data() -> None:
    frame = _frame()
    per_unit = frame.group_by("id", "g").agg(pl.col("amount").sum(), pl.len())
    assert (per_unit["amount"] > 40).any()
    assert (per_unit["amount"] < -5).any()
    assert (per_unit["len"] > 3).any()
    assert (frame.group_by("id").agg(pl.col("g").n_unique())["g"] > 2).any()


def test_the_audited_plans_are_per_unit_with_one_row_per_group() -> None:
    for make_query in (_builder, _sql):
        sess = pf.Session(_frame(), "id", pf.zCDP(1.0))
        query = make_query(sess)
        explained = str(query.explain(rho=0.5))
        assert "per_unit(g): one row per unit and group: m = 1" in explained
        assert query.plan.bound == pf.Bound(max_groups=2)
    released = pf.Session(_frame(), "id", pf.zCDP(1.0)).sql(
        SQL, metadata={"g": pf.Column(keys=KEYS)}
    )
    assert released["g"].to_list() == KEYS  # Session.release runs the audited plan
