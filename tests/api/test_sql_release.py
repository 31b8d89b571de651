"""SQL releases: private key selection, post-processing, overrides, explain and the ledger.

HAVING / ORDER BY / LIMIT are checked against the same operations applied to
the builder's noisy release. Every check that can fail (types, names, budget,
limits, Session arguments) happens before anything is charged, and the engine
receives polars expressions only, never SQL text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pandas as pd
import polars as pl
import pytest
from sql_setup import (
    AMOUNT,
    BOUND,
    DATA,
    META,
    MONTHS,
    REGIONS,
    RHO,
    WHOLE_ROWS,
    ZONES,
    assert_same_plan,
    assert_same_release,
    bounded,
    check,
    position_of,
    session,
    small_session,
    whole_rows,
)

import privframe as pf
from privframe.api.query import Query
from privframe.api.sql import SQLQuery
from privframe.engines.spec import AggregationSpec, RowStep

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")


# -- private key selection ------------------------------------------------------------------

NO_MONTH_KEYS = {k: v for k, v in META.items() if k != "month"}


def test_group_by_without_keys_selects_groups_privately() -> None:
    text = "SELECT month, COUNT(*) AS n FROM data GROUP BY month"
    a = session(5, metadata=NO_MONTH_KEYS)
    b = session(5, metadata=NO_MONTH_KEYS)
    parsed = a.sql(text)
    query = bounded(b.query()).group_by("month").agg(pf.count().alias("n"))
    assert parsed.query.plan.keys is None
    assert_same_plan(parsed.query.plan, query.plan)
    explained = parsed.explain(RHO, delta=5e-7)
    assert explained.plan.selection is not None
    assert str(explained) == str(query.explain(RHO, delta=5e-7))
    got = a.sql(text, rho=RHO, delta=5e-7)
    assert_same_release(got, query.release(rho=RHO, delta=5e-7))
    assert a.spent.delta == pytest.approx(5e-7)  # the selection spent the delta given
    assert set(got["month"].to_list()) <= set(MONTHS)


def test_group_by_unnamed_expression_without_keys() -> None:
    text = "SELECT month % 2 = 0, COUNT(*) AS n FROM data GROUP BY month % 2 = 0"
    a, b = session(6), session(6)
    query = (
        bounded(b.query().with_columns(group_1=pl.col("month") % 2 == 0))
        .group_by("group_1")
        .agg(pf.count().alias("n"))
    )
    assert_same_plan(a.sql(text).query.plan, query.plan)
    got = a.sql(text, rho=RHO, delta=5e-7)
    assert got.columns == ["group_1", "n"]
    assert_same_release(got, query.release(rho=RHO, delta=5e-7))


KEYLESS = "SELECT month, COUNT(*) AS n FROM data GROUP BY month"


def test_group_by_without_keys_and_without_delta_is_refused_and_charges_nothing() -> None:
    sess = session(metadata=NO_MONTH_KEYS)
    before = sess.remaining
    for release in (
        lambda: sess.sql(KEYLESS, rho=0.1),
        lambda: sess.sql(KEYLESS).release(0.1),
        lambda: sess.sql(KEYLESS).release(0.1, with_error=True, label="months"),
    ):
        with pytest.raises(pf.SQLError) as info:
            release()
        err = info.value
        assert err.construct == "GROUP BY"
        assert err.position == position_of(KEYLESS, "month", 1)
        message = str(err)
        for piece in ("no public keys for 'month'", "pf.Column(keys=", "delta=", "spends"):
            assert piece in message
        assert sess.ledger == ()
        assert sess.remaining == before
    # The refusal spent no delta: a release that opts in still has all of it.
    sess.sql(KEYLESS, rho=0.1, delta=1e-6)
    assert sess.spent.delta == pytest.approx(1e-6)


def test_group_by_without_keys_spends_the_delta_given() -> None:
    sess = session(metadata=NO_MONTH_KEYS)
    sess.sql(KEYLESS, rho=0.1, delta=4e-7)
    sess.sql(KEYLESS).release(0.1, delta=5e-7)
    assert [entry.delta for entry in sess.ledger] == pytest.approx([4e-7, 5e-7])
    assert sess.remaining.delta == pytest.approx(1e-7)


def test_group_by_with_keys_needs_no_delta_and_refuses_one() -> None:
    sess = session()
    text = "SELECT month, COUNT(*) AS n FROM data GROUP BY month"
    assert sess.sql(text, rho=0.1)["month"].to_list() == MONTHS
    assert sess.spent.delta == 0
    with pytest.raises(pf.InvalidValueError, match="delta is only spent"):
        sess.sql(text, rho=0.1, delta=1e-7)
    assert len(sess.ledger) == 1


def test_explain_without_delta_explains_and_says_the_release_needs_it() -> None:
    sess = session(metadata=NO_MONTH_KEYS)
    parsed = sess.sql(KEYLESS)
    without = parsed.explain(RHO)
    assert without.plan.selection is not None
    assert any("needs delta=" in note and "month" in note for note in without.notes)
    given = parsed.explain(RHO, delta=5e-7)
    assert not any("delta=" in note for note in given.notes)
    assert sess.ledger == ()
    assert sess.spent.rho == 0


def test_private_selection_on_a_budget_without_delta_charges_nothing() -> None:
    sess = session(metadata=NO_MONTH_KEYS, budget=pf.zCDP(rho=1.0))
    with pytest.raises(pf.SQLError, match="delta="):
        sess.sql("SELECT month, COUNT(*) FROM data GROUP BY month", rho=0.1)
    with pytest.raises(pf.BudgetExceededError):
        sess.sql("SELECT month, COUNT(*) FROM data GROUP BY month", rho=0.1, delta=1e-7)
    assert sess.spent.rho == 0
    assert sess.ledger == ()


# -- HAVING, ORDER BY, LIMIT, OFFSET: post-processing of the noisy release -----------------


def readme_build(q: Query) -> Query:
    return (
        bounded(q)
        .group_by("region", keys=REGIONS)
        .agg(
            pf.count().alias("n"),
            pf.sum("amount", AMOUNT).alias("total"),
            pf.mean("amount", AMOUNT),
        )
    )


SELECT = "SELECT region, COUNT(*) AS n, SUM(amount) AS total, AVG(amount) FROM data GROUP BY region"


@pytest.mark.parametrize(
    ("tail", "post"),
    [
        ("HAVING n > 400", lambda f: f.filter(pl.col("n") > 400)),
        ("HAVING COUNT(*) > 400", lambda f: f.filter(pl.col("n") > 400)),
        ("HAVING AVG(amount) < 60", lambda f: f.filter(pl.col("amount_mean") < 60)),
        (
            "HAVING region <> 'west' AND (total > 1000 OR n < 0)",
            lambda f: f.filter(
                (pl.col("region") != "west") & ((pl.col("total") > 1000) | (pl.col("n") < 0))
            ),
        ),
        ("ORDER BY n", lambda f: f.sort("n", maintain_order=True)),
        ("ORDER BY n DESC", lambda f: f.sort("n", descending=True, maintain_order=True)),
        ("ORDER BY 3 DESC", lambda f: f.sort("total", descending=True, maintain_order=True)),
        ("ORDER BY SUM(amount)", lambda f: f.sort("total", maintain_order=True)),
        (
            "ORDER BY region DESC, n",
            lambda f: f.sort(["region", "n"], descending=[True, False], maintain_order=True),
        ),
        ("LIMIT 2", lambda f: f.head(2)),
        ("LIMIT 0", lambda f: f.head(0)),
        ("LIMIT 2 OFFSET 1", lambda f: f.slice(1, 2)),
        ("OFFSET 3", lambda f: f.slice(3)),
        (
            "HAVING n > 100 ORDER BY n DESC LIMIT 2",
            lambda f: f.filter(pl.col("n") > 100).sort("n", descending=True).head(2),
        ),
    ],
)
def test_post_processing_matches_the_builder_release(
    tail: str, post: Callable[[pl.DataFrame], pl.DataFrame]
) -> None:
    check(f"{SELECT} {tail}", readme_build, post=post)


def test_having_filters_on_noisy_values() -> None:
    # HAVING sees only the released (noisy) count: the kept rows are exactly those whose
    # released n clears the threshold, whatever the true counts are.
    sess, other = session(11), session(11)
    full = readme_build(other.query()).release(rho=0.01)
    threshold = int(full["n"].median())
    got = sess.sql(f"{SELECT} HAVING n >= {threshold}", rho=0.01)
    assert got["n"].to_list() == [n for n in full["n"].to_list() if n >= threshold]
    assert len(sess.ledger) == 1  # HAVING costs nothing extra


def test_post_processing_with_error_columns() -> None:
    text = f"{SELECT} ORDER BY n DESC LIMIT 3"
    a, b = session(2), session(2)
    got = a.sql(text, rho=RHO, with_error=True)
    want = readme_build(b.query()).release(rho=RHO, with_error=True)
    want = want.sort("n", descending=True, maintain_order=True).head(3)
    assert got.columns[:4] == ["region", "n", "total", "amount_mean"]
    assert {"n_std", "n_ci95", "total_std", "total_ci95", "amount_mean_ci95"} <= set(got.columns)
    assert_same_release(got, want)


# -- overrides, pandas, explain, ledger -----------------------------------------------------


def test_per_query_metadata_and_contributions_override_the_session() -> None:
    text = "SELECT region, COUNT(*) AS n, SUM(amount) FROM data GROUP BY region"
    override = {"amount": pf.Column(bounds=(0, 50)), "region": pf.Column(keys=["north", "east"])}
    limits = pf.Bound(max_groups=1, max_rows_per_group=2, max_rows=2)
    check(
        text,
        lambda q: (
            q.bound(max_groups=1, max_rows_per_group=2, max_rows=2)
            .group_by("region", keys=["north", "east"])
            .agg(pf.count().alias("n"), pf.sum("amount", (0, 50)))
        ),
        metadata=override,
        contributions=limits,
    )
    # The session's own metadata and limits are unchanged for the next query.
    sess = session()
    sess.sql(text, metadata=override, contributions=limits)
    plan = sess.sql(text).query.plan
    assert plan.bound == BOUND
    assert plan.aggregates[1] == pf.sum("amount", AMOUNT)
    assert len(plan.keys) == len(REGIONS)


def test_quantile_candidates_from_per_query_metadata() -> None:
    check(
        "SELECT MEDIAN(amount) FROM data",
        whole_rows(lambda q: q.agg(pf.median("amount", AMOUNT, candidates=11))),
        metadata={"amount": pf.Column(bounds=AMOUNT, candidates=11)},
        contributions=WHOLE_ROWS,
    )


def test_pandas_in_pandas_out() -> None:
    frame = DATA.to_pandas()
    text = (
        "SELECT region, COUNT(*) AS n, SUM(amount) AS total, AVG(amount) FROM data "
        "WHERE age >= 18 GROUP BY region ORDER BY n DESC"
    )
    a, b = session(4, data=frame), session(4, data=frame)
    got = a.sql(text, rho=RHO)
    want = readme_build(b.query().filter(pl.col("age") >= 18)).release(rho=RHO)
    assert isinstance(got, pd.DataFrame)
    assert isinstance(want, pd.DataFrame)
    want = want.sort_values("n", ascending=False, kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want[list(got.columns)])


def test_sql_without_rho_is_a_query_that_explains_like_the_builder() -> None:
    sess = session()
    text = f"{SELECT} HAVING n > 10 ORDER BY n DESC LIMIT 2"
    parsed = sess.sql(text)
    assert isinstance(parsed, SQLQuery)
    assert parsed.text == text
    assert isinstance(parsed.query, Query)
    assert parsed.query.session is sess  # one planner, one engine: the builder's query
    assert "SQLQuery(" in repr(parsed)
    got = parsed.explain(0.2)
    want = readme_build(sess.query()).explain(0.2)
    assert got.plan.cost == want.plan.cost
    assert [(m.key, float(m.exact_share), m.sigma) for m in got.measurements] == [
        (m.key, float(m.exact_share), m.sigma) for m in want.measurements
    ]
    assert got.rows == want.rows
    assert str(dataclasses.replace(got, notes=())) == str(want)
    assert len(got.notes) == 3
    for clause in ("HAVING", "ORDER BY", "LIMIT"):
        assert any(clause in note and "noisy" in note for note in got.notes)
        assert clause in str(got)
    assert sess.spent.rho == 0  # explaining spends nothing
    assert sess.ledger == ()


def test_explain_has_no_notes_without_post_processing() -> None:
    sess = session()
    assert sess.sql(SELECT).explain(0.2).notes == ()
    assert "notes" not in str(sess.sql(SELECT).explain(0.2))


def test_explain_with_weights_and_delta_passes_through() -> None:
    sess = session(metadata=NO_MONTH_KEYS)
    text = "SELECT month, COUNT(*) AS n, SUM(amount) AS total FROM data GROUP BY month"
    got = sess.sql(text).explain(0.3, weights={"n": 3}, delta=1e-7)
    want = (
        bounded(sess.query())
        .group_by("month")
        .agg(pf.count().alias("n"), pf.sum("amount", AMOUNT).alias("total"))
        .explain(0.3, weights={"n": 3}, delta=1e-7)
    )
    assert str(got) == str(want)


def test_release_charges_once_with_the_text_as_label() -> None:
    sess = session()
    sess.sql(SELECT, rho=0.25)
    assert sess.spent.rho == pytest.approx(0.25)
    assert [entry.label for entry in sess.ledger] == [SELECT]
    sess.sql(SELECT, rho=0.25, label="by region")
    assert [entry.label for entry in sess.ledger] == [SELECT, "by region"]
    parsed = sess.sql(f"{SELECT} LIMIT 1")
    parsed.release(0.1)
    assert len(sess.ledger) == 3
    assert sess.ledger[-1].label == f"{SELECT} LIMIT 1"
    assert sess.spent.rho == pytest.approx(0.6)


def test_release_weights_pass_through() -> None:
    a, b = session(8), session(8)
    got = a.sql(SELECT, rho=RHO, weights={"n": 4})
    want = readme_build(b.query()).release(rho=RHO, weights={"n": 4})
    assert_same_release(got, want)


# -- nothing but polars reaches the engine --------------------------------------------------


def _strings(value: Any) -> list[str]:
    """Every string inside a spec (its fields, tuples, dataclasses), expressions excluded."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, tuple | list):
        return [s for v in value for s in _strings(v)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [s for f in dataclasses.fields(value) for s in _strings(getattr(value, f.name))]
    return []


def test_engine_sees_only_polars_expressions() -> None:
    sess = session()
    seen: list[AggregationSpec] = []
    original = sess._engine.aggregate

    def spy(spec: AggregationSpec) -> pl.DataFrame:
        seen.append(spec)
        return original(spec)

    sess._engine.aggregate = spy  # type: ignore[method-assign]
    text = (
        "SELECT zone, COUNT(*) AS n, SUM(CASE WHEN age < 30 THEN 1 ELSE 3 END) AS score "
        "FROM data d JOIN zones z USING (region) WHERE region LIKE '%th' AND age BETWEEN 18 "
        "AND 80 GROUP BY zone HAVING n > 0 ORDER BY n LIMIT 5"
    )
    sess.sql(text, rho=RHO)
    (spec,) = seen
    assert spec.steps
    for step in spec.steps:
        assert isinstance(step, RowStep)
        assert all(isinstance(e, pl.Expr) for e in step.exprs)
        assert step.table is None or isinstance(step.table, pl.DataFrame)
        for expr in step.exprs:
            serialized = expr.meta.serialize(format="json")
            for keyword in ("SELECT", "WHERE", "LIKE", "CASE", "BETWEEN", "HAVING"):
                assert keyword not in serialized
    strings = _strings(dataclasses.replace(spec, steps=()))
    assert all("SELECT" not in s and " " not in s for s in strings), strings
    assert text not in strings


# -- builder-level refusals reached from SQL: raised before anything is charged -----------


@pytest.mark.parametrize(
    ("text", "error", "match"),
    [
        ("SELECT COUNT(*) FROM data WHERE region > 5", pf.SQLError, "cast one side"),
        ("SELECT COUNT(*) FROM data WHERE age", pf.InvalidValueError, "Boolean"),
        ("SELECT SUM(nope) AS s FROM data", pf.SQLError, "'nope' does not exist"),
        ("SELECT COUNT(*) AS a, SUM(amount) AS a FROM data", pf.InvalidValueError, "alias"),
    ],
)
def test_builder_checks_apply_before_charging(
    text: str, error: type[Exception], match: str
) -> None:
    sess = session()
    with pytest.raises(error, match=match):
        sess.sql(text, rho=0.1)
    assert sess.ledger == ()
    assert sess.spent.rho == 0


def test_missing_contributions_refused_before_charging() -> None:
    sess = session(contributions=None)
    with pytest.raises(pf.InvalidValueError, match="contribution limits"):
        sess.sql("SELECT COUNT(*) FROM data", rho=0.1)
    assert sess.ledger == ()


def test_budget_exceeded_charges_nothing() -> None:
    sess = session(budget=pf.zCDP(rho=0.1))
    with pytest.raises(pf.BudgetExceededError):
        sess.sql(SELECT, rho=0.5)
    assert sess.ledger == ()


# -- Session arguments ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"metadata": {"amount": (0, 1000)}}, pf.InvalidArgumentError, "metadata"),
        ({"metadata": [("amount", pf.Column())]}, pf.InvalidArgumentError, "metadata"),
        ({"metadata": {1: pf.Column()}}, pf.InvalidArgumentError, "metadata"),
        ({"contributions": {"max_groups": 1}}, pf.InvalidArgumentError, "contributions"),
        ({"contributions": (3, 5)}, pf.InvalidArgumentError, "contributions"),
        ({"tables": [ZONES]}, pf.InvalidArgumentError, "tables"),
        ({"tables": {1: ZONES}}, pf.InvalidArgumentError, "tables"),
        ({"tables": {"data": ZONES}}, pf.InvalidValueError, "'data' names the private table"),
        ({"tables": {"DATA": ZONES.to_pandas()}}, pf.InvalidValueError, "private table"),
    ],
)
def test_bad_session_arguments_are_named(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        pf.Session(DATA, "user_id", pf.zCDP(1.0), **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"metadata": {"amount": 5}}, "metadata"),
        ({"contributions": 3}, "contributions"),
    ],
)
def test_bad_per_query_overrides_are_named(kwargs: dict[str, Any], match: str) -> None:
    sess = session()
    with pytest.raises(pf.InvalidArgumentError, match=match):
        sess.sql("SELECT COUNT(*) FROM data", **kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [{"bounds": (1,)}, {"bounds": 5}, {"keys": "north"}, {"keys": 5}],
)
def test_bad_column_metadata(kwargs: dict[str, Any]) -> None:
    with pytest.raises(pf.InvalidArgumentError, match="Column"):
        pf.Column(**kwargs)


def test_column_normalises_lists() -> None:
    column = pf.Column(bounds=[0, 10], keys=["a", "b"])
    assert column.bounds == (0, 10)
    assert column.keys == ("a", "b")


def test_pandas_public_tables_are_accepted() -> None:
    sess = pf.Session(
        DATA,
        "user_id",
        pf.zCDP(1.0),
        metadata=META,
        contributions=BOUND,
        tables={"zones": ZONES.to_pandas()},
    )
    plan = sess.sql("SELECT zone, COUNT(*) FROM data JOIN zones USING (region) GROUP BY zone")
    assert plan.query.plan.steps[0].table.equals(ZONES)


def test_a_column_selected_twice_is_refused_before_charging() -> None:
    # Two output columns of one name cannot be returned: refused when parsing, so the
    # budget is not charged for a release that could not be handed back.
    sess = session()
    with pytest.raises(pf.SQLError):
        sess.sql("SELECT region, region, COUNT(*) FROM data GROUP BY region", rho=0.1)
    assert sess.ledger == ()


@pytest.mark.parametrize(
    "tail",
    ["HAVING region > 5", "HAVING n LIKE 'a%'", "ORDER BY region + 1", "HAVING n > 'abc'"],
)
def test_post_processing_type_errors_are_refused_before_charging(tail: str) -> None:
    # HAVING / ORDER BY run on the noisy release, after the charge: their types are checked
    # against the release's schema before charging, and refused with a PrivframeError.
    sess = session()
    with pytest.raises(pf.PrivframeError):
        sess.sql(f"SELECT region, COUNT(*) AS n FROM data GROUP BY region {tail}", rho=0.1)
    assert sess.ledger == ()


def test_a_limit_beyond_64_bits_releases() -> None:
    # A LIMIT beyond 2**63 - 1 cannot fail after the charge: it keeps every row.
    sess = session()
    out = sess.sql("SELECT COUNT(*) AS n FROM data LIMIT 99999999999999999999999", rho=0.1)
    assert out.height == 1


def test_abs_of_null_is_not_a_free_membership_test() -> None:
    # A step that passes every check but fails only when some row matches would be an
    # uncharged membership oracle: it is refused before anything is charged.
    df = pl.DataFrame({"u": [1, 2], "g": ["a", "b"], "x": [1.0, 2.0], "name": ["Alice", "Bob"]})
    sess = small_session(df)
    text = (
        "SELECT SUM(CASE WHEN x > 0 THEN ABS(NULL) ELSE 0 END) AS z FROM data WHERE name = 'Alice'"
    )
    with pytest.raises(pf.PrivframeError):
        sess.sql(text, rho=0.1, metadata={"z": pf.Column(bounds=(0, 1))})
    assert sess.spent.rho == 0


def test_a_non_boolean_filter_is_refused_from_the_schema() -> None:
    sess = small_session(pl.DataFrame({"u": [1], "g": ["a"], "x": [1.0]}))
    with pytest.raises(pf.InvalidValueError, match="Boolean"):
        sess.sql("SELECT COUNT(*) FROM data WHERE CASE x WHEN 1 THEN 1 END", rho=0.1)
    assert sess.spent.rho == 0


def test_derived_columns_never_replace_data_columns() -> None:
    df = pl.DataFrame({"u": [1, 2, 3], "g": ["a"] * 3, "x": [1.0] * 3, "n_flag": [5, 5, 5]})
    sess = pf.Session(
        df,
        "u",
        pf.zCDP(1e9),
        metadata={"x": pf.Column(bounds=(0, 10)), "n_flag": pf.Column(bounds=(0, 10))},
        contributions=pf.Bound(max_groups=1, max_rows_per_group=1),
    )
    out = sess.sql(
        # x * 2 is bounded in the call: the alias x shadows the column, whose bounds are not its.
        "SELECT SUM(x * 2, 0, 20) AS x, AVG(x) AS a, COUNT(x) AS n, SUM(n_flag) AS f FROM data",
        rho=1e8,
    )
    assert out["a"].item() == pytest.approx(1.0, abs=0.05)
    assert out["x"].item() == pytest.approx(6.0, abs=0.5)
    assert out["f"].item() == pytest.approx(15.0, abs=0.5)


def test_small_integer_columns_are_widened_and_do_not_wrap() -> None:
    df = pl.DataFrame(
        {"u": [1, 2], "g": ["a", "a"], "x": [1.0, 1.0], "c": [100, 100]},
        schema_overrides={"c": pl.Int8},
    )
    sess = pf.Session(
        df,
        "u",
        pf.zCDP(1e9),
        metadata={"g": pf.Column(keys=["a"])},
        contributions=pf.Bound(max_groups=1, max_rows_per_group=1),
    )
    out = sess.sql("SELECT g, COUNT(*) AS n FROM data WHERE c + c > 0 GROUP BY g", rho=1e8)
    assert out["n"].item() == pytest.approx(2, abs=0.5)


def test_a_group_column_selected_twice_under_two_names() -> None:
    sess = small_session(pl.DataFrame({"u": [1, 2], "g": ["a", "b"], "x": [1.0, 2.0]}))
    out = sess.sql("SELECT g, g AS g2, COUNT(*) AS n FROM data GROUP BY g", rho=0.5)
    assert out.columns == ["g", "g2", "n"]
    assert out["g"].to_list() == out["g2"].to_list()


def test_explain_and_check_catch_post_processing_and_error_columns_before_charging() -> None:
    sess = small_session(pl.DataFrame({"u": [1, 2], "g": ["a", "b"], "x": [1.0, 2.0]}))
    bad_order = sess.sql("SELECT g, COUNT(*) AS n FROM data GROUP BY g ORDER BY n LIKE 'a%'")
    with pytest.raises(pf.SQLError):
        bad_order.explain(rho=0.1)
    clash = sess.sql("SELECT g, COUNT(*) AS n, SUM(x) AS n_std FROM data GROUP BY g")
    with pytest.raises(pf.InvalidValueError, match="with_error"):
        clash.check(with_error=True)
    assert sess.spent.rho == 0


@pytest.mark.parametrize(
    "given",
    [{"delta": 1e-7}, {"with_error": True}, {"clamp": False}, {"total": True}, {"label": "x"}],
)
def test_release_keywords_without_rho_are_refused_not_dropped(given: dict[str, Any]) -> None:
    sess = session(3)
    with pytest.raises(pf.InvalidArgumentError, match=f"{next(iter(given))}=.*pass rho"):
        sess.sql("SELECT COUNT(*) AS n FROM data", **given)
    assert not sess.ledger
