"""SQL conformance: queries users already write, copied from peers' docs and tests.

Each query of tests/sql_conformance.py (BigQuery/ZetaSQL, Google's PostgreSQL
extension, SmartNoise SQL; the private table renamed to ``data``) goes through
``sess.parse_sql(text).release(RHO, with_error=True)`` on a fresh seeded Session
over synthetic data of the peer's schema, with ``delta=`` when its plan
selects groups privately; a query with BigQuery's ``OPTIONS(epsilon=...,
delta=...)`` is released with the budget they set. It must either

* **run**, and every released value lie within ``Z = 4.5`` of its ``_std``
  column of the exact answer (computed with polars on the same data, where no
  bound or limit binds), every released group be a group of the data, and
  every quantile's rank in its group lie within its rank error at the same
  level; or
* **be refused** with ``pf.SQLError`` carrying the construct and a position or
  naming the construct in its message, with no exception chained to it and
  nothing charged.

Anything else (another exception, a value outside its interval) fails the
query's test. The summary test asserts that at least ``RUN_FLOOR`` queries
run (the number that ran when the floor was last raised) and, with ``pytest
-s``, prints the counts and the refused constructs by how many queries each
blocks.

Significance: for a Gaussian estimate a check fails by chance with
probability 2·(1 − Φ(4.5)) ≈ 6.8e-6; the rank check uses the exponential
mechanism's rank-error bound at the same probability. The estimates of means
and variances are ratios, Gaussian only approximately, at the group sizes here
(over 100 rows) the approximation is close. With the noise seeded, the suite
is deterministic: a given seed passes or fails every time.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache

import polars as pl
import pytest
from sql_conformance import (
    CASES,
    DATASETS,
    DELTA,
    RHO,
    Case,
    Const,
    Key,
    Quantile,
    Quantiles,
    session,
)

import privframe as pf
from privframe.api.sql import SQLQuery

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

Z = 4.5
ALPHA = 2 * 0.5 * math.erfc(Z / math.sqrt(2))  # two-sided normal tail beyond Z: ≈ 6.8e-6
RUN_FLOOR = 84  # the number that ran on 2026-12-07; raise it as more run


@dataclass(frozen=True)
class Outcome:
    """What one query did: released a table, or was refused (the error)."""

    case: Case
    released: pl.DataFrame | None = None
    refused: pf.SQLError | None = None
    failed: Exception | None = None  # any other exception: never acceptable
    charged: bool = False
    # the group columns chosen privately (with delta=); the others' keys are public
    selected: tuple[str, ...] = ()
    public: bool = True  # whether some group columns have public keys
    # (95% rank error, candidates) of each quantile an array releases, from explain
    ranks: tuple[tuple[float, int], ...] = ()


def _selection(query: SQLQuery) -> tuple[tuple[str, ...], bool]:
    plan = query.query.plan
    return plan.selected, plan.keys is not None


@cache
def outcome(index: int) -> Outcome:
    """Run one query once (a fresh Session seeded by its index).

    A query with BigQuery's OPTIONS(epsilon=, delta=) spends what they say;
    any other spends RHO, and DELTA when it selects groups privately.
    """
    case = CASES[index]
    sess = session(case.dataset, seed=1000 + index, name=case.private_name())
    text = case.text()
    selected: tuple[str, ...] = ()
    public = True
    try:
        query = sess.parse_sql(text)
        selected, public = _selection(query)
        rho, delta = (
            (None, None) if query.options is not None else (RHO, DELTA if selected else None)
        )
        ranks = _array_ranks(query, rho, delta) if _has_array(case) else ()
        released = query.release(rho, with_error=True, delta=delta)
    except pf.SQLError as err:
        return Outcome(case, refused=err, charged=bool(sess.ledger))
    except Exception as err:  # reported by the query's test, after the others ran
        return Outcome(case, failed=err, charged=bool(sess.ledger))
    return Outcome(
        case,
        released=released,
        charged=bool(sess.ledger),
        selected=selected,
        public=public,
        ranks=ranks,
    )


def _has_array(case: Case) -> bool:
    return case.truth is not None and any(isinstance(i, Quantiles) for i in case.truth.out)


def _array_ranks(
    query: SQLQuery, rho: float | None, delta: float | None
) -> tuple[tuple[float, int], ...]:
    """(95% rank error, candidates) of each quantile measured, in plan order (public: free)."""
    rows = {r["output"]: r["ci95"] for r in query.explain(rho, delta=delta).rows}
    return tuple(
        (float(rows[a.output_name].split()[0]), a.candidates)  # type: ignore[attr-defined]
        for a in query.query.plan.aggregates
        if hasattr(a, "candidates")
    )


# -- checking a release against the truth -------------------------------------------------------


def _close(a: object, b: object) -> bool:
    if isinstance(a, float | int) and isinstance(b, float | int):
        return abs(a - b) <= 1e-9 * max(1.0, abs(b))
    return a == b


def _rank_slack(candidates: int, rank_ci95: float) -> float:
    """The rank error at probability 1 − ALPHA, from its 95% bound (ln N + ln 1/α)/η."""
    n = candidates
    return rank_ci95 * (math.log(n) + math.log(1 / ALPHA)) / (math.log(n) + math.log(20))


def _rank_distance(values: list, q: float, got: float) -> float:
    """How many ranks ``got`` is from the ``q`` quantile of the sorted ``values``."""
    below = sum(v < got for v in values)
    at_or_below = sum(v <= got for v in values)
    target = q * len(values)
    return max(below - target, target - at_or_below, 0.0)


def _check_value(
    case: Case, item, name: str, got, want, row: dict, ranks: tuple = ()
) -> str | None:
    """None if ``got`` is within its interval of ``want``, else what is wrong."""
    if isinstance(item, Const):
        return None if _close(got, item.value) else f"{name}: {got!r} != {item.value!r}"
    if isinstance(item, Key):  # None: a public key absent from the data
        return None if want is None or _close(got, want) else f"{name}: {got!r} != {want!r}"
    if want is None or want == []:  # a mean, variance or quantile of no rows: nothing true
        return None
    if got is None:
        return f"{name}: null released"
    if isinstance(item, Quantile):
        candidates = DATASETS[case.dataset].metadata[item.column].candidates
        distance = _rank_distance(list(want), item.q, got)
        slack = _rank_slack(candidates, row[f"{name}_rank_ci95"]) + 1
        return None if distance <= slack else f"{name}: rank {distance:.1f} off > {slack:.1f}"
    if isinstance(item, Quantiles):
        if len(got) != item.n + 1 or len(ranks) != item.n + 1:
            return f"{name}: {len(got)} quantiles released, {item.n + 1} asked for"
        for i, (value, (ci95, candidates)) in enumerate(zip(got, ranks, strict=True)):
            distance = _rank_distance(list(want), i / item.n, value)
            slack = _rank_slack(candidates, ci95) + 1
            if distance > slack:
                return f"{name}[{i}]: rank {distance:.1f} off > {slack:.1f}"
        return None
    std = row.get(f"{name}_std")
    if std is None:
        return f"{name}: no {name}_std column to check it by"
    if abs(got - want) <= Z * std + 1e-9 * max(1.0, abs(want)):
        return None
    return f"{name}: {got} vs true {want}, more than {Z}σ (σ = {std:.4g})"


def _row_errors(
    case: Case, names: list[str], row: dict, truth: dict, ranks: tuple = ()
) -> list[str]:
    errors = []
    for i, item in enumerate(case.truth.out):
        error = _check_value(case, item, names[i], row[names[i]], truth[f"_{i}"], row, ranks)
        if error is not None:
            errors.append(error)
    return errors


def release_errors(
    case: Case, released: pl.DataFrame, selected: tuple[str, ...], public: bool, ranks: tuple = ()
) -> list[str]:
    """Why the released table is not the truth within its intervals (empty: it is).

    A group absent from the data may be released only from public keys: its
    columns chosen privately (``selected``) must hold a combination of the
    data, and its truth is that of no rows.
    """
    truth = case.truth.compute(DATASETS[case.dataset])
    empty = case.truth.compute(DATASETS[case.dataset], empty=True).row(0, named=True)
    width = len(case.truth.out)
    if released.width < width:
        return [f"{released.width} columns released, {width} selected"]
    names = released.columns[:width]
    keys = [i for i, item in enumerate(case.truth.out) if isinstance(item, Key)]
    truths = truth.to_dicts()
    by_key = {tuple(t[f"_{i}"] for i in keys): t for t in truths}
    errors = []
    chosen = [i for i in keys if _column_of(case.truth.out[i], names[i]) in selected]
    combinations = {tuple(t[f"_{i}"] for i in chosen) for t in truths}
    for row in released.to_dicts():
        if keys:
            match = by_key.get(tuple(row[names[i]] for i in keys))
            if match is None and tuple(row[names[i]] for i in chosen) not in combinations:
                errors.append(f"released group {[row[names[i]] for i in keys]} is not in the data")
            else:
                errors += _row_errors(case, names, row, match or empty, ranks)
        elif not any(not _row_errors(case, names, row, t, ranks) for t in truths):
            errors.append(f"released row {row} matches no group of the data")
    if selected and not public and len(released) > len(truths):
        errors.append(f"{len(released)} rows released, {len(truths)} groups in the data")
    return errors


def _column_of(item: object, released: str) -> str:
    """The group column a select-list key shows (its released name if it is an expression)."""
    assert isinstance(item, Key)
    return item.expr.meta.output_name(raise_if_undetermined=False) or released


def refusal_errors(err: pf.SQLError) -> list[str]:
    """Why a refusal does not say what was refused (empty: it does)."""
    errors = []
    if not err.construct:
        errors.append("no construct")
    elif err.construct.lower() not in str(err).lower() and err.position is None:
        errors.append(f"the message names neither {err.construct!r} nor a position")
    if err.__cause__ is not None or err.__context__ is not None:
        errors.append(f"chained to {type(err.__cause__ or err.__context__).__name__}")
    return errors


# -- the tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c.name for c in CASES])
def test_query_runs_within_its_interval_or_is_refused_by_name(index: int) -> None:
    result = outcome(index)
    if result.failed is not None:
        raise result.failed
    if result.refused is not None:
        assert not result.charged, "a refused query was charged"
        assert refusal_errors(result.refused) == []
        return
    assert result.case.truth is not None, "ran, but the query has no exact answer to check"
    assert isinstance(result.released, pl.DataFrame)
    assert result.charged
    errors = release_errors(
        result.case, result.released, result.selected, result.public, result.ranks
    )
    assert errors == []


def kind(err: pf.SQLError) -> str:
    """The refused construct without the query's own names, to count queries by it."""
    token = re.search(r"Unexpected token '([^']*)'", str(err))
    if err.construct == "syntax":
        return f"syntax error at {token.group(1)!r}" if token else "syntax error"
    for general in ("outside GROUP BY", "in HAVING or ORDER BY"):
        if general in err.construct:
            return f"an expression {general}"
    return re.sub(r"COUNT\(DISTINCT \w+\)", "COUNT(DISTINCT <not the unit>)", err.construct)


def summary() -> tuple[list[Outcome], Counter[str]]:
    outcomes = [outcome(i) for i in range(len(CASES))]
    refused = Counter(kind(o.refused) for o in outcomes if o.refused is not None)
    return outcomes, refused


def test_summary_and_floor_of_queries_that_run() -> None:
    outcomes, refused = summary()
    ran = [o for o in outcomes if o.released is not None]
    failed = [o for o in outcomes if o.failed is not None]
    print(
        f"\nSQL conformance: {len(outcomes)} queries, {len(ran)} run, "
        f"{sum(refused.values())} refused, {len(failed)} failed with another exception"
    )
    for o in failed:
        print(f"  failed: {o.case.name}: {type(o.failed).__name__}: {o.failed}")
    for source in ("sn-", "bq-", "pg-"):
        mine = [o for o in outcomes if o.case.name.startswith(source)]
        print(f"  {source}*: {sum(o.released is not None for o in mine)} of {len(mine)} run")
    print("refused constructs, by the number of queries each blocks:")
    for construct, count in refused.most_common():
        names = [o.case.name for o in outcomes if o.refused and kind(o.refused) == construct]
        print(f"  {count:3d}  {construct}: {', '.join(names)}")
    assert len(ran) >= RUN_FLOOR
