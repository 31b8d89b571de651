"""tune's design (bins, ρ split, σ, sensitivity) and its search, without noise or a session."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import privframe as pf
from privframe.engines.contributions import ContributionSpec, contribution_tables
from privframe.engines.spec import AggregationSpec
from privframe.plan.aggregates import Aggregate, Bounded
from privframe.plan.ir import Bound, Plan
from privframe.plan.keys import from_list
from privframe.plan.tuning import (
    MAGNITUDE_EDGES,
    SCALE,
    TAIL_BINS,
    TuningDesign,
    design,
    group_edges,
    integer_edges,
    read,
)
from privframe.plan.tuning_choice import choose

KEYS = ["a", "b", "c", "d", "e"]


def _plan(*aggregates: Aggregate, bound: Bound | None = None) -> Plan:
    return Plan(bound=bound, group_by=("g",), keys=from_list("g", KEYS), aggregates=aggregates)


def test_integer_edges_are_half_octaves_from_one() -> None:
    assert integer_edges(1) == (1,)
    assert integer_edges(100) == (1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91)


@pytest.mark.parametrize("rho", [Fraction(1, 10), Fraction(1, 3), Fraction(7, 1000)])
def test_the_pieces_split_rho_exactly_and_each_sigma_fits_its_share(rho: Fraction) -> None:
    d = design(_plan(pf.count(), pf.mean("x", (0, 10)), pf.sum("y", (0, 5))), True, rho)
    assert [p.kind for p in d.pieces] == ["groups", "rows", "values", "values"]
    assert sum((p.rho for p in d.pieces), Fraction(0)) == rho
    assert d.cost.exact_rho == rho
    for p in d.pieces:
        assert Fraction(p.l2_units) ** 2 / (2 * Fraction(p.sigma_units) ** 2) <= p.rho
    assert [p.l2_units for p in d.pieces] == [1, SCALE, SCALE, SCALE]


def test_the_ledger_description_holds_one_discrete_gaussian_event_per_histogram() -> None:
    d = design(_plan(pf.count()), True, Fraction(1, 5))
    events = d.describe()["events"]
    assert isinstance(events, list)
    assert len(events) == 2
    assert all(e["type"] == "gaussian" and e["discrete"] for e in events)
    cost = sum(Fraction(1, 2) / Fraction(e["noise_multiplier"]) ** 2 for e in events)
    assert cost <= Fraction(1, 5)
    assert cost > Fraction(1, 5) * (1 - Fraction(1, 10**9))


def test_only_what_applies_is_measured() -> None:
    one_group = Plan(aggregates=(pf.count(), pf.sum("x", (0, 1))))
    assert [p.kind for p in design(one_group, True, Fraction(1)).pieces] == ["rows", "values"]
    assert [p.kind for p in design(one_group, False, Fraction(1)).pieces] == ["values"]


@pytest.mark.parametrize(
    ("plan", "has_unit", "message"),
    [
        (Plan(), True, "no aggregates"),
        (Plan(group_by=("g",), aggregates=(pf.count(),)), True, "public group keys"),
        (_plan(pf.count()), False, "nothing to tune"),
    ],
)
def test_what_cannot_be_tuned_is_refused(plan: Plan, has_unit: bool, message: str) -> None:
    with pytest.raises(pf.InvalidValueError, match=message):
        design(plan, has_unit, Fraction(1))


def test_a_rho_too_small_for_the_sampler_is_refused() -> None:
    with pytest.raises(pf.InvalidBudgetError, match="too small to tune"):
        design(_plan(pf.count()), True, Fraction(1, 10**40))


def _contributions(frame: pl.DataFrame, d: TuningDesign) -> dict[str, np.ndarray]:
    rows = AggregationSpec((), "u", ("g",), pl.DataFrame({"g": KEYS}), None, 1, None, (), seed=0)
    spec = ContributionSpec(
        rows,
        SCALE,
        d.pieces[0].edges,
        d.pieces[1].edges,
        ("x",),
        MAGNITUDE_EDGES,
    )
    engine = pf.Session(frame, "u", pf.zCDP(1.0)).__privframe_pipeline__().engine
    keyed = frame.with_columns(pl.col("g").cast(pl.Enum(KEYS)).to_physical().alias("__key"))
    tables = contribution_tables(keyed.lazy().select("u", "__key", "x"), spec, ["__key"])
    via_engine = engine.contributions(spec)  # type: ignore[attr-defined]
    assert np.array_equal(via_engine.groups, tables.groups)
    return {"groups": tables.groups, "rows": tables.rows, "x": tables.values["x"]}


def test_removing_a_unit_moves_each_histogram_by_at_most_its_sensitivity() -> None:
    # The privacy argument of privframe.plan.tuning, checked on random data: neighbours
    # differ by one unit, and each histogram moves by at most its l2_units in L2.
    rng = np.random.default_rng(7)
    d = design(_plan(pf.sum("x", (0, 1))), True, Fraction(1))
    for _ in range(5):
        n = 400
        frame = pl.DataFrame(
            {
                "u": rng.integers(0, 30, n),
                "g": rng.choice(KEYS, n),
                "x": rng.lognormal(2, 3, n) * rng.choice([-1, 1], n),
            }
        )
        full = _contributions(frame, d)
        for unit in rng.choice(30, 6, replace=False):
            without = _contributions(frame.filter(pl.col("u") != unit), d)
            for piece, name in zip(d.pieces, ("groups", "rows", "x"), strict=True):
                change = np.linalg.norm((full[name] - without[name]).astype(float))
                assert change <= piece.l2_units


def _estimates(d: TuningDesign, **arrays: np.ndarray):
    return read(d, {p.name: arrays[p.kind if p.column is None else p.column] for p in d.pieces})


def test_noise_level_bins_read_as_empty() -> None:
    d = design(_plan(pf.count()), True, Fraction(1, 100))
    groups = np.zeros(d.pieces[0].bins)
    groups[2] = 500
    groups[0] = d.pieces[0].threshold * 0.9
    rows = np.zeros(d.pieces[1].bins)
    rows[0] = 500 * SCALE
    estimates = _estimates(d, groups=groups, rows=rows)
    assert estimates.groups is not None
    assert estimates.groups.weight.tolist() == [0, 0, 500, 0, 0]
    assert estimates.units == 500


def test_limits_follow_the_contributions_when_noise_is_small() -> None:
    # Every unit is in 3 groups with 5 rows in each: k = 3 and m in the bin of 5 drop nothing.
    plan = _plan(pf.count(), bound=Bound(max_groups=1, max_rows_per_group=1))
    d = design(plan, True, Fraction(10**6))
    groups = np.zeros(d.pieces[0].bins)
    groups[group_edges(5).index(3)] = 10_000
    rows = np.zeros(d.pieces[1].bins)
    rows[integer_edges(5).index(4)] = 10_000 * SCALE  # the bin [4, 6)
    choice = choose(plan, _estimates(d, groups=groups, rows=rows), Fraction(1), None)
    assert choice.plan.bound == Bound(max_groups=3, max_rows_per_group=5)
    assert choice.error < choice.given_error


def test_value_bounds_shrink_to_the_values_and_keep_their_middle() -> None:
    # Values spread over [64, 128): bounds (0, 1e6) are far too wide.
    plan = _plan(pf.sum("x", (0, 1e6)), bound=Bound(max_groups=5, max_rows_per_group=1))
    d = design(plan, True, Fraction(10**6))
    groups = np.zeros(d.pieces[0].bins)
    groups[0] = 10_000
    rows = np.zeros(d.pieces[1].bins)
    rows[0] = 10_000 * SCALE
    values = np.zeros(d.pieces[2].bins)
    middle = len(MAGNITUDE_EDGES)
    first = MAGNITUDE_EDGES.index(64.0)
    values[middle + first + 1 : middle + first + 3] = 5_000 * SCALE  # [64, 90.5), [90.5, 128)
    choice = choose(plan, _estimates(d, groups=groups, rows=rows, x=values), Fraction(1), None)
    (tuned,) = choice.plan.aggregates
    assert isinstance(tuned, Bounded)
    assert 0 <= tuned.lower <= 90.6
    assert 90.5 <= tuned.upper <= 128.0
    assert choice.error < choice.given_error


def test_without_signal_the_given_query_is_kept() -> None:
    plan = _plan(pf.count(), pf.sum("x", (0, 10)), bound=Bound(max_groups=2, max_rows_per_group=3))
    d = design(plan, True, Fraction(1))
    nothing = {p.name: np.zeros(p.bins) for p in d.pieces}
    choice = choose(plan, read(d, nothing), Fraction(1), None)
    assert choice.plan.bound == Bound(max_groups=2, max_rows_per_group=3)
    assert [(a.lower, a.upper) for a in choice.plan.aggregates[1:]] == [(0.0, 10.0)]  # type: ignore[attr-defined]
    assert any(math.isnan(row[2]) and "no signal" in row[3] for row in choice.table)


def _tailed_values(d: TuningDesign, tail_units: float) -> dict[str, np.ndarray]:
    """10,000 units with one row each, values in [512, 724), and ``tail_units`` in each of the
    four buckets from 2,896 to 11,585: each below the threshold, so only the raw tail shows them."""
    groups = np.zeros(d.pieces[0].bins)
    groups[0] = 10_000
    rows = np.zeros(d.pieces[1].bins)
    rows[0] = 10_000 * SCALE
    values = np.zeros(d.pieces[2].bins)
    positive = len(MAGNITUDE_EDGES) + 1  # the negative buckets and the zero bucket come first
    values[positive + MAGNITUDE_EDGES.index(512.0)] = 10_000 * SCALE
    first = positive + MAGNITUDE_EDGES.index(2.0**11.5)
    values[first : first + 4] = tail_units * SCALE
    assert tail_units * SCALE < d.pieces[2].threshold
    return {"groups": groups, "rows": rows, "x": values}


def test_tail_mass_below_the_threshold_is_counted_and_keeps_the_upper_bound_above_it() -> None:
    # 20 units in each of the four buckets [2896, 11585): 80 of 10,080 units, 8% of the sum.
    # Thresholded alone they are invisible, and the upper bound used to fall to 724.
    plan = _plan(pf.sum("x", (0, 20_000)), bound=Bound(max_groups=5, max_rows_per_group=1))
    d = design(plan, True, Fraction(1, 10))
    choice = choose(plan, _estimates(d, **_tailed_values(d, 20)), Fraction(1, 10), None)
    (tuned,) = choice.plan.aggregates
    assert isinstance(tuned, Bounded)
    assert tuned.upper >= 4096
    assert choice.bias is not None
    # What the chosen bound clips of the tail, estimated from the raw buckets.
    first = MAGNITUDE_EDGES.index(2.0**11.5)
    mids = (
        np.array(MAGNITUDE_EDGES[first : first + 4]) + MAGNITUDE_EDGES[first + 1 : first + 5]
    ) / 2
    true_clipped = 20 * np.clip(mids - tuned.upper, 0, None).sum()
    total = 10_000 * (512 + 2.0**9.5) / 2 + 20 * mids.sum()
    assert choice.bias.clipped["x_sum"] == pytest.approx(true_clipped / total, rel=1e-6)


def test_an_empty_tail_costs_the_uncertainty_of_its_noise_and_no_bias() -> None:
    plan = _plan(pf.sum("x", (0, 20_000)), bound=Bound(max_groups=5, max_rows_per_group=1))
    d = design(plan, True, Fraction(1, 10))
    choice = choose(plan, _estimates(d, **_tailed_values(d, 0)), Fraction(1, 10), None)
    assert choice.bias is not None
    assert choice.given_bias is not None
    (tuned,) = choice.plan.aggregates
    assert isinstance(tuned, Bounded)
    assert tuned.upper < 2896
    assert choice.bias.bias["x_sum"] == pytest.approx(0, abs=1e-6)
    # The tail buckets' noise (σ units each) could hide mass the chosen bound would clip.
    assert choice.bias.uncertainty["x_sum"] > 0
    assert choice.given_bias.uncertainty["x_sum"] == 0  # the given bound clips no bucket read raw
    b = choice.bias
    assert choice.error == pytest.approx(
        b.bias["x_sum"] ** 2 + b.uncertainty["x_sum"] ** 2 + b.noise["x_sum"] ** 2
    )


def test_the_raw_tail_spans_a_few_buckets_beyond_the_support_and_not_beyond_the_given_bounds() -> (
    None
):
    plan = _plan(pf.sum("x", (0, 5000)), bound=Bound(max_groups=5, max_rows_per_group=1))
    d = design(plan, True, Fraction(1, 10))
    estimates = _estimates(d, **_tailed_values(d, 0))
    h = estimates.values["x"]
    assert h.tail is not None
    bucket = len(MAGNITUDE_EDGES) + 1 + MAGNITUDE_EDGES.index(512.0)
    read_raw = np.flatnonzero(np.isfinite(h.tail))
    expected = [*range(bucket - TAIL_BINS, bucket), *range(bucket + 1, bucket + 1 + TAIL_BINS)]
    assert read_raw.tolist() == expected
    choice = choose(plan, estimates, Fraction(10), None)
    (tuned,) = choice.plan.aggregates
    assert isinstance(tuned, Bounded)
    assert tuned.upper <= 5000 * math.sqrt(2)  # no candidate past the given bound's bucket
