"""Public keys take their column's type exactly, or the query is refused.

Keys are matched after casting them to the column's type; a cast that merged
two keys (``2**53`` and ``2**53 + 1`` are one Float64) would count one row in
several groups, so the change from removing one unit would exceed the
planned sensitivity. Every refusal here happens before anything is charged.
The empirical audit of keys a cast could merge is in tests/privacy/test_privacy_audit.py.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import polars as pl
import pytest
from internals import spec_of

import privframe as pf
from privframe.engines.polars import PolarsEngine
from privframe.plan.planner import plan_release

HUGE = 10**8  # noise σ ≈ 7e-5: releases below are exact (see tests/api/test_unit_ids_exact.py)


def _release(frame: pl.DataFrame, keys: list[object], unit: str | None = None) -> pl.DataFrame:
    sess = pf.Session(frame, unit, pf.zCDP(HUGE))
    query = sess.query()
    if unit is not None:
        query = query.bound(max_groups=len(keys), max_rows_per_group=1)
    result = query.group_by("g", keys=keys).agg(pf.count()).release(rho=HUGE)
    assert isinstance(result, pl.DataFrame)
    return result


@pytest.mark.parametrize(
    ("column", "keys", "why"),
    [
        (pl.Series([2.0**53], dtype=pl.Float64), [2**53, 2**53 + 1], "not exactly"),
        (pl.Series([2.0**60]), [2**60 + i for i in range(256)], "not exactly"),
        (pl.Series([1.0], dtype=pl.Float32), [0.1, 1.0], "not exactly"),
        (pl.Series([1], dtype=pl.Int64), [1.0, 2.5], "not exactly"),
        (pl.Series([1], dtype=pl.Int64), [1, 2**64 - 1], "does not fit"),
        (pl.Series([1], dtype=pl.UInt64), [1, -1], "does not fit"),
        (pl.Series([dt.date(2020, 1, 1)]), [dt.datetime(2020, 1, 1, 12)], "not exactly"),
    ],
    ids=[
        "2^53",
        "2^60+i",
        "float32",
        "fraction-on-int",
        "beyond-int64",
        "negative-on-uint64",
        "datetime-on-date",
    ],
)
def test_keys_the_column_type_cannot_hold_exactly_are_refused(
    column: pl.Series, keys: list[object], why: str
) -> None:
    sess = pf.Session(pl.DataFrame({"g": column}), None, pf.zCDP(1.0))
    query = sess.query().group_by("g", keys=keys).agg(pf.count())
    with pytest.raises(pf.InvalidArgumentError, match=rf"group_by column 'g'.*{why}") as info:
        query.release(rho=0.5)
    assert info.value.__context__ is None
    with pytest.raises(pf.InvalidArgumentError, match=why):
        query.explain(rho=0.5)
    assert sess.ledger == ()
    assert sess.spent == pf.zCDP(0.0)


def test_one_row_counts_in_one_group_whatever_the_key_types() -> None:
    # Exact casts are accepted, and a row matches only the key equal to its value.
    frame = pl.DataFrame({"g": [2.0**53, 3.0, 3.0]})
    result = _release(frame, [2**53, 2**53 + 2, 3])
    assert result["g"].dtype == pl.Float64
    assert result["count"].to_list() == [1, 0, 2]


@pytest.mark.parametrize(
    ("column", "keys", "expected"),
    [
        (pl.Series([2**63 + 5, 1, 1], dtype=pl.UInt64), [2**63 + 5, 1, 2], [1, 2, 0]),
        (pl.Series([2**100, 7, 7], dtype=pl.Int128), [2**100, 7], [1, 2]),
        (pl.Series([1, 2, 2], dtype=pl.Int64), [2.0, 1.0], [2, 1]),
        (pl.Series([0.5, 0.5, 0.25], dtype=pl.Float32), [0.25, 0.5, 1.0], [1, 2, 0]),
        (
            pl.Series([Decimal("1.50"), Decimal("2.70"), Decimal("1.50")], dtype=pl.Decimal(10, 2)),
            [Decimal("1.5"), Decimal("2.7")],
            [2, 1],
        ),
        (pl.Series([dt.date(2020, 1, 2)] * 3), [dt.date(2020, 1, 1), dt.date(2020, 1, 2)], [0, 3]),
    ],
    ids=["uint64", "int128", "float-keys-int-column", "float32", "decimal", "date"],
)
def test_exact_keys_match_exactly(
    column: pl.Series, keys: list[object], expected: list[int]
) -> None:
    result = _release(pl.DataFrame({"g": column, "u": np.arange(column.len())}), keys, unit="u")
    assert result["count"].to_list() == expected


def test_keys_still_refused_as_mixed_or_of_another_family() -> None:
    sess = pf.Session(pl.DataFrame({"g": [1.0]}), None, pf.zCDP(1.0))
    with pytest.raises(pf.InvalidArgumentError, match="cannot match a column"):
        sess.query().group_by("g", keys=["1"]).agg(pf.count()).release(rho=0.5)
    assert sess.ledger == ()


def test_decimal_data_is_not_truncated_to_integer_keys() -> None:
    df = pl.DataFrame(
        {"u": [1, 2, 3], "g": [Decimal("1.5"), Decimal("1.0"), Decimal("2.7")]},
        schema={"u": pl.Int64, "g": pl.Decimal(10, 2)},
    )
    sess = pf.Session(df, "u", pf.zCDP(1e6))
    spec = spec_of(
        sess,
        (
            q := sess.query().bound(max_rows_per_group=1).group_by("g", keys=[1, 2]).agg(pf.count())
        ).plan,
        plan_release(q.plan, True, 1.0),
    )
    exact = PolarsEngine(df.lazy()).aggregate(spec)
    assert exact["__count"].to_list() == [1, 0]


def test_a_key_that_does_not_fit_the_column_type_is_a_clear_error() -> None:
    df = pl.DataFrame({"u": [1], "n": [3]}, schema={"u": pl.Int64, "n": pl.Int64})
    sess = pf.Session(df, "u", pf.zCDP(1e6))
    query = sess.query().bound(max_rows_per_group=1).group_by("n", keys=[2**64 - 1])
    with pytest.raises(pf.InvalidArgumentError, match="does not fit"):
        query.agg(pf.count()).release(rho=1.0)
    assert sess.ledger == ()
