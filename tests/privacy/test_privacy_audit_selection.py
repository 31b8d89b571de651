"""Empirical privacy audit of private key selection (``group_by`` without ``keys=``).

The audit of ``tests/privacy/test_privacy_audit.py`` (docs/privacy.md §5), extended to
releases that choose their groups from the data (docs/privacy.md §6). If a
release is (ε, δ)-DP then for every output set S fixed in advance and every
pair of neighbours, P[M(D') ∈ S] <= e^ε P[M(D) ∈ S] + δ. Exact one-sided
Clopper–Pearson bounds on the two probabilities turn samples into a lower
bound on what the mechanism really spends; a correct release never exceeds
its claim, except with the probability that the bounds fail.

Significance: fixed at ALPHA = 1e-3 for every assertion. Each assertion fails
for a correct mechanism with probability at most 1e-3 (the ε audit splits
ALPHA over its two bounds, ALPHA/2 each). All randomness comes from fixed
SeededRandomness streams, so every run is reproducible.

1. The δ part: a group only the added unit holds. D' holds 20,000 units, each
   alone in k = 2 groups of its own, next to two big groups; D is D' without
   one of them, u. S = "one of u's groups is released". Under D those groups
   do not exist, so P[M(D) ∈ S] = 0 exactly and the claim reduces to
   P[M(D') ∈ S] <= δ. Each lonely unit is an independent trial of that pair
   (its groups' counts and noise involve nobody else), so one real
   ``Session.release`` gives 20,000 trials. The selection's δ is 1e-2 at
   ρ = 0.1 (τ = 13 at σ = 4.47: the exact survival rate is 0.99·δ, so the
   claim is tight). The Clopper–Pearson lower bound on P[M(D') ∈ S] must not
   exceed the δ charged for selection (the full statement allows
   δ_selection + the reporting δ; the test uses the stricter one). The same
   audit flags thresholds that are too low, patched in at the planner's seam
   (``privframe.plan.planner.discrete_threshold``): τ = 2, the threshold for
   δ = 0.5, and τ − 1, which is what computing δ from P[Z > τ − 1] while
   comparing with >= gives (the off-by-one docs/privacy.md §6 warns of; here
   it equals not dividing δ among the k groups).

2. The ε part: a group that exists in both datasets. D is a group g of 42
   units (1–3 rows each, amounts in [0, 150]) beside two big groups; D' adds
   a unit u with 50 rows at amount 250 to g. The query is
   ``bound(max_groups=1, max_rows_per_group=5)``, ``group_by("g")``,
   ``agg(count(), sum("amount", bounds=(0, 100)))`` at ρ = 0.02 with a
   selection δ of 1e-6, split equally three ways (τ = 43, so g is kept about
   half the time under D). u changes g's distinct-unit count by 1, its count
   by 5 and its sum by 500: each the planner's sensitivity, the tight worst
   case. The statistic is T = <w, Y − f(D)> (w = (f(D') − f(D))/σ², the
   released count and sum in grid units) when g is kept, and a sentinel
   below every T when it is dropped, so S = {T > t} or {T <= t} covers
   "kept" and "dropped" as well as thresholds on the released values. t and
   the side are chosen on 50,000 calibration releases per dataset, then
   ε_lb is computed on 150,000 independent ones with δ = the release's total
   δ (reporting 1e-6 + selection 1e-6). The claimed ε is privframe's own:
   ``zCDP(ρ, δ_selection).epsilon(δ_reporting + δ_selection)`` = 0.90, which
   the session's report states too. Noise calibrated for 25ρ while charging ρ
   is flagged.

   Those releases are simulated as ``Session._release`` computes them: the
   real engine on the real spec gives g's exact distinct count, count and
   sum (the same for every engine seed), then ``discrete_gaussian`` at the
   planner's σ: kept iff distinct + Z >= τ, then count and sum noise. A real
   ``Session.release`` over 3,000 identical copies of g (3,000 independent
   trials in one release) must follow that distribution (two-sample KS at
   ALPHA) and pass the same audit with S from the simulated calibration.

``pytest -s`` prints every audit's numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import polars as pl
import pytest
import test_privacy_audit as audit
from internals import column_of, spec_of
from scipy import stats

import privframe as pf
import privframe.plan.planner
from privframe.accounting.budgets import zCDP
from privframe.api.query import Query
from privframe.engines.spec import COUNT, DISTINCT
from privframe.mechanisms.noise import SeededRandomness, discrete_gaussian
from privframe.mechanisms.selection import (
    discrete_selection_delta,
    discrete_tail,
    discrete_threshold,
)
from privframe.plan.planner import ReleasePlan, plan_release

pytestmark = pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning")

ALPHA = audit.ALPHA

# The δ part: many units, each alone in RARE_K groups of its own.
RARE_K = 2
RARE_UNITS = 20_000
RARE_RHO = 0.1
RARE_DELTA = 1e-2

# The ε part: one group g that exists with and without the added unit.
RHO = 0.02
SEL_DELTA = 1e-6
M = 5
BOUNDS = (0.0, 100.0)
G_UNITS = 42
U_ROWS = 50
N_CAL = 50_000
N_EVAL = 150_000
N_COPIES = 3_000
DROPPED = -1e9  # T of a release in which g is not selected: below every kept T

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


# --------------------------------------------------------------------------- statistics


# The Clopper–Pearson bounds, the ε lower bounds and the choice of S are the main
# audit's (tests/privacy/test_privacy_audit.py), at the same ALPHA.


@dataclasses.dataclass(frozen=True)
class EpsAudit:
    epsilon_lb: float
    side: str
    cut: float


def _choose(cal: tuple[FloatArray, FloatArray], delta: float) -> EpsAudit:
    """The side and cut maximising ε_lb on the calibration sample (ε_lb there)."""
    side, cut, epsilon_lb = audit._choose_set(*cal, delta)
    return EpsAudit(epsilon_lb, side, cut)


def _evaluate(chosen: EpsAudit, evaluation: tuple[FloatArray, FloatArray], delta: float) -> float:
    lbs = audit._epsilon_bounds(*evaluation, np.array([chosen.cut]), delta, ALPHA / 2)
    return max(float(lbs[chosen.side][0]), 0.0)


def _reporting_delta() -> float:
    return pf.Session(pl.DataFrame({"u": [0]}), "u", pf.zCDP(1.0)).report().delta


# --------------------------------------------------------------------------- 1. the δ part


def _rare_data(lonely: int = RARE_UNITS) -> pl.DataFrame:
    """Two groups of 200 units, and ``lonely`` units alone in RARE_K groups each (2 rows each)."""
    units = list(range(400))
    groups = ["a"] * 200 + ["b"] * 200
    for i in range(lonely):
        for j in range(RARE_K):
            units += [10_000 + i] * 2
            groups += [f"lonely{i:05d}_{j}"] * 2
    return pl.DataFrame({"u": units, "g": groups})


def _rare_query(sess: pf.Session) -> Query:
    return sess.query().bound(max_groups=RARE_K, max_rows_per_group=1).group_by("g").agg(pf.count())


@dataclasses.dataclass(frozen=True)
class RareAudit:
    """One release on D': how many lonely units had a ``what`` released, and the claim."""

    hits: int
    threshold: int
    sigma: float
    delta_selection: float  # δ charged for selection (the ledger's)
    delta_total: float  # the release's whole δ: reporting δ + δ_selection
    units: int = RARE_UNITS
    what: str = "group"

    @property
    def lower(self) -> float:
        return float(audit._cp_lower(self.hits, self.units, ALPHA))

    def report(self, name: str) -> None:
        print(
            f"\n{name}: τ = {self.threshold} (σ = {self.sigma:.4g}); {self.hits}/{self.units} "
            f"lonely units had a {self.what} released; P'(S) >= {self.lower:.5f} "
            f"(CP lower, α = {ALPHA:g}); claimed δ_selection = {self.delta_selection:g}, "
            f"δ total = {self.delta_total:.6g}"
        )


def _rare_audit(seed: int) -> RareAudit:
    sess = pf.Session(_rare_data(), "u", pf.zCDP(1.0, delta=RARE_DELTA), rng=SeededRandomness(seed))
    query = _rare_query(sess)
    selection = query.explain(rho=RARE_RHO).plan.selection  # public: spends nothing
    assert selection is not None
    result = query.release(rho=RARE_RHO)  # spends all the session's δ
    assert isinstance(result, pl.DataFrame)
    assert {"a", "b"} <= set(result["g"].to_list())  # 200 units: far above τ
    owners = result["g"].str.extract(r"^lonely(\d+)_", 1).drop_nulls()
    (entry,) = sess.ledger
    report = sess.report()
    assert entry.description["selection"]["threshold"] == selection.threshold
    return RareAudit(
        hits=owners.n_unique(),
        threshold=selection.threshold,
        sigma=selection.measurement.sigma_units,
        delta_selection=entry.delta,
        delta_total=report.delta + report.spent_delta,
    )


def test_the_rare_group_premise_holds() -> None:
    """Each lonely group has one unit; without the lonely units those keys never exist."""
    for lonely in (RARE_UNITS, 0):
        sess = pf.Session(_rare_data(lonely), "u", pf.zCDP(1.0, delta=RARE_DELTA))
        plan = _rare_query(sess).plan
        release = plan_release(plan, True, RARE_RHO, None, RARE_DELTA)
        exact = sess._engine.aggregate(spec_of(sess, plan, release))
        rare = exact.filter(pl.col("g").str.starts_with("lonely"))
        assert rare.height == RARE_K * lonely
        assert (rare[DISTINCT] == 1).all()


@pytest.mark.statistical
def test_a_group_only_the_added_unit_holds_appears_at_most_with_the_charged_delta() -> None:
    audit = _rare_audit(seed=31)
    audit.report("real selection")
    sigma = audit.sigma
    assert audit.threshold == discrete_threshold(sigma, RARE_K, RARE_DELTA)
    assert audit.delta_selection == RARE_DELTA
    exact = discrete_selection_delta(sigma, RARE_K, audit.threshold)
    assert 0.9 * RARE_DELTA <= exact <= RARE_DELTA  # a tight claim, so the audit can bite
    assert audit.lower <= audit.delta_selection
    # The measured rate is the computed one (two-sided, same α).
    assert stats.binomtest(audit.hits, RARE_UNITS, exact).pvalue > ALPHA


def _threshold_two(sigma: float, k: int, delta: float) -> int:
    return 2


def _threshold_for_half(sigma: float, k: int, delta: float) -> int:
    return discrete_threshold(sigma, k, 0.5)


def _threshold_off_by_one(sigma: float, k: int, delta: float) -> int:
    # δ from P[Z > τ − 1] while comparing with >=: the mass at τ − 1 is not charged.
    return discrete_threshold(sigma, k, delta) - 1


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("name", "threshold", "seed"),
    [
        ("τ = 2", _threshold_two, 41),
        ("threshold for δ = 0.5", _threshold_for_half, 42),
        ("τ − 1 (tail P[Z > τ − 1])", _threshold_off_by_one, 43),
    ],
)
def test_the_rare_group_audit_flags_a_threshold_that_is_too_low(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    threshold: Callable[[float, int, float], int],
    seed: int,
) -> None:
    monkeypatch.setattr(privframe.plan.planner, "discrete_threshold", threshold)
    audit = _rare_audit(seed)
    audit.report(f"broken selection ({name})")
    assert audit.threshold == threshold(audit.sigma, RARE_K, RARE_DELTA)  # the seam is live
    assert audit.delta_selection == RARE_DELTA  # still charged as if correct
    assert audit.lower > audit.delta_total


# --------------------------------------------------------------------------- 2. the ε part


def _group_rows() -> tuple[list[int], list[float]]:
    """G_UNITS units with 1–3 rows each (<= M: the bounded sum is the same for any seed)."""
    gen = np.random.default_rng(20240612)  # generates the data, not the noise
    units: list[int] = []
    amounts: list[float] = []
    for unit in range(G_UNITS):
        n = int(gen.integers(1, 4))
        units += [unit] * n
        amounts += np.round(gen.uniform(0, 150, n), 2).tolist()
    return units, amounts


def _eps_data(copies: int, with_u: bool) -> pl.DataFrame:
    """``copies`` identical groups g0000, ... (each with its own u in D'), and two big groups."""
    base_units, base_amounts = _group_rows()
    units = list(range(900_000, 900_200))
    groups = ["big1"] * 100 + ["big2"] * 100
    amounts = [10.0] * 200
    for c in range(copies):
        units += [1000 * c + u for u in base_units]
        groups += [f"g{c:04d}"] * len(base_units)
        amounts += base_amounts
        if with_u:
            units += [1000 * c + 999] * U_ROWS
            groups += [f"g{c:04d}"] * U_ROWS
            amounts += [250.0] * U_ROWS
    return pl.DataFrame({"u": units, "g": groups, "amount": amounts})


def _eps_query(sess: pf.Session) -> Query:
    return (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=M)
        .group_by("g")
        .agg(pf.count(), pf.sum("amount", bounds=BOUNDS))
    )


def _eps_plan(rho: float = RHO) -> ReleasePlan:
    sess = pf.Session(_eps_data(1, False), "u", pf.zCDP(1.0, delta=SEL_DELTA))
    return plan_release(_eps_query(sess).plan, True, rho, None, SEL_DELTA)


def _exact(df: pl.DataFrame, release: ReleasePlan) -> IntArray:
    """g0000's exact (distinct units, count, centred sum in grid units), equal over seeds."""
    sess = pf.Session(df, "u", pf.zCDP(1.0, delta=SEL_DELTA))
    spec = spec_of(sess, _eps_query(sess).plan, release)
    columns = [DISTINCT, COUNT, column_of(release, release.measurements[1])]
    rows = []
    for seed in (1, 2, 3):
        exact = sess._engine.aggregate(dataclasses.replace(spec, seed=seed))
        assert exact["g"].to_list() == ["big1", "big2", "g0000"]
        rows.append([int(exact[c][2]) for c in columns])
    assert rows[0] == rows[1] == rows[2]
    return np.array(rows[0], dtype=np.int64)


@dataclasses.dataclass(frozen=True)
class Neighbours:
    release: ReleasePlan
    f_d: IntArray  # (distinct, count, centred sum units) of g in D
    f_d1: IntArray  # the same in D'

    def weights(self) -> FloatArray:
        sigmas = np.array([m.sigma_units for m in self.release.measurements])
        return (self.f_d1 - self.f_d)[1:] / np.square(sigmas)

    def statistic(self, kept: npt.NDArray[np.bool_], values: IntArray) -> FloatArray:
        """T for released (count, centred sum units) rows; DROPPED where g was not kept."""
        t = (values - self.f_d[1:]).astype(np.float64) @ self.weights()
        return np.where(kept, t, DROPPED)


@pytest.fixture(scope="module")
def neighbours() -> Neighbours:
    release = _eps_plan()
    assert [m.kind for m in release.measurements] == ["count", "centred_sum"]
    return Neighbours(
        release, _exact(_eps_data(1, False), release), _exact(_eps_data(1, True), release)
    )


def test_the_added_unit_moves_every_measurement_by_its_sensitivity(
    neighbours: Neighbours,
) -> None:
    release = neighbours.release
    assert release.selection is not None
    diff = neighbours.f_d1 - neighbours.f_d
    l2 = [release.selection.measurement.l2_units] + [m.l2_units for m in release.measurements]
    centred = release.measurements[1]
    assert diff.tolist() == [1, M, M * (centred.upper_units - centred.centre_units)]
    assert diff.astype(np.float64).tolist() == pytest.approx(l2)
    # Under D, g sits near the threshold: the selection itself is informative.
    assert 0.2 < _kept_probability(release, neighbours.f_d) < 0.8


def _kept_probability(release: ReleasePlan, exact: IntArray) -> float:
    """P[distinct + Z >= τ]: the chance that g is selected."""
    sel = release.selection
    assert sel is not None
    return discrete_tail(sel.measurement.sigma_units, sel.threshold - int(exact[0]))


def _simulate(
    nb: Neighbours, exact: IntArray, noise: ReleasePlan, n: int, rng: SeededRandomness
) -> FloatArray:
    """T of n releases as Session._release makes them, at ``noise``'s σ and τ."""
    sel = noise.selection
    assert sel is not None
    kept = exact[0] + discrete_gaussian(sel.measurement.sigma_units, n, rng=rng) >= sel.threshold
    values = np.stack(
        [
            v + discrete_gaussian(m.sigma_units, n, rng=rng)
            for v, m in zip(exact[1:], noise.measurements, strict=True)
        ],
        axis=1,
    )
    return nb.statistic(kept, values)


@dataclasses.dataclass(frozen=True)
class Simulated:
    chosen: EpsAudit
    evaluation: tuple[FloatArray, FloatArray]
    epsilon_lb: float


def _claimed(release: ReleasePlan) -> tuple[float, float]:
    """(ε, total δ) that privframe states for the release."""
    delta = _reporting_delta() + release.cost.delta
    return release.cost.epsilon(delta), delta


def _simulated_audit(nb: Neighbours, noise: ReleasePlan, seed: int) -> Simulated:
    rng = SeededRandomness(seed)
    n = N_CAL + N_EVAL
    t_d, t_d1 = (_simulate(nb, exact, noise, n, rng) for exact in (nb.f_d, nb.f_d1))
    _, delta = _claimed(nb.release)
    chosen = _choose((t_d[:N_CAL], t_d1[:N_CAL]), delta)
    evaluation = (t_d[N_CAL:], t_d1[N_CAL:])
    return Simulated(chosen, evaluation, _evaluate(chosen, evaluation, delta))


def _print_eps(name: str, nb: Neighbours, epsilon_lb: float, chosen: EpsAudit) -> None:
    claimed, delta = _claimed(nb.release)
    where = "g dropped" if chosen.cut == DROPPED else f"{chosen.cut:.4g}"
    sign = ">" if chosen.side == "high" else "<="
    print(
        f"\n{name}: claimed ε = {claimed:.4f} at δ = {delta:g}; ε_lb = {epsilon_lb:.4f} "
        f"(S = T {sign} {where}; calibration ε_lb = {chosen.epsilon_lb:.4f})"
    )


@pytest.fixture(scope="module")
def simulated(neighbours: Neighbours) -> Simulated:
    return _simulated_audit(neighbours, neighbours.release, seed=501)


@pytest.mark.statistical
def test_an_existing_group_leaks_no_more_than_the_claimed_epsilon(
    neighbours: Neighbours, simulated: Simulated
) -> None:
    claimed, _ = _claimed(neighbours.release)
    assert claimed == zCDP(RHO, SEL_DELTA).epsilon(_reporting_delta() + SEL_DELTA)
    assert 0.5 <= claimed <= 1.0  # a small claim, so a broken variant stands out
    _print_eps(
        "selection + count + sum (simulated)", neighbours, simulated.epsilon_lb, simulated.chosen
    )
    assert simulated.epsilon_lb <= claimed


@pytest.mark.statistical
def test_the_existing_group_audit_flags_noise_for_25_times_the_charged_rho(
    neighbours: Neighbours,
) -> None:
    broken = _eps_plan(25 * RHO)  # σ 5× too small (τ follows it), while ρ is charged
    for b, real in zip(broken.measurements, neighbours.release.measurements, strict=True):
        assert b.sigma_units == pytest.approx(real.sigma_units / 5, rel=1e-6)
    result = _simulated_audit(neighbours, broken, seed=502)
    _print_eps("noise for 25ρ (simulated)", neighbours, result.epsilon_lb, result.chosen)
    claimed, _ = _claimed(neighbours.release)
    assert result.epsilon_lb > claimed + 0.5


# --------------------------------------------------------------------------- end to end


def _copies_statistic(nb: Neighbours, with_u: bool, seed: int) -> tuple[FloatArray, pf.Session]:
    """T of each of N_COPIES copies of g in one real Session.release: independent trials."""
    sess = pf.Session(
        _eps_data(N_COPIES, with_u), "u", pf.zCDP(RHO, delta=SEL_DELTA), rng=SeededRandomness(seed)
    )
    # Unclamped, (count, sum) is a bijection of the measurements (count, centred sum).
    result = _eps_query(sess).release(rho=RHO, clamp=False)
    assert isinstance(result, pl.DataFrame)
    centred = nb.release.measurements[1]
    kept = pl.DataFrame({"g": [f"g{c:04d}" for c in range(N_COPIES)]}).join(
        result.with_columns(pl.lit(True).alias("kept")), on="g", how="left"
    )
    count = kept["count"].fill_null(0).to_numpy()
    units = np.ldexp(kept["amount_sum"].fill_null(0.0).to_numpy(), centred.grid_exponent)
    units -= centred.centre_units * count.astype(np.float64)
    assert (units == np.rint(units)).all()  # released sums are grid points
    values = np.stack([count, np.rint(units)], axis=1)
    return nb.statistic(kept["kept"].fill_null(False).to_numpy(), values.astype(np.int64)), sess


@pytest.fixture(scope="module")
def end_to_end(neighbours: Neighbours) -> tuple[FloatArray, FloatArray]:
    claimed, delta = _claimed(neighbours.release)
    out = []
    for with_u, seed in ((False, 601), (True, 602)):
        t, sess = _copies_statistic(neighbours, with_u, seed)
        (entry,) = sess.ledger
        assert entry.seeded
        assert entry.description["selection"]["threshold"] == neighbours.release.selection.threshold
        report = sess.report()  # the session states the same (ε, δ) as the audit's claim
        assert (report.spent_rho, report.spent_delta) == (RHO, SEL_DELTA)
        assert report.spent_epsilon == claimed
        assert report.delta + report.spent_delta == delta
        out.append(t)
    return out[0], out[1]


@pytest.mark.statistical
def test_end_to_end_releases_follow_the_simulated_mechanism(
    neighbours: Neighbours, simulated: Simulated, end_to_end: tuple[FloatArray, FloatArray]
) -> None:
    exacts = (neighbours.f_d, neighbours.f_d1)
    for e2e, model, exact in zip(end_to_end, simulated.evaluation, exacts, strict=True):
        ks = stats.ks_2samp(e2e, model).pvalue
        # The selection step alone: g kept at exactly the computed rate.
        p_kept = _kept_probability(neighbours.release, exact)
        binom = stats.binomtest(int((e2e != DROPPED).sum()), e2e.size, p_kept).pvalue
        print(f"\nend to end vs simulated: KS p = {ks:.3f}; kept-rate p = {binom:.3f}")
        assert ks > ALPHA
        assert binom > ALPHA


@pytest.mark.statistical
def test_end_to_end_audit_stays_below_the_claim(
    neighbours: Neighbours, simulated: Simulated, end_to_end: tuple[FloatArray, FloatArray]
) -> None:
    # S comes from the simulated calibration sample, independent of these releases.
    claimed, delta = _claimed(neighbours.release)
    epsilon_lb = _evaluate(simulated.chosen, end_to_end, delta)
    _print_eps(
        f"Session.release ({N_COPIES} copies of g)", neighbours, epsilon_lb, simulated.chosen
    )
    assert epsilon_lb <= claimed
