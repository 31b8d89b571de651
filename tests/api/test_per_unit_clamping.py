"""BigQuery's per-unit clamping: each privacy unit's SUM, COUNT or AVG in a group, clamped.

``SUM(x, contribution_bounds_per_group => (L, U))`` in a ``WITH
DIFFERENTIAL_PRIVACY`` query (and the builder's ``pf.sum("x",
per_unit_bounds=(L, U))``) clamps each unit's sum of its rows in a group, then
sums over units (BigQuery, "Differentially private aggregate functions"). The
outputs at a huge budget equal that definition computed exactly by per-unit
pre-aggregation in polars, the SQL and builder forms are one plan, and bad
input is refused before anything is charged.
"""

from __future__ import annotations

import polars as pl
import pytest
from sql_setup import assert_same_plan

import privframe as pf
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

# Units with several rows in a group, so that the per-unit bounds bind (unit 1's sum in "a"
# is 30 > 20, its count 3 > 2), a null value (skipped, as BigQuery skips NULLs) and a unit
# whose only value in "b" is null (no per-unit sum or average: it adds nothing).
DATA = pl.DataFrame(
    {
        "u": [1, 1, 1, 1, 2, 2, 3, 3, 3, 4, 5, 5, 6],
        "g": ["a", "a", "a", "b", "a", "b", "a", "b", "b", "b", "a", "a", "b"],
        "x": [10.0, 15.0, 5.0, 2.0, 4.0, 9.0, 25.0, 1.0, None, 7.0, -3.0, 1.0, None],
    }
)
KEYS = ["a", "b"]
BUDGET = pf.zCDP(1e12, delta=0.5)
L, U, C = 0.0, 20.0, 2  # the sums' and averages' bounds, and the counts'
OPTIONS = (
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1e7, delta=1e-5, "
    "max_groups_contributed=2, privacy_unit_column=u) g, "
)
SQL = (
    OPTIONS + f"SUM(x, contribution_bounds_per_group => ({L:g}, {U:g})) AS total, "
    f"COUNT(*, contribution_bounds_per_group => (0, {C})) AS n, "
    f"AVG(x, contribution_bounds_per_group => ({L:g}, {U:g})) AS mean, "
    f"COUNT(x, contribution_bounds_per_group => (0, {C})) AS nx "
    "FROM data GROUP BY g ORDER BY g"
)


def session(seed: int = 1, budget: pf.zCDP = BUDGET, **kwargs: object) -> pf.Session:
    return pf.Session(
        DATA,
        "u",
        budget,
        rng=SeededRandomness(seed),
        metadata={"g": pf.Column(keys=KEYS)},
        **kwargs,  # type: ignore[arg-type]
    )


def bigquery_truth() -> pl.DataFrame:
    """BigQuery's definitions, exactly: per-unit values per group, clamped, then combined."""
    per_unit = DATA.group_by("u", "g").agg(
        total=pl.col("x").sum().clip(L, U),
        n=pl.len().clip(0, C),
        mean=pl.col("x").mean().clip(L, U),  # null for a unit with no value: left out
        nx=pl.col("x").count().clip(0, C),
        has_x=pl.col("x").count() > 0,
    )
    return (
        per_unit.group_by("g")
        .agg(
            total=pl.col("total").filter(pl.col("has_x")).sum(),
            n=pl.col("n").sum(),
            mean=pl.col("mean").mean(),
            nx=pl.col("nx").sum(),
        )
        .sort("g")
    )


def builder(sess: pf.Session) -> pf.Query:
    return (
        sess.query()
        .bound(max_groups=2)
        .group_by("g", keys=KEYS)
        .agg(
            pf.sum("x", per_unit_bounds=(L, U)).alias("total"),
            pf.count(per_unit_bounds=(0, C)).alias("n"),
            pf.mean("x", per_unit_bounds=(L, U)).alias("mean"),
        )
    )


def test_the_bounds_bind_on_this_data() -> None:
    truth = bigquery_truth()
    unclamped = DATA.group_by("g").agg(pl.col("x").sum(), pl.len()).sort("g")
    assert truth["total"].to_list() != unclamped["x"].to_list()
    assert truth["n"].to_list() != unclamped["len"].to_list()


def test_sql_releases_bigquerys_per_unit_definitions_at_a_huge_budget() -> None:
    released = session().sql(SQL, with_error=True)
    truth = bigquery_truth()
    assert released["g"].to_list() == KEYS
    for name in ("total", "n", "mean", "nx"):
        std = released[f"{name}_std"]
        assert (std < 0.05).all(), name  # noise ~0: the output is the definition
        error = (released[name].cast(pl.Float64) - truth[name]).abs()
        assert (error <= 4 * std + 1e-9).all(), (name, released[name], truth[name])
    assert released["n"].dtype == pl.Int64  # COUNT is a whole number, as in BigQuery


def test_the_builder_releases_the_same_definitions() -> None:
    released = builder(session()).release(rho=1e9, with_error=True)
    truth = bigquery_truth()
    for name in ("total", "n", "mean"):
        error = (released[name] - truth[name]).abs()
        assert (error <= 4 * released[f"{name}_std"] + 1e-9).all(), name


def test_sql_and_builder_forms_are_one_plan_with_one_seeded_release() -> None:
    text = SQL.replace(f", COUNT(x, contribution_bounds_per_group => (0, {C})) AS nx", "")
    sql = session(seed=7).parse_sql(text)
    query = builder(session(seed=7))
    assert_same_plan(sql.query.plan, query.plan)
    rho = sql.spend().rho  # type: ignore[union-attr]
    assert str(sql.query.explain(rho=rho)) == str(query.explain(rho=rho))
    by_sql = sql.query.release(rho=rho)
    by_builder = query.release(rho=rho)
    assert by_sql.equals(by_builder)


def test_explain_shows_one_per_unit_row_per_group() -> None:
    explained = str(session().parse_sql(SQL).explain())
    assert "per_unit(g): one row per unit and group: m = 1" in explained
    assert "S = k·m² = 2" in explained


def test_private_groups_work_with_per_unit_clamping() -> None:
    sess = pf.Session(DATA, "u", pf.zCDP(1e12, delta=0.5), rng=SeededRandomness(3))
    released = sess.sql(SQL.replace("delta=1e-5", "delta=0.1"))
    assert set(released["g"].to_list()) <= set(KEYS)


# -- bad input: refused with a clear message, nothing charged -------------------------------------


def _refused(sess: pf.Session, run: object, error: type[Exception], says: str) -> None:
    before = sess.spent.exact_rho
    with pytest.raises(error) as caught:
        run()  # type: ignore[operator]
    assert says in str(caught.value)
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None or caught.value.__suppress_context__
    assert sess.spent.exact_rho == before


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ("SUM(x, contribution_bounds_per_group => (20, 0)) AS t", "lower <= upper"),
        ("SUM(x, contribution_bounds_per_group => (0, 10)) AS t, SUM(x, 0, 5) AS y", "one kind"),
        (
            "SUM(x, contribution_bounds_per_group => (0, 10)) AS t, VAR_POP(x, 0, 5) AS c",
            "one kind",
        ),
        (
            "SUM(x, contribution_bounds_per_group => (0, 10)) AS t, "
            "VAR_POP(x, contribution_bounds_per_group => (0, 10)) AS v",
            "contribution_bounds_per_row",
        ),
        ("SUM(x * 2, contribution_bounds_per_group => (0, 10)) AS t", "subquery"),
    ],
)
def test_sql_refusals_charge_nothing(change: str, says: str) -> None:
    sess = session()
    text = OPTIONS + change + " FROM data GROUP BY g"
    _refused(sess, lambda: sess.sql(text), pf.SQLError, says)


def test_a_row_limit_with_per_unit_bounds_is_refused() -> None:
    sess = session()
    query = sess.query().bound(max_groups=2, max_rows_per_group=3).group_by("g", keys=KEYS)
    _refused(
        sess,
        lambda: query.agg(pf.sum("x", per_unit_bounds=(0, 10))).release(rho=1),
        pf.InvalidValueError,
        "contradicts",
    )


def test_builder_refusals_charge_nothing() -> None:
    sess = session()
    query = sess.query().bound(max_groups=2).group_by("g", keys=KEYS)
    cases = [
        (lambda: pf.sum("x", per_unit_bounds=(10, 0)), pf.InvalidValueError, "lower"),
        (lambda: pf.sum("x", (0, 1), per_unit_bounds=(0, 1)), pf.InvalidArgumentError, "both"),
        (lambda: pf.sum("x"), pf.InvalidArgumentError, "per_unit_bounds"),
        (
            lambda: query.agg(pf.sum("x", per_unit_bounds=(0, 1)), pf.count()),
            pf.InvalidValueError,
            "one query takes one kind",
        ),
    ]
    for run, error, says in cases:
        _refused(sess, run, error, says)
    rows = pf.Session(DATA, None, pf.zCDP(1.0))
    _refused(
        rows,
        lambda: rows.query().agg(pf.count(per_unit_bounds=(0, 1))),
        pf.InvalidValueError,
        "no privacy unit",
    )


@pytest.mark.parametrize(
    "call",
    [
        "VAR_POP(x, contribution_bounds_per_group => (0, 10))",
        "STDDEV_POP(x, contribution_bounds_per_group => (0, 10))",
        "PERCENTILE_CONT(x, 0.5, contribution_bounds_per_group => (0, 10))",
    ],
)
def test_per_group_bounds_on_other_functions_are_refused_in_a_dp_clause(call: str) -> None:
    # BigQuery defines per-group bounds for SUM, AVG and COUNT only; refused even with a row
    # limit, where they would otherwise silently clamp rows.
    sess = session(contributions=pf.Bound(max_rows_per_group=2))
    text = OPTIONS + call + " AS v FROM data GROUP BY g"
    _refused(sess, lambda: sess.sql(text), pf.SQLError, "contribution_bounds_per_row")


@pytest.mark.parametrize(
    "default", [pf.Bound(max_rows_per_group=1), pf.Bound(max_groups=2, max_rows=1)]
)
def test_a_sessions_default_row_limit_leaves_sql_per_unit_clamping_as_bigquerys(
    default: pf.Bound,
) -> None:
    # BigQuery's epsilon=1e20 draws the samplers' smallest noise: the release is the definition,
    # to the grid. The default row limits would bind on this data (unit 1 has 3 rows in "a").
    sess = session(contributions=default, budget=pf.zCDP(1e21, delta=0.5))
    query = sess.parse_sql(SQL.replace("epsilon=1e7", "epsilon=1e20"))
    assert query.query.plan.bound == pf.Bound(max_groups=2)
    released = query.release()
    truth = bigquery_truth()
    for name in ("total", "n", "mean", "nx"):
        assert released[name].cast(pl.Float64).to_list() == pytest.approx(
            truth[name].to_list(), abs=1e-6
        ), name


@pytest.mark.parametrize(
    ("limit", "says"),
    [
        (pf.Bound(max_groups=2, max_rows_per_group=3), "max_rows_per_group=3"),
        (pf.Bound(max_rows=4), "max_rows=4"),
    ],
)
def test_a_row_limit_of_the_querys_own_with_per_unit_bounds_is_refused_naming_both(
    limit: pf.Bound, says: str
) -> None:
    sess = session()
    with pytest.raises(pf.SQLError) as caught:
        sess.sql(SQL, contributions=limit)
    message = str(caught.value)
    assert f"contributions give {says}" in message
    assert "contribution_bounds_per_group" in message
    assert caught.value.construct == "the function SUM"
    assert caught.value.position is not None
    assert not sess.ledger


def test_a_count_alone_keeps_its_bound_as_the_row_limit_which_counts_the_same() -> None:
    query = session().parse_sql(
        OPTIONS + f"COUNT(*, contribution_bounds_per_group => (0, {C})) AS n FROM data GROUP BY g"
    )
    assert query.query.plan.bound == pf.Bound(max_groups=2, max_rows_per_group=C)
    released = query.query.release(rho=1e9, with_error=True)
    error = (released["n"] - bigquery_truth()["n"]).abs()
    assert (error <= 4 * released["n_std"] + 1e-9).all()


def test_a_unit_whose_values_in_a_group_are_all_null_adds_nothing_to_a_sum() -> None:
    # BigQuery's per-unit SUM of only NULLs is NULL and is skipped; a lower bound above 0
    # would otherwise add it (unit 6's only value in "b" is null).
    lower = 3.0
    q = (
        session()
        .query()
        .group_by("g", keys=KEYS)
        .agg(pf.sum("x", per_unit_bounds=(lower, U)).alias("total"))
    )
    released = q.release(rho=1e9, with_error=True)
    per_unit = DATA.group_by("u", "g").agg(
        total=pl.col("x").sum().clip(lower, U), has_x=pl.col("x").count() > 0
    )
    truth = per_unit.filter("has_x").group_by("g").agg(pl.col("total").sum()).sort("g")
    assert (released["total_std"] < 0.05).all()
    assert ((released["total"] - truth["total"]).abs() <= 4 * released["total_std"]).all()
