"""What SQL reads rows from: the private table by its name, row subqueries and WITH.

A subquery or common table expression that only filters rows and computes
row expressions is the same plan as the flat query: with the same seed it
releases the same values. Anything that would aggregate private rows twice
is refused, naming the construct, before anything is charged.
"""

from __future__ import annotations

import re

import polars as pl
import pytest

import privframe as pf
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

FRAME = pl.DataFrame(
    {
        "pid": list(range(1, 601)),
        "age": [18 + i % 70 for i in range(600)],
        "sex": [i % 2 for i in range(600)],
        "income": [float(500 * (i % 40)) for i in range(600)],
    }
)
METADATA = {
    "age": pf.Column(bounds=(0, 100)),
    "income": pf.Column(bounds=(0, 20_000)),
    "sex": pf.Column(keys=[0, 1]),
    "double_age": pf.Column(bounds=(0, 200)),
}


def session(seed: int = 7, **options: object) -> pf.Session:
    return pf.Session(
        FRAME,
        "pid",
        pf.zCDP(10.0),
        rng=SeededRandomness(seed),
        metadata=METADATA,
        contributions=pf.Bound(max_groups=1, max_rows_per_group=1),
        **options,  # type: ignore[arg-type]
    )


FLAT = (
    "SELECT sex, COUNT(*) AS n, SUM(age * 2) AS double_age FROM data WHERE age > 40 "
    "AND income < 15000 GROUP BY sex"
)
NESTED = [
    "SELECT s.sex, COUNT(*) AS n, SUM(double_age) AS double_age FROM "
    "(SELECT age * 2 AS double_age, sex, income FROM data WHERE age > 40) AS s "
    "WHERE s.income < 15000 GROUP BY s.sex",
    "WITH older AS (SELECT age * 2 AS double_age, sex, income FROM data WHERE age > 40) "
    "SELECT sex, COUNT(*) AS n, SUM(double_age) AS double_age FROM older "
    "WHERE income < 15000 GROUP BY sex",
    "WITH older AS (SELECT * FROM data WHERE age > 40), "
    "poorer AS (SELECT age * 2 AS double_age, sex FROM older WHERE income < 15000) "
    "SELECT sex, COUNT(*) AS n, SUM(double_age) AS double_age FROM poorer GROUP BY sex",
    "SELECT sex, COUNT(*) AS n, SUM(double_age) AS double_age FROM (SELECT * FROM "
    "(SELECT age * 2 AS double_age, sex, income FROM data WHERE age > 40) AS a "
    "WHERE income < 15000) AS b GROUP BY sex",
]


@pytest.mark.parametrize("text", NESTED)
def test_row_subqueries_release_what_the_flat_query_releases(text: str) -> None:
    flat = session().sql(FLAT, rho=1.0, with_error=True)
    nested = session().sql(text, rho=1.0, with_error=True)
    assert nested.equals(flat)


def test_a_renamed_column_keeps_its_bounds_and_keys() -> None:
    text = (
        "SELECT gender, AVG(years) AS mean_age FROM "
        "(SELECT age AS years, sex AS gender FROM data) AS p GROUP BY gender"
    )
    query = session().sql(text)
    assert query.query.plan.keys is not None  # sex's public keys, under the new name
    (mean,) = query.query.plan.aggregates
    assert (mean.lower, mean.upper) == (0.0, 100.0)  # type: ignore[attr-defined]


def test_the_outer_query_sees_only_the_subquerys_columns() -> None:
    with pytest.raises(pf.SQLError, match="'income' does not exist"):
        session().sql("SELECT SUM(income) FROM (SELECT age FROM data) AS s")


@pytest.mark.parametrize(
    ("text", "construct"),
    [
        ("SELECT COUNT(*) FROM (SELECT sex, COUNT(*) AS c FROM data GROUP BY sex) AS s", "COUNT"),
        ("WITH t AS (SELECT SUM(age) AS a FROM data) SELECT COUNT(*) FROM t", "SUM"),
        ("SELECT COUNT(*) FROM (SELECT age FROM data LIMIT 10) AS s", "LIMIT"),
        ("SELECT COUNT(*) FROM (SELECT DISTINCT age FROM data) AS s", "DISTINCT"),
        (
            "SELECT COUNT(*) FROM (SELECT age, ROW_NUMBER() OVER (PARTITION BY pid) AS r "
            "FROM data) AS s",
            "window",
        ),
        ("SELECT COUNT(*) FROM (SELECT age AS sex FROM data) AS s", "subquery"),
        ("SELECT COUNT(*) FROM (SELECT age + 1 FROM data) AS s", "subquery"),
    ],
)
def test_subqueries_that_are_not_row_level_are_refused(text: str, construct: str) -> None:
    sess = session()
    with pytest.raises(pf.SQLError) as refused:
        sess.sql(text, rho=1.0)
    assert construct.casefold() in f"{refused.value.construct} {refused.value}".casefold()
    assert refused.value.__context__ is None
    assert refused.value.__cause__ is None
    assert not sess.ledger


def test_a_schema_qualified_name_names_the_private_table() -> None:
    sess = session(name="PUMS.PUMS")
    for text in ("SELECT COUNT(*) FROM PUMS.PUMS", 'SELECT COUNT(*) FROM pums."PUMS"'):
        assert sess.sql(text).query.plan.aggregates
    for other in ("data", "PUMS", "other.PUMS", '"pums".PUMS'):
        with pytest.raises(pf.SQLError, match=r"the private table is called 'PUMS\.PUMS'"):
            sess.sql(f"SELECT COUNT(*) FROM {other}")


@pytest.mark.parametrize("name", ["", "a..b", 3, '"quoted"', "a.`b`"])
def test_a_private_table_name_must_be_a_dotted_name(name: object) -> None:
    with pytest.raises(pf.InvalidArgumentError, match="private table's name"):
        session(name=name)


@pytest.mark.parametrize(("name", "public"), [("people", "People"), ("PUMS.PUMS", "pums")])
def test_a_public_table_cannot_take_the_private_tables_name(name: str, public: str) -> None:
    with pytest.raises(pf.InvalidValueError, match=f"'{re.escape(name)}' names the private table"):
        session(name=name, tables={public: pl.DataFrame({"sex": [0]})})


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("SELECT COUNT(*) FROM data, other.people", "only the Session's private tables"),
        (
            "SELECT sex, COUNT(*) FROM data RIGHT OUTER JOIN (SELECT 1 AS sex) USING (sex) "
            "GROUP BY sex",
            "keys in metadata",
        ),
        ("SELECT COUNT(*) FROM data WHERE age > (SELECT 1)", "FROM (SELECT ...) or WITH"),
    ],
)
def test_a_join_or_subquery_that_is_no_row_source_says_what_to_write(text: str, hint: str) -> None:
    with pytest.raises(pf.SQLError, match=re.escape(hint)):
        session().sql(text)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT SUM(AGE) FROM (SELECT age * 100 AS AGE FROM data) AS s",
        'SELECT SUM(income) FROM (SELECT age AS "INCOME" FROM data) AS s',
        "SELECT SUM(income * 2) AS age FROM (SELECT income FROM data) AS s",
        "SELECT SUM(income) FROM (SELECT age, income FROM data) AS t(income, age)",
        "WITH t(income) AS (SELECT age FROM data) SELECT SUM(income) FROM t",
        "SELECT SUM(income) FROM data AS t(age, sex, income)",
        "SELECT SUM(a) FROM (SELECT age AS a, income AS a FROM data) AS s",
        "WITH t AS (SELECT * FROM data WHERE age > 80), t AS (SELECT * FROM data) "
        "SELECT COUNT(*) FROM t",
        "WITH a AS (SELECT * FROM b), b AS (SELECT * FROM data) SELECT COUNT(*) FROM a",
    ],
)
def test_a_name_a_subquery_would_make_ambiguous_is_refused(text: str) -> None:
    sess = session()
    with pytest.raises(pf.SQLError):
        sess.sql(text, rho=1.0)
    assert not sess.ledger


def test_a_subquery_may_respell_a_column_and_a_public_table_may_be_called_data() -> None:
    query = session().sql("SELECT SUM(AGE) FROM (SELECT Age AS AGE FROM data) AS s")
    (total,) = query.query.plan.aggregates
    assert total.column == "age"  # type: ignore[attr-defined]
    labels = pl.DataFrame({"sex": [0, 1], "label": ["f", "m"]})
    sess = session(name="PUMS.PUMS", tables={"data": labels})
    plan = sess.sql("SELECT COUNT(*) FROM PUMS.PUMS JOIN data USING (sex) WHERE label = 'f'")
    assert plan.query.plan.steps


@pytest.mark.parametrize(
    ("text", "construct"),
    [
        ("SELECT SUM(age) FROM (SELECT * REPLACE (age * 0 AS age) FROM data) AS s", "EXCEPT"),
        ("SELECT COUNT(*) FROM (SELECT * EXCEPT (income) FROM data) AS s", "EXCEPT"),
        (
            "WITH zones AS (SELECT sex, age AS zone FROM data) "
            "SELECT COUNT(*) FROM data JOIN zones USING (sex)",
            "JOIN 'zones'",
        ),
        ("SELECT uid, COUNT(*) FROM (SELECT pid AS uid FROM data) AS s GROUP BY uid", "GROUP BY"),
        ("SELECT CAST(pid AS VARCHAR) AS p, COUNT(*) FROM data GROUP BY p", "GROUP BY"),
    ],
)
def test_what_would_hide_or_copy_a_column_is_refused(text: str, construct: str) -> None:
    sess = session(tables={"zones": pl.DataFrame({"sex": [0, 1], "zone": ["a", "b"]})})
    with pytest.raises(pf.SQLError) as refused:
        sess.sql(text, rho=1.0, delta=1e-9)
    assert construct in refused.value.construct
    assert not sess.ledger


def test_an_integer_of_thousands_of_digits_is_refused_or_read_as_every_row() -> None:
    sess = session()
    with pytest.raises(pf.SQLError, match="64-bit"):
        sess.sql("SELECT COUNT(*) FROM data WHERE age > " + "1" * 5000)
    assert sess.sql("SELECT COUNT(*) AS n FROM data LIMIT " + "1" * 5000, rho=1.0).height == 1
