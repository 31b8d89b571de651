"""Generated bad builder queries are refused without charge or leak (checks: fuzz_setup.py).

Query steps (filters, derived columns, joins), group_by and its keys, aggregates
and their bounds, release arguments, and a fixed-seed shuffle of bounds, limits
and rho together.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import random
import warnings
from collections.abc import Callable
from decimal import Decimal

import pandas as pd
import polars as pl
import pytest
from fuzz_setup import (
    KEYS,
    Case,
    Context,
    bounded,
    check_case,
    fuzz_context,
)

import privframe as pf


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> Context:
    return fuzz_context(tmp_path_factory)


def _filters() -> dict[str, object]:
    """Filter predicates privframe must refuse (or that fail only on private values)."""
    col = pl.col
    with warnings.catch_warnings():
        # polars suggests a native expression for the Python function: that is the point.
        warnings.simplefilter("ignore", pl.exceptions.PolarsInefficientMapWarning)
        python_function = col("age").map_elements(lambda v: v > 1, return_dtype=pl.Boolean)
    return {
        "text": "age > 3",
        "int": 3,
        "true": True,
        "none": None,
        "series": pl.Series([True]),
        "missing_column": col("missing") > 1,
        "not_boolean": col("age"),
        "text_plus_int": col("region") + 1,
        "strict_cast": col("note").cast(pl.Int64) > 1,
        "to_integer": col("note").str.to_integer() > 1,
        "aggregation": col("age").sum() > 1,
        "window": (col("age") > col("age").mean().over("region")),
        "shift": col("age").shift() > 1,
        "python_function": python_function,
        "regex": col("note").str.contains("M.*"),
        "text_vs_number": col("region") > 3,
        "date_vs_int": col("day") > 3,
        "is_in_column": col("age").is_in(col("amount").implode()),
        "sort": col("age").sort() > 1,
        "len": pl.len() > 0,
        "struct_field": col("note").struct.field("a") == 1,
        "list_op": col("note").list.len() > 0,
        "strptime": col("note").str.strptime(pl.Date, "%Y") > dt.date(2000, 1, 1),
    }


def _derived() -> dict[str, object]:
    col = pl.col
    return {
        "text": "age * 2",
        "int": 3,
        "none": None,
        "strict_cast": col("note").cast(pl.Float64),
        "to_integer": col("note").str.to_integer(),
        "rewrite_unit": (col("user_id") + 1).alias("user_id"),
        "aggregation": col("amount").sum(),
        "python_function": col("age").map_elements(lambda v: v, return_dtype=pl.Int64),
        "reserved_name": (col("age") * 2).alias("__x"),
        "missing_column": col("missing") * 2,
        "text_times": col("region") * 2,
        "cum_sum": col("age").cum_sum(),
    }


def _step_cases() -> list[Case]:
    cases = []
    for name, predicate in _filters().items():
        cases.append(
            Case(
                f"filter={name}",
                lambda c, p=predicate: bounded(c).filter(p).agg(pf.count()).release(rho=0.01),
            )
        )
        cases.append(
            Case(
                f"filter={name}-explain",
                lambda c, p=predicate: bounded(c).filter(p).agg(pf.count()).explain(rho=0.01),
            )
        )
    for name, expr in _derived().items():
        # group_by names the derived column itself: its own name or alias is not used.
        uses = ("sum",) if name in ("rewrite_unit", "reserved_name") else ("sum", "group")
        for use in uses:
            if use == "sum":

                def run(c: Context, e: object = expr) -> object:
                    query = bounded(c).with_columns(e)
                    column = getattr(e, "meta", None)
                    out = column.output_name() if column is not None else "x"
                    return query.agg(pf.sum(out, (0, 10))).release(rho=0.01)

            else:

                def run(c: Context, e: object = expr) -> object:
                    return (
                        (bounded(c).with_columns(derived=e).group_by("derived", keys=[1, 2]))
                        .agg(pf.count())
                        .release(rho=0.01)
                    )

            cases.append(Case(f"with_columns={name}-{use}", run))
    tables: dict[str, object] = {
        "none": None,
        "int": 3,
        "dict": {"region": ["north"]},
        "repeated_keys": pl.DataFrame({"region": ["north", "north"], "zone": [1, 2]}),
        "no_join_column": pl.DataFrame({"other": ["north"]}),
        "clashing_column": pl.DataFrame({"region": ["north"], "amount": [1.0]}),
        "pandas_mixed": pd.DataFrame({"region": ["north", 3], "zone": [1, 2]}),
        "object_column": pl.DataFrame({"region": ["north"], "zone": [object()]}),
    }
    ons: dict[str, object] = {"region": "region", "int": 3, "empty": [], "missing": "zone9"}
    hows = ("left", "outer", 3)
    for (t_name, table), (on_name, on), how in itertools.product(tables.items(), ons.items(), hows):
        # A public table's other columns may have any type: only the join columns matter.
        valid = t_name == "object_column" and on_name == "region" and how == "left"
        cases.append(
            Case(
                f"join={t_name}-on={on_name}-how={how}",
                lambda c, t=table, o=on, h=how: (
                    bounded(c).join(t, on=o, how=h).agg(pf.count()).release(rho=0.01)
                ),
                refused=not valid,
            )
        )
    return cases


def _group_cases() -> list[Case]:
    columns: dict[str, object] = {
        "region": "region",
        "int": 3,
        "none": None,
        "empty": [],
        "twice": ["region", "region"],
        "missing": "missing",
        "unit": "user_id",
        "reserved": "__g",
        "dict": {"region": 1},
    }
    keys: dict[str, object] = {
        "good": KEYS,
        "empty": [],
        "null": ["north", None],
        "nan": [1.0, math.nan],
        "text": "north",
        "set": {"north"},
        "mixed": ["north", 1],
        "nested": [["north"]],
        "dict": {"region": KEYS},
        "duplicate": ["north", "north"],
        "ints": [1, 2],
        "huge_int": [2**70],
        "bools": [True, False],
        "wrong_frame": pl.DataFrame({"zone": KEYS}),
        "pandas_mixed": pd.DataFrame({"region": ["north", 3]}),
        "keyset_other_column": pf.keys.from_list("zone", KEYS),
        "dates": [dt.date(2024, 1, 1)],
    }
    others: dict[str, object] = {"none": None, "int": 3, "a_key": "north"}
    cases = []
    for (c_name, column), (k_name, key), (o_name, other) in itertools.product(
        columns.items(), keys.items(), others.items()
    ):
        if (c_name, k_name, o_name) in {("region", "good", "none")}:
            continue
        cases.append(
            Case(
                f"group_by={c_name}-keys={k_name}-other={o_name}",
                lambda c, g=column, k=key, o=other: (
                    bounded(c).group_by(g, keys=k, other=o).agg(pf.count()).release(rho=0.01)
                ),
            )
        )
    for name, column in columns.items():
        if name == "region":
            continue
        cases.append(
            Case(
                f"group_by={name}-private",
                lambda c, g=column: (
                    bounded(c).group_by(g).agg(pf.count()).release(rho=0.01, delta=1e-9)
                ),
            )
        )
    cases.append(
        Case(
            "group_by-twice",
            lambda c: (
                bounded(c)
                .group_by("region", keys=KEYS)
                .group_by("note", keys=["a"])
                .agg(pf.count())
                .release(rho=0.01)
            ),
        )
    )
    cases.append(
        Case(
            "product-mixed",
            lambda c: (
                bounded(c)
                .group_by(["region", "age"], keys=pf.keys.product(region=KEYS, age=[1, "x"]))
                .agg(pf.count())
                .release(rho=0.01)
            ),
        )
    )
    cases.append(
        Case(
            "keys-from-pandas-objects",
            lambda c: pf.keys.from_dataframe(pd.DataFrame({"region": [{"a": 1}, [2]]})),
        )
    )
    return cases


def _aggregate_cases() -> list[Case]:
    kinds: dict[str, Callable[[object, object], object]] = {
        "sum": pf.sum,
        "mean": pf.mean,
        "var": pf.var,
        "std": pf.std,
        "median": pf.median,
        "quantile": lambda column, bounds: pf.quantile(column, 0.3, bounds),
    }
    bounds: dict[str, object] = {
        "subnormal": (0, 5e-324),
        "negative_subnormal": (-5e-324, 0),
        "tiny": (0, 1e-320),
        "reversed": (1, 0),
        "equal": (2, 2),
        "nan": (math.nan, 1),
        "inf": (0, math.inf),
        "text": ("0", "1"),
        "none": None,
        "one": (0,),
        "three": (0, 1, 2),
        "huge": (-1e308, 1e308),
        "bools": (True, 2),
        "huge_int": (0, 2**1100),
        "decimal_text": (Decimal("0.1"), "x"),
        "dict": {"lower": 0, "upper": 1},
    }
    cases = []
    for (k_name, kind), (b_name, bound) in itertools.product(kinds.items(), bounds.items()):
        # A quantile picks one of its candidates: any finite range with enough of them works.
        valid = k_name in ("median", "quantile") and b_name in ("tiny", "huge")
        cases.append(
            Case(
                f"{k_name}-bounds={b_name}",
                lambda c, k=kind, b=bound: bounded(c).agg(k("amount", b)).release(rho=0.01),
                refused=not valid,
            )
        )
    columns: dict[str, object] = {
        "text_column": "region",
        "missing": "missing",
        "int": 3,
        "none": None,
        "date": "day",
        "empty": "",
    }
    for (k_name, kind), (c_name, column) in itertools.product(kinds.items(), columns.items()):
        cases.append(
            Case(
                f"{k_name}-column={c_name}",
                lambda c, k=kind, col=column: bounded(c).agg(k(col, (0, 10))).release(rho=0.01),
            )
        )
    qs: dict[str, object] = {
        "negative": -0.1,
        "above_one": 1.5,
        "nan": math.nan,
        "text": "0.5",
        "empty": [],
        "repeated": [0.5, 0.5],
        "none": None,
        "nested": [[0.5]],
    }
    for name, q in qs.items():
        cases.append(
            Case(
                f"quantile-q={name}",
                lambda c, q=q: bounded(c).agg(pf.quantile("amount", q, (0, 10))).release(rho=0.01),
            )
        )
    for name, candidates in {"zero": 0, "one": 1, "huge": 2**20, "float": 2.5, "text": "9"}.items():
        cases.append(
            Case(
                f"quantile-candidates={name}",
                lambda c, n=candidates: (
                    bounded(c)
                    .agg(pf.quantile("amount", 0.5, (0, 10), candidates=n))
                    .release(rho=0.01)
                ),
            )
        )
    aliases: dict[str, object] = {"int": 3, "empty": "", "none": None, "group_name": "region"}
    for name, alias in aliases.items():
        cases.append(
            Case(
                f"alias={name}",
                lambda c, a=alias: (
                    bounded(c)
                    .group_by("region", keys=KEYS)
                    .agg(pf.count().alias(a))
                    .release(rho=0.01)
                ),
            )
        )
    agg_args: dict[str, Callable[[Context], object]] = {
        "none": lambda c: bounded(c).agg().release(rho=0.01),
        "text": lambda c: bounded(c).agg("count").release(rho=0.01),
        "function": lambda c: bounded(c).agg(pf.count).release(rho=0.01),
        "keyword": lambda c: bounded(c).agg(n=pf.count()).release(rho=0.01),
        "same_name": lambda c: bounded(c).agg(pf.count(), pf.count()).release(rho=0.01),
        "error_clash": lambda c: (
            bounded(c)
            .agg(pf.sum("amount", (0, 1)), pf.count().alias("amount_sum_std"))
            .release(rho=0.01, with_error=True)
        ),
        "count_column": lambda c: bounded(c).agg(pf.count("amount")).release(rho=0.01),
        "no_bound": lambda c: c.sess.query().agg(pf.count()).release(rho=0.01),
        "bound_zero": lambda c: c.sess.query().bound(0, 1).agg(pf.count()).release(rho=0.01),
        "bound_float": lambda c: c.sess.query().bound(1.5, 2).agg(pf.count()).release(rho=0.01),
        "bound_text": lambda c: c.sess.query().bound("2", 1).agg(pf.count()).release(rho=0.01),
        "bound_bool": lambda c: c.sess.query().bound(True, 1).agg(pf.count()).release(rho=0.01),
        "bound_huge": lambda c: (
            c.sess.query().bound(2**80, 2**80).agg(pf.sum("amount", (0, 1))).release(rho=0.01)
        ),
    }
    for name, run in agg_args.items():
        cases.append(Case(f"agg-{name}", run))
    return cases


def _release_cases() -> list[Case]:
    rhos: dict[str, object] = {
        "negative": -1,
        "zero": 0,
        "nan": math.nan,
        "inf": math.inf,
        "text": "0.1",
        "none": None,
        "true": True,
        "huge": 1e308,
        "subnormal": 5e-324,
        "list": [0.1],
        "over_budget": 5000.0,
        "complex": 1j,
    }
    deltas: dict[str, object] = {"none": None, "negative": -1e-9, "one": 1.0, "text": "x"}
    with_errors: dict[str, object] = {"false": False, "text": "yes"}
    cases = []
    for (r_name, rho), (d_name, delta), (w_name, with_error) in itertools.product(
        rhos.items(), deltas.items(), with_errors.items()
    ):
        cases.append(
            Case(
                f"release-rho={r_name}-delta={d_name}-with_error={w_name}",
                lambda c, r=rho, d=delta, w=with_error: (
                    bounded(c)
                    .group_by("region", keys=KEYS)
                    .agg(pf.count(), pf.mean("amount", (0, 10)))
                    .release(rho=r, delta=d, with_error=w)
                ),
            )
        )
    for d_name, delta in deltas.items():
        if d_name == "none":
            continue
        cases.append(
            Case(
                f"release-keys-delta={d_name}",
                lambda c, d=delta: (
                    bounded(c)
                    .group_by("region", keys=KEYS)
                    .agg(pf.count())
                    .release(rho=0.01, delta=d)
                ),
            )
        )
        cases.append(
            Case(
                f"release-private-groups-delta={d_name}",
                lambda c, d=delta: (
                    bounded(c).group_by("region").agg(pf.count()).release(0.01, delta=d)
                ),
            )
        )
    others: dict[str, Callable[[Context], object]] = {
        "epsilon": lambda c: bounded(c).agg(pf.count()).release(epsilon=1.0),
        "no_rho": lambda c: bounded(c).agg(pf.count()).release(),
        "positional_extra": lambda c: bounded(c).agg(pf.count()).release(0.01, True),
        "label_int": lambda c: bounded(c).agg(pf.count()).release(0.01, label=3),
        "label_none": lambda c: bounded(c).agg(pf.count()).release(0.01, label=None),
        "weights_list": lambda c: bounded(c).agg(pf.count()).release(0.01, weights=[1.0]),
        "weights_negative": lambda c: (
            bounded(c).agg(pf.count()).release(0.01, weights={"count": -1})
        ),
        "weights_unknown": lambda c: bounded(c).agg(pf.count()).release(0.01, weights={"n": 1.0}),
        "weights_nan": lambda c: (
            bounded(c).agg(pf.count()).release(0.01, weights={"count": math.nan})
        ),
        "weights_text": lambda c: bounded(c).agg(pf.count()).release(0.01, weights={"count": "1"}),
        "explain_text_rho": lambda c: bounded(c).agg(pf.count()).explain("0.1"),
        "explain_epsilon": lambda c: bounded(c).agg(pf.count()).explain(epsilon=1.0),
        "check_text": lambda c: bounded(c).agg(pf.count()).check(with_error="x", extra=1),
        "no_aggregates": lambda c: bounded(c).release(rho=0.01),
    }
    for name, run in others.items():
        cases.append(Case(f"release-{name}", run))
    return cases


def _generated() -> list[Case]:
    cases = [*_step_cases(), *_group_cases(), *_aggregate_cases(), *_release_cases()]
    # A fixed-seed shuffle of bounds, limits and rho together, beyond the products above.
    rng = random.Random(14)
    picks = [-1.0, 0.0, 5e-324, 1e-300, 1.0, 1e300, math.nan, math.inf, "1", None]
    for i in range(40):
        low, high, rho = rng.choice(picks), rng.choice(picks), rng.choice(picks)
        k, m = rng.choice([0, 1, 2**62, -3, 2.5]), rng.choice([1, 0, None, 2**40])
        cases.append(
            Case(
                f"random-{i}",
                lambda c, lo=low, hi=high, r=rho, k=k, m=m: (
                    c.sess.query()
                    .bound(max_groups=k, max_rows_per_group=m)
                    .group_by("region", keys=KEYS)
                    .agg(pf.mean("amount", (lo, hi)))
                    .release(rho=r)
                ),
                refused=False,
            )
        )
    ids = [case.id for case in cases]
    assert len(ids) == len(set(ids)), "case ids repeat"
    return cases


CASES = _generated()


def test_the_suite_generates_at_least_500_bad_inputs() -> None:
    refused = [case for case in CASES if case.refused]
    assert len(refused) >= 500


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_bad_input_is_refused_without_charge_or_leak(ctx: Context, case: Case) -> None:
    check_case(case, ctx, ctx.sess)
