"""Strict SQL: malformed text is a syntax error before any charge, and every refusal is located.

sqlglot reads some malformed text leniently (an empty item in a list, a clause
with nothing after it, ``;;``): each of those must be a ``pf.SQLError`` with
nothing charged, not a query that runs. And every ``pf.SQLError`` a query
text can cause carries its line and column: the corpus test walks the
refusals of tests/api/test_sql_refusals.py, the conformance queries of
tests/sql_conformance.py and the malformed texts here.
"""

from __future__ import annotations

import pytest
import sql_conformance
from polars.testing import assert_frame_equal
from sql_setup import position_of, session
from test_sql_bigquery import session as bigquery_session
from test_sql_refusals import REFUSALS

import privframe as pf

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")


class Malformed:
    """A malformed text, the fragment its error must point at, and a piece of its message."""

    def __init__(self, sql: str, at: str, message: str, nth: int = 0) -> None:
        self.sql, self.at, self.message, self.nth = sql, at, message, nth

    def __repr__(self) -> str:
        return self.sql


MALFORMED = [
    # Read, run and charged by sqlglot's lenient grammar before.
    Malformed("SELECT , COUNT(*) FROM data", ",", "nothing comes before ','"),
    Malformed("SELECT COUNT(*) FROM data GROUP BY", "GROUP BY", "GROUP BY has nothing after it"),
    Malformed("SELECT SUM(amount,) FROM data", ",", "nothing follows ','"),
    Malformed(";;", ";", "';' ends an empty statement"),
    Malformed(";", ";", "';' ends an empty statement"),
    Malformed("SELECT COUNT(*) FROM data;;", ";", "';' ends an empty statement", nth=1),
    Malformed("SELECT COUNT(*), FROM data", ",", "nothing follows ','"),
    Malformed("SELECT COUNT(*) FROM data,", ",", "a table name is missing after ','"),
    Malformed("SELECT SUM(amount, 0, 10,) FROM data", ",", "nothing follows ','", nth=2),
    Malformed(
        "SELECT region, COUNT(*) FROM data GROUP BY region,", ",", "nothing follows ','", nth=1
    ),
    Malformed(
        "SELECT region, COUNT(*) FROM data GROUP BY , region", ",", "nothing comes before", nth=1
    ),
    Malformed("SELECT COUNT(*) AS n FROM data ORDER BY n,", ",", "nothing follows ','"),
    Malformed("SELECT COUNT(*) FROM data WHERE region IN ('north',)", ",", "nothing follows"),
    Malformed("SELECT COUNT(*) FROM data WHERE region IN ()", "()", "IN () lists no values"),
    Malformed("SELECT COUNT(*) FROM data WHERE ()", "()", "the parentheses are empty"),
    Malformed("SELECT COUNT() FROM data", "COUNT", "COUNT() has no argument"),
    # Refused before, with sqlglot's words; now in words that say what to do.
    Malformed("SELECT COUNT(*) AS n FROM data ORDER BY", "ORDER BY", "ORDER BY has nothing"),
    Malformed("SELECT COUNT(*) FROM data WHERE", "WHERE", "WHERE has nothing after it"),
    Malformed("SELECT COUNT(*) FROM data HAVING", "HAVING", "HAVING has nothing after it"),
    Malformed("SELECT COUNT(*) FROM data LIMIT", "LIMIT", "LIMIT has nothing after it"),
    Malformed("SELECT COUNT(*) FROM", "FROM", "a table name is missing after FROM"),
    Malformed(
        "SELECT region COUNT(*) FROM data GROUP BY region",
        "COUNT",
        "a comma is expected between select items",
    ),
    Malformed(
        "SELECT region, COUNT(*) n AVG(amount) FROM data GROUP BY region",
        "AVG",
        "a comma is expected between select items",
    ),
    Malformed("SELECT SUM() FROM data", "SUM", "SUM is given too few arguments"),
    Malformed("SELECT COUNT(*) FROM data AS", "AS", "AS has no name after it"),
    Malformed("SELECT COUNT(*) AS FROM data", "AS", "AS has no name after it"),
    Malformed("SELECT COUNT(*) FROM data WHERE age > 1 AND", "AND", "'AND' has no operand"),
    Malformed("SELECT COUNT(*) FROM data WHERE NOT", "NOT", "'NOT' has no operand"),
    Malformed("SELECT COUNT(*) FROM data WHERE age + > 1", "+", "'+' has no operand"),
    Malformed("SELECT CASE WHEN THEN 1 END, COUNT(*) FROM data", "1", "a WHEN of CASE"),
    Malformed("SELECT COUNT(*) FROM data WHERE (age > 1", "(", "is never closed", nth=1),
    Malformed("SELECT", "SELECT", "the select list is empty"),
    Malformed("SELECT FROM data", "FROM", "the select list is empty"),
    # Located now, without a position before.
    Malformed(
        "SELECT COUNT(*) FROM data WHERE region = 'north",
        "'north",
        "the string that starts at line 1, column 42 is never closed",
    ),
    Malformed("SELECT COUNT(*) FROM data /* all rows", "/*", "the comment that starts"),
    Malformed(
        "SELECT COUNT(*) FROM data; SELECT COUNT(*) FROM data",
        "SELECT",
        "a second statement starts",
        nth=1,
    ),
    Malformed("-- only a comment", "-", "there is no statement"),
]


@pytest.mark.parametrize("case", MALFORMED, ids=repr)
def test_malformed_text_is_a_located_syntax_error_and_charges_nothing(case: Malformed) -> None:
    sess = session()
    spent = sess.spent
    with pytest.raises(pf.SQLError) as info:
        sess.sql(case.sql, rho=0.1)
    err = info.value
    assert case.message in str(err)
    assert err.position == position_of(case.sql, case.at, case.nth), str(err)
    line, column = err.position
    assert f"line {line}, column {column}" in str(err)
    assert err.__context__ is None
    assert err.__cause__ is None
    assert sess.spent == spent
    assert sess.ledger == ()


@pytest.mark.parametrize(
    "text",
    [
        "SELECT COUNT(*) FROM data;",
        "SELECT COUNT(*) FROM data -- all rows",
        "SELECT COUNT(*) /* all */ FROM data",
        "SELECT region, COUNT(*) AS n FROM data GROUP BY region ORDER BY n DESC LIMIT 2",
        "SELECT COUNT(*) FROM data WHERE region IN ('north', 'south')",
    ],
)
def test_well_formed_text_still_runs(text: str) -> None:
    sess = session()
    sess.sql(text, rho=0.1)
    assert len(sess.ledger) == 1


# -- messages: what the user wrote, and what to do ------------------------------------------------


def test_a_function_not_allowed_in_an_aggregate_argument_is_named_not_the_bounds() -> None:
    text = "SELECT SUM(UPPER(region)) AS s FROM data"
    with pytest.raises(pf.SQLError) as info:
        session().sql(text)
    message = str(info.value)
    assert "UPPER" in info.value.construct
    assert "bounds" not in message
    assert "ABS" in message  # the functions that are allowed there
    assert info.value.position == position_of(text, "UPPER")


def test_a_function_is_named_as_written() -> None:
    # sqlglot reads STRING_AGG as its GROUP_CONCAT node: the error uses the user's word.
    text = "SELECT STRING_AGG(region, ',') FROM data"
    with pytest.raises(pf.SQLError) as info:
        session().sql(text)
    assert "STRING_AGG" in str(info.value)
    assert "GROUP_CONCAT" not in str(info.value)
    assert info.value.position == position_of(text, "STRING_AGG")


# -- refusals by the builder, located at what the SQL wrote ----------------------------------------


@pytest.mark.parametrize(
    ("text", "at", "message"),
    [
        ("SELECT COUNT(*) FROM data GROUP BY user_id", "user_id", "privacy unit"),
        (
            "SELECT COUNT(*) FROM data GROUP BY user_id + 1",
            "user_id",
            "privacy unit",
        ),
        (
            "SELECT COUNT(*) FROM data WHERE region = 'north' AND age = 'old'",
            "age",
            "comparing Int64 with String",
        ),
        ("SELECT DISTINCT region, COUNT(*) FROM data GROUP BY region", "DISTINCT", "DISTINCT"),
        ("SELECT SUM(region, 0, 1) FROM data", "SUM", "numeric"),
    ],
)
def test_builder_refusals_are_located(text: str, at: str, message: str) -> None:
    sess = session()
    with pytest.raises(pf.SQLError) as info:
        sess.sql(text, rho=0.1)
    assert message in str(info.value)
    assert info.value.position == position_of(text, at), str(info.value)
    assert sess.ledger == ()


@pytest.mark.parametrize(
    ("clauses", "at"),
    [("ORDER BY q + 1", "q + 1"), ("HAVING q + 1 = q ORDER BY item", "q + 1")],
)
def test_a_post_processing_refusal_is_located(clauses: str, at: str) -> None:
    # Arithmetic on APPROX_QUANTILES' list fails on the released types, checked before charging.
    text = (
        "SELECT item, APPROX_QUANTILES(quantity, 2, 0, 100) AS q FROM data GROUP BY item " + clauses
    )
    sess = bigquery_session(keyed=True)
    with pytest.raises(pf.SQLError, match="cannot run on the released columns") as info:
        sess.sql(text, rho=0.1)
    assert info.value.position == position_of(text, at)
    assert sess.ledger == ()


def test_metadata_keys_that_differ_only_in_case_are_refused_where_the_query_names_one() -> None:
    sess = session(
        metadata={"Ab": pf.Column(bounds=(0, 1)), "aB": pf.Column(bounds=(0, 2))},
    )
    text = "SELECT SUM(amount * 2) AS ab FROM data"
    with pytest.raises(pf.SQLError, match="differ only in case") as info:
        sess.sql(text, rho=0.1)
    assert info.value.position == position_of(text, "amount")  # the argument the bounds are for
    assert sess.ledger == ()


def test_very_deep_nesting_is_located() -> None:
    text = "SELECT COUNT(*) FROM data WHERE " + "(" * 3000 + "age > 1" + ")" * 3000
    with pytest.raises(pf.SQLError, match="nested too deeply") as info:
        session().sql(text)
    assert info.value.position == position_of(text, "(age")


# -- bounds in the call for an expression ----------------------------------------------------------


def test_bounds_in_the_call_for_an_expression_need_no_alias() -> None:
    # docs/sql.md: SUM(x * 2, 0, 200) with the bounds in the call. It released the same as
    # the aliased form, which was the only one accepted before.
    plain = session(seed=3).sql("SELECT SUM(amount * 2, 0, 200) FROM data", rho=0.5)
    aliased = session(seed=3).sql("SELECT SUM(amount * 2, 0, 200) AS s FROM data", rho=0.5)
    assert plain.columns == ["f0_"]  # an unnamed expression's name, as in BigQuery
    assert_frame_equal(plain.rename({"f0_": "s"}), aliased)


# -- the corpus: every SQLError a text causes has a position ---------------------------------------


def _conformance_refusal(case: sql_conformance.Case) -> pf.SQLError | None:
    sess = sql_conformance.session(case.dataset, seed=0, name=case.private_name())
    try:
        query = sess.parse_sql(case.text())  # parsed only: a query with OPTIONS is not run
        query.request(None if query.options is not None else sql_conformance.RHO, with_error=True)
    except pf.SQLError as err:
        return err
    return None


CORPUS = [
    *((f"refusals-{r.id}", r.sql) for r in REFUSALS),
    *((f"malformed-{i}", m.sql) for i, m in enumerate(MALFORMED)),
]


@pytest.mark.parametrize(("name", "text"), CORPUS, ids=[n for n, _ in CORPUS])
def test_every_refusal_of_the_corpus_has_a_position(name: str, text: str) -> None:
    sess = session()
    with pytest.raises(pf.SQLError) as info:
        sess.sql(text, rho=0.1)
    _located(info.value, text)


@pytest.mark.parametrize("case", sql_conformance.CASES, ids=[c.name for c in sql_conformance.CASES])
def test_every_conformance_refusal_has_a_position(case: sql_conformance.Case) -> None:
    err = _conformance_refusal(case)
    if err is not None:
        _located(err, case.text())


def _located(err: pf.SQLError, text: str) -> None:
    assert err.position is not None, f"{err.construct}: {err}"
    line, column = err.position
    lines = text.split("\n")
    assert 1 <= line <= len(lines), err.position
    assert 1 <= column <= len(lines[line - 1]) + 1, err.position
