"""Regression tests for review findings on the group-by engine (each failed before its fix)."""

from __future__ import annotations

import math
from decimal import Decimal

import polars as pl
import pytest
from internals import spec_of

import privframe as pf
from privframe.engines.polars import PolarsEngine
from privframe.engines.spec import AggregationSpec, ValueSpec


def _session(df: pl.DataFrame) -> pf.Session:
    return pf.Session(df, "u", pf.zCDP(1e6))


def test_close_bounds_get_their_own_measurements() -> None:
    # (0, 1e6) and (0, 1000001) print alike with 6 significant digits; they must
    # not share a measurement (each output is clipped to its own bounds).
    sess = _session(pl.DataFrame({"u": [1], "x": [5.0]}))
    explanation = (
        sess.query()
        .bound(max_rows_per_group=1)
        .agg(pf.sum("x", (0, 1_000_000)).alias("a"), pf.sum("x", (0, 1_000_001)).alias("b"))
        .explain(rho=1.0)
    )
    keys = [m.key for m in explanation.measurements]
    assert len(set(keys)) == 2
    assert "sum(x, [0, 1e+06])" in keys  # exact short forms stay short


@pytest.mark.parametrize("keys", [{"a", "b"}, {"a": 1, "b": 2}, frozenset({"a"})])
def test_unordered_keys_are_refused(keys: object) -> None:
    sess = _session(pl.DataFrame({"u": [1], "g": ["a"]}))
    with pytest.raises(pf.InvalidArgumentError, match="ordered"):
        sess.query().group_by("g", keys=keys)  # type: ignore[arg-type]


def test_mixed_type_keys_are_refused() -> None:
    sess = _session(pl.DataFrame({"u": [1], "g": ["a"]}))
    with pytest.raises(pf.InvalidArgumentError, match="one type"):
        sess.query().group_by("g", keys=[1, "a"])


def test_decimal_data_is_not_truncated_to_integer_keys() -> None:
    df = pl.DataFrame(
        {"u": [1, 2, 3], "g": [Decimal("1.5"), Decimal("1.0"), Decimal("2.7")]},
        schema={"u": pl.Int64, "g": pl.Decimal(10, 2)},
    )
    sess = _session(df)
    spec = spec_of(
        sess,
        (
            q := sess.query().bound(max_rows_per_group=1).group_by("g", keys=[1, 2]).agg(pf.count())
        ).plan,
        pf.planner.plan_release(q.plan, True, 1.0),
    )
    exact = PolarsEngine(df.lazy()).aggregate(spec)
    assert exact["__count"].to_list() == [1, 0]


def test_a_key_that_does_not_fit_the_column_type_is_a_clear_error() -> None:
    df = pl.DataFrame({"u": [1], "n": [3]}, schema={"u": pl.Int64, "n": pl.Int64})
    sess = _session(df)
    query = sess.query().bound(max_rows_per_group=1).group_by("n", keys=[2**64 - 1])
    with pytest.raises(pf.InvalidArgumentError, match="does not fit"):
        query.agg(pf.count()).release(rho=1.0)
    assert sess.ledger == ()


def test_bad_group_by_and_weights_types() -> None:
    sess = _session(pl.DataFrame({"u": [1], "g": ["a"]}))
    with pytest.raises(pf.InvalidArgumentError, match="group_by"):
        sess.query().group_by(5, keys=[1])  # type: ignore[arg-type]
    query = sess.query().bound(max_rows_per_group=1).agg(pf.count())
    with pytest.raises(pf.InvalidArgumentError, match="weights"):
        query.release(rho=1.0, weights=["count"])  # type: ignore[arg-type]


def test_centred_half_width_is_exact_for_odd_grid_bounds() -> None:
    # lo + hi odd: the centre is floor((lo + hi)/2) and the half-width must be the
    # larger side, ceil((hi − lo)/2); the smaller side would understate sensitivity.
    sess = _session(pl.DataFrame({"u": [1], "x": [1.0]}))
    query = sess.query().bound(max_rows_per_group=1).agg(pf.mean("x", (1 + 2**-31, 2)))
    centred = next(m for m in query.explain(rho=1.0).measurements if m.kind == "centred_sum")
    lo, hi = centred.lower_units, centred.upper_units
    assert (lo + hi) % 2 == 1
    assert centred.row_units == math.ceil((hi - lo) / 2)


def test_the_integer_clip_holds_whatever_the_rounding_mode() -> None:
    # Bounds off the grid: 2.5 rounds to 2 (half to even) in the planner but to 3
    # (half away from zero) in polars; the second clip keeps the planner's bound.
    value = ValueSpec("s", "x", 0.0, 2.5, 0, 0, 2, 0, 0.0)
    df = pl.DataFrame({"u": [1, 2], "g": ["a", "a"], "x": [2.5, 2.5]})
    spec = AggregationSpec((), "u", ("g",), pl.DataFrame({"g": ["a"]}), None, 1, None, (value,), 1)
    assert PolarsEngine(df.lazy()).aggregate(spec)["s"].to_list() == [4]


def test_every_release_draws_a_fresh_bounding_seed() -> None:
    sess = _session(pl.DataFrame({"u": [1, 1], "g": ["a", "b"]}))
    query = sess.query().bound(max_groups=1, max_rows_per_group=1).group_by("g", keys=["a", "b"])
    plan = query.agg(pf.count()).plan
    release = pf.planner.plan_release(plan, True, 1.0)
    assert len({spec_of(sess, plan, release).seed for _ in range(4)}) == 4
