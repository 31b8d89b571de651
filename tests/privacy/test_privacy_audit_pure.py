"""Empirical ε audits of pure-DP releases through ``Session.release``, and their L1 sensitivity.

1. **ε audits** (the method of tests/privacy/test_privacy_audit.py, at its
   ALPHA = 1e-3). If a release is ε-DP then for every output set S fixed in
   advance and neighbours D, D' (D' = D plus one unit),
   P[M(D') ∈ S] <= e^ε P[M(D) ∈ S] and the same with D and D' swapped; exact
   one-sided Clopper–Pearson bounds (level ALPHA/2 each) on the two
   probabilities give ε_lb = ln(p̂_lo / p̂_hi), which a correct release exceeds
   with probability at most ALPHA. δ = 0: the claim is the release's ε, as
   charged (``sess.spent``). S is a threshold on a statistic T, the side and
   threshold chosen on the first quarter of the samples (calibration) and
   ε_lb computed on the other three quarters (evaluation).

   The releases run through ``Session.release`` with SeededRandomness streams
   (fixed seeds: every run is the same), over many disjoint copies of each
   data set, so that each release is thousands of independent trials
   (tests/epsilon_audit_setup.py gives the argument, and each audit checks its
   premise on the engine's exact output: every copy's f(D') − f(D) is the
   planned worst case, the L1 sensitivity exactly).

   Statistics, and why the audits are tight. For discrete Laplace noise of
   scale b on a vector shifted by a >= 0, ln P_D'(y)/P_D(y) = Σ (|z| − |z − a|)/b
   with z = y − f(D): T is this log-likelihood ratio (the Neyman–Pearson test).
   Its top value, reached when every coordinate is at or beyond f(D'), has
   probability (1/(1 + p))^coordinates under D' (p = e^(−1/b)) and exactly
   e^(−ε) times that under D, where ε = ‖a‖₁/b: so the best S shows the whole
   ε, and the audits reach ε_lb ≈ 0.9 of the claim.

   * Count: ``bound(max_groups=4, max_rows_per_group=5)`` over 4 public keys at
     ε = 1; the heavy unit adds 5 rows to each key (L1 = W = 20 = b·ε).
   * Sum (with the count, so that the outputs are a bijection of the two
     measurements, the count and the centred sum): ``max_groups=2,
     max_rows_per_group=5, max_rows=6`` over 2 keys, ``sum("amount", (0, 100))``
     at ε = 1; the heavy unit's 2 × 5 rows are cut to 3 + 3 by M, each clipped
     to 100 (L1 = W·(U − L)/2 on the count's and the sum's share of ε).
   * Median: ``max_groups=1, max_rows_per_group=4``, ``median("amount", (0, 100),
     candidates=101)`` at ε = 1, η = ε/(2·½·W) = 0.25. The key holds 40 rows at
     20.5, 12 at 50.5 and 28 at 90.5 (t = 40): under D the candidates 21..50
     have distance 0 and 51..90 distance 12; the heavy unit's 4 rows at U add 2
     to the distance of every candidate up to 50 and take 2 from every one
     above, so the log-likelihood ratio is a step and T is the released median
     itself. Under D the upper candidates have probability p = 0.062, and the
     best S shows ln(e^ε/(p·e^ε + 1 − p)) = 0.90 of the claim (the exponential
     mechanism's worst case needs p → 0, which no sample can measure).
     Choosing a candidate costs about 0.2 ms per key in ``Session.release``,
     so, as in test_privacy_audit.py, the large audit runs the engine and the
     sampler directly: the engine's exact histograms of D and D', the
     distances ``choose_quantiles`` computes from them (captured where it calls
     the sampler) and the sampler ``exponential_choice`` itself, vectorised
     over 200,000 releases per data set (50,000 calibrate, 150,000 evaluate).
     4,000 releases per data set through ``Session.release`` must follow the
     same distribution (two-sample KS at ALPHA) and pass the audit with S
     from the calibration.

   Power: each audit is rerun with a broken mechanism and must flag it, with
   ε_lb above the claim by 0.5, many standard errors: the Laplace scale halved
   (``privframe.mechanisms.draws.discrete_laplace``), the L1 bound W replaced by
   the L2 one sqrt(S) (``Limits.rows``; for k = 4 the count's ε becomes 2), and
   η calibrated for 2ε while ε is charged.

   Sizes and margins: the count's top set has probability 0.069 under D' and
   0.025 under D; with 90,000 evaluated releases ε_lb is pinned to ±0.025 and
   sits about 0.08 (the Clopper–Pearson margin at ALPHA) below the true 1; it
   reaches 0.91, the sum 0.87, the median 0.87 (engine + sampler), while the
   broken variants reach 1.65 to 1.85. The floors on ε_lb (0.8, 0.7, 0.7: the
   audits see most of ε) are more than 4 standard errors below those values.
   ``pytest -s`` prints every audit's numbers.

2. **L1 sensitivity** (the method of test_privacy_audit_sensitivity.py, for
   the L1 bounds that calibrate Laplace noise and a quantile's ε). Over 40
   random configurations (k, m, M, bounds, units or rows, aggregates: count,
   sum, mean, variance, count_distinct, missing values dropped or not, and a
   median over a random grid), for each person X of a random data set D (some
   values missing, some rows in a key that is not public, units over every
   limit) and 3 engine seeds, the engine runs on D and on D − X with the same
   seed, and every Laplace measurement must move by at most its planned L1
   sensitivity, ‖f(D) − f(D − X)‖₁ <= ``m.l1_units`` (grid units), and the
   quantile histograms by at most m rows in a key and W rows over all keys.
   It is exact and deterministic: any violation is a real one. It is not
   vacuous (some person reaches the bound of every kind of measurement), and
   it has power: bounding switched off in the engine, or W replaced by
   sqrt(S), is flagged. A plan-level check beside it compares each Laplace
   measurement's ε, computed exactly from W·R, with its share, including W·R
   above 2^53, where a float rounds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import polars as pl
import pytest
from epsilon_audit_setup import (
    KEY,
    UNIT,
    VALUE,
    FloatArray,
    IntArray,
    Pair,
    Trials,
    background,
    exact,
    exact_measurements,
    frame,
    laplace_llr,
    measured,
    pair,
    report,
    shift,
    split_audit,
    trials,
)
from internals import column_of, spec_of
from privacy import test_privacy_audit as audit
from scipy import stats

import privframe as pf
import privframe.mechanisms.draws
import privframe.mechanisms.quantiles
from privframe.api.query import Query
from privframe.engines.spec import COUNT, DISTINCT
from privframe.mechanisms.exponential import exponential_choice
from privframe.mechanisms.noise import SeededRandomness, discrete_laplace
from privframe.plan.aggregates.quantile import choose_quantiles, histogram_specs
from privframe.plan.limits import Limits
from privframe.plan.planner import ReleasePlan, plan_pure_release
from privframe.plan.release import Pipeline

pytestmark = [
    pytest.mark.statistical,
    pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning"),
]

ALPHA = audit.ALPHA
EPSILON = 1.0
CLAIM = f"ε = {EPSILON:g} (δ = 0)"
BOUNDS = (0.0, 100.0)


def _pure_pair(d: pl.DataFrame, keys: list[str], make_query: Callable[..., Query]) -> Pair:
    """The pair in a PureDP session, each release at ε = 1: Laplace noise, charged 1."""
    made = pair(d, keys, make_query, {"epsilon": EPSILON}, lambda n: pf.PureDP(n * EPSILON))
    assert made.release.family == "laplace"
    assert made.release.cost == pf.PureDP(EPSILON)
    return made


def _llr(
    made: Pair, moved: IntArray, out: tuple[Trials, Trials], base: IntArray
) -> tuple[FloatArray, FloatArray]:
    """T = the Laplace log-likelihood ratio of each copy's released measurements.

    ``base`` is f(D); the scales are those of the pair's (honest) plan.
    """
    scales = np.array([m.scale_units for m in made.release.measurements])
    t_d, t_d1 = (laplace_llr(measured(t, made.release) - base, moved, scales) for t in out)
    return t_d, t_d1


def _base(made: Pair) -> IntArray:
    """f(D) of one copy, the reference the statistic subtracts."""
    return exact_measurements(made, made.d, made.keys)


# --------------------------------------------------------------------------- count

COUNT_KEYS = ["a", "b", "c", "d"]
COUNT_K, COUNT_M = 4, 5
COUNT_COPIES, COUNT_RELEASES = 10_000, 12


def _count_query(sess: pf.Session, keys: list[str]) -> Query:
    return (
        sess.query()
        .bound(max_groups=COUNT_K, max_rows_per_group=COUNT_M)
        .group_by(KEY, keys=keys)
        .agg(pf.count())
    )


@pytest.fixture(scope="module")
def count_pair() -> Pair:
    return _pure_pair(background(COUNT_KEYS, 6, 8, seed=31), COUNT_KEYS, _count_query)


@pytest.fixture(scope="module")
def count_shift(count_pair: Pair) -> IntArray:
    return shift(count_pair, COUNT_COPIES)


def test_the_heavy_unit_moves_the_count_by_exactly_its_l1_sensitivity(
    count_pair: Pair, count_shift: IntArray
) -> None:
    (m,) = count_pair.release.measurements
    assert m.kind == "count"
    assert (count_shift == COUNT_M).all()  # m rows in each of its k keys, in every copy
    assert np.abs(count_shift).sum() == m.l1_units == COUNT_K * COUNT_M
    assert m.scale_units == m.l1_units / EPSILON  # b = W/ε exactly: the release is 1-DP


@pytest.fixture(scope="module")
def count_trials(count_pair: Pair) -> tuple[Trials, Trials]:
    return trials(count_pair, COUNT_COPIES, COUNT_RELEASES, seed=101)


def test_audit_of_a_pure_count_stays_below_its_epsilon_and_is_tight(
    count_pair: Pair, count_shift: IntArray, count_trials: tuple[Trials, Trials]
) -> None:
    result = split_audit(*_llr(count_pair, count_shift, count_trials, _base(count_pair)), 0.0)
    report("pure count (Session.release)", CLAIM, result)
    assert result.epsilon_lb <= EPSILON
    assert result.epsilon_lb >= 0.8 * EPSILON  # the audit sees nearly all of ε


def _halved_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    def weak(scale: float, size: Any = None, *, rng: Any = None) -> IntArray:
        return discrete_laplace(scale / 2, size, rng=rng)

    monkeypatch.setattr(privframe.mechanisms.draws, "discrete_laplace", weak)


def _l1_as_l2(monkeypatch: pytest.MonkeyPatch) -> None:
    # The L1 bound W = k·m replaced by the L2 bound sqrt(S) = sqrt(k)·m: for k = 4, half.
    monkeypatch.setattr(Limits, "rows", property(lambda self: math.sqrt(self.squares)))


@pytest.mark.parametrize(
    ("breaks", "seed"),
    [(_halved_scale, 201), (_l1_as_l2, 203)],
    ids=["Laplace scale halved", "L1 taken as L2"],
)
def test_audit_of_a_pure_count_flags_an_under_noised_release(
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    count_pair: Pair,
    count_shift: IntArray,
    breaks: Callable[[pytest.MonkeyPatch], None],
    seed: int,
) -> None:
    base = _base(count_pair)  # f(D); the statistic keeps the honest plan's scales
    breaks(monkeypatch)
    out = trials(count_pair, COUNT_COPIES, COUNT_RELEASES // 3, seed)  # still charged ε = 1
    result = split_audit(*_llr(count_pair, count_shift, out, base), 0.0)
    report(f"pure count, {request.node.callspec.id}", CLAIM, result)
    assert result.epsilon_lb > EPSILON + 0.5


# --------------------------------------------------------------------------- sum

SUM_KEYS = ["a", "b"]
SUM_K, SUM_M, SUM_BIG_M = 2, 5, 6
SUM_COPIES, SUM_RELEASES = 10_000, 12


def _sum_query(sess: pf.Session, keys: list[str]) -> Query:
    return (
        sess.query()
        .bound(max_groups=SUM_K, max_rows_per_group=SUM_M, max_rows=SUM_BIG_M)
        .group_by(KEY, keys=keys)
        .agg(pf.count(), pf.sum(VALUE, bounds=BOUNDS))
    )


def test_audit_of_a_pure_sum_stays_below_its_epsilon() -> None:
    made = _pure_pair(background(SUM_KEYS, 6, 8, seed=37), SUM_KEYS, _sum_query)
    release = made.release
    assert sorted(m.kind for m in release.measurements) == ["centred_sum", "count"]
    moved = shift(made, SUM_COPIES)
    # M cuts the heavy unit's 2 × 5 rows to 3 + 3, each clipped to U: the L1 shift is W·R.
    for m, by in zip(release.measurements, moved, strict=True):
        assert (by == SUM_BIG_M // SUM_K * m.row_units).all()
        assert np.abs(by).sum() == m.l1_units == SUM_BIG_M * m.row_units
    # The two shares' ε add up to at most the release's.
    assert (
        sum(Fraction(m.l1_units) / Fraction(m.scale_units) for m in release.measurements) <= EPSILON
    )
    out = trials(made, SUM_COPIES, SUM_RELEASES, seed=301)
    result = split_audit(*_llr(made, moved, out, _base(made)), 0.0)
    report("pure count + sum (Session.release)", CLAIM, result)
    assert result.epsilon_lb <= EPSILON
    assert result.epsilon_lb >= 0.7 * EPSILON


# --------------------------------------------------------------------------- median

MEDIAN_KEYS = ["a"]
MEDIAN_M = 4
N_CAL, N_EVAL = 50_000, 150_000  # engine + sampler, per data set
MEDIAN_COPIES, MEDIAN_RELEASES = 2_000, 2  # Session.release: 4,000 per data set


def _median_query(sess: pf.Session, keys: list[str]) -> Query:
    return (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=MEDIAN_M)
        .group_by(KEY, keys=keys)
        .agg(pf.median(VALUE, bounds=BOUNDS, candidates=101))
    )


def _median_background() -> pl.DataFrame:
    """40 rows at 20.5, 12 at 50.5 and 28 at 90.5 (n = 80, t = 40), at most 4 rows per unit."""
    values = [20.5] * 40 + [50.5] * 12 + [90.5] * 28
    units = [i // 4 for i in range(40)] + [10 + i // 3 for i in range(12)]
    units += [20 + i // 4 for i in range(28)]
    # Some units also hold rows of a non-public key, dropped before bounding.
    extra = list(range(0, 27, 3))
    return frame(units + extra, ["a"] * 80 + ["zz"] * len(extra), values + [5.0] * len(extra))


@pytest.fixture(scope="module")
def median_pair() -> Pair:
    return _pure_pair(_median_background(), MEDIAN_KEYS, _median_query)


Sampler = tuple[FloatArray, Callable[[int, int], Fraction]]


def _sampler_inputs(release: ReleasePlan, out: pl.DataFrame) -> Sampler:
    """What ``choose_quantiles`` hands the exponential mechanism's sampler for ``out``.

    The distances (x̂ in floats, and exactly) are captured at its call of
    ``exponential_choice``, so that the simulation uses privframe's own.
    """
    captured: list[Sampler] = []

    def capture(x_hat: FloatArray, exact_x: Callable[[int, int], Fraction], rng: Any) -> IntArray:
        captured.append((x_hat, exact_x))
        return np.zeros(x_hat.shape[0], dtype=np.int64)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(privframe.mechanisms.quantiles, "exponential_choice", capture)
        choose_quantiles(release.quantiles, out, None)
    ((x_hat, exact_x),) = captured
    return x_hat, exact_x


def _simulate(release: ReleasePlan, out: pl.DataFrame, n: int, seed: int) -> FloatArray:
    """N releases of the median of key "a": the real sampler on the real distances."""
    x_hat, exact_x = _sampler_inputs(release, out)
    chosen = exponential_choice(
        np.repeat(x_hat[:1], n, axis=0), lambda _, i: exact_x(0, i), SeededRandomness(seed)
    )
    (qm,) = release.quantiles
    return np.asarray(qm.aggregate.candidate_values())[chosen]


@dataclasses.dataclass(frozen=True)
class MedianAudit:
    result: audit.AuditResult
    evaluation: tuple[FloatArray, FloatArray]


def _median_audit(made: Pair, noise: ReleasePlan, seed: int) -> MedianAudit:
    """Engine + sampler: the exact histograms of D and D', and ``noise``'s η."""
    samples = [
        _simulate(noise, exact(made, df, made.keys, made.release), N_CAL + N_EVAL, seed + i)
        for i, df in enumerate((made.d, made.d_prime))
    ]
    cal = (samples[0][:N_CAL], samples[1][:N_CAL])
    evaluation = (samples[0][N_CAL:], samples[1][N_CAL:])
    return MedianAudit(audit._audit(cal, evaluation, 0.0), evaluation)


@pytest.fixture(scope="module")
def median_audit(median_pair: Pair) -> MedianAudit:
    return _median_audit(median_pair, median_pair.release, seed=401)


def _positions(cell: list[dict[str, int]]) -> dict[int, int]:
    return {pair["position"]: pair["count"] for pair in cell}


def test_the_heavy_unit_adds_m_rows_at_the_upper_bound_to_the_histogram(
    median_pair: Pair,
) -> None:
    (qm,) = median_pair.release.quantiles
    assert qm.eta == 0.25  # ε/(2·½·W), W = 4
    assert qm.exact_share == Fraction(EPSILON)
    assert not median_pair.release.measurements
    (name,) = [h.name for h in histogram_specs(median_pair.release.quantiles).values()]
    d, d1 = (
        _positions(exact(median_pair, df, MEDIAN_KEYS, median_pair.release)[name][0])
        for df in (median_pair.d, median_pair.d_prime)
    )
    top = 2 * (qm.aggregate.candidates - 1)  # the position of the candidate U
    assert {p: d1.get(p, 0) - d.get(p, 0) for p in {*d, *d1}} == {**dict.fromkeys(d, 0), top: 4}


def test_audit_of_a_pure_median_stays_below_its_epsilon_and_is_tight(
    median_audit: MedianAudit,
) -> None:
    result = median_audit.result
    report("pure median (engine + sampler)", CLAIM, result)
    assert result.epsilon_lb <= EPSILON
    assert result.epsilon_lb >= 0.7 * EPSILON


def test_audit_of_a_pure_median_flags_eta_for_twice_epsilon(median_pair: Pair) -> None:
    sess = pf.Session(median_pair.d, UNIT, pf.PureDP(EPSILON))
    plan = _median_query(sess, MEDIAN_KEYS).plan
    greedy = plan_pure_release(plan, True, 2 * EPSILON)  # η for 2ε, while ε is charged
    assert greedy.quantiles[0].eta == 2 * median_pair.release.quantiles[0].eta
    result = _median_audit(median_pair, greedy, seed=403).result
    report("pure median, eta for 2ε (engine + sampler)", CLAIM, result)
    assert result.epsilon_lb > EPSILON + 0.5


@pytest.fixture(scope="module")
def median_end_to_end(median_pair: Pair) -> tuple[FloatArray, FloatArray]:
    out = trials(median_pair, MEDIAN_COPIES, MEDIAN_RELEASES, seed=411)
    t_d, t_d1 = (t.outputs[f"{VALUE}_median"][:, 0].astype(np.float64) for t in out)
    return t_d, t_d1


def test_released_medians_follow_the_audited_mechanism(
    median_audit: MedianAudit, median_end_to_end: tuple[FloatArray, FloatArray]
) -> None:
    # Two-sample KS at ALPHA (conservative on discrete values: ties only lower D).
    for e2e, model in zip(median_end_to_end, median_audit.evaluation, strict=True):
        assert stats.ks_2samp(e2e, model).pvalue > ALPHA


def test_end_to_end_audit_of_a_pure_median_stays_below_its_epsilon(
    median_audit: MedianAudit, median_end_to_end: tuple[FloatArray, FloatArray]
) -> None:
    # S is the engine-level calibration's, independent of these releases.
    chosen = median_audit.result
    eps = audit._epsilon_bounds(*median_end_to_end, np.array([chosen.threshold]), 0.0, ALPHA / 2)
    result = dataclasses.replace(chosen, epsilon_lb=max(float(eps[chosen.side][0]), 0.0))
    n = MEDIAN_COPIES * MEDIAN_RELEASES
    report(f"pure median (Session.release, {n} per data set)", CLAIM, result)
    assert result.epsilon_lb <= EPSILON


# --------------------------------------------------------------------------- L1 sensitivity

L1_SEEDS = [int(w) for w in SeededRandomness(17).words(3)]
L1_CONFIGS = 40
L1_KEYS = ["a", "b", "c", "d", "e"]


@dataclasses.dataclass(frozen=True)
class Config:
    """A random query and data set: contribution limits, bounds, aggregates, units or rows."""

    frame: pl.DataFrame
    unit: str | None
    keys: list[str]
    k: int
    m: int
    big_m: int | None
    aggregates: tuple[Any, ...]

    def query(self, sess: pf.Session) -> Query:
        start = sess.query()
        if self.unit is not None:
            start = start.bound(max_groups=self.k, max_rows_per_group=self.m, max_rows=self.big_m)
        return start.group_by(KEY, keys=self.keys).agg(*self.aggregates)


def _random_bounds(gen: np.random.Generator) -> tuple[float, float]:
    lower = float(np.round(gen.choice([0.0, -1.0, 1.0]) * gen.uniform(0, 200), 2))
    return lower, float(np.round(lower + gen.uniform(0.5, 300), 2))


def _random_aggregates(gen: np.random.Generator, has_unit: bool) -> tuple[Any, ...]:
    lo, hi = _random_bounds(gen)
    missing: Literal["drop", "midpoint"] = "drop" if gen.random() < 0.5 else "midpoint"
    options = [
        pf.count(),
        pf.sum(VALUE, bounds=(lo, hi), missing=missing),
        pf.mean(VALUE, bounds=(lo, hi), missing=missing),
        pf.var(VALUE, bounds=(lo, hi), missing=missing),
        pf.median(VALUE, bounds=(lo, hi), candidates=int(gen.integers(2, 60))),
    ]
    if has_unit:
        options.append(pf.count_distinct())
    chosen = gen.choice(len(options), size=int(gen.integers(1, 4)), replace=False)
    return tuple(options[i] for i in sorted(chosen))


def _random_config(i: int) -> Config:
    gen = np.random.default_rng(7_000 + i)  # generates the configuration and data, not noise
    has_unit = i % 5 != 4  # every fifth: each row is its own unit
    k, m = int(gen.integers(1, 5)), int(gen.integers(1, 5))
    big_m = int(gen.integers(1, k * m + 3)) if gen.random() < 0.5 else None
    keys = sorted(gen.choice(L1_KEYS, size=int(gen.integers(2, 6)), replace=False).tolist())
    lo, hi = _random_bounds(gen)
    users: list[int] = []
    regions: list[str] = []
    amounts: list[float] = []
    for unit in range(int(gen.integers(4, 9))):
        # Up to k + 3 keys (zz, not public, among them), up to m + 3 rows in each.
        pool = [*keys, "zz"]
        for key in gen.choice(
            pool, size=int(gen.integers(1, min(k + 3, len(pool)) + 1)), replace=False
        ):
            n = int(gen.integers(1, m + 4))
            users += [unit] * n
            regions += [str(key)] * n
            width = hi - lo
            amounts += np.round(gen.uniform(lo - width / 2, hi + width / 2, n), 3).tolist()
    values: list[float | None] = list(amounts)
    for row in np.flatnonzero(gen.random(len(values)) < 0.1):
        values[row] = None if row % 2 else math.nan
    data = frame(users, regions, values)
    if not has_unit:
        data = data.drop(UNIT)
    return Config(
        data, UNIT if has_unit else None, keys, k, m, big_m, _random_aggregates(gen, has_unit)
    )


CONFIGS = [_random_config(i) for i in range(L1_CONFIGS)]


@dataclasses.dataclass(frozen=True)
class Moves:
    """Over one configuration: every violation, and the largest L1 move over its bound."""

    violations: list[str]
    largest: dict[str, float]  # by measurement kind, and "histogram"


def _exact(cfg: Config, df: pl.DataFrame, seed: int) -> tuple[ReleasePlan, pl.DataFrame]:
    sess = pf.Session(df, cfg.unit, pf.PureDP(EPSILON))
    query = cfg.query(sess)
    release = plan_pure_release(query.plan, cfg.unit is not None, EPSILON)
    spec = dataclasses.replace(spec_of(sess, query.plan, release), seed=seed)
    return release, sess._engine.aggregate(spec)


def _people(cfg: Config) -> list[list[int]]:
    if cfg.unit is None:
        return [[i] for i in range(cfg.frame.height)]
    rows = cfg.frame.with_row_index("row").group_by(cfg.unit, maintain_order=True).agg("row")
    return rows["row"].to_list()


def _moves(cfg: Config) -> Moves:
    found: list[str] = []
    largest: dict[str, float] = {}
    for seed in L1_SEEDS:
        release, full = _exact(cfg, cfg.frame, seed)
        limits = release.limits
        for person, rows in enumerate(_people(cfg)):
            keep = ~pl.int_range(pl.len()).is_in(rows)
            _, less = _exact(cfg, cfg.frame.filter(keep), seed)
            where = f"person {person}, seed {seed}"
            for m in release.measurements:
                assert m.family == "laplace"
                assert m.sensitivity_units == m.l1_units
                name = {"count": COUNT, "distinct": DISTINCT}.get(m.kind) or column_of(release, m)
                moved = int((full[name] - less[name]).abs().sum())  # exact integers
                largest[m.kind] = max(largest.get(m.kind, 0.0), moved / m.l1_units)
                if moved > m.l1_units:
                    found.append(f"{where}: {m.key} moved {moved} > L1 {m.l1_units:g}")
            own = set(cfg.frame[rows][KEY].to_list())
            for h in histogram_specs(release.quantiles).values():
                total = 0
                for key, before, after in zip(
                    full[KEY].to_list(), full[h.name].to_list(), less[h.name].to_list(), strict=True
                ):
                    b, a = _positions(before), _positions(after)
                    moved = sum(abs(b.get(p, 0) - a.get(p, 0)) for p in {*b, *a})
                    total += moved
                    allowed = limits.max_rows_per_group if key in own else 0
                    if moved > allowed:
                        found.append(f"{where}: histogram of {key!r} moved {moved} > {allowed}")
                largest["histogram"] = max(largest.get("histogram", 0.0), total / limits.rows)
                if total > limits.rows:
                    found.append(f"{where}: histograms moved {total} rows > W = {limits.rows}")
    return Moves(found, largest)


# The L1 audit runs the engine about 3,000 times (9 s): among the slowest tests.


@pytest.fixture(scope="module")
def l1_moves() -> list[Moves]:
    return [_moves(cfg) for cfg in CONFIGS]


@pytest.mark.slow
def test_removing_a_person_moves_no_laplace_measurement_by_more_than_its_l1_bound(
    l1_moves: list[Moves],
) -> None:
    assert [v for moves in l1_moves for v in moves.violations] == []


@pytest.mark.slow
def test_the_l1_audit_sees_every_measurement_kind_reach_its_bound(l1_moves: list[Moves]) -> None:
    # Not vacuous: some person moves each kind of measurement by its whole L1 bound
    # (the count and distinct counts exactly; a sum to within its clipping and rounding).
    reached: dict[str, float] = {}
    for moves in l1_moves:
        for kind, ratio in moves.largest.items():
            reached[kind] = max(reached.get(kind, 0.0), ratio)
    assert set(reached) == {
        "count",
        "values",
        "distinct",
        "centred_sum",
        "centred_sum_sq",
        "histogram",
    }
    assert reached["count"] == reached["distinct"] == reached["values"] == 1.0
    assert reached["histogram"] == 1.0
    assert min(reached.values()) > 0.5


def _unbounded(monkeypatch: pytest.MonkeyPatch) -> None:
    planned_spec = Pipeline.spec

    def unbounded(self: Pipeline, *args: Any, **kwargs: Any) -> object:
        spec = planned_spec(self, *args, **kwargs)
        return dataclasses.replace(spec, max_groups=None, max_rows_per_group=10**9, max_rows=None)

    monkeypatch.setattr(Pipeline, "spec", unbounded)


def _w_as_sqrt_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Limits, "rows", property(lambda self: math.isqrt(self.squares)))


@pytest.mark.slow
@pytest.mark.parametrize(
    "breaks", [_unbounded, _w_as_sqrt_s], ids=["bounding off", "W taken as sqrt(S)"]
)
def test_the_l1_audit_flags_an_engine_or_planner_that_breaks_the_bound(
    monkeypatch: pytest.MonkeyPatch, breaks: Callable[[pytest.MonkeyPatch], None]
) -> None:
    breaks(monkeypatch)
    flagged = [i for i, cfg in enumerate(CONFIGS[:12]) if _moves(cfg).violations]
    assert len(flagged) >= 3, flagged


# The measurement's own ε, with the exact L1 bound W·R (grid units), against its share.
# W·R is at most about 2^38.5·ε (the grid coarsens with the noise), so it passes 2^53, where
# float(W·R) can round down, only at ε above about 5·10^4: a sum at ε = 10^5 with M = 10^7 + 1.
@pytest.mark.parametrize(
    ("epsilon", "bounds", "max_rows"),
    [
        (1.0, (0.0, 100.0), 12),
        (0.01, (-1.3, 4.1), 10**6),
        (1e5, (0.0, 5.7), 10**7 + 1),
        # W·R above 2^53: the L1 sensitivity is rounded up to a float, never down.
        (1e5, (0.0, 5.3), 10**7 + 1),
    ],
)
def test_each_laplace_measurement_costs_at_most_its_share_of_epsilon_exactly(
    epsilon: float, bounds: tuple[float, float], max_rows: int
) -> None:
    sess = pf.Session(frame([1], ["a"], [1.0]), UNIT, pf.PureDP(epsilon))
    query = sess.query().bound(max_groups=1, max_rows=max_rows).agg(pf.sum(VALUE, bounds=bounds))
    release = query.explain(epsilon=epsilon).plan
    for m in release.measurements:
        l1 = release.limits.rows * m.row_units  # exact: W rows, each moving it by R
        assert Fraction(l1) / Fraction(m.scale_units) <= m.exact_share, m.key
