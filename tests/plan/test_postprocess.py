"""Post-processing options of a release: clamping, clipped intervals and a consistent total."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import privframe as pf
from privframe.api.query import Query
from privframe.mechanisms.noise import SeededRandomness
from privframe.plan.postprocess import consistent_groups

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

KEYS = ["a", "b", "c", "d"]


def _query(seed: int = 0, rho: float = 100.0) -> Query:
    frame = pl.DataFrame(
        {
            "u": list(range(40)),
            "g": ["a"] * 30 + ["b"] * 9 + ["c"],
            "x": [float(i % 7) for i in range(40)],
        }
    )
    sess = pf.Session(frame, "u", pf.zCDP(rho), rng=SeededRandomness(seed))
    return (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=1)
        .group_by("g", keys=KEYS)
        .agg(
            pf.count(),
            pf.sum("x", bounds=(0, 10)),
            pf.mean("x", bounds=(0, 10)),
            pf.count_distinct(),
            pf.median("x", bounds=(0, 10)),
        )
    )


@pytest.mark.parametrize(
    ("values", "total", "low"),
    [([5.0, -1.0, 2.0], 6.0, 0.0), ([3.0, 3.0], 0.0, 0.0), ([1.5, 2.5, -4.0], 10.0, -1.0)],
)
def test_consistent_groups_are_the_least_squares_projection(values, total, low):
    v = np.array(values)
    x = consistent_groups(v, total, low)
    assert x.sum() == pytest.approx(total)
    assert (x >= low).all()
    # KKT: x = max(v − λ, low) with one λ for every group above the floor.
    shifts = v[x > low] - x[x > low]
    assert np.allclose(shifts, shifts[0]) if shifts.size else x.sum() == low * x.size


def test_consistent_integer_groups_stay_integers_and_add_up():
    x = consistent_groups(np.array([7, -3, 2, 0]), 5, 0)
    assert x.dtype == np.int64
    assert x.sum() == 5
    assert (x >= 0).all()


def test_the_total_row_agrees_with_its_groups_and_costs_nothing():
    query = _query()
    result = query.release(rho=0.5, total=True)
    assert query.session.spent.rho == 0.5
    groups, total = result.head(len(KEYS)), result.tail(1)
    assert total["g"].to_list() == [None]
    assert total["count"].item() == groups["count"].sum()
    assert total["x_sum"].item() == pytest.approx(groups["x_sum"].sum())
    # Quantiles and distinct counts do not add up over groups: null in the total row.
    assert total["x_median"].to_list() == [None]
    assert total["count_distinct"].to_list() == [None]
    assert result["count"].dtype == pl.Int64


def test_the_total_mean_is_pooled_from_the_summed_measurements():
    result = _query(seed=3, rho=1e12).release(rho=1e11, total=True)
    total = result.tail(1)
    assert total["count"].item() == 40
    # σ of the pooled centred sum is about 2e-5 here: 1e-4 is many σ.
    assert total["x_mean"].item() == pytest.approx(sum(i % 7 for i in range(40)) / 40, abs=1e-4)


def test_total_errors_scale_with_the_number_of_groups():
    result = _query().release(rho=0.5, total=True, with_error=True, clamp=False)
    std = result["count_std"].to_list()
    assert std[-1] == pytest.approx(std[0] * np.sqrt(len(KEYS)), rel=1e-9)


def test_clamping_keeps_counts_non_negative_and_intervals_in_range():
    query = _query(seed=5, rho=1000.0)
    clamped = pl.concat([query.release(rho=0.01, intervals=True) for _ in range(20)])
    raw = pl.concat([query.release(rho=0.01, intervals=True, clamp=False) for _ in range(20)])
    assert (clamped["count"] >= 0).all()
    assert (clamped["count_ci95_low"] >= 0).all()
    assert clamped["x_mean"].is_between(0, 10).all()
    assert (raw["count"] < 0).any()  # group d holds no rows: its noise goes both ways
    assert "count_std" not in clamped.columns  # intervals alone add only the ends


def test_bad_post_processing_options_are_refused_before_any_charge():
    query = _query()
    with pytest.raises(pf.InvalidArgumentError, match="clamp"):
        query.release(rho=0.5, clamp="yes")  # type: ignore[arg-type]
    ungrouped = query.session.query().agg(pf.count())
    with pytest.raises(pf.InvalidValueError, match="total=True"):
        ungrouped.release(rho=0.5, total=True)
    assert query.session.spent.rho == 0


def test_explain_shows_derivations_and_that_intervals_cover_noise_only():
    text = str(_query().explain(rho=0.5))
    assert "x_sum = centred_sum(x, [0, 10]) + 5·count" in text
    assert "x_mean = 5 + centred_sum(x, [0, 10]) / count" in text
    assert "cover the noise only" in text
    assert "cover the noise only" in _query().explain(rho=0.5)._repr_html_()
