"""Neighbouring data for the ε audits, and many trials of a pair in each ``Session.release``.

Used by tests/privacy/test_privacy_audit_pure.py and test_privacy_audit_approx.py.

A pair is D (background units) and D' = D plus one heavy unit whose rows
fill every public key of the pair, far more than the contribution limits let
it keep, at an amount above the bounds, plus rows in a key that is not public.
With at most as many keys as ``max_groups``, bounding keeps the heavy unit in
all of them, and its contribution is the same in every release: f(D') − f(D)
is the planned worst case, not a random one (a random choice of groups would
make M(D') a mixture, whose true ε is far below the claim, so no audit of it
could be tight).

Trials: a release over C disjoint copies of a pair (unit ids and keys made
distinct per copy, :func:`tile`) is C independent trials of the release of
one copy. The plan (sensitivities, the ε split, the noise scales, the
quantiles' η) depends on the bounds, the limits and the budget, not on how
many keys there are; bounding is unit-local, so each copy's exact aggregates
are those of the copy alone (the audits check this premise on the engine's
exact output); and every key gets its own independent noise (or exponential
mechanism) draw. So R releases over C copies give R·C samples of M(D) and
of M(D'), all through ``Session.release``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
from internals import column_of, spec_of
from privacy import test_privacy_audit as audit

import privframe as pf
from privframe.api.query import Query
from privframe.engines.spec import COUNT, DISTINCT
from privframe.mechanisms.noise import SeededRandomness
from privframe.plan.planner import ReleasePlan

UNIT = "user"
KEY = "region"
VALUE = "amount"
HEAVY_UNIT = 1_000_000
COPY_STRIDE = 10_000_000  # unit ids of copy i are id + i·COPY_STRIDE
CALIBRATION = 4  # the first 1/4 of an audit's samples choose S; the rest evaluate it

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
MakeQuery = Callable[[pf.Session, list[str]], Query]
Spend = Mapping[str, float]


# --------------------------------------------------------------------------- data


def background(keys: list[str], units: int, max_rows: int, seed: int) -> pl.DataFrame:
    """``units`` units in 1 to all of ``keys``, 1 to ``max_rows`` rows each, amounts in [0, 150]."""
    gen = np.random.default_rng(seed)  # generates the data, not the noise
    users: list[int] = []
    regions: list[str] = []
    amounts: list[float | None] = []
    for unit in range(units):
        for key in gen.choice(keys, size=int(gen.integers(1, len(keys) + 1)), replace=False):
            n = int(gen.integers(1, max_rows + 1))
            users += [unit] * n
            regions += [str(key)] * n
            amounts += np.round(gen.uniform(0, 150, n), 2).tolist()
    return frame(users, regions, amounts)


def frame(
    users: Sequence[int], regions: Sequence[str], amounts: Sequence[float | None]
) -> pl.DataFrame:
    """The audits' schema: an Int64 unit, a String key and a Float64 amount."""
    return pl.DataFrame(
        {UNIT: users, KEY: regions, VALUE: amounts},
        schema={UNIT: pl.Int64, KEY: pl.String, VALUE: pl.Float64},
    )


def heavy_unit(keys: list[str], rows: int = 40, amount: float = 250.0) -> pl.DataFrame:
    """One unit with ``rows`` rows at ``amount`` in each key, and 10 in the non-public key "zz"."""
    regions = [k for k in keys for _ in range(rows)] + ["zz"] * 10
    return frame([HEAVY_UNIT] * len(regions), regions, [amount] * len(regions))


def with_heavy_unit(d: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """D' = D plus :func:`heavy_unit` in every key."""
    return pl.concat([d, heavy_unit(keys)])


def copy_keys(keys: list[str], copies: int) -> list[str]:
    """The public keys of ``copies`` copies, copy by copy: ``"<copy>:<key>"``."""
    return [f"{i}:{k}" for i in range(copies) for k in keys]


def tile(df: pl.DataFrame, copies: int) -> pl.DataFrame:
    """``copies`` disjoint copies of ``df``: unit ids and keys made distinct per copy."""
    assert df[UNIT].max() < COPY_STRIDE  # type: ignore[operator]
    index = pl.DataFrame({"copy": np.arange(copies, dtype=np.int64)})
    return (
        index.join(df, how="cross")
        .with_columns(
            (pl.col(UNIT) + pl.col("copy") * COPY_STRIDE).alias(UNIT),
            pl.format("{}:{}", "copy", KEY).alias(KEY),
        )
        .select(UNIT, KEY, VALUE)
    )


# --------------------------------------------------------------------------- pairs


@dataclasses.dataclass(frozen=True)
class Pair:
    """Neighbours D and D' (one copy each), the query, and what a release of it spends.

    ``release`` is the plan the session makes (``explain``); ``budget`` opens
    a session of the audited kind for ``n`` releases.
    """

    d: pl.DataFrame
    d_prime: pl.DataFrame
    keys: list[str]
    make_query: MakeQuery
    spend: Spend
    budget: Callable[[int], pf.Budget]
    release: ReleasePlan


def pair(
    d: pl.DataFrame,
    keys: list[str],
    make_query: MakeQuery,
    spend: Spend,
    budget: Callable[[int], pf.Budget],
) -> Pair:
    """D, D' = D plus :func:`heavy_unit` in every key, and the session's plan of the query."""
    sess = pf.Session(d, UNIT, budget(1))
    release = make_query(sess, keys).explain(**spend).plan
    return Pair(d, with_heavy_unit(d, keys), keys, make_query, spend, budget, release)


def exact(pair: Pair, df: pl.DataFrame, keys: list[str], release: ReleasePlan) -> pl.DataFrame:
    """The engine's exact output for ``release`` over ``df`` (its quantile histograms too)."""
    sess = pf.Session(df, UNIT, pair.budget(1))
    query = pair.make_query(sess, keys)
    return sess._engine.aggregate(dataclasses.replace(spec_of(sess, query.plan, release), seed=1))


def exact_measurements(pair: Pair, df: pl.DataFrame, keys: list[str]) -> IntArray:
    """The exact measurements of the pair's release over ``df``, shape (measurements, keys)."""
    release = pair.release
    out = exact(pair, df, keys, release)
    assert out[KEY].to_list() == keys
    column = {"count": COUNT, "distinct": DISTINCT}
    return np.asarray(
        [out[column.get(m.kind) or column_of(release, m)].to_numpy() for m in release.measurements],
        dtype=np.int64,
    )


def shift(pair: Pair, copies: int) -> IntArray:
    """f(D') − f(D) of one copy, after checking that every copy has f(D) and f(D') (premise)."""
    n = len(pair.keys)
    single = [exact_measurements(pair, df, pair.keys) for df in (pair.d, pair.d_prime)]
    for one, df in zip(single, (pair.d, pair.d_prime), strict=True):
        many = exact_measurements(pair, tile(df, copies), copy_keys(pair.keys, copies))
        assert (many.reshape(len(pair.release.measurements), copies, n) == one[:, None, :]).all()
    return single[1] - single[0]


# --------------------------------------------------------------------------- releases


@dataclasses.dataclass(frozen=True)
class Trials:
    """Every output of R releases over C copies: arrays of shape (R·C, keys per copy)."""

    outputs: dict[str, npt.NDArray[Any]]
    session: pf.Session


def released(pair: Pair, df: pl.DataFrame, copies: int, releases: int, seed: int) -> Trials:
    """``releases`` unclamped releases of the pair's query over ``copies`` copies of ``df``."""
    keys = copy_keys(pair.keys, copies)
    sess = pf.Session(tile(df, copies), UNIT, pair.budget(releases), rng=SeededRandomness(seed))
    query = pair.make_query(sess, keys)
    columns: dict[str, list[npt.NDArray[Any]]] = {}
    for _ in range(releases):
        result = query.release(**pair.spend, clamp=False)
        assert isinstance(result, pl.DataFrame)
        assert result[KEY].to_list() == keys
        for name in result.columns[1:]:
            columns.setdefault(name, []).append(
                result[name].to_numpy().reshape(copies, len(pair.keys))
            )
    return Trials({name: np.concatenate(parts) for name, parts in columns.items()}, sess)


def trials(pair: Pair, copies: int, releases: int, seed: int) -> tuple[Trials, Trials]:
    """:func:`released` over D, then over D' (streams ``seed`` and ``seed + 1``).

    Each session's ledger must show every release charged what it asked
    (basic composition of the releases' costs), from a seeded stream.
    """
    out = (
        released(pair, pair.d, copies, releases, seed),
        released(pair, pair.d_prime, copies, releases, seed + 1),
    )
    for t in out:
        assert t.session.basic_spent == pair.budget(releases)
        assert len(t.session.ledger) == releases
        assert all(entry.seeded for entry in t.session.ledger)
    return out


def measured(t: Trials, release: ReleasePlan) -> IntArray:
    """The released measurements in grid units, (n, measurements, keys).

    Unclamped, a count and a sum are a bijection of the count and the centred
    sum: C = sum·2^j − c·count in grid units, a grid point (checked).
    """
    count = t.outputs["count"].astype(np.int64)
    rows = []
    for m in release.measurements:
        if m.kind == "count":
            rows.append(count)
            continue
        assert m.kind == "centred_sum"
        units = np.ldexp(t.outputs[f"{m.column}_sum"], m.grid_exponent)
        units -= m.centre_units * count.astype(np.float64)
        assert (units == np.rint(units)).all()
        rows.append(np.rint(units).astype(np.int64))
    return np.stack(rows, axis=1)


# --------------------------------------------------------------------------- statistics


def laplace_llr(z: IntArray, shift: IntArray, scale: FloatArray) -> FloatArray:
    """Σ (|z| − |z − a|)/b over coordinates: ln P_D'(y)/P_D(y) for discrete Laplace noise.

    ``z`` (n, measurements, keys) is the released vector minus f(D) in grid
    units, ``shift`` (measurements, keys) is f(D') − f(D) and ``scale``
    (measurements,) the noise scales b: the log-likelihood ratio of D' over D,
    the Neyman–Pearson statistic, whose largest value is the L1 shift over b.
    """
    zf = z.astype(np.float64)
    terms = np.abs(zf) - np.abs(zf - shift.astype(np.float64))
    return np.einsum("nmk,m->n", terms, 1.0 / scale)


def split_audit(t_d: FloatArray, t_d1: FloatArray, delta: float) -> audit.AuditResult:
    """The audit of test_privacy_audit.py: S chosen on the first quarter, ε_lb on the rest."""
    n = t_d.size // CALIBRATION
    return audit._audit((t_d[:n], t_d1[:n]), (t_d[n:], t_d1[n:]), delta)


def report(name: str, claimed: str, result: audit.AuditResult) -> None:
    """Print an audit's numbers (``pytest -s``)."""
    side = ">" if result.side == "high" else "<="
    print(
        f"\n{name}: claimed {claimed}; ε_lb = {result.epsilon_lb:.4f} "
        f"(S = T {side} {result.threshold:.4g}; calibration ε_lb = "
        f"{result.calibration_epsilon:.4f})"
    )
