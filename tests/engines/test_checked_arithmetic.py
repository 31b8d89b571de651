"""Checked integer arithmetic: a row whose integer operation overflows gets null, never a wrap.

polars' integer arithmetic wraps around, and raising instead would answer a
yes/no question about the data; so every engine runs filters and derived
columns through :func:`privframe.engines.expressions.checked`. The unit tests compare
it with exact Python integers over every integer type and operand form; the
session tests release through ``Session`` with a huge budget, so released
counts are exact, and show each derived value per row (one public key per
value, one for null); the Spark tests require the same releases from a Spark
Session, seeded alike.
"""

from __future__ import annotations

import itertools
import operator
import random
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import polars as pl
import pytest

import privframe as pf
from privframe.engines.expressions import checked, is_safe_filter
from privframe.engines.spec import RowStep, apply_steps, checked_step
from privframe.mechanisms.noise import SeededRandomness

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
INTEGERS = [pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32]
OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "//": operator.floordiv,
}


def _range(dtype: type[pl.DataType]) -> tuple[int, int]:
    bits = {pl.Int8: 8, pl.Int16: 16, pl.Int32: 32, pl.Int64: 64}
    if dtype in bits:
        return -(2 ** (bits[dtype] - 1)), 2 ** (bits[dtype] - 1) - 1
    return 0, 2 ** {pl.UInt8: 8, pl.UInt16: 16, pl.UInt32: 32}[dtype] - 1


def _edges(dtype: type[pl.DataType]) -> list[int]:
    """Values at and near the type's limits, around zero and its square root, and random."""
    low, high = _range(dtype)
    root = int(high**0.5)
    near = {low, low + 1, low + 2, low // 2, low // 2 - 1, high // 2, high // 2 + 1}
    near |= {high - 2, high - 1, high, -3, -2, -1, 0, 1, 2, 3, 11, -11}
    near |= {root, root + 1, -root, -root - 1}
    generator = random.Random(str(dtype))
    near |= {generator.randint(low, high) for _ in range(8)}
    return sorted(v for v in near if low <= v <= high)


def _fits(value: int | None, dtype: pl.DataType) -> int | None:
    """The exact result if the result type holds it, else null (checked semantics)."""
    if value is None:
        return None
    low, high = _range(type(dtype))
    return value if low <= value <= high else None


def _exact(op: str, a: int | None, b: int | None) -> int | None:
    if a is None or b is None or (op == "//" and b == 0):
        return None  # polars: x // 0 is null
    return int(OPERATORS[op](a, b))


def _result(frame: pl.DataFrame, expr: pl.Expr) -> tuple[pl.DataType, list[Any]]:
    out = frame.select(checked(expr.alias("r"), frame.schema))
    return out.schema["r"], out["r"].to_list()


# ------------------------------------------------------------------ checked, unit


@pytest.mark.parametrize(("left", "right"), list(itertools.product(INTEGERS, INTEGERS)), ids=str)
def test_two_columns_give_the_exact_result_or_null(left: Any, right: Any) -> None:
    pairs = list(itertools.product([*_edges(left), None], [*_edges(right), None]))
    frame = pl.DataFrame(
        {"a": [a for a, _ in pairs], "b": [b for _, b in pairs]},
        schema={"a": left, "b": right},
    )
    for op, function in OPERATORS.items():
        dtype, got = _result(frame, function(pl.col("a"), pl.col("b")))
        assert dtype.is_integer()
        want = [_fits(_exact(op, a, b), dtype) for a, b in pairs]
        assert got == want, op


@pytest.mark.parametrize("dtype", INTEGERS, ids=str)
def test_a_column_and_a_constant_give_the_exact_result_or_null(dtype: Any) -> None:
    values = _edges(dtype)
    frame = pl.DataFrame({"a": [*values, None]}, schema={"a": dtype})
    for (op, function), c in itertools.product(OPERATORS.items(), values):
        constant = pl.lit(c, dtype=dtype)
        for expr, exact in (
            (function(pl.col("a"), constant), lambda a, c=c, op=op: _exact(op, a, c)),
            (function(constant, pl.col("a")), lambda a, c=c, op=op: _exact(op, c, a)),
        ):
            result, got = _result(frame, expr)
            assert got == [_fits(exact(a), result) for a in frame["a"]], f"{expr}"


@pytest.mark.parametrize("dtype", INTEGERS[:4], ids=str)
def test_abs_of_the_smallest_value_is_null(dtype: Any) -> None:
    frame = pl.DataFrame({"a": [*_edges(dtype), None]}, schema={"a": dtype})
    _, got = _result(frame, pl.col("a").abs())
    assert got == [_fits(None if a is None else abs(a), dtype()) for a in frame["a"]]


def test_dynamic_literals_take_the_columns_type_and_are_checked_in_it() -> None:
    frame = pl.DataFrame({"age": [1, 2, 3, -2, -3]})
    _, product = _result(frame, pl.col("age") * 2**62)
    assert product == [2**62, None, None, -(2**63), None]
    small = pl.DataFrame({"x": [27, 28, -128, 100]}, schema={"x": pl.Int8})
    dtype, total = _result(small, pl.col("x") + 100)  # 100 fits Int8: the sum is Int8
    assert (dtype, total) == (pl.Int8(), [127, None, -28, None])


def test_an_inner_overflow_nulls_the_whole_expression() -> None:
    # (x · 2^62) // 2^62 would wrap back into range: 2 · 2^62 wraps to MIN, // 2^62 is -2.
    frame = pl.DataFrame({"x": [-3, -2, -1, 0, 1, 2, 3]})
    _, got = _result(frame, (pl.col("x") * 2**62) // 2**62)
    assert got == [None, -2, -1, 0, 1, None, None]
    _, compared = _result(frame, (pl.col("x") * 2**62 < 0) | pl.lit(True))
    assert compared == [None, True, True, True, True, None, None]  # null through |
    _, tested = _result(frame, (pl.col("x") * 2**62).is_null())
    assert tested == [None, False, False, False, False, None, None]  # and through is_null


def test_only_the_branch_a_row_takes_counts() -> None:
    frame = pl.DataFrame({"x": [1, 2**40, I64_MIN, None]})
    guarded = pl.when(pl.col("x") < 2**30).then(pl.col("x") * 2**40).otherwise(pl.col("x"))
    assert _result(frame, guarded)[1] == [2**40, 2**40, None, None]
    # I64_MIN < 2^30 takes the multiplying branch and overflows; a null x takes otherwise.
    in_predicate = pl.when(pl.col("x").abs() > 5).then(1).otherwise(2)
    assert _result(frame, in_predicate)[1] == [2, 1, None, 2]


def test_checked_expressions_stay_on_the_allow_list() -> None:
    for expr in (
        pl.col("x") * pl.col("y") + 1 > 0,
        pl.when(pl.col("x") > 0).then(pl.col("x") - pl.col("y")).otherwise(pl.col("y").abs()) > 0,
        (pl.col("x").cast(pl.UInt8, strict=False) * pl.col("b")) // pl.lit(-1) > 0,
    ):
        rewritten = checked(expr, {"x": pl.Int64, "y": pl.Int32, "b": pl.Boolean})
        assert rewritten is not expr
        assert is_safe_filter(rewritten)


def test_expressions_without_integer_arithmetic_are_not_rewritten() -> None:
    schema = pl.Schema({"x": pl.Int64, "f": pl.Float64, "s": pl.String})
    for expr in (
        pl.col("x") > 18,
        pl.col("f") * 2.5 + pl.col("f").abs(),
        pl.col("x") / 3,
        pl.col("x") % 7,
        pl.col("s").str.starts_with("a"),
        pf.bin("f", [0, 1, 2]).expr,
    ):
        assert checked(expr, schema) is expr
    step = RowStep("with_columns", (pl.col("f") * 2,))
    assert checked_step(step, schema) is step


def test_the_output_name_is_kept() -> None:
    schema = {"x": pl.Int64}
    assert checked(pl.col("x") + 1, schema).meta.output_name() == "x"
    assert checked((pl.col("x") * 2).alias("y"), schema).meta.output_name() == "y"


def test_nested_operations_grow_the_expression_polynomially() -> None:
    """Each flag reads the unchecked operands: size O(n·depth), not exponential."""

    def size(depth: int) -> int:
        x = pl.col("x")
        for level in range(depth):
            x = (x * pl.col("y") - 3) if level % 2 else (x + pl.col("y")) // 2
        return len(checked(x, {"x": pl.Int64, "y": pl.Int64}).meta.serialize(format="json"))

    assert size(12) < 12 * size(4)  # O(n·depth): about 9-fold; doubling per level: 2^8-fold


def test_apply_steps_checks_filters_and_derived_columns_in_order() -> None:
    frame = pl.DataFrame({"x": [1, 2, 3, I64_MAX, -1]}).lazy()
    steps = (
        RowStep("with_columns", ((pl.col("x") * 2**61).alias("y"),)),
        RowStep("filter", (pl.col("y") + pl.col("y") < 0,)),
    )
    # y: 2^61, 2^62, 3·2^61, null, -2^61; y + y overflows for x = 2 and 3 (wrapped: < 0).
    assert apply_steps(frame, steps).collect()["x"].to_list() == [-1]


def test_the_serialized_forms_checking_relies_on() -> None:
    """Pinned polars forms: if one changes, checking must follow (or it would miss operations)."""
    forms = [
        (pl.col("a") + pl.col("b"), '"op":"Plus"'),
        (pl.col("a") - 1, '"op":"Minus"'),
        (pl.col("a") * 2, '"op":"Multiply"'),
        (pl.col("a") // 2, '"op":"FloorDivide"'),
        (pl.col("a").abs(), '"function":"Abs"'),
    ]
    for expr, form in forms:
        assert form in expr.meta.serialize(format="json")
    wrapped = pl.DataFrame({"i": [I64_MAX, I64_MIN]}).select(pl.col("i") + 1)["i"].to_list()
    assert wrapped == [I64_MIN, I64_MIN + 1]  # polars wraps: checking is needed


# ------------------------------------------------------------------ through a Session

DATA_64 = [I64_MIN, I64_MIN + 1, -(2**62) - 1, -3, -2, -1, 0, 1, 2, 3, 27, 28, 2**62, I64_MAX]
DATA_8 = [-128, -2, -1, 0, 1, 2, 27, 28, 127]


def _frame(values: list[int], dtype: Any) -> pl.DataFrame:
    n = len(values)
    return pl.DataFrame(
        {"u": list(range(n)), "x": values, "w": [values[(i * 5 + 5) % n] for i in range(n)]},
        schema={"u": pl.Int64, "x": dtype, "w": dtype},
    )


def _session(data: Any) -> pf.Session:
    return pf.Session(data, "u", pf.zCDP(1e12), rng=SeededRandomness(7))


def _derived_counts(sess: pf.Session, expr: pl.Expr, keys: list[str]) -> dict[str, int]:
    """Released count of rows per derived value (as text, or "null"): exact at this budget."""
    label = pl.col("y").cast(pl.String, strict=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pf.SeededRandomnessWarning)
        released = (
            sess.query()
            .with_columns(y=expr)
            .with_columns(key=pl.when(pl.col("y").is_null()).then(pl.lit("null")).otherwise(label))
            .bound(max_groups=1, max_rows_per_group=1)
            .group_by("key", keys=keys)
            .agg(pf.count())
            .release(rho=1e11)
        )
    return {k: c for k, c in zip(released["key"], released["count"], strict=True) if c}


def _expected(
    values: list[int], weights: list[int], exact: Callable[..., int | None], dtype: Any
) -> Counter[str]:
    results = [_fits(exact(x, w), dtype()) for x, w in zip(values, weights, strict=True)]
    return Counter("null" if r is None else str(r) for r in results)


def _keys(values: list[int], weights: list[int], exact: Callable[..., int | None]) -> list[str]:
    """Every possible label: exact results, wrapped ones (so a wrap would be counted), null."""
    labels = {"null"}
    for x, w in zip(values, weights, strict=True):
        value = exact(x, w)
        if value is not None:
            labels |= {str(value), str((value + 2**63) % 2**64 - 2**63)}
            labels |= {str((value + 2**7) % 2**8 - 2**7), str((value + 2**31) % 2**32 - 2**31)}
    return sorted(labels)


X, W = pl.col("x"), pl.col("w")
# (name, expression, exact result in Python, result type); the data's integers are Int64
# in the session (small integer columns are widened), so Int8/Int32 arithmetic comes from casts.
SESSION_CASES = [
    ("x * 2^62", X * 2**62, lambda x, w: x * 2**62, pl.Int64),
    ("2^62 * x", 2**62 * X, lambda x, w: 2**62 * x, pl.Int64),
    ("x * w", X * W, lambda x, w: x * w, pl.Int64),
    ("x + w", X + W, lambda x, w: x + w, pl.Int64),
    ("x - w", X - W, lambda x, w: x - w, pl.Int64),
    ("x + (2^63 - 10)", X + (I64_MAX - 9), lambda x, w: x + I64_MAX - 9, pl.Int64),
    ("0 - x", 0 - X, lambda x, w: -x, pl.Int64),
    ("x // -1", X // -1, lambda x, w: -x, pl.Int64),
    ("x // w", X // W, lambda x, w: None if w == 0 else x // w, pl.Int64),
    ("abs(x)", X.abs(), lambda x, w: abs(x), pl.Int64),
    (
        "(x * 2^62) // 2^62",
        (X * 2**62) // 2**62,
        lambda x, w: x if -2 <= x <= 1 else None,
        pl.Int64,
    ),
    (
        "int8(x) + 100",
        X.cast(pl.Int8, strict=False) + 100,
        lambda x, w: x + 100 if -128 <= x <= 127 else None,
        pl.Int8,
    ),
    (
        "int32(x) * 2^27",
        X.cast(pl.Int32, strict=False) * 2**27,
        lambda x, w: x * 2**27 if -(2**31) <= x < 2**31 else None,
        pl.Int32,
    ),
]


@pytest.mark.parametrize(
    ("name", "expr", "exact", "dtype"), SESSION_CASES, ids=[c[0] for c in SESSION_CASES]
)
def test_a_derived_column_is_null_where_it_overflows_int64_data(
    name: str, expr: pl.Expr, exact: Callable[..., int | None], dtype: Any
) -> None:
    data = _frame(DATA_64, pl.Int64)
    weights = data["w"].to_list()
    got = _derived_counts(_session(data), expr, _keys(DATA_64, weights, exact))
    assert got == _expected(DATA_64, weights, exact, dtype), name


@pytest.mark.parametrize("dtype", [pl.Int8, pl.Int32])
def test_small_integer_columns_are_checked_too(dtype: Any) -> None:
    data = _frame(DATA_8, dtype)
    weights = data["w"].to_list()
    sess = _session(data)
    for expr, exact, result in (
        (X * 2**62, lambda x, w: x * 2**62, pl.Int64),  # the session widens the column
        (X.cast(dtype, strict=False) * W.cast(dtype, strict=False), lambda x, w: x * w, dtype),
    ):
        got = _derived_counts(sess, expr, _keys(DATA_8, weights, exact))
        assert got == _expected(DATA_8, weights, exact, result), str(expr)


def _count(sess: pf.Session, predicate: pl.Expr) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pf.SeededRandomnessWarning)
        released = (
            sess.query()
            .filter(predicate)
            .bound(max_groups=1, max_rows_per_group=1)
            .agg(pf.count())
            .release(rho=1e11)
        )
    return int(released["count"].item())


def test_a_filter_drops_the_rows_where_its_arithmetic_overflows() -> None:
    sess = _session(_frame(DATA_64, pl.Int64))
    fits = [x for x in DATA_64 if I64_MIN <= x * 2**62 <= I64_MAX]
    assert _count(sess, X * 2**62 < 0) == sum(x < 0 for x in fits)
    assert _count(sess, ~(X * 2**62 >= 0)) == sum(x < 0 for x in fits)
    assert _count(sess, (X * 2**62).is_null()) == 0  # null through is_null: dropped too
    assert _count(sess, X.abs() >= 0) == len(DATA_64) - 1  # abs(MIN) overflows


def test_sql_arithmetic_is_checked() -> None:
    sess = pf.Session(
        _frame(DATA_64, pl.Int64),
        "u",
        pf.zCDP(1e12),
        contributions=pf.Bound(max_groups=1, max_rows_per_group=1),
        rng=SeededRandomness(7),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pf.SeededRandomnessWarning)
        released = sess.sql(
            f"SELECT COUNT(*) AS n FROM data WHERE x * {2**62} < 0 OR -x < 0", rho=1e11
        )
    # Only x in -2..1 overflows nowhere (-x is 0 - x: it overflows for MIN); of those,
    # -2 and -1 have a negative product and 1 a negative -x. Wrapped, 2·2^62 < 0 and so on.
    assert released["n"].item() == 3


def test_the_reported_sum_of_an_overflowing_column_is_not_wrapped() -> None:
    """Every row overflows, so every value is null and counts as the midpoint, 5e5."""
    data = pl.DataFrame({"u": list(range(200)), "age": [20 + i % 60 for i in range(200)]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pf.SeededRandomnessWarning)
        released = (
            _session(data)
            .query()
            .with_columns(big=pl.col("age") * 2**62)
            .bound(max_rows=1)
            .agg(pf.sum("big", bounds=(0, 1e6)))
            .release(rho=1e11)
        )
    # Wrapped, the 50 rows with age ≡ 1 (mod 4) would be 2^62, clipped to 1e6: 2.5e7 more.
    assert abs(released["big_sum"].item() - 200 * 5e5) < 100


# ------------------------------------------------------------------ Spark agrees


SPARK_CASES = [c for c in SESSION_CASES if c[0] in ("x * w", "x - w", "(x * 2^62) // 2^62")]
SPARK_CASES += [c for c in SESSION_CASES if c[0] in ("abs(x)", "int8(x) + 100", "x // -1")]


def test_spark_releases_the_same_nulls_as_polars(spark: Any) -> None:
    data = _frame(DATA_64, pl.Int64)
    weights = data["w"].to_list()
    remote = _session(spark.createDataFrame(data.to_pandas()))
    for name, expr, exact, dtype in SPARK_CASES:
        got = _derived_counts(remote, expr, _keys(DATA_64, weights, exact))
        assert got == _expected(DATA_64, weights, exact, dtype), name
    assert _count(remote, ~(X * 2**62 >= 0)) == 2
    small = _frame(DATA_8, pl.Int8)
    remote_small = _session(spark.createDataFrame(small.to_pandas()))
    times_five = X.cast(pl.Int8, strict=False) * 5 > 0  # 1 and 2; 27, 28 and 127 overflow
    assert _count(remote_small, times_five) == _count(_session(small), times_five) == 2
