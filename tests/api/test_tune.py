"""query.tune through the public API: its charge, its refusals, what it recovers and returns.

The tests marked ``statistical`` draw real noise at a huge ρ; each states the
chance that noise alone fails it (below 1e-9: the thresholds are many σ away).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

import privframe as pf
import privframe.plan.release as release_module
from privframe.accounting.replay import entry_events
from privframe.api.tune import TABLE_COLUMNS, Tuned, tune
from privframe.engines.contributions import Contributions, ContributionSpec
from privframe.mechanisms.noise import SeededRandomness
from privframe.plan.aggregates import Aggregate

KEYS = ["a", "b", "c", "d", "e"]
MARKER = "SECRET-4242"


def _data(units: int = 400) -> pl.DataFrame:
    """Every unit is in exactly 3 of the 5 groups, with 5 rows in each; values in [100, 200)."""
    rng = np.random.default_rng(3)
    rows = []
    for u in range(units):
        for g in rng.choice(KEYS, 3, replace=False):
            rows += [(u, str(g), float(rng.uniform(100, 200))) for _ in range(5)]
    return pl.DataFrame(rows, schema=["user", "g", "x"], orient="row")


def _query(sess: pf.Session, *aggregates: Aggregate) -> Any:
    return (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=1)
        .group_by("g", keys=KEYS)
        .agg(*(aggregates or (pf.count(), pf.sum("x", (0, 1e6)), pf.mean("x", (0, 1e6)))))
    )


def _rows(table: pl.DataFrame, item: str) -> dict[str, tuple[float, str]]:
    found = table.filter(pl.col("item") == item)
    return {
        s: (v, n) for s, v, n in zip(found["statistic"], found["value"], found["note"], strict=True)
    }


def test_tune_is_charged_exactly_rho_in_one_ledger_entry() -> None:
    sess = pf.Session(_data(50), "user", pf.zCDP(1.0))
    sess.query().bound(max_rows_per_group=1).agg(pf.count()).release(0.25)
    tuned = tune(_query(sess), rho=Fraction(1, 10), plan_rho=0.5)
    assert sess.spent.exact_rho == Fraction(1, 4) + Fraction(1, 10)
    entry = sess.ledger[-1]
    assert entry.label == "tune"
    assert [e["type"] for e in entry.description["events"]] == ["gaussian"] * 3
    assert entry_events(entry)[1]  # the events account for the charge, so replays use them
    assert isinstance(tuned.table, pl.DataFrame)


def test_the_tune_call_every_explanation_suggests_runs() -> None:
    # It suggested query.tune(rho=...), which fails: plan_rho is required.
    sess = pf.Session(_data(), "user", pf.zCDP(1.0))
    query = _query(sess)
    explanation = query.explain(rho=0.45)
    calls = re.findall(r"query\.(tune\([^)]*\))", str(explanation))
    assert calls == ["tune(rho=0.05, plan_rho=0.45)"]
    assert calls[0] in explanation._repr_html_()
    tuned = eval(f"query.{calls[0]}", {"query": query})  # the text, run as written
    assert isinstance(tuned, Tuned)
    assert sess.spent == pf.zCDP(0.05)
    tuned.query.release(rho=0.45)


def test_an_over_budget_tune_is_refused_before_the_data_is_read() -> None:
    sess = pf.Session(_data(20), "user", pf.zCDP(1.0))
    read: list[bool] = []
    engine = sess.__privframe_pipeline__().engine

    def reads(spec: ContributionSpec) -> Contributions:
        read.append(True)
        return engine.contributions(spec)

    sess.__privframe_pipeline__().engine = _Engine(engine, reads)
    with pytest.raises(pf.BudgetExceededError):
        tune(_query(sess), rho=1.5, plan_rho=1.0)
    assert sess.spent.rho == 0
    assert len(sess.ledger) == 0
    assert read == []


def test_no_noise_is_drawn_before_the_charge(monkeypatch: pytest.MonkeyPatch) -> None:
    sess = pf.Session(_data(20), "user", pf.zCDP(1.0))
    spent_at_draw: list[float] = []
    real = release_module.discrete_gaussian

    def watched(*args: Any, **kwargs: Any) -> np.ndarray:
        spent_at_draw.append(sess.spent.rho)
        return real(*args, **kwargs)

    monkeypatch.setattr(release_module, "discrete_gaussian", watched)
    tune(_query(sess), rho=0.5, plan_rho=0.5)
    assert spent_at_draw == [0.5] * 3


@pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")
@pytest.mark.parametrize("seed", [6, 8, 16])
def test_tune_completes_when_an_output_shows_only_once_a_raw_bucket_moves(seed: int) -> None:
    # Little data, much noise: the model leaves x's outputs out at the estimates, and the
    # uncertainty of the raw tail buckets must not bring them back (a KeyError before).
    sess = pf.Session(_data(20), "user", pf.zCDP(1.0), rng=SeededRandomness(seed))
    tuned = tune(_query(sess), rho=0.5, plan_rho=0.5)
    assert sess.spent.exact_rho == Fraction(1, 2)
    assert set(tuned.bounds) == {"x_sum", "x_mean"}


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"rho": 0, "plan_rho": 1.0}, pf.InvalidBudgetError, "rho"),
        ({"rho": -0.1, "plan_rho": 1.0}, pf.InvalidBudgetError, "rho"),
        ({"rho": 0.1, "plan_rho": 0}, pf.InvalidBudgetError, "plan_rho"),
        ({"rho": 0.1, "plan_rho": -1}, pf.InvalidBudgetError, "plan_rho"),
        ({"rho": 0.1}, pf.InvalidArgumentError, "plan_rho"),
        ({"epsilon": 0.1, "plan_rho": 1.0}, pf.InvalidArgumentError, "epsilon"),
        ({"rho": 0.1, "plan_rho": 1.0, "weights": {"nope": 1.0}}, pf.InvalidValueError, "nope"),
    ],
)
def test_bad_arguments_are_refused_and_nothing_is_charged(
    arguments: dict[str, Any], error: type[Exception], message: str
) -> None:
    sess = pf.Session(_data(10), "user", pf.zCDP(1.0))
    with pytest.raises(error, match=message):
        tune(_query(sess), **arguments)
    assert sess.spent.rho == 0
    assert len(sess.ledger) == 0


def test_queries_that_cannot_be_tuned_are_refused_and_nothing_is_charged() -> None:
    sess = pf.Session(_data(10), "user", pf.zCDP(1.0, delta=1e-6))
    without_aggregates = sess.query().bound(max_groups=1, max_rows_per_group=1)
    with pytest.raises(pf.InvalidValueError, match="no aggregates"):
        tune(without_aggregates, rho=0.1, plan_rho=1.0)
    private_keys = sess.query().bound(max_groups=1, max_rows_per_group=1).group_by("g")
    with pytest.raises(pf.InvalidValueError, match="public group keys"):
        tune(private_keys.agg(pf.count()), rho=0.1, plan_rho=1.0)
    rows_only = pf.Session(_data(10).drop("user"), None, pf.zCDP(1.0))
    with pytest.raises(pf.InvalidValueError, match="nothing to tune"):
        tune(rows_only.query().agg(pf.count()), rho=0.1, plan_rho=1.0)
    with pytest.raises(pf.InvalidArgumentError, match="query built from a privframe Session"):
        tune("SELECT 1", rho=0.1, plan_rho=1.0)  # type: ignore[type-var]
    assert sess.spent.rho == 0
    assert rows_only.spent.rho == 0


class _Engine:
    """An engine as the session's, with ``contributions`` replaced or missing."""

    def __init__(self, inner: Any, contributions: Any = None) -> None:
        self.aggregate = inner.aggregate
        if contributions is not None:
            self.contributions = contributions


def test_an_engine_that_cannot_tune_is_refused_naming_the_polars_path() -> None:
    sess = pf.Session(_data(10), "user", pf.zCDP(1.0))
    sess.__privframe_pipeline__().engine = _Engine(sess.__privframe_pipeline__().engine)
    with pytest.raises(pf.InvalidValueError, match="polars engine"):
        tune(_query(sess), rho=0.1, plan_rho=1.0)
    assert sess.spent.rho == 0


def test_tuning_the_bounds_of_the_unit_column_is_refused_before_any_charge() -> None:
    sess = pf.Session(_data(10), "user", pf.zCDP(1.0))
    query = sess.query().bound(max_rows_per_group=1).agg(pf.sum("user", bounds=(0, 10)))
    with pytest.raises(pf.InvalidValueError, match="privacy unit column 'user'"):
        tune(query, rho=0.1, plan_rho=1.0)
    assert sess.spent.rho == 0


def test_an_engine_failure_is_withheld_and_nothing_is_charged() -> None:
    sess = pf.Session(_data(10), "user", pf.zCDP(1.0))

    def fails(spec: ContributionSpec) -> Contributions:
        raise ValueError(MARKER)

    sess.__privframe_pipeline__().engine = _Engine(sess.__privframe_pipeline__().engine, fails)
    with pytest.raises(pf.InvalidValueError) as caught:
        tune(_query(sess), rho=0.1, plan_rho=1.0)
    chain: BaseException | None = caught.value
    while chain is not None:
        assert MARKER not in str(chain)
        chain = chain.__cause__ or chain.__context__
    assert sess.spent.rho == 0


@pytest.mark.statistical
def test_a_huge_rho_recovers_the_contribution_quantiles() -> None:
    # Every unit has 3 groups and 5 rows per group: the noisy quantiles land in the bins
    # holding 3 ([3, 4)) and 5 ([4, 6)); the values' 1%, 50% and 99% points in the
    # half-octave buckets holding the true ones. σ ≈ 0.002 units against bins of 400 units.
    data = _data()
    sess = pf.Session(data, "user", pf.zCDP(10.0**6))
    tuned = tune(_query(sess), rho=10.0**5, plan_rho=1.0)
    table = tuned.table
    assert list(table.columns) == list(TABLE_COLUMNS)
    assert _rows(table, "privacy units")["estimate"][0] == pytest.approx(400, abs=0.01)
    groups = _rows(table, "groups per unit")
    assert [groups[p][0] for p in ("p50", "p90", "p99")] == [3, 3, 3]
    rows = _rows(table, "rows per (unit, group)")
    assert [rows[p][0] for p in ("p50", "p90", "p99")] == [4, 4, 4]
    values = _rows(table, "values of x")
    per_unit = data.group_by("user").agg(pl.col("x"))["x"].to_list()
    for p, q in (("p1", 0.01), ("p50", 0.5), ("p99", 0.99)):
        true = float(np.quantile(np.concatenate(per_unit), q))
        low = values[p][0]
        assert low <= true < low * 2**0.5 * 1.001, p


@pytest.mark.parametrize("n_groups", [5, 7, 40])
def test_every_unit_in_every_group_is_tuned_to_max_groups_equal_to_the_groups(
    n_groups: int,
) -> None:
    # The groups histogram's last bin holds exactly n_groups, so k = n_groups (nothing
    # dropped) is told apart from the edge below it. σ ≈ 0.002 units here.
    keys = [f"k{i}" for i in range(n_groups)]
    frame = pl.DataFrame({"user": np.repeat(np.arange(200), n_groups), "g": keys * 200, "x": 150.0})
    sess = pf.Session(frame, "user", pf.zCDP(10.0**6))
    query = (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=1)
        .group_by("g", keys=keys)
        .agg(pf.count(), pf.sum("x", bounds=(0, 1e6)))
    )
    tuned = query.tune(10.0**5, plan_rho=1.0)
    assert tuned.bound is not None
    assert tuned.bound.max_groups == n_groups


@pytest.mark.statistical
def test_the_tuned_query_releases_with_limits_and_bounds_moved_the_expected_way() -> None:
    # Given k = 1, m = 1 and bounds (0, 1e6) against 3 groups, 5 rows and values in
    # [100, 200): k and m must grow and the bounds shrink around the values.
    sess = pf.Session(_data(), "user", pf.zCDP(10.0**6))
    tuned = tune(_query(sess), rho=10.0**5, plan_rho=1.0)
    assert tuned.bound is not None
    assert tuned.bound.max_groups == 3
    assert tuned.bound.max_rows_per_group == 5
    for name in ("x_sum", "x_mean"):
        lower, upper = tuned.bounds[name]
        assert 0 <= lower < 150 < upper <= 2**8
    assert tuned.choice.error < tuned.choice.given_error
    released = tuned.query.release(1.0)
    assert released.columns == ["g", "count", "x_sum", "x_mean"]
    assert "Tuned(bound=Bound(max_groups=3" in repr(tuned)


def test_without_a_privacy_unit_only_value_bounds_are_tuned_and_pandas_gets_pandas() -> None:
    data = _data(30).drop("user").to_pandas()
    sess = pf.Session(data, None, pf.zCDP(10.0**6))
    query = sess.query().agg(pf.count(), pf.sum("x", (-1e6, 1e6)))
    tuned = tune(query, rho=10.0**5, plan_rho=1.0, label="bounds")
    assert tuned.bound is None
    lower, upper = tuned.bounds["x_sum"]
    assert lower > -1e6
    assert upper < 1e6
    assert isinstance(tuned.table, pd.DataFrame)
    assert sess.ledger[-1].label == "bounds"
    assert list(tuned.query.release(1.0).columns) == ["count", "x_sum"]


def test_quantile_bounds_span_the_values() -> None:
    sess = pf.Session(_data(50), "user", pf.zCDP(10.0**6))
    query = _query(sess, pf.count(), pf.median("x", (-1e6, 1e6)))
    tuned = tune(query, rho=10.0**5, plan_rho=1.0)
    lower, upper = tuned.bounds["x_median"]
    assert 64 <= lower <= 100
    assert 200 <= upper <= 2**8


@pytest.mark.statistical
def test_the_bias_of_bounding_is_estimated_for_the_given_and_the_tuned_query() -> None:
    # Every unit has 15 rows, and the given k = 1, m = 1 keep one: 14/15 of the rows dropped
    # (the model, taking 5 rows as the middle of their bin [4, 6), says 12.5/13.5). Values
    # lie in [100, 200): bounds (0, 120) clip Σ(x − 120)⁺/Σx of their mass, and the tuned
    # query nothing. σ ≈ 0.002 units: the tolerances are the model's, not the noise's.
    data = _data()
    sess = pf.Session(data, "user", pf.zCDP(10.0**6))
    tuned = tune(_query(sess, pf.sum("x", (0, 120))), rho=10.0**5, plan_rho=1.0)
    given, chosen = tuned.choice.given_bias, tuned.choice.bias
    assert given is not None
    assert chosen is not None
    assert given.rows_dropped == pytest.approx(14 / 15, abs=0.01)
    x = data["x"].to_numpy()
    clipped = float(np.clip(x - 120, 0, None).sum() / x.sum())
    # The model reads values at their bucket's midpoint: [90.5, 128) and [128, 181) here.
    assert given.clipped["x_sum"] == pytest.approx(clipped, abs=0.03)
    assert given.bias["x_sum"] < -0.1
    assert chosen.rows_dropped == pytest.approx(0, abs=0.01)
    assert chosen.clipped["x_sum"] < 0.01
    assert abs(chosen.bias["x_sum"]) < 0.01
    rows = _rows(tuned.table, "rows dropped")
    assert rows["fraction"][0] == pytest.approx(0, abs=0.01)
    assert re.match(r"given: 0\.9[23]\d; ", rows["fraction"][1])
    assert set(_rows(tuned.table, "x_sum bias")) == {"relative"}
    assert set(_rows(tuned.table, "x_sum noise")) == {"relative"}


def test_the_tuned_explanation_shows_the_bias_beside_the_noise() -> None:
    sess = pf.Session(_data(), "user", pf.zCDP(10.0**6))
    tuned = tune(_query(sess), rho=10.0**5, plan_rho=1.0)
    explanation = tuned.explain()
    assert explanation.plan.cost.rho == pytest.approx(1.0)  # at plan_rho unless told
    assert tuned.explain(2.0).plan.cost.rho == pytest.approx(2.0)
    text = str(explanation)
    assert "bias of bounding, estimated by tune" in text
    assert "rows dropped by max_groups and max_rows_per_group: 0%" in text
    for name in ("x_sum", "x_mean"):
        assert re.search(rf"  {name}: bias \S+ ± \S+ beside noise σ \S+; its bounds clip", text)
    assert "count: bias" in text  # a count has no bounds to clip, and may still be biased
