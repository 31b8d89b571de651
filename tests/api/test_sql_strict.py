"""Strict SQL: malformed text is a syntax error before any charge, and every refusal is located.

sqlglot reads some malformed text leniently (an empty item in a list, a clause
with nothing after it, ``;;``): each of those must be a ``pf.SQLError`` with
nothing charged, not a query that runs. And every ``pf.SQLError`` a query
text can cause carries its line and column: the corpus test walks the
refusals of tests/api/test_sql_refusals.py, the conformance queries of
tests/sql_conformance.py and the malformed texts here.
"""

from __future__ import annotations

import polars as pl
import pytest
import sql_conformance
import sqlglot
from polars.testing import assert_frame_equal
from sql_setup import DATA, position_of, session
from test_sql_bigquery import session as bigquery_session
from test_sql_refusals import REFUSALS

import privframe as pf
from privframe.api.sql.dialect import Privframe

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


# Refused before in sqlglot's or Python's words, or at the wrong place.
MISPLACED = [
    # A malformed number: a bare ValueError from float() before (a 500 from the server).
    Malformed("SELECT COUNT(*) AS n FROM data WHERE amount > 1e", "1e", "'1e' is not a number"),
    Malformed("SELECT COUNT(*) AS n FROM data WHERE amount > 1.5e-", "1.5e", "'1.5e' is not a"),
    Malformed("SELECT COUNT(*) AS n FROM data LIMIT 2E", "2E", "write digits after its e"),
    Malformed("SELECT SUM(amount, 0, 1e) AS s FROM data", "1e", "'1e' is not a number"),
    # Numbers too large, refused where they are written.
    Malformed("SELECT COUNT(*) AS n FROM data WHERE amount > 1e999", "1e999", "largest float"),
    Malformed("SELECT COUNT(*) AS n FROM data WHERE amount > " + "1" * 5000, "1111", "64-bit"),
    Malformed(
        "SELECT COUNT(*) AS n FROM data WHERE amount > " + "1" * 5000 + ".5", "1111", "largest"
    ),
    # sqlglot joins adjacent strings into CONCAT: the comma is missing.
    Malformed(
        "SELECT COUNT(*) AS n FROM data WHERE region IN ('n' 's')",
        "'s'",
        "a comma is expected between a list's items",
    ),
    # sqlglot's "Required keyword: 'this' missing for <class ...Any>".
    Malformed("SELECT COUNT(*) AS n FROM data WHERE amount = ANY", "ANY", "'ANY' is incomplete"),
    # BETWEEN's parts, named where they are missing (not at the upper bound).
    Malformed(
        "SELECT COUNT(*) AS n FROM data WHERE amount BETWEEN AND 3",
        "AND",
        "BETWEEN's lower bound is missing",
    ),
    Malformed(
        "SELECT COUNT(*) AS n FROM data WHERE amount BETWEEN 1 3", "3", "BETWEEN's AND is missing"
    ),
    Malformed(
        "SELECT COUNT(*) AS n FROM data WHERE amount BETWEEN 1 AND",
        "AND",
        "BETWEEN's upper bound is missing",
    ),
    # The duplicate name is the second one: the item to rename.
    Malformed(
        "SELECT COUNT(*) AS n, COUNT(*) AS n FROM data", "n FROM", "would both be called 'n'"
    ),
]


def _refused_in_place(
    sess: pf.Session, case: Malformed, rho: float | None = 0.1, **kwargs: object
) -> pf.SQLError:
    """The SQLError of ``case``: its message, at its place, with nothing charged."""
    spent = sess.spent
    with pytest.raises(pf.SQLError) as info:
        sess.sql(case.sql, rho=rho, **kwargs)
    err = info.value
    assert case.message in str(err)
    assert err.position == position_of(case.sql, case.at, case.nth), str(err)
    line, column = err.position
    assert f"line {line}, column {column}" in str(err)
    assert err.__context__ is None
    assert err.__cause__ is None
    assert sess.spent == spent
    assert sess.ledger == ()
    return err


@pytest.mark.parametrize("case", MALFORMED, ids=repr)
def test_malformed_text_is_a_located_syntax_error_and_charges_nothing(case: Malformed) -> None:
    _refused_in_place(session(), case)


@pytest.mark.parametrize("case", MISPLACED, ids=lambda case: repr(case)[:80])
def test_a_refusal_is_worded_for_what_was_written_and_located_there(case: Malformed) -> None:
    message = str(_refused_in_place(session(), case))
    assert not any(word in message for word in PARSER_WORDS), message


@pytest.mark.parametrize(
    "value", ["1e-99999999", "0." + "0" * 5000 + "1"], ids=["huge exponent", "5000 digits"]
)
def test_an_options_number_too_long_to_read_exactly_is_refused_where_written(value: str) -> None:
    # Read as an exact fraction: 10**99999999 took minutes, 5000 digits raised a ValueError.
    text = (
        f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon={value}, delta=1e-6, "
        "max_groups_contributed=1) COUNT(*) AS n FROM data"
    )
    case = Malformed(text, value, "too many digits or too large an exponent")
    _refused_in_place(session(), case, rho=None)


def test_public_keys_of_another_type_are_refused_at_the_group_by_column() -> None:
    # Refused at COUNT before ("the function COUNT cannot run on this data").
    data = DATA.with_columns(pl.col("month").cast(pl.String))
    case = Malformed(
        "SELECT month, COUNT(*) AS n FROM data GROUP BY month",
        "month",
        "GROUP BY month cannot run on this data",
        nth=1,
    )
    message = str(_refused_in_place(session(data=data), case))
    assert "keys of type Int64 cannot match a column of type String" in message
    assert "COUNT" not in message
    assert not any(f"'{value}'" in message for value in data["month"].unique())


def test_a_with_error_name_clash_is_located_at_the_alias_that_clashes() -> None:
    # n's error column is n_std, which the second output is called: no position before.
    case = Malformed(
        "SELECT COUNT(*) AS n, SUM(amount) AS n_std FROM data",
        "n_std",
        "with_error=True adds the column 'n_std', the error of 'n'",
    )
    _refused_in_place(session(), case, with_error=True)


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
    *((f"misplaced-{i}", m.sql) for i, m in enumerate(MISPLACED)),
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


# -- garbled text: never sqlglot's words, never another exception ---------------------------------

# What only a parser's internals say: sqlglot's class names, its error templates.
PARSER_WORDS = ("<class", "Required keyword", "sqlglot", "Expecting", "Unexpected token")


def _garbled(text: str) -> list[str]:
    """``text`` cut after each of its tokens, and with each of its tokens left out."""
    tokens = sqlglot.tokenize(text, read=Privframe)
    cut = [text[: token.end + 1] for token in tokens[:-1]]
    left_out = [text[: token.start] + text[token.end + 1 :] for token in tokens]
    return cut + left_out


def test_garbled_conformance_queries_are_refused_in_plain_words_at_a_place() -> None:
    # Every published query of tests/sql_conformance.py, cut short and with a token left out
    # (about 5,000 texts, parsed only: a few seconds).
    wrong = []
    for case in sql_conformance.CASES:
        sess = sql_conformance.session(case.dataset, seed=0, name=case.private_name())
        for text in _garbled(case.text()):
            try:
                sess.parse_sql(text)
            except pf.SQLError as err:
                if err.position is None or any(word in str(err) for word in PARSER_WORDS):
                    wrong.append((text, str(err)))
            except Exception as err:  # any other exception is the failure
                wrong.append((text, repr(err)))
    assert wrong == [], f"{len(wrong)} texts, e.g. {wrong[:3]}"
