"""SQL over several private tables: JOIN, the per-person subquery and CROSS JOIN UNNEST.

Each construct is the builder's step over units (``join_private``,
``per_unit``, ``flat_map``): the SQL and the builder query make the same
plan, explain it the same way (sensitivities, the derivation of the limits)
and, from the same seed, release the same noisy table. A construct whose
limits are missing or whose join would mix people is refused with a located
``pf.SQLError`` before anything is charged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from sql_setup import position_of

import privframe as pf
from privframe.api.query import Query
from privframe.engines.spec import PrivateJoin, RowStep, Step, apply_steps
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

REGIONS = ["north", "south", "east", "west"]
DX = ["flu", "cold", "cut"]
ITEMS = ["tea", "jam", "bread", "milk"]
AMOUNT = (0, 100)
TOTAL = (0, 400)
LIMITS = {
    "orders": pf.Bound(max_groups=2, max_rows_per_group=3, max_rows=4),
    "visits": pf.Bound(max_rows=3),
}
META = {
    "amount": pf.Column(bounds=AMOUNT),
    "region": pf.Column(keys=REGIONS),
    "dx": pf.Column(keys=DX),
    "item": pf.Column(keys=ITEMS),
    "zone": pf.Column(keys=["cold", "warm"]),
    "total": pf.Column(bounds=TOTAL),
    "n": pf.Column(bounds=(0, 12)),
}
ZONES = pl.DataFrame({"region": REGIONS, "zone": ["cold", "warm", "warm", "cold"]})


def _orders() -> pl.DataFrame:
    rows = [
        (uid, REGIONS[(uid + k) % 4], float((uid * 7 + k * 13) % 90), k % 3, k)
        for uid in range(1, 301)
        for k in range(uid % 6 + 1)
    ]
    uid, region, amount, day, k = (list(c) for c in zip(*rows, strict=True))
    items = [[ITEMS[(i + j) % 4] for j in range(i % 4)] for i in range(len(rows))]
    items = [None if i % 17 == 0 else basket for i, basket in enumerate(items)]
    return pl.DataFrame(
        {"uid": uid, "region": region, "amount": amount, "day": day, "items": items, "k": k}
    )


def _visits() -> pl.DataFrame:
    rows = [
        (uid, DX[(uid * 3 + k) % 3], float((uid + 11 * k) % 60), k % 3)
        for uid in range(1, 301, 2)
        for k in range(uid % 5)
    ]
    uid, dx, amount, day = (list(c) for c in zip(*rows, strict=True))
    return pl.DataFrame({"uid": uid, "dx": dx, "amount": amount, "day": day})


ORDERS, VISITS = _orders(), _visits()


def session(seed: int = 1, contributions: Any = None, **options: Any) -> pf.Session:
    return pf.Session(
        {"orders": ORDERS, "visits": VISITS},
        "uid",
        pf.zCDP(10.0),
        rng=SeededRandomness(seed),
        metadata=META,
        contributions=LIMITS if contributions is None else contributions,
        tables={"zones": ZONES},
        **options,
    )


def _steps(query: Query) -> list[str]:
    """The plan's steps as text: row steps by their expressions, steps over units by value."""
    return _shown(query.plan.steps)


def _shown(steps: tuple[Step, ...]) -> list[str]:
    """Steps as text, a private join's right side (its own steps) inside its own."""
    shown = []
    for step in steps:
        if isinstance(step, RowStep):
            shown.append(f"{step.kind}{[str(e) for e in step.exprs]}{step.on}{step.how}")
        elif isinstance(step, PrivateJoin):
            shown.append(f"{dataclasses.replace(step, steps=())!r}{_shown(step.steps)}")
        else:
            shown.append(repr(step))
    return shown


def assert_same(text: str, build: Callable[[pf.Session], Query], rho: float = 1.0) -> None:
    """The SQL and the builder query: same plan, same explanation, same seeded release."""
    sql_session, builder_session = session(seed=5), session(seed=5)
    parsed = sql_session.sql(text)
    built = build(builder_session)
    assert _steps(parsed.query) == _steps(built)
    assert parsed.query.plan.bound == built.plan.bound
    assert parsed.query.plan.aggregates == built.plan.aggregates
    explained, wanted = parsed.explain(rho=rho), built.explain(rho=rho)
    assert explained.bound == wanted.bound
    assert [m.sensitivity for m in explained.measurements] == [
        m.sensitivity for m in wanted.measurements
    ]
    assert str(explained) == str(wanted)
    assert_frame_equal(sql_session.sql(text, rho=rho), built.release(rho=rho))


def refused(text: str, at: str, *pieces: str, nth: int = 0, **options: Any) -> pf.SQLError:
    """``text`` is refused at ``at`` with each of ``pieces`` in the message; nothing charged."""
    sess = session(**options)
    with pytest.raises(pf.SQLError) as caught:
        sess.sql(text, rho=1.0)
    err = caught.value
    for piece in pieces:
        assert piece in str(err), str(err)
    assert err.position == position_of(text, at, nth)
    assert sess.ledger == ()
    return err


# -- JOIN of two private tables -------------------------------------------------------------


def _joined(
    how: str = "inner", on: str | list[str] = "uid", right: pl.Expr | None = None
) -> Callable[[pf.Session], Query]:
    """orders joined with visits (filtered by ``right`` first), each truncated to its max_rows."""

    def build(sess: pf.Session) -> Query:
        visits = sess.query("visits") if right is None else sess.query("visits").filter(right)
        return (
            sess.query("orders")
            .join_private(visits, on, left_rows=4, right_rows=3, how=how)  # type: ignore[arg-type]
            .bound(max_groups=2, max_rows_per_group=3)
        )

    return build


@pytest.mark.parametrize(
    "text",
    [
        "SELECT dx, COUNT(*) AS n, SUM(v.amount) AS fees FROM orders o JOIN visits v "
        "ON o.uid = v.uid GROUP BY dx",
        "SELECT v.dx, COUNT(*) AS n, SUM(v.amount) AS fees FROM orders AS o INNER JOIN visits "
        "AS v ON v.uid = o.uid GROUP BY v.dx",
        "SELECT dx, COUNT(*) AS n, SUM(visits.amount) AS fees FROM orders JOIN visits "
        "USING (uid) GROUP BY dx",
        "SELECT dx, COUNT(*) AS n, SUM(v.amount) AS fees FROM orders o JOIN visits v "
        "ON (o.uid = v.uid) GROUP BY 1",
    ],
)
def test_a_join_of_two_private_tables_is_the_builders_join_private(text: str) -> None:
    assert_same(
        text,
        lambda sess: (
            _joined()(sess)
            .group_by("dx", keys=DX)
            .agg(pf.count().alias("n"), pf.sum("amount_right", AMOUNT).alias("fees"))
        ),
    )


def test_explain_shows_the_join_s_row_limit_derived_from_each_table_s_max_rows() -> None:
    text = "SELECT dx, COUNT(*) AS n FROM orders o JOIN visits v ON o.uid = v.uid GROUP BY dx"
    explained = session().sql(text).explain(rho=1.0)
    assert explained.bound.split("; ")[0] == (
        "join_private(visits): at most 4 left × 3 right rows per unit: M ≤ 12"
    )


def test_a_left_join_keeps_the_left_rows_without_a_match() -> None:
    assert_same(
        "SELECT region, COUNT(*) AS n, SUM(o.amount) AS spent FROM orders o LEFT JOIN visits v "
        "ON o.uid = v.uid GROUP BY region",
        lambda sess: (
            _joined("left")(sess)
            .group_by("region", keys=REGIONS)
            .agg(pf.count().alias("n"), pf.sum("amount", AMOUNT).alias("spent"))
        ),
    )


def test_more_equal_columns_join_on_all_of_them() -> None:
    assert_same(
        "SELECT dx, COUNT(*) AS n FROM orders o JOIN visits v "
        "ON o.uid = v.uid AND o.day = v.day GROUP BY dx",
        lambda sess: (
            _joined(on=["uid", "day"])(sess).group_by("dx", keys=DX).agg(pf.count().alias("n"))
        ),
    )


def test_a_public_table_joins_after_a_private_join() -> None:
    assert_same(
        "SELECT zone, COUNT(*) AS n FROM orders o JOIN visits v ON o.uid = v.uid "
        "JOIN zones z ON o.region = z.region WHERE v.dx <> 'cut' GROUP BY zone",
        lambda sess: (
            _joined(right=pl.col("dx") != pl.lit("cut"))(sess)
            .join(ZONES, on="region", how="inner")
            .group_by("zone", keys=["cold", "warm"])
            .agg(pf.count().alias("n"))
        ),
    )


def test_a_private_join_reads_the_table_from_names() -> None:
    assert_same(
        "SELECT region, COUNT(*) AS n FROM visits v JOIN orders o ON v.uid = o.uid GROUP BY region",
        lambda sess: (
            sess.query("visits")
            .join_private(sess.query("orders"), "uid", left_rows=3, right_rows=4)
            .group_by("region", keys=REGIONS)
            .agg(pf.count().alias("n"))
        ),
    )


@pytest.mark.parametrize(
    ("text", "at", "pieces"),
    [
        (
            "SELECT dx, COUNT(*) FROM orders o JOIN visits v ON o.day = v.day GROUP BY dx",
            "o.day",
            ("leave out the privacy unit 'uid'", "would belong to both"),
        ),
        (
            "SELECT dx, COUNT(*) FROM orders o JOIN visits v ON o.uid = v.day GROUP BY dx",
            "o.uid",
            ("leave out the privacy unit 'uid'",),
        ),
        (
            "SELECT dx, COUNT(*) FROM orders o JOIN visits v USING (day) GROUP BY dx",
            "visits v",
            ("leave out the privacy unit 'uid'",),
        ),
        (
            "SELECT dx, COUNT(*) FROM orders o JOIN visits v ON o.uid = v.uid AND o.region = "
            "v.dx GROUP BY dx",
            "o.region",
            ("compares 'region' with 'dx'", "columns of the same name"),
        ),
        (
            "SELECT dx, COUNT(*) FROM orders o JOIN visits v ON o.uid > v.uid GROUP BY dx",
            "o.uid >",
            ("equal columns of the same name",),
        ),
        (
            "SELECT dx, COUNT(*) FROM orders o JOIN visits v ON o.uid = o.uid GROUP BY dx",
            "o.uid = o.uid",
            ("two columns of the left side",),
        ),
        (
            "SELECT dx, SUM(amount) FROM orders o JOIN visits v ON o.uid = v.uid GROUP BY dx",
            "amount",
            ("in more than one joined table: qualify it, o.amount or v.amount",),
        ),
        (
            "SELECT dx, COUNT(v.uid) FROM orders o LEFT JOIN visits v ON o.uid = v.uid GROUP BY dx",
            "v.uid)",
            ("key of a LEFT JOIN",),
        ),
        (
            "SELECT dx, COUNT(*) FROM orders o RIGHT JOIN visits v ON o.uid = v.uid GROUP BY dx",
            "visits v",
            ("RIGHT JOIN is not supported", "[INNER] JOIN or LEFT JOIN"),
        ),
        (
            "SELECT dx, COUNT(*) FROM orders o CROSS JOIN visits v GROUP BY dx",
            "visits v",
            ("join it on the privacy unit",),
        ),
        (
            "SELECT dx, COUNT(*) FROM orders o, visits v GROUP BY dx",
            "visits v",
            ("without ON or USING", "JOIN visits USING (uid)"),
        ),
        (
            "SELECT COUNT(*) FROM data",
            "data",
            ("the private tables are called ['orders', 'visits']",),
        ),
    ],
)
def test_a_join_that_would_mix_people_or_is_unclear_is_refused(
    text: str, at: str, pieces: tuple[str, ...]
) -> None:
    refused(text, at, *pieces)


def test_a_join_without_max_rows_says_which_contributions_to_give() -> None:
    text = "SELECT dx, COUNT(*) FROM orders o JOIN visits v ON o.uid = v.uid GROUP BY dx"
    limits = {"orders": pf.Bound(max_groups=2, max_rows_per_group=3)}
    refused(
        text,
        "visits v",
        "needs the max_rows of 'orders' and 'visits'",
        "contributions={'orders': pf.Bound(max_groups=2, max_rows_per_group=3, max_rows=5), "
        "'visits': pf.Bound(max_rows=5)}",
        "Nothing was charged",
        contributions=limits,
    )
    only_right = {"orders": LIMITS["orders"]}
    refused(text, "visits v", "needs the max_rows of 'visits'", contributions=only_right)


def test_a_private_table_joined_to_itself_keeps_its_max_rows_on_each_side() -> None:
    sess = pf.Session(
        ORDERS,
        "uid",
        pf.zCDP(1.0),
        metadata=META,
        contributions=pf.Bound(max_groups=1, max_rows_per_group=2, max_rows=2),
    )
    query = sess.sql(
        "SELECT a.region, COUNT(*) AS n FROM data a JOIN data b ON a.uid = b.uid GROUP BY a.region"
    )
    assert query.explain(rho=0.5).bound.startswith(
        "join_private(data): at most 2 left × 2 right rows per unit: M ≤ 4"
    )


# -- the per-person subquery ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "value"),
    [
        ("SUM(amount)", pf.unit.sum("amount")),
        ("COUNT(*)", pf.unit.count()),
        ("COUNT(day)", pf.unit.count("day")),
        ("AVG(amount)", pf.unit.mean("amount")),
        ("MEAN(amount)", pf.unit.mean("amount")),
        ("MIN(amount)", pf.unit.min("amount")),
        ("MAX(o.amount)", pf.unit.max("amount")),
        ("COUNT(DISTINCT day)", pf.unit.n_unique("day")),
    ],
)
def test_a_subquery_grouped_by_the_unit_is_the_per_person_stage(call: str, value: Any) -> None:
    assert_same(
        f"SELECT region, AVG(total) AS avg_total, COUNT(*) AS people FROM (SELECT uid, region, "
        f"{call} AS total FROM orders o WHERE amount > 5 GROUP BY uid, region) AS p "
        "GROUP BY region",
        lambda sess: (
            sess.query("orders")
            .filter(pl.col("amount") > pl.lit(5))
            .per_unit("region", total=value)
            .bound(max_groups=2, max_rows_per_group=3, max_rows=4)
            .group_by("region", keys=REGIONS)
            .agg(pf.mean("total", TOTAL).alias("avg_total"), pf.count().alias("people"))
        ),
    )


def test_grouped_by_the_unit_alone_a_person_has_one_row() -> None:
    text = (
        "WITH people AS (SELECT uid, SUM(amount) AS total FROM orders GROUP BY uid) "
        "SELECT SUM(total) AS spent FROM people"
    )
    assert_same(
        text,
        lambda sess: (
            sess.query("orders")
            .per_unit(total=pf.unit.sum("amount"))
            .bound(max_groups=2, max_rows_per_group=3, max_rows=4)
            .agg(pf.sum("total", TOTAL).alias("spent"))
        ),
    )
    assert session().sql(text).explain(rho=1.0).bound.startswith("per_unit(): one row per unit")


def test_a_renamed_group_column_is_copied_before_the_stage() -> None:
    assert_same(
        "SELECT area, AVG(total) AS avg_total FROM (SELECT uid, region AS area, SUM(amount) "
        "AS total FROM orders GROUP BY uid, region) GROUP BY area",
        lambda sess: (
            sess.query("orders")
            .with_columns(area=pl.col("region"))
            .per_unit("area", total=pf.unit.sum("amount"))
            .bound(max_groups=2, max_rows_per_group=3, max_rows=4)
            .group_by("area", keys=REGIONS)
            .agg(pf.mean("total", TOTAL).alias("avg_total"))
        ),
    )


def test_a_per_person_stage_over_a_join() -> None:
    assert_same(
        "SELECT dx, AVG(n) AS visits FROM (SELECT v.uid, dx, COUNT(*) AS n FROM orders o "
        "JOIN visits v ON o.uid = v.uid GROUP BY v.uid, dx) GROUP BY dx",
        lambda sess: (
            sess.query("orders")
            .join_private(sess.query("visits"), "uid", left_rows=4, right_rows=3)
            .per_unit("dx", n=pf.unit.count())
            .bound(max_groups=2, max_rows_per_group=3)
            .group_by("dx", keys=DX)
            .agg(pf.mean("n", (0, 12)).alias("visits"))
        ),
    )


@pytest.mark.parametrize(
    ("text", "at", "pieces"),
    [
        (
            "SELECT region, AVG(total) FROM (SELECT region, SUM(amount) AS total FROM orders "
            "GROUP BY region) GROUP BY region",
            "SUM(amount)",
            ("inside a subquery", "group it by the privacy unit 'uid' as well"),
        ),
        (
            "SELECT AVG(total) FROM (SELECT uid, SUM(amount) AS total FROM orders) AS p",
            "SUM(amount)",
            ("GROUP BY uid",),
        ),
        (
            "SELECT AVG(total) FROM (SELECT uid, SUM(amount) FROM orders GROUP BY uid) AS p",
            "SUM(amount)",
            ("name the per-person value SUM(amount) (AS name)",),
        ),
        (
            "SELECT AVG(total) FROM (SELECT uid, SUM(amount * 2) AS total FROM orders "
            "GROUP BY uid) AS p",
            "SUM(amount * 2)",
            ("reads one column",),
        ),
        (
            "SELECT AVG(total) FROM (SELECT uid, SUM(amount) + 1 AS total FROM orders "
            "GROUP BY uid) AS p",
            "SUM(amount) + 1",
            ("in the outer query",),
        ),
        (
            "SELECT AVG(total) FROM (SELECT uid, MEDIAN(amount) AS total FROM orders "
            "GROUP BY uid) AS p",
            "MEDIAN",
            ("SUM, COUNT(*), COUNT(col), AVG, MIN, MAX and COUNT(DISTINCT col)",),
        ),
        (
            "SELECT AVG(total) FROM (SELECT uid, SUM(amount, 0, 10) AS total FROM orders "
            "GROUP BY uid) AS p",
            "amount, 0, 10",
            ("bound them in the outer query",),
        ),
        (
            "SELECT AVG(total) FROM (SELECT uid, region, SUM(amount) AS total FROM orders "
            "GROUP BY uid) AS p",
            "region",
            ("outside GROUP BY",),
        ),
        (
            "SELECT AVG(total) FROM (SELECT uid, SUM(amount) AS total FROM orders GROUP BY uid "
            "HAVING SUM(amount) > 3) AS p",
            "SUM(amount) > 3",
            ("outer query's WHERE",),
        ),
        (
            "SELECT AVG(amount) FROM (SELECT uid, SUM(amount) AS amount FROM orders "
            "GROUP BY uid) AS p",
            "SUM(amount) AS amount",
            ("name it something new",),
        ),
        (
            "SELECT AVG(total) FROM (SELECT uid, SUM(amount) AS total FROM orders "
            "GROUP BY uid, amount * 2) AS p",
            "amount * 2",
            ("group it by columns",),
        ),
        (
            "SELECT AVG(total) FROM (SELECT uid AS person, SUM(amount) AS total FROM orders "
            "GROUP BY uid) AS p",
            "uid AS person",
            ("the privacy unit keeps its name",),
        ),
    ],
)
def test_a_per_person_subquery_that_is_not_one_is_refused(
    text: str, at: str, pieces: tuple[str, ...]
) -> None:
    refused(text, at, *pieces)


# -- CROSS JOIN UNNEST ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "SELECT item, COUNT(*) AS n FROM orders o CROSS JOIN UNNEST(o.items) AS t(item) "
        "GROUP BY item",
        "SELECT t.item, COUNT(*) AS n FROM orders CROSS JOIN UNNEST(items) AS t(item) "
        "GROUP BY t.item",
        "SELECT item, COUNT(*) AS n FROM orders o, UNNEST(o.items) AS item GROUP BY item",
    ],
)
def test_cross_join_unnest_is_the_builders_flat_map(text: str) -> None:
    assert_same(
        text,
        lambda sess: (
            sess.query("orders")
            .flat_map("items", max_rows=4, name="item")
            .bound(max_groups=2, max_rows_per_group=3, max_rows=4)
            .group_by("item", keys=ITEMS)
            .agg(pf.count().alias("n"))
        ),
    )
    explained = session().sql(text).explain(rho=1.0)
    assert explained.bound.startswith("flat_map(items): at most 4 rows per unit: M ≤ 4")


def test_an_unnested_element_can_be_filtered_and_summed_by_its_order() -> None:
    assert_same(
        "SELECT item, SUM(amount) AS spent FROM orders CROSS JOIN UNNEST(items) AS t(item) "
        "WHERE t.item <> 'milk' GROUP BY item",
        lambda sess: (
            sess.query("orders")
            .flat_map("items", max_rows=4, name="item")
            .filter(pl.col("item") != pl.lit("milk"))
            .bound(max_groups=2, max_rows_per_group=3, max_rows=4)
            .group_by("item", keys=ITEMS)
            .agg(pf.sum("amount", AMOUNT).alias("spent"))
        ),
    )


@pytest.mark.parametrize(
    ("text", "at", "pieces"),
    [
        (
            "SELECT COUNT(*) FROM orders CROSS JOIN UNNEST(items)",
            "items",
            ("name the element: CROSS JOIN UNNEST(items) AS t(item)",),
        ),
        (
            "SELECT COUNT(*) FROM orders LEFT JOIN UNNEST(items) AS t(item) ON TRUE",
            "items",
            ("CROSS JOIN UNNEST(list_column) AS t(item)",),
        ),
        (
            "SELECT COUNT(*) FROM orders CROSS JOIN UNNEST(items) AS t(region)",
            "region",
            ("would be called 'region', which a column already is",),
        ),
        (
            "SELECT COUNT(*) FROM orders CROSS JOIN UNNEST(items, items) AS t(item)",
            "items",
            ("UNNEST one list column",),
        ),
        (
            "SELECT COUNT(*) FROM orders CROSS JOIN UNNEST(items) AS t(a, b)",
            "items",
            ("name the element",),
        ),
        (
            "SELECT COUNT(*) FROM orders CROSS JOIN UNNEST(region) AS t(item)",
            "region",
            ("UNNEST(region) needs a list column, and region has type String",),
        ),
    ],
)
def test_an_unnest_that_is_not_a_flat_map_is_refused(
    text: str, at: str, pieces: tuple[str, ...]
) -> None:
    refused(text, at, *pieces)


def test_an_unnest_without_max_rows_is_an_unbounded_flat_map_and_refused() -> None:
    limits = {"orders": pf.Bound(max_groups=1, max_rows_per_group=1), "visits": LIMITS["visits"]}
    refused(
        "SELECT item, COUNT(*) FROM orders o CROSS JOIN UNNEST(o.items) AS t(item) GROUP BY item",
        "o.items",
        "UNNEST(o.items) needs the max_rows of 'orders'",
        "the flat map is unbounded",
        "contributions={'orders': pf.Bound(max_groups=1, max_rows_per_group=1, max_rows=5), "
        "'visits': pf.Bound(max_rows=3)}",
        contributions=limits,
    )
    single = pf.Session(ORDERS, "uid", pf.zCDP(1.0), metadata=META)
    with pytest.raises(pf.SQLError, match=r"e\.g\. contributions=pf\.Bound\(max_rows=5\)"):
        single.sql("SELECT item, COUNT(*) FROM data CROSS JOIN UNNEST(items) AS item GROUP BY item")
    assert single.ledger == ()


def test_a_right_column_whose_joined_name_a_subquery_took_is_refused() -> None:
    refused(
        "SELECT dx, COUNT(*) FROM (SELECT uid, amount, amount AS amount_right FROM orders) o "
        "JOIN visits v ON o.uid = v.uid GROUP BY dx",
        "visits v",
        "the column 'amount' of 'visits' would be called 'amount_right' after the join",
        "named by a subquery: name it something else there",
    )


def test_a_third_table_whose_joined_name_an_earlier_join_took_says_what_to_rename() -> None:
    """The advice names a DataFrame and a rename; following it, the same SQL runs."""
    labs = VISITS.select("uid", "amount")
    limits = {**LIMITS, "labs": pf.Bound(max_rows=2)}
    text = (
        "SELECT COUNT(*) AS n FROM orders o JOIN visits v ON o.uid = v.uid "
        "JOIN labs l ON l.uid = o.uid WHERE l.amount > 3"
    )
    sess = pf.Session(
        {"orders": ORDERS, "visits": VISITS, "labs": labs},
        "uid",
        pf.zCDP(1.0),
        contributions=limits,
    )
    with pytest.raises(pf.SQLError) as caught:
        sess.sql(text)
    assert str(caught.value).startswith(
        "the column 'amount' of 'labs' would be called 'amount_right' after the join, and the "
        "left side has a column 'amount_right' already (the JOIN of 'visits' named it)"
    )
    assert "labs.rename({'amount': 'labs_amount'})" in str(caught.value)
    assert caught.value.position == position_of(text, "labs l")
    renamed = {"orders": ORDERS, "visits": VISITS, "labs": labs.rename({"amount": "labs_amount"})}
    fixed = pf.Session(renamed, "uid", pf.zCDP(1.0), contributions=limits)
    query = fixed.sql(text.replace("l.amount", "l.labs_amount")).query
    assert [s.table for s in query.plan.steps if isinstance(s, PrivateJoin)] == ["visits", "labs"]


def test_a_table_joined_to_itself_twice_is_told_to_use_the_builder_s_suffix() -> None:
    refused(
        "SELECT COUNT(*) FROM orders o JOIN orders p ON o.uid = p.uid JOIN orders q "
        "ON q.uid = o.uid",
        "orders q",
        "made by an earlier JOIN of the same table",
        "suffix='_2'",
    )


def test_a_left_side_made_by_steps_over_units_keeps_the_rows_they_enforce() -> None:
    per_person = session().sql(
        "SELECT dx, AVG(total) AS t FROM (SELECT uid, SUM(amount) AS total FROM orders "
        "GROUP BY uid) p JOIN visits v ON p.uid = v.uid GROUP BY dx"
    )
    assert per_person.explain(rho=1.0).bound.startswith(
        "per_unit(): one row per unit: M = 1; join_private(visits): at most 1 left × 3 "
        "right rows per unit: M ≤ 3"
    )
    assert_same(
        "SELECT item, COUNT(*) AS n FROM orders o JOIN visits v ON o.uid = v.uid "
        "CROSS JOIN UNNEST(o.items) AS t(item) GROUP BY item",
        lambda sess: (
            _joined()(sess)
            .flat_map("items", max_rows=4, name="item")
            .group_by("item", keys=ITEMS)
            .agg(pf.count().alias("n"))
        ),
    )


# -- WHERE over a join or UNNEST: each table's conditions before its row limit ------------


YEARS = range(2020, 2025)
YEAR_ORDERS = pl.DataFrame(
    {
        "uid": [u for u in range(1, 41) for _ in YEARS],
        "year": [y for _ in range(1, 41) for y in YEARS],
    }
)
YEAR_VISITS = pl.DataFrame({"uid": [u for u in range(1, 41) if u % 4], "dx": ["flu"] * 30})


def _years(seed: int = 0) -> pf.Session:
    """Each person has an order in each year 2020..2024, most a visit; one row kept per side."""
    return pf.Session(
        {"orders": YEAR_ORDERS, "visits": YEAR_VISITS},
        "uid",
        pf.zCDP(1e9),
        contributions={
            "orders": pf.Bound(max_groups=1, max_rows=1),
            "visits": pf.Bound(max_rows=1),
        },
        rng=SeededRandomness(seed),
    )


def _year_join(sess: pf.Session, first: bool) -> Query:
    """orders joined with visits, the orders filtered to 2024 ``first`` (or after the join)."""
    in_2024 = pl.col("year") == pl.lit(2024)
    orders = sess.query("orders").filter(in_2024) if first else sess.query("orders")
    joined = orders.join_private(sess.query("visits"), "uid", left_rows=1, right_rows=1)
    return joined if first else joined.filter(in_2024)


def test_a_where_on_one_table_keeps_its_rows_whatever_the_join_truncates() -> None:
    """``WHERE o.year = 2024`` keeps every person's 2024 order, as without the JOIN.

    Each person keeps one order row: filtered after the join, the 2024 row would
    survive about one time in five. Filtered first, it is the row kept, in every
    seeded release: the plan's rows (the engine's steps, seeded) are exactly the
    2024 orders of the people with a visit, and with ρ = 10⁹ the released
    count's noise is 0 (the discrete Gaussian's σ is 2·10⁻⁵).
    """
    text = "SELECT COUNT(*) AS n FROM orders o JOIN visits v ON o.uid = v.uid WHERE o.year = 2024"
    parsed = _years().sql(text)
    assert _steps(parsed.query) == _steps(_year_join(_years(), first=True))
    wanted = YEAR_ORDERS.join(YEAR_VISITS, on="uid").filter(pl.col("year") == 2024)
    tables = {"orders": YEAR_ORDERS.lazy(), "visits": YEAR_VISITS.lazy()}

    def rows(query: Query, seed: int) -> pl.DataFrame:
        frame = YEAR_ORDERS.lazy()
        return apply_steps(frame, query.plan.steps, unit="uid", tables=tables, seed=seed).collect()

    kept_last = []
    for seed in range(20):
        assert_frame_equal(rows(parsed.query, seed), wanted, check_row_order=False)
        kept_last.append(rows(_year_join(_years(), first=False), seed).height)
        released = _years(seed).sql(text, rho=1e9)
        assert released["n"].to_list() == [wanted.height]
        built = _year_join(_years(seed), first=True).bound(max_groups=1).agg(pf.count().alias("n"))
        assert_frame_equal(released, built.release(rho=1e9))
    assert max(kept_last) < wanted.height  # filtered last, 2024 orders are lost: the test can tell


def _dx_counts(query: Query) -> Query:
    return query.group_by("dx", keys=DX).agg(pf.count().alias("n"))


AMOUNT_OVER_20 = pl.col("amount") > pl.lit(20)
NOT_CUT = pl.col("dx") != pl.lit("cut")


@pytest.mark.parametrize(
    ("where", "build"),
    [
        (  # one condition on each table, and one on both: the last after the join
            "o.amount > 20 AND v.dx <> 'cut' AND o.day < v.day",
            lambda sess: (
                sess.query("orders")
                .filter(AMOUNT_OVER_20)
                .join_private(
                    sess.query("visits").filter(NOT_CUT), "uid", left_rows=4, right_rows=3
                )
                .filter(pl.col("day") < pl.col("day_right"))
            ),
        ),
        (  # the right table's amount is amount_right after the join, amount before it
            "(v.amount > 10 AND v.day = 1) AND o.amount > 20",
            lambda sess: (
                sess.query("orders")
                .filter(AMOUNT_OVER_20)
                .join_private(
                    sess.query("visits").filter(
                        (pl.col("amount") > pl.lit(10)) & (pl.col("day") == pl.lit(1))
                    ),
                    "uid",
                    left_rows=4,
                    right_rows=3,
                )
            ),
        ),
        (  # unqualified names, the unit (a key, on both sides) read from the left
            "region = 'north' AND dx = 'flu' AND uid > 10",
            lambda sess: (
                sess.query("orders")
                .filter((pl.col("region") == pl.lit("north")) & (pl.col("uid") > pl.lit(10)))
                .join_private(
                    sess.query("visits").filter(pl.col("dx") == pl.lit("flu")),
                    "uid",
                    left_rows=4,
                    right_rows=3,
                )
            ),
        ),
        (  # an OR across the sides reads both: after the join
            "(o.amount > 20 OR v.dx = 'flu')",
            lambda sess: (
                sess.query("orders")
                .join_private(sess.query("visits"), "uid", left_rows=4, right_rows=3)
                .filter(AMOUNT_OVER_20 | (pl.col("dx") == pl.lit("flu")))
            ),
        ),
    ],
)
def test_a_where_over_a_join_filters_each_table_first_as_the_builder_would(
    where: str, build: Callable[[pf.Session], Query]
) -> None:
    assert_same(
        f"SELECT dx, COUNT(*) AS n FROM orders o JOIN visits v ON o.uid = v.uid WHERE {where} "
        "GROUP BY dx",
        lambda sess: _dx_counts(build(sess).bound(max_groups=2, max_rows_per_group=3)),
    )


def test_a_left_join_filters_its_left_table_first_and_its_right_table_after() -> None:
    """A right-table condition after a LEFT JOIN also drops the left rows without a match."""
    assert_same(
        "SELECT region, COUNT(*) AS n FROM orders o LEFT JOIN visits v ON o.uid = v.uid "
        "WHERE o.amount > 20 AND v.dx IS NULL GROUP BY region",
        lambda sess: (
            sess.query("orders")
            .filter(AMOUNT_OVER_20)
            .join_private(sess.query("visits"), "uid", left_rows=4, right_rows=3, how="left")
            .filter(pl.col("dx").is_null())
            .bound(max_groups=2, max_rows_per_group=3)
            .group_by("region", keys=REGIONS)
            .agg(pf.count().alias("n"))
        ),
    )


def test_a_where_over_unnest_filters_the_rows_before_the_map_unless_it_reads_the_element() -> None:
    assert_same(
        "SELECT item, COUNT(*) AS n FROM orders o CROSS JOIN UNNEST(o.items) AS t(item) "
        "WHERE o.day = 1 AND t.item <> 'milk' AND o.amount > 20 GROUP BY item",
        lambda sess: (
            sess.query("orders")
            .filter((pl.col("day") == pl.lit(1)) & AMOUNT_OVER_20)
            .flat_map("items", max_rows=4, name="item")
            .filter(pl.col("item") != pl.lit("milk"))
            .bound(max_groups=2, max_rows_per_group=3, max_rows=4)
            .group_by("item", keys=ITEMS)
            .agg(pf.count().alias("n"))
        ),
    )


def test_a_left_subquery_s_derived_column_filters_before_the_join() -> None:
    assert_same(
        "SELECT dx, COUNT(*) AS n FROM (SELECT uid, region, amount * 2 AS doubled FROM orders) o "
        "JOIN visits v ON o.uid = v.uid WHERE o.doubled > 50 AND v.day = 2 GROUP BY dx",
        lambda sess: _dx_counts(
            sess.query("orders")
            .with_columns(doubled=pl.col("amount") * pl.lit(2))
            .filter(pl.col("doubled") > pl.lit(50))
            .join_private(
                sess.query("visits").filter(pl.col("day") == pl.lit(2)),
                "uid",
                left_rows=4,
                right_rows=3,
            )
            .bound(max_groups=2, max_rows_per_group=3)
        ),
    )


def test_each_join_s_conditions_filter_before_it_and_a_public_table_s_after_it() -> None:
    assert_same(
        "SELECT zone, COUNT(*) AS n FROM orders o JOIN visits v ON o.uid = v.uid "
        "CROSS JOIN UNNEST(o.items) AS t(item) JOIN zones z ON o.region = z.region "
        "WHERE z.zone = 'cold' AND t.item = 'tea' AND o.amount > v.amount AND o.amount > 20 "
        "GROUP BY zone",
        lambda sess: (
            sess.query("orders")
            .filter(AMOUNT_OVER_20)
            .join_private(sess.query("visits"), "uid", left_rows=4, right_rows=3)
            .filter(pl.col("amount") > pl.col("amount_right"))
            .flat_map("items", max_rows=4, name="item")
            .filter(pl.col("item") == pl.lit("tea"))
            .join(ZONES, on="region", how="inner")
            .filter(pl.col("zone") == pl.lit("cold"))
            .bound(max_groups=2, max_rows_per_group=3)
            .group_by("zone", keys=["cold", "warm"])
            .agg(pf.count().alias("n"))
        ),
    )


def test_a_per_person_subquery_s_where_filters_each_table_before_its_join() -> None:
    assert_same(
        "SELECT dx, AVG(n) AS visits FROM (SELECT v.uid, dx, COUNT(*) AS n FROM orders o "
        "JOIN visits v ON o.uid = v.uid WHERE o.amount > 20 AND v.day <> 0 GROUP BY v.uid, dx) "
        "GROUP BY dx",
        lambda sess: (
            sess.query("orders")
            .filter(AMOUNT_OVER_20)
            .join_private(
                sess.query("visits").filter(pl.col("day") != pl.lit(0)),
                "uid",
                left_rows=4,
                right_rows=3,
            )
            .per_unit("dx", n=pf.unit.count())
            .bound(max_groups=2, max_rows_per_group=3)
            .group_by("dx", keys=DX)
            .agg(pf.mean("n", (0, 12)).alias("visits"))
        ),
    )


def test_a_where_refused_over_a_join_is_located_at_its_condition() -> None:
    refused(
        "SELECT dx, COUNT(*) FROM orders o JOIN visits v ON o.uid = v.uid "
        "WHERE o.amount > 20 AND v.dx = 3 GROUP BY dx",
        "v.dx = 3",
        "WHERE cannot run on this data",
    )


# -- a filtered subquery on the right of a JOIN -------------------------------------------


@pytest.mark.parametrize(
    "right",
    [
        "(SELECT * FROM visits WHERE dx <> 'cut')",
        "(SELECT uid, dx FROM visits WHERE dx <> 'cut')",
        "(SELECT w.uid, w.dx AS dx FROM visits AS w WHERE w.dx <> 'cut')",
        "(SELECT visits.* FROM visits WHERE visits.dx <> 'cut')",
    ],
)
def test_a_subquery_filtering_the_right_table_is_join_private_of_its_filtered_query(
    right: str,
) -> None:
    assert_same(
        f"SELECT dx, COUNT(*) AS n FROM orders o JOIN {right} v ON o.uid = v.uid GROUP BY v.dx",
        lambda sess: _dx_counts(_joined(right=NOT_CUT)(sess)),
    )


def test_a_left_join_of_a_filtered_subquery_filters_the_right_table_first() -> None:
    assert_same(
        "SELECT region, COUNT(*) AS n FROM orders o LEFT JOIN (SELECT uid, dx FROM visits "
        "WHERE dx <> 'cut' AND day > 0) v ON o.uid = v.uid WHERE v.dx IS NULL GROUP BY region",
        lambda sess: (
            sess.query("orders")
            .join_private(
                sess.query("visits").filter(NOT_CUT & (pl.col("day") > pl.lit(0))),
                "uid",
                left_rows=4,
                right_rows=3,
                how="left",
            )
            .filter(pl.col("dx").is_null())
            .bound(max_groups=2, max_rows_per_group=3)
            .group_by("region", keys=REGIONS)
            .agg(pf.count().alias("n"))
        ),
    )


def test_a_where_on_a_filtered_subquery_filters_the_table_after_the_subquery_s_where() -> None:
    assert_same(
        "SELECT dx, COUNT(*) AS n FROM orders o JOIN (SELECT * FROM visits WHERE dx <> 'cut') v "
        "USING (uid) WHERE v.day = 1 GROUP BY dx",
        lambda sess: _dx_counts(
            sess.query("orders")
            .join_private(
                sess.query("visits").filter(NOT_CUT).filter(pl.col("day") == pl.lit(1)),
                "uid",
                left_rows=4,
                right_rows=3,
            )
            .bound(max_groups=2, max_rows_per_group=3)
        ),
    )


@pytest.mark.parametrize(
    ("right", "at", "pieces"),
    [
        (
            "(SELECT uid, dx AS d FROM visits)",
            "dx AS d",
            ("dx AS d in a subquery in a JOIN is not supported", "SELECT * or its columns"),
        ),
        (
            "(SELECT uid, amount * 2 AS a FROM visits)",
            "amount * 2",
            ("in a subquery in a JOIN is not supported", "compute, join or aggregate"),
        ),
        (
            "(SELECT uid, COUNT(*) AS c FROM visits GROUP BY uid)",
            "uid)",
            ("GROUP in a subquery in a JOIN is not supported",),
        ),
        (
            "(SELECT DISTINCT uid, dx FROM visits)",
            "DISTINCT",
            ("DISTINCT in a subquery in a JOIN is not supported",),
        ),
        (
            "(SELECT v2.uid, dx FROM visits v2 JOIN orders USING (uid))",
            "orders USING",
            ("JOIN in a subquery in a JOIN is not supported",),
        ),
        (
            "(SELECT * EXCEPT (amount) FROM visits)",
            "* EXCEPT",
            ("in a subquery in a JOIN is not supported",),
        ),
    ],
)
def test_a_joined_subquery_that_does_more_than_filter_its_table_is_refused(
    right: str, at: str, pieces: tuple[str, ...]
) -> None:
    refused(f"SELECT COUNT(*) FROM orders o JOIN {right} v ON o.uid = v.uid", at, *pieces)


def test_a_joined_subquery_needs_a_name_and_shows_only_its_columns() -> None:
    refused(
        "SELECT COUNT(*) FROM orders o JOIN (SELECT uid, dx FROM visits) ON o.uid = uid",
        "uid, dx",
        "name the subquery",
    )
    refused(
        "SELECT SUM(v.amount) FROM orders o JOIN (SELECT uid, dx FROM visits) v ON o.uid = v.uid",
        "amount)",
        "the column 'amount' does not exist in the table 'v'",
    )


def test_a_where_over_a_subquery_s_join_filters_each_table_before_that_join() -> None:
    """The outer WHERE reads the subquery's columns as it computes them: ``fee`` is ``v.amount``."""
    assert_same(
        "WITH j AS (SELECT o.uid, o.day, v.dx, v.amount AS fee, o.amount * 2 AS doubled "
        "FROM orders o JOIN visits v ON o.uid = v.uid WHERE v.day = 1) "
        "SELECT dx, COUNT(*) AS n FROM j WHERE day = 2 AND fee > 3 AND doubled > 10 "
        "AND day < fee GROUP BY dx",
        lambda sess: _dx_counts(
            sess.query("orders")
            .filter((pl.col("day") == pl.lit(2)) & (pl.col("amount") * pl.lit(2) > pl.lit(10)))
            .join_private(
                sess.query("visits").filter(
                    (pl.col("day") == pl.lit(1)) & (pl.col("amount") > pl.lit(3))
                ),
                "uid",
                left_rows=4,
                right_rows=3,
            )
            .filter(pl.col("day") < pl.col("amount_right"))
            .with_columns(fee=pl.col("amount_right"), doubled=pl.col("amount") * pl.lit(2))
            .bound(max_groups=2, max_rows_per_group=3)
        ),
    )


@pytest.mark.parametrize(
    ("subquery", "where", "build"),
    [
        (  # SELECT * names the right table's amount amount_right, the plan's name
            "SELECT * FROM orders o JOIN visits v ON o.uid = v.uid",
            "amount_right > 3 AND j.amount > 20",
            lambda sess: (
                sess.query("orders")
                .filter(AMOUNT_OVER_20)
                .join_private(
                    sess.query("visits").filter(pl.col("amount") > pl.lit(3)),
                    "uid",
                    left_rows=4,
                    right_rows=3,
                )
            ),
        ),
        (  # a LEFT JOIN's right table is filtered after it, still inside the subquery
            "SELECT o.uid, o.amount, v.dx FROM orders o LEFT JOIN visits v ON o.uid = v.uid",
            "dx IS NULL AND amount > 20",
            lambda sess: (
                sess.query("orders")
                .filter(AMOUNT_OVER_20)
                .join_private(sess.query("visits"), "uid", left_rows=4, right_rows=3, how="left")
                .filter(pl.col("dx").is_null())
            ),
        ),
        (  # through two subqueries
            "SELECT * FROM (SELECT o.uid, o.amount, v.dx FROM orders o JOIN visits v "
            "ON o.uid = v.uid) a",
            "j.amount > 20 AND j.dx <> 'cut'",
            lambda sess: (
                sess.query("orders")
                .filter(AMOUNT_OVER_20)
                .join_private(
                    sess.query("visits").filter(NOT_CUT), "uid", left_rows=4, right_rows=3
                )
            ),
        ),
    ],
)
def test_a_where_over_a_joined_subquery_reads_its_columns_back_to_their_tables(
    subquery: str, where: str, build: Callable[[pf.Session], Query]
) -> None:
    assert_same(
        f"SELECT COUNT(*) AS n FROM ({subquery}) j WHERE {where}",
        lambda sess: (
            build(sess).bound(max_groups=2, max_rows_per_group=3).agg(pf.count().alias("n"))
        ),
    )


def test_a_where_over_a_subquery_of_an_unnest_and_a_join_filters_each_before_its_limit() -> None:
    assert_same(
        "SELECT COUNT(*) AS n FROM (SELECT o.uid, o.day, item FROM orders o "
        "CROSS JOIN UNNEST(o.items) AS t(item)) j JOIN visits v ON j.uid = v.uid "
        "WHERE j.item = 'tea' AND j.day = 1 AND v.dx = 'flu'",
        lambda sess: (
            sess.query("orders")
            .filter(pl.col("day") == pl.lit(1))
            .flat_map("items", max_rows=4, name="item")
            .filter(pl.col("item") == pl.lit("tea"))
            .join_private(
                sess.query("visits").filter(pl.col("dx") == pl.lit("flu")),
                "uid",
                left_rows=4,
                right_rows=3,
            )
            .bound(max_groups=2, max_rows_per_group=3)
            .agg(pf.count().alias("n"))
        ),
    )
