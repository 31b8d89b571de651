"""The SQL tests' shared data, sessions and SQL-versus-builder comparisons.

Used by tests/api/test_sql_*.py: the synthetic transactions with their public
metadata and tables, sessions with seeded randomness, and ``check``, which
asserts that a SQL query and a builder query make the same plan and, from the
same seed, the same noisy release.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import polars as pl
from polars.testing import assert_frame_equal

import privframe as pf
from privframe.api.query import Plan, Query
from privframe.api.sql import SQLQuery
from privframe.engines.spec import RowStep
from privframe.mechanisms.noise import SeededRandomness

REGIONS = ["north", "south", "east", "west"]
MONTHS = list(range(1, 13))
AMOUNT = (0, 1000)
AGE = (16, 90)
BOUND = pf.Bound(max_groups=3, max_rows_per_group=5)
ZONES = pl.DataFrame({"region": ["north", "south", "east"], "zone": ["cold", "warm", "warm"]})
SEASONS = pl.DataFrame(
    {
        "region": REGIONS * 2,
        "month": [1] * 4 + [7] * 4,
        "season": ["winter"] * 4 + ["summer"] * 4,
    }
)
META = {
    "amount": pf.Column(bounds=AMOUNT),
    "age": pf.Column(bounds=AGE, candidates=75),  # whole years
    "region": pf.Column(keys=REGIONS),
    "month": pf.Column(keys=MONTHS),
    "zone": pf.Column(keys=["cold", "warm"]),
    "season": pf.Column(keys=["winter", "summer"]),
    # aggregates of expressions and derived group columns, keyed by their alias
    "doubled": pf.Column(bounds=(0, 2001)),
    "mixed": pf.Column(bounds=(-10, 250)),
    "negated": pf.Column(bounds=(-1000, 0)),
    "score": pf.Column(bounds=(1, 3)),
    "weighted": pf.Column(bounds=AMOUNT),
    "north_amount": pf.Column(bounds=AMOUNT),
    "is_north": pf.Column(bounds=(0, 1)),
    "dev": pf.Column(bounds=(0, 500)),
    "older": pf.Column(keys=[False, True]),
    "band": pf.Column(keys=["young", "old"]),
}
RHO = 0.5


def _data() -> pl.DataFrame:
    df = pf.datasets.synthetic_transactions(n_rows=4_000, seed=7)
    # Every 9th amount is missing: for COUNT(col) and IS [NOT] NULL.
    return df.with_columns(
        amount=pl.when(pl.int_range(pl.len()) % 9 == 0).then(None).otherwise(pl.col("amount"))
    )


DATA = _data()


def session(
    seed: int = 0,
    *,
    data: Any = None,
    metadata: dict[str, pf.Column] | None = None,
    budget: pf.Budget | None = None,
    contributions: pf.Bound | None = BOUND,
) -> pf.Session:
    return pf.Session(
        DATA if data is None else data,
        "user_id",
        budget or pf.zCDP(rho=10.0, delta=1e-6),
        rng=SeededRandomness(seed),
        metadata=META if metadata is None else metadata,
        contributions=contributions,
        tables={"zones": ZONES, "seasons": SEASONS},
    )


def bounded(q: Query) -> Query:
    return q.bound(max_groups=3, max_rows_per_group=5)


def position_of(text: str, fragment: str, nth: int = 0) -> tuple[int, int]:
    """(line, column), 1-based, where the ``nth`` occurrence of ``fragment`` starts in ``text``."""
    index = text.index(fragment)
    for _ in range(nth):
        index = text.index(fragment, index + 1)
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


# -- plan and release comparison ------------------------------------------------------------


def _same_step(a: RowStep, b: RowStep) -> None:
    assert a.kind == b.kind
    assert len(a.exprs) == len(b.exprs)
    for x, y in zip(a.exprs, b.exprs, strict=True):
        assert x.meta.eq(y), f"{x} != {y}"
    assert a.on == b.on
    assert a.how == b.how
    assert (a.table is None) == (b.table is None)
    if a.table is not None:
        assert a.table.equals(b.table)


def assert_same_plan(got: Plan, want: Plan) -> None:
    assert got.group_by == want.group_by
    assert got.keys == want.keys
    assert got.bound == want.bound
    assert got.other == want.other
    assert got.aggregates == want.aggregates  # kinds, columns, bounds, q, candidates, names
    assert [s.kind for s in got.steps] == [s.kind for s in want.steps]
    for a, b in zip(got.steps, want.steps, strict=True):
        if isinstance(a, RowStep) and isinstance(b, RowStep):
            _same_step(a, b)
        else:  # the other steps hold no expressions: plain values
            assert a == b


def assert_same_release(got: Any, want: Any) -> None:
    """The same table, the SQL output's columns in select-list order."""
    if isinstance(want, pd.DataFrame):
        assert isinstance(got, pd.DataFrame)
        got, want = pl.from_pandas(got), pl.from_pandas(want)
    assert set(got.columns) <= set(want.columns)
    assert_frame_equal(got, want.select(got.columns))


def check(
    text: str,
    build: Callable[[Query], Query],
    *,
    seed: int = 3,
    rho: float = RHO,
    post: Callable[[pl.DataFrame], pl.DataFrame] = lambda frame: frame,
    **kwargs: Any,
) -> Any:
    """SQL == builder: same plan, and the same noisy release from the same seed."""
    sql_session, builder_session = session(seed), session(seed)
    parsed = sql_session.sql(text, **kwargs)
    assert isinstance(parsed, SQLQuery)
    query = build(builder_session.query())
    assert_same_plan(parsed.query.plan, query.plan)
    got = sql_session.sql(text, rho=rho, **kwargs)
    want = post(query.release(rho=rho))
    assert_same_release(got, want)
    return got


# Quantiles read whole rows, and the engine picks a unit's rows by their position after a
# join, whose order polars does not fix: with seeded randomness the chosen rows (so the
# released quantile) can differ between two identical releases. Limits high enough that
# no row is dropped keep the SQL-vs-builder comparison exact.
WHOLE_ROWS = pf.Bound(max_groups=3, max_rows_per_group=1_000)


def whole_rows(build: Callable[[Query], Query]) -> Callable[[Query], Query]:
    return lambda q: build(q).bound(max_groups=3, max_rows_per_group=1_000)


def small_session(df: pl.DataFrame | str, **kw) -> pf.Session:
    """A session on a few rows with bounds for x, keys for g and limits of one row."""
    return pf.Session(
        df,
        "u",
        pf.zCDP(10.0),
        metadata={"x": pf.Column(bounds=(0, 10)), "g": pf.Column(keys=["a", "b"])},
        contributions=pf.Bound(max_groups=1, max_rows_per_group=1),
        **kw,
    )
