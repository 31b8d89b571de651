"""Session.synthesize through the public API: its table, its charge, its accuracy, its refusals.

The accuracy tests run at a huge ρ (σ below 0.01 per cell), where MST and AIM
must recover the marginals they measure up to the estimator's tolerance and
the sampling's rounding: a total variation of 0.02 is several times what
rounding 4,000 rows leaves, and noise at that σ cannot reach it.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

import privframe as pf
import privframe.api.synthesis as doors
from privframe.accounting.replay import entry_events
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

REGIONS = ["n", "s", "e"]
AGES = pf.bin("age", [0, 30, 60, 100])
DOMAINS: dict[str, Any] = {"region": REGIONS, "age": AGES}


def _people(n: int = 4000, seed: int = 3) -> pl.DataFrame:
    """A chain region → age band → smoker → sick, so that a tree of pairs explains it."""
    rng = np.random.default_rng(seed)
    region = rng.choice(REGIONS, n, p=[0.5, 0.3, 0.2])
    old = rng.random(n) < np.where(region == "n", 0.7, 0.2)
    age = np.where(old, rng.integers(60, 100, n), rng.integers(0, 60, n))
    smoker = rng.random(n) < np.where(age < 30, 0.1, 0.5)
    sick = rng.random(n) < np.where(smoker, 0.6, 0.1)
    return pl.DataFrame({"region": region, "age": age, "smoker": smoker, "sick": sick})


def _tv(a: pl.DataFrame, b: pl.DataFrame, columns: list[str]) -> float:
    """Total variation distance between two tables' distributions over ``columns``."""
    pa = a.group_by(columns).len().with_columns(pl.col("len") / a.height)
    pb = b.group_by(columns).len().with_columns(pl.col("len") / b.height)
    joined = pa.join(pb, on=columns, how="full", coalesce=True).fill_null(0)
    return float((joined["len"] - joined["len_right"]).abs().sum()) / 2


def _binned(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(AGES.expr)


@pytest.mark.parametrize("method", ["mst", "aim"])
def test_table_has_the_columns_public_values_and_rows_asked(method: str) -> None:
    sess = pf.Session(_people(), None, pf.zCDP(1.0))
    table = sess.synthesize(rho=1.0, method=method, domains=DOMAINS, rows=500)
    assert isinstance(table, pl.DataFrame)
    assert table.columns == ["region", "age", "smoker", "sick"]
    assert table.height == 500
    assert set(table["region"]) <= set(REGIONS)
    assert set(table["age"]) <= set(AGES.keys)
    assert table.schema["smoker"] == pl.Boolean


@pytest.mark.parametrize("method", ["mst", "aim"])
def test_huge_budget_recovers_the_measured_pairs(method: str) -> None:
    df = _people()
    sess = pf.Session(df, None, pf.zCDP(1e6))
    table = sess.synthesize(rho=1e6, method=method, domains=DOMAINS)
    assert abs(table.height - df.height) <= 2
    truth = _binned(df)
    for pair in (["region", "age"], ["age", "smoker"], ["smoker", "sick"]):
        assert _tv(table, truth, pair) < 0.02, pair


def test_aim_recovers_its_workload_of_triples() -> None:
    df = _people()
    sess = pf.Session(df, None, pf.zCDP(1e6))
    workload = [("region", "age", "smoker"), ("age", "smoker", "sick")]
    table = sess.synthesize(rho=1e6, method="aim", domains=DOMAINS, workload=workload)
    truth = _binned(df)
    for triple in workload:
        assert _tv(table, truth, list(triple)) < 0.03, triple


def test_one_ledger_entry_charged_exactly_rho() -> None:
    sess = pf.Session(_people(500), None, pf.zCDP(1.0))
    sess.synthesize(rho=Fraction(1, 3), method="mst", domains=DOMAINS, rows=10, label="syn")
    (entry,) = sess.ledger
    assert entry.label == "syn"
    assert sess.spent.exact_rho == Fraction(1, 3)
    assert entry.description["synthesize"]["method"] == "mst"
    assert dict(entry.description["synthesize"]["domain"]) == {
        "region": 3,
        "age": 3,
        "smoker": 2,
        "sick": 2,
    }


def test_seeded_synthesis_is_reproducible_and_marked_not_private() -> None:
    tables = []
    for _ in range(2):
        sess = pf.Session(_people(500), None, pf.zCDP(1.0), rng=SeededRandomness(9))
        with pytest.warns(pf.SeededRandomnessWarning):
            tables.append(sess.synthesize(rho=1.0, method="aim", domains=DOMAINS, rows=200))
        assert sess.ledger[0].seeded
    assert tables[0].equals(tables[1])


def test_pandas_in_pandas_out_and_columns_chosen() -> None:
    sess = pf.Session(_people(500).to_pandas(), None, pf.zCDP(1.0))
    table = sess.synthesize(rho=1.0, method="mst", columns=["smoker", "region"], domains=DOMAINS)
    assert isinstance(table, pd.DataFrame)
    assert list(table.columns) == ["smoker", "region"]


def test_one_and_two_columns() -> None:
    sess = pf.Session(_people(500), None, pf.zCDP(10.0))
    for method in ("mst", "aim"):
        assert sess.synthesize(rho=1.0, method=method, columns=["sick"], rows=7).shape == (7, 1)
        two = sess.synthesize(rho=1.0, method=method, columns=["sick", "smoker"], rows=7)
        assert two.shape == (7, 2)


def test_per_person_rows_are_bounded_by_max_rows() -> None:
    df = _people(400).with_columns(pid=pl.int_range(pl.len()) // 4)
    sess = pf.Session(df, "pid", pf.zCDP(1e6))
    table = sess.synthesize(rho=1e6, method="mst", domains=DOMAINS, max_rows=1)
    assert abs(table.height - 100) <= 2


def test_explain_states_the_method_and_spends_nothing() -> None:
    sess = pf.Session(_people(500), None, pf.zCDP(1.0))
    mst = str(sess.explain_synthesis(rho=1.0, method="mst", domains=DOMAINS))
    assert "spanning tree of 3 pairs" in mst
    assert "noise std 2.121" in mst  # ρ/3 over 3 pairs: σ = 1/√(2/9)
    aim = sess.explain_synthesis(rho=1.0, domains=DOMAINS, workload=[("region", "age")])
    assert "1 column sets" in str(aim)
    assert aim.cost == pf.zCDP(1.0)
    assert not sess.ledger


def _refused(sess: pf.Session, error: type[Exception], match: str, **kwargs: Any) -> None:
    read: list[object] = []
    aggregate = sess._pipeline.aggregate
    sess._pipeline.aggregate = lambda spec: read.append(spec) or aggregate(spec)  # type: ignore[method-assign]
    try:
        with pytest.raises(error, match=match) as info:
            sess.synthesize(**kwargs)
    finally:
        del sess._pipeline.aggregate
    assert info.value.__context__ is None
    assert info.value.__cause__ is None
    assert not sess.ledger
    assert not read


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"rho": 0.5}, pf.InvalidValueError, r"'region' has no public domain"),
        ({"rho": 0.5, "method": "gan", "domains": DOMAINS}, pf.InvalidValueError, "one of"),
        (
            {"rho": 0.5, "method": "mst", "domains": DOMAINS, "workload": [("region", "age")]},
            pf.InvalidValueError,
            "AIM's",
        ),
        (
            {"rho": 0.5, "domains": DOMAINS, "workload": [("region", "zz")]},
            pf.InvalidValueError,
            "not among the synthesized",
        ),
        ({"rho": 0.5, "domains": DOMAINS, "rows": -1}, pf.InvalidArgumentError, "non-negative"),
        ({"rho": 0.5, "domains": DOMAINS, "rows": True}, pf.InvalidArgumentError, "non-negative"),
        ({"rho": 2.0, "domains": DOMAINS}, pf.BudgetExceededError, "remains"),
        ({"rho": 0.5, "columns": "region", "domains": DOMAINS}, pf.InvalidArgumentError, "list"),
        (
            {"rho": 0.5, "columns": ["region", "region"], "domains": DOMAINS},
            pf.InvalidValueError,
            "twice",
        ),
    ],
)
def test_refusals_read_nothing_and_charge_nothing(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    _refused(pf.Session(_people(200), None, pf.zCDP(1.0)), error, match, **kwargs)


@pytest.mark.parametrize("method", ["mst", "aim"])
def test_pure_dp_session_spends_epsilon_in_one_entry(method: str) -> None:
    sess = pf.Session(_people(500), None, pf.PureDP(2.0))
    table = sess.synthesize(epsilon=Fraction(1, 2), method=method, domains=DOMAINS, rows=20)
    assert table.height == 20
    (entry,) = sess.ledger
    assert sess.spent.epsilon == 0.5
    events, used = entry_events(entry)
    assert used
    assert [type(e).__name__ for e in events] == ["PureDPEvent"]
    assert "epsilon = " in str(sess.explain_synthesis(epsilon=0.5, method=method, domains=DOMAINS))


def test_huge_epsilon_recovers_the_measured_pairs() -> None:
    df = _people()
    sess = pf.Session(df, None, pf.PureDP(1e6))
    table = sess.synthesize(epsilon=1e6, method="mst", domains=DOMAINS)
    truth = _binned(df)
    for pair in (["region", "age"], ["age", "smoker"], ["smoker", "sick"]):
        assert _tv(table, truth, pair) < 0.02, pair


def test_an_epsilon_delta_session_is_refused() -> None:
    sess = pf.Session(_people(200), None, pf.ApproxDP(1.0, 1e-6))
    with pytest.raises(pf.InvalidValueError, match="zCDP or pure-DP"):
        sess.synthesize(domains=DOMAINS, epsilon=0.5)
    assert not sess.ledger


def test_a_pair_with_too_many_cells_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doors, "MAX_CELLS", 8)
    sess = pf.Session(_people(200), None, pf.zCDP(1.0))
    _refused(sess, pf.InvalidValueError, "9 cells", rho=0.5, method="mst", domains=DOMAINS)


def test_no_row_inside_the_domains_still_synthesizes_and_charges() -> None:
    sess = pf.Session(_people(200), None, pf.zCDP(1.0))
    table = sess.synthesize(rho=0.5, domains={"region": ["w"], "age": AGES}, rows=5)
    assert table.height == 5
    assert set(table["region"]) == {"w"}
    assert sess.spent.rho == 0.5


def test_the_default_row_count_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doors, "MAX_ROWS", 10)
    sess = pf.Session(_people(500), None, pf.zCDP(1.0))
    assert sess.synthesize(rho=1.0, method="mst", domains=DOMAINS).height == 10


def test_every_column_is_held_to_the_cell_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # AIM measures every column's 1-way marginal, whatever the workload.
    monkeypatch.setattr(doors, "MAX_CELLS", 2)
    sess = pf.Session(_people(200), None, pf.zCDP(1.0))
    _refused(
        sess,
        pf.InvalidValueError,
        r"\['region'\] has 3 cells",
        rho=0.5,
        domains=DOMAINS,
        workload=[("smoker", "sick")],
    )


@pytest.mark.parametrize("method", ["mst", "aim"])
def test_a_budget_too_small_to_draw_is_refused_before_any_charge(method: str) -> None:
    sess = pf.Session(_people(200), None, pf.zCDP(1.0))
    _refused(sess, pf.InvalidBudgetError, "must be in", rho=1e-30, method=method, domains=DOMAINS)
