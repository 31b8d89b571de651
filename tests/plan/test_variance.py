"""pf.var / pf.std: count, centred sum and sum of squares about the midpoint."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import privframe as pf
from privframe.api.query import Query
from privframe.engines.polars import PolarsEngine
from privframe.engines.spec import AggregationSpec, ValueSpec
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning")


def _data(n: int = 100_000) -> pl.DataFrame:
    rng = np.random.default_rng(5)
    return pl.DataFrame(
        {"u": np.arange(n), "g": rng.choice(["a", "b"], n), "x": rng.normal(40, 12, n)}
    )


def _query(sess: pf.Session) -> Query:
    return (
        sess.query()
        .bound(max_rows_per_group=1)
        .group_by("g", keys=["a", "b"])
        .agg(pf.count(), pf.mean("x", (0, 100)), pf.var("x", (0, 100)), pf.std("x", (0, 100)))
    )


def test_estimates_match_the_clipped_data_at_high_rho() -> None:
    df = _data()
    sess = pf.Session(df, "u", pf.zCDP(1e6), rng=SeededRandomness(2))
    out = _query(sess).release(rho=100.0)
    truth = (
        df.group_by("g")
        .agg(
            pl.col("x").clip(0, 100).var(ddof=0).alias("var"),
            pl.col("x").clip(0, 100).std(ddof=0).alias("std"),
        )
        .sort("g")
    )
    assert out["x_var"].to_numpy() == pytest.approx(truth["var"].to_numpy(), rel=2e-3)
    assert out["x_std"].to_numpy() == pytest.approx(truth["std"].to_numpy(), rel=1e-3)


def test_var_and_std_share_measurements_with_mean_and_count() -> None:
    sess = pf.Session(_data(100), "u", pf.zCDP(1.0))
    kinds = sorted(m.kind for m in _query(sess).explain(rho=1.0).measurements)
    assert kinds == ["centred_sum", "centred_sum_sq", "count"]


def test_sum_of_squares_sensitivity() -> None:
    sess = pf.Session(_data(100), "u", pf.zCDP(1.0))
    query = (
        sess.query()
        .bound(max_groups=2, max_rows_per_group=3)
        .group_by("g", keys=["a", "b"])
        .agg(pf.var("x", (10, 30)))
    )
    squares = next(m for m in query.explain(rho=1.0).measurements if m.kind == "centred_sum_sq")
    # Rows add (x − 20)² ∈ [0, 100]; centred on 50: sqrt(S)·50 with S = 2·3² = 18.
    assert squares.l2_sensitivity == pytest.approx(math.sqrt(18) * 50, rel=1e-6)
    assert squares.lower_units == 0
    assert squares.row_units >= squares.upper_units - squares.centre_units


def test_squared_row_values_stay_within_the_integer_bound() -> None:
    # A heavy unit with extreme values: its contribution to the squares stays within
    # [w·0, w·hi] − w·centre whatever the values (clip, square, snap, clip).
    value = ValueSpec("q", "x", 10.0, 30.0, 0, 0, 100, 50, 20.0, square_around=20.0)
    df = pl.DataFrame(
        {"u": [1] * 50, "g": ["a"] * 50, "x": [1e9, -1e9, float("nan")] * 16 + [20.0] * 2}
    )
    spec = AggregationSpec((), "u", ("g",), pl.DataFrame({"g": ["a"]}), None, 3, None, (value,), 1)
    (q,) = PolarsEngine(df.lazy()).aggregate(spec)["q"].to_list()
    assert -3 * 50 <= q <= 3 * 50


def test_estimates_are_clamped_to_the_possible_range() -> None:
    sess = pf.Session(_data(50), "u", pf.zCDP(1e6), rng=SeededRandomness(3))
    for _ in range(20):
        out = _query(sess).release(rho=1e-4)
        assert ((out["x_var"] >= 0) & (out["x_var"] <= 50.0**2)).all()
        assert ((out["x_std"] >= 0) & (out["x_std"] <= 50.0)).all()


def test_the_variance_corrects_for_the_centred_sums_noise() -> None:
    # Post-processing checked on chosen noisy values: var = Q/N − (C_a² − σ_C²)/N².
    df = pl.DataFrame({"u": [1], "g": ["a"], "x": [1.0]})
    sess = pf.Session(df, "u", pf.zCDP(1.0))
    query = (
        sess.query()
        .bound(max_rows_per_group=1)
        .group_by("g", keys=["a"])
        .agg(pf.var("x", (0, 100)))
    )
    release = query.explain(rho=0.01).plan
    out = release.outputs[0]
    squares, centred, count = (release.measurement(k) for k in out.measurements)
    n, c_a_value, q_value = 50, 300.0, 40_000.0  # C_a = Σ(x − 50), Q = Σ(x − 50)²
    # Invert the engine's encodings: Q about the squares' centre, C about its grid centre.
    q_units = q_value * 2.0**squares.grid_exponent - squares.centre_units * n
    centre = math.ldexp(centred.centre_units, -centred.grid_exponent)
    c_units = (c_a_value - n * (centre - 50.0)) * 2.0**centred.grid_exponent
    noisy = {
        squares.key: np.array([round(q_units)]),
        centred.key: np.array([round(c_units)]),
        count.key: np.array([n]),
    }
    var = out.aggregate.estimate(release, noisy, with_error=False)[out.name]
    expected = q_value / n - (c_a_value**2 - centred.sigma**2) / n**2
    assert var[0] == pytest.approx(expected, rel=1e-9)
    assert var[0] != pytest.approx(q_value / n - c_a_value**2 / n**2, rel=1e-9)
