"""pf.plan_budget: each output's 95% interval before anything is spent, equal to the release's."""

from __future__ import annotations

import itertools
import math
import xml.etree.ElementTree as ET
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import privframe as pf
from privframe.api.budget_plan import BudgetPlan
from privframe.api.query import Query
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

REGIONS = ["north", "south", "east", "west"]
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def data() -> pl.DataFrame:
    return pf.datasets.synthetic_transactions(20_000, seed=3)


def _session(data: pl.DataFrame, budget: pf.Budget | None = None) -> pf.Session:
    return pf.Session(data, "user_id", budget or pf.zCDP(1.0), rng=SeededRandomness(1))


def _totals(sess: pf.Session) -> Query:
    return (
        sess.query()
        .bound(max_groups=2, max_rows_per_group=4)
        .group_by("region", keys=REGIONS)
        .agg(pf.count(), pf.sum("amount", bounds=(0, 500)))
    )


def _means(sess: pf.Session) -> Query:
    return (
        sess.query()
        .bound(max_groups=2, max_rows_per_group=4)
        .group_by("region", keys=REGIONS)
        .agg(pf.count(), pf.mean("amount", bounds=(0, 500)), pf.median("age", bounds=(16, 90)))
    )


def _width(plan: BudgetPlan, item: str, output: str) -> float:
    return next(o.width.ci95 for o in plan.outputs if (o.item, o.output) == (item, output))


# --------------------------------------------------------------------------- the numbers


def test_planned_intervals_equal_what_the_releases_then_report(data: pl.DataFrame) -> None:
    sess = _session(data)
    plan = pf.plan_budget(
        {"totals": _totals(sess), "means": _means(sess)},
        rho=0.5,
        shares={"totals": 0.3, "means": 0.7},
    )
    assert plan.split == {"totals": Fraction(3, 20), "means": Fraction(7, 20)}
    assert sess.spent == pf.zCDP(0)  # planning spends nothing

    totals = _totals(sess).release(rho=plan.split["totals"], with_error=True)
    assert totals["count_ci95"].to_list() == [_width(plan, "totals", "count")] * len(REGIONS)
    np.testing.assert_allclose(
        totals["amount_sum_ci95"].to_numpy(), _width(plan, "totals", "amount_sum"), rtol=1e-12
    )

    means = _means(sess).release(rho=plan.split["means"], with_error=True)
    assert means["age_median_rank_ci95"].to_list() == [_width(plan, "means", "age_median")] * len(
        REGIONS
    )
    # A mean's interval is its numerator's over the released count; the planner states
    # the numerator's at the worst mean (a bound), the release at the mean it got.
    mean_width = next(o.width for o in plan.outputs if o.output == "amount_mean")
    assert mean_width.per is not None
    denominators = np.maximum(means["count"].to_numpy(), 1)  # the count the mean divides by
    numerators = means["amount_mean_ci95"].to_numpy() * denominators
    assert np.all(numerators <= mean_width.ci95 * (1 + 1e-9))
    assert np.all(numerators >= 0.5 * mean_width.ci95)


def test_a_plan_of_sql_queries_equals_their_explanations(data: pl.DataFrame) -> None:
    sess = pf.Session(
        data,
        "user_id",
        pf.zCDP(1.0),
        metadata={"amount": pf.Column(bounds=(0, 500)), "region": pf.Column(keys=REGIONS)},
        contributions=pf.Bound(max_groups=2, max_rows_per_group=4),
    )
    query = sess.parse_sql(
        "SELECT region, COUNT(*) AS n, SUM(amount) AS s FROM data GROUP BY region"
    )
    plan = pf.plan_budget([query], rho=0.2)
    rows = {row["output"]: row["width"] for row in query.explain(rho=0.2).rows}
    assert {o.output: o.width for o in plan.outputs} == rows
    assert plan.split == {"query 1": Fraction(1, 5)}


def test_four_times_the_total_halves_gaussian_intervals(data: pl.DataFrame) -> None:
    sess = _session(data)
    plan = pf.plan_budget([_totals(sess)], rho=0.1)
    wider = plan.with_total(0.4)
    for before, after in zip(plan.outputs, wider.outputs, strict=True):
        assert after.width.std == pytest.approx(before.width.std / 2, rel=1e-9)
    assert wider.split == {"query 1": Fraction(2, 5)}


def test_a_pure_dp_plan_spends_epsilon_and_twice_the_total_halves_laplace_noise(
    data: pl.DataFrame,
) -> None:
    sess = _session(data, pf.PureDP(2.0))
    plan = pf.plan_budget([_totals(sess)], epsilon=0.5)
    assert plan.parameter == "epsilon"
    doubled = plan.with_total(epsilon=1.0)
    for before, after in zip(plan.outputs, doubled.outputs, strict=True):
        assert after.width.std == pytest.approx(before.width.std / 2, rel=1e-9)
    released = _totals(sess).release(epsilon=plan.split["query 1"], with_error=True)
    assert released["count_ci95"].to_list() == [_width(plan, "query 1", "count")] * len(REGIONS)
    with pytest.raises(pf.InvalidArgumentError, match="give the total as epsilon"):
        pf.plan_budget([_totals(sess)], rho=0.5)


def test_the_default_total_is_what_the_session_has_left(data: pl.DataFrame) -> None:
    sess = _session(data)
    _totals(sess).release(rho=0.25)
    plan = pf.plan_budget([_totals(sess), _means(sess)])
    assert plan.total == Fraction(3, 4)
    assert plan.split == {"query 1": Fraction(3, 8), "query 2": Fraction(3, 8)}
    assert str(plan).splitlines()[0].endswith("the budget has rho = 0.75 left: it fits")
    assert "it does NOT fit" in str(plan.with_total(1.0))


def test_the_chart_passes_through_the_planned_intervals_and_narrows_with_the_total(
    data: pl.DataFrame,
) -> None:
    sess = _session(data)
    plan = pf.plan_budget({"totals": _totals(sess)}, rho=0.3)
    curves = {s.name: dict(s.points) for s in plan.curves()}
    assert set(curves) == {"count", "amount_sum"}
    for out in plan.outputs:
        points = curves[out.output]
        assert points[float(plan.total)] == out.width.ci95
        widths = [points[t] for t in sorted(points)]
        assert all(a >= b for a, b in itertools.pairwise(widths))
        assert min(points) == pytest.approx(0.003)
        assert max(points) == pytest.approx(3.0)


def test_a_mean_is_drawn_only_with_a_public_guess_of_a_groups_rows(data: pl.DataFrame) -> None:
    sess = _session(data)
    plain = pf.plan_budget({"means": _means(sess)}, rho=0.3)
    assert [s.name for s in plain.curves()] == ["count", "age_median (rows of rank)"]
    assert "not drawn: amount_mean" in plain.html()
    guessed = pf.plan_budget({"means": _means(sess)}, rho=0.3, rows=400)
    names = [s.name for s in guessed.curves()]
    assert names == ["count", "amount_mean (at count = 400)", "age_median (rows of rank)"]
    mean = next(o for o in guessed.outputs if o.output == "amount_mean")
    drawn = dict(guessed.curves()[1].points)[float(guessed.total)]
    assert drawn == pytest.approx(mean.width.ci95 / 400)


def test_a_tuned_query_brings_tunes_bias_beside_the_noise(data: pl.DataFrame) -> None:
    sess = _session(data)
    tuned = _totals(sess).tune(0.05, plan_rho=0.3)
    plan = pf.plan_budget({"tuned": tuned}, rho=0.3)
    bias = {o.output: o.bias for o in plan.outputs}
    assert bias["amount_sum"] is not None
    assert "of its size" in bias["amount_sum"]
    assert "bias (tune)" in str(plan)
    assert "bias (tune)" in plan.html()
    # The plan is of the tuned query: its chosen limits set the noise.
    explained = tuned.query.explain(rho=0.3)
    assert {o.output: o.width for o in plan.outputs} == {
        row["output"]: row["width"] for row in explained.rows
    }


def test_the_html_is_well_formed_and_escapes_hostile_names(data: pl.DataFrame) -> None:
    sess = _session(data)
    hostile = '<img src=x onerror="alert(1)">'
    plan = pf.plan_budget({hostile: _totals(sess), "b&c": _means(sess)}, rho=0.3)
    page = plan.html()
    root = ET.fromstring(page)
    assert hostile not in page
    assert "&lt;img src=x" in page
    assert not list(root.iter("img"))
    svg = next(root.iter(f"{SVG}svg"))
    assert svg.get("class") == "pf-lines"
    assert len(svg.findall(f".//{SVG}polyline")) == 4  # two counts, the sum and the median
    assert len(svg.findall(f".//{SVG}line[@class='pf-mark']")) == 1
    assert plan._repr_html_() == page


@pytest.mark.parametrize(
    ("shares", "error", "match"),
    [
        ({"a": 0.5}, pf.InvalidArgumentError, "missing: \\['b'\\]"),
        ({"a": 0.5, "b": 0.2, "c": 0.1}, pf.InvalidArgumentError, "unknown: \\['c'\\]"),
        ({"a": 0.7, "b": 0.4}, pf.InvalidValueError, "add up to 1.1"),
        ({"a": 0.5, "b": 0}, pf.InvalidBudgetError, "share of 'b'"),
        ({"a": 0.5, "b": math.nan}, pf.PrivframeError, "share of 'b'"),
    ],
)
def test_shares_are_checked(
    data: pl.DataFrame, shares: dict[str, float], error: type[Exception], match: str
) -> None:
    sess = _session(data)
    with pytest.raises(error, match=match):
        pf.plan_budget({"a": _totals(sess), "b": _means(sess)}, rho=0.5, shares=shares)


def test_bad_items_and_totals_are_refused_by_name(data: pl.DataFrame) -> None:
    sess = _session(data)
    with pytest.raises(pf.InvalidArgumentError, match="at least one query"):
        pf.plan_budget([], rho=0.5)
    with pytest.raises(pf.InvalidArgumentError, match="got a DataFrame"):
        pf.plan_budget([data], rho=0.5)
    with pytest.raises(pf.InvalidBudgetError, match="rho"):
        pf.plan_budget([_totals(sess)], rho=-1)
    with pytest.raises(pf.InvalidArgumentError, match="queries of one session"):
        pf.plan_budget([_totals(sess), _totals(_session(data))], rho=0.5)
    with pytest.raises(pf.InvalidArgumentError, match="rows names no query"):
        pf.plan_budget([_totals(sess)], rho=0.5, rows={"other": 10})
    spent = pf.Session(data, "user_id", pf.zCDP(0.1))
    _totals(spent).release(rho=0.1)
    with pytest.raises(pf.InvalidArgumentError, match="no rho left"):
        pf.plan_budget([_totals(spent)])


def test_planning_reads_no_rows(data: pl.DataFrame) -> None:
    def boom(s: pl.Series) -> pl.Series:
        raise AssertionError("the planner read a row")

    lazy = data.lazy().with_columns(pl.col("amount").map_batches(boom, return_dtype=pl.Float64))
    sess = pf.Session(lazy, "user_id", pf.zCDP(1.0))
    plan = pf.plan_budget([_totals(sess), _means(sess)], rho=0.5)
    assert len(plan.outputs) == 5
    plan.html()
    assert len(sess.ledger) == 0


# --------------------------------------------------------------------------- a report spec


SPEC = """
[report]
title = "Plan"
rho = 0.5

[data]
path = "data.parquet"
privacy_unit = "user_id"

[budget]
rho = 1.0
ledger = "ledger.sqlite"

[metadata]
amount = { type = "float64", bounds = [0, 500] }
region = { keys = ["north", "south", "east", "west"] }

[contributions]
max_groups = 2
max_rows_per_group = 4

[[queries]]
name = "by_region"
group_by = ["region"]
aggregates = [{ kind = "count" }, { kind = "sum", column = "amount" }]
share = 0.6

[[marginals]]
name = "regions"
sets = ["region"]
max_rows = 8
share = 0.4
"""


@pytest.fixture
def spec(tmp_path: Path, data: pl.DataFrame) -> Path:
    data.write_parquet(tmp_path / "data.parquet")
    (tmp_path / "spec.toml").write_text(SPEC)
    return tmp_path / "spec.toml"


def test_a_spec_is_planned_at_its_own_split_and_its_marginals_intervals_hold(
    spec: Path, data: pl.DataFrame
) -> None:
    plan = pf.plan_budget(spec)
    assert plan.split == {"by_region": Fraction(3, 10), "regions": Fraction(1, 5)}
    assert not (spec.parent / "ledger.sqlite").exists()  # a plan never creates the ledger
    assert [o.output for o in plan.outputs] == ["count", "amount_sum", "region"]

    sess = _session(data)
    regions = {"region": REGIONS}
    table = sess.marginals(["region"], rho=plan.split["regions"], max_rows=8, domains=regions)[
        ("region",)
    ]
    # Each cell's interval is its noisy measurement ± the half-width, clipped at 0.
    spread = (table["count_ci95_high"] - table["count_ci95_low"]).to_list()
    assert max(spread) == 2 * _width(plan, "regions", "region")

    other = plan.with_shares({"by_region": 0.5, "regions": 0.5})
    assert other.split == {"by_region": Fraction(1, 4), "regions": Fraction(1, 4)}


def test_a_spec_plan_beyond_its_ledgers_balance_says_it_does_not_fit(spec: Path) -> None:
    plan = pf.plan_budget(spec, rho=2.0)
    assert plan.total == 2
    assert "it does NOT fit" in str(plan)


def test_an_output_whose_bounds_are_chosen_at_release_has_no_planned_interval(
    data: pl.DataFrame,
) -> None:
    sess = _session(data)
    query = (
        sess.query()
        .bound(max_groups=2, max_rows_per_group=4)
        .group_by("region", keys=REGIONS)
        .agg(pf.count(), pf.sum("amount", bounds="auto"))
    )
    plan = pf.plan_budget([query], rho=0.5)
    auto = {o.output: o.auto for o in plan.outputs}
    assert auto == {"count": False, "amount_sum": True}
    assert "amount_sum  scales with the bounds chosen at release" in str(plan)
    assert [s.name for s in plan.curves()] == ["count"]
    # The count's share is what is left once the bounds' share is spent, as in the release.
    released = query.release(rho=plan.split["query 1"], with_error=True)
    assert released["count_ci95"].to_list() == [_width(plan, "query 1", "count")] * len(REGIONS)


def test_weights_move_a_querys_budget_between_its_outputs_as_in_the_release(
    data: pl.DataFrame,
) -> None:
    sess = _session(data)
    weights = {"amount_sum": 3.0}
    even = pf.plan_budget({"totals": _totals(sess)}, rho=0.4)
    weighed = pf.plan_budget({"totals": _totals(sess)}, rho=0.4, weights={"totals": weights})
    assert _width(weighed, "totals", "amount_sum") < _width(even, "totals", "amount_sum")
    assert _width(weighed, "totals", "count") > _width(even, "totals", "count")
    released = _totals(sess).release(rho=weighed.split["totals"], weights=weights, with_error=True)
    assert released["count_ci95"].to_list() == [_width(weighed, "totals", "count")] * len(REGIONS)
    with pytest.raises(pf.InvalidArgumentError, match="weights names no query"):
        pf.plan_budget({"totals": _totals(sess)}, rho=0.4, weights={"other": weights})


# --------------------------------------------------------------------------- more families


def test_a_distinct_count_is_planned_exactly_and_a_variance_at_its_worst(
    data: pl.DataFrame,
) -> None:
    sess = _session(data)
    query = (
        sess.query()
        .bound(max_groups=2, max_rows_per_group=4)
        .group_by("region", keys=REGIONS)
        .agg(
            pf.count(),
            pf.count_distinct().alias("people"),
            pf.var("amount", bounds=(0, 500)),
            pf.std("amount", bounds=(0, 500)),
        )
    )
    plan = pf.plan_budget({"q": query}, rho=0.5, rows=1_000)
    released = query.release(rho=plan.split["q"], with_error=True)
    assert released["people_ci95"].to_list() == [_width(plan, "q", "people")] * len(REGIONS)
    counts = np.maximum(released["count"].to_numpy(), 1)
    numerators = released["amount_var_ci95"].to_numpy() * counts
    assert np.all(numerators <= _width(plan, "q", "amount_var") * (1 + 1e-9))
    # A standard deviation's numbers are its variance's: listed, never drawn as its own.
    std = next(o for o in plan.outputs if o.output == "amount_std")
    assert not std.width.own_units
    assert "(of the variance)" in std.interval
    assert plan.drawn(std) is None
    assert "amount_std" not in [s.name for s in plan.curves()]


def test_an_approx_dp_plan_spends_the_delta_it_is_given_as_the_release_does(
    data: pl.DataFrame,
) -> None:
    sess = _session(data, pf.ApproxDP(2.0, 1e-5))
    laplace = pf.plan_budget({"q": _totals(sess)}, epsilon=0.5)
    assert laplace.deltas == {}
    gaussian = pf.plan_budget({"q": _totals(sess)}, epsilon=0.5, delta=1e-7)
    assert gaussian.deltas == {"q": Fraction(1, 10**7)}
    released = _totals(sess).release(
        epsilon=gaussian.split["q"], delta=gaussian.deltas["q"], with_error=True
    )
    assert released["count_ci95"].to_list() == [_width(gaussian, "q", "count")] * len(REGIONS)


def test_queries_that_choose_their_groups_share_the_delta_left_and_both_release(
    data: pl.DataFrame,
) -> None:
    sess = pf.Session(data, "user_id", pf.zCDP(1.0, delta=1e-6), rng=SeededRandomness(2))
    limited = sess.query().bound(max_groups=2, max_rows_per_group=4)
    queries = {
        "months": limited.group_by("month").agg(pf.count()),
        "ages": limited.group_by("age").agg(pf.count()),
        "regions": _totals(sess),
    }
    plan = pf.plan_budget(queries, rho=0.6)
    assert plan.deltas == {"months": Fraction(1, 2 * 10**6), "ages": Fraction(1, 2 * 10**6)}
    assert "delta = 1e-06 left: it fits" in plan.summary()
    given = pf.plan_budget(queries, rho=0.6, delta={"months": 8e-7})
    assert given.deltas == {"months": Fraction(8, 10**7), "ages": Fraction(2, 10**7)}
    with pytest.raises(pf.InvalidValueError, match="delta is only spent by queries that choose"):
        pf.plan_budget(queries, rho=0.6, delta={"regions": 1e-7})
    for name, query in queries.items():
        query.release(rho=plan.split[name], delta=plan.deltas.get(name))
    assert len(sess.ledger) == 3


def test_a_pure_dp_plan_refuses_delta(data: pl.DataFrame) -> None:
    sess = _session(data, pf.PureDP(1.0))
    with pytest.raises(pf.InvalidValueError, match="spends no delta"):
        pf.plan_budget([_totals(sess)], epsilon=0.5, delta=1e-7)


def test_an_sql_query_whose_options_fix_its_budget_is_refused_by_name(
    data: pl.DataFrame,
) -> None:
    sess = pf.Session(
        data,
        "user_id",
        pf.zCDP(1.0, delta=1e-6),
        metadata={"region": pf.Column(keys=REGIONS)},
        contributions=pf.Bound(max_groups=2, max_rows_per_group=4),
    )
    fixed = sess.parse_sql(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-7) "
        "region, COUNT(*) AS n FROM data GROUP BY region"
    )
    with pytest.raises(pf.InvalidArgumentError, match="'fixed' states its own budget in OPTIONS"):
        pf.plan_budget({"fixed": fixed}, rho=0.5)


def test_names_with_control_characters_still_make_a_well_formed_page(
    data: pl.DataFrame, tmp_path: Path
) -> None:
    sess = _session(data)
    name = "a\x0bb\x00c\ud800d"
    page = pf.plan_budget({name: _totals(sess)}, rho=0.3).html()
    ET.fromstring(page)
    (tmp_path / "plan.html").write_text(page, encoding="utf-8")


def test_extreme_totals_and_bad_shares_are_refused_or_drawn_without_a_traceback(
    data: pl.DataFrame,
) -> None:
    sess = _session(data)
    plan = pf.plan_budget([_totals(sess)], rho=1e300)
    ET.fromstring(plan.html())
    with pytest.raises(pf.InvalidArgumentError, match="shares is a mapping"):
        plan.with_shares(None)  # type: ignore[arg-type]
