"""to_spark: every allow-listed polars expression gives the same rows on Spark as on polars.

One polars frame of edge cases (nulls, NaN, ±inf, ±0.0, integer extremes, zero
divisors, empty and regex-like strings, dates and datetimes) plus seeded random
rows, the same frame on Spark, and a catalogue of expressions generated
operator by operator and operand kind by operand kind, with the ones SQL and
``pf.bin`` produce. Each expression's column must be identical: same nulls,
same type, and for floats the same bits (NaN equals NaN; -0.0 differs from
0.0). No tolerance is needed anywhere: the translation reproduces polars'
kernels exactly (``x / c`` is ``x · (1/c)`` as in polars, for instance). The
overflow-checked forms of the integer expressions (what the engines run,
``privframe.engines.expressions.checked``) are compared the same way.

The Spark side runs every expression with ANSI mode on (Spark 4's default) in
generated code, then the expressions ANSI mode or the time zone could affect
(and a sample of the others) with ANSI off, in another session time zone, on a
local relation (interpreted, without generated code).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any

import numpy as np
import polars as pl
import pytest

import privframe as pf
from privframe.engines.expressions import check_expression, checked
from privframe.engines.spark.expressions import spark_type, to_spark
from privframe.errors import InvalidArgumentError

NAN, INF = float("nan"), float("inf")
I64_MAX, I64_MIN = 2**63 - 1, -(2**63)
I32_MAX, I32_MIN = 2**31 - 1, -(2**31)

# Edge values; the cycle lengths are pairwise coprime so that every pair meets.
INTS = [0, 1, -1, 7, -7, 3, None, I64_MAX, I64_MIN]  # 9
DIVISORS = [0, 3, -3, 1, -1, None, I64_MAX, 2]  # 8
FLOATS = [0.0, -0.0, 1.5, -5.5, 2.0, NAN, INF, -INF, None, 0.1, 1e300]  # 11
DIVISORS_F = [0.0, -0.0, 2.0, -2.0, 0.1, 7.3, NAN, INF, -INF, None, 3.0, 1e-300, -1.5]  # 13
INT32S = [0, 1, -1, I32_MAX, I32_MIN, None, 46341, -3]  # 8
STRINGS = [  # 23: numbers as polars parses them or not, and regex/LIKE metacharacters
    "12",
    "+12",
    "-0",
    " 12",
    "1e3",
    "12.0",
    "inf",
    "-nan",
    "",
    None,
    "a.b%_\\",
    "ab",
    "abc",
    "ABC",
    "0000000000000000000000012",
    "9223372036854775808",
    ".5",
    "1.",
    "é",
    "-Infinity",
    "1e400",
    "x\n",
    "a.b",
]
PATTERNS = ["a", "", None, "b", ".", "%", "ab"]  # 7
DATES = [date(2024, 2, 29), date(1969, 12, 31), date(1970, 1, 1), None, date(1, 1, 1)]  # 5
TIMES = [datetime(2024, 1, 1, 12, 0, 0, 123456), datetime(1969, 12, 31, 23, 59, 59, 999999), None]

EDGE_ROWS = 11 * 13  # every (f, g) pair; (i, j) pairs need 72
RANDOM_ROWS = 257


def _cycle(values: list[Any], n: int) -> list[Any]:
    return [values[r % len(values)] for r in range(n)]


def _frame() -> pl.DataFrame:
    n = EDGE_ROWS
    edges = pl.DataFrame(
        {
            "i": _cycle(INTS, n),
            "j": _cycle(DIVISORS, n),
            "k": _cycle([5, -5, 0, None, 1000, -999, 12, 3, 255, 256, -1], n),
            "f": _cycle(FLOATS, n),
            "g": _cycle(DIVISORS_F, n),
            "h": _cycle([2.5, -2.5, 0.5, None, 1e16, -0.0, 3.0], n),
            "n": _cycle(INT32S, n),
            "s": _cycle(STRINGS, n),
            "t": _cycle(PATTERNS, n),
            "b": _cycle([True, False, None], n),
            "c": _cycle([True, False, None, False], n),
            "d": _cycle(DATES, n),
            "ts": _cycle(TIMES, n),
        },
        schema_overrides={"n": pl.Int32, "ts": pl.Datetime("us")},
    )
    rng = np.random.default_rng(20240229)
    m = RANDOM_ROWS
    floats = rng.normal(size=m) * 10.0 ** rng.integers(-3, 4, size=m)
    randoms = pl.DataFrame(
        {
            "i": rng.integers(I64_MIN, I64_MAX, size=m, endpoint=True),
            "j": rng.integers(-50, 50, size=m),
            "k": rng.integers(-1000, 1000, size=m),
            "f": floats,
            "g": rng.normal(size=m) * 10.0 ** rng.integers(-3, 4, size=m),
            "h": np.round(floats, 1),
            "n": rng.integers(I32_MIN, I32_MAX, size=m, endpoint=True),
            "s": [str(x) for x in rng.integers(-99, 99, size=m)],
            "t": _cycle(PATTERNS, m),
            "b": rng.integers(0, 2, size=m) == 1,
            "c": rng.integers(0, 2, size=m) == 1,
            "d": _cycle(DATES, m),
            "ts": _cycle(TIMES, m),
        },
        schema=edges.schema,
    )
    frame = pl.concat([edges, randoms]).with_columns(
        f32=pl.col("f").cast(pl.Float32),
        g32=pl.col("g").cast(pl.Float32),
        tz=pl.col("ts").dt.replace_time_zone("UTC"),
        tms=pl.col("ts").cast(pl.Datetime("ms")),
    )
    return frame.with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))


FRAME = _frame()
SCHEMA = FRAME.collect_schema()


# ------------------------------------------------------------------ the catalogue

col, lit = pl.col, pl.lit
ARITHMETIC: dict[str, Callable[[Any, Any], pl.Expr]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
}
COMPARISONS: dict[str, Callable[[Any, Any], pl.Expr]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "eq_missing": lambda a, b: a.eq_missing(b),
    "ne_missing": lambda a, b: a.ne_missing(b),
}
U8 = col("k").cast(pl.UInt8, strict=False)
I8 = col("k").cast(pl.Int8, strict=False)
ALL = tuple(ARITHMETIC)
ARITHMETIC_OPERANDS = [  # (left, right, the operators that can differ for this pair)
    (col("i"), col("j"), ALL),  # Int64 with overflow, zero divisors and MIN // -1
    (col("j"), col("i"), ALL),
    (col("i"), lit(3), ("*", "//", "%")),
    (lit(7), col("j"), ALL),
    (col("n"), col("n"), ALL),  # Int32: wraps at 32 bits
    (col("n"), col("k"), ("*",)),  # Int32 with Int64
    (U8, U8, ALL),  # UInt8: wraps at 8 bits, never negative
    (U8, lit(7), ("-", "//", "%")),
    (I8, I8, ("+", "*", "//")),  # Int8: wraps at 8 bits
    (col("b"), col("k"), ("+", "*", "//")),  # booleans in arithmetic
    (col("f"), col("g"), ALL),  # Float64 with NaN, ±inf, ±0.0
    (col("f"), lit(0.1), ALL),  # a constant divisor: polars multiplies by 1/c
    (col("g"), lit(7.3), ALL),
    (col("h"), lit(0.0), ALL),  # x + 0.0 keeps -0.0 in polars
    (col("h"), lit(-0.0), ("+", "-", "/", "%")),
    (col("f"), lit(-1.0), ("*", "/", "//")),
    (col("h"), lit(NAN), ("+", "/", "%")),  # non-finite constants (null in the JSON form)
    (col("h"), lit(-INF), ("/", "//", "%")),
    (lit(0.0), col("f"), ("+", "-", "/")),  # 0 - x is -x in polars
    (lit(7.3), col("g"), ("-", "/", "//", "%")),
    (col("h"), lit(1.0) / lit(3.0), ("/", "//", "%")),  # a constant sub-expression
    (col("i"), col("g"), ("*", "/", "%")),  # Int64 with Float64
    (col("k"), lit(2.5), ("+", "/", "%")),
    (col("f32"), col("g32"), ALL),  # Float32 stays Float32
    (col("f32"), lit(2.1), ALL),
    (col("n"), col("f32"), ("*", "/")),
]
COMPARISON_OPERANDS = [  # the first six with every comparison, the others with two
    (col("i"), col("j")),
    (col("f"), col("g")),
    (col("s"), col("t")),
    (col("b"), col("c")),
    (col("f32"), lit(2.1)),  # the literal becomes Float32
    (col("k"), lit(None)),
    (col("f"), lit(NAN)),
    (col("f"), lit(-0.0)),
    (col("s"), lit("ab")),
    (col("b"), lit(1)),
    (col("g32"), col("g")),
    (col("i"), lit(2.5)),
    (col("i"), col("g")),  # Int64 vs Float64: compared as Float64
    (col("n"), lit(2**40)),
    (col("d"), lit(date(1970, 1, 1))),
    (col("ts"), lit(datetime(2024, 1, 1, 12))),
    (col("tz"), lit(datetime(1970, 1, 1, tzinfo=UTC))),
]


def _nested(x: pl.Expr, depth: int) -> pl.Expr:
    """Operations that read their operand several times, nested ``depth`` deep."""
    for level in range(depth):
        x = (
            ((x // 3 - col("j")) % 7).abs()
            if level % 2
            else (x * 2 + col("k")).cast(pl.Int32, strict=False)
        )
    return x


def _catalogue() -> Iterator[pl.Expr]:
    for left, right, ops in ARITHMETIC_OPERANDS:
        yield from (ARITHMETIC[op](left, right) for op in ops)
    yield col("b") + col("c")
    yield col("b") / col("c")
    yield (col("i") * col("i") + col("j")) // lit(-2) - col("k") % lit(-7)
    yield _nested(col("k"), 6)
    yield _nested(col("f"), 4)
    for n, (left, right) in enumerate(COMPARISON_OPERANDS):
        for name, op in COMPARISONS.items():
            if n < 6 or name in ("==", "<"):
                yield op(left, right)
    for left, right in [(col("b"), col("c")), (col("b"), lit(True)), (col("c"), lit(None))]:
        yield from (left & right, left | right, left ^ right)
    yield from (col("i") & col("j"), col("k") | lit(5), col("k") ^ col("j"), U8 ^ lit(3))
    yield from (~col("b"), ~col("k"), ~U8, ~col("n"))
    for x in (col("i"), col("f"), col("n"), col("k"), col("f32"), U8):
        yield x.abs()
    for x in (col("i"), col("f"), col("k"), col("f32"), U8, col("f") * 1e300):
        yield x.sqrt()  # IEEE's root: NaN below 0, -0.0 kept
    for x in (col("f"), col("k"), col("f32")):
        yield from (x.is_nan(), x.is_not_nan(), x.is_finite(), x.is_infinite())
    yield from (col("f").is_null(), col("s").is_not_null(), col("d").is_null())
    for closed in ("both", "left", "right", "none"):
        yield col("f").is_between(-1.5, 2.0, closed=closed)
        yield col("k").is_between(-5, 12, closed=closed)
    yield col("g").is_between(0.0, NAN)
    yield col("s").is_between(lit("a"), lit("b"), closed="left")
    yield col("k").is_between(col("j"), col("i"))  # null bounds
    yield col("k").is_between(12, -5)  # an empty range
    yield col("f32").is_between(2.1, 3)
    yield col("i").is_in([1, 7, None])
    yield col("i").is_in([1, 7, None], nulls_equal=True)
    yield col("k").is_in([])
    yield col("k").is_in([None], nulls_equal=True)
    yield col("k").is_in(list(range(-5, 20)))  # long enough for Spark's hashed IN
    yield col("f").is_in([NAN, 0.0])
    yield col("f").is_in([-0.0, 1.5, *map(float, range(20))])
    yield col("f32").is_in([2.1, 0.1])
    yield col("n").is_in([1, 2**40])
    yield col("s").is_in(["ab", "", "12"])
    yield col("d").is_in([date(1970, 1, 1), date(2024, 2, 29)])
    yield col("b").is_in([True])
    for text in ("a", "", ".", "%_", "a.b%_\\"):
        s = col("s").str
        yield from (s.starts_with(text), s.ends_with(text), s.contains(text, literal=True))
    yield from (col("s").str.starts_with(col("t")), col("s").str.ends_with(col("t")))
    yield pl.when(col("b")).then(col("i"))  # no otherwise: null
    yield pl.when(col("f") > 0).then(col("f")).otherwise(col("i"))
    yield pl.when(col("b")).then(col("f32")).otherwise(2.1)
    yield pl.when(col("c")).then(lit("x")).otherwise(col("s"))
    yield pl.when(col("b")).then(lit(None)).otherwise(col("k"))
    yield pl.when(col("k") > 100).then(1).when(col("k") > 0).then(2).otherwise(col("n"))
    yield pl.when(lit(None, dtype=pl.Boolean)).then(col("k")).otherwise(col("j"))
    yield pl.when(col("b")).then(lit(NAN)).otherwise(lit(-INF))  # alike in JSON, not in value
    yield pl.when(col("b")).then(col("ts")).otherwise(lit(datetime(2000, 1, 1, 0, 0, 0, 1)))
    yield pl.when(col("c")).then(col("tz"))  # a zoned datetime: a Spark timestamp
    yield pl.when(col("c")).then(col("tms")).otherwise(lit(None))
    yield pl.when(col("c")).then(lit(INF)).when(col("b")).then(lit(NAN)).otherwise(col("f"))
    yield from _casts()


CAST_TARGETS = [pl.Int64, pl.Int32, pl.Int16, pl.Int8, pl.UInt32, pl.UInt16, pl.UInt8]
CAST_TARGETS += [pl.Float64, pl.Float32]


def _casts() -> Iterator[pl.Expr]:
    for source in ("i", "f", "f32", "s", "ts", "k", "n", "b", "d", "tz", "tms"):
        every = source in ("i", "f", "f32", "s", "ts")
        for target in CAST_TARGETS if every else (pl.Int64, pl.UInt8, pl.Float32):
            yield col(source).cast(target, strict=False)
    for source in ("i", "n", "s", "b", "d"):
        yield col(source).cast(pl.String, strict=False)
    yield U8.cast(pl.String, strict=False)
    yield (col("f") * 1e18).cast(pl.Int64, strict=False)  # near ±2^63
    yield lit("12").cast(pl.Int64, strict=False) + col("k")


def _sql_expressions() -> Iterator[pl.Expr]:
    """The row expressions SQL queries turn into (filters and derived columns)."""
    sess = pf.Session(
        FRAME.drop("row"),
        None,
        pf.zCDP(1.0),
        metadata={c: pf.Column(bounds=(-10, 10)) for c in ("w", "z", "y", "k", "v", "u")},
    )
    queries = [
        "SELECT COUNT(*) FROM data WHERE k > 10 AND s LIKE 'a%' OR f BETWEEN 0 AND 2",
        "SELECT COUNT(*) FROM data WHERE k IN (1, 2, 3) AND NOT s IN ('ab', 'abc') "
        "AND f IS NOT NULL",
        "SELECT COUNT(*) FROM data WHERE k IN (1.5, 12) OR s LIKE '%b' OR s LIKE '%.%'",
        "SELECT COUNT(*) FROM data WHERE k % 7 = 3 OR -f < 0.5 OR TRY_CAST(s AS DOUBLE) > 1",
        "SELECT COUNT(*) FROM data WHERE k NOT BETWEEN -5 AND 5 AND s <> 'ab' OR i IS NULL",
        "SELECT SUM(CASE WHEN k > 0 THEN k * 2 WHEN k < -100 THEN NULL ELSE -k END) AS z FROM data",
        "SELECT AVG(k / 3 + CAST(s AS INT)) AS w, SUM(CAST(f AS REAL) * 2) AS y FROM data",
        "SELECT COUNT(k), SUM(ABS(k) - 1) AS z FROM data WHERE CASE k WHEN 5 THEN TRUE END",
        "SELECT SUM(SQRT(f)) AS z, SUM(POWER(k, 3)) AS y, SUM(POWER(f32, -2)) AS w, "
        "SUM(POWER(i, 0) + PI() * k) AS v, SUM(POWER(f, -3)) AS u FROM data "
        "WHERE NOT k OR NOT (b) OR SQRT(k) > POWER(f, 2)",
    ]
    for text in queries:
        for step in sess.sql(text).query.plan.steps:
            yield from step.exprs


def _routed(column: str, labels: list[str]) -> pl.Expr:
    """The session's other= route (privframe.api.session._with_other) on one key column."""
    value = col(column).cast(pl.String, strict=False)
    return pl.when(value.is_in(labels)).then(value).otherwise(lit("other")).alias(column)


def _all_expressions() -> list[pl.Expr]:
    exprs = list(_catalogue())
    exprs += list(_sql_expressions())
    exprs += [
        pf.bin("f", [0, 1, 2, 10]).expr,
        pf.bin("k", [-100, 0, 100, 1000], labels=["neg", "low", "high"]).expr,
        pf.bin("f32", [-1e300, 0.1, 2.5]).expr,
        _routed("k", ["5", "-5", "12"]),
        _routed("s", ["ab", "abc", ""]),
        _routed("d", ["1970-01-01"]),
    ]
    return [check_expression(e) for e in exprs]


EXPRESSIONS = _all_expressions()


# ------------------------------------------------------------------ comparing


def _spark_frame(spark: Any) -> Any:
    """The same rows on Spark, each column of its spark_type (naive datetimes timestamp_ntz).

    Spark reads naive Arrow timestamps as UTC instants; the spark fixture's
    session time zone is UTC, so the cast to timestamp_ntz keeps the wall time.
    """
    from pyspark.sql import functions as f

    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    return spark.createDataFrame(FRAME.to_arrow()).select(
        *(f.col(c).cast(spark_type(t)) for c, t in SCHEMA.items())
    )


def _same(expected: pl.Series, got: pl.Series) -> np.ndarray:
    """Row by row: equal values (floats bit for bit, NaN equal to NaN) and equal nulls."""
    nulls = expected.is_null().to_numpy()
    same = nulls == got.is_null().to_numpy()
    if expected.dtype.is_float():
        width = np.uint32 if expected.dtype == pl.Float32 else np.uint64
        a = expected.fill_null(0).to_numpy()
        b = got.cast(expected.dtype).fill_null(0).to_numpy()
        both_nan = np.isnan(a) & np.isnan(b)
        bits = a.view(width) == b.view(width)
        return same & (nulls | both_nan | bits)
    values = [x == y for x, y in zip(expected.to_list(), got.to_list(), strict=True)]
    return same & (nulls | np.array(values, dtype=bool))


EXPECTED = FRAME.select(e.alias(f"e{n}") for n, e in enumerate(EXPRESSIONS))


def _mismatches(
    frame: Any,
    columns: dict[int, Any],
    exprs: Sequence[pl.Expr] | Mapping[int, pl.Expr] = EXPRESSIONS,
    expected: pl.DataFrame = EXPECTED,
) -> list[str]:
    """Every expression whose Spark column differs from polars' (type or any row)."""
    result = frame.select("row", *(c.alias(f"e{n}") for n, c in columns.items()))
    types = {field.name: field.dataType.simpleString() for field in result.schema.fields}
    got = pl.from_arrow(result.toArrow()).sort("row")
    problems = []
    for n in columns:
        name, expr = f"e{n}", exprs[n]
        want_type = spark_type(expected[name].dtype)
        if types[name] != want_type:
            problems.append(f"{expr}: Spark type {types[name]}, expected {want_type}")
            continue
        ok = _same(expected[name], got[name])
        if not ok.all():
            rows = np.flatnonzero(~ok)[:4].tolist()
            shown = "; ".join(
                f"row {r}: polars {expected[name][r]!r}, spark {got[name][r]!r}" for r in rows
            )
            problems.append(f"{expr} ({(~ok).sum()} rows): {shown}")
    return problems


@pytest.fixture(scope="module")
def spark_rows(spark: Any) -> Any:
    return _spark_frame(spark)


@pytest.fixture(scope="module")
def translated(spark: Any) -> Iterator[dict[int, Any]]:
    """Every expression translated once (Columns are plain expressions: reusable).

    pyspark's DataFrame debugging sends each function call's Python call site to
    the JVM (four times the round trips); it is switched off for this module's
    tests and restored after them, for speed only (it only adds error context).
    """
    import pyspark.errors.utils as debugging

    with pytest.MonkeyPatch.context() as patch:
        if hasattr(debugging, "_enable_debugging_cache"):
            patch.setattr(debugging, "_enable_debugging_cache", False)
        columns = {n: to_spark(e, SCHEMA) for n, e in enumerate(EXPRESSIONS)}
        yield columns


def test_the_catalogue_is_broad() -> None:
    assert len(EXPRESSIONS) >= 350
    kinds = {str(e.meta.serialize(format="json"))[:12] for e in EXPRESSIONS}
    assert len(kinds) >= 4  # BinaryExpr, Function, Ternary, Cast, Alias


def _ansi_sensitive(n: int) -> bool:
    """What ANSI mode changes in Spark: integer overflow and division, and casts.

    (Float arithmetic cannot overflow; its division by zero is checked with ANSI on.)
    """
    text = EXPRESSIONS[n].meta.serialize(format="json")
    integer = EXPECTED[f"e{n}"].dtype.is_integer()
    return '{"Cast":' in text or (integer and any(o in text for o in ARITHMETIC_OPS))


ARITHMETIC_OPS = ('"op":"Plus"', '"op":"Minus"', '"op":"Multiply"', "Divide", '"op":"Modulus"')
ARITHMETIC_OPS += ('"Abs"',)


def test_every_expression_matches_polars(
    spark: Any, spark_rows: Any, translated: dict[int, Any]
) -> None:
    """ANSI mode on (Spark 4's default), generated code: nothing raises, every row is polars'.

    Spark would fold a projection of local rows into new local rows (evaluated
    without generated code); that rule is switched off here, so the projection
    runs as generated code, as it does on real data.
    """
    with _generated_code(spark):
        problems = _mismatches(spark_rows, translated)
    assert not problems, f"{len(problems)} of {len(translated)} differ:\n" + "\n".join(problems)


@contextlib.contextmanager
def _generated_code(spark: Any) -> Iterator[None]:
    """Projections of local rows run as generated code, as on real data (ANSI mode on)."""
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"
    key = "spark.sql.optimizer.excludedRules"
    previous = spark.conf.get(key, None)
    rule = "org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation"
    spark.conf.set(key, f"{previous},{rule}" if previous else rule)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)


CHECKED = {n: c for n, e in enumerate(EXPRESSIONS) if (c := checked(e, SCHEMA)) is not e}


def test_checked_arithmetic_matches_polars(spark: Any, spark_rows: Any) -> None:
    """Overflow-checked expressions (engines.expressions.checked) give polars' rows on Spark.

    Every catalogue expression with integer arithmetic, checked: the overflow
    flags are allow-listed operations, so Spark computes them as polars does
    (ANSI on, generated code; with ANSI off as well).
    """
    expected = FRAME.select(e.alias(f"e{n}") for n, e in CHECKED.items())
    assert len(CHECKED) >= 30
    # The edge values overflow: checking turns wrapped values into nulls.
    nulled = sum(expected[c].null_count() - EXPECTED[c].null_count() for c in expected.columns)
    assert nulled >= 100
    columns = {n: to_spark(e, SCHEMA) for n, e in CHECKED.items()}
    with _generated_code(spark):
        problems = _mismatches(spark_rows, columns, CHECKED, expected)
    previous = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        problems += _mismatches(spark_rows, columns, CHECKED, expected)
    finally:
        spark.conf.set("spark.sql.ansi.enabled", previous)
    assert not problems, f"{len(problems)} of {len(columns)} differ:\n" + "\n".join(problems)


def test_ansi_off_another_time_zone_and_interpreted_evaluation_change_nothing(
    spark: Any, spark_rows: Any, translated: dict[int, Any]
) -> None:
    """What ANSI mode affects, with it off; datetimes in New York; a local relation
    (evaluated by the optimizer, without generated code); and a sample of the rest."""
    temporal = {"d", "ts", "tz", "tms"}
    chosen = {
        n: c
        for n, c in translated.items()
        if _ansi_sensitive(n) or temporal & set(EXPRESSIONS[n].meta.root_names()) or n % 8 == 0
    }
    assert len(chosen) >= 150
    local = spark_rows  # local rows: the optimizer evaluates the projection itself
    settings = {"spark.sql.ansi.enabled": "false", "spark.sql.session.timeZone": "America/New_York"}
    previous = {key: spark.conf.get(key) for key in settings}
    try:
        for key, value in settings.items():
            spark.conf.set(key, value)
        problems = _mismatches(local, chosen)
    finally:
        for key, value in previous.items():
            spark.conf.set(key, value)
    assert not problems, f"{len(problems)} of {len(chosen)} differ:\n" + "\n".join(problems)


def test_nesting_grows_the_spark_expression_linearly(spark: Any) -> None:
    """Each composite operand is computed once, not copied into every place that reads it."""

    def size(column: str, depth: int) -> int:
        return len(to_spark(_nested(col(column), depth), SCHEMA)._jc.toString())

    for column in ("k", "f"):
        assert size(column, 9) < 4 * size(column, 3)  # copying would grow it 4^6-fold


def test_output_names_follow_polars(spark: Any, spark_rows: Any) -> None:
    exprs = [col("k") + 1, (col("f") > 0).alias("positive"), pf.bin("k", [0, 10]).expr, lit(3)]
    columns = [to_spark(e, SCHEMA) for e in exprs]
    got = spark_rows.select(*columns).columns
    assert got == [e.meta.output_name() for e in exprs] == ["k", "positive", "k", "literal"]


def test_column_names_with_dots_and_backticks(spark: Any) -> None:
    frame = pl.DataFrame({"a.b": [1, None], "c`d": [2.5, 1.0]})
    rows = spark.createDataFrame(frame.to_arrow())
    expr = (col("a.b") * col("c`d")).alias("x")
    got = rows.select(to_spark(expr, frame.schema)).toArrow().column("x").to_pylist()
    assert got == frame.select(expr)["x"].to_list() == [2.5, None]


@pytest.mark.parametrize(
    "expr",
    [
        col("k").mean(),
        col("k").cast(pl.Float64),  # strict: it could fail on a value
        col("s").str.contains("a.b"),  # a regular expression
        -col("k"),
        col("k").is_in(pl.Series([1, 2])),  # not a literal list
        col("k").over("s"),
        col("k").sort(),
        col("k").pow(2),
        col("k").map_elements(lambda v: v),
    ],
    ids=str,
)
def test_expressions_off_the_allow_list_are_refused(expr: pl.Expr) -> None:
    with pytest.raises(InvalidArgumentError, match="privately"):
        to_spark(expr, SCHEMA)


@pytest.mark.parametrize(
    ("expr", "construct"),
    [
        (col("f").cast(pl.String, strict=False), "Float64 to String"),
        (col("f32").cast(pl.String, strict=False), "Float32 to String"),
        (col("ts").cast(pl.String, strict=False), "to String"),
        (col("k").cast(pl.Float16, strict=False), "Float16"),
        (col("k").cast(pl.UInt64, strict=False), "UInt64"),
        (col("b") * col("c"), "Multiply"),  # polars itself refuses it
        (col("s") + col("t"), "Plus"),  # string concatenation
        (col("f") & col("g"), "And"),
    ],
    ids=str,
)
def test_allowed_but_unmatched_constructs_are_refused_by_name(
    spark: Any, expr: pl.Expr, construct: str
) -> None:
    check_expression(expr)  # on the allow-list...
    with pytest.raises(InvalidArgumentError, match=construct):
        to_spark(expr, SCHEMA)  # ...but not translated


def test_refusals_need_no_spark() -> None:
    with pytest.raises(InvalidArgumentError, match="polars expression"):
        to_spark("k > 1", SCHEMA)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="schema"):
        to_spark(col("k") > 1, "k: bigint")  # type: ignore[arg-type]


def test_spark_types() -> None:
    assert [spark_type(t) for t in (pl.Int8, pl.UInt16, pl.UInt32, pl.Float64)] == [
        "tinyint",
        "int",
        "bigint",
        "double",
    ]
    assert spark_type(pl.Datetime("ns", "Europe/Paris")) == "timestamp"
    assert spark_type(pl.Datetime("us")) == "timestamp_ntz"
    assert spark_type(pl.Date()) == "date"
    assert spark_type(pl.Boolean) == "boolean"
    for dtype in (pl.Decimal(10, 2), pl.UInt64, pl.List(pl.Int64), pl.Float16):
        with pytest.raises(InvalidArgumentError, match="cannot be held"):
            spark_type(dtype)


def test_polars_facts_the_translation_relies_on() -> None:
    """Pinned polars behaviour: if one of these changes, the translation must follow."""
    x = pl.DataFrame({"x": [3.0, 3.0], "i": [I64_MAX, I64_MIN]})
    assert x.select(col("x") / 10.0).item(0, 0) == 3.0 * (1 / 10.0) != 0.3  # x·(1/c)
    y = pl.DataFrame({"y": [0.7, 0.7]})
    assert y.select(col("y") // 0.1).item(0, 0) == 7.0 != math.floor(0.7 / 0.1)
    assert x.select(col("i") + 1).to_series().to_list() == [I64_MIN, I64_MIN + 1]  # wraps
    assert x.select(col("i").abs()).to_series().to_list() == [I64_MAX, I64_MIN]
    assert x.select(col("i") // -1).item(1, 0) == I64_MIN
    zero = pl.DataFrame({"z": [-0.0, 0.0]})
    assert str(zero.select(col("z") + 0.0).to_series().to_list()) == "[-0.0, 0.0]"
    assert str(zero.select(0 - col("z")).to_series().to_list()) == "[0.0, -0.0]"
    assert pl.Series([NAN]).eq(NAN).item()
    assert pl.Series([NAN]).gt(INF).item()
    assert pl.Series(["-nan", " 1", "1e3"]).cast(pl.Float64, strict=False).is_null().to_list() == [
        False,
        True,
        False,
    ]
