"""Generated bad Session arguments are refused without charge or leak (checks: fuzz_setup.py).

Bad data (not a frame; in-memory frames that cannot be read or whose unit column
cannot be a privacy unit), bad privacy units and budgets over each kind of data,
and bad options.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest
from fuzz_setup import (
    LIMITS,
    MARKER,
    SECRET,
    SECRET_AGE,
    Case,
    Context,
    check_case,
    fuzz_context,
    on_own_session,
    private_data,
)

import privframe as pf


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> Context:
    return fuzz_context(tmp_path_factory)


def _frames() -> dict[str, Callable[[], object]]:
    """The private data in each in-memory form a Session takes."""
    return {
        "polars": private_data,
        "pandas": lambda: private_data().to_pandas(),
        "lazy": lambda: private_data().lazy(),
    }


def _bad_frames() -> dict[tuple[str, bool], Callable[[], object]]:
    """In-memory data a Session must refuse, each holding the planted values."""
    base = private_data().to_pandas()

    def pandas(column: str, values: list[Any], dtype: Any = object) -> pd.DataFrame:
        frame = base.head(len(values)).copy()
        frame[column] = pd.Series(values, dtype=dtype)
        return frame

    def lazy_text(column: str, read: Callable[[pl.Expr], pl.Expr]) -> pl.LazyFrame:
        """The column as text with the marker in one row, read back by ``read``, lazily."""
        values = private_data()[column].cast(pl.String).to_list()
        values[2] = MARKER
        text = private_data().with_columns(pl.Series(column, values))
        return text.lazy().with_columns(read(pl.col(column)))

    def python_error(column: str) -> pl.LazyFrame:
        """A LazyFrame whose Python function raises an error quoting the column's value."""

        def fail(value: object) -> object:
            raise ValueError(f"cannot use {value}")

        return private_data().lazy().with_columns(pl.col(column).map_elements(fail, pl.Int64))

    # Object columns other than the unit are read as text whatever they hold
    # (test_pandas_types_come_from_the_owner.py): a type of no column is refused.
    unreadable = {
        "pandas_complex": lambda: pandas("amount", [complex(SECRET_AGE, 1), 1, 2], complex),
        "pandas_duplicate_names": lambda: base.set_axis(["user_id"] * 6, axis=1),
        "lazy_cast": lambda: lazy_text("amount", lambda c: c.cast(pl.Float64)),
        "lazy_date": lambda: lazy_text("age", lambda c: c.str.to_date()),
        "lazy_python_error": lambda: python_error("note"),
    }
    bad_unit = {
        "pandas_past_2_63": lambda: pandas("user_id", [1, SECRET_AGE * 10**15, 3]),
        "pandas_mixed": lambda: pandas("user_id", [1, MARKER, 3]),
        "pandas_none": lambda: pandas("user_id", [1, None, 3]),
        "pandas_nan": lambda: pandas("user_id", [1.0, math.nan, SECRET], float),
        "pandas_multiindex": lambda: pd.DataFrame(
            [[1, SECRET]], columns=pd.MultiIndex.from_tuples([("u", "a"), ("v", "b")])
        ),
        "lazy_cast": lambda: lazy_text("user_id", lambda c: c.cast(pl.Int64)),
        "lazy_date": lambda: lazy_text("user_id", lambda c: c.str.to_date()),
        "lazy_python_error": lambda: python_error("user_id"),
        "polars_object": lambda: private_data().with_columns(
            pl.Series("user_id", [object()] * 6, dtype=pl.Object)
        ),
        "polars_list": lambda: private_data().with_columns(pl.concat_list("user_id")),
        "polars_struct": lambda: private_data().with_columns(pl.struct("user_id", "note")),
        "polars_null": lambda: private_data().with_columns(pl.lit(None).alias("user_id")),
        "polars_nan": lambda: private_data().with_columns(
            pl.when(pl.col("age") == SECRET_AGE).then(float("nan")).otherwise(1.0).alias("user_id")
        ),
    }
    # Without a unit, a bad unit column is just another column: only the unit cases refuse.
    return {
        **{(name, True): frame for name, frame in unreadable.items()},
        **{(f"{name}_unit", False): frame for name, frame in bad_unit.items()},
    }


def _read_every_column(sess: pf.Session) -> object:
    """A release whose filter reads every column (a LazyFrame fails only where it is read)."""
    reads = functools.reduce(operator.and_, (pl.col(c).is_not_null() for c in sess.columns))
    query = sess.query().filter(reads)
    if sess.privacy_unit is not None:
        query = query.bound(**LIMITS)
    return query.agg(pf.count()).release(rho=0.01)


def _session_cases() -> list[Case]:
    good_unit, good_budget = "user_id", lambda: pf.zCDP(1.0)
    not_data: dict[str, Callable[[], object]] = {
        "none": lambda: None,
        "int": lambda: 3,
        "list": lambda: [[1, 2]],
        "dict": lambda: {"user_id": [1]},
        "ndarray": lambda: np.zeros((2, 2)),
        "bytes": lambda: b"user_id\n1\n",
        "series": lambda: pl.Series("user_id", [1, 2]),
        "text_path": lambda: "no/such/file.csv",
    }
    bad_data = {**{(name, True): data for name, data in not_data.items()}, **_bad_frames()}
    bad_units: dict[str, object] = {
        "list": ["user_id"],
        "tuple": ("user_id", "region"),
        "int": 3,
        "float": 1.5,
        "empty": "",
        "missing": "customer",
        "bytes": b"user_id",
        "set": {"user_id"},
        "true": True,
        "reserved": "__unit",
    }
    bad_budgets: dict[str, Callable[[], object]] = {
        "none": lambda: None,
        "float": lambda: 1.0,
        "text": lambda: "rho=1",
        "dict": lambda: {"rho": 1.0},
        "negative": lambda: pf.zCDP(-1.0),
        "nan": lambda: pf.zCDP(math.nan),
        "inf": lambda: pf.zCDP(math.inf),
        "approx_negative_delta": lambda: pf.ApproxDP(1.0, -1e-6),
        "approx_delta_one": lambda: pf.ApproxDP(1.0, 1.0),
        "gdp_negative": lambda: pf.GDP(-2.0),
    }
    cases = []
    for (name, always), data in bad_data.items():
        for unit in (good_unit, None):
            cases.append(
                Case(
                    f"data={name}-unit={unit}",
                    lambda c, d=data, u=unit: on_own_session(
                        pf.Session(d(), u, good_budget()), _read_every_column
                    ),
                    refused=always or unit is not None,
                )
            )
    # Each wrong unit or budget, opened over each kind of data.
    wrong: list[tuple[str, Callable[[Callable[[], object]], object]]] = [
        *(
            (f"unit={name}", lambda f, u=unit: pf.Session(f(), u, good_budget()))
            for name, unit in bad_units.items()
        ),
        *(
            (f"budget={name}", lambda f, b=budget: pf.Session(f(), good_unit, b()))
            for name, budget in bad_budgets.items()
        ),
    ]
    for (label, open_data), (frame_name, frame) in itertools.product(wrong, _frames().items()):
        cases.append(Case(f"{label}-data={frame_name}", lambda c, o=open_data, f=frame: o(f)))
    options: dict[str, list[tuple[str, object]]] = {
        "metadata": [
            ("list", [("amount", (0, 1))]),
            ("plain_bounds", {"amount": (0, 1)}),
            ("int_key", {1: pf.Column(bounds=(0, 1))}),
        ],
        "contributions": [("dict", dict(LIMITS)), ("int", 3), ("tuple", (2, 3))],
        "tables": [
            ("list", [pl.DataFrame({"a": [1]})]),
            ("data_name", {"data": pl.DataFrame({"a": [1]})}),
            ("not_frame", {"t": [1, 2]}),
            ("int_name", {1: pl.DataFrame({"a": [1]})}),
        ],
        "results": [("polars", "polars"), ("none", None), ("spark_local", "spark")],
        "rng": [("int", 7), ("numpy", np.random.default_rng(0)), ("text", "seed")],
        "ledger": [("int", 5), ("list", ["a.sqlite"])],
        "epsilon": [("given", 1.0)],
    }
    for (option, values), (frame_name, frame) in itertools.product(
        options.items(), _frames().items()
    ):
        for value_name, value in values:
            cases.append(
                Case(
                    f"{option}={value_name}-data={frame_name}",
                    lambda c, f=frame, o=option, v=value: pf.Session(
                        f(), good_unit, good_budget(), **{o: v}
                    ),
                )
            )
    for name, unit in bad_units.items():
        cases.append(
            Case(
                f"unit={name}-budget=float",
                lambda c, u=unit: pf.Session(private_data(), u, 1.0),
            )
        )
    return cases


CASES = _session_cases()


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_bad_input_is_refused_without_charge_or_leak(ctx: Context, case: Case) -> None:
    check_case(case, ctx, ctx.sess)
