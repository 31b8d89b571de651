"""Session.marginals through the public API: its tables, its charge, its post-processing, refusals.

Tests at a huge ρ compare with the exact counts computed here in polars: the
noise there has σ below 0.01, so a count off by 0.5 has probability far below
1e-12.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

import privframe as pf
from privframe.accounting.replay import entry_events
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

SEX = ["f", "m"]
REGION = ["n", "s", "e"]
AGES = pf.bin("age", [0, 30, 60, 100])
DOMAINS: dict[str, Any] = {"sex": SEX, "region": REGION, "age": AGES}


def _people(n: int = 600, seed: int = 1) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "pid": np.arange(n),
            "sex": rng.choice(SEX, n),
            "region": rng.choice(REGION, n),
            "age": rng.integers(0, 100, n),
            "smoker": rng.random(n) < 0.3,
        }
    )


def _exact(df: pl.DataFrame, columns: tuple[str, ...]) -> dict[tuple[Any, ...], int]:
    binned = df.with_columns(AGES.expr) if "age" in columns else df
    counts = binned.group_by(columns).len()
    return {tuple(r[:-1]): r[-1] for r in counts.iter_rows()}


def test_each_table_has_every_public_combination_in_domain_order() -> None:
    sess = pf.Session(_people(), None, pf.zCDP(1.0))
    tables = sess.marginals([("sex", "age"), "region"], rho=0.5, domains=DOMAINS)
    assert list(tables) == [("sex", "age"), ("region",)]
    sex_age = tables[("sex", "age")]
    assert sex_age.columns == [
        "sex",
        "age",
        "count",
        "count_std",
        "count_ci95_low",
        "count_ci95_high",
    ]
    assert list(zip(sex_age["sex"], sex_age["age"], strict=True)) == list(
        itertools.product(SEX, AGES.keys)
    )
    assert tables[("region",)]["region"].to_list() == REGION


def test_counts_at_a_huge_budget_are_the_exact_counts() -> None:
    df = _people()
    sess = pf.Session(df, None, pf.zCDP(1e6))
    sets = [("sex", "region"), ("region", "age"), ("smoker",)]
    tables = sess.marginals(sets, rho=1e6, domains=DOMAINS)
    for s in sets:
        exact = _exact(df, s)
        got = tables[s]
        for row in got.iter_rows(named=True):
            key = tuple(row[c] for c in s)
            assert abs(row["count"] - exact.get(key, 0)) < 0.5


def test_rows_outside_the_domains_are_dropped() -> None:
    df = _people()
    sess = pf.Session(df, None, pf.zCDP(1e6))
    table = sess.marginals(["region"], rho=1e6, domains={"region": ["n", "s"]})[("region",)]
    exact = _exact(df, ("region",))
    assert table["region"].to_list() == ["n", "s"]
    assert np.allclose(table["count"].to_numpy(), [exact[("n",)], exact[("s",)]], atol=0.5)


def test_each_person_keeps_at_most_max_rows_rows() -> None:
    # Every person has 4 rows, two of each sex: with max_rows=2, 2 rows per person remain.
    df = pl.DataFrame({"pid": [i // 4 for i in range(400)], "sex": SEX * 200})
    sess = pf.Session(df, "pid", pf.zCDP(1e6))
    table = sess.marginals(["sex"], rho=1e6, domains={"sex": SEX}, max_rows=2)[("sex",)]
    assert abs(table["count"].sum() - 200) < 1


def test_session_default_row_limit_is_used() -> None:
    df = pl.DataFrame({"pid": [i // 4 for i in range(400)], "sex": SEX * 200})
    sess = pf.Session(df, "pid", pf.zCDP(1e6), contributions=pf.Bound(max_rows=1))
    table = sess.marginals(["sex"], rho=1e6, domains={"sex": SEX})[("sex",)]
    assert abs(table["count"].sum() - 100) < 1


def test_tables_are_non_negative_and_agree_where_they_share_columns() -> None:
    # A small budget: many noisy cells below 0 before post-processing.
    sess = pf.Session(_people(60), None, pf.zCDP(1.0), rng=SeededRandomness(5))
    sets = [("sex", "region"), ("region", "age"), ("sex", "age"), ("sex",)]
    tables = sess.marginals(sets, rho=0.01, domains=DOMAINS)
    arrays = {}
    for s in sets:
        t = tables[s]
        assert (t["count"] >= 0).all()
        shape = tuple(len(DOMAINS[c].keys if c == "age" else DOMAINS[c]) for c in s)
        arrays[s] = t["count"].to_numpy().reshape(shape)
    total = arrays[("sex",)].sum()
    scale = max(float(a.max()) for a in arrays.values())
    for a in arrays.values():
        assert math.isclose(a.sum(), total, abs_tol=1e-6 * scale)
    assert np.allclose(arrays[("sex", "region")].sum(axis=1), arrays[("sex",)], atol=1e-6 * scale)
    assert np.allclose(
        arrays[("sex", "region")].sum(axis=0),
        arrays[("region", "age")].sum(axis=1),
        atol=1e-6 * scale,
    )
    assert np.allclose(
        arrays[("sex", "age")].sum(axis=0), arrays[("region", "age")].sum(axis=0), atol=1e-6 * scale
    )


def test_std_and_interval_are_the_measurements() -> None:
    sess = pf.Session(_people(), None, pf.zCDP(1.0))
    tables = sess.marginals([("sex",), ("region",)], rho=0.5, domains=DOMAINS)
    # ρ = 1/2 over two tables: ρ = 1/4 each, σ = M/sqrt(2ρ) = sqrt(2).
    for table in tables.values():
        assert np.allclose(table["count_std"].to_numpy(), math.sqrt(2))
        width = table["count_ci95_high"] - table["count_ci95_low"]
        low_clipped = table["count_ci95_low"] == 0
        # The exact 95% half-width of N_Z(0, 2) is 3 (pf.noise.discrete_gaussian_halfwidth).
        assert (width.filter(~low_clipped) == 6).all()


def test_one_ledger_entry_for_all_tables_with_their_events() -> None:
    sess = pf.Session(_people(), None, pf.zCDP(1.0))
    sess.marginals([("sex", "age"), ("region",)], rho=Fraction(1, 3), domains=DOMAINS, label="m")
    assert sess.spent.exact_rho == Fraction(1, 3)
    (entry,) = sess.ledger
    assert entry.label == "m"
    events, used = entry_events(entry)
    assert used
    assert [e.dimension for e in events] == [6, 3]
    # Each table: σ/Δ with Δ = 1 and ρ = 1/6 each, so σ = sqrt(3).
    assert all(math.isclose(e.noise_multiplier, math.sqrt(3)) for e in events)


def test_pure_dp_session_spends_epsilon_with_laplace_noise() -> None:
    sess = pf.Session(_people(), None, pf.PureDP(2.0))
    tables = sess.marginals([("sex",)], epsilon=1.0, domains=DOMAINS)
    assert sess.spent.epsilon == 1.0
    (entry,) = sess.ledger
    events, used = entry_events(entry)
    assert used
    assert [type(e).__name__ for e in events] == ["LaplaceEvent"]
    assert tables[("sex",)].height == 2


def test_pandas_in_pandas_out() -> None:
    sess = pf.Session(_people().to_pandas(), None, pf.zCDP(1.0))
    table = sess.marginals(["sex"], rho=0.5, domains=DOMAINS)[("sex",)]
    assert isinstance(table, pd.DataFrame)


def test_public_metadata_and_types_give_domains() -> None:
    sess = pf.Session(_people(), None, pf.zCDP(1.0), metadata={"region": pf.Column(keys=REGION)})
    tables = sess.marginals([("region", "smoker")], rho=0.5)
    assert tables[("region", "smoker")].height == 6


def test_explain_states_noise_and_cost_and_spends_nothing() -> None:
    sess = pf.Session(_people(), None, pf.zCDP(1.0))
    explained = sess.explain_marginals([("sex", "age")], rho=0.5, domains=DOMAINS)
    text = str(explained)
    assert "sigma = 1" in text
    assert "6 cells" in text
    assert "Δ₁ = Δ₂ = M = 1" in text
    assert explained.cost == pf.zCDP(0.5)
    assert sess.spent.rho == 0
    assert not sess.ledger


def _refused(sess: pf.Session, error: type[Exception], match: str, **kwargs: Any) -> None:
    columns = kwargs.pop("columns", ["sex"])
    read: list[object] = []
    aggregate = sess._pipeline.aggregate
    sess._pipeline.aggregate = lambda spec: read.append(spec) or aggregate(spec)  # type: ignore[method-assign]
    try:
        with pytest.raises(error, match=match) as info:
            sess.marginals(columns, **kwargs)
    finally:
        del sess._pipeline.aggregate
    assert info.value.__context__ is None
    assert info.value.__cause__ is None
    assert not sess.ledger
    assert not read


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"columns": ["age"], "rho": 0.1},
            pf.InvalidValueError,
            r"'age' has no public domain.*pf.bin",
        ),
        (
            {"columns": ["sex"], "rho": 0.1},
            pf.InvalidValueError,
            r"'sex' has no public domain.*list",
        ),
        ({"columns": ["zz"], "rho": 0.1}, pf.InvalidValueError, r"\['zz'\] are not in the data"),
        ({"rho": 0.1, "domains": {"sex": SEX, "sx": SEX}}, pf.InvalidValueError, "not columns"),
        ({"rho": 2.0, "domains": {"sex": SEX}}, pf.BudgetExceededError, "remains"),
        ({"rho": 0.1, "domains": {"sex": "fm"}}, pf.InvalidArgumentError, "list of its values"),
        (
            {"columns": ["sex", ("sex",)], "rho": 0.1, "domains": {"sex": SEX}},
            pf.InvalidValueError,
            "twice",
        ),
        (
            {"columns": [("sex", "sex")], "rho": 0.1, "domains": {"sex": SEX}},
            pf.InvalidValueError,
            "twice",
        ),
        ({"columns": [], "rho": 0.1}, pf.InvalidArgumentError, "list of column sets"),
        (
            {"columns": ["age"], "rho": 0.1, "domains": {"age": [1.5]}},
            pf.InvalidArgumentError,
            "exact values",
        ),
        (
            {"columns": ["sex"], "rho": 0.1, "domains": {"sex": SEX}, "max_rows": 2},
            pf.InvalidValueError,
            "no privacy unit",
        ),
    ],
)
def test_refusals_read_nothing_and_charge_nothing(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    _refused(pf.Session(_people(), None, pf.zCDP(1.0)), error, match, **kwargs)


def test_refusals_over_a_privacy_unit() -> None:
    sess = pf.Session(_people(), "pid", pf.zCDP(1.0))
    _refused(sess, pf.InvalidValueError, "give max_rows", rho=0.1, domains={"sex": SEX})
    _refused(sess, pf.InvalidValueError, "privacy unit", columns=["pid"], rho=0.1, max_rows=1)


def test_an_epsilon_session_is_refused() -> None:
    sess = pf.Session(_people(), None, pf.ApproxDP(1.0, 1e-6))
    _refused(sess, pf.InvalidValueError, "zCDP or pure-DP", epsilon=0.5, domains={"sex": SEX})


def test_a_column_named_like_an_output_is_refused() -> None:
    df = _people().rename({"sex": "count"})
    sess = pf.Session(df, None, pf.zCDP(1.0))
    _refused(
        sess, pf.InvalidValueError, "clash", columns=["count"], rho=0.1, domains={"count": SEX}
    )


@pytest.mark.parametrize("value", ["hiv", "cancer"])
def test_a_value_nobody_has_is_released_and_charged_like_one_somebody_has(value: str) -> None:
    # A refusal only when nobody has the value would answer "does anyone?" for free.
    df = pl.DataFrame({"pid": [1, 2, 3], "diag": ["flu", "flu", "hiv"]})
    sess = pf.Session(df, "pid", pf.zCDP(1.0))
    table = sess.marginals(["diag"], rho=0.5, domains={"diag": [value]}, max_rows=1)[("diag",)]
    assert table["diag"].to_list() == [value]
    assert sess.spent.rho == 0.5


def test_empty_data_gives_noisy_zeros() -> None:
    sess = pf.Session(_people().head(0), None, pf.zCDP(1e6))
    table = sess.marginals(["sex"], rho=1e6, domains=DOMAINS)[("sex",)]
    assert np.allclose(table["count"].to_numpy(), 0, atol=0.5)


@pytest.mark.parametrize("epsilon", [Fraction(2, 3), 2 / 3, 0.1234567890123457])
def test_pure_dp_accepts_any_epsilon(epsilon: Any) -> None:
    df = pl.DataFrame({"pid": [i // 3 for i in range(300)], "sex": SEX * 150})
    sess = pf.Session(df, "pid", pf.PureDP(1.0))
    tables = sess.marginals(["sex"], epsilon=epsilon, domains={"sex": SEX}, max_rows=3)
    assert tables[("sex",)].height == 2
    assert sess.spent.epsilon == float(epsilon)


@pytest.mark.parametrize(
    ("budget", "spend"),
    [(pf.zCDP(1.0), {"rho": 1e-30}), (pf.PureDP(1.0), {"epsilon": 1e-13})],
    ids=["sigma", "scale"],
)
def test_a_budget_too_small_to_draw_is_refused_before_any_charge(
    budget: pf.Budget, spend: dict[str, float]
) -> None:
    sess = pf.Session(_people(), None, budget)
    _refused(sess, pf.InvalidBudgetError, "must be in", domains={"sex": SEX}, **spend)
    with pytest.raises(pf.InvalidBudgetError):
        sess.explain_marginals(["sex"], domains={"sex": SEX}, **spend)
