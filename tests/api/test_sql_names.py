"""SQL names and the errors about them: each error names the real cause, where it is.

Column, table and alias names follow SQL's rules: an unquoted name matches
regardless of case (refused as ambiguous when two columns differ only in
case), a quoted one matches exactly. A name that matches nothing is reported
as missing, with the nearest name; a double-quoted string is reported as the
column it is in SQL; a misspelt keyword is located at the misspelt word. Every
error is a ``pf.SQLError``, charges nothing, quotes no data value and carries
no polars or sqlglot exception as its cause or context.
"""

from __future__ import annotations

import polars as pl
import pytest
from sql_setup import position_of

import privframe as pf
from privframe.api.sql import SQLQuery
from privframe.plan.aggregates import CountDistinct

# Distinctive values that appear in no SQL text below: no message may contain them.
GENRES = ["drama", "comedy"]
SECRETS = ["Hortensia Quibble", "Zanzibar Flint", "Octavia Marsh"]
DATA = pl.DataFrame(
    {
        "u": [1, 2, 3],
        "genre": ["drama", "comedy", "drama"],
        "rating": [1.0, 5.0, 3.0],
        "Region": ["north", "south", "north"],
        "viewer": SECRETS,
    }
)
ZONES = pl.DataFrame({"Region": ["north", "south"], "zone": ["cold", "warm"]})


def session(data: pl.DataFrame = DATA, **metadata: pf.Column) -> pf.Session:
    return pf.Session(
        data,
        "u",
        pf.zCDP(rho=1.0, delta=1e-6),
        metadata={
            "rating": pf.Column(bounds=(0, 10)),
            "genre": pf.Column(keys=GENRES),
            "Region": pf.Column(keys=["north", "south"]),
            "zone": pf.Column(keys=["cold", "warm"]),
            **metadata,
        },
        contributions=pf.Bound(max_groups=1, max_rows_per_group=1),
        tables={"zones": ZONES},
    )


def refused(text: str, sess: pf.Session | None = None) -> pf.SQLError:
    """The SQLError ``text`` raises, released with a budget; checks nothing was charged."""
    sess = sess or session()
    with pytest.raises(pf.SQLError) as info:
        sess.sql(text, rho=0.1)
    assert sess.ledger == ()
    assert sess.spent.rho == 0
    return info.value


# -- a name that does not exist ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "typo", "nearest"),
    [
        ("SELECT AVG(ratng) FROM data", "ratng", "rating"),
        ("SELECT SUM(ratng) AS total FROM data", "ratng", "rating"),
        ("SELECT MEDIAN(ratng) FROM data", "ratng", "rating"),
        ("SELECT COUNT(ratng) AS n FROM data", "ratng", "rating"),
        ("SELECT COUNT(*) FROM data WHERE ratng > 2", "ratng", "rating"),
        ("SELECT genr, COUNT(*) FROM data GROUP BY genr", "genr", "genre"),
        ("SELECT COUNT(*) FROM data d WHERE d.ratng > 2", "ratng", "rating"),
        # With bounds for the alias, the column inside the expression is still checked.
        ("SELECT SUM(ratng * 2) AS doubled FROM data", "ratng", "rating"),
    ],
)
def test_a_misspelt_column_is_named_with_the_nearest_name(
    text: str, typo: str, nearest: str
) -> None:
    err = refused(text, session(doubled=pf.Column(bounds=(0, 20))))
    message = str(err)
    assert f"the column {typo!r} does not exist" in message
    assert f"did you mean {nearest!r}?" in message
    assert "bounds" not in message
    assert err.position == position_of(text, typo, text.count(typo) - 1)


def test_a_missing_column_with_no_near_name_lists_the_columns() -> None:
    err = refused("SELECT SUM(xyzzy) FROM data")
    assert "['Region', 'genre', 'rating', 'u', 'viewer']" in str(err)


def test_a_joined_tables_columns_exist_only_once_it_is_joined() -> None:
    err = refused("SELECT zone, COUNT(*) FROM data GROUP BY zone")
    assert "'zone' does not exist in the data" in str(err)
    joined = session().sql(
        "SELECT zone, COUNT(*) FROM data JOIN zones USING (Region) GROUP BY zone"
    )
    assert joined.query.plan.group_by == ("zone",)


def test_an_unknown_name_in_having_is_named_among_the_released_columns() -> None:
    err = refused("SELECT genre, COUNT(*) AS n FROM data GROUP BY genre HAVING nn > 1")
    assert "the column 'nn' does not exist in the released table; did you mean 'n'?" in str(err)


# -- a string in double quotes ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        'SELECT COUNT(*) FROM data WHERE genre = "Action"',
        'SELECT COUNT(*) FROM data WHERE genre <> "Action" AND rating > 1',
        'SELECT genre, COUNT(*) AS n FROM data GROUP BY genre HAVING genre = "Action"',
    ],
)
def test_a_double_quoted_string_is_named_as_a_missing_column(text: str) -> None:
    err = refused(text)
    message = str(err)
    assert "the column 'Action' does not exist" in message
    assert "single quotes ('Action')" in message
    assert err.position == position_of(text, '"Action"')


@pytest.mark.parametrize(
    "text",
    [
        'SELECT COUNT(*) FROM data WHERE genre IN ("Action", "Drama")',
        'SELECT COUNT(*) FROM data WHERE genre BETWEEN "Action" AND "Drama"',
    ],
)
def test_a_double_quoted_string_in_a_literal_list_says_to_use_single_quotes(text: str) -> None:
    err = refused(text)
    assert "single quotes ('Action')" in str(err)
    assert err.position == position_of(text, '"Action"')


def test_the_same_string_in_single_quotes_runs() -> None:
    sess = session()
    sess.sql("SELECT COUNT(*) FROM data WHERE genre = 'Action'", rho=0.1)
    assert len(sess.ledger) == 1


# -- a misspelt keyword -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "typo", "keyword"),
    [
        ("SELEC COUNT(*) FROM data", "SELEC", "SELECT"),
        ("SELEC genre, COUNT(*) FROM data GROUP BY genre", "SELEC", "SELECT"),
        ("SELECT genre, COUNT(*) FROM data GROUP BYY genre", "BYY", "BY"),
        ("SELECT genre, COUNT(*) FROM data GROUPBY genre", "GROUPBY", "GROUP"),
        ("SELECT COUNT(*) FORM data", "FORM", "FROM"),
        ("SELECT COUNT(*)\n  FORM data", "FORM", "FROM"),
        ("SELECT COUNT(*) FROM data WHER rating > 1", "WHER", "WHERE"),
        ("SELECT COUNT(*) FROM data LIMT 3", "LIMT", "LIMIT"),
        ("SELECT COUNT(*) FROM data WHERE rating > 1 ODER BY 1", "ODER", "ORDER"),
        ("SELECT COUNT(*) FROM data WHERE rating > 1 AN genre = 'drama'", "AN", "AND"),
        ("SELECT genre, COUNT(*) AS n FROM data GROUP BY genre HAVNG n > 1", "HAVNG", "HAVING"),
    ],
)
def test_a_misspelt_keyword_is_located_at_the_misspelt_word(
    text: str, typo: str, keyword: str
) -> None:
    err = refused(text)
    assert err.construct == "syntax"
    assert err.position == position_of(text, typo)
    line, column = err.position
    assert f"{typo!r} at line {line}, column {column}" in str(err)
    assert f"did you mean {keyword}?" in str(err)


def test_a_parse_error_without_a_misspelt_keyword_points_at_the_unexpected_token() -> None:
    text = "SELECT genre, COUNT(*) FROM data GROUP genre"
    err = refused(text)
    assert err.position == position_of(text, "genre", 1)
    assert "'genre' at line 1, column" in str(err)


def test_a_misspelt_keyword_read_as_a_table_alias_is_refused() -> None:
    # FROM data WHER parses: WHER becomes the table's alias and the filter is lost.
    text = "SELECT COUNT(*) FROM data WHER"
    err = refused(text)
    assert err.position == position_of(text, "WHER")
    assert "misspelt WHERE" in str(err)
    sess = session()
    sess.sql('SELECT COUNT(*) FROM data "WHER"', rho=0.1)  # quoted: an alias by intent
    sess.sql("SELECT COUNT(*) FROM data AS d WHERE d.rating > 1", rho=0.1)
    assert len(sess.ledger) == 2


@pytest.mark.parametrize("alias", ["grp", "ord", "lim", "cas", "Wher"])
def test_an_alias_written_after_as_is_an_alias_whatever_it_looks_like(alias: str) -> None:
    sess = session()
    sess.sql(f"SELECT COUNT(*) FROM data AS {alias} WHERE {alias}.rating > 1", rho=0.1)
    sess.sql(f"SELECT COUNT(*) FROM data\n  as\t{alias}", rho=0.1)
    assert len(sess.ledger) == 2


def test_a_column_named_like_a_keyword_is_not_blamed() -> None:
    data = DATA.with_columns(ordr=pl.lit(1))
    text = "SELECT ordr 1 FROM data"  # ORDR is one edit from ORDER, but a known column
    err = refused(text, session(data))
    assert "keyword" not in str(err)
    assert err.position == position_of(text, "1")


# -- case -------------------------------------------------------------------------------------


def test_unquoted_names_match_regardless_of_case() -> None:
    sess = session()
    parsed = sess.sql(
        "SELECT GENRE, Count(*) AS n, AVG(RATING) FROM DATA d "
        "WHERE D.Rating > 0 AND region = 'north' GROUP BY Genre ORDER BY N DESC"
    )
    assert isinstance(parsed, SQLQuery)
    plan = parsed.query.plan
    assert plan.group_by == ("genre",)
    assert plan.keys is not None  # the metadata of 'genre' was found
    assert [a.output_name for a in plan.aggregates] == ["n", "rating_mean"]
    result = parsed.release(0.1)
    assert result.columns == ["genre", "n", "rating_mean"]
    distinct = sess.sql("SELECT COUNT(DISTINCT U) AS people FROM data").query.plan
    assert isinstance(distinct.aggregates[0], CountDistinct)


def test_a_group_column_and_a_select_item_match_across_case_and_qualifiers() -> None:
    parsed = session().sql("SELECT d.GENRE, COUNT(*) FROM data d GROUP BY genre")
    assert parsed.query.plan.group_by == ("genre",)
    with_expression = session(band=pf.Column(keys=[False, True])).sql(
        "SELECT RATING > 2 AS band, COUNT(*) FROM data GROUP BY rating > 2"
    )
    assert with_expression.query.plan.group_by == ("band",)


def test_metadata_is_found_for_a_column_named_in_another_case() -> None:
    data = DATA.with_columns(Amount=pl.col("rating"))
    sess = pf.Session(
        data,
        "u",
        pf.zCDP(1.0),
        metadata={"amount": pf.Column(bounds=(0, 5)), "region": pf.Column(keys=["north"])},
        contributions=pf.Bound(max_groups=1, max_rows_per_group=1),
    )
    plan = sess.sql("SELECT Region, SUM(amount) FROM data GROUP BY Region").query.plan
    assert plan.group_by == ("Region",)
    assert plan.keys is not None
    assert plan.aggregates[0].output_name == "Amount_sum"


def test_quoted_names_match_exactly() -> None:
    sess = session()
    plan = sess.sql('SELECT "Region", COUNT(*) FROM "data" GROUP BY "Region"').query.plan
    assert plan.group_by == ("Region",)
    text = 'SELECT "region", COUNT(*) FROM data GROUP BY "region"'
    err = refused(text)
    assert 'did you mean "Region"?' in str(err)
    assert err.position == position_of(text, '"region"', 1)  # GROUP BY is read first
    err = refused('SELECT COUNT(*) FROM "DATA"')
    assert "private table is called 'data'" in str(err)


def test_names_differing_only_in_case_are_ambiguous_unless_quoted() -> None:
    data = DATA.with_columns(Rating=pl.col("rating") * 2)
    text = "SELECT SUM(RATING) FROM data"
    err = refused(text, session(data))
    assert "ambiguous" in str(err)
    assert "['rating', 'Rating']" in str(err)
    assert "double quotes" in str(err)
    assert err.position == position_of(text, "RATING")
    sess = session(data, Rating=pf.Column(bounds=(0, 20)))
    assert sess.sql('SELECT SUM("Rating") FROM data').query.plan.aggregates[0].column == "Rating"


def test_public_tables_and_aliases_match_regardless_of_case() -> None:
    sess = session()
    parsed = sess.sql(
        "SELECT Z.ZONE, COUNT(*) FROM data D JOIN ZONES z ON d.REGION = Zones.region GROUP BY zone"
    )
    assert parsed.query.plan.group_by == ("zone",)
    using = sess.sql("SELECT zone, COUNT(*) FROM data JOIN zones USING (region) GROUP BY zone")
    assert using.query.plan.group_by == ("zone",)


# -- every error: a PrivframeError with no data value and no foreign exception chained ---------

ERRORS = [
    "SELECT AVG(ratng) FROM data",
    'SELECT COUNT(*) FROM data WHERE genre = "Action"',
    'SELECT COUNT(*) FROM data WHERE genre IN ("Action")',
    "SELEC COUNT(*) FROM data",
    "SELECT genre, COUNT(*) FROM data GROUP BYY genre",
    "SELECT COUNT(*) FROM data WHERE genre = 'unterminated",
    "SELECT COUNT(*) FROM data WHER",
    'SELECT "region", COUNT(*) FROM data GROUP BY "region"',
    "SELECT viewer, COUNT(*) FROM data GROUP BY viewer",  # no keys and no delta
    "SELECT genre, COUNT(*) AS n FROM data GROUP BY genre ORDER BY n LIKE 'a%'",
    "SELECT COUNT(*) FROM data WHERE " + "(" * 3000 + "rating > 1" + ")" * 3000,
]


@pytest.mark.parametrize("text", ERRORS)
def test_errors_chain_no_other_exception_and_quote_no_data(text: str) -> None:
    err = refused(text)
    assert isinstance(err, pf.PrivframeError)
    assert err.__cause__ is None
    assert err.__context__ is None
    for value in [*SECRETS, "drama", "comedy"]:
        assert value not in str(err)
