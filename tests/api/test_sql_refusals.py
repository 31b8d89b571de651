"""SQL refusals: each refused construct is a ``pf.SQLError`` naming it and where it is.

A refusal names the construct and its position (line and column, 1-based, in
``err.position`` and in the message), says what to write instead, and charges
nothing.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import polars as pl
import pytest
from sql_setup import (
    DATA,
    META,
    position_of,
    session,
    small_session,
)

import privframe as pf

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")


# -- refusals -------------------------------------------------------------------------------


class Refusal(NamedTuple):
    id: str
    sql: str
    construct: str  # a piece of err.construct (case-insensitive)
    at: str | None  # where the position must point: the start of this fragment
    within: str | None = None  # or: somewhere inside this fragment
    message: str = ""  # a piece of the message (the hint)
    nth: int = 0  # which occurrence of the fragment
    named: bool = True  # the message repeats err.construct


REFUSALS = [
    Refusal("select_star", "SELECT * FROM data", "SELECT *", "*", message="name the group"),
    Refusal(
        "ungrouped_column",
        "SELECT region, age, COUNT(*) FROM data GROUP BY region",
        "age outside GROUP BY",
        "age",
        message="group by it or aggregate it",
    ),
    Refusal(
        "window_lag",
        "SELECT region, LAG(amount) OVER (ORDER BY age) AS prev FROM data GROUP BY region",
        "window",
        "LAG",
    ),
    Refusal(
        "window_aggregate",
        "SELECT SUM(amount) OVER (PARTITION BY region) AS s FROM data",
        "window",
        "SUM",
    ),
    Refusal("window_row_number", "SELECT ROW_NUMBER() OVER () AS r FROM data", "window", "ROW"),
    Refusal(
        "window_clause",
        "SELECT COUNT(*) AS n FROM data WINDOW w AS (PARTITION BY region)",
        "WINDOW",
        None,
        within="w AS (PARTITION BY region)",
    ),
    Refusal("qualify", "SELECT COUNT(*) AS n FROM data QUALIFY n > 5", "QUALIFY", None, "n > 5"),
    Refusal(
        "subquery_where",
        "SELECT COUNT(*) FROM data WHERE age > (SELECT AVG(age) FROM data)",
        "subquery",
        None,
        within="(SELECT AVG(age) FROM data)",
    ),
    Refusal(
        "subquery_in",
        "SELECT COUNT(*) FROM data WHERE region IN (SELECT region FROM zones)",
        "subquery",
        None,
        within="(SELECT region FROM zones)",
    ),
    Refusal(
        "aggregating_subquery_in_from",
        "SELECT COUNT(*) FROM (SELECT region, COUNT(*) AS n FROM data GROUP BY region) AS t",
        "COUNT(*) inside a subquery",
        "COUNT(*) AS n",
        message="aggregate or combine private rows",
    ),
    Refusal(
        "subquery_select",
        "SELECT (SELECT 1) AS one, COUNT(*) FROM data",
        "subquery",
        None,
        within="(SELECT 1)",
    ),
    Refusal(
        "subquery_join",
        "SELECT COUNT(*) FROM data d JOIN (SELECT * FROM zones) z ON d.region = z.region",
        "subquery",
        None,
        within="(SELECT * FROM zones) z",
    ),
    Refusal(
        "exists",
        "SELECT COUNT(*) FROM data WHERE EXISTS (SELECT 1 FROM zones)",
        "EXISTS",
        None,
        within="EXISTS (SELECT 1 FROM zones)",
    ),
    Refusal(
        "window_in_a_with_table",
        "WITH t AS (SELECT amount, ROW_NUMBER() OVER (PARTITION BY user_id) AS r FROM data) "
        "SELECT COUNT(*) FROM t",
        "window",
        None,
        within="ROW_NUMBER() OVER (PARTITION BY user_id)",
    ),
    Refusal(
        "union",
        "SELECT COUNT(*) FROM data UNION SELECT COUNT(*) FROM data",
        "UNION",
        None,
        within="SELECT COUNT(*) FROM data UNION SELECT COUNT(*) FROM data",
        message="only SELECT",
    ),
    Refusal(
        "union_all",
        "SELECT COUNT(*) FROM data UNION ALL SELECT COUNT(*) FROM data",
        "UNION",
        None,
        within="SELECT COUNT(*) FROM data UNION ALL SELECT COUNT(*) FROM data",
    ),
    Refusal(
        "intersect",
        "SELECT COUNT(*) FROM data INTERSECT SELECT COUNT(*) FROM data",
        "INTERSECT",
        None,
        within="SELECT COUNT(*) FROM data INTERSECT SELECT COUNT(*) FROM data",
    ),
    Refusal(
        "except",
        "SELECT COUNT(*) FROM data EXCEPT SELECT COUNT(*) FROM data",
        "EXCEPT",
        None,
        within="SELECT COUNT(*) FROM data EXCEPT SELECT COUNT(*) FROM data",
    ),
    Refusal("select_distinct", "SELECT DISTINCT region FROM data", "SELECT DISTINCT", None),
    Refusal(
        "select_distinct_aggregate", "SELECT DISTINCT COUNT(*) FROM data", "SELECT DISTINCT", None
    ),
    Refusal(
        "two_statements",
        "SELECT COUNT(*) FROM data; SELECT COUNT(*) FROM data",
        "statements",
        "SELECT",
        message="exactly one SELECT",
        nth=1,
        named=False,
    ),
    Refusal(
        "no_statement",
        "-- just a comment",
        "statements",
        None,
        message="exactly one",
        named=False,
    ),
    Refusal(
        "insert", "INSERT INTO data VALUES (1)", "INSERT", "data", message="only SELECT queries"
    ),
    Refusal("update", "UPDATE data SET age = 1", "UPDATE", "data", message="only SELECT queries"),
    Refusal("delete", "DELETE FROM data", "DELETE", "data", message="only SELECT queries"),
    Refusal("create", "CREATE TABLE x (a INT)", "CREATE", None, within="x (a INT)"),
    Refusal("drop", "DROP TABLE data", "DROP", "data", message="only SELECT queries"),
    Refusal("alter", "ALTER TABLE data ADD COLUMN x INT", "ALTER", None, within="data ADD COLUMN"),
    Refusal(
        "from_other_table",
        "SELECT COUNT(*) FROM users",
        "FROM users",
        "users",
        message="private table is called 'data'",
    ),
    Refusal("from_public_table", "SELECT COUNT(*) FROM zones", "FROM zones", "zones"),
    Refusal("from_schema_data", "SELECT COUNT(*) FROM other.data", "FROM other.data", "other"),
    Refusal("no_from", "SELECT COUNT(*)", "without FROM", "COUNT", message="FROM data"),
    Refusal(
        "join_unregistered",
        "SELECT COUNT(*) AS n FROM data d JOIN users u ON d.region = u.region",
        "JOIN 'users'",
        "users",
        message="registered: ['seasons', 'zones']",
    ),
    Refusal(
        "right_join",
        "SELECT COUNT(*) AS n FROM data d RIGHT JOIN zones z ON d.region = z.region",
        "RIGHT JOIN",
        "zones",
    ),
    Refusal(
        "full_join",
        "SELECT COUNT(*) AS n FROM data d FULL JOIN zones z ON d.region = z.region",
        "FULL",
        "zones",
    ),
    Refusal(
        "full_outer_join",
        "SELECT COUNT(*) AS n FROM data d FULL OUTER JOIN zones z ON d.region = z.region",
        "FULL OUTER JOIN",
        "zones",
    ),
    Refusal("cross_join", "SELECT COUNT(*) AS n FROM data d CROSS JOIN zones z", "CROSS", "zones"),
    Refusal(
        "semi_join",
        "SELECT COUNT(*) AS n FROM data d SEMI JOIN zones z ON d.region = z.region",
        "SEMI",
        "zones",
    ),
    Refusal(
        "comma_join", "SELECT COUNT(*) AS n FROM data d, zones z", "without ON or USING", "zones"
    ),
    Refusal(
        "natural_join",
        "SELECT COUNT(*) AS n FROM data d NATURAL JOIN zones z",
        "NATURAL JOIN",
        "zones",
    ),
    Refusal(
        "join_different_columns",
        "SELECT COUNT(*) AS n FROM data d JOIN zones z ON d.region = z.zone",
        "join condition",
        "d.region",
        message="same name",
    ),
    Refusal(
        "join_not_equal",
        "SELECT COUNT(*) AS n FROM data d JOIN zones z ON d.region <> z.region",
        "join condition",
        "d.region",
    ),
    Refusal(
        "join_or",
        "SELECT COUNT(*) AS n FROM data d JOIN zones z ON d.region = z.region OR d.age > 3",
        "join condition",
        "d.region",
    ),
    Refusal(
        "join_extra_predicate",
        "SELECT COUNT(*) AS n FROM data d JOIN zones z ON d.region = z.region AND d.age > 3",
        "join condition d.age > 3",
        "d.age",
    ),
    Refusal(
        "join_literal",
        "SELECT COUNT(*) AS n FROM data d JOIN zones z ON d.region = 'north'",
        "join condition",
        "d.region",
    ),
    Refusal(
        "count_distinct_non_unit",
        "SELECT COUNT(DISTINCT region) FROM data",
        "COUNT(DISTINCT region)",
        "COUNT",
        message="only COUNT(DISTINCT user_id)",
    ),
    Refusal(
        "count_distinct_two_columns",
        "SELECT COUNT(DISTINCT user_id, region) FROM data",
        "COUNT(DISTINCT user_id, region)",
        "COUNT",
    ),
    Refusal("sum_distinct", "SELECT SUM(DISTINCT amount) FROM data", "SUM(DISTINCT ...)", "SUM"),
    Refusal("avg_distinct", "SELECT AVG(DISTINCT amount) FROM data", "AVG(DISTINCT ...)", "AVG"),
    Refusal(
        "aggregate_of_aggregate",
        "SELECT SUM(COUNT(*)) FROM data",
        "inside SUM",
        "COUNT",
        message="aggregate private rows twice",
    ),
    Refusal(
        "aggregate_times_ungrouped_column",
        "SELECT COUNT(*) * age AS x FROM data",
        "age outside GROUP BY",
        "age",
        message="group by it or aggregate it",
    ),
    Refusal(
        "group_by_aggregate",
        "SELECT COUNT(*) AS n FROM data GROUP BY COUNT(*)",
        "GROUP BY an aggregate",
        "COUNT",
        nth=1,
    ),
    Refusal(
        "group_by_position_out_of_range",
        "SELECT region, COUNT(*) FROM data GROUP BY 5",
        "GROUP BY 5",
        "5",
        message="no such select-list position",
    ),
    Refusal(
        "group_by_rollup",
        "SELECT region, COUNT(*) AS n FROM data GROUP BY ROLLUP (region)",
        "ROLLUP",
        None,
        within="ROLLUP (region)",
    ),
    Refusal(
        "group_by_cube",
        "SELECT region, COUNT(*) AS n FROM data GROUP BY CUBE (region)",
        "CUBE",
        None,
        within="CUBE (region)",
    ),
    Refusal(
        "coalesce",
        "SELECT COUNT(*) FROM data WHERE COALESCE(age, 0) > 3",
        "COALESCE",
        "COALESCE",
        message="supported constructs",
    ),
    Refusal("upper", "SELECT COUNT(*) FROM data WHERE UPPER(region) = 'N'", "UPPER", "UPPER"),
    Refusal("random", "SELECT COUNT(*) FROM data WHERE RANDOM() > 0.5", "RAND", "RANDOM"),
    Refusal("ln", "SELECT COUNT(*) FROM data WHERE LN(amount) > 3", "LN", "LN"),
    Refusal("exp", "SELECT COUNT(*) FROM data WHERE EXP(amount) > 3", "EXP", "EXP"),
    Refusal("round", "SELECT COUNT(*) FROM data WHERE ROUND(amount) > 3", "ROUND", "ROUND"),
    Refusal("length", "SELECT COUNT(*) FROM data WHERE LENGTH(region) > 3", "LENGTH", "LENGTH"),
    Refusal(
        "substring",
        "SELECT COUNT(*) FROM data WHERE SUBSTRING(region, 1, 2) = 'no'",
        "SUBSTRING",
        None,
        within="SUBSTRING(region, 1, 2)",
    ),
    Refusal(
        "concat",
        "SELECT COUNT(*) FROM data WHERE CONCAT(region, 'x') = 'northx'",
        "CONCAT",
        "CONCAT",
    ),
    Refusal("nullif", "SELECT COUNT(*) FROM data WHERE NULLIF(age, 0) > 1", "NULLIF", "NULLIF"),
    Refusal(
        "greatest", "SELECT COUNT(*) FROM data WHERE GREATEST(age, 30) > 40", "GREATEST", "GREATEST"
    ),
    Refusal("now", "SELECT COUNT(*) FROM data WHERE NOW() > 0", "function", "NOW"),
    Refusal("udf", "SELECT COUNT(*) FROM data WHERE my_udf(amount) > 3", "function", "my_udf"),
    Refusal(
        "function_in_group_by",
        "SELECT UPPER(region), COUNT(*) FROM data GROUP BY UPPER(region)",
        "UPPER",
        "UPPER",
        nth=1,
    ),
    Refusal(
        "function_in_aggregate",
        "SELECT SUM(LN(amount)) AS doubled FROM data",
        "LN",
        "LN",
    ),
    Refusal(
        "function_in_having",
        "SELECT region, COUNT(*) AS n FROM data GROUP BY region HAVING UPPER(region) = 'A'",
        "UPPER",
        "UPPER",
    ),
    Refusal(
        "like_inner_percent",
        "SELECT COUNT(*) FROM data WHERE region LIKE 'n%th'",
        "LIKE pattern 'n%th'",
        "region",
        message="'text%'",
    ),
    Refusal(
        "like_underscore",
        "SELECT COUNT(*) FROM data WHERE region LIKE 'n_rth'",
        "LIKE pattern 'n_rth'",
        "region",
    ),
    Refusal(
        "like_leading_underscore",
        "SELECT COUNT(*) FROM data WHERE region LIKE '_orth%'",
        "LIKE pattern '_orth%'",
        "region",
    ),
    Refusal(
        "like_column_pattern",
        "SELECT COUNT(*) FROM data WHERE region LIKE zone",
        "COLUMN",
        "zone",
        message="only literal values",
    ),
    Refusal("ilike", "SELECT COUNT(*) FROM data WHERE region ILIKE 'n%'", "ILIKE", "region"),
    Refusal("regexp", "SELECT COUNT(*) FROM data WHERE region REGEXP 'n.*'", "REGEXP", "region"),
    Refusal(
        "similar_to", "SELECT COUNT(*) FROM data WHERE region SIMILAR TO 'n%'", "SIMILAR", "region"
    ),
    Refusal(
        "is_true",
        "SELECT COUNT(*) FROM data WHERE (age > 3) IS TRUE",
        "IS with a value other than NULL",
        "age",
        message="write = or <>",
    ),
    Refusal(
        "is_false",
        "SELECT COUNT(*) FROM data WHERE (age > 3) IS FALSE",
        "IS with a value other than NULL",
        "age",
    ),
    Refusal(
        "in_with_column",
        "SELECT COUNT(*) FROM data WHERE age IN (1, month)",
        "COLUMN",
        "month",
        message="only literal values",
    ),
    Refusal(
        "between_column",
        "SELECT COUNT(*) FROM data WHERE age BETWEEN 1 AND month",
        "COLUMN",
        "month",
    ),
    Refusal(
        "cast_date",
        "SELECT COUNT(*) FROM data WHERE CAST(age AS DATE) IS NULL",
        "CAST to DATE",
        "CAST",
        message="cast to one of",
    ),
    Refusal(
        "cast_timestamp",
        "SELECT COUNT(*) FROM data WHERE CAST(age AS TIMESTAMP) IS NULL",
        "CAST to TIMESTAMP",
        "CAST",
    ),
    Refusal(
        "sum_without_bounds",
        "SELECT SUM(month) FROM data",
        "SUM",
        "month",
        message="metadata={'month': pf.Column(bounds=",
        named=False,  # see test_the_message_states_the_position
    ),
    Refusal(
        "avg_without_bounds",
        "SELECT region, AVG(user_id) AS a FROM data GROUP BY region",
        "AVG",
        "user_id",
        message="pf.Column(bounds=",
        named=False,  # see test_the_message_states_the_position
    ),
    Refusal(
        "median_without_bounds",
        "SELECT MEDIAN(month) FROM data",
        "MEDIAN",
        "month",
        message="metadata",
        named=False,  # see test_the_message_states_the_position
    ),
    Refusal(
        "percentile_without_bounds",
        "SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY month) AS m FROM data",
        "PERCENTILE_CONT",
        "month",
        message="metadata",
        named=False,  # see test_the_message_states_the_position
    ),
    Refusal(
        "expression_without_alias",
        "SELECT SUM(amount * 2) FROM data",
        "SUM",
        "amount * 2",
        message="alias",
        named=False,  # see test_the_message_states_the_position
    ),
    Refusal(
        "expression_alias_without_bounds",
        "SELECT SUM(amount * 2) AS twice FROM data",
        "SUM",
        "amount * 2",
        message="metadata={'twice': pf.Column(bounds=",
        named=False,  # see test_the_message_states_the_position
    ),
    Refusal(
        "quantile_without_alias",
        "SELECT MEDIAN(amount * 2) FROM data",
        "MEDIAN",
        "amount * 2",
        message="alias",
        named=False,  # see test_the_message_states_the_position
    ),
    Refusal(
        "having_unknown_column",
        "SELECT region, COUNT(*) AS n FROM data GROUP BY region HAVING age > 3",
        "the column 'age'",
        "age >",
        message="['n', 'region']",
    ),
    Refusal(
        "order_by_unknown_column",
        "SELECT region, COUNT(*) AS n FROM data GROUP BY region ORDER BY amount DESC",
        "the column 'amount'",
        "amount DESC",
    ),
    Refusal(
        "order_by_position_out_of_range",
        "SELECT region, COUNT(*) AS n FROM data GROUP BY region ORDER BY 3",
        "ORDER BY 3",
        "3",
        message="no such select-list position",
    ),
    Refusal(
        "limit_negative",
        "SELECT region, COUNT(*) AS n FROM data GROUP BY region LIMIT -1",
        "LIMIT -1",
        None,
        within="-1",
        message="non-negative integer",
    ),
    Refusal(
        "limit_fraction",
        "SELECT region, COUNT(*) AS n FROM data GROUP BY region LIMIT 1.5",
        "LIMIT 1.5",
        "1.5",
    ),
    Refusal(
        "limit_string",
        "SELECT region, COUNT(*) AS n FROM data GROUP BY region LIMIT '2'",
        "LIMIT '2'",
        "'2'",
    ),
    Refusal(
        "offset_negative",
        "SELECT region, COUNT(*) AS n FROM data GROUP BY region LIMIT 2 OFFSET -1",
        "OFFSET -1",
        None,
        within="-1",
    ),
    Refusal(
        "unknown_table_qualifier",
        "SELECT COUNT(*) AS n FROM data WHERE x.age > 3",
        "the table 'x'",
        "x.age",
        message="not in FROM or JOIN",
    ),
    Refusal("mean_two_arguments", "SELECT MEAN(amount, age) FROM data", "function", "MEAN"),
]


def _check_refusal(err: pf.SQLError, refusal: Refusal) -> None:
    text = refusal.sql
    assert refusal.construct.lower() in err.construct.lower(), err.construct
    assert refusal.message in str(err)
    if refusal.at is not None:
        assert err.position == position_of(text, refusal.at, refusal.nth), str(err)
    elif refusal.within is not None:
        assert err.position is not None, str(err)
        start = position_of(text, refusal.within, refusal.nth)
        assert err.position[0] == start[0]
        assert start[1] <= err.position[1] < start[1] + len(refusal.within), err.position
    else:
        assert err.position is None or (1, 1) <= err.position <= position_of(text, text[-1])
    if refusal.named:
        assert err.construct in str(err)
        if err.position is not None:
            line, column = err.position
            assert f"line {line}, column {column}" in str(err)


@pytest.mark.parametrize("refusal", REFUSALS, ids=[r.id for r in REFUSALS])
def test_refused_with_construct_and_position(refusal: Refusal) -> None:
    sess = session()
    before = sess.remaining
    with pytest.raises(pf.SQLError) as info:
        sess.sql(refusal.sql)
    _check_refusal(info.value, refusal)
    with pytest.raises(pf.SQLError):
        sess.sql(refusal.sql, rho=0.1)  # the same with a budget: refused, not charged
    assert sess.remaining == before
    assert sess.ledger == ()


def test_sql_error_is_a_privframe_value_error() -> None:
    assert issubclass(pf.SQLError, pf.PrivframeError)
    assert issubclass(pf.SQLError, ValueError)


def test_positions_on_later_lines() -> None:
    text = (
        "SELECT region,\n"
        "       COUNT(*) AS n\n"
        "FROM data\n"
        "WHERE UPPER(region) = 'NORTH'\n"
        "GROUP BY region"
    )
    with pytest.raises(pf.SQLError, match="line 4, column 7") as info:
        session().sql(text)
    assert info.value.position == (4, 7)
    assert info.value.construct == "the function UPPER"


def test_window_position_on_a_later_line() -> None:
    text = "SELECT region,\n  LAG(amount) OVER (ORDER BY age) AS prev\nFROM data GROUP BY region"
    with pytest.raises(pf.SQLError) as info:
        session().sql(text)
    assert info.value.position == (2, 3)


@pytest.mark.parametrize(
    "text",
    [
        "SELEC COUNT(*) FROM data",
        "SELECT COUNT(* FROM data",
        "SELECT COUNT(*) FROM data WHERE",
        "SELECT COUNT(*) FROM data WHERE age >",
        "SELECT region, COUNT(*) FROM data GROUP region",
    ],
)
def test_syntax_errors_have_positions(text: str) -> None:
    sess = session()
    with pytest.raises(pf.SQLError, match="does not parse") as info:
        sess.sql(text, rho=0.1)
    err = info.value
    assert err.construct == "syntax"
    assert err.position is not None
    assert err.position[0] == 1
    assert 1 <= err.position[1] <= len(text) + 1
    assert f"line 1, column {err.position[1]}" in str(err)
    assert sess.ledger == ()


@pytest.mark.parametrize("text", [None, 3, b"SELECT COUNT(*) FROM data", "", "   \n\t"])
def test_non_string_or_empty_sql(text: Any) -> None:
    sess = session()
    with pytest.raises(pf.InvalidArgumentError, match="non-empty SQL string"):
        sess.sql(text)
    with pytest.raises(pf.InvalidArgumentError):
        sess.sql(text, rho=0.1)
    assert sess.ledger == ()


def test_count_distinct_needs_a_privacy_unit() -> None:
    sess = pf.Session(DATA, None, pf.zCDP(1.0), metadata=META)
    with pytest.raises(pf.SQLError, match=r"COUNT\(DISTINCT <privacy unit>\)") as info:
        sess.sql("SELECT COUNT(DISTINCT user_id) FROM data")
    assert info.value.position == (1, 8)


def test_cast_to_boolean_is_refused_at_parse() -> None:
    # check_types refuses every cast to Boolean, so the SQL front end refuses it when
    # parsing rather than at release.
    sess = session()
    with pytest.raises(pf.SQLError, match="CAST to BOOLEAN"):
        sess.sql("SELECT COUNT(*) FROM data WHERE CAST(age AS BOOLEAN)")


@pytest.mark.parametrize("name", ["NOW", "my_udf"])
def test_an_unknown_function_is_named(name: str) -> None:
    # A function sqlglot does not know (exp.Anonymous) is named by its own name.
    with pytest.raises(pf.SQLError) as info:
        session().sql(f"SELECT COUNT(*) FROM data WHERE {name}() > 0")
    assert name.lower() in info.value.construct.lower()


def test_a_join_condition_naming_an_unknown_table_is_refused() -> None:
    # Join conditions are resolved against FROM/JOIN like every other column reference.
    with pytest.raises(pf.SQLError, match="nope"):
        session().sql("SELECT COUNT(*) FROM data d JOIN zones z ON d.region = nope.region")


def test_tablesample_is_refused() -> None:
    # TABLESAMPLE hangs on the Table node, not on the Select: ignoring it would release the
    # count of all rows.
    with pytest.raises(pf.SQLError, match="TABLESAMPLE"):
        session().sql("SELECT COUNT(*) FROM data TABLESAMPLE (10 PERCENT)")


def test_group_by_with_rollup_is_refused() -> None:
    # MySQL's WITH ROLLUP is refused like ROLLUP (region), not released without its total row.
    with pytest.raises(pf.SQLError, match="ROLLUP"):
        session().sql("SELECT region, COUNT(*) AS n FROM data GROUP BY region WITH ROLLUP")


def test_fetch_first_is_an_sql_error() -> None:
    # FETCH FIRST keeps its count in another place than LIMIT: it is an SQLError, not a crash.
    with pytest.raises(pf.SQLError):
        session().sql("SELECT COUNT(*) AS n FROM data FETCH FIRST 2 ROWS ONLY")


def test_an_aggregate_filter_clause_is_named() -> None:
    # COUNT(*) FILTER (WHERE ...) is named as the FILTER clause, not as arithmetic on aggregates.
    with pytest.raises(pf.SQLError) as info:
        session().sql("SELECT COUNT(*) FILTER (WHERE age > 30) AS n FROM data")
    assert "FILTER" in info.value.construct.upper()


@pytest.mark.parametrize("group", ["region", "1"])
def test_an_alias_shadowing_a_group_column_is_not_called_a_group_by_aggregate(group: str) -> None:
    # GROUP BY region (or GROUP BY 1) with `COUNT(*) AS region`: the user grouped by a column,
    # so the message is about the alias clash, not "GROUP BY an aggregate".
    with pytest.raises(pf.PrivframeError) as info:
        session().sql(f"SELECT region, COUNT(*) AS region FROM data GROUP BY {group}")
    assert "GROUP BY an aggregate" not in str(info.value)


def test_tokenizer_errors_are_sql_syntax_errors() -> None:
    # An unterminated string fails in sqlglot's tokenizer, not its parser: still a pf.SQLError.
    with pytest.raises(pf.SQLError) as info:
        session().sql("SELECT COUNT(*) FROM data WHERE region = 'unterminated")
    assert info.value.construct == "syntax"


@pytest.mark.parametrize(
    "text",
    [
        "SELECT SUM(month) FROM data",
        "SELECT SUM(amount * 2) FROM data",
        "SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY month) AS m FROM data",
    ],
)
def test_the_message_states_the_position(text: str) -> None:
    # Like every other refusal, these state "at line L, column C" in the message as well as
    # in err.position.
    with pytest.raises(pf.SQLError) as info:
        session().sql(text)
    assert info.value.position is not None
    line, column = info.value.position
    assert f"line {line}, column {column}" in str(info.value)


def test_a_public_table_of_the_wrong_type_names_the_tables_argument() -> None:
    # The error names the Session argument the user passed, `tables`.
    with pytest.raises(pf.InvalidArgumentError, match="tables"):
        pf.Session(DATA, "user_id", pf.zCDP(1.0), tables={"zones": [1, 2]})


def test_median_distinct_is_named() -> None:
    # MEDIAN(DISTINCT ...) is named like SUM(DISTINCT ...), not as missing public bounds.
    with pytest.raises(pf.SQLError) as info:
        session().sql("SELECT MEDIAN(DISTINCT amount) FROM data")
    assert "DISTINCT" in info.value.construct


def test_null_in_an_in_list_is_refused() -> None:
    sess = small_session(pl.DataFrame({"u": [1], "g": ["a"], "x": [1.0]}))
    for text in (
        "SELECT COUNT(*) FROM data WHERE g NOT IN ('a', NULL)",
        "SELECT COUNT(*) FROM data WHERE g IN ('a', NULL)",
    ):
        with pytest.raises(pf.SQLError, match="IS NULL"):
            sess.sql(text)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT g, COUNT(*) FROM data GROUP BY 1.5",
        "SELECT g, COUNT(*) AS n FROM data GROUP BY g ORDER BY 1.5",
        "SELECT COUNT(*) FROM data WHERE x > -'a'",
        "SELECT COUNT(*) FROM data WHERE " + "(" * 3000 + "x > 1" + ")" * 3000,
    ],
)
def test_malformed_sql_gets_an_sql_error(text: str) -> None:
    with pytest.raises(pf.SQLError):
        small_session(pl.DataFrame({"u": [1], "g": ["a"], "x": [1.0]})).sql(text)
