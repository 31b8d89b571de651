"""The planner: sensitivity from public parameters, the ρ split, σ, and explain."""

from __future__ import annotations

import itertools
import math
import re
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import privframe as pf
from privframe.api.query import Bound, Plan
from privframe.plan.planner import plan_release, resolve_limits


def plan(
    n_keys: int = 10,
    *,
    k: int | None = None,
    m: int | None = None,
    big_m: int | None = None,
    aggregates: tuple = (pf.count(),),
) -> Plan:
    keys = pf.keys.from_list("g", [f"k{i}" for i in range(n_keys)])
    return Plan(bound=Bound(k, m, big_m), group_by=("g",), keys=keys, aggregates=tuple(aggregates))


def brute_force_squares(n_keys: int, k: int, m: int, big_m: int | None) -> int:
    """max sum_g w_g² over integer w with 0 <= w_g <= m, <= k non-zero, sum <= M."""
    best = 0
    for w in itertools.product(range(m + 1), repeat=n_keys):
        if sum(1 for x in w if x) > k or (big_m is not None and sum(w) > big_m):
            continue
        best = max(best, sum(x * x for x in w))
    return best


CASES = [
    (3, 5, None),
    (3, 5, 7),
    (3, 5, 10),
    (3, 5, 15),
    (3, 5, 100),
    (4, 3, 5),
    (5, 2, 9),
    (2, 4, 1),
    (5, 1, 3),
    (1, 6, 4),
    (6, 3, 11),
]


@pytest.mark.parametrize(("k", "m", "big_m"), CASES)
def test_sum_of_squares_matches_brute_force(k, m, big_m):
    n_keys = 6
    limits = resolve_limits(plan(n_keys, k=k, m=m, big_m=big_m), has_unit=True)
    assert limits.squares == brute_force_squares(n_keys, min(k, n_keys), m, big_m)
    # The count's L2 sensitivity is sqrt(S), rounded up, never down.
    release = plan_release(plan(n_keys, k=k, m=m, big_m=big_m), True, 0.5)
    count = release.measurement("count")
    assert Fraction(count.l2_sensitivity) ** 2 >= limits.squares
    assert count.l2_sensitivity == pytest.approx(math.sqrt(limits.squares), rel=1e-15)
    assert limits.squares <= min(k * m * m, (big_m or k * m) ** 2)


def test_without_max_rows_it_is_sqrt_k_times_m():
    release = plan_release(plan(10, k=3, m=5), True, 0.5)
    assert release.measurement("count").l2_sensitivity == pytest.approx(math.sqrt(3) * 5)
    assert release.limits.squares == 75


def test_max_groups_is_capped_by_the_number_of_keys():
    assert resolve_limits(plan(2, k=5, m=3), True).squares == 2 * 9
    # No max_groups: every key may be a group.
    assert resolve_limits(plan(4, m=3), True).squares == 4 * 9


def test_only_max_rows():
    # m = M: the worst case puts all M rows in one group.
    assert resolve_limits(plan(10, big_m=7), True).squares == 49
    assert resolve_limits(plan(10, k=3, big_m=7), True).squares == 49


def test_max_rows_per_group_above_max_rows_is_capped():
    limits = resolve_limits(plan(10, k=3, m=10, big_m=4), True)
    assert limits.max_rows_per_group == 4
    assert limits.squares == 16


def test_global_aggregate_has_one_group():
    p = Plan(bound=Bound(5, 3, None), aggregates=(pf.count(),))
    assert resolve_limits(p, True).squares == 9


def test_without_unit_each_row_is_a_unit():
    # The bound is irrelevant: one row changes one count by one.
    assert resolve_limits(plan(10, k=3, m=5), has_unit=False).squares == 1
    release = plan_release(plan(10), False, 0.5)
    assert release.measurement("count").l2_sensitivity == 1.0
    assert release.measurement("count").sigma == 1.0


def test_unit_without_bound_is_refused():
    with pytest.raises(pf.InvalidValueError, match=r"\.bound\("):
        resolve_limits(plan(10), True)
    with pytest.raises(pf.InvalidValueError, match=r"\.bound\("):
        resolve_limits(plan(10, k=3), True)


@pytest.mark.parametrize(
    ("bounds", "magnitude", "half_width"),
    [((0, 1000), 1000, 500), ((-5, 3), 5, 4), ((-1000, 10), 1000, 505), ((2.5, 7.25), 7.25, 2.375)],
)
@pytest.mark.parametrize(("k", "m", "big_m"), [(3, 5, None), (4, 3, 5), (1, 1, None)])
def test_sum_and_mean_share_a_count_and_a_centred_sum(bounds, magnitude, half_width, k, m, big_m):
    aggs = (pf.sum("x", bounds=bounds), pf.mean("x", bounds=bounds))
    p = plan(10, k=k, m=m, big_m=big_m, aggregates=aggs)
    release = plan_release(p, True, 0.25)
    root_s = math.sqrt(release.limits.squares)
    by_kind = {mm.kind: mm for mm in release.measurements}
    assert sorted(by_kind) == ["centred_sum", "count"]
    assert by_kind["count"].l2_sensitivity == pytest.approx(root_s, rel=1e-12)
    assert by_kind["centred_sum"].l2_sensitivity == pytest.approx(root_s * half_width, rel=1e-12)
    for mm in release.measurements:
        # σ = Δ / sqrt(2ρ), with ρ = Δ²/(2σ²) never above the measurement's share.
        assert mm.sigma == pytest.approx(
            mm.l2_sensitivity / math.sqrt(2 * float(mm.exact_share)), rel=1e-12
        )
        assert Fraction(mm.l2_units) ** 2 / (2 * Fraction(mm.sigma_units) ** 2) <= mm.exact_share
        # One row's grid value stays below 2^32 units and the noise within the sampler's range.
        assert mm.row_units <= 2**32
        assert mm.sigma_units <= 2**40


@pytest.mark.parametrize(
    "bounds", [(0, 1000), (-5, 3), (-1000, 10), (2.5, 7.25), (900, 1000), (-1000, -999)]
)
def test_a_sum_alone_is_as_exact_as_a_plain_sum(bounds):
    # Centred sum + midpoint·count at the default split: variance S·max(|L|,|U|)²/(2ρ),
    # the plain sum's (up to the grid's rounding of the centre).
    p = plan(10, k=3, m=5, aggregates=(pf.sum("x", bounds=bounds),))
    release = plan_release(p, True, 0.5)
    std = release.outputs[0].aggregate.width(release).std
    plain = math.sqrt(release.limits.squares) * max(map(abs, bounds)) / math.sqrt(2 * 0.5)
    assert float(std) == pytest.approx(plain, rel=1e-6)


def test_a_sum_centred_on_zero_reads_no_count():
    p = plan(10, k=3, m=5, aggregates=(pf.sum("x", bounds=(-4, 4)),))
    release = plan_release(p, True, 0.5)
    (only,) = release.measurements
    assert only.kind == "centred_sum"
    assert only.exact_share == Fraction(1, 2)


@pytest.mark.parametrize("rho", [0.1, 1 / 3, 1e-5, 0.7, 2.0])
def test_rho_split_never_exceeds_rho(rho):
    aggs = (
        pf.count(),
        pf.sum("x", bounds=(0, 10)),
        pf.mean("x", bounds=(0, 10)),
        pf.mean("y", bounds=(-1, 1)).alias("ym"),
    )
    release = plan_release(plan(10, k=2, m=3, aggregates=aggs), True, rho)
    total = sum((mm.exact_share for mm in release.measurements), Fraction(0))
    assert total == release.cost.exact_rho
    assert release.cost.rho <= rho
    assert release.cost.rho == pytest.approx(rho, rel=1e-12)
    assert release.cost.delta == 0


def test_default_split_minimises_the_relative_variances():
    # count(): its variance a/ρ_N. The mean at its worst case (a bound): centred-sum and
    # count terms of equal size, b/ρ_C + b/ρ_N, least 4b/ρ alone. Each output counts
    # relative to its least: ρ_m ∝ sqrt(Σ relative terms) = sqrt(1 + 1/4) : sqrt(1/4).
    aggs = (pf.count(), pf.mean("x", bounds=(0, 10)))
    release = plan_release(plan(10, k=2, m=3, aggregates=aggs), True, 1.0)
    assert [mm.kind for mm in release.measurements] == ["count", "centred_sum"]
    expected = math.sqrt(1.25) / (math.sqrt(1.25) + 0.5)
    assert float(release.measurement("count").exact_share) == pytest.approx(expected, rel=1e-12)
    assert release.cost == pf.zCDP(1)


def test_weights():
    # Outputs that share no measurement get ρ in proportion to their weights.
    aggs = (pf.count(), pf.sum("x", bounds=(-10, 10)))
    release = plan_release(
        plan(10, k=2, m=3, aggregates=aggs), True, 1.0, {"count": 3.0, "x_sum": 1.0}
    )
    assert float(release.measurement("count").exact_share) == pytest.approx(0.75, rel=1e-12)
    assert float(release.measurements[1].exact_share) == pytest.approx(0.25, rel=1e-12)
    # Unnamed outputs weigh 1.
    partial = plan_release(plan(10, k=2, m=3, aggregates=aggs), True, 1.0, {"count": 4})
    assert float(partial.measurement("count").exact_share) == pytest.approx(0.8, rel=1e-12)
    # Each share is exact, and the shares add up to exactly the ρ asked.
    assert sum(mm.exact_share for mm in partial.measurements) == 1
    assert partial.cost == pf.zCDP(1)


def test_bad_weights():
    p = plan(10, k=2, m=3, aggregates=(pf.count(),))
    with pytest.raises(pf.InvalidValueError, match="nope"):
        plan_release(p, True, 1.0, {"nope": 1.0})
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(pf.InvalidBudgetError, match="count"):
            plan_release(p, True, 1.0, {"count": bad})


def test_same_sum_twice_is_measured_once():
    aggs = (pf.sum("x", bounds=(0, 10)), pf.sum("x", bounds=(0, 10)).alias("again"))
    release = plan_release(plan(10, k=2, m=3, aggregates=aggs), True, 1.0)
    assert [mm.kind for mm in release.measurements] == ["centred_sum", "count"]
    assert release.outputs[0].measurements == release.outputs[1].measurements


@pytest.mark.parametrize("rho", [0.0, -1.0, math.inf, math.nan])
def test_bad_rho(rho):
    with pytest.raises(pf.InvalidBudgetError, match="rho"):
        plan_release(plan(10, k=2, m=3), True, rho)


def test_no_aggregates():
    with pytest.raises(pf.InvalidValueError, match="agg"):
        plan_release(plan(10, k=2, m=3, aggregates=()), True, 1.0)


@pytest.mark.parametrize("bounds", [(0, 1e-300), (-1e308, 1e308), (0, 1.7e308)])
def test_extreme_bounds_are_refused_clearly(bounds):
    p = plan(10, k=2, m=3, aggregates=(pf.sum("x", bounds=bounds),))
    with pytest.raises(pf.InvalidValueError, match="'x'"):
        plan_release(p, True, 1.0)


def test_close_bounds_get_their_own_measurements() -> None:
    # (0, 1e6) and (0, 1000001) print alike with 6 significant digits; they must
    # not share a measurement (each output is clipped to its own bounds).
    sess = pf.Session(pl.DataFrame({"u": [1], "x": [5.0]}), "u", pf.zCDP(1e6))
    explanation = (
        sess.query()
        .bound(max_rows_per_group=1)
        .agg(pf.sum("x", (0, 1_000_000)).alias("a"), pf.sum("x", (0, 1_000_001)).alias("b"))
        .explain(rho=1.0)
    )
    keys = [m.key for m in explanation.measurements]
    assert len(set(keys)) == 3  # two centred sums and the count they share
    assert "centred_sum(x, [0, 1e+06])" in keys  # exact short forms stay short


def test_centred_half_width_is_exact_for_odd_grid_bounds() -> None:
    # lo + hi odd: the centre is floor((lo + hi)/2) and the half-width must be the
    # larger side, ceil((hi − lo)/2); the smaller side would understate sensitivity.
    sess = pf.Session(pl.DataFrame({"u": [1], "x": [1.0]}), "u", pf.zCDP(1e6))
    query = sess.query().bound(max_rows_per_group=1).agg(pf.mean("x", (1 + 2**-31, 2)))
    centred = next(m for m in query.explain(rho=1.0).measurements if m.kind == "centred_sum")
    lo, hi = centred.lower_units, centred.upper_units
    assert (lo + hi) % 2 == 1
    assert centred.row_units == math.ceil((hi - lo) / 2)


def test_limits_describe():
    assert "S = k·m² = 75" in resolve_limits(plan(10, k=3, m=5), True).describe()
    text = resolve_limits(plan(10, k=3, m=5, big_m=7), True).describe()
    assert "q=1 full groups + r=2 rows" in text
    assert "S = q·m² + r² = 29" in text


# -- explain ----------------------------------------------------------------------------


def _data(n: int, seed: int, sentinel: float) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "user": rng.integers(0, max(n // 3, 1), n),
            "region": rng.choice(["north", "south", "secret-region"], n),
            "amount": np.append(rng.uniform(0, 100, n - 1), sentinel),
        }
    )


def _query(sess: pf.Session):
    return (
        sess.query()
        .filter(pl.col("amount") > 1)
        .bound(max_groups=2, max_rows_per_group=3, max_rows=5)
        .group_by("region", keys=["north", "south", "east", "west"])
        .agg(
            pf.count(),
            pf.sum("amount", bounds=(0, 1000)),
            pf.mean("amount", bounds=(0, 1000)).alias("avg"),
        )
    )


def test_explain_is_data_independent_and_spends_nothing():
    small = pf.Session(_data(7, 0, 987654.321), "user", pf.zCDP(1.0))
    large = pf.Session(_data(5000, 1, 123456.789), "user", pf.zCDP(1.0))
    a, b = _query(small).explain(rho=0.3), _query(large).explain(rho=0.3)
    assert str(a) == str(b)
    assert a.rows == b.rows
    assert a.plan.measurements == b.plan.measurements
    for text in (str(a), repr(a)):
        assert "987654" not in text
        assert "secret-region" not in text
    for sess in (small, large):
        assert sess.spent.rho == 0
        assert sess.ledger == ()


def test_explain_shows_sensitivity_split_sigma_and_error():
    sess = pf.Session(_data(50, 2, 1.0), "user", pf.zCDP(1.0))
    expl = _query(sess).explain(rho=0.3)
    text = str(expl)
    assert "rho = 0.3" in text
    assert "S = q·m² + r² = 13" in text  # k=2, m=3, M=5: one full group + 2 rows
    for mm in expl.measurements:
        assert f"sigma = {mm.sigma:.6g}" in text
        assert f"95% ± {mm.ci95:.6g}" in text
    assert [row["output"] for row in expl.rows] == ["count", "amount_sum", "avg"]
    total = sum(mm.exact_share for mm in expl.measurements)
    assert total == Fraction(3, 10) == expl.plan.cost.exact_rho
    # explain and release plan the same measurements.
    assert expl.plan == plan_release(_query(sess).plan, True, 0.3)


@pytest.mark.parametrize("rho", [1e-30, 1e-40])
def test_noise_above_the_samplers_range_is_refused_before_charging(rho):
    df = pl.DataFrame({"user": [1, 2], "region": ["north", "south"], "amount": [1.0, 2.0]})
    sess = pf.Session(df, "user", pf.zCDP(1e14))
    query = (
        sess.query()
        .bound(max_rows_per_group=1)
        .group_by("region", keys=["north", "south"])
        .agg(pf.count())
    )
    with pytest.raises(pf.InvalidBudgetError, match="rho"):
        query.explain(rho=rho)
    with pytest.raises(pf.InvalidBudgetError, match="rho"):
        query.release(rho=rho)
    assert sess.spent.rho == 0
    assert sess.ledger == ()


def test_rho_too_small_for_the_bounds_is_refused_clearly():
    p = plan(10, k=2, m=3, aggregates=(pf.sum("x", bounds=(0, 1e6)),))
    with pytest.raises(pf.InvalidBudgetError, match="'x'"):
        plan_release(p, True, 1e-30)


@pytest.mark.parametrize("rho", [1e-300, 5e-324, 1e-40])
def test_a_rho_too_small_for_exact_noise_names_the_cause_and_the_rho_that_works(rho):
    sess = pf.Session(_data(50, 3, 1.0), "user", pf.zCDP(1.0))
    with pytest.raises(pf.InvalidBudgetError) as err:
        _query(sess).release(rho=rho)
    message = str(err.value)
    assert isinstance(err.value, pf.PrivframeError)
    assert err.value.__context__ is None
    assert f"rho={rho:.3g} is too small for exact noise at these bounds" in message
    assert "bounds are too extreme" not in message
    # Too little noise is raised to the sampler's floor: the range has no upper end.
    found = re.search(r"rho from (\S+) up;", message)
    assert found is not None
    low = float(found.group(1))
    # The range it gives is the range that works, to a factor of two.
    for inside in (low, 1e300):
        assert _query(sess).explain(rho=inside).plan.cost == pf.zCDP(inside)
    with pytest.raises(pf.InvalidBudgetError, match=r"is too small"):
        _query(sess).explain(rho=low / 4)
    assert sess.spent == pf.zCDP(0)
    assert sess.ledger == ()


def test_count_sum_and_mean_waste_no_rho_and_lie_on_the_two_measurement_curve():
    # The target: max_rows=10, max_groups=3, amount in [0, 1000], ρ = 1. Count σ
    # and sum σ must satisfy count σ = 10/sqrt(2ρ_c), sum σ² = 5000²/(2ρ_s) + 500²·count σ²
    # with ρ_c + ρ_s = 1: two measurements serve the three outputs.
    bounds = (0, 1000)
    aggs = (pf.count(), pf.sum("amount", bounds=bounds), pf.mean("amount", bounds=bounds))
    release = plan_release(plan(5, k=3, m=10, big_m=10, aggregates=aggs), True, 1.0)
    assert sorted(m.kind for m in release.measurements) == ["centred_sum", "count"]
    assert sum(m.exact_share for m in release.measurements) == 1
    rho_c = float(release.measurement("count").exact_share)
    count_sigma = release.measurement("count").sigma
    assert count_sigma == pytest.approx(10 / math.sqrt(2 * rho_c), rel=1e-12)
    sum_std = release.outputs[1].aggregate.width(release).std
    curve = math.sqrt(5000**2 / (2 * (1 - rho_c)) + 500**2 * count_sigma**2)
    assert sum_std == pytest.approx(curve, rel=1e-5)


@pytest.mark.parametrize("make", [pf.var, pf.std])
def test_a_variance_alone_splits_its_three_measurements_evenly(make):
    # Its first-order terms misjudge it (docs/sensitivity.md §6): equal parts.
    release = plan_release(plan(5, k=2, m=3, aggregates=(make("x", (0, 100)),)), True, 0.3)
    assert [m.exact_share for m in release.measurements] == [Fraction(1, 10)] * 3
