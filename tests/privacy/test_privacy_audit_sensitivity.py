"""Sensitivity audit: removing one person never changes the exact aggregates by more than planned.

The noise of a release is calibrated to the planner's L2 sensitivity, which
rests on Lemma 1 of docs/sensitivity.md: bounding is unit-local, so with the
same engine seed every other unit keeps the same groups and rows whether or
not a given unit is present. This audit checks the consequence directly and
exactly, without noise: for each person X of a dataset D (a person is an ID
as the input holds it, before privframe normalises any type) and each of
several engine seeds, it runs the engine on D and on D − X with the same seed
and requires, for every noisy measurement, ‖f(D) − f(D − X)‖₂ <= its planned
L2 sensitivity (grid units), and for every quantile histogram that keys
without X's rows are unchanged while X's keys change by at most its
``max_rows_per_group`` rows. A scenario privframe refuses must be refused
before anything is charged. It is deterministic: any violation is a real one.

The scenarios are the ways bounding could stop being unit-local (a decimal
unit ID read as a float would merge people; keys merged by a cast would count
a row in many groups; quantile row sampling could depend on other units'
rows), each beside exact variants, so the audit is never satisfied by
refusals alone.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np
import polars as pl
import pytest
from internals import column_of, spec_of

import privframe as pf
from privframe.api.query import Query
from privframe.engines.spec import COUNT, DISTINCT
from privframe.mechanisms.noise import SeededRandomness
from privframe.plan.aggregates.quantile import histogram_specs
from privframe.plan.planner import ReleasePlan, plan_release
from privframe.plan.release import Pipeline

SEEDS = [int(w) for w in SeededRandomness(7).words(8)]
RHO = 0.5
GROUP = "g"  # every scenario groups by this column

MakeQuery = Callable[[pf.Session], Query]


@dataclasses.dataclass(frozen=True)
class Scenario:
    frame: pl.DataFrame
    unit: str | None
    make_query: MakeQuery
    refused: bool = False


@dataclasses.dataclass(frozen=True)
class Exact:
    release: ReleasePlan
    outputs: pl.DataFrame


def _exact(frame: pl.DataFrame, scenario: Scenario, seed: int) -> Exact:
    sess = pf.Session(frame, scenario.unit, pf.zCDP(1.0))
    query = scenario.make_query(sess)
    release = plan_release(query.plan, scenario.unit is not None, RHO)
    spec = dataclasses.replace(spec_of(sess, query.plan, release), seed=seed)
    return Exact(release, sess._engine.aggregate(spec))


def _people(frame: pl.DataFrame, unit: str | None) -> list[list[int]]:
    """The row numbers of each person (by the input's own IDs; each row when unit is None)."""
    if unit is None:
        return [[i] for i in range(frame.height)]
    rows = frame.with_row_index("row").group_by(unit, maintain_order=True).agg("row")
    return rows["row"].to_list()


def _without(frame: pl.DataFrame, rows: list[int]) -> pl.DataFrame:
    keep = ~pl.int_range(pl.len()).is_in(rows)
    return frame.filter(keep)


def _histogram(cell: list[dict[str, int]]) -> dict[int, int]:
    return {pair["position"]: pair["count"] for pair in cell}


def _violations(scenario: Scenario) -> list[str]:
    """Every (person, seed, measurement) whose removal changes more than planned."""
    found = []
    for seed in SEEDS:
        full = _exact(scenario.frame, scenario, seed)
        max_rows = full.release.limits.max_rows_per_group
        for person, rows in enumerate(_people(scenario.frame, scenario.unit)):
            less = _exact(_without(scenario.frame, rows), scenario, seed)
            where = f"person {person}, seed {seed}"
            for m in full.release.measurements:
                name = {"count": COUNT, "distinct": DISTINCT}.get(m.kind) or column_of(
                    full.release, m
                )
                diff = (full.outputs[name] - less.outputs[name]).to_numpy().astype(np.float64)
                l2 = math.sqrt(float(np.square(diff).sum()))
                if l2 > m.l2_units:
                    found.append(f"{where}: {m.key} moved {l2:g} > {m.l2_units:g}")
            own_keys = set(scenario.frame[rows][GROUP].to_list())
            for name in [h.name for h in histogram_specs(full.release.quantiles).values()]:
                for key, before, after in zip(
                    full.outputs[GROUP].to_list(),
                    full.outputs[name].to_list(),
                    less.outputs[name].to_list(),
                    strict=True,
                ):
                    b, a = _histogram(before), _histogram(after)
                    moved = sum(abs(b.get(p, 0) - a.get(p, 0)) for p in {*b, *a})
                    allowed = max_rows if key in own_keys else 0
                    if moved > allowed:
                        found.append(f"{where}: histogram of {key!r} moved {moved} > {allowed}")
    return found


def _refused_before_charging(scenario: Scenario) -> bool:
    sess = pf.Session(scenario.frame, scenario.unit, pf.zCDP(1.0))
    try:
        scenario.make_query(sess).release(rho=RHO)
    except pf.PrivframeError:
        assert sess.ledger == ()
        return True
    return False


# --------------------------------------------------------------------------- scenarios


def _one_key_each(ids: pl.Series) -> pl.DataFrame:
    """Person i has 3 rows in key k_i: a person merged with others would compete for k=1 slot."""
    n = ids.len()
    return pl.DataFrame(
        {
            "id": pl.concat([ids] * 3),
            "g": [f"k{i}" for i in range(n)] * 3,
            "amount": np.linspace(0, 90, 3 * n),
        }
    )


def _count_and_sum(keys: list[str]) -> MakeQuery:
    return lambda sess: (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=2)
        .group_by("g", keys=keys)
        .agg(pf.count(), pf.sum("amount", bounds=(0, 100)))
    )


def _decimal_ids() -> Scenario:
    ids = pl.Series([Decimal(10**19 + i) for i in range(8)], dtype=pl.Decimal(38, 0))
    return Scenario(_one_key_each(ids), "id", _count_and_sum([f"k{i}" for i in range(8)]))


def _uint64_ids() -> Scenario:
    ids = pl.Series([2**63 + i for i in range(8)], dtype=pl.UInt64)
    return Scenario(_one_key_each(ids), "id", _count_and_sum([f"k{i}" for i in range(8)]))


def _int64_ids(ids: list[int]) -> Scenario:
    """Integer IDs take the packed-cell path: ``unit · 2^3 + key`` with 8 keys."""
    frame = _one_key_each(pl.Series(ids, dtype=pl.Int64))
    return Scenario(frame, "id", _count_and_sum([f"k{i}" for i in range(len(ids))]))


def _spread_groups() -> Scenario:
    """Integer IDs each in 5 of 8 keys with 3 rows there: groups chosen by the packed order."""
    ids = [u for u in range(8) for _ in range(15)]
    keys = [f"k{(u + j) % 8}" for u in range(8) for j in range(5) for _ in range(3)]
    frame = pl.DataFrame({"id": ids, "g": keys, "amount": np.linspace(0, 100, len(ids))})

    def make_query(sess: pf.Session) -> Query:
        return (
            sess.query()
            .bound(max_groups=2, max_rows_per_group=2)
            .group_by("g", keys=[f"k{i}" for i in range(8)])
            .agg(pf.count(), pf.sum("amount", bounds=(0, 100)))
        )

    return Scenario(frame, "id", make_query)


def _integer_keys(dtype: pl.DataType, refused: bool) -> Scenario:
    # Each row its own person; one row holds 2^60, and the keys are 2^60 + i: as Float64
    # they are all 2^60 (spacing 256 there), so that row would count in 25 groups.
    values = [2**60, 2**60 + 3, 5, 5, 7]
    frame = pl.DataFrame({"g": pl.Series(values).cast(dtype)})
    keys = [2**60 + i for i in range(25)]

    def make_query(sess: pf.Session) -> Query:
        return sess.query().group_by("g", keys=keys).agg(pf.count())

    return Scenario(frame, None, make_query, refused)


def _quantile_rows() -> Scenario:
    # Person 0 (rows first in the input, key b) must not change which rows the others,
    # each with more rows than max_rows_per_group in key a, keep.
    gen = np.random.default_rng(5)
    ids = [0] * 4 + [u for u in range(1, 13) for _ in range(6)]
    keys = ["b"] * 4 + ["a"] * 72
    frame = pl.DataFrame({"id": ids, "g": keys, "x": gen.uniform(0, 100, len(ids)).round(1)})

    def make_query(sess: pf.Session) -> Query:
        return (
            sess.query()
            .bound(max_groups=1, max_rows_per_group=2)
            .group_by("g", keys=["a", "b"])
            .agg(pf.count(), pf.median("x", bounds=(0, 100), candidates=101))
        )

    return Scenario(frame, "id", make_query)


def _dropped_missing_values() -> Scenario:
    """Units over max_rows_per_group with null and NaN values, their rows dropped from the sums.

    With missing="drop" a unit's missing rows still take its row slots (they add 0 to the
    centred sums and to the count of values), so the sums and the count of values move by
    at most what a row of a present value moves them.
    """
    gen = np.random.default_rng(11)
    ids = [u for u in range(10) for _ in range(5)]
    keys = [["a", "b", "c"][(u + r) % 3] for u in range(10) for r in range(5)]
    values = gen.uniform(-20, 120, len(ids)).round(1).tolist()
    for i in range(0, len(ids), 3):
        values[i] = None if i % 2 else float("nan")
    frame = pl.DataFrame({"id": ids, "g": keys, "x": values}, schema_overrides={"x": pl.Float64})

    def make_query(sess: pf.Session) -> Query:
        return (
            sess.query()
            .bound(max_groups=2, max_rows_per_group=1, max_rows=3)
            .group_by("g", keys=["a", "b", "c"])
            .agg(
                pf.count(),
                pf.mean("x", bounds=(0, 100), missing="drop"),
                pf.var("x", bounds=(0, 100), missing="drop"),
            )
        )

    return Scenario(frame, "id", make_query)


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "decimal unit ids": _decimal_ids,
    "uint64 unit ids": _uint64_ids,
    # 2^61 · 2^3 wraps to 0 in 64 bits: packed, these IDs would share cells.
    "int64 unit ids too large to pack": lambda: _int64_ids([0, 2**61, -(2**61), 2**62, 1, 2, 3, 4]),
    # Small IDs 2^50 apart: packed, but too spread for the sort order (window rank).
    "int64 unit ids spread wide": lambda: _int64_ids([i * 2**50 for i in range(8)]),
    "packed cells with units over max_groups": _spread_groups,
    "integer keys on an Int64 column": lambda: _integer_keys(pl.Int64(), refused=False),
    "integer keys on a Float64 column": lambda: _integer_keys(pl.Float64(), refused=True),
    "quantile row sampling": _quantile_rows,
    "missing values dropped": _dropped_missing_values,
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_removing_a_person_changes_no_release_by_more_than_planned(name: str) -> None:
    scenario = SCENARIOS[name]()
    refused = _refused_before_charging(scenario)
    if not refused:
        assert _violations(scenario) == []
    assert refused == scenario.refused


def test_the_audit_finds_the_violations_of_an_engine_that_does_not_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The audit's power: the same scenarios, with bounding switched off in the engine
    # while the plan (and so the planned sensitivity) still assumes it.
    planned_spec = Pipeline.spec

    def unbounded(self: Pipeline, *args: Any, **kwargs: Any) -> object:
        spec = planned_spec(self, *args, **kwargs)
        return dataclasses.replace(spec, max_groups=None, max_rows_per_group=10**9)

    monkeypatch.setattr(Pipeline, "spec", unbounded)
    for name in ("uint64 unit ids", "quantile row sampling", "missing values dropped"):
        assert _violations(SCENARIOS[name]()), name
