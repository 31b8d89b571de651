"""The wire codec (privframe.api.wire): plans and requests as JSON data, rebuilt exactly.

Every allow-listed expression form round-trips to the same polars expression;
every aggregate family, table type and number round-trips exactly; a whole
request released from its decoding gives the same table as the original on
an identically seeded session; what the allow-list refuses, the encoder
refuses too. Hostile inputs are in test_wire_hostile.py.
"""

from __future__ import annotations

import datetime
import json
from decimal import Decimal
from fractions import Fraction
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import privframe as pf
from privframe.api.query import Query
from privframe.api.wire import (
    WireError,
    decode_aggregate,
    decode_expression,
    decode_number,
    decode_plan_query,
    decode_request,
    decode_schema,
    decode_table,
    encode_aggregate,
    encode_expression,
    encode_number,
    encode_plan,
    encode_request,
    encode_schema,
    encode_table,
)
from privframe.engines.allow_list import serialized
from privframe.mechanisms.noise import SeededRandomness
from privframe.plan.aggregates import FAMILIES, Aggregate

pytestmark = pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning")

a, b, s = pl.col("a"), pl.col("b"), pl.col("s")
NAN, INF = float("nan"), float("inf")

ALLOWED = [
    a + 1,
    a - 1.5,
    a * b,
    a / b,
    a // 2,
    a % 3,
    1 + a,
    a == b,
    a != "x",
    a < 1,
    a <= 1,
    a > 1,
    a >= 1,
    (a > 1) & (b < 2),
    (a > 1) | (b < 2),
    (a > 1) ^ (b < 2),
    a.eq_missing(b),
    a.ne_missing(None),
    a.abs(),
    a.is_null(),
    a.is_not_null(),
    a.is_nan(),
    a.is_not_nan(),
    a.is_finite(),
    a.is_infinite(),
    ~(a > 1),
    a.is_between(1, 2),
    a.is_between(1.5, b, closed="left"),
    a.is_between(0, 1, closed="none"),
    a.is_in([1, 2]),
    a.is_in(["x", "y"], nulls_equal=True),
    a.is_in([1.5, NAN, None]),
    a.is_in([datetime.date(2020, 1, 1)]),
    s.str.starts_with("ab"),
    s.str.ends_with(pl.col("t")),
    s.str.contains("a", literal=True),
    s.str.contains("a.b", literal=True, strict=True),
    a.cast(pl.Float64, strict=False),
    a.cast(pl.String, strict=False),
    a.cast(pl.UInt8, strict=False),
    a.cast(pl.Datetime("ms", "UTC"), strict=False),
    pl.when(a > 1).then(1).when(b > 2).then(2).otherwise(3),
    pl.when(a > 1).then(pl.lit("x")),
    pl.when(a > 1).then(a).otherwise(pl.when(b > 1).then(b).otherwise(0)),
    (a + 1).alias("z"),
    a + NAN,
    a + INF,
    a - -INF,
    a == -0.0,
    a + 2**63,
    a > -(2**63),
    a == pl.lit(3, dtype=pl.Int32),
    a == pl.lit(2**64 - 1, dtype=pl.UInt64),
    a == pl.lit(-128, dtype=pl.Int8),
    a == pl.lit(1.25, dtype=pl.Float32),
    a == pl.lit(NAN, dtype=pl.Float32),
    a == pl.lit(INF, dtype=pl.Float64),
    a == pl.lit(None),
    a == pl.lit(None, dtype=pl.String),
    a == pl.lit(None, dtype=pl.Date),
    a == True,  # noqa: E712  # a boolean literal
    a == pl.lit("é" * 3),
    a == datetime.date(2020, 1, 1),
    a == datetime.datetime(2020, 1, 1, 3, 4, 5, 6),
    a == pl.lit(datetime.datetime(2020, 1, 1), dtype=pl.Datetime("ns", "Europe/Paris")),
    pf.bin("age", [0, 18, 65, 120]).expr,
    pf.bin("age", [0.5, 1.5], labels=["one"]).expr,
    ((a + 1) * (b - 2) > 3) & s.str.starts_with("x") | a.is_null(),
]


def wire(data: Any) -> Any:
    """Through JSON text, as the network carries it: no NaN, no Python objects."""
    return json.loads(json.dumps(data, allow_nan=False))


@pytest.mark.parametrize("expr", ALLOWED, ids=[str(e)[:60] for e in ALLOWED])
def test_every_allowed_expression_form_round_trips_exactly(expr: pl.Expr) -> None:
    decoded = decode_expression(wire(encode_expression(expr)))
    assert serialized(decoded) == serialized(expr)


REFUSED = [
    a.mean(),
    a.cast(pl.Int64),  # strict: can fail
    s.str.contains("a.b"),  # a regular expression
    a.is_in(b),  # membership in a column
    a.sort(),
    a.shift(1),
    a.map_elements(lambda v: v),
    pl.lit(pl.Series([1, 2])),
    pl.all(),
]


@pytest.mark.parametrize("expr", REFUSED, ids=[str(e)[:40] for e in REFUSED])
def test_expressions_off_the_allow_list_are_refused_by_the_encoder(expr: pl.Expr) -> None:
    with pytest.raises(WireError, match="privframe can run privately"):
        encode_expression(expr)


def test_literals_of_types_without_an_exact_wire_form_are_refused() -> None:
    with pytest.raises(WireError, match="Time"):
        encode_expression(a == datetime.time(1, 2))
    with pytest.raises(WireError, match="Decimal"):
        encode_expression(a == pl.lit(Decimal("1.5")))


def instances() -> list[Aggregate]:
    """One instance of every family (aliased or not), built by its public constructor."""
    return [
        pf.count(),
        pf.count().alias("n"),
        pf.count_distinct(),
        pf.sum("amount", (0, 1000)),
        pf.mean("amount", (-0.5, 2**60)).alias("avg"),
        pf.var("amount", (0, 10)),
        pf.std("amount", (0, 10)),
        pf.mean("amount", (0, 10), missing="drop"),
        pf.sum("amount", (0, 10), missing=2.5),
        pf.quantile("age", 0.25, (0, 100), candidates=11),
        pf.median("age", (0, 100)),
    ]


def test_every_aggregate_family_round_trips_through_its_public_constructor() -> None:
    built = instances()
    assert {type(x) for x in built} == set(FAMILIES)
    for agg in built:
        decoded = decode_aggregate(wire(encode_aggregate(agg)))
        assert decoded == agg
        assert type(decoded) is type(agg)


def test_the_missing_rule_travels_and_its_default_is_left_out() -> None:
    assert "missing" not in encode_aggregate(pf.mean("x", (0, 1)))
    assert encode_aggregate(pf.mean("x", (0, 1), missing="drop"))["missing"] == "drop"
    with pytest.raises(WireError, match=r"^aggregate: .*missing must be"):
        decode_aggregate({"kind": "sum", "column": "x", "bounds": [0, 1], "missing": "refuse"})


def test_the_constructors_checks_run_on_decoded_aggregates() -> None:
    with pytest.raises(WireError, match=r"^aggregate: .*bounds"):
        decode_aggregate({"kind": "sum", "column": "x", "bounds": [5, 1]})
    with pytest.raises(WireError, match=r"aggregate\.kind: unknown aggregate kind 'mode'"):
        decode_aggregate({"kind": "mode", "column": "x", "bounds": [0, 1]})
    with pytest.raises(WireError, match="unknown key 'q'"):
        decode_aggregate({"kind": "count", "q": 0.5})
    with pytest.raises(WireError, match=r"aggregate\.candidates: expected an integer"):
        decode_aggregate(
            {"kind": "quantile", "column": "x", "bounds": [0, 1], "q": 0.5, "candidates": True}
        )


def test_numbers_are_exact_and_floats_are_read_as_their_decimal() -> None:
    assert encode_number(0.1) == "1/10"
    assert encode_number(Fraction(1, 3)) == "1/3"
    assert encode_number(Decimal("0.25")) == "1/4"
    assert encode_number(2) == "2"
    assert decode_number(encode_number(1e-6)) == Fraction(1, 10**6)
    for bad in ("1" * 201, "1/0", "-1", "0.1", "1e5", " 1", 1, None):
        with pytest.raises(WireError, match=r"^rho: "):
            decode_number(bad, "rho")


def test_tables_round_trip_exactly_with_every_value_type() -> None:
    frame = pl.DataFrame(
        {
            "i8": pl.Series([-128, 127, None], dtype=pl.Int8),
            "u64": pl.Series([0, 2**64 - 1, 5], dtype=pl.UInt64),
            "i64": [-(2**63), 2**63 - 1, 0],
            "f32": pl.Series([1.25, NAN, -INF], dtype=pl.Float32),
            "f64": [0.1, NAN, INF],
            "s": ["a", "", None],
            "flag": [True, False, None],
            "d": [datetime.date(1, 1, 1), datetime.date(2020, 2, 29), None],
            "ts": pl.Series([0, -1, 2**62], dtype=pl.Int64).cast(pl.Datetime("ns", "UTC")),
            "none": pl.Series([None, None, None], dtype=pl.Null),
        }
    )
    decoded = decode_table(wire(encode_table(frame)), "table")
    assert_frame_equal(decoded, frame)


def test_tables_of_types_without_an_exact_wire_form_are_refused() -> None:
    with pytest.raises(WireError, match="Time"):
        encode_table(pl.DataFrame({"t": [datetime.time(1, 2)]}))


def test_schemas_round_trip() -> None:
    schema = pl.Schema(
        {
            "x": pl.Float64,
            "d": pl.Date,
            "t": pl.Time,
            "ts": pl.Datetime("us", "Asia/Tokyo"),
            "dur": pl.Duration("ms"),
            "dec": pl.Decimal(10, 2),
            "tags": pl.List(pl.String),
        }
    )
    assert decode_schema(wire(encode_schema(schema))) == schema


REGIONS = ["north", "south", "east"]


def data() -> pl.DataFrame:
    rows = [(u, REGIONS[u % 3], u % 4 + 1, float(u % 97), u % 60 + 10) for u in range(400)]
    rows += [(u, "west", 1, 5.0, 30) for u in range(400, 420)]
    user, region, month, amount, age = zip(*rows, strict=True)
    return pl.DataFrame(
        {"user": user, "region": region, "month": month, "amount": amount, "age": age}
    )


def session(seed: int = 7) -> pf.Session:
    return pf.Session(data(), "user", pf.zCDP(rho=50.0, delta=1e-5), rng=SeededRandomness(seed))


def all_aggregates() -> list[Aggregate]:
    return [
        pf.count(),
        pf.count_distinct().alias("units"),
        pf.sum("amount", (0, 100)),
        pf.mean("amount", (0, 100)),
        pf.var("amount", (0, 100)),
        pf.std("age", (0, 100)),
        pf.quantile("age", 0.25, (0, 100), candidates=101),
        pf.median("amount", (0, 100)),
    ]


def grouped(sess: pf.Session) -> Query:
    zones = pl.DataFrame({"region": ["north", "south", "west"], "zone": [1, 2, 3]})
    return (
        sess.query()
        .filter(pl.col("age") >= 18)
        .filter(pl.col("amount").is_between(0, 90) & pl.col("region").is_in(REGIONS))
        .with_columns(band=pf.bin("age", [18, 40, 70]), big=pl.col("amount") > 50)
        .join(zones, on="region", how="left")
        .bound(max_groups=2, max_rows_per_group=3)
    )


BUILDERS = {
    "keys, every aggregate, all post options": lambda q: (
        q.group_by(
            ["region", "band"], keys=pf.keys.product(region=REGIONS, band=["[18, 40)", "[40, 70]"])
        )
        .agg(*all_aggregates())
        .request(2.5, with_error=True, label="full", intervals=True, total=True, clamp=False)
    ),
    "other and weights": lambda q: (
        q.group_by("region", keys=["north", "south"], other="rest")
        .agg(pf.count(), pf.sum("amount", (0, 100)))
        .request(Fraction(1, 3), weights={"count": 3.0, "amount_sum": 1})
    ),
    "balance": lambda q: (
        q.group_by("zone", keys=[1, 2, 3])
        .agg(pf.count(), pf.mean("amount", (0, 100)))
        .request(Decimal("0.75"), weights=pf.balance(rows=40, amount_mean=45.0))
    ),
    "partial keys and delta": lambda q: (
        q.group_by(["region", "month"], keys=pf.keys.product(region=REGIONS))
        .agg(pf.count())
        .request(1.0, delta=1e-6)
    ),
    "private groups": lambda q: q.group_by("big").agg(pf.count()).request(0.5, delta=2e-6),
    "no grouping": lambda q: q.agg(pf.sum("amount", (0, 100))).request(0.1),
}


@pytest.mark.parametrize("name", list(BUILDERS))
def test_a_decoded_builder_request_releases_what_the_original_releases(name: str) -> None:
    local, remote = session(), session()
    original = BUILDERS[name](grouped(local))
    decoded = decode_request(wire(encode_request(original)), remote)
    assert decoded.options.label == original.options.label
    assert decoded.options.post == original.options.post
    assert_frame_equal(
        remote.release_all([decoded])[0], local.release_all([original])[0], check_exact=True
    )
    assert remote.spent == local.spent


def test_a_decoded_plan_explains_as_the_original() -> None:
    local, remote = session(), session()
    query = grouped(local).group_by("region", keys=REGIONS).agg(*all_aggregates())
    decoded = decode_plan_query(wire(encode_plan(query.plan)), remote.query())
    assert str(decoded.explain(1.0, delta=None)) == str(query.explain(1.0))
    assert decoded.plan.steps[0].kind == "filter"
    assert remote.spent.rho == 0


SQL = [
    "SELECT region, COUNT(*) AS n, SUM(amount) FROM data WHERE age >= 18 GROUP BY region "
    "ORDER BY n DESC LIMIT 2",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6) COUNT(*) AS n FROM data",
]


def sql_session(seed: int = 3) -> pf.Session:
    return pf.Session(
        data(),
        "user",
        pf.zCDP(rho=5.0, delta=1e-5),
        rng=SeededRandomness(seed),
        metadata={"region": pf.Column(keys=REGIONS), "amount": pf.Column(bounds=(0, 100))},
        contributions=pf.Bound(max_groups=1, max_rows_per_group=2),
    )


@pytest.mark.parametrize("text", SQL)
def test_a_decoded_sql_request_releases_what_the_original_releases(text: str) -> None:
    local, remote = sql_session(), sql_session()
    parsed = local.parse_sql(text)
    original = parsed.request(None if parsed.spend() else 0.5, with_error=True)
    encoded = wire(encode_request(original))
    assert encoded["sql"] == text
    assert "plan" not in encoded
    decoded = decode_request(encoded, remote)
    assert decoded.sql == text
    assert_frame_equal(remote.release_all([decoded])[0], local.release_all([original])[0])


def test_sql_options_must_spend_the_rho_that_was_sent() -> None:
    sess = sql_session()
    original = sess.parse_sql(SQL[1]).request()
    encoded = wire(encode_request(original))
    encoded["rho"] = "1/1000"
    with pytest.raises(WireError, match=r"^request\.rho: the query's OPTIONS spend"):
        decode_request(encoded, sess)


def test_a_builder_request_with_a_finish_step_is_not_sent_as_a_plan() -> None:
    import dataclasses

    sess = session()
    request = sess.query().agg(pf.count()).request(0.5)
    with pytest.raises(WireError, match="sent as SQL text"):
        encode_request(dataclasses.replace(request, finish=lambda frame: frame))


def test_the_builders_checks_run_again_on_the_server() -> None:
    sess = session()
    encoded = wire(encode_request(sess.query().agg(pf.count()).request(0.5)))
    encoded["plan"]["steps"] = [{"filter": [{"fn": "abs", "args": [{"col": "age"}]}]}]
    encoded["plan"]["bound"] = {"max_groups": 0}
    with pytest.raises(WireError, match=r"^request\.plan\.bound: max_groups must be >= 1"):
        decode_request(encoded, sess)
    encoded["plan"]["bound"] = None
    encoded["plan"]["steps"] = [{"filter": [{"cast": {"col": "age"}, "to": "Int64"}]}]
    decoded = decode_request(encoded, sess)  # a non-strict cast: allowed by the builder
    assert decoded.query.plan.steps[0].kind == "filter"
    zones = {"columns": [{"name": "region", "type": "String", "values": ["a", "a"]}]}
    encoded["plan"]["steps"] = [{"join": {"table": zones, "on": ["region"], "how": "left"}}]
    with pytest.raises(WireError, match=r"^request\.plan\.steps\[0\]\.join: .*unique"):
        decode_request(encoded, sess)
