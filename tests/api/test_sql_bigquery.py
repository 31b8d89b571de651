"""BigQuery/ZetaSQL differential privacy SQL and other engines' aggregate spellings, via sess.sql.

The queries follow BigQuery's "Differentially private aggregate functions" and
ZetaSQL's docs/query-syntax.md (differential privacy clause) on a synthetic
version of their professors/items example; SmartNoise's TOP and bounds in the
call. Each construct is checked against the builder query it must equal (its
plan), its budget against privframe's exact (ε, δ) → ρ conversion, and its
refusals for the construct named with its position.
"""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import privframe as pf
from privframe.api.sql import SQLQuery
from privframe.mechanisms.noise import SeededRandomness
from privframe.plan.ir import Bound

ITEMS = ["pen", "pencil", "scissors"]
DP = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=2, delta=1e-5, max_groups_contributed=1, "
DP_OPTIONS = DP + "privacy_unit_column=id) "
BIG = pf.zCDP(1e6, delta=Fraction(1, 2))


def professors(n: int = 3_000, seed: int = 0) -> pl.DataFrame:
    """Each professor (id) requests 1-3 items, a quantity 0-100 each; a third have no grade."""
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(n), rng.integers(1, 4, n))
    rows = len(ids)
    return pl.DataFrame(
        {
            "id": ids,
            "item": rng.choice(ITEMS, rows),
            "quantity": rng.integers(0, 101, rows).astype(float),
            "grade": [None if i % 3 == 0 else float(i % 5) for i in range(rows)],
            "age": rng.integers(25, 70, rows),
        }
    )


DATA = professors()


def session(
    budget: pf.Budget = BIG,
    *,
    keyed: bool = False,
    unit: str | None = "id",
    contributions: pf.Bound | None = None,
    seed: int = 1,
) -> pf.Session:
    metadata = {"age": pf.Column(bounds=(0, 120))}
    if keyed:
        metadata["item"] = pf.Column(keys=tuple(ITEMS))
    return pf.Session(
        DATA,
        unit,
        budget,
        rng=SeededRandomness(seed),
        metadata=metadata,
        contributions=contributions,
    )


@pytest.fixture(autouse=True)
def _quiet_seeds() -> None:
    warnings.simplefilter("ignore", pf.SeededRandomnessWarning)


def refusal(sess: pf.Session, text: str) -> pf.SQLError:
    with pytest.raises(pf.SQLError) as caught:
        sess.sql(text)
    return caught.value


def aggregates(text: str, **kwargs: object) -> list[object]:
    query = session(keyed=True, **kwargs).parse_sql(text)  # type: ignore[arg-type]
    assert isinstance(query, SQLQuery)
    return list(query.query.plan.aggregates)


# -- the clause and its options ------------------------------------------------------------------


def test_options_are_read_exactly_into_a_frozen_object() -> None:
    query = session(keyed=True, contributions=pf.Bound(max_rows_per_group=2)).parse_sql(
        DP_OPTIONS + "item, COUNT(*) AS n FROM data GROUP BY item"
    )
    assert isinstance(query, SQLQuery)
    options = query.options
    assert options is not None
    assert (options.clause, options.epsilon, options.delta, options.max_groups) == (
        "DIFFERENTIAL_PRIVACY",
        Fraction(2),
        Fraction(1, 100_000),
        1,
    )
    with pytest.raises(AttributeError):
        options.epsilon = Fraction(3)  # type: ignore[misc]


def test_the_older_anonymization_clause_takes_kappa() -> None:
    text = (
        "SELECT WITH ANONYMIZATION OPTIONS(epsilon=1, delta=.001, kappa=2) item, "
        "ANON_COUNT(*) AS n FROM data GROUP BY item"
    )
    query = session(keyed=True, contributions=pf.Bound(max_rows_per_group=3)).parse_sql(text)
    assert query.options is not None
    assert query.options.clause == "ANONYMIZATION"
    assert query.query.plan.bound == Bound(max_groups=2, max_rows_per_group=3)


def test_max_groups_defaults_to_the_sessions_then_to_one() -> None:
    text = "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6) COUNT(*) FROM data"
    alone = session(contributions=pf.Bound(max_rows_per_group=2)).parse_sql(text)
    given = session(contributions=pf.Bound(max_groups=4, max_rows_per_group=2)).parse_sql(text)
    assert alone.query.plan.bound == Bound(max_groups=1, max_rows_per_group=2)
    assert given.query.plan.bound == Bound(max_groups=4, max_rows_per_group=2)


def test_a_clause_without_a_row_limit_is_refused_saying_where_to_give_one() -> None:
    text = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6) "
        "SUM(quantity, 0, 100) FROM data"  # bounds on each row: rows need a limit
    )
    err = refusal(session(), text)
    assert err.construct == "WITH DIFFERENTIAL_PRIVACY OPTIONS"
    assert "COUNT(*, contribution_bounds_per_group => (0, 5))" in str(err)
    assert err.position == (1, 8)


def test_the_privacy_unit_column_is_matched_as_sql_matches_names() -> None:
    text = DP + "privacy_unit_column=ID) COUNT(*) FROM data"
    assert isinstance(
        session(contributions=pf.Bound(max_rows_per_group=1)).parse_sql(text), SQLQuery
    )


@pytest.mark.parametrize(
    ("options", "unit", "construct", "says"),
    [
        ("privacy_unit_column=item", "id", "privacy_unit_column", "privacy unit is 'id'"),
        ("privacy_unit_column=id", None, "privacy_unit_column", "protects single rows"),
        ("epsilon=1, delta=1e-6, colour=red", "id", "the option colour", "has no option"),
        ("epsilon=1, k_threshold=5", "id", "the option k_threshold", "give delta instead"),
        ("epsilon=1, delta=1e-6, max_groups_contributed=0", "id", "max_groups_contributed", ""),
        ("epsilon=-1, delta=1e-6", "id", "epsilon", "must be a number >= 0"),
        ("epsilon=1, delta=1", "id", "delta", "below 1"),
        ("kappa=1, max_groups_contributed=2", "id", "max_groups_contributed", "given twice"),
        ("group_selection_strategy=SOMETIMES", "id", "group_selection_strategy", "PUBLIC_GROUPS"),
    ],
)
def test_bad_options_are_refused_naming_the_option(
    options: str, unit: str | None, construct: str, says: str
) -> None:
    text = f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS({options}) COUNT(*) FROM data"
    err = refusal(session(unit=unit), text)
    assert err.construct == construct
    assert says in str(err)
    assert err.position is not None
    assert err.position[0] == 1


def test_public_groups_strategy_refuses_groups_without_keys() -> None:
    text = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6, "
        "group_selection_strategy=PUBLIC_GROUPS) item, COUNT(*) FROM data GROUP BY item"
    )
    err = refusal(session(contributions=pf.Bound(max_rows_per_group=1)), text)
    assert "PUBLIC_GROUPS" in str(err)
    assert err.construct == "GROUP BY"
    assert isinstance(
        session(keyed=True, contributions=pf.Bound(max_rows_per_group=1)).parse_sql(text), SQLQuery
    )


# -- the budget ---------------------------------------------------------------------------------


def test_public_groups_spend_the_largest_rho_that_gives_epsilon_delta() -> None:
    sess = session(keyed=True)
    text = DP_OPTIONS + "item, COUNT(*, contribution_bounds_per_group => (0, 3)) AS n FROM data "
    released = sess.sql(text + "GROUP BY item")  # as BigQuery runs it: OPTIONS carry the budget
    want = pf.ApproxDP(2, Fraction(1, 100_000)).to_zcdp()
    assert sess.spent.exact_rho == want.exact_rho
    assert sess.spent.delta == 0
    assert pf.zCDP(want.exact_rho).epsilon(1e-5) <= 2
    assert released["n"].dtype == pl.Int64


def test_private_groups_spend_half_of_delta_on_choosing_them() -> None:
    sess = session()
    text = DP_OPTIONS + "item, COUNT(*, contribution_bounds_per_group => (0, 3)) AS n FROM data "
    query = sess.parse_sql(text + "GROUP BY item")
    spend = query.spend()
    assert spend is not None
    assert spend.selection_delta is not None
    assert 0 < spend.exact_selection_delta <= Fraction(1, 200_000)
    released = query.release()
    want = pf.ApproxDP(2, Fraction(1, 100_000)).to_zcdp(selection_delta=spend.selection_delta)
    # The δ the ρ conversion reserved is exactly the δ the session charged.
    assert sess.spent.exact_rho == want.exact_rho
    assert sess.spent.exact_delta == want.exact_delta == spend.exact_selection_delta
    # ρ converted at δ − δ_s, plus δ_s: the whole query is (ε, δ)-DP.
    rest = float(Fraction(1, 100_000) - spend.exact_selection_delta)
    assert pf.zCDP(want.exact_rho).epsilon(rest) <= 2
    assert set(released["item"]) <= set(ITEMS)


def test_a_request_spends_the_options_budget_in_a_batch() -> None:
    sess = session(keyed=True)
    text = DP_OPTIONS + "item, SUM(quantity, 0, 100) AS s FROM data GROUP BY item"
    query = sess.parse_sql(text, contributions=pf.Bound(max_rows_per_group=2))
    (table,) = sess.release_all([query.request()])
    assert sess.spent.exact_rho == pf.ApproxDP(2, Fraction(1, 100_000)).to_zcdp().exact_rho
    assert table.columns == ["item", "s"]


@pytest.mark.parametrize("given", [{"rho": 0.1}, {"delta": 1e-6}, {"rho": 0.1, "delta": 1e-6}])
def test_a_budget_given_twice_is_refused_and_nothing_is_charged(given: dict[str, float]) -> None:
    sess = session(keyed=True, contributions=pf.Bound(max_rows_per_group=1))
    query = sess.parse_sql(DP_OPTIONS + "item, COUNT(*) FROM data GROUP BY item")
    for call in (query.release, query.explain, query.request):
        with pytest.raises(pf.SQLError, match="the budget is given twice") as caught:
            call(**given)  # type: ignore[arg-type]
        assert caught.value.construct == "WITH DIFFERENTIAL_PRIVACY OPTIONS"
    with pytest.raises(pf.SQLError, match="given twice"):
        sess.sql(DP_OPTIONS + "item, COUNT(*) FROM data GROUP BY item", rho=0.1)
    assert not sess.ledger


def test_without_options_a_release_still_needs_rho() -> None:
    query = session(keyed=True, contributions=pf.Bound(max_rows_per_group=1)).sql(
        "SELECT COUNT(*) FROM data"
    )
    with pytest.raises(pf.InvalidArgumentError, match="pass rho="):
        query.release()


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ("epsilon=1", "needs delta > 0"),
        ("delta=1e-6", "without epsilon"),
        ("epsilon=0, delta=1e-6", "needs epsilon > 0"),
    ],
)
def test_a_budget_that_is_not_one_is_refused_when_parsed(options: str, says: str) -> None:
    sess = session(contributions=pf.Bound(max_rows_per_group=1))
    with pytest.raises(pf.SQLError, match=says) as caught:
        sess.sql(f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS({options}) COUNT(*) FROM data")
    assert caught.value.position is not None
    assert not sess.ledger


def test_bigquerys_noise_free_epsilon_gives_the_exact_answer_and_is_charged_what_it_asks() -> None:
    # BigQuery's docs show results without noise with epsilon=1e20: the σ it implies is
    # below the exact sampler's smallest, which the planner draws instead (more noise).
    sess = session(pf.zCDP(1e30))
    query = sess.parse_sql(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1e20, delta=.01, "
        "max_groups_contributed=1) COUNT(*, contribution_bounds_per_group => (0, 3)) AS n, "
        "SUM(quantity, contribution_bounds_per_group => (0, 300)) AS total FROM data"
    )
    assert "raised to the sampler's minimum 2^-20 grid units" in str(query.explain())
    released = query.release()
    assert released["n"].item() == DATA.height  # no professor has more than 3 rows
    assert released["total"].item() == pytest.approx(DATA["quantity"].sum(), abs=1e-3)
    spend = query.spend()
    assert spend is not None
    assert sess.spent.exact_rho == spend.rho


def test_options_that_need_more_noise_than_the_sampler_draws_are_refused_naming_the_clause() -> (
    None
):
    sess = session(contributions=pf.Bound(max_rows_per_group=1))
    query = sess.parse_sql(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1e-13, delta=1e-13) COUNT(*) FROM data"
    )
    with pytest.raises(pf.SQLError, match=r"cannot be released: rho=.* is too small") as caught:
        query.release()
    assert caught.value.construct == "WITH DIFFERENTIAL_PRIVACY OPTIONS"
    assert not sess.ledger


def test_explain_shows_the_mapping_and_its_source() -> None:
    text = DP_OPTIONS + "item, COUNT(*, contribution_bounds_per_group => (0, 3)) FROM data "
    public = str(session(keyed=True).parse_sql(text + "GROUP BY item").explain())
    private = str(session().parse_sql(text + "GROUP BY item").explain())
    rho = pf.ApproxDP(2, Fraction(1, 100_000)).to_zcdp().rho
    assert f"OPTIONS(epsilon=2, delta=1e-05) -> rho = {rho:.6g}" in public
    assert "Canonne, Kamath & Steinke 2020" in public
    assert "delta_selection = 5e-06" in private
    assert "needs delta=" not in private  # OPTIONS delta is the opt-in


# -- aggregates with bounds in the call ----------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "want"),
    [
        ("ANON_SUM(quantity CLAMPED BETWEEN 0 AND 100)", pf.sum("quantity", (0, 100))),
        ("ANON_AVG(quantity CLAMPED BETWEEN 0 AND 100)", pf.mean("quantity", (0, 100))),
        ("ANON_VAR_POP(quantity CLAMPED BETWEEN 0 AND 100)", pf.var("quantity", (0, 100))),
        ("ANON_STDDEV_POP(quantity CLAMPED BETWEEN 0 AND 100)", pf.std("quantity", (0, 100))),
        ("SUM(quantity, contribution_bounds_per_group => (0, 100))", pf.sum("quantity", (0, 100))),
        ("AVG(quantity, contribution_bounds_per_group => (0,100))", pf.mean("quantity", (0, 100))),
        (
            "VAR_POP(quantity, contribution_bounds_per_row => (0, 100))",
            pf.var("quantity", (0, 100)),
        ),
        (
            "STDDEV_POP(quantity, contribution_bounds_per_group => (0, 100))",
            pf.std("quantity", (0, 100)),
        ),
        ("SUM(quantity, 0, 100)", pf.sum("quantity", (0, 100))),
        ("AVG(quantity, 0, 100)", pf.mean("quantity", (0, 100))),
        ("SUM(age, -5, 50)", pf.sum("age", (-5, 50))),  # the call's bounds, not metadata's
        ("VAR(age)", pf.var("age", (0, 120))),
        ("VARIANCE(age)", pf.var("age", (0, 120))),
        ("STD(age)", pf.std("age", (0, 120))),
        ("STDEV(age)", pf.std("age", (0, 120))),
        ("STDDEV(age)", pf.std("age", (0, 120))),
    ],
)
def test_bounds_in_the_call_and_other_names_make_the_builders_aggregate(
    call: str, want: object
) -> None:
    (got,) = aggregates(f"SELECT {call} AS out FROM data", contributions=pf.Bound(1, 1))
    assert got == want.alias("out")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "call",
    [
        "PERCENTILE_CONT(quantity, 0.5, contribution_bounds_per_row => (0, 100))",
        "ANON_PERCENTILE_CONT(quantity, 0.5 CLAMPED BETWEEN 0 AND 100)",
    ],
)
def test_percentiles_with_bounds_in_the_call(call: str) -> None:
    (got,) = aggregates(f"SELECT {call} AS med FROM data", contributions=pf.Bound(1, 1))
    assert got == pf.quantile("quantity", 0.5, (0, 100)).alias("med")


def test_percentile_cont_comma_form_equals_within_group() -> None:
    comma = aggregates("SELECT PERCENTILE_CONT(age, 0.25) AS q FROM data")
    within = aggregates("SELECT PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY age) AS q FROM data")
    assert comma == within == [pf.quantile("age", 0.25, (0, 120)).alias("q")]


def test_count_bounds_set_the_row_limit() -> None:
    for call in (
        "COUNT(*, contribution_bounds_per_group => (0, 4))",
        "ANON_COUNT(* CLAMPED BETWEEN 0 AND 4)",
        "ANON_COUNT(grade CLAMPED BETWEEN 0 AND 4)",
        "COUNT(grade, contribution_bounds_per_group => (0, 4))",
    ):
        query = session(contributions=pf.Bound(max_groups=2, max_rows_per_group=9)).sql(
            f"SELECT {call} FROM data"
        )
        assert query.query.plan.bound == Bound(max_groups=2, max_rows_per_group=4), call


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            "SELECT COUNT(*, contribution_bounds_per_group => (1, 4)) FROM data",
            "a count's bounds are (0, c)",
        ),
        (
            "SELECT COUNT(*, contribution_bounds_per_group => (0, 2.5)) FROM data",
            "a whole number",
        ),
        (
            "SELECT COUNT(*, contribution_bounds_per_group => (0, 2)), "
            "ANON_COUNT(grade CLAMPED BETWEEN 0 AND 3) FROM data",
            "different row limits (2 and 3)",
        ),
        ("SELECT SUM(quantity, 10, 0) FROM data", "lower <= upper"),
        ("SELECT SUM(quantity, 'a', 'b') FROM data", "bounds are number literals"),
        ("SELECT SUM(quantity, 1) FROM data", "SUM(x, lower, upper)"),
        ("SELECT COUNT(DISTINCT item) FROM data", "only COUNT(DISTINCT id)"),
        ("SELECT SUM(quantity CLAMPED BETWEEN 0 AND 1) FROM data", "contribution_bounds_per_group"),
        ("SELECT WITH PRIVACY OPTIONS(epsilon=1) COUNT(*) FROM data", "DIFFERENTIAL_PRIVACY"),
        ("SELECT TOP 2 item, COUNT(*) FROM data GROUP BY item LIMIT 1", "write one of them"),
        ("SELECT ANON_SUM(quantity, LN(3)/2) FROM data", "PostgreSQL anon extension"),
        ("SELECT ANON_COUNT(id, 0.5) FROM data", "one budget per query"),
        ("SELECT TOP 10 PERCENT item, COUNT(*) FROM data GROUP BY item", "use TOP n"),
    ],
)
def test_refusals_name_the_construct_where_it_is_and_what_to_write(text: str, says: str) -> None:
    err = refusal(session(keyed=True, contributions=pf.Bound(1, 1)), text)
    assert says in str(err)
    assert err.position is not None
    line, column = err.position
    assert line == 1
    assert 1 <= column <= len(text)


def test_top_is_a_limit_on_the_noisy_result_and_top_can_still_be_a_column() -> None:
    sess = session(keyed=True, contributions=pf.Bound(1, 1))
    released = sess.sql(
        "SELECT TOP 2 item, COUNT(*) AS n FROM data GROUP BY item ORDER BY n DESC", rho=1.0
    )
    assert released.height == 2
    assert released["n"].to_list() == sorted(released["n"].to_list(), reverse=True)
    named = pf.Session(
        DATA.rename({"quantity": "top"}),
        "id",
        BIG,
        metadata={"top": pf.Column(bounds=(0, 100))},
        contributions=pf.Bound(1, 1),
    )
    (agg,) = named.sql("SELECT SUM(top) FROM data").query.plan.aggregates
    assert agg == pf.sum("top", (0, 100))


# -- COUNT(col) and derived expressions ----------------------------------------------------------


def test_count_of_a_column_is_released_as_an_integer_near_the_truth() -> None:
    sess = session(keyed=True, contributions=pf.Bound(1, 1))
    released = sess.sql(
        "SELECT COUNT(grade) AS graded, COUNT(*) AS n FROM data", rho=1e4, with_error=True
    )
    assert released["graded"].dtype == pl.Int64
    assert released["n"].dtype == pl.Int64
    truth = (
        DATA.group_by("id")
        .agg(pl.col("grade").first())
        .filter(pl.col("grade").is_not_null())
        .height
    )
    # Each unit keeps one row (max_groups=1, one row per group): its grade may be missing or not.
    assert abs(released["graded"].item() - truth) <= DATA["id"].n_unique() * 0.5


def test_a_case_of_literals_is_bounded_by_its_results_not_by_a_column_its_alias_shadows() -> None:
    (got,) = aggregates(
        "SELECT SUM(CASE WHEN item = 'pen' THEN 1 ELSE 0 END) AS age FROM data",
        contributions=pf.Bound(1, 1),
    )
    assert (got.lower, got.upper) == (0.0, 1.0)  # type: ignore[attr-defined]


def test_an_expression_aliased_as_a_column_needs_its_own_bounds() -> None:
    err = refusal(session(contributions=pf.Bound(1, 1)), "SELECT SUM(age * 2) AS age FROM data")
    assert "the alias 'age' is also a column" in str(err)
    (got,) = aggregates(
        "SELECT SUM(age * 2, 0, 240) AS age FROM data", contributions=pf.Bound(1, 1)
    )
    assert (got.lower, got.upper) == (0.0, 240.0)  # type: ignore[attr-defined]


def test_metadata_by_alias_still_bounds_an_expression_whose_alias_is_no_column() -> None:
    sess = pf.Session(
        DATA,
        "id",
        BIG,
        metadata={"twice": pf.Column(bounds=(0, 240))},
        contributions=pf.Bound(1, 1),
    )
    (got,) = sess.sql("SELECT SUM(age * 2) AS twice FROM data").query.plan.aggregates
    assert (got.lower, got.upper) == (0.0, 240.0)  # type: ignore[attr-defined]


# -- end to end ---------------------------------------------------------------------------------


def test_a_bigquery_query_releases_values_near_the_truth() -> None:
    sess = session(pf.zCDP(1e9, delta=Fraction(1, 2)), keyed=True)
    text = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1e6, delta=1e-5, "
        "max_groups_contributed=3, privacy_unit_column=id) item, "
        "COUNT(*, contribution_bounds_per_group => (0, 3)) AS n, "
        "SUM(quantity, contribution_bounds_per_group => (0, 100)) AS total, "
        "AVG(quantity, contribution_bounds_per_group => (0, 100)) AS mean "
        "FROM data GROUP BY item ORDER BY item"
    )
    released = sess.sql(text, with_error=True)
    # BigQuery's definition: each professor's count, sum and average per item, clamped, then
    # summed (averaged) over professors (privframe's per-unit clamping, docs/sql.md).
    per_unit = DATA.group_by("id", "item").agg(
        n=pl.len().clip(0, 3),
        total=pl.col("quantity").sum().clip(0, 100),
        mean=pl.col("quantity").mean().clip(0, 100),
    )
    truth = (
        per_unit.group_by("item")
        .agg(pl.col("n").sum(), pl.col("total").sum(), pl.col("mean").mean())
        .sort("item")
    )
    # 1-3 rows per professor: nothing is dropped by max_groups_contributed=3.
    assert released["item"].to_list() == ITEMS
    for name in ("n", "total", "mean"):
        error = (released[name] - truth[name]).abs()
        assert (error <= 4 * released[f"{name}_std"] + 1e-9).all(), name


# -- BigQuery's public groups --------------------------------------------------------------------

PUBLIC_GROUPS = (
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=2, delta=1e-5, max_groups_contributed=1, "
    "group_selection_strategy=PUBLIC_GROUPS) item, COUNT(*, contribution_bounds_per_group => "
    "(0, 3)) AS n FROM data RIGHT OUTER JOIN (SELECT DISTINCT item FROM UNNEST(['pen', "
    "'pencil', 'book'])) USING (item) GROUP BY item"
)


def test_a_right_join_on_a_list_of_groups_reports_exactly_the_listed_groups() -> None:
    sess = session()  # item has no keys in metadata: the list is its keys
    query = sess.parse_sql(PUBLIC_GROUPS)
    assert query.query.plan.keys is not None
    assert query.query.plan.selected == ()
    released = query.release()
    assert released["item"].to_list() == ["pen", "pencil", "book"]  # scissors dropped
    assert released.filter(pl.col("item") == "book")["n"].abs().max() < 30  # noise only
    assert sess.spent.delta == 0  # public keys: no delta spent on selection


@pytest.mark.parametrize(
    ("text", "construct"),
    [
        (PUBLIC_GROUPS.replace("RIGHT OUTER", "LEFT OUTER"), "a subquery in a JOIN"),
        (PUBLIC_GROUPS.replace("UNNEST(['pen', 'pencil', 'book'])", "data"), "a subquery in"),
        (PUBLIC_GROUPS.replace(" GROUP BY item", "").replace(" item,", ""), "public groups"),
    ],
)
def test_other_joined_subqueries_are_refused(text: str, construct: str) -> None:
    sess = session()
    assert construct in refusal(sess, text).construct
    assert not sess.ledger


# -- APPROX_QUANTILES: an array of quantiles -----------------------------------------------------


def test_approx_quantiles_is_an_array_of_its_quantiles_each_measured_once() -> None:
    sess = session(keyed=True, contributions=pf.Bound(max_groups=3, max_rows_per_group=3))
    text = (
        "SELECT item, APPROX_QUANTILES(quantity, 4, contribution_bounds_per_group => (0, 100)) "
        "AS quartiles, PERCENTILE_CONT(quantity, 0.5, 0, 100) AS median FROM data GROUP BY item"
    )
    query = sess.sql(text)
    measured = [a.output_name for a in query.query.plan.aggregates]
    # The median is measured once, shared by the array and the column.
    assert measured == ["median", *(f"quantity_p{q}" for q in (0, 25, 75, 100))]
    released = query.release(rho=1e6)
    assert released.columns == ["item", "quartiles", "median"]
    assert released.schema["quartiles"] == pl.List(pl.Float64)
    for row in released.iter_rows(named=True):
        values = DATA.filter(pl.col("item") == row["item"])["quantity"].sort()
        expected = [values.quantile(q, "nearest") for q in (0, 0.25, 0.5, 0.75, 1)]
        assert row["quartiles"] == pytest.approx(expected, abs=1.0)
        assert row["quartiles"][2] == row["median"]


@pytest.mark.parametrize("n", ["0", "101", "2.5"])
def test_approx_quantiles_needs_a_whole_count_of_quantiles(n: str) -> None:
    sess = session(keyed=True)
    text = f"SELECT APPROX_QUANTILES(quantity, {n}) AS q FROM data"
    assert "APPROX_QUANTILES" in refusal(sess, text).construct


@pytest.mark.parametrize(
    ("qualified", "source", "refused"),
    [
        ("members.id", "(SELECT * FROM data) AS members", False),
        ("data.id", "data", False),
        ("other.id", "data", True),
        ("zones.id", "data", True),
    ],
)
def test_a_qualified_privacy_unit_column_must_be_the_private_tables(
    qualified: str, source: str, refused: bool
) -> None:
    sess = pf.Session(
        DATA,
        "id",
        BIG,
        contributions=pf.Bound(max_rows_per_group=3),
        tables={"zones": pl.DataFrame({"id": [1], "zone": ["a"]})},
    )
    text = f"{DP}privacy_unit_column={qualified}) COUNT(*) AS n FROM {source}"
    if refused:
        assert refusal(sess, text).construct == "privacy_unit_column"
    else:
        assert sess.parse_sql(text).options is not None


def test_explain_states_a_selecting_options_query_at_its_own_delta_within_its_epsilon() -> None:
    sess = session(pf.zCDP(10.0, delta=0.01), contributions=pf.Bound(max_rows_per_group=3))
    options = DP.replace("epsilon=2, delta=1e-5", "epsilon=2, delta=1e-3").removesuffix(", ")
    text = f"{options}) item, COUNT(*, "
    text += "contribution_bounds_per_group => (0, 3)) AS n FROM data GROUP BY item"
    explained = sess.parse_sql(text).explain()
    assert explained.plan.selection is not None
    line = explained.single_release(explained.plan.selection)
    assert "at delta = 0.001:" in line
    epsilon = float(line.split("epsilon = ")[1].split()[0])
    assert epsilon <= 2


@pytest.mark.parametrize(
    "text",
    [
        "SELECT item, APPROX_QUANTILES(quantity, 2, 0, 100) AS q FROM data GROUP BY item "
        "ORDER BY q + 1",
        "SELECT item, APPROX_QUANTILES(quantity, 2, 0, 100) AS q FROM data GROUP BY item "
        "ORDER BY CAST(q AS VARCHAR)",
        "SELECT item, APPROX_QUANTILES(quantity, 2, 0, 100) AS q, COUNT(*) AS n FROM data "
        "GROUP BY item HAVING q + 1 = q",
        "SELECT APPROX_QUANTILES(quantity, 2, 0, 100) + 1 AS q FROM data",
        "SELECT APPROX_QUANTILES(quantity) AS q FROM data",
        "SELECT APPROX_QUANTILES(DISTINCT quantity, 2) AS q FROM data",
        "SELECT item, [COUNT(*), 1] AS q FROM data GROUP BY item",
        "SELECT item, [] AS q, COUNT(*) FROM data GROUP BY item",
    ],
)
def test_a_list_column_is_computed_only_whole_and_refused_before_any_charge(text: str) -> None:
    sess = session(keyed=True, contributions=pf.Bound(max_groups=3, max_rows_per_group=3))
    with pytest.raises(pf.SQLError) as refused:
        sess.sql(text, rho=1.0)
    assert refused.value.__context__ is None
    assert not sess.ledger


def test_a_public_groups_list_matches_its_column_ignoring_case() -> None:
    text = PUBLIC_GROUPS.replace("SELECT DISTINCT item", "SELECT DISTINCT ITEM")
    assert session().parse_sql(text).query.plan.keys is not None
