"""BigQuery's remaining idioms via sess.sql: public groups from a public table, and more.

BigQuery's "Differentially private aggregate functions" and its
``group_selection_strategy=PUBLIC_GROUPS`` option report exactly the groups a
RIGHT OUTER JOIN lists; here the list is a public table registered on the
Session. Each check compares with what BigQuery defines, and what is refused
says why and what to write.
"""

from __future__ import annotations

import re
import warnings
from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from sql_setup import assert_same_plan

import privframe as pf
from privframe.mechanisms.noise import SeededRandomness

ITEMS = ["pen", "pencil", "scissors"]
BIG = pf.zCDP(1e6, delta=Fraction(1, 2))


def professors(n: int = 2_000, seed: int = 0) -> pl.DataFrame:
    """Each professor (id) requests 1-3 items, a quantity 0-100 each, with a 0/1 flag."""
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(n), rng.integers(1, 4, n))
    rows = len(ids)
    return pl.DataFrame(
        {
            "id": ids,
            "item": rng.choice(ITEMS, rows),
            "quantity": rng.integers(0, 101, rows).astype(float),
            "flag": rng.integers(0, 2, rows),
        }
    )


DATA = professors()
GROUPS = pl.DataFrame({"item": ["pencil", "book", "pen", "book"]})  # public: no scissors


def session(
    budget: pf.Budget = BIG, *, tables: dict[str, pl.DataFrame] | None = None, seed: int = 1
) -> pf.Session:
    return pf.Session(
        DATA,
        "id",
        budget,
        rng=SeededRandomness(seed),
        tables={"groups": GROUPS} if tables is None else tables,
        contributions=pf.Bound(max_groups=3, max_rows_per_group=3),
    )


@pytest.fixture(autouse=True)
def _quiet_seeds() -> None:
    warnings.simplefilter("ignore", pf.SeededRandomnessWarning)


def refusal(sess: pf.Session, text: str) -> pf.SQLError:
    with pytest.raises(pf.SQLError) as caught:
        sess.sql(text)
    return caught.value


# -- public groups from a public table -----------------------------------------------------------

JOINED = (
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=2, delta=1e-5, max_groups_contributed=3"
    "{strategy}) item, COUNT(*, contribution_bounds_per_group => (0, 3)) AS n FROM data "
    "RIGHT OUTER JOIN (SELECT DISTINCT item FROM groups) USING (item) GROUP BY item"
)


@pytest.mark.parametrize("strategy", ["", ", group_selection_strategy=PUBLIC_GROUPS"])
def test_a_right_join_on_a_public_tables_groups_releases_exactly_its_distinct_values(
    strategy: str,
) -> None:
    sess = session()
    query = sess.parse_sql(JOINED.format(strategy=strategy))
    assert query.query.plan.selected == ()  # nothing chosen from the data
    released = query.release()
    assert released["item"].to_list() == list(dict.fromkeys(GROUPS["item"]))
    truth = DATA.group_by("item").len()
    pen = truth.filter(pl.col("item") == "pen")["len"].item()
    assert abs(released.filter(pl.col("item") == "pen")["n"].item() - pen) < 5 * pen**0.5
    assert abs(released.filter(pl.col("item") == "book")["n"].item()) < 30  # noise around 0
    assert sess.spent.delta == 0  # public keys: no delta spent on selection


def test_the_public_table_list_is_read_whatever_the_case_of_its_names() -> None:
    text = (
        JOINED.format(strategy="")
        .replace("FROM groups", "FROM GROUPS")
        .replace("DISTINCT item", "DISTINCT ITEM")
    )
    released = session().parse_sql(text).release()
    assert released["item"].to_list() == ["pencil", "book", "pen"]


@pytest.mark.parametrize(
    ("table", "text", "says"),
    [
        (
            pl.DataFrame({"item": ["pen", None]}),
            JOINED.format(strategy=""),
            "has a NULL in 'item'",
        ),
        (GROUPS, JOINED.format(strategy="").replace("DISTINCT ", ""), "SELECT DISTINCT item"),
        (GROUPS, JOINED.format(strategy="").replace("FROM groups", "FROM other"), "a subquery in"),
        (
            GROUPS,
            JOINED.format(strategy="").replace("RIGHT OUTER", "LEFT OUTER"),
            "FROM <public table>) USING (g)",
        ),
        (
            pl.DataFrame({"item": [1, 2]}),
            JOINED.format(strategy=""),
            "keys of type Int64 cannot match a column of type String",
        ),
    ],
)
def test_a_public_group_list_that_is_not_one_is_refused_with_why(
    table: pl.DataFrame, text: str, says: str
) -> None:
    sess = session(tables={"groups": table})
    assert says in str(refusal(sess, text))
    assert not sess.ledger


# -- NOT on a number: NOT CAST(x AS BOOL) ---------------------------------------------------------

FLAGS = pl.DataFrame({"id": [1, 2, 3, 4, 5], "flag": [0, 1, 2, None, 0], "b": [True] * 5})


@pytest.mark.parametrize("text", ["NOT flag", "NOT (flag)", "NOT ((flag))"])
def test_not_on_an_integer_column_keeps_the_rows_where_it_is_zero(text: str) -> None:
    sess = pf.Session(FLAGS, "id", BIG, rng=SeededRandomness(1))
    query = sess.parse_sql(f"SELECT COUNT(*) AS n FROM data WHERE {text}")
    builder = sess.query().filter(pl.col("flag") == 0).agg(pf.count().alias("n"))
    assert_same_plan(query.query.plan, builder.plan)
    kept = FLAGS.filter(query.query.plan.steps[0].exprs[0])  # NULL is neither kept nor true
    assert kept["id"].to_list() == [1, 5]


def test_not_on_a_boolean_column_is_sqls_not() -> None:
    data = FLAGS.with_columns(b=pl.Series([True, False, None, False, True]))
    sess = pf.Session(data, "id", BIG, rng=SeededRandomness(1))
    query = sess.parse_sql("SELECT COUNT(*) AS n FROM data WHERE NOT b")
    assert data.filter(query.query.plan.steps[0].exprs[0])["id"].to_list() == [2, 4]


def test_not_on_a_string_column_is_refused_naming_the_column() -> None:
    sess = session()
    error = refusal(sess, "SELECT COUNT(*) AS n FROM data WHERE NOT item")
    assert "Boolean" in str(error)
    assert "String" in str(error)
    assert not sess.ledger


# -- deterministic row-level math: PI(), SQRT, POWER(x, n) ---------------------------------------

NUMBERS = pl.DataFrame(
    {
        "id": [1, 2, 3, 4, 5, 6],
        "x": [4.0, -1.0, float("nan"), None, 0.0, 2.0],
        "k": [4, -1, 2, None, 0, 3],
        "s": ["a"] * 6,
    }
)


def _row_values(text: str) -> list[object]:
    sess = pf.Session(NUMBERS, "id", BIG, rng=SeededRandomness(1))
    query = sess.parse_sql(f"SELECT SUM({text}, 0, 100) AS v FROM data")
    return NUMBERS.select(query.query.plan.steps[0].exprs[0]).to_series().to_list()


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("SQRT(x)", [2.0, None, float("nan"), None, 0.0, 2.0**0.5]),  # NULL below 0
        ("SQRT(k)", [2.0, None, 2.0**0.5, None, 0.0, 3.0**0.5]),
        ("POWER(k, 0.5)", [2.0, None, 2.0**0.5, None, 0.0, 3.0**0.5]),
        ("POWER(x, 2)", [16.0, 1.0, float("nan"), None, 0.0, 4.0]),
        ("POW(k, 3)", [64.0, -1.0, 8.0, None, 0.0, 27.0]),
        ("POWER(k, -1)", [0.25, -1.0, 0.5, None, None, 1 / 3]),  # NULL for 1 / 0
        ("POWER(x, 0)", [1.0, 1.0, 1.0, None, 1.0, 1.0]),  # NULL stays NULL
        ("PI() * k", [4 * np.pi, -np.pi, 2 * np.pi, None, 0.0, 3 * np.pi]),
    ],
)
def test_row_math_gives_bigquerys_values_and_null_out_of_domain(
    text: str, want: list[object]
) -> None:
    got = _row_values(text)
    assert [g is None for g in got] == [w is None for w in want]
    pairs = [(g, w) for g, w in zip(got, want, strict=True) if w is not None]
    assert all(g == pytest.approx(w, nan_ok=True, rel=1e-15) for g, w in pairs)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("POWER(k, 1.5)", "a literal whole exponent from -8 to 8"),
        ("POWER(k, x)", "a literal whole exponent from -8 to 8"),
        ("POWER(k, 9)", "a literal whole exponent from -8 to 8"),
        ("LN(x)", "different libraries"),
        ("EXP(x)", "different libraries"),
        ("LOG10(x)", "different libraries"),
        ("SQRT(s)", "take the square root of a number"),
        ("POWER(s, 2)", "arithmetic on dtypes str"),
    ],
)
def test_math_that_could_fail_or_differ_between_engines_is_refused_with_why(
    text: str, says: str
) -> None:
    sess = pf.Session(NUMBERS, "id", BIG, rng=SeededRandomness(1))
    with pytest.raises(pf.SQLError, match=re.escape(says)):
        sess.parse_sql(f"SELECT SUM({text}, 0, 100) AS v FROM data")
    assert not sess.ledger


def test_a_filter_on_row_math_keeps_the_rows_bigquery_keeps() -> None:
    sess = pf.Session(NUMBERS, "id", BIG, rng=SeededRandomness(1))
    query = sess.parse_sql("SELECT COUNT(*) AS n FROM data WHERE SQRT(k) > POWER(x, 2) - PI()")
    kept = NUMBERS.filter(query.query.plan.steps[0].exprs[0])
    assert kept["id"].to_list() == [5, 6]  # 0 > -pi, sqrt(3) > 4 - pi


# -- MIN and MAX: the 0 and 1 quantiles (Tumult Analytics' min and max) ---------------------------


@pytest.mark.parametrize(
    ("call", "q"),
    [
        ("MIN(quantity, 0, 100)", 0.0),
        ("MAX(quantity, contribution_bounds_per_group => (0, 100))", 1.0),
    ],
)
def test_min_and_max_are_the_0_and_1_quantiles(call: str, q: float) -> None:
    sess = session()
    query = sess.parse_sql(f"SELECT {call} AS v FROM data")
    builder = sess.query().bound(3, 3).agg(pf.quantile("quantity", q, (0, 100)).alias("v"))
    assert_same_plan(query.query.plan, builder.plan)
    released = query.release(rho=100)["v"].item()
    # A noisy rank near the end: within a few candidates of the true extreme (0 or 100).
    assert abs(released - 100 * q) <= 5


def test_min_without_bounds_says_where_to_give_them() -> None:
    sess = session()
    error = refusal(sess, "SELECT MIN(quantity) AS lo FROM data")
    assert "MIN(x, contribution_bounds_per_group => (lower, upper))" in str(error)
    assert not sess.ledger


def test_min_of_two_values_is_refused() -> None:
    sess = session()
    error = refusal(sess, "SELECT MIN(quantity, flag) AS lo FROM data")
    assert "MIN(x, lower, upper)" in str(error)


def test_min_in_a_per_person_subquery_is_still_the_persons_minimum() -> None:
    sess = session()
    text = "SELECT SUM(m, 0, 100) AS s FROM (SELECT id, MIN(quantity) AS m FROM data GROUP BY id) t"
    query = sess.parse_sql(text)
    assert [type(a).__name__ for a in query.query.plan.aggregates] == ["Sum"]


# -- COUNT(DISTINCT col) of a column other than the unit: refused, saying what to write -----------


def test_a_distinct_count_of_another_column_is_refused_with_what_to_write() -> None:
    sess = session()
    error = str(refusal(sess, "SELECT COUNT(DISTINCT item) AS n FROM data"))
    assert "only COUNT(DISTINCT id) is supported" in error
    assert "SELECT item, COUNT(*) ... GROUP BY item" in error
    assert not sess.ledger
