"""Empirical ε audit of a private join: the released counts lose no more than the ε charged.

Method: that of tests/privacy/test_privacy_audit.py and test_privacy_audit_pure.py,
at their significance level ALPHA = 1e-3. If a release is ε-DP then for every
output set S fixed in advance and neighbours D, D' (D' = D plus one person, in
every table), P[M(D') ∈ S] <= e^ε P[M(D) ∈ S] and the same with D and D'
swapped; exact one-sided Clopper–Pearson bounds (ALPHA/2 each) on the two
probabilities give ε_lb = ln(p̂_lo / p̂_hi), which a correct release exceeds
with probability at most ALPHA. S is a threshold on a statistic T, its side
and threshold chosen on the first quarter of the samples (calibration) and
ε_lb computed on the other three quarters (evaluation). Every random bit comes
from fixed SeededRandomness streams, so each run is the same.

Neighbours: two private tables, ``visits`` and ``drugs``, keyed by ``pid``. D
holds 8 background people per copy, each with at most ``l`` visits and ``r``
prescriptions (so truncation keeps all their rows and f(D) is the same in
every release), some prescriptions with dose 0. D' adds one heavy person with
6 visits and 10 prescriptions of drug ``a`` (and 4 of ``b`` at dose 0): in
both tables, and far over the limits. The query, in a PureDP session at
ε = 1 per release, is ``visits.join_private(drugs.filter(dose > 0), on="pid",
left_rows=2, right_rows=3)`` counted by drug over the public keys a and b,
with no contribution bound: the planner derives M = l·r = 6 from the join and
calibrates the discrete Laplace noise to the L1 sensitivity W = 6 (scale b =
6). The join multiplies the heavy person's rows (6 × 10 = 60 joined rows
without truncation): truncation keeps 2 × 3, all in key ``a``, so f(D') − f(D)
is (6, 0) in every copy and every release, the planned worst case (checked on
the engine's exact output of every release).

Trials: a release over C = 10,000 disjoint copies of a pair (ids and drug keys
made distinct per copy) is C independent trials of the release of one copy:
the plan does not depend on the number of keys (M bounds a person's rows
whatever they are), truncation and bounding are unit-local, and every key gets
its own noise draw. 12 releases per data set give 120,000 samples of each.

Statistic: T is the log-likelihood ratio of the released counts under D' over
D, Σ (|z| − |z − a|)/b with z = y − f(D) and a = (6, 0), the Neyman–Pearson
test. Its top value (z_a >= 6) has probability 1/(1 + p) under D' and e^(−ε)
times that under D (p = e^(−1/b)), so the best S shows all of ε, and the audit
reaches ε_lb ≈ 0.96: it must stay at or below the claim ε = 1. Power: the same
audit flags the Laplace scale halved (true ε = 2) and a join whose rows are
neither truncated nor bounded (the heavy person's 60 joined rows against the
6 planned), each with ε_lb above 1.25, many standard errors over the claim.
``pytest -s`` prints every audit's numbers.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import polars as pl
import pytest
from epsilon_audit_setup import IntArray, laplace_llr, report, split_audit
from internals import released_exactly

import privframe as pf
import privframe.engines.spec
import privframe.mechanisms.draws
from privframe.engines.spec import COUNT
from privframe.mechanisms.noise import SeededRandomness, discrete_laplace
from privframe.plan.planner import ReleasePlan
from privframe.plan.release import Pipeline

pytestmark = [
    pytest.mark.statistical,
    pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning"),
]

EPSILON = 1.0
CLAIM = f"ε = {EPSILON:g} (δ = 0)"
UNIT = "pid"
KEYS = ["a", "b"]
LEFT_ROWS, RIGHT_ROWS = 2, 3
BIG_M = LEFT_ROWS * RIGHT_ROWS
HEAVY = 1_000
STRIDE = 10_000  # ids of copy i are id + i·STRIDE
COPIES, RELEASES = 10_000, 12

Tables = dict[str, pl.DataFrame]


def _background() -> Tables:
    """8 people, each with 1..l visits and 1..r prescriptions in one or both keys."""
    gen = np.random.default_rng(8)  # generates the data, not the noise
    visits: list[int] = []
    drugs: list[tuple[int, str, float]] = []
    for pid in range(8):
        visits += [pid] * int(gen.integers(1, LEFT_ROWS + 1))
        for _ in range(int(gen.integers(1, RIGHT_ROWS + 1))):
            dose = 0.0 if gen.random() < 0.2 else round(float(gen.uniform(1, 50)), 1)
            drugs.append((pid, str(gen.choice(KEYS)), dose))
    return _tables(visits, drugs)


def _tables(visits: list[int], drugs: list[tuple[int, str, float]]) -> Tables:
    pids, names, doses = zip(*drugs, strict=True)
    return {
        "visits": pl.DataFrame({UNIT: visits}, schema={UNIT: pl.Int64}),
        "drugs": pl.DataFrame(
            {UNIT: pids, "drug": names, "dose": doses},
            schema={UNIT: pl.Int64, "drug": pl.String, "dose": pl.Float64},
        ),
    }


def _with_heavy(d: Tables) -> Tables:
    """D' = D plus one person in both tables: 6 visits, 10 prescriptions of a (4 of b at 0)."""
    heavy = _tables([HEAVY] * 6, [(HEAVY, "a", 25.0)] * 10 + [(HEAVY, "b", 0.0)] * 4)
    return {name: pl.concat([d[name], heavy[name]]) for name in d}


def _tiled(tables: Tables, copies: int) -> Tables:
    """``copies`` disjoint copies: ids and drug keys distinct per copy."""
    index = pl.DataFrame({"copy": np.arange(copies, dtype=np.int64)})
    unit = (pl.col(UNIT) + pl.col("copy") * STRIDE).alias(UNIT)
    visits = index.join(tables["visits"], how="cross").select(unit)
    drugs = index.join(tables["drugs"], how="cross").select(
        unit, pl.format("{}:{}", "copy", "drug").alias("drug"), "dose"
    )
    return {"visits": visits, "drugs": drugs}


def _keys(copies: int) -> list[str]:
    return [f"{i}:{k}" for i in range(copies) for k in KEYS]


def _query(sess: pf.Session, copies: int) -> Any:
    right = sess.query("drugs").filter(pl.col("dose") > 0)
    joined = sess.query("visits").join_private(
        right, on=UNIT, left_rows=LEFT_ROWS, right_rows=RIGHT_ROWS
    )
    return joined.group_by("drug", keys=_keys(copies)).agg(pf.count())


@dataclasses.dataclass(frozen=True)
class Trials:
    """Released counts (R·C, keys) and exact counts (R, C, keys) of one data set."""

    released: IntArray
    exact: IntArray
    release: ReleasePlan


def _released(tables: Tables, stream: int, releases: int) -> Trials:
    """``releases`` unclamped releases over COPIES copies, each charged ε."""
    sess = pf.Session(
        _tiled(tables, COPIES), UNIT, pf.PureDP(releases * EPSILON), rng=SeededRandomness(stream)
    )
    query = _query(sess, COPIES)
    released, exact = [], []
    for _ in range(releases):
        out = released_exactly(sess, query, epsilon=EPSILON, clamp=False)
        assert out.output["drug"].to_list() == _keys(COPIES)
        released.append(out.output["count"].to_numpy().reshape(COPIES, len(KEYS)))
        exact.append(out.exact[COUNT].to_numpy().reshape(COPIES, len(KEYS)))
    assert sess.spent == pf.PureDP(releases * EPSILON)
    assert len(sess.ledger) == releases
    assert all(e.seeded for e in sess.ledger)
    return Trials(
        np.concatenate(released).astype(np.int64), np.stack(exact).astype(np.int64), out.release
    )


@pytest.fixture(scope="module")
def d() -> Tables:
    return _background()


def _trials(d: Tables, stream: int, releases: int) -> tuple[Trials, Trials]:
    return _released(d, stream, releases), _released(_with_heavy(d), stream + 1, releases)


def _audit(out: tuple[Trials, Trials], base: IntArray) -> Any:
    """T = the Laplace log-likelihood ratio for the shift (M, 0), at the honest plan's scale."""
    shift = np.array([[BIG_M, 0]], dtype=np.int64)
    scale = np.array([BIG_M / EPSILON])
    t_d, t_d1 = (laplace_llr((t.released - base)[:, None, :], shift, scale) for t in out)
    return split_audit(t_d, t_d1, 0.0)


@pytest.fixture(scope="module")
def honest(d: Tables) -> tuple[Trials, Trials]:
    return _trials(d, 501, RELEASES)


def test_the_join_is_planned_from_l_times_r_and_the_heavy_person_moves_it_by_exactly_that(
    honest: tuple[Trials, Trials],
) -> None:
    without, with_heavy = honest
    release = without.release
    (m,) = release.measurements
    assert release.limits.max_rows == BIG_M
    assert release.family == "laplace"
    assert "2 left × 3 right rows per unit: M ≤ 6" in release.limits.describe(l1=True)
    assert m.l1_units == BIG_M
    assert m.scale_units == BIG_M / EPSILON
    # f(D) is the same in every release and copy, and so is f(D') − f(D) = (M, 0).
    base = without.exact[0, 0]
    assert (without.exact == base).all()
    assert (with_heavy.exact - base == [BIG_M, 0]).all()


def test_audit_of_a_join_stays_below_its_epsilon_and_is_tight(
    honest: tuple[Trials, Trials],
) -> None:
    result = _audit(honest, honest[0].exact[0, 0])
    report("join_private count (Session.release)", CLAIM, result)
    assert result.epsilon_lb <= EPSILON
    assert result.epsilon_lb >= 0.85 * EPSILON  # the audit sees nearly all of ε


def _halved_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    def weak(scale: float, size: Any = None, *, rng: Any = None) -> IntArray:
        return discrete_laplace(scale / 2, size, rng=rng)

    monkeypatch.setattr(privframe.mechanisms.draws, "discrete_laplace", weak)


def _nothing_truncated_or_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    def everything(frame: pl.LazyFrame, unit: str, limit: int, key: int) -> pl.LazyFrame:
        return frame

    planned = Pipeline.spec

    def unbounded(self: Pipeline, *args: Any, **kwargs: Any) -> object:
        spec = planned(self, *args, **kwargs)
        return dataclasses.replace(spec, max_groups=None, max_rows_per_group=10**9, max_rows=None)

    monkeypatch.setattr(privframe.engines.spec, "_truncated", everything)
    monkeypatch.setattr(Pipeline, "spec", unbounded)


@pytest.mark.parametrize(
    ("breaks", "stream"),
    [(_halved_scale, 601), (_nothing_truncated_or_bounded, 603)],
    ids=["Laplace scale halved", "join rows neither truncated nor bounded"],
)
def test_audit_of_a_join_flags_an_under_noised_release(
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    d: Tables,
    honest: tuple[Trials, Trials],
    breaks: Any,
    stream: int,
) -> None:
    base = honest[0].exact[0, 0]  # f(D), and the honest plan's shift and scale in T
    breaks(monkeypatch)
    result = _audit(_trials(d, stream, RELEASES // 3), base)  # still charged ε = 1
    report(f"join_private count, {request.node.callspec.id}", CLAIM, result)
    assert result.epsilon_lb > EPSILON + 0.25
