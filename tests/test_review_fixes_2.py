"""Regression tests for the second review: value-dependent failures, reserved names, mutations."""

from __future__ import annotations

import math
from datetime import datetime
from decimal import Decimal

import numpy as np
import polars as pl
import pytest
from internals import spec_of

import privframe as pf
from privframe.engines.polars import PolarsEngine
from privframe.engines.spec import AggregationSpec, ValueSpec
from privframe.mechanisms.selection import discrete_threshold

pytestmark = pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning")


def _people() -> pl.DataFrame:
    return pl.DataFrame(
        {"u": [1, 2, 3], "name": ["alice", "bob", "carol"], "age": [37, 50, 20], "g": ["a"] * 3}
    )


def _release(sess: pf.Session, query: pf.query.Query) -> None:
    query.bound(max_rows_per_group=1).agg(pf.count()).release(rho=0.1)


def test_decimal_overflow_oracle_is_refused_before_any_data_is_read() -> None:
    sess = pf.Session(_people(), "u", pf.zCDP(10.0))
    probe = (
        pl.when(pl.col("name") == "alice")
        .then(pl.col("age"))
        .otherwise(0)
        .cast(pl.Decimal(38, 0), strict=False)
        * pl.lit(10**38 // 30)
    ) > 0
    with pytest.raises(pf.InvalidArgumentError, match=r"(?i)decimal|cast"):
        _release(sess, sess.query().filter(probe))
    assert sess.ledger == ()


def test_decimal_literal_arithmetic_is_refused() -> None:
    sess = pf.Session(_people(), "u", pf.zCDP(10.0))
    with pytest.raises(pf.InvalidArgumentError, match=r"(?i)decimal"):
        _release(sess, sess.query().filter(pl.col("age") * pl.lit(Decimal("1e30")) > 0))


def test_decimal_data_columns_are_worked_on_as_floats() -> None:
    df = _people().with_columns(pl.col("age").cast(pl.Decimal(38, 0)))
    sess = pf.Session(df, "u", pf.zCDP(10.0))
    _release(sess, sess.query().filter(pl.col("age") * 1e30 > 0))  # float arithmetic: fine
    assert len(sess.ledger) == 1


@pytest.mark.parametrize("target", [pl.Boolean, pl.Date, pl.Datetime("us"), pl.Decimal(38, 0)])
def test_casts_that_can_fail_on_some_values_are_refused(target: pl.DataType) -> None:
    sess = pf.Session(_people(), "u", pf.zCDP(10.0))
    probe = (
        pl.when((pl.col("name") == "alice") & (pl.col("age") >= 30))
        .then(pl.col("name"))
        .otherwise(None)
        .cast(target, strict=False)
        .is_null()
    )
    with pytest.raises(pf.InvalidArgumentError, match="cast"):
        _release(sess, sess.query().filter(probe))
    assert sess.ledger == ()


def test_a_type_error_for_every_input_is_found_before_any_data_is_read() -> None:
    sess = pf.Session(_people(), "u", pf.zCDP(10.0))
    with pytest.raises(pf.InvalidArgumentError, match="comparing String"):
        _release(sess, sess.query().filter(pl.col("name") > 3))
    with pytest.raises(pf.InvalidValueError, match="do not fit"):
        _release(sess, sess.query().filter(pl.col("missing") > 3))
    assert sess.ledger == ()


def test_reserved_column_names_cannot_reach_the_engine() -> None:
    sess = pf.Session(_people(), "u", pf.zCDP(10.0))
    query = (
        sess.query()
        .with_columns(__weight=pl.col("age") % 3)
        .bound(max_groups=3, max_rows_per_group=1)
        .group_by("__weight", keys=[0, 1, 2])
        .agg(pf.count())
    )
    with pytest.raises(pf.InvalidValueError, match="'__'"):
        query.release(rho=0.1)
    assert sess.ledger == ()


def test_unrelated_reserved_looking_columns_do_not_interfere() -> None:
    # A data column named like an engine working column is simply not read.
    df = _people().with_columns(__weight=pl.lit(999), __rows=pl.lit(5))
    sess = pf.Session(df, "u", pf.zCDP(1e6))
    query = sess.query().bound(max_rows_per_group=1).group_by("g", keys=["a"]).agg(pf.count())
    plan = query.plan
    release = pf.planner.plan_release(plan, True, 1.0)
    exact = sess._engine.aggregate(spec_of(sess, plan, release))
    assert exact["__count"].to_list() == [3]


def test_selection_threshold_uses_the_units_group_bound() -> None:
    df = pl.DataFrame({"u": [1, 2], "g": ["a", "b"]})
    sess = pf.Session(df, "u", pf.zCDP(1.0, delta=1e-6))
    query = sess.query().bound(max_groups=4, max_rows_per_group=1).group_by("g").agg(pf.count())
    selection = query.explain(rho=0.5).plan.selection
    assert selection is not None
    sigma = selection.measurement.sigma_units
    assert selection.threshold == discrete_threshold(sigma, 4, 1e-6)
    assert selection.threshold > discrete_threshold(sigma, 1, 1e-6)


def test_observed_keys_are_sorted_and_null_keys_dropped() -> None:
    df = pl.DataFrame({"u": list(range(9)), "g": ["c", "a", None, "b", "c", "a", None, "b", "a"]})
    spec = AggregationSpec((), "u", ("g",), None, 1, 1, None, (), 3)
    out = PolarsEngine(df.lazy()).aggregate(spec)
    assert out["g"].to_list() == ["a", "b", "c"]
    assert out["__distinct"].to_list() == [3, 2, 2]


def test_squares_are_exact_in_grid_units() -> None:
    value = ValueSpec("q", "x", 0.0, 10.0, 4, 0, 400, 200, 5.0, square_around=5.0)
    df = pl.DataFrame({"u": [1, 2, 3], "g": ["a"] * 3, "x": [5.0, 6.5, 0.0]})
    spec = AggregationSpec((), "u", ("g",), pl.DataFrame({"g": ["a"]}), None, 1, None, (value,), 1)
    # (0 + 2.25 + 25)·2^4 = 436 grid units, minus the centre 200 per row.
    assert PolarsEngine(df.lazy()).aggregate(spec)["q"].to_list() == [436 - 3 * 200]


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


# -- third review: failures that polars' own casts and panics could still cause ---------


def _typed_data() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "age": [40],
            "d": [pl.Series([1], dtype=pl.Int32).cast(pl.Date)[0]],
            "dur": pl.Series([1], dtype=pl.Duration("us")),
            "s": ["a"],
            "u64": pl.Series([1], dtype=pl.UInt64),
            "cat": pl.Series(["a"], dtype=pl.Categorical),
            "g": ["x"],
        }
    )


ENUM = pl.Enum(["a", "b"])
REFUSED_STEPS = {
    "duration to string": pl.col("dur").cast(pl.String, strict=False) == "x",
    "date to string": pl.col("d").cast(pl.String, strict=False) == "x",
    "date between datetime literals": pl.col("d").is_between(
        pl.lit(datetime(2000, 1, 1), dtype=pl.Datetime("ns")),
        pl.lit(datetime(2001, 1, 1), dtype=pl.Datetime("ns")),
    ),
    "when/then date vs datetime": pl.when(pl.col("age") > 1)
    .then(pl.lit(datetime(2000, 1, 1), dtype=pl.Datetime("ns")))
    .otherwise(pl.col("d"))
    .is_null(),
    "when/then string vs date": pl.when(pl.col("age") > 1)
    .then(pl.lit("s"))
    .otherwise(pl.col("d"))
    .is_null(),
    "string vs enum literal": pl.col("s") > pl.lit("a", dtype=ENUM),
    "string between enum literals": pl.col("s").is_between(
        pl.lit("a", dtype=ENUM), pl.lit("b", dtype=ENUM)
    ),
    "when/then unsigned 64 vs signed": pl.when(pl.col("u64") > 0)
    .then(pl.col("u64"))
    .otherwise(pl.lit(-1))
    > 0,
    "string concatenation": (pl.col("s") + pl.col("s")) == "aa",
}


@pytest.mark.parametrize("name", list(REFUSED_STEPS))
def test_steps_that_could_fail_for_some_values_are_refused(name: str) -> None:
    sess = pf.Session(_typed_data(), None, pf.zCDP(1.0))
    with pytest.raises(pf.InvalidArgumentError, match="not supported"):
        _release(sess, sess.query().filter(REFUSED_STEPS[name]))
    assert sess.ledger == ()


def test_categorical_and_decimal_columns_are_used_as_strings_and_floats() -> None:
    sess = pf.Session(_typed_data(), None, pf.zCDP(1.0))
    _release(sess, sess.query().filter(pl.col("cat") == "a"))  # a string comparison now
    assert len(sess.ledger) == 1


def test_a_public_tables_decimal_columns_are_used_as_floats() -> None:
    sess = pf.Session(pl.DataFrame({"k": [1], "x": [10**12]}), None, pf.zCDP(1.0))
    table = pl.DataFrame(
        {"k": [1], "dec": [Decimal("1.5")]}, schema={"k": pl.Int64, "dec": pl.Decimal(38, 30)}
    )
    query = (
        sess.query()
        .join(table, on="k")
        .filter(pl.col("x").is_between(pl.col("dec"), pl.col("dec")))
    )
    _release(sess, query)  # floats: no decimal overflow is possible
    assert len(sess.ledger) == 1


@pytest.mark.parametrize(
    "aggregate",
    [pf.mean("x", (0, 1e300)), pf.var("x", (0, 1e-300)), pf.std("x", (0, 1e200))],
    ids=["mean huge", "var tiny", "std huge"],
)
def test_extreme_bounds_are_refused_before_any_charge(aggregate: object) -> None:
    sess = pf.Session(pl.DataFrame({"u": [1], "x": [1.0]}), "u", pf.zCDP(10.0))
    with pytest.raises(pf.InvalidValueError, match="extreme"):
        sess.query().bound(max_rows_per_group=1).agg(aggregate).release(rho=0.5)
    assert sess.ledger == ()
