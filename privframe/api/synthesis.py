"""``Session.marginals`` and ``Session.synthesize``: noisy marginals and synthetic tables.

Budget before bytes, as for a release (:mod:`privframe.plan.release`):

1. the arguments, the columns' public domains and the cost are checked, and
   the cost must fit what remains, before any data is read;
2. the engine computes the exact bounded table (:func:`privframe.plan.marginals.exact_table`),
   never shown; a failure is refused without its message;
3. the whole cost is charged in one ledger entry;
4. only then are the measurements drawn (:class:`privframe.plan.marginals.Measurer`),
   and all that follows is post-processing: consistency
   (:mod:`privframe.synth.consistency`), the model
   (:mod:`privframe.synth.model`) and its sample.

``docs/synthetic.md`` says when to use which, how the budget is split and what
synthetic data does not keep.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> df = pl.DataFrame({"sex": ["f", "m"] * 50, "smoker": [True, False, False, True] * 25})
    >>> sess = pf.Session(df, None, pf.zCDP(1.0))
    >>> tables = sess.marginals([("sex", "smoker")], rho=0.5, domains={"sex": ["f", "m"]})
    >>> tables[("sex", "smoker")].columns
    ['sex', 'smoker', 'count', 'count_std', 'count_ci95_low', 'count_ci95_high']
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl

from privframe.accounting._kinds import Spendable
from privframe.accounting.accountant import Spend
from privframe.accounting.budgets import PureDP, zCDP
from privframe.accounting.events import PureDPEvent, ZCDPEvent
from privframe.errors import InvalidArgumentError, InvalidValueError
from privframe.mechanisms.noise import SystemRandomness
from privframe.plan.aggregates.base import Width
from privframe.plan.marginals import (
    Domains,
    Measurer,
    Noise,
    exact_table,
    resolve_domains,
)
from privframe.plan.release import Pipeline
from privframe.synth.consistency import consistent
from privframe.synth.methods import aim, aim_candidates, aim_costs, aim_workload, mst, mst_costs

__all__ = [
    "Explained",
    "Source",
    "explain_marginals",
    "explain_synthesis",
    "marginals",
    "synthesize",
]

MAX_CELLS = 10_000_000
"""The most cells one marginal (or one measured set) may have: its noise is drawn per cell."""

MAX_ROWS = 100_000_000
"""The most synthetic rows one call makes."""

METHODS = ("aim", "mst")

_OUTPUTS = ("count", "count_std", "count_ci95_low", "count_ci95_high")


@dataclass(frozen=True)
class Source:
    """What the doors need from a Session: its pipeline, its public facts and its frames.

    Attributes:
        pipeline: the session's release pipeline (engine, accountant, unit, noise).
        schema: the private table's public schema.
        keys: public values per column from the Session's metadata.
        max_rows: the Session's default row limit per unit, if any.
        present: turns a polars result into the session's kind of frame.
    """

    pipeline: Pipeline
    schema: pl.Schema
    keys: Mapping[str, Sequence[Any] | None]
    max_rows: int | None
    present: Callable[[pl.DataFrame], Any]


@dataclass(frozen=True)
class Explained:
    """What a call would measure and spend, from public parameters only; it spends nothing.

    Attributes:
        cost: the whole charge, one ledger entry.
        lines: the steps, in words, with each measurement's noise and cost.
        widths: per marginal table (its columns joined by ``×``), a cell's
            noise: its std and the half-width of its exact 95% interval
            (``count_ci95_low`` and ``count_ci95_high`` are the noisy cell ∓ it,
            clipped at 0); none for a synthetic table, whose rows carry no interval.
    """

    cost: Spendable
    lines: tuple[str, ...]
    widths: tuple[tuple[str, Width], ...] = ()

    def __str__(self) -> str:
        return "\n".join(self.lines)


@dataclass(frozen=True)
class _Prepared:
    """A call's public plan: its domains, its noise (M = ``noise.sensitivity``) and its budget."""

    domains: Domains
    noise: Noise
    amount: Fraction

    @property
    def max_rows(self) -> int:
        """M, the most rows one person keeps."""
        return self.noise.sensitivity

    @property
    def cost(self) -> Spendable:
        """The whole charge: ``amount`` as ρ or ε."""
        return self.noise.budget(self.amount)


def _column_sets(sets: object) -> list[tuple[str, ...]]:
    """The marginals' column sets: each a column name or a sequence of distinct names."""
    if isinstance(sets, str) or not isinstance(sets, Sequence) or not sets:
        raise InvalidArgumentError(
            "marginals takes a list of column sets, e.g. [('sex', 'age'), ('region',)]"
        )
    found: list[tuple[str, ...]] = []
    for s in sets:
        columns = (s,) if isinstance(s, str) else tuple(s) if isinstance(s, Sequence) else None
        if not columns or not all(isinstance(c, str) for c in columns):
            raise InvalidArgumentError(
                f"a marginal is a column name or a list of column names, got {s!r}"
            )
        if len(set(columns)) != len(columns):
            raise InvalidValueError(f"the marginal {list(columns)} names a column twice")
        if any(set(columns) == set(f) for f in found):
            raise InvalidValueError(f"the marginal over {sorted(columns)} is asked twice")
        found.append(columns)
    return found


def _prepare(
    source: Source,
    columns: Sequence[str],
    rho: Any,
    epsilon: Any,
    domains: Mapping[str, Any] | None,
    max_rows: int | None,
) -> _Prepared:
    """Domains, the row limit and the cost, all public; refused before any data is read."""
    pipeline = source.pipeline
    budget = pipeline.accountant.budget
    if not isinstance(budget, zCDP | PureDP):
        raise InvalidValueError(
            "this runs in zCDP or pure-DP (PureDP) sessions; this session's budget is "
            f"{budget!r}. Open a Session with budget=pf.zCDP(rho=...) for it"
        )
    if domains is not None and not isinstance(domains, Mapping):
        raise InvalidArgumentError(
            "domains must map column names to value lists or pf.bin(...), "
            f"got {type(domains).__name__}"
        )
    resolved = resolve_domains(columns, domains, source.keys, source.schema, pipeline.unit)
    limit = _max_rows(pipeline.unit, max_rows, source.max_rows)
    asked = pipeline.accountant.affordable(pipeline.asked(rho, epsilon))
    noise = Noise(limit, "gaussian" if isinstance(budget, zCDP) else "laplace")
    return _Prepared(resolved, noise, asked)


def _max_rows(unit: str | None, given: int | None, default: int | None) -> int:
    """M, the most rows one unit keeps: given, the Session's default, or 1 without a unit."""
    if unit is None:
        if given is not None:
            raise InvalidValueError(
                "max_rows bounds a privacy unit's rows; this session has no privacy unit (each "
                "row is a person), so leave it out"
            )
        return 1
    limit = given if given is not None else default
    if limit is None:
        raise InvalidValueError(
            f"a person (privacy unit {unit!r}) may have many rows: give max_rows=..., the most "
            "rows one person keeps (each adds to every marginal), or a Session default "
            "contributions=pf.Bound(max_rows=...)"
        )
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgumentError(f"max_rows must be a positive integer, got {limit!r}")
    return limit


def _check_cells(domains: Domains, sets: Sequence[tuple[str, ...]]) -> None:
    sizes = domains.sizes
    for s in sets:
        cells = math.prod(sizes[c] for c in s)
        if cells > MAX_CELLS:
            raise InvalidValueError(
                f"the marginal over {list(s)} has {cells} cells, more than {MAX_CELLS}: bin its "
                "columns more coarsely or measure fewer columns together"
            )


def _delta_line(m: int) -> str:
    return (
        f"each person keeps at most M = {m} row{'s' if m > 1 else ''}, so a count table moves "
        f"by at most Δ₁ = Δ₂ = M = {m} when one person is removed"
    )


def _planned_marginals(
    source: Source,
    sets: object,
    rho: Any,
    epsilon: Any,
    domains: Mapping[str, Any] | None,
    max_rows: int | None,
) -> tuple[list[tuple[str, ...]], _Prepared, Fraction]:
    """Everything marginals check before reading data: the sets, the outputs' names, the cost.

    Returns the column sets, what :func:`_prepare` found, and each table's even share.
    """
    column_sets = _column_sets(sets)
    prepared = _prepare(source, _union(column_sets), rho, epsilon, domains, max_rows)
    _check_cells(prepared.domains, column_sets)
    clash = sorted(set(_union(column_sets)) & set(_OUTPUTS))
    if clash:
        raise InvalidValueError(
            f"columns {clash} would clash with the output columns {list(_OUTPUTS)}; rename "
            "them first"
        )
    share = prepared.amount / len(column_sets)
    prepared.noise.check(share)
    return column_sets, prepared, share


def explain_marginals(
    source: Source,
    sets: object,
    rho: Any = None,
    epsilon: Any = None,
    domains: Mapping[str, Any] | None = None,
    max_rows: int | None = None,
) -> Explained:
    """What :func:`marginals` would measure and spend; it reads no data and spends nothing."""
    column_sets, prepared, share = _planned_marginals(source, sets, rho, epsilon, domains, max_rows)
    noise = prepared.noise
    unit = "rho" if noise.family == "gaussian" else "epsilon"
    lines = [
        f"marginals: {len(column_sets)} noisy count tables, cost {prepared.cost!r}, "
        "one ledger entry",
        _delta_line(prepared.max_rows),
    ]
    sizes = prepared.domains.sizes
    for s in column_sets:
        cells = math.prod(sizes[c] for c in s)
        drawn = (
            f"discrete Gaussian sigma = {noise.std(share):.4g}"
            if noise.family == "gaussian"
            else f"discrete Laplace scale = {float(noise.scale(share)):.4g}"
        )
        lines.append(
            f"  {list(s)}: {cells} cells, {unit} = {float(share):.4g}, {drawn}, "
            f"95% of cells within ±{noise.halfwidth(share)}"
        )
    lines.append(
        "then post-processing: the least-squares marginals that are non-negative and agree "
        "where they share columns"
    )
    widths = tuple(
        (" × ".join(s), Width(noise.halfwidth(share), noise.std(share))) for s in column_sets
    )
    return Explained(prepared.cost, tuple(lines), widths)


def marginals(
    source: Source,
    sets: object,
    rho: Any = None,
    epsilon: Any = None,
    domains: Mapping[str, Any] | None = None,
    max_rows: int | None = None,
    label: str = "marginals",
) -> dict[tuple[str, ...], Any]:
    """Noisy marginals over ``sets`` at ``rho`` (``epsilon`` when pure), consistent, non-negative.

    Each table has the columns' every public value combination, ``count``
    (the consistent, non-negative estimate), ``count_std`` (the noise std of
    the cell's measurement) and the exact 95% interval of the measurement,
    clipped at 0 (``count_ci95_low``, ``count_ci95_high``).
    """
    column_sets, prepared, share = _planned_marginals(source, sets, rho, epsilon, domains, max_rows)
    sizes = prepared.domains.sizes
    events = [prepared.noise.event(share, math.prod(sizes[c] for c in s)) for s in column_sets]
    description = {
        "marginals": {
            "sets": [list(s) for s in column_sets],
            "max_rows": prepared.max_rows,
            "share": str(share),
        },
        "events": [e.to_dict() for e in events],
    }
    door = _charged(source, prepared, label, description)
    measured = [door.measure(s, share) for s in column_sets]
    fixed = consistent(column_sets, [m.values for m in measured], [m.sigma for m in measured])
    halfwidth = door.halfwidth(share)
    out: dict[tuple[str, ...], Any] = {}
    for s, m, estimate in zip(column_sets, measured, fixed, strict=True):
        keys = prepared.domains.frame(s, np.indices(estimate.shape).reshape(len(s), -1).T)
        raw = m.values.reshape(-1)
        table = keys.with_columns(
            pl.Series("count", estimate.reshape(-1)),
            pl.Series("count_std", np.full(raw.size, m.sigma)),
            pl.Series("count_ci95_low", np.maximum(raw - halfwidth, 0.0)),
            pl.Series("count_ci95_high", np.maximum(raw + halfwidth, 0.0)),
        )
        out[s] = source.present(table)
    return out


def _union(sets: Sequence[Sequence[str]]) -> list[str]:
    return list(dict.fromkeys(c for s in sets for c in s))


def _charged(
    source: Source, prepared: _Prepared, label: str, description: dict[str, Any]
) -> Measurer:
    """Check the cost, compute the exact table, charge; the door to measure it after."""
    pipeline = source.pipeline
    if not isinstance(label, str):
        raise InvalidArgumentError(f"label must be a str, got {type(label).__name__}")
    pipeline.accountant.check(prepared.cost)
    exact = exact_table(
        pipeline.aggregate, prepared.domains, pipeline.unit, prepared.max_rows, pipeline.rng
    )
    seeded = pipeline.rng is not None and pipeline.rng.seeded
    pipeline.accountant.spend_all([Spend(prepared.cost, label, description, seeded)])
    return Measurer(exact, prepared.max_rows, prepared.noise.family, pipeline.rng)


def _synthesis_columns(source: Source, columns: Sequence[str] | None) -> list[str]:
    if columns is None:
        return [c for c in source.schema.names() if c != source.pipeline.unit]
    if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns:
        raise InvalidArgumentError("columns must be a non-empty list of column names")
    if len(set(columns)) != len(columns):
        raise InvalidValueError(f"columns {list(columns)} name a column twice")
    return list(columns)


def _checked_method(method: object) -> str:
    if method not in METHODS:
        raise InvalidValueError(f"method must be one of {list(METHODS)}, got {method!r}")
    return str(method)


def _checked_workload(
    method: str, workload: object, columns: Sequence[str]
) -> list[tuple[str, ...]] | None:
    if workload is None:
        return None
    if method == "mst":
        raise InvalidValueError(
            "method='mst' measures a spanning tree of pairs it chooses itself; a workload is "
            "AIM's (method='aim')"
        )
    sets = _column_sets(workload)
    unknown = sorted({c for s in sets for c in s} - set(columns))
    if unknown:
        raise InvalidValueError(
            f"the workload names {unknown}, which are not among the synthesized columns "
            f"{list(columns)}"
        )
    return sets


def _checked_rows(rows: object) -> int | None:
    if rows is None:
        return None
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise InvalidArgumentError(f"rows must be a non-negative integer, got {rows!r}")
    if rows > MAX_ROWS:
        raise InvalidValueError(f"rows must be at most {MAX_ROWS}, got {rows}")
    return rows


def _planned(
    source: Source,
    rho: Any,
    epsilon: Any,
    method: str,
    columns: Sequence[str] | None,
    workload: Sequence[Sequence[str]] | None,
    domains: Mapping[str, Any] | None,
    max_rows: int | None,
) -> tuple[_Prepared, list[str], list[tuple[str, ...]]]:
    """Everything a synthesis checks before reading data: the columns, AIM's workload, the cost.

    Every set the method may measure must have at most :data:`MAX_CELLS` cells
    (every column; AIM's workload sets, MST's pairs), and its least cost must
    buy noise the sampler can draw (each method's first measurements are its
    cheapest: :mod:`privframe.synth.methods`).
    """
    method = _checked_method(method)
    names = _synthesis_columns(source, columns)
    chosen = aim_workload(names, _checked_workload(method, workload, names))
    prepared = _prepare(source, names, rho, epsilon, domains, max_rows)
    sets: list[tuple[str, ...]] = [(c,) for c in names]
    sets += chosen if method == "aim" else itertools.combinations(names, 2)
    _check_cells(prepared.domains, sets)
    if method == "mst":
        one, _, pair = mst_costs(prepared.amount, len(names))
        least = min(c for c in (one, pair) if c)
    else:
        least = aim_costs(prepared.amount, len(names))[0]
    prepared.noise.check(least)
    return prepared, names, chosen


def explain_synthesis(
    source: Source,
    rho: Any = None,
    epsilon: Any = None,
    method: str = "aim",
    columns: Sequence[str] | None = None,
    workload: Sequence[Sequence[str]] | None = None,
    domains: Mapping[str, Any] | None = None,
    max_rows: int | None = None,
) -> Explained:
    """What :func:`synthesize` would measure and spend; it reads no data and spends nothing."""
    prepared, names, chosen = _planned(
        source, rho, epsilon, method, columns, workload, domains, max_rows
    )
    total, d = prepared.amount, len(names)
    noise = prepared.noise
    unit = "rho" if noise.family == "gaussian" else "epsilon"

    def cost(c: Fraction) -> str:
        return f"{unit} = {float(c):.4g}"

    def choice(c: Fraction) -> str:
        # A pure-DP choice's ε is its cost; a zCDP one's is √(8ρ).
        return cost(c) + (f", epsilon = {noise.epsilon(c):.4g}" if unit == "rho" else "")

    lines = [
        f"synthesize ({method.upper()}): {d} columns, cost {prepared.cost!r}, one ledger entry",
        _delta_line(prepared.max_rows),
        "domains: " + ", ".join(f"{c} ({n} values)" for c, n in prepared.domains.sizes.items()),
    ]
    if method == "mst":
        one, picks, pair = mst_costs(total, d)
        lines.append(f"  every 1-way marginal: {cost(one)} each, noise std {noise.std(one):.4g}")
        if picks:
            lines.append(
                f"  a spanning tree of {d - 1} pairs chosen by the exponential mechanism: "
                f"{choice(picks)} each (score sensitivity {prepared.max_rows})"
            )
        if pair:
            lines.append(
                f"  each chosen pair measured: {cost(pair)}, noise std {noise.std(pair):.4g}"
            )
    else:
        measure, choose = aim_costs(total, d)
        lines += [
            f"  every 1-way marginal: {cost(measure)} each (noise std {noise.std(measure):.4g})",
            f"  then rounds until {unit} is spent: choose a marginal within the workload's "
            f"{len(chosen)} column sets (and their subsets) by the exponential mechanism "
            f"({choice(choose)} at first; score sensitivity M times the largest weight, "
            f"{prepared.max_rows * max(w for _, w in aim_candidates(names, chosen))}), measure it "
            f"({cost(measure)} at first; {noise.sharpen}x both, half the noise, when a "
            "measurement stops moving the model); the last round spends what is left",
        ]
    lines.append(
        "then post-processing: a graphical model estimated from the noisy marginals, sampled"
    )
    return Explained(prepared.cost, tuple(lines))


def synthesize(
    source: Source,
    rho: Any = None,
    epsilon: Any = None,
    method: str = "aim",
    columns: Sequence[str] | None = None,
    workload: Sequence[Sequence[str]] | None = None,
    rows: int | None = None,
    domains: Mapping[str, Any] | None = None,
    max_rows: int | None = None,
    label: str = "synthesize",
) -> Any:
    """A synthetic table of ``columns`` by MST or AIM at ``rho`` (``epsilon``), one ledger entry."""
    count = _checked_rows(rows)
    prepared, names, chosen = _planned(
        source, rho, epsilon, method, columns, workload, domains, max_rows
    )
    amount = float(prepared.amount)
    event = ZCDPEvent(amount) if isinstance(prepared.cost, zCDP) else PureDPEvent(amount)
    description = {
        "synthesize": {
            "method": method,
            "columns": names,
            "domain": prepared.domains.sizes,
            "max_rows": prepared.max_rows,
            **({"workload": [list(s) for s in chosen]} if method == "aim" else {}),
        },
        "events": [event.to_dict()],
    }
    door = _charged(source, prepared, label, description)
    budget = prepared.amount
    result = mst(door, budget) if method == "mst" else aim(door, budget, chosen)
    # The model's total is a noisy count: at a small budget it can be far larger than the data.
    n = min(round(result.model.total), MAX_ROWS) if count is None else count
    # Sampling the model is post-processing, but its randomness is the session's too: the
    # CSPRNG, or a seeded session's stream (which makes the table reproducible).
    source_of = source.pipeline.rng or SystemRandomness()

    def uniforms(n: int) -> np.ndarray:
        return (source_of.words(n) >> np.uint64(11)).astype(np.float64) * 2.0**-53

    codes = result.model.sample(n, uniforms)
    return source.present(prepared.domains.frame(tuple(names), codes))
