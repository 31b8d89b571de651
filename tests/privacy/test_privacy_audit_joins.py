"""Sensitivity audit of steps over units: removing a person moves no release more than planned.

The steps over units (``join_private``, ``flat_map``, per-person
columns ``with_columns(total=pf.unit.sum(...))`` and the per-unit stage
``per_unit``) make a unit's rows from its own rows only, and the planner
derives contribution limits from the row limits they enforce
(:mod:`privframe.plan.stages`: ``M = l·r`` for a join, ``max_rows`` for a
flat map, ``m = 1`` or ``M = 1`` for a per-unit stage). This audit checks the
consequence directly and exactly, without noise, in the manner of
test_privacy_audit_sensitivity.py: for many random configurations (random
small multi-table data, random ``l``, ``r``, ``max_rows``, contribution
bounds, public keys, join keys, ``how``, truncation, aggregates), each person
X and each of two seeded randomness streams, it releases the query through
``Session.release`` over D and over D − X, where D − X removes X's rows from
every private table, and reads the exact aggregates each release noised
(tests/internals.py ``released_exactly``). With the same stream the engine
gets the same seed, so ``truncation="random"`` keyed by it must keep the
same rows of every other person whether or not X is there: that is exactly
what the audit checks. It requires, for every noisy measurement,
‖f(D) − f(D − X)‖₂ <= its planned L2 sensitivity (grid units) in zCDP
sessions, and ‖f(D) − f(D − X)‖₁ <= its planned L1 sensitivity in pure-DP
sessions (joins, flat maps, per-unit stages). With private key selection it
also requires that each key's distinct-unit count moves by at most 1 and the
vector of them by at most the selection's sensitivity sqrt(k) (keys missing
on one side count as 0), and for a median that its histogram moves by at most
``m`` rows in a key and ``W`` rows in all.

It is deterministic: any violation is a real one. It is not vacuous: for
every construct some person moves some measurement by its whole planned
sensitivity (the planned bounds are reached). And it has power: truncation
whose hash also reads the row's place in the data (so other people's rows),
and bounding switched off in the engine while the plan still assumes it,
are both flagged. A last test checks the premise of unit-locality where the
small random data cannot reach it: per-person float totals over a join of
200,000 rows, whose output order follows the whole data.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import polars as pl
import pytest
from internals import Released, column_of, released_exactly

import privframe as pf
import privframe.engines.spec
from privframe.api.query import Query
from privframe.engines.spec import (
    COUNT,
    DISTINCT,
    PerUnit,
    PrivateJoin,
    RowStep,
    UnitColumns,
    apply_steps,
)
from privframe.mechanisms.noise import SeededRandomness
from privframe.plan.aggregates.quantile import histogram_specs
from privframe.plan.release import Pipeline

pytestmark = pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning")

UNIT = "pid"
PEOPLE = 7
CLINICS = ["a", "b", "c"]
DRUGS = ["x", "y", "z"]
ITEMS = ["tea", "jam", "bread", "milk"]
STREAMS = (11, 12)  # the seeded randomness of each pair of releases (D and D − X)
CONFIGURATIONS = 16  # random configurations per construct
RHO, EPSILON, DELTA = 0.5, 1.0, 1e-6
AMOUNT = (-20.0, 120.0)

Rng = np.random.Generator
MakeQuery = Callable[[pf.Session], Query]


# --------------------------------------------------------------------------- data


def _pick(gen: Rng, values: list[str], empty: bool = False) -> list[str]:
    """A random subset of ``values`` (non-empty unless ``empty``), in their order."""
    while True:
        chosen = [v for v in values if gen.random() < 0.5]
        if chosen or empty:
            return chosen


def _tables(gen: Rng) -> dict[str, pl.DataFrame]:
    """Visits and prescriptions of PEOPLE people (random ids), some in one table only.

    Rows repeat exactly now and then (truncation ties), values are missing
    now and then, and keys fall outside the public ones (``zz``).
    """
    ids = gen.choice(10_000, size=PEOPLE, replace=False).astype(np.int64).tolist()
    visits: list[dict[str, Any]] = []
    drugs: list[dict[str, Any]] = []
    for pid in ids:
        for _ in range(int(gen.integers(0, 6))):
            amount = round(float(gen.uniform(*AMOUNT)), 1) if gen.random() > 0.1 else None
            basket = _pick(gen, ITEMS, empty=True) * int(gen.integers(1, 3))
            visits.append(
                {
                    UNIT: pid,
                    "clinic": str(gen.choice([*CLINICS, "zz"])),
                    "day": int(gen.integers(0, 6)),
                    "amount": amount,
                    "items": basket if gen.random() > 0.1 else None,
                }
            )
            if gen.random() < 0.15:
                visits.append(dict(visits[-1]))
        for _ in range(int(gen.integers(0, 6))):
            drugs.append(
                {
                    UNIT: pid,
                    "clinic": str(gen.choice([*CLINICS, "zz"])),
                    "drug": str(gen.choice([*DRUGS, "zz"])),
                    "day": int(gen.integers(0, 6)),
                    "dose": round(float(gen.uniform(0, 60)), 1) if gen.random() > 0.1 else None,
                }
            )
            if gen.random() < 0.15:
                drugs.append(dict(drugs[-1]))
    visit_schema = {
        UNIT: pl.Int64,
        "clinic": pl.String,
        "day": pl.Int64,
        "amount": pl.Float64,
        "items": pl.List(pl.String),
    }
    drug_schema = {
        UNIT: pl.Int64,
        "clinic": pl.String,
        "drug": pl.String,
        "day": pl.Int64,
        "dose": pl.Float64,
    }
    # Shuffled: which rows a person keeps must not depend on where they sit.
    shuffled = {"fraction": 1.0, "shuffle": True}
    return {
        "visits": pl.DataFrame(visits, schema=visit_schema).sample(**shuffled, seed=1),
        "drugs": pl.DataFrame(drugs, schema=drug_schema).sample(**shuffled, seed=2),
    }


def _people(tables: dict[str, pl.DataFrame]) -> list[int]:
    """Every person in some table."""
    ids = pl.concat([t[UNIT] for t in tables.values()]).unique().sort()
    return ids.to_list()


def _without(tables: dict[str, pl.DataFrame], person: int) -> dict[str, pl.DataFrame]:
    """The neighbour D − X: the person's rows removed from every table."""
    return {name: t.filter(pl.col(UNIT) != person) for name, t in tables.items()}


# --------------------------------------------------------------------------- configurations


@dataclasses.dataclass(frozen=True)
class Config:
    """One random configuration: data, a query, the kind of session, and what it is."""

    name: str
    tables: dict[str, pl.DataFrame]
    make_query: MakeQuery
    pure: bool = False
    selects: bool = False


def _bound(gen: Rng, query: Query, needed: bool, per_group: int = 4) -> Query:
    """``query`` with random contribution bounds (none at times, unless ``needed``)."""
    choice = int(gen.integers(1 if needed else 0, 4))
    k, m = int(gen.integers(1, 4)), int(gen.integers(1, per_group + 1))
    if choice == 0:
        return query
    if choice == 1:
        return query.bound(max_groups=k, max_rows_per_group=m)
    if choice == 2:
        return query.bound(max_groups=k, max_rows_per_group=m, max_rows=int(gen.integers(1, 7)))
    return query.bound(max_rows=int(gen.integers(1, 7)))


def _aggregates(gen: Rng, column: str, bounds: tuple[float, float]) -> tuple[Any, ...]:
    """A count and a random mix of bounded aggregates of ``column``."""
    extra = [
        pf.sum(column, bounds),
        pf.mean(column, bounds, missing="drop"),
        pf.var(column, bounds),
        pf.count_distinct(),
    ]
    return (pf.count(), *(a for a in extra if gen.random() < 0.5))


def _join(gen: Rng, i: int, pure: bool = False) -> Config:
    """join_private, inner or left, random or hash truncation, a filter on the right side."""
    on = [UNIT, *(["clinic"] if gen.random() < 0.4 else [])]
    how = ["inner", "left"][i % 2]
    truncation = ["random", "hash"][i // 2 % 2]
    left_rows, right_rows = int(gen.integers(1, 4)), int(gen.integers(1, 4))
    dose_floor = float(gen.uniform(0, 30))
    group, keys = [
        ("clinic", _pick(gen, [*CLINICS, "d"])),
        ("drug", _pick(gen, [*DRUGS, "w"])),
    ][int(gen.integers(0, 2))]
    column = str(gen.choice(["dose", "amount"]))
    aggregates = _aggregates(gen, column, (0.0, 50.0))
    left_filter = gen.random() < 0.3
    bound = int(gen.integers(0, 1 << 30))

    def make(sess: pf.Session) -> Query:
        right = sess.query("drugs").filter(pl.col("dose") > dose_floor)
        left = sess.query().filter(pl.col("day") < 5) if left_filter else sess.query()
        joined = left.join_private(
            right,
            on=on,
            how=how,  # type: ignore[arg-type]
            left_rows=left_rows,
            right_rows=right_rows,
            truncation=truncation,  # type: ignore[arg-type]
        )
        bounded = _bound(np.random.default_rng(bound), joined, needed=False, per_group=6)
        return bounded.group_by(group, keys=keys).agg(*aggregates)

    name = f"join on {on} {how} {truncation} l={left_rows} r={right_rows} by {group}"
    return Config(name, _tables(gen), make, pure=pure)


def _flat_map(gen: Rng, i: int, pure: bool = False) -> Config:
    """flat_map of a basket to its items, grouped by item."""
    max_rows = int(gen.integers(1, 6))
    truncation = ["random", "hash"][i % 2]
    name = "item" if gen.random() < 0.5 else None
    keys = _pick(gen, [*ITEMS, "salt"])
    aggregates = _aggregates(gen, "amount", AMOUNT)
    bound = int(gen.integers(0, 1 << 30))

    def make(sess: pf.Session) -> Query:
        mapped = sess.query().flat_map(
            "items",
            max_rows=max_rows,
            name=name,
            truncation=truncation,  # type: ignore[arg-type]
        )
        bounded = _bound(np.random.default_rng(bound), mapped, needed=False)
        return bounded.group_by(name or "items", keys=keys).agg(*aggregates)

    return Config(f"flat_map M={max_rows} {truncation}", _tables(gen), make, pure=pure)


def _unit_columns(gen: Rng, i: int) -> Config:
    """Per-person columns (a total and a rank), then a filter on the rank, grouped by clinic."""
    table = ["visits", "drugs"][i % 2]
    column = "amount" if table == "visits" else "dose"
    keys = _pick(gen, [*CLINICS, "d"])
    first = int(gen.integers(1, 4))
    total = (-50.0, 300.0)
    aggregates = [pf.count(), pf.sum("total", total)]
    if gen.random() < 0.5:
        aggregates.append(pf.mean("r", (1.0, 6.0)))
    if gen.random() < 0.5:
        aggregates.append(pf.mean("n", (0.0, 6.0)))
    bound = int(gen.integers(0, 1 << 30))

    def make(sess: pf.Session) -> Query:
        q = sess.query(table).with_columns(
            total=pf.unit.sum(column), r=pf.unit.rank("day"), n=pf.unit.count()
        )
        q = q.filter(pl.col("r") <= first)
        bounded = _bound(np.random.default_rng(bound), q, needed=True)
        return bounded.group_by("clinic", keys=keys).agg(*aggregates)

    return Config(f"per-person columns of {table}, rank <= {first}", _tables(gen), make)


def _per_unit(gen: Rng, i: int, pure: bool = False) -> Config:
    """The per-unit stage with ``by`` (m = 1) or without it (M = 1), then grouped statistics.

    Without ``by`` the groups are the person's first clinic, public or (zCDP)
    chosen privately, which needs no ``max_groups``: M = 1.
    """
    variant = i % (3 if pure else 4)
    with_by = variant < 2
    total = (0.0, float(gen.choice([100.0, 300.0])))
    aggregates: list[Any] = [pf.count()]
    if gen.random() < 0.7:
        aggregates.append(pf.mean("total", total))
    if gen.random() < 0.5:
        aggregates.append(pf.sum("visits", (0.0, 5.0)))
    if gen.random() < 0.3:
        aggregates.append(pf.median("total", total, candidates=21))
    k = int(gen.integers(1, 4))
    bounded = variant == 1 or gen.random() < 0.3
    selects = variant == 3
    keys = None if selects else _pick(gen, [*CLINICS, "d"])

    def make(sess: pf.Session) -> Query:
        values = {"total": pf.unit.sum("amount"), "visits": pf.unit.count()}
        if with_by:
            q = sess.query().per_unit("clinic", **values)
        else:
            q = sess.query().per_unit(**values, clinic=pf.unit.first("clinic", by="day"))
        if bounded:
            q = q.bound(max_groups=k)
        return q.group_by("clinic", keys=keys).agg(*aggregates)

    by = "per_unit(clinic)" if with_by else "per_unit() by first clinic"
    name = f"{by}{' selected' if selects else ''}{f' k={k}' if bounded else ''}"
    return Config(name, _tables(gen), make, pure=pure, selects=selects)


def _combined(gen: Rng, i: int) -> Config:
    """A join, then the per-unit stage of the joined rows (by drug, or one row per person)."""
    left_rows, right_rows = int(gen.integers(1, 4)), int(gen.integers(1, 4))
    truncation = ["random", "hash"][i % 2]
    how = ["inner", "left"][i // 2 % 2]
    with_by = i // 4 % 2 == 0
    keys = _pick(gen, [*DRUGS, "w"])
    flat = gen.random() < 0.3

    def make(sess: pf.Session) -> Query:
        left = sess.query()
        if flat:
            left = left.flat_map("items", max_rows=3, name="item")
        joined = left.join_private(
            sess.query("drugs").filter(pl.col("drug") != "zz"),
            on=UNIT,
            how=how,  # type: ignore[arg-type]
            left_rows=left_rows,
            right_rows=right_rows,
            truncation=truncation,  # type: ignore[arg-type]
        )
        values = {"total": pf.unit.sum("dose"), "rows": pf.unit.count()}
        if with_by:
            q = joined.per_unit("drug", **values)
        else:
            q = joined.per_unit(**values, drug=pf.unit.last("drug", by="dose"))
        return q.group_by("drug", keys=keys).agg(
            pf.count(), pf.sum("total", (0.0, 200.0)), pf.mean("rows", (0.0, 9.0))
        )

    name = (
        f"{'flat_map, ' if flat else ''}join {how} {truncation} l={left_rows} r={right_rows}, "
        f"per_unit({'drug' if with_by else ''})"
    )
    return Config(name, _tables(gen), make)


CONSTRUCTS: dict[str, Callable[[Rng, int], Config]] = {
    "join_private": _join,
    "join_private, pure DP": lambda gen, i: _join(gen, i, pure=True),
    "flat_map": _flat_map,
    "flat_map, pure DP": lambda gen, i: _flat_map(gen, i, pure=True),
    "per-person columns": _unit_columns,
    "per_unit": _per_unit,
    "per_unit, pure DP": lambda gen, i: _per_unit(gen, i, pure=True),
    "join then per_unit": _combined,
}
"""Each construct's configurations; the ``i``-th cycles through its variants (how, ...)."""


def _configurations(construct: str) -> Iterator[Config]:
    index = list(CONSTRUCTS).index(construct)
    for i in range(CONFIGURATIONS):
        yield CONSTRUCTS[construct](np.random.default_rng(1_000 * index + i), i)


# --------------------------------------------------------------------------- the audit


def _release(config: Config, tables: dict[str, pl.DataFrame], stream: int) -> Released:
    budget = pf.PureDP(EPSILON) if config.pure else pf.zCDP(1.0, DELTA)
    sess = pf.Session(tables, UNIT, budget, rng=SeededRandomness(stream))
    if config.pure:
        spend: dict[str, float] = {"epsilon": EPSILON}
    else:
        spend = {"rho": RHO, **({"delta": DELTA} if config.selects else {})}
    return released_exactly(sess, config.make_query(sess), **spend)


@dataclasses.dataclass
class Findings:
    """Violations, and how close the largest moves came to their bounds (the audit's reach)."""

    violations: list[str] = dataclasses.field(default_factory=list)
    reach: float = 0.0


def _aligned(full: Released, less: Released, by: list[str]) -> pl.DataFrame:
    """The two exact tables side by side by key; a key missing on one side has zeros there."""
    if not by:
        return pl.concat([full.exact, less.exact.rename(lambda c: f"{c}__less")], how="horizontal")
    joined = full.exact.join(
        less.exact, on=by, how="full", coalesce=True, suffix="__less", nulls_equal=True
    )
    numbers = [c for c, t in joined.schema.items() if c not in by and t.is_numeric()]
    return joined.with_columns(pl.col(numbers).fill_null(0))


def _positions(cell: list[dict[str, int]] | None) -> dict[int, int]:
    return {pair["position"]: pair["count"] for pair in cell or []}


def _audit_pair(config: Config, full: Released, less: Released, where: str, out: Findings) -> None:
    release = full.release
    assert less.release.measurements == release.measurements
    assert less.spec.seed == full.spec.seed  # the same stream: the same truncation keys
    by = list(full.spec.group_by)
    both = _aligned(full, less, by)
    columns = {"count": COUNT, "distinct": DISTINCT}
    for m in release.measurements:
        name = columns.get(m.kind) or column_of(release, m)
        diff = (both[name] - both[f"{name}__less"]).to_numpy().astype(np.float64)
        moved = float(np.abs(diff).sum() if config.pure else math.sqrt(np.square(diff).sum()))
        bound = m.l1_units if config.pure else m.l2_units
        out.reach = max(out.reach, moved / bound)
        if moved > bound:
            norm = "L1" if config.pure else "L2"
            out.violations.append(f"{where}: {m.key} moved {moved:g} > {bound:g} ({norm})")
    if release.selection is not None:
        diff = (both[DISTINCT] - both[f"{DISTINCT}__less"]).to_numpy().astype(np.float64)
        moved = math.sqrt(float(np.square(diff).sum()))
        if np.abs(diff).max(initial=0) > 1 or moved > release.selection.measurement.l2_units:
            out.violations.append(f"{where}: distinct units for selection moved {diff.tolist()}")
    limits = release.limits
    for h in histogram_specs(release.quantiles).values():
        total = 0
        cells = zip(both[h.name].to_list(), both[f"{h.name}__less"].to_list(), strict=True)
        for before, after in cells:
            b, a = _positions(before), _positions(after)
            moved_rows = sum(abs(b.get(p, 0) - a.get(p, 0)) for p in {*b, *a})
            total += moved_rows
            if moved_rows > limits.max_rows_per_group:
                out.violations.append(f"{where}: histogram {h.name} moved {moved_rows} in a key")
        if total > limits.rows:
            out.violations.append(f"{where}: histogram {h.name} moved {total} > W={limits.rows}")


def _findings(configs: list[Config]) -> Findings:
    out = Findings()
    for config in configs:
        for stream in STREAMS:
            full = _release(config, config.tables, stream)
            for person in _people(config.tables):
                less = _release(config, _without(config.tables, person), stream)
                where = f"{config.name}: without person {person}, stream {stream}"
                _audit_pair(config, full, less, where, out)
    return out


@pytest.mark.parametrize("construct", list(CONSTRUCTS))
def test_removing_a_person_from_every_table_moves_no_measurement_more_than_planned(
    construct: str,
) -> None:
    findings = _findings(list(_configurations(construct)))
    assert findings.violations == []
    assert findings.reach >= 0.999  # not vacuous: some person reaches a bound


def _truncated_by_row_order(frame: pl.LazyFrame, unit: str, limit: int, key: int) -> pl.LazyFrame:
    """A broken truncation: the hash also reads the row's place in the data (others' rows)."""
    columns = frame.collect_schema().names()
    placed = frame.with_row_index("__place")
    rank = pl.struct(*columns, "__place").hash(key).rank("ordinal").over(unit)
    return placed.filter(rank <= limit).drop("__place")


def _unbounded_spec(planned: Callable[..., Any]) -> Callable[..., Any]:
    def spec(self: Pipeline, *args: Any, **kwargs: Any) -> object:
        made = planned(self, *args, **kwargs)
        return dataclasses.replace(made, max_groups=None, max_rows_per_group=10**9, max_rows=None)

    return spec


@pytest.mark.parametrize("construct", ["join_private", "flat_map", "join then per_unit"])
def test_the_audit_flags_truncation_that_reads_other_peoples_rows(
    monkeypatch: pytest.MonkeyPatch, construct: str
) -> None:
    # Truncation that is not unit-local: removing X changes the rows others keep. The
    # engine's final bounding still holds each person to the planned limits, so only
    # the audit's check of everyone else's rows can see it.
    monkeypatch.setattr(privframe.engines.spec, "_truncated", _truncated_by_row_order)
    assert _findings(list(_configurations(construct))).violations


@pytest.mark.parametrize("construct", ["join_private", "flat_map", "per-person columns"])
def test_the_audit_flags_an_engine_that_does_not_bound(
    monkeypatch: pytest.MonkeyPatch, construct: str
) -> None:
    monkeypatch.setattr(Pipeline, "spec", _unbounded_spec(Pipeline.spec))
    assert _findings(list(_configurations(construct))).violations


def test_a_persons_totals_over_joined_rows_do_not_depend_on_anyone_elses_rows() -> None:
    # A join's output order follows the whole data (polars' hash join), and a float sum
    # depends on the order of its terms: the per-person totals and means must not, or
    # removing X would move everyone else's values (by an ulp, so, on the grid, by a unit
    # now and then): the L2 bound holds only if every other person's rows stay the same.
    gen = np.random.default_rng(17)
    n, people = 200_000, 30_000
    visits = pl.DataFrame(
        {UNIT: gen.integers(0, people, n), "amount": gen.normal(size=n) * 1e16}
    ).lazy()
    drugs = pl.DataFrame({UNIT: gen.integers(0, people, n), "dose": gen.normal(size=n)}).lazy()
    join = PrivateJoin("drugs", (), (UNIT,), "inner", left_rows=50, right_rows=50)
    spend = pl.col("amount") + pl.col("dose")
    steps = (
        join,
        RowStep("with_columns", (spend.alias("spend"),)),
        UnitColumns((("mean", pf.unit.mean("spend")),)),
        PerUnit((), (("total", pf.unit.sum("spend")), ("mean", pf.unit.mean("mean")))),
    )

    def totals(left: pl.LazyFrame, right: pl.LazyFrame) -> pl.DataFrame:
        tables = {"drugs": right}
        return apply_steps(left, steps, unit=UNIT, tables=tables, seed=5).collect().sort(UNIT)

    full = totals(visits, drugs)
    for person in (3, 4):
        less = totals(*(t.filter(pl.col(UNIT) != person) for t in (visits, drugs)))
        both = full.filter(pl.col(UNIT) != person).join(less, on=UNIT, how="full", nulls_equal=True)
        assert both.height == less.height
        for column in ("total", "mean"):
            moved = both.filter(pl.col(column).ne_missing(pl.col(f"{column}_right")))
            assert moved.height == 0, column
