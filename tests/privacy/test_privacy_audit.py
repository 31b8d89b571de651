"""Empirical privacy audit: an ε lower bound on neighbouring data must not exceed the claim.

Method (a black-box DP audit, as in Jagielski, Ullman & Oprea 2020 and Nasr et
al. 2021, with exact Clopper–Pearson intervals). If a release is (ε, δ)-DP,
then for *every* output set S fixed in advance and every pair of neighbours,
P[M(D') ∈ S] <= e^ε P[M(D) ∈ S] + δ, and the same with D and D' swapped. So
from samples of M(D) and M(D') an upper confidence bound p̂_hi on
P[M(D) ∈ S] and a lower one p̂_lo on P[M(D') ∈ S] give

    ε_lb = ln((p̂_lo − δ) / p̂_hi),

an ε that the mechanism must exceed if the bounds hold. A correct release
never has ε_lb above its claimed ε = zCDP(ρ).epsilon(δ) (Canonne, Kamath &
Steinke 2020, Cor. 13, at the session's reporting δ = 1e-6), except with the
probability that the bounds fail.

Significance: fixed at ALPHA = 1e-3. The set S is chosen on a separate
*calibration* sample and then held fixed; on an independent *evaluation*
sample the two one-sided Clopper–Pearson bounds are each at level ALPHA/2, so
"ε_lb <= claimed ε" fails for a correct mechanism with probability at most
1e-3 (the intervals are exact, hence conservative for any p). Every random bit
comes from fixed SeededRandomness streams, so each run is reproducible.

Neighbours: D is 300 background units (1–3 of 6 public regions each, 1–8 rows
per region, amounts in [0, 150]); D' is D plus one unit with 500 rows: 96 in
each of 5 public regions at amount 250, and 20 in a non-public region. The
query is ``bound(max_groups=3, max_rows_per_group=5)``, grouped by region over
the 6 public keys, with ``count()``, ``sum("amount", bounds=(0, 100))`` and
``mean("amount", bounds=(0, 100))`` (three outputs of two measurements: the
count and the centred sum), at
ρ = 0.02 (claimed ε ≈ 0.90 at δ = 1e-6). Bounding must cut the unit from 500
rows to 3 random regions × 5 rows, each clipped to 100.

Test statistic: T = <w, Y − f(D)>, the projection of the two noisy grouped
vectors onto the whitened mean difference w = E[f(D') − f(D)]/σ², which is
the Neyman–Pearson direction for a Gaussian shift. Because the unit's 3
regions are a uniformly random subset of its 5, f(D') is a mixture; but w is
constant over those 5 regions, so <w, f(D') − f(D)> is the same for every
subset and T is an exact shift family. S is {T > t} or {T <= t}, t and the
side picked to maximise ε_lb on the calibration sample.

Why auditing at the engine + noise level audits the real mechanism:
the release pipeline (``privframe.plan.release.Pipeline``) does exactly three
things with data: it runs ``PolarsEngine.aggregate`` on the ``AggregationSpec``
it builds (with a fresh engine seed for the random group subsets), adds
``discrete_gaussian(m.sigma_units, n_keys)`` from the planner to each integer
measurement, and post-processes (unclamped, the count and the sum are a
bijection of the two measurements, and the mean is a function of them).
The audit calls the same engine on the same spec, once per engine seed (64
seeds per dataset, each release drawing one uniformly), and the same sampler
at the planner's σ, vectorised over 200,000 releases per dataset. Mixing over
engine seeds cannot help a correct mechanism: each seed's pair of outputs is
(ε, δ)-close, and the hockey-stick divergence is jointly convex. A smaller
end-to-end run through ``Session.release`` (300 releases per dataset) checks
that its statistic has the same distribution (two-sample KS at ALPHA) and
passes the same audit.

Why the sizes make it stable: with 150,000 evaluation releases per dataset,
a tail probability p is pinned to about p ± 3.3 sqrt(p/150,000). T is a
Gaussian shift of μ = sqrt(2ρ) = 0.2 for the correct release: the heavy unit
moves both measurements by their full sensitivity, so the release loses
exactly the ρ charged (its best conceivable ε_lb from this T, with infinite
samples, is the μ-GDP ε ≈ 0.83 < 0.90), and the audit reaches ε_lb ≈ 0.19;
a release noised 5× too little (μ = 1.0) reaches ≈ 2.0; bounding disabled
reaches ≈ 9.0, near the ceiling ln(150,000/7.6) ≈ 9.9 this sample size can
show. Each verdict has a margin of many standard errors (0.19 against the
claim 0.90, 2.0 and 9.0 against the flags' 1.4 and 4.5), so none depends on
the seeds. ``pytest -s`` prints every audit's numbers.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
import pytest
from internals import column_of, spec_of
from scipy import special, stats

import privframe as pf
import privframe.mechanisms.draws
from privframe.accounting.budgets import zCDP
from privframe.api.query import Query
from privframe.engines.spec import COUNT, DISTINCT
from privframe.mechanisms.noise import SeededRandomness, discrete_gaussian
from privframe.plan.planner import ReleasePlan, plan_release

pytestmark = [
    pytest.mark.statistical,
    pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning"),
]

ALPHA = 1e-3
RHO = 0.02
K, M = 3, 5
BOUNDS = (0.0, 100.0)
KEYS = ["a", "b", "c", "d", "e", "f"]
HEAVY_KEYS = KEYS[:5]
HEAVY_UNIT = 1_000_000
N_ENGINE_SEEDS = 64
N_CAL = 50_000
N_EVAL = 150_000
N_E2E = 300

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


# --------------------------------------------------------------------------- data


def _background() -> pl.DataFrame:
    """300 units within the group bound (so f(D) is deterministic); some exceed m rows."""
    gen = np.random.default_rng(20240611)  # generates the data, not the noise
    users: list[int] = []
    regions: list[str] = []
    amounts: list[float] = []
    for unit in range(300):
        for key in gen.choice(KEYS, size=int(gen.integers(1, K + 1)), replace=False):
            n = int(gen.integers(1, 9))
            users += [unit] * n
            regions += [str(key)] * n
            amounts += np.round(gen.uniform(0, 150, n), 2).tolist()
        if unit % 10 == 0:
            users += [unit] * 2
            regions += ["zz"] * 2  # not a public key: dropped before bounding
            amounts += [50.0, 50.0]
    return pl.DataFrame({"user": users, "region": regions, "amount": amounts})


def _heavy_unit() -> pl.DataFrame:
    """One unit with 500 rows: 96 in each of 5 public regions, 20 in a non-public one."""
    regions = [k for k in HEAVY_KEYS for _ in range(96)] + ["zz"] * 20
    return pl.DataFrame(
        {"user": [HEAVY_UNIT] * len(regions), "region": regions, "amount": [250.0] * len(regions)}
    )


@pytest.fixture(scope="module")
def datasets() -> tuple[pl.DataFrame, pl.DataFrame]:
    d = _background()
    d_prime = pl.concat([d, _heavy_unit()])
    assert d_prime.height == d.height + 500
    return d, d_prime


def _basic_aggregates() -> tuple[Any, ...]:
    # Three outputs from two measurements: the sum and the mean are post-processing
    # of the count and the centred sum, and only those two are charged.
    return (pf.count(), pf.sum("amount", bounds=BOUNDS), pf.mean("amount", bounds=BOUNDS))


def _newer_aggregates() -> tuple[Any, ...]:
    # Distinct units and a standard deviation: four measurements (distinct, squares,
    # centred sum, count) with three different sensitivities.
    return (pf.count_distinct(), pf.std("amount", bounds=BOUNDS))


def _query(sess: pf.Session, m: int = M, aggregates: tuple[Any, ...] | None = None) -> Query:
    return (
        sess.query()
        .bound(max_groups=K, max_rows_per_group=m)
        .group_by("region", keys=KEYS)
        .agg(*(aggregates or _basic_aggregates()))
    )


def _session(df: pl.DataFrame, seed: int, rho: float = 1.0) -> pf.Session:
    return pf.Session(df, "user", pf.zCDP(rho), rng=SeededRandomness(seed))


def _session_delta() -> float:
    return _session(pl.DataFrame({"user": [0]}), 0).report().delta


# --------------------------------------------------------------------------- statistics


def _cp_upper(k: IntArray, n: int, a: float) -> FloatArray:
    """One-sided Clopper–Pearson upper bound at level 1 − a (exact, conservative)."""
    k = np.asarray(k)
    safe = np.minimum(k, n - 1)
    return np.where(k >= n, 1.0, special.betaincinv(safe + 1, n - safe, 1 - a))


def _cp_lower(k: IntArray, n: int, a: float) -> FloatArray:
    """One-sided Clopper–Pearson lower bound at level 1 − a."""
    k = np.asarray(k)
    safe = np.maximum(k, 1)
    return np.where(k <= 0, 0.0, special.betaincinv(safe, n - safe + 1, a))


def _epsilon_bounds(
    t_d: FloatArray, t_d1: FloatArray, thresholds: FloatArray, delta: float, a: float
) -> dict[str, FloatArray]:
    """ε_lb per threshold for S = {T > t} ("high") and S = {T <= t} ("low")."""
    d, d1 = np.sort(t_d), np.sort(t_d1)
    below_d = np.searchsorted(d, thresholds, side="right")  # #{T <= t}
    below_d1 = np.searchsorted(d1, thresholds, side="right")
    n, n1 = d.size, d1.size

    def ratio(hit_lo: FloatArray, hit_hi: FloatArray) -> FloatArray:
        with np.errstate(divide="ignore", invalid="ignore"):
            eps = np.log((hit_lo - delta) / hit_hi)
        return np.where(hit_lo > delta, eps, -np.inf)

    return {
        # P[D' ∈ S] <= e^ε P[D ∈ S] + δ
        "high": ratio(_cp_lower(n1 - below_d1, n1, a), _cp_upper(n - below_d, n, a)),
        # P[D ∈ S] <= e^ε P[D' ∈ S] + δ
        "low": ratio(_cp_lower(below_d, n, a), _cp_upper(below_d1, n1, a)),
    }


@dataclasses.dataclass(frozen=True)
class AuditResult:
    epsilon_lb: float
    side: str
    threshold: float
    calibration_epsilon: float


def _choose_set(t_d: FloatArray, t_d1: FloatArray, delta: float) -> tuple[str, float, float]:
    """The side and threshold maximising ε_lb on the calibration sample."""
    pooled = np.sort(np.concatenate([t_d, t_d1]))
    n = pooled.size
    ranks = np.unique(np.round(np.geomspace(1, n / 2, 300)).astype(np.int64))
    ranks = np.unique(np.concatenate([ranks - 1, n - ranks, np.linspace(0, n - 1, 200, dtype=int)]))
    thresholds = pooled[ranks]
    eps = _epsilon_bounds(t_d, t_d1, thresholds, delta, ALPHA / 2)
    side = max(eps, key=lambda s: float(eps[s].max()))
    i = int(np.argmax(eps[side]))
    return side, float(thresholds[i]), float(eps[side][i])


def _audit(
    cal: tuple[FloatArray, FloatArray], evaluation: tuple[FloatArray, FloatArray], delta: float
) -> AuditResult:
    side, threshold, cal_eps = _choose_set(*cal, delta)
    eps = _epsilon_bounds(*evaluation, np.array([threshold]), delta, ALPHA / 2)[side][0]
    return AuditResult(max(float(eps), 0.0), side, threshold, cal_eps)


# --------------------------------------------------------------------------- engine + noise


@dataclasses.dataclass(frozen=True)
class EngineOutputs:
    """Exact engine outputs, shape (seeds, measurements, keys), for the real release plan."""

    release: ReleasePlan
    d: IntArray
    d_prime: IntArray


def _engine_outputs(
    df: pl.DataFrame, seeds: list[int], aggregates: tuple[Any, ...] | None, **spec_changes: Any
) -> IntArray:
    sess = _session(df, 0)
    query = _query(sess, aggregates=aggregates)
    release = plan_release(query.plan, True, RHO)
    spec = dataclasses.replace(spec_of(sess, query.plan, release), **spec_changes)
    rows = []
    for seed in seeds:
        exact = sess._engine.aggregate(dataclasses.replace(spec, seed=seed))
        assert exact["region"].to_list() == KEYS
        column = {"count": COUNT, "distinct": DISTINCT}
        rows.append(
            [
                exact[column.get(m.kind) or column_of(release, m)].to_numpy()
                for m in release.measurements
            ]
        )
    return np.asarray(rows, dtype=np.int64)


def _engine_seeds(stream: int) -> list[int]:
    return [int(w) for w in SeededRandomness(stream).words(N_ENGINE_SEEDS)]


def _outputs(
    datasets: tuple[pl.DataFrame, pl.DataFrame],
    aggregates: tuple[Any, ...] | None = None,
    **spec_changes: Any,
) -> EngineOutputs:
    d, d_prime = datasets
    release = plan_release(_query(_session(d, 0), aggregates=aggregates).plan, True, RHO)
    return EngineOutputs(
        release,
        _engine_outputs(d, _engine_seeds(1), aggregates, **spec_changes),
        _engine_outputs(d_prime, _engine_seeds(2), aggregates, **spec_changes),
    )


@pytest.fixture(scope="module")
def bounded(datasets: tuple[pl.DataFrame, pl.DataFrame]) -> EngineOutputs:
    return _outputs(datasets)


@pytest.fixture(scope="module")
def unbounded(datasets: tuple[pl.DataFrame, pl.DataFrame]) -> EngineOutputs:
    # Bounding disabled in the engine; the noise is still the planner's for k=3, m=5.
    return _outputs(datasets, max_groups=None, max_rows_per_group=10**9)


@dataclasses.dataclass(frozen=True)
class Projection:
    """T = <w, Y − ref>, with w the whitened mean difference."""

    ref: IntArray  # (measurements, keys)
    w: FloatArray  # (measurements, keys)

    def of(self, y: IntArray) -> FloatArray:
        """T for outputs y of shape (n, measurements, keys): exact integers, then float."""
        return np.einsum("nmk,mk->n", (y - self.ref).astype(np.float64), self.w)


def _projection(outputs: EngineOutputs, sigmas: FloatArray) -> Projection:
    ref = outputs.d[0]
    diff = outputs.d_prime.mean(axis=0) - ref
    return Projection(ref, diff / np.square(sigmas)[:, None])


def _simulate(
    exact: IntArray, sigmas: FloatArray, proj: Projection, n: int, rng: SeededRandomness
) -> FloatArray:
    """T for n releases: one engine output per release (uniform seed) + discrete Gaussian noise."""
    pick = (rng.words(n) % np.uint64(exact.shape[0])).astype(np.int64)
    t = np.einsum("smk,mk->s", (exact - proj.ref).astype(np.float64), proj.w)[pick]
    for i, sigma in enumerate(sigmas):
        noise = discrete_gaussian(float(sigma), (n, exact.shape[2]), rng=rng)
        t += noise.astype(np.float64) @ proj.w[i]
    return t


def _engine_audit(
    outputs: EngineOutputs, noise_plan: ReleasePlan, seed: int
) -> tuple[AuditResult, tuple[FloatArray, FloatArray], Projection]:
    """Audit engine outputs noised at ``noise_plan``'s σ; returns the evaluation T's too."""
    assert [m.key for m in noise_plan.measurements] == [m.key for m in outputs.release.measurements]
    assert [m.grid_exponent for m in noise_plan.measurements] == [
        m.grid_exponent for m in outputs.release.measurements
    ]
    sigmas = np.array([m.sigma_units for m in noise_plan.measurements])
    proj = _projection(outputs, sigmas)
    rng = SeededRandomness(seed)
    samples = [
        _simulate(exact, sigmas, proj, N_CAL + N_EVAL, rng)
        for exact in (outputs.d, outputs.d_prime)
    ]
    cal = (samples[0][:N_CAL], samples[1][:N_CAL])
    evaluation = (samples[0][N_CAL:], samples[1][N_CAL:])
    return _audit(cal, evaluation, _session_delta()), evaluation, proj


def _claimed(release: ReleasePlan) -> float:
    return zCDP(release.cost.rho).epsilon(_session_delta())


def _report(name: str, claimed: float, result: AuditResult) -> None:
    print(
        f"\n{name}: claimed ε = {claimed:.4f} at δ = {_session_delta():g}; "
        f"ε_lb = {result.epsilon_lb:.4f} (S = T {'>' if result.side == 'high' else '<='} "
        f"{result.threshold:.4g}; calibration ε_lb = {result.calibration_epsilon:.4f})"
    )


# --------------------------------------------------------------------------- the premise


def test_bounding_cuts_the_heavy_unit_to_k_random_groups_of_m_rows(bounded: EngineOutputs) -> None:
    """f(D) is fixed; f(D') − f(D) is the unit's 3 random regions × 5 rows, clipped to 100."""
    assert (bounded.d == bounded.d[0]).all()
    kinds = sorted(m.kind for m in bounded.release.measurements)
    assert kinds == ["centred_sum", "count"]  # sum and mean measure nothing of their own
    count_i = next(i for i, m in enumerate(bounded.release.measurements) if m.kind == "count")
    sum_m = next(m for m in bounded.release.measurements if m.kind == "centred_sum")
    sum_i = bounded.release.measurements.index(sum_m)
    diffs = bounded.d_prime - bounded.d[0]
    subsets = set()
    for diff in diffs:
        touched = np.flatnonzero(diff[count_i])
        subsets.add(tuple(touched))
        assert len(touched) == K
        assert set(touched) <= set(range(len(HEAVY_KEYS)))
        assert (diff[count_i][touched] == M).all()
        assert (diff[sum_i][touched] == M * (sum_m.upper_units - sum_m.centre_units)).all()
        assert (diff[:, np.setdiff1d(np.arange(len(KEYS)), touched)] == 0).all()
    # The subset is random: 64 seeds see most of the C(5, 3) = 10 subsets.
    assert len(subsets) >= 6
    # The L2 change is exactly the planner's sensitivity (worst case, tight).
    for m, i in ((bounded.release.measurements[count_i], count_i), (sum_m, sum_i)):
        l2 = np.sqrt(np.square(diffs[:, i].astype(np.float64)).sum(axis=1))
        assert np.allclose(l2, math.sqrt(bounded.release.limits.squares) * m.row_units)
        assert (l2 <= m.l2_units).all()


# --------------------------------------------------------------------------- the audits


RealAudit = tuple[AuditResult, tuple[FloatArray, FloatArray], Projection]


@pytest.fixture(scope="module")
def real_audit(bounded: EngineOutputs) -> RealAudit:
    return _engine_audit(bounded, bounded.release, seed=101)


def test_audit_of_the_real_mechanism_stays_below_the_claim(
    bounded: EngineOutputs, real_audit: RealAudit
) -> None:
    claimed = _claimed(bounded.release)
    assert 0.5 <= claimed <= 1.0  # a small claim, so the broken variants stand out
    result = real_audit[0]
    _report("real mechanism (engine + noise)", claimed, result)
    assert result.epsilon_lb <= claimed


def _plan_m1(datasets: tuple[pl.DataFrame, pl.DataFrame], _: EngineOutputs) -> ReleasePlan:
    # Sensitivity computed for m=1 although the engine keeps m=5 rows: σ is 5× too small.
    return plan_release(_query(_session(datasets[0], 0), m=1).plan, True, RHO)


def _plan_rho25(datasets: tuple[pl.DataFrame, pl.DataFrame], _: EngineOutputs) -> ReleasePlan:
    # Noise calibrated for 25ρ while ρ is charged: σ is 5× too small.
    return plan_release(_query(_session(datasets[0], 0)).plan, True, 25 * RHO)


@pytest.mark.parametrize(
    ("name", "make_plan", "seed"),
    [("sensitivity for m=1", _plan_m1, 202), ("noise for 25ρ", _plan_rho25, 203)],
)
def test_audit_flags_an_under_noised_release(
    datasets: tuple[pl.DataFrame, pl.DataFrame],
    bounded: EngineOutputs,
    name: str,
    make_plan: Callable[[tuple[pl.DataFrame, pl.DataFrame], EngineOutputs], ReleasePlan],
    seed: int,
) -> None:
    noise_plan = make_plan(datasets, bounded)
    for broken, real in zip(noise_plan.measurements, bounded.release.measurements, strict=True):
        assert broken.sigma_units == pytest.approx(real.sigma_units / 5, rel=1e-6)
    claimed = _claimed(bounded.release)  # what the session charges and reports
    result, _, _ = _engine_audit(bounded, noise_plan, seed=seed)
    _report(f"under-noised ({name})", claimed, result)
    assert result.epsilon_lb > claimed + 0.5


def test_audit_flags_a_release_without_contribution_bounding(unbounded: EngineOutputs) -> None:
    claimed = _claimed(unbounded.release)
    result, _, _ = _engine_audit(unbounded, unbounded.release, seed=303)
    _report("bounding disabled", claimed, result)
    assert result.epsilon_lb > 5 * claimed


# --------------------------------------------------------------------------- end to end


def _release_outputs(
    df: pl.DataFrame, n: int, seed: int, release: ReleasePlan
) -> tuple[IntArray, pf.Session]:
    """N releases through Session.release; the measurements read back from the outputs.

    Unclamped, the outputs are a bijection of the two measurements: the count,
    and the centred sum C = sum − c·count in grid units; the mean must be the
    post-processing c + C/count of the same two, not a third measurement.
    """
    sess = _session(df, seed, rho=2 * n * RHO)
    query = _query(sess)
    out = np.empty((n, len(release.measurements), len(KEYS)), dtype=np.int64)
    centred = next(m for m in release.measurements if m.kind == "centred_sum")
    for r in range(n):
        result = query.release(rho=RHO, clamp=False)
        assert isinstance(result, pl.DataFrame)
        assert result["region"].to_list() == KEYS
        count = result["count"].to_numpy()
        units = np.ldexp(result["amount_sum"].to_numpy(), centred.grid_exponent)
        units -= centred.centre_units * count.astype(np.float64)
        assert (units == np.rint(units)).all()  # released sums are grid points
        midpoint = np.ldexp(float(centred.centre_units), -centred.grid_exponent)
        derived = midpoint + np.ldexp(units, -centred.grid_exponent) / np.maximum(count, 1)
        assert np.allclose(result["amount_mean"].to_numpy(), derived, rtol=1e-12)
        for i, m in enumerate(release.measurements):
            out[r, i] = count if m.kind == "count" else np.rint(units).astype(np.int64)
    return out, sess


@pytest.fixture(scope="module")
def end_to_end(
    datasets: tuple[pl.DataFrame, pl.DataFrame], bounded: EngineOutputs
) -> tuple[IntArray, IntArray]:
    y_d, sess_d = _release_outputs(datasets[0], N_E2E, 11, bounded.release)
    y_d1, sess_d1 = _release_outputs(datasets[1], N_E2E, 12, bounded.release)
    for sess in (sess_d, sess_d1):
        assert len(sess.ledger) == N_E2E
        assert all(e.seeded and e.rho == bounded.release.cost.rho for e in sess.ledger)
    return y_d, y_d1


def test_end_to_end_releases_follow_the_audited_mechanism(
    real_audit: RealAudit, end_to_end: tuple[IntArray, IntArray]
) -> None:
    _, evaluation, proj = real_audit
    for e2e, model in zip(end_to_end, evaluation, strict=True):
        pvalue = stats.ks_2samp(proj.of(e2e), model).pvalue
        assert pvalue > ALPHA


def test_end_to_end_audit_stays_below_the_claim(
    bounded: EngineOutputs, real_audit: RealAudit, end_to_end: tuple[IntArray, IntArray]
) -> None:
    # S is chosen on the engine-level calibration sample, independent of these releases.
    engine_result, _, proj = real_audit
    t_d, t_d1 = (proj.of(y) for y in end_to_end)
    delta = _session_delta()
    eps = _epsilon_bounds(t_d, t_d1, np.array([engine_result.threshold]), delta, ALPHA / 2)
    result = AuditResult(
        max(float(eps[engine_result.side][0]), 0.0),
        engine_result.side,
        engine_result.threshold,
        engine_result.calibration_epsilon,
    )
    claimed = _claimed(bounded.release)
    _report(f"real mechanism (Session.release, {N_E2E} per dataset)", claimed, result)
    assert result.epsilon_lb <= claimed


def test_end_to_end_audit_flags_an_under_noised_session(
    monkeypatch: pytest.MonkeyPatch,
    datasets: tuple[pl.DataFrame, pl.DataFrame],
    bounded: EngineOutputs,
) -> None:
    def weak(sigma: float, size: Any = None, *, rng: Any = None) -> IntArray:
        return discrete_gaussian(sigma / 25, size, rng=rng)

    monkeypatch.setattr(privframe.mechanisms.draws, "discrete_gaussian", weak)
    y_d, _ = _release_outputs(datasets[0], N_E2E, 21, bounded.release)
    y_d1, _ = _release_outputs(datasets[1], N_E2E, 22, bounded.release)
    sigmas = np.array([m.sigma_units for m in bounded.release.measurements])
    proj = _projection(bounded, sigmas)
    half = N_E2E // 2
    t_d, t_d1 = proj.of(y_d), proj.of(y_d1)
    result = _audit((t_d[:half], t_d1[:half]), (t_d[half:], t_d1[half:]), _session_delta())
    claimed = _claimed(bounded.release)
    _report(f"Session.release with σ/25 ({N_E2E} per dataset)", claimed, result)
    assert result.epsilon_lb > claimed + 0.5


@pytest.fixture(scope="module")
def newer(datasets: tuple[pl.DataFrame, pl.DataFrame]) -> EngineOutputs:
    return _outputs(datasets, _newer_aggregates())


@pytest.mark.slow
def test_audit_covers_count_distinct_and_std(
    datasets: tuple[pl.DataFrame, pl.DataFrame], newer: EngineOutputs
) -> None:
    kinds = sorted(m.kind for m in newer.release.measurements)
    assert kinds == ["centred_sum", "centred_sum_sq", "count", "distinct"]
    claimed = _claimed(newer.release)
    result, _, _ = _engine_audit(newer, newer.release, seed=404)
    _report("count_distinct + std (engine + noise)", claimed, result)
    assert result.epsilon_lb <= claimed
    # The same audit flags these measurements noised for 25ρ while ρ is charged.
    plan = _query(_session(datasets[0], 0), aggregates=_newer_aggregates()).plan
    broken, _, _ = _engine_audit(newer, plan_release(plan, True, 25 * RHO), seed=405)
    _report("count_distinct + std, noise for 25ρ", claimed, broken)
    assert broken.epsilon_lb > claimed + 0.5


# --------------------------------------------------------------------------- keys and a cast

# As Float64 these 25 keys are all 2^60 (doubles are 256 apart there): a cast of the keys to
# the column's type that merged them would count the row 2^60 in 25 groups, an L2 change of
# 5 where the planner assumes 1 (each row is its own unit).
CAST_KEYS = [2**60 + i for i in range(25)]


def _key_cast_outputs(d: pl.DataFrame, d_prime: pl.DataFrame) -> EngineOutputs:
    exact = []
    for df in (d, d_prime):
        sess = pf.Session(df, None, pf.zCDP(1.0))
        query = sess.query().group_by("g", keys=CAST_KEYS).agg(pf.count())
        release = plan_release(query.plan, False, RHO)
        counts = sess._engine.aggregate(spec_of(sess, query.plan, release))[COUNT].to_numpy()
        exact.append(counts.reshape(1, 1, -1).astype(np.int64))
    return EngineOutputs(release, exact[0], exact[1])


@pytest.mark.parametrize(("dtype", "refused"), [(pl.Int64, False), (pl.Float64, True)], ids=str)
def test_audit_of_keys_the_column_type_could_merge(dtype: pl.DataType, refused: bool) -> None:
    """Refused before anything is charged, or audited below the claim (the exact type)."""
    values = pl.Series([5, 7, 2**60 + 300] * 20 + [2**60 + 3])
    d = pl.DataFrame({"g": values.cast(dtype)})
    d_prime = pl.concat([d, pl.DataFrame({"g": pl.Series([2**60]).cast(dtype)})])
    sess = pf.Session(d_prime, None, pf.zCDP(1.0))
    try:
        sess.query().group_by("g", keys=CAST_KEYS).agg(pf.count()).release(rho=RHO)
    except pf.InvalidArgumentError:
        assert sess.ledger == ()
        assert refused
        return
    outputs = _key_cast_outputs(d, d_prime)
    claimed = _claimed(outputs.release)
    result, _, _ = _engine_audit(outputs, outputs.release, seed=505)
    _report(f"{len(CAST_KEYS)} integer keys on a {dtype} column", claimed, result)
    assert result.epsilon_lb <= claimed
    assert not refused
