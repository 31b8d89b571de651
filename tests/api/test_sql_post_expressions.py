"""SQL expressions over released values: select-list expressions, HAVING and ORDER BY.

An expression over aggregates (``COUNT(*) * 5``, ``SUM(a) / COUNT(*)``,
``ROUND(AVG(x), 1)``) is post-processing: it is checked against the exact
answer where the noise is negligible (ρ = 1e9: σ of a count ≈ 2e-5, of the
sums here < 0.1, so every check's tolerance is over 10σ), and structurally:
the measurements it adds, the ledger, the columns and their types, ``explain``.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import sqlglot

import privframe as pf
from privframe.api.sql.released import Released, affine
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

TINY_NOISE = 1e9
RHO = TINY_NOISE  # what each release spends: noise far below every tolerance


def _people(n: int = 3_000, seed: int = 5) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "pid": np.arange(n),
            "age": rng.integers(18, 90, n),
            "married": rng.integers(0, 2, n),
            "income": rng.integers(0, 1_000, n),
        }
    )


PEOPLE = _people()
BY_MARRIED = PEOPLE.group_by("married").agg(
    n=pl.len(), age=pl.col("age").mean(), income=pl.col("income").sum()
)


def session(rho: float = TINY_NOISE) -> pf.Session:
    return pf.Session(
        PEOPLE,
        "pid",
        pf.zCDP(rho * 10),
        rng=SeededRandomness(3),
        metadata={
            "age": pf.Column(bounds=(0, 100)),
            "income": pf.Column(bounds=(0, 1_000)),
            "married": pf.Column(keys=[0, 1]),
        },
        contributions=pf.Bound(max_groups=1, max_rows_per_group=1),
    )


def truth(married: int, column: str) -> float:
    return BY_MARRIED.filter(pl.col("married") == married)[column].item()


def refusal(text: str, **kwargs: object) -> pf.SQLError:
    """The SQLError of releasing ``text``, checked to have charged nothing and chain nothing."""
    sess = session()
    with pytest.raises(pf.SQLError) as info:
        sess.sql(text, rho=RHO, **kwargs)
    assert sess.ledger == ()
    assert info.value.__context__ is None
    assert info.value.__cause__ is None
    return info.value


# -- select-list expressions -----------------------------------------------------------------


def test_select_list_expressions_match_the_exact_answer() -> None:
    out = session().sql(
        "SELECT married, COUNT(*) * 5 AS c, ROUND(AVG(age), 1) AS a, SUM(income) / COUNT(*) AS m,"
        " 3 AS three, CAST(AVG(age) AS INT) AS ai, ABS(0 - COUNT(*)) AS neg,"
        " CASE WHEN COUNT(*) > 1500 THEN 'big' ELSE 'small' END AS size"
        " FROM data GROUP BY married ORDER BY married",
        rho=RHO,
    )
    assert out.columns == ["married", "c", "a", "m", "three", "ai", "neg", "size"]
    for row in out.iter_rows(named=True):
        g = row["married"]
        assert row["c"] == 5 * truth(g, "n")
        assert row["a"] == pytest.approx(round(truth(g, "age"), 1), abs=0.051)
        assert row["m"] == pytest.approx(truth(g, "income") / truth(g, "n"), abs=1e-3)
        assert row["three"] == 3
        assert abs(row["ai"] - truth(g, "age")) <= 0.5 + 1e-6
        assert row["neg"] == truth(g, "n")
        assert row["size"] == ("big" if truth(g, "n") > 1500 else "small")


def test_counts_times_integers_stay_integers_and_ratios_are_floats() -> None:
    out = session().sql(
        "SELECT COUNT(*) * 5 AS c, 3 AS three, SUM(income) / COUNT(*) AS m,"
        " CAST(AVG(age) AS INT) AS ai, ROUND(AVG(age)) AS r FROM data",
        rho=RHO,
    )
    assert dict(out.schema) == {
        "c": pl.Int64,
        "three": pl.Int64,
        "m": pl.Float64,
        "ai": pl.Int64,
        "r": pl.Float64,
    }


def test_an_expression_measures_each_aggregate_once_and_charges_as_the_plain_query() -> None:
    plain, derived = session(), session()
    plain.sql("SELECT married, SUM(income) AS s, COUNT(*) AS n FROM data GROUP BY married", rho=RHO)
    text = (
        "SELECT married, SUM(income) / COUNT(*) AS m, COUNT(*) * 2 AS twice, COUNT(*) AS n"
        " FROM data GROUP BY married HAVING COUNT(*) > 0 ORDER BY SUM(income)"
    )
    parsed = derived.sql(text)
    assert [a.output_name for a in parsed.query.plan.aggregates] == ["n", "income_sum"]
    out = parsed.release(rho=RHO)
    assert out.columns == ["married", "m", "twice", "n"]
    assert len(derived.ledger) == len(plain.ledger) == 1
    assert derived.spent == plain.spent


def test_parentheses_around_an_aggregate_leave_the_plain_aggregate() -> None:
    sess = session()
    plain = sess.sql("SELECT SUM(age) AS age FROM data").query.plan
    for text in ("SELECT (SUM(age)) AS age FROM data", "SELECT ((SUM(age))) AS age FROM data"):
        wrapped = sess.sql(text).query.plan
        assert (wrapped.steps, wrapped.aggregates) == (plain.steps, plain.aggregates)
    out = sess.sql(
        "SELECT (VAR(age)) AS my_var, married FROM data GROUP BY married", rho=RHO, with_error=True
    )
    assert out.columns == ["my_var", "married", "my_var_std", "my_var_ci95"]


def test_unnamed_expressions_are_named_as_bigquery_names_them() -> None:
    out = session().sql("SELECT AVG(age) + 3, COUNT(*) AS n, SUM(age) / 10 FROM data", rho=RHO)
    assert out.columns == ["f0_", "n", "f1_"]
    assert out["f0_"].item() == pytest.approx(PEOPLE["age"].mean() + 3, abs=1e-3)


def test_a_hidden_aggregate_takes_a_name_no_output_has() -> None:
    parsed = session().sql("SELECT SUM(income) AS count, COUNT(*) * 2 AS c FROM data")
    assert [a.output_name for a in parsed.query.plan.aggregates] == ["count", "count_2"]
    out = parsed.release(rho=RHO)
    assert out["c"].item() == 2 * len(PEOPLE)


def test_an_expression_of_a_group_column_and_having_on_its_alias() -> None:
    out = session().sql(
        "SELECT married * 1000 AS married, COUNT(*) AS n FROM data GROUP BY married"
        " HAVING married > 500",
        rho=RHO,
    )
    assert out["married"].to_list() == [1000]
    assert out["n"].to_list() == [truth(1, "n")]


def test_a_ratio_with_a_zero_count_is_null_not_infinite() -> None:
    out = session().sql("SELECT SUM(income) / COUNT(*) AS m FROM data WHERE age > 200", rho=RHO)
    assert out["m"].to_list() == [None]


def test_a_total_row_gets_the_expression_too() -> None:
    out = session().sql(
        "SELECT married, COUNT(*) * 2 AS c FROM data GROUP BY married", rho=RHO, total=True
    )
    assert out["c"].to_list()[-1] == 2 * len(PEOPLE)
    assert out["married"].to_list()[-1] is None


# -- error columns of derived outputs ----------------------------------------------------------


def test_an_affine_expression_has_its_aggregates_errors_scaled() -> None:
    out = (
        session(rho=10.0)
        .sql(
            "SELECT COUNT(*) AS n, COUNT(*) * 5 AS c, 10 - SUM(income) / 4 AS s, SUM(income) AS t"
            " FROM data",
            rho=1.0,
            with_error=True,
            intervals=True,
            clamp=False,
        )
        .row(0, named=True)
    )
    assert out["c_std"] == pytest.approx(5 * out["n_std"])
    assert out["c_ci95"] == pytest.approx(5 * out["n_ci95"])
    assert out["s_std"] == pytest.approx(out["t_std"] / 4)
    # a decreasing map swaps the interval's ends
    assert out["s_ci95_low"] == pytest.approx(10 - out["t_ci95_high"] / 4)
    assert out["s_ci95_high"] == pytest.approx(10 - out["t_ci95_low"] / 4)
    assert out["s_ci95_low"] <= out["s"] <= out["s_ci95_high"]


def test_other_expressions_carry_no_error_columns() -> None:
    out = session().sql(
        "SELECT SUM(income) / COUNT(*) AS m, ROUND(AVG(age), 1) AS r, COUNT(*) - COUNT(*) AS z"
        " FROM data",
        rho=RHO,
        with_error=True,
    )
    assert out.columns == ["m", "r", "z"]


@pytest.mark.parametrize(
    ("text", "linear"),
    [
        ("(COUNT(*) + 1) * -5", ("n", -5.0, -5.0)),
        ("SUM(x) / 4", ("n", 0.25, 0.0)),
        ("2 * COUNT(*) - 3", ("n", 2.0, -3.0)),
        ("-COUNT(*)", ("n", -1.0, 0.0)),
        ("SUM(x) / COUNT(*)", None),
        ("COUNT(*) * 0", None),
        ("SUM(x) / 0", None),
        ("ROUND(SUM(x))", None),
        ("COUNT(*) * age", None),
    ],
)
def test_affine_forms(text: str, linear: tuple[str, float, float] | None) -> None:
    found = affine(sqlglot.parse_one(text), lambda call: "n")
    assert (None if found is None else (found.source, found.a, found.b)) == linear


@pytest.mark.parametrize(
    ("clashing", "kwargs"),
    [("c_std", {"with_error": True}), ("c_ci95_low", {"intervals": True})],
)
def test_an_error_column_of_an_expression_may_not_replace_an_output(
    clashing: str, kwargs: dict[str, bool]
) -> None:
    error = refusal(f"SELECT COUNT(*) * 2 AS c, SUM(age) AS {clashing} FROM data", **kwargs)
    assert clashing in str(error)


# -- HAVING and ORDER BY ---------------------------------------------------------------------


def test_having_an_aggregate_not_selected_measures_it_hidden_and_explains_it() -> None:
    text = (
        "SELECT married, SUM(income) AS s FROM data GROUP BY married"
        " HAVING married > 0 AND COUNT(*) > 7"
    )
    parsed = session().sql(text)
    assert [a.output_name for a in parsed.query.plan.aggregates] == ["s", "count"]
    explained = parsed.explain(rho=RHO)
    assert [row["output"] for row in explained.rows] == ["s", "count"]
    assert any("not returned: count = COUNT(*)" in note for note in explained.notes)
    out = parsed.release(rho=RHO, with_error=True)
    assert out.columns == ["married", "s", "s_std", "s_ci95"]
    assert out["married"].to_list() == [1]


def test_order_by_an_aggregate_not_selected() -> None:
    out = session().sql(
        "SELECT married FROM data GROUP BY married ORDER BY AVG(age) DESC, COUNT(*)", rho=RHO
    )
    expected = BY_MARRIED.sort("age", descending=True)["married"].to_list()
    assert out.columns == ["married"]
    assert out["married"].to_list() == expected


def test_having_with_expressions_over_released_columns() -> None:
    out = session().sql(
        "SELECT married, COUNT(*) AS n FROM data GROUP BY married"
        " HAVING ROUND(n / 2) >= 0 AND NOT (married = 1) ORDER BY COALESCE(n, 0)",
        rho=RHO,
    )
    assert out["married"].to_list() == [0]


# -- functions of released values ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("ROUND(x, 1)", 2.25, 2.3),
        ("ROUND(x, 1)", -2.25, -2.3),
        ("ROUND(x)", 0.5, 1.0),
        ("ROUND(x, -2)", 1250.0, 1300.0),
        ("FLOOR(x)", -1.5, -2.0),
        ("CEIL(x)", 1.2, 2.0),
        ("CEILING(x)", 1.2, 2.0),
        ("CAST(x AS INT)", 2.5, 3),
        ("CAST(x AS INT)", -2.5, -3),
        ("COALESCE(x, 7)", None, 7.0),
        ("IFNULL(x, 7)", 1.0, 1.0),
        ("x / 0", 1.0, None),
    ],
)
def test_functions_of_released_values(text: str, value: float | None, expected: object) -> None:
    expr = Released(lambda column: column.name, {})(sqlglot.parse_one(text))
    frame = pl.DataFrame({"x": [value]}, schema={"x": pl.Float64})
    assert frame.select(expr).item() == expected


# -- refusals --------------------------------------------------------------------------------


def test_not_of_an_integer_column_keeps_the_groups_where_it_is_zero_as_in_a_row_filter() -> None:
    text = "SELECT married, COUNT(*) AS n FROM data GROUP BY married HAVING NOT {}"
    assert session().sql(text.format("married"), rho=RHO)["married"].to_list() == [0]
    assert session().sql(text.format("(married)"), rho=RHO)["married"].to_list() == [0]


def test_not_of_a_string_is_refused_naming_not() -> None:
    error = refusal(
        "SELECT CAST(married AS STRING) AS m, COUNT(*) AS n FROM data GROUP BY married HAVING NOT m"
    )
    assert error.construct == "NOT"
    assert "String" in str(error)
    assert "polars" not in str(error).lower()
    assert error.position is not None


@pytest.mark.parametrize(
    "tail",
    ["HAVING n AND married = 1", "HAVING n", "HAVING married = 1 OR n"],
)
def test_and_or_and_having_need_true_false_operands(tail: str) -> None:
    error = refusal(f"SELECT married, COUNT(*) AS n FROM data GROUP BY married {tail}")
    assert "true/false" in str(error)


def test_a_type_error_in_having_is_ours_without_polars_words() -> None:
    error = refusal("SELECT married, COUNT(*) AS n FROM data GROUP BY married HAVING n > 'abc'")
    assert error.construct == "HAVING"
    assert "n > 'abc'" in str(error)
    assert "Int64" in str(error)
    assert "polars" not in str(error).lower()
    assert "error" not in str(error).lower()


@pytest.mark.parametrize(
    ("text", "construct"),
    [
        ("SELECT SUM(COUNT(*)) FROM data", "the aggregate COUNT(*) inside SUM(COUNT(*))"),
        ("SELECT COUNT(*) + SUM(MAX(age)) AS x FROM data", "inside SUM"),
        ("SELECT married, COUNT(*) FROM data GROUP BY married HAVING SUM(AVG(age)) > 1", "inside"),
        ("SELECT COUNT(*) * age AS x FROM data", "the column age outside GROUP BY"),
        ("SELECT COUNT(*) FROM data WHERE ROUND(age) > 3", "ROUND"),
        ("SELECT FLOOR(AVG(age), 2) AS f FROM data", "FLOOR with a second argument"),
        ("SELECT ROUND(AVG(age), 0.5) AS r FROM data", "ROUND to 0.5 places"),
        ("SELECT POWER(SUM(age), 2) AS p FROM data", "POWER"),
        ("SELECT 3 AS three FROM data", "SELECT without an aggregate"),
    ],
)
def test_refused_expressions(text: str, construct: str) -> None:
    assert construct in refusal(text).construct


def test_round_in_a_row_filter_says_where_it_applies() -> None:
    error = refusal("SELECT COUNT(*) FROM data WHERE ROUND(age) > 3")
    assert "applies only to released values" in str(error)


def test_a_negated_parenthesized_literal_scales_exactly() -> None:
    found = affine(sqlglot.parse_one("COUNT(*) * -(2)"), lambda call: "n")
    assert found is not None
    assert (found.a, found.b) == (-2.0, 0.0)


def test_explain_says_what_is_computed_and_which_columns_have_no_error() -> None:
    notes = (
        session()
        .sql("SELECT SUM(income) / COUNT(*) AS m, COUNT(*) * 2 AS c FROM data")
        .explain(rho=1.0)
        .notes
    )
    assert any("m = SUM(income) / COUNT(*), c = COUNT(*) * 2" in note for note in notes)
    assert any(note.startswith("no error columns for m:") for note in notes)


def test_having_null_keeps_no_group() -> None:
    out = session().sql(
        "SELECT married, COUNT(*) AS n FROM data GROUP BY married HAVING NULL", rho=RHO
    )
    assert out.height == 0


@pytest.mark.parametrize("key", ["NULL", "'a'", "1 + 1"])
def test_order_by_a_constant_is_refused(key: str) -> None:
    error = refusal(f"SELECT married, COUNT(*) AS n FROM data GROUP BY married ORDER BY {key}")
    assert "ORDER BY the constant" in error.construct


def test_integer_arithmetic_beyond_64_bits_is_null_never_wrapped() -> None:
    released = session().sql(
        "SELECT COUNT(*) * 9000000000000000000 AS wraps, -COUNT(*) * 9000000000000000000 AS "
        "negative, COUNT(*) + 9223372036854770000 AS fits, SUM(income) * 1e30 AS huge_float "
        "FROM data",
        rho=RHO,
    )
    row = released.row(0, named=True)
    assert row["wraps"] is None
    assert row["negative"] is None
    assert row["fits"] == 9223372036854770000 + len(PEOPLE)
    assert row["huge_float"] == pytest.approx(PEOPLE["income"].sum() * 1e30, rel=1e-6)
    assert released.schema["wraps"] == pl.Int64


@pytest.mark.parametrize(
    ("text", "construct"),
    [
        ("SELECT COUNT(*) + 99999999999999999999 AS n FROM data", "the integer"),
        ("SELECT COUNT(*) AS n FROM data HAVING n IN (1, 99999999999999999999)", "the integer"),
        ("SELECT ROUND(AVG(age), -400) AS a FROM data", "ROUND to -400 places"),
        ("SELECT COUNT(*) AS n FROM data WHERE age > 1e400", "the number 1e400"),
    ],
)
def test_literals_no_64_bit_number_holds_are_refused_before_any_charge(
    text: str, construct: str
) -> None:
    sess = session()
    with pytest.raises(pf.SQLError) as refused:
        sess.sql(text, rho=RHO)
    assert construct in refused.value.construct
    assert refused.value.__context__ is None
    assert not sess.ledger
