"""Per-person values (pf.unit.*) on polars against a plain-Python reading of their rules.

The rules are those of privframe/engines/unit_values.py: NaN is missing, integer
sums are exact or null, first/last follow ``by`` with ties broken by the value,
rank is the "min" rank with null orders unranked.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import privframe as pf
from privframe.engines.spec import PerUnit, UnitColumns, apply_steps

VALUES = {
    "sum_i": pf.unit.sum("i"),
    "sum_x": pf.unit.sum("x"),
    "rows": pf.unit.count(),
    "xs": pf.unit.count("x"),
    "mean_x": pf.unit.mean("x"),
    "min_x": pf.unit.min("x"),
    "max_s": pf.unit.max("s"),
    "distinct_s": pf.unit.n_unique("s"),
    "first_s": pf.unit.first("s", by="t"),
    "last_x": pf.unit.last("x", by="t"),
}


def _frame(seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    n = 60
    x = rng.choice([1.5, -2.0, 3.25, np.nan, 7.0], n).tolist()
    x = [None if rng.random() < 0.15 else v for v in x]
    t = [None if rng.random() < 0.2 else int(v) for v in rng.integers(0, 4, n)]
    s = [None if rng.random() < 0.1 else str(v) for v in rng.choice(["a", "b", "c"], n)]
    return pl.DataFrame(
        {
            "u": rng.integers(0, 8, n),
            "i": rng.integers(-50, 50, n),
            "x": pl.Series(x, dtype=pl.Float64),
            "s": pl.Series(s, dtype=pl.String),
            "t": pl.Series(t, dtype=pl.Int64),
        }
    )


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _reference(rows: list[dict], name: str) -> object:
    present = lambda c: [r[c] for r in rows if not _missing(r[c])]  # noqa: E731
    if name == "sum_i":
        return sum(r["i"] for r in rows)
    if name == "sum_x":
        return sum(present("x"))
    if name == "rows":
        return len(rows)
    if name == "xs":
        return len(present("x"))
    if name == "mean_x":
        xs = present("x")
        return sum(xs) / len(xs) if xs else None
    if name == "min_x":
        return min(present("x"), default=None)
    if name == "max_s":
        return max(present("s"), default=None)
    if name == "distinct_s":
        return len(set(present("s")))
    ordered = [r for r in rows if r["t"] is not None]
    value = "s" if name == "first_s" else "x"
    # Nulls first among tied values: None sorts as the smallest value.
    key = lambda r: (r["t"], (0, 0) if _missing(r[value]) else (1, r[value]))  # noqa: E731
    if not ordered:
        return None
    chosen = min(ordered, key=key) if name == "first_s" else max(ordered, key=key)
    return None if _missing(chosen[value]) else chosen[value]


@pytest.mark.parametrize("seed", range(6))
def test_per_unit_values_follow_their_rules(seed: int) -> None:
    df = _frame(seed)
    step = PerUnit((), tuple(VALUES.items()))
    got = apply_steps(df.lazy(), (step,), unit="u").collect().sort("u")
    for row in got.iter_rows(named=True):
        mine = [r for r in df.iter_rows(named=True) if r["u"] == row["u"]]
        for name in VALUES:
            expected = _reference(mine, name)
            if isinstance(expected, float):
                assert row[name] == pytest.approx(expected), name
            else:
                assert row[name] == expected, name


@pytest.mark.parametrize("seed", range(3))
def test_per_person_columns_give_each_row_its_units_value_and_rank(seed: int) -> None:
    df = _frame(seed)
    step = UnitColumns((("total", pf.unit.sum("i")), ("r", pf.unit.rank("t"))))
    got = apply_steps(df.lazy(), (step,), unit="u").collect()
    assert got.height == df.height
    for row in got.iter_rows(named=True):
        mine = [r for r in df.iter_rows(named=True) if r["u"] == row["u"]]
        assert row["total"] == sum(r["i"] for r in mine)
        if row["t"] is None:
            assert row["r"] is None
        else:
            assert row["r"] == 1 + sum(1 for r in mine if r["t"] is not None and r["t"] < row["t"])


def test_an_integer_sum_past_int64_is_null_not_wrapped() -> None:
    big = 2**62
    df = pl.DataFrame({"u": [1, 1, 2, 2, 3], "i": [big, big, big, -big, -big]})
    step = PerUnit((), (("total", pf.unit.sum("i")),))
    got = apply_steps(df.lazy(), (step,), unit="u").collect().sort("u")
    assert got["total"].to_list() == [None, 0, -big]


@pytest.mark.parametrize("descending", [False, True])
def test_an_overflowing_sum_is_null_whatever_the_rows_order(descending: bool) -> None:
    big = 2**62
    df = pl.DataFrame({"u": [1, 1, 2, 2, 3], "x": [5, None, big, big, None]})
    step = PerUnit((), (("s", pf.unit.sum("x")),))
    got = apply_steps(df.sort("u", descending=descending).lazy(), (step,), unit="u")
    assert got.collect().sort("u")["s"].to_list() == [5, None, 0]


def test_the_row_order_never_changes_a_value() -> None:
    df = _frame(11)
    step = PerUnit((), tuple(VALUES.items()))
    once = apply_steps(df.lazy(), (step,), unit="u").collect().sort("u")
    shuffled = df.sample(fraction=1.0, shuffle=True, seed=3)
    again = apply_steps(shuffled.lazy(), (step,), unit="u").collect().sort("u")
    assert once.select(pl.exclude("mean_x", "sum_x")).equals(
        again.select(pl.exclude("mean_x", "sum_x"))
    )
    assert np.allclose(once["sum_x"].to_numpy(), again["sum_x"].to_numpy())


def test_rank_stands_for_a_row_not_a_person() -> None:
    sess = pf.Session(pl.DataFrame({"u": [1], "t": [1]}), "u", pf.zCDP(1.0))
    with pytest.raises(pf.InvalidValueError, match="value per row"):
        sess.query().per_unit(r=pf.unit.rank("t")).agg(pf.count()).check()


def test_values_check_their_columns() -> None:
    sess = pf.Session(pl.DataFrame({"u": [1], "s": ["a"]}), "u", pf.zCDP(1.0))
    with pytest.raises(pf.InvalidArgumentError, match="numeric"):
        sess.query().per_unit(t=pf.unit.sum("s")).agg(pf.count()).check()
    with pytest.raises(pf.InvalidValueError, match="not in the data"):
        sess.query().per_unit(t=pf.unit.max("nope")).agg(pf.count()).check()
    with pytest.raises(pf.InvalidArgumentError, match="column name"):
        pf.unit.sum(3)  # type: ignore[arg-type]
