"""Sensitivity audit of marginals and synthetic data: removing a person moves no table more than M.

``Session.marginals`` and ``Session.synthesize`` measure count tables of the
engine's bounded table, each at noise calibrated to Δ₁ = Δ₂ = M = max_rows
(:mod:`privframe.plan.marginals`), and MST's and AIM's choices score tables
with that sensitivity (times AIM's public weights). This audit checks the
premise exactly, without noise, in the manner of test_privacy_audit_joins.py: for random small data
(people with several rows, values inside and outside the public domains,
nulls), random ``max_rows`` and column sets, each person X and two seeded
streams, it calls the Session over D and over D − X, reads the exact table the
call measured (the engine's output, watched), and requires every marginal
over every set of the columns to move by at most M in L1 norm (hence in L2).

It is deterministic: any violation is a real one. It is not vacuous: some
person moves some table by exactly M. It has power: the engine's row bound
switched off (the plan still assuming it) is flagged.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import polars as pl
import pytest

import privframe as pf
import privframe.api.synthesis as doors
from privframe.engines.spec import AggregationSpec
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning")

UNIT = "pid"
PEOPLE = 6
STREAMS = (21, 22)
CONFIGURATIONS = 16
DOMAINS: dict[str, Any] = {
    "a": ["x", "y"],
    "b": ["p", "q", "r"],
    "c": pf.bin("c", [0, 10, 20]),
}


def _data(rng: np.random.Generator) -> pl.DataFrame:
    rows = []
    for person in range(PEOPLE):
        for _ in range(int(rng.integers(0, 6))):
            rows.append(
                (
                    person,
                    rng.choice(["x", "y", "z", None]),  # "z" and null are outside the domain
                    str(rng.choice(["p", "q", "r"])),
                    float(rng.uniform(-5, 25)),  # some outside the bins
                )
            )
    return pl.DataFrame(rows, schema=[UNIT, "a", "b", "c"], orient="row")


def _exact_tables(
    df: pl.DataFrame, call: Callable[[pf.Session], Any], stream: int, watch: Callable | None
) -> dict[tuple[str, ...], np.ndarray]:
    """Every marginal of the exact table the call measured (over all column sets)."""
    sess = pf.Session(df, UNIT, pf.zCDP(100.0), rng=SeededRandomness(stream))
    seen: dict[str, Any] = {}
    aggregate = sess._pipeline.aggregate

    def computed(spec: AggregationSpec) -> pl.DataFrame:
        spec = watch(spec) if watch is not None else spec
        seen["exact"] = aggregate(spec)
        return seen["exact"]

    sess._pipeline.aggregate = computed  # type: ignore[method-assign]
    real = doors.exact_table

    def table(*args: Any) -> Any:
        seen["table"] = real(*args)
        return seen["table"]

    doors.exact_table = table  # type: ignore[assignment]
    try:
        call(sess)
    finally:
        doors.exact_table = real  # type: ignore[assignment]
        del sess._pipeline.aggregate
    exact = seen["table"]
    names = list(exact.domain)
    return {
        s: exact.marginal(s)
        for k in range(1, len(names) + 1)
        for s in itertools.combinations(names, k)
    }


def _configurations() -> Iterator[tuple[pl.DataFrame, int, Callable[[pf.Session], Any]]]:
    rng = np.random.default_rng(2026)
    for i in range(CONFIGURATIONS):
        df = _data(rng)
        m = int(rng.integers(1, 4))
        if i % 4 == 2:

            def call(sess: pf.Session, m: int = m) -> Any:
                return sess.synthesize(rho=1.0, method="mst", domains=DOMAINS, max_rows=m, rows=5)

        elif i % 4 == 3:

            def call(sess: pf.Session, m: int = m) -> Any:
                return sess.synthesize(
                    rho=1.0, domains=DOMAINS, max_rows=m, rows=5, workload=[("a", "b", "c")]
                )

        else:
            sets = [("a", "b"), ("c",)] if i % 4 else [("a", "b", "c")]

            def call(sess: pf.Session, m: int = m, sets: Any = sets) -> Any:
                return sess.marginals(sets, rho=1.0, domains=DOMAINS, max_rows=m)

        yield df, m, call


def _largest_move(
    df: pl.DataFrame, m: int, call: Callable[[pf.Session], Any], watch: Callable | None = None
) -> tuple[int, int]:
    """The largest L1 move of any marginal over every X and stream, and the bound M."""
    largest = 0
    for stream in STREAMS:
        full = _exact_tables(df, call, stream, watch)
        for person in range(PEOPLE):
            without = _exact_tables(df.filter(pl.col(UNIT) != person), call, stream, watch)
            for s, table in full.items():
                largest = max(largest, int(np.abs(table - without[s]).sum()))
    return largest, m


def test_no_person_moves_a_measured_table_more_than_max_rows() -> None:
    reached = False
    for df, m, call in _configurations():
        largest, bound = _largest_move(df, m, call)
        assert largest <= bound
        reached |= largest == bound
    assert reached


def test_removing_the_only_person_moves_tables_by_their_rows_at_most() -> None:
    # D − X is empty: the exact tables are zeros, never a refusal.
    df = pl.DataFrame({UNIT: [0, 0, 0], "a": ["x", "y", "x"], "b": ["p"] * 3, "c": [1.0] * 3})

    def call(sess: pf.Session) -> Any:
        return sess.marginals([("a", "b", "c")], rho=1.0, domains=DOMAINS, max_rows=2)

    for stream in STREAMS:
        full = _exact_tables(df, call, stream, None)
        empty = _exact_tables(df.filter(pl.col(UNIT) != 0), call, stream, None)
        assert max(int(np.abs(t - empty[s]).sum()) for s, t in full.items()) == 2
        assert all(not t.any() for t in empty.values())


def test_audit_flags_an_engine_that_ignores_the_row_bound() -> None:
    def unbounded(spec: AggregationSpec) -> AggregationSpec:
        return AggregationSpec(
            spec.steps, spec.unit, spec.group_by, spec.keys, None, 10**6, None, (), spec.seed
        )

    flagged = False
    for df, m, call in _configurations():
        largest, bound = _largest_move(df, m, call, unbounded)
        flagged |= largest > bound
    assert flagged
