"""PureDP and ApproxDP sessions over Spark: the plan and, seeded alike, the releases of polars.

A pure-DP or (ε, δ) release's sensitivities, Laplace or Gaussian scales, noise
family and cost are planned from public parameters only, so a session over a
Spark DataFrame must plan exactly what a session over the same data in polars
plans; and when the contribution bounds make no random choice (no unit holds
more groups than ``max_groups``; a binding ``max_rows_per_group`` keeps
``min(n, m)`` rows and the scaled sums, deterministic in both engines) the
exact aggregates are equal, so the same SeededRandomness stream gives the same
released table, cell for cell, and the same ledger.

Spark runs in local mode (``local[2]``), started once by the ``spark`` fixture
in conftest.py; every release is one Spark job, so the module makes few. The
engines' exact aggregates are compared on every deployment (local, standalone
cluster, Spark Connect) by test_spark_engine.py; this module checks the
sessions around them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
import pytest

import privframe as pf
from privframe.api.query import Query
from privframe.mechanisms.noise import SeededRandomness
from privframe.plan.planner import ReleasePlan

KEYS = ["a", "b", "c", "d"]  # "d" has no rows; "zz" is not public
SEED = 5


@pytest.fixture(scope="module")
def data() -> pl.DataFrame:
    """600 rows of 200 units, each in at most 3 of the keys a, b, c (and in zz, not public)."""
    rng = np.random.default_rng(11)
    n = 600
    return pl.DataFrame(
        {
            "u": rng.integers(0, 200, n),
            "g": rng.choice(["a", "b", "c", "zz"], n),
            "x": rng.uniform(-5, 60, n).round(3),
            "age": rng.integers(10, 90, n),
        }
    )


def _everything(sess: pf.Session) -> Query:
    """Every aggregate family, no bound that binds (so no random choice in either engine)."""
    return (
        sess.query()
        .filter(pl.col("age") >= 18)
        .bound(max_groups=3, max_rows_per_group=1000)
        .group_by("g", keys=KEYS)
        .agg(
            pf.count(),
            pf.sum("x", (0, 50)),
            pf.mean("x", (0, 50)),
            pf.var("x", (0, 50), missing="drop"),
            pf.count_distinct(),
            pf.median("x", (0, 50), candidates=51),
        )
    )


def _rows_bound(sess: pf.Session) -> Query:
    """m = 1 binds: each unit keeps 1 row per key (its scaled sums), deterministic in both."""
    return (
        sess.query()
        .bound(max_groups=4, max_rows_per_group=1)
        .group_by("g", keys=KEYS)
        .agg(pf.count(), pf.sum("x", (0, 50)))
    )


def _selected(sess: pf.Session) -> Query:
    """Groups chosen privately, zz among them (k = 4: no unit has more), spending δ/2 on it."""
    return sess.query().bound(max_groups=4, max_rows_per_group=1000).group_by("g").agg(pf.count())


def _sessions(spark: Any, data: pl.DataFrame, budget: pf.Budget) -> tuple[pf.Session, pf.Session]:
    """A polars session and a Spark one over the same rows, on the same seeded stream."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pf.SeededRandomnessWarning)
        local = pf.Session(data, "u", budget, rng=SeededRandomness(SEED))
        remote = pf.Session(
            spark.createDataFrame(data.to_pandas()), "u", budget, rng=SeededRandomness(SEED)
        )
    return local, remote


def _plan_facts(release: ReleasePlan) -> list[Any]:
    """What the noise depends on: sensitivities, shares, scales, family, cost, selection."""
    facts: list[Any] = [release.family, release.choice, release.cost, release.limits]
    facts += [
        (m.key, m.kind, m.grid_exponent, m.l1_units, m.l2_units, m.share, m.scale_units)
        for m in release.measurements
    ]
    facts += [(q.key, q.share, q.eta) for q in release.quantiles]
    if release.selection is not None:
        s = release.selection
        facts.append((s.threshold, s.delta, s.measurement.sigma_units))
    return facts


Case = tuple[Callable[[pf.Session], Query], dict[str, float], str]

PURE: list[Case] = [
    (_everything, {"epsilon": 1.0}, "laplace"),
    (_rows_bound, {"epsilon": 0.5}, "laplace"),
]
APPROX: list[Case] = [
    # Six outputs over k = 3 keys: the Gaussian (ρ = 0.024, the quantile's share in ρ) wins.
    (_everything, {"epsilon": 1.0, "delta": 1e-6}, "gaussian"),
    # One row in each of 4 keys: L1 = 4 against L2 = 2, the Laplace wins.
    (_rows_bound, {"epsilon": 1.0, "delta": 1e-6}, "laplace"),
    (_selected, {"epsilon": 1.0, "delta": 1e-6}, "gaussian"),
]


@pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning")
@pytest.mark.parametrize(
    ("budget", "cases"),
    [(pf.PureDP(5.0), PURE), (pf.ApproxDP(5.0, 1e-2), APPROX)],
    ids=["PureDP", "ApproxDP"],
)
def test_spark_plans_and_releases_what_polars_does(
    spark: Any, data: pl.DataFrame, budget: pf.Budget, cases: list[Case]
) -> None:
    local, remote = _sessions(spark, data, budget)
    for make, spend, family in cases:
        plans = [make(sess).explain(**spend) for sess in (local, remote)]
        assert plans[0].plan.family == family
        assert (plans[0].plan.selection is not None) == (make is _selected)
        assert _plan_facts(plans[0].plan) == _plan_facts(plans[1].plan)
        assert str(plans[0]) == str(plans[1])  # explain shows the same derivations
        mine = make(local).release(**spend, with_error=True)
        theirs = make(remote).release(**spend, with_error=True)
        assert isinstance(theirs, type(data.to_pandas()))  # pandas by default
        assert pl.from_pandas(theirs).equals(mine), make.__name__
        assert mine.height > 0
    assert remote.spent == local.spent
    assert remote.basic_spent == local.basic_spent
    assert [e.description for e in remote.ledger] == [e.description for e in local.ledger]
