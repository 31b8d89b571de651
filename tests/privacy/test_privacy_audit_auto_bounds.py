"""Audit of automatic bounds: the bounds' histogram and the whole release stay within their ρ.

A release of ``pf.sum("x", bounds="auto")`` (or ``pf.mean``, or
``per_unit_bounds="auto"`` on ``pf.sum``/``pf.count``/``pf.mean``) spends a
share s of its ρ on ``tune``'s values histogram of each auto-bounded column
(:meth:`Pipeline.choose_bounds <privframe.plan.release.Pipeline.choose_bounds>`),
reads the bounds from it (post-processing) and releases the query with them at
the rest (:mod:`privframe.plan.auto_bounds`). Everything here runs through
``Session.release``; this audit checks both halves of that argument.

**The histogram's sensitivity** (deterministic, no noise). The pipeline's
own ``measure_contributions`` and the engine's ``contributions`` are watched
during a real release, so the design (each piece's planned L2 sensitivity
``l2_units``, = W) and the exact histograms are those the release noised.
For every person X of a small adversarial dataset (people with up to 40 rows
in several public groups and a non-public one, values from −10^300 to 10^300,
±inf, NaN, nulls, zeros and values below the smallest bucket edge, a person
whose values are all null), the release is run on D and on D − X and every
histogram must move by at most its piece's ``l2_units`` in L2; each release
must also charge, as the bounds' own ledger entry, the design's cost (the
share of its ρ), split over the pieces and each noised for its part. The
queries cover one and two measured columns, ungrouped, grouped by public keys
and by groups chosen privately, a filter, no privacy unit (each row a
person), and ``per_unit_bounds="auto"`` grouped and ungrouped, where the
histogram is of the per-unit stage's values. Any violation is a real one. A
control shows the check's power: an engine that weighs each *row* W, not
each unit, is caught.

**The whole release, empirically** (as :mod:`test_privacy_audit`'s
end-to-end part, whose ε lower bound and Clopper–Pearson intervals it
imports). If the composite release is (ε, δ)-DP then for any output set S
chosen in advance, ``P[M(D') ∈ S] <= e^ε P[M(D) ∈ S] + δ`` and the same with
D and D' swapped; exact one-sided Clopper–Pearson bounds at ALPHA/2 each on
the two probabilities give ε_lb, which exceeds the claim for a correct
release with probability at most ALPHA = 1e-3. The claim is the session's
own ``guarantee()`` after one release at RHO: the conversion of the *total*
ρ, the bounds' share included (Canonne, Kamath & Steinke 2020, at the
session's reporting δ).

Neighbours: D is 400 people with one value each in the bucket [11.3, 16)
and ``n`` people with the value 1000 (bucket [724, 1024)), ``n`` the largest
number of people whose weight ``n·W`` stays below the histogram's threshold
τ (computed from the design, not hard-coded: n = 92 at RHO = 1/50 and the
default share 1/10); D' is D plus one more person at 1000, whose weight
crosses τ. So the added person moves the chosen upper bound (16 when the
bucket stays below τ, 1024 when it passes; without noise D never passes and
D' always does) and the released sum (by 1000, or by the clipped 16).
Ungrouped, the number of groups is public (1), so ``tune``'s error model moves
ApproxBounds' bounds over the raw buckets next to them that show 2σ
(:func:`~privframe.plan.tuning_choice.choose_bounds`): a bucket or two of
noise above 16 or 1024 at times, which leaves the choice between clipping the
outliers and keeping them to the noisy threshold, as before. The
query is ``bound(max_rows_per_group=1).agg(pf.sum("x", bounds="auto"))`` at
RHO = 1/50 (claimed ε ≈ 0.90 at δ = 1e-6): the histogram at ρ = 1/500,
the sum at 9/500.

Test statistic: T = the released sum; S is {T > t} or {T <= t}, the side
and threshold chosen on a calibration half of the releases and evaluated on
the other half. Every random bit comes from fixed SeededRandomness streams,
so each run is reproducible.

Sizes and numbers: 1,000 releases per dataset (500 calibration, 500
evaluation). The correct release is far from its worst case here (its
histogram alone is ``sqrt(2·ρ/10)``-GDP: the added person shifts the
outliers' bucket by 0.06 σ), and its ε_lb is measured at 0.00 against the
claim 0.90: at these sizes the audit cannot show how tight the claim is,
only that the composite release leaks no more than it. The control shows the
audit would see more: it removes the histogram's noise (a monkeypatched
sampler in the release pipeline, used there only for the histogram; the
sum's noise is drawn elsewhere), so the chosen upper bound tells D from D'
every time, and with 150 evaluation releases per dataset the audit reaches
ε_lb ≈ ln(150/7.6) ≈ 3.0 (measured: 2.96) against the flag at the claim
plus 0.5. The file runs in about 23 s on 2 cores (15 s of it the 2,000
audited releases); ``pytest -s`` prints the numbers.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
import pytest
import test_privacy_audit as audit

import privframe as pf
import privframe.engines.contributions
import privframe.plan.release
from privframe.api.query import Query
from privframe.engines.contributions import Contributions, ContributionSpec
from privframe.mechanisms.noise import SeededRandomness
from privframe.plan import auto_bounds
from privframe.plan.release import Pipeline
from privframe.plan.tuning import TuningDesign

pytestmark = [
    pytest.mark.statistical,
    pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning"),
]

FloatArray = npt.NDArray[np.float64]
MakeQuery = Callable[[pf.Session], Query]

# --------------------------------------------------------------------------- sensitivity

EXACT_RHO = 1000  # the histograms' noise is irrelevant here; a large ρ lets tiny data release
KEYS = ["a", "b", "c"]


def _adversarial() -> pl.DataFrame:
    """11 people: many rows, several groups (one key not public), extreme values, nulls."""
    gen = np.random.default_rng(32)  # generates the data, not the noise
    extremes = [1e300, -1e300, math.inf, -math.inf, math.nan, 0.0, 1e-9, -3e-7, 2.0**64]
    rows: list[tuple[int, str, float | None, float | None]] = []
    # Person 0: 40 rows over every key, spread over the extreme buckets.
    for i in range(40):
        x = extremes[i % len(extremes)] if i % 2 else float(gen.uniform(-50, 50))
        rows.append((0, [*KEYS, "zz"][i % 4], x, None if i % 5 == 0 else -x))
    # Person 1: every value missing. Person 2: one row. Person 3: negatives only, one key.
    rows += [(1, k, None, None) for k in KEYS]
    rows.append((2, "a", 7.5, 7.5))
    rows += [(3, "b", -float(v), -1e6 * float(v)) for v in gen.uniform(1, 1000, 12)]
    # People 4-10: 1-15 rows each in 1-3 keys, some missing, a few extreme.
    for person in range(4, 11):
        for _ in range(int(gen.integers(1, 16))):
            key = KEYS[int(gen.integers(0, 1 + person % 3))]
            value: float | None = None if gen.random() < 0.15 else float(gen.uniform(-100, 500))
            if gen.random() < 0.1:
                value = extremes[int(gen.integers(0, len(extremes)))]
            rows.append((person, key, value, None if value is None else float(gen.uniform(0, 3))))
    return pl.DataFrame(rows, schema=["id", "g", "x", "y"], orient="row")


@dataclasses.dataclass(frozen=True)
class Measured:
    """What one release's bounds measured: the design (public) and the exact histograms."""

    design: TuningDesign
    spec: ContributionSpec
    tables: Contributions


@contextmanager
def _watched() -> Iterator[dict[str, Any]]:
    """Record what ``Pipeline.measure_contributions`` is given and what the engine computes."""
    seen: dict[str, Any] = {}
    measure = Pipeline.measure_contributions

    def measuring(
        self: Pipeline, tuning: TuningDesign, spec: ContributionSpec, *args: Any
    ) -> dict[str, np.ndarray]:
        seen["design"], seen["spec"] = tuning, spec
        contributions = self.engine.contributions  # type: ignore[attr-defined]

        def computed(spec: ContributionSpec) -> Contributions:
            seen["tables"] = contributions(spec)
            return seen["tables"]

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(self.engine, "contributions", computed)
            return measure(self, tuning, spec, *args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Pipeline, "measure_contributions", measuring)
        yield seen


@dataclasses.dataclass(frozen=True)
class Scenario:
    unit: str | None
    make_query: MakeQuery
    measured: tuple[str, ...]  # the histograms' columns: those of the auto aggregates' values
    delta: float = 0.0  # for groups chosen privately


def _measured(frame: pl.DataFrame, scenario: Scenario) -> Measured:
    """Release the scenario's query on ``frame`` through Session.release; keep what it measured.

    Also checks the charge: the ledger's bounds entry is the design's cost, the
    default share of the release's ρ, split over the pieces, each noised for it.
    """
    budget = pf.zCDP(EXACT_RHO, delta=scenario.delta)
    sess = pf.Session(frame, scenario.unit, budget, rng=SeededRandomness(0))
    with _watched() as seen:
        scenario.make_query(sess).release(rho=EXACT_RHO, label="audited")
    design: TuningDesign = seen["design"]
    assert [e.label for e in sess.ledger] == ["audited: bounds", "audited"]
    assert sess.ledger[0].cost.exact_rho == design.cost.exact_rho
    assert design.cost.exact_rho == auto_bounds.DEFAULT_SHARE * EXACT_RHO
    assert sum(p.rho for p in design.pieces) == design.cost.exact_rho
    for piece in design.pieces:
        assert piece.sigma_units >= piece.l2_units / math.sqrt(2 * piece.rho)
    return Measured(design, seen["spec"], seen["tables"])


def _people(frame: pl.DataFrame, unit: str | None) -> list[list[int]]:
    """The row numbers of each person (each row when there is no privacy unit)."""
    if unit is None:
        return [[i] for i in range(frame.height)]
    rows = frame.with_row_index("row").group_by(unit, maintain_order=True).agg("row")
    return rows["row"].to_list()


def _moves(frame: pl.DataFrame, scenario: Scenario) -> list[dict[str, float]]:
    """Per person X, each histogram's L2 move between D and D − X, over its ``l2_units``."""
    full = _measured(frame, scenario)
    moves = []
    for rows in _people(frame, scenario.unit):
        less = _measured(frame.filter(~pl.int_range(pl.len()).is_in(rows)), scenario)
        assert less.design == full.design  # public: the same pieces, sensitivities and noise
        moved = {}
        for piece in full.design.pieces:
            diff = piece.counts(full.tables) - piece.counts(less.tables)
            moved[piece.name] = float(np.linalg.norm(diff.astype(np.float64))) / piece.l2_units
        moves.append(moved)
    return moves


SCENARIOS: dict[str, Scenario] = {
    "sum and mean of two columns, ungrouped": Scenario(
        "id",
        lambda sess: (
            sess.query()
            .bound(max_rows_per_group=2)
            .agg(pf.sum("x", bounds="auto", missing="drop"), pf.mean("y", bounds="auto"))
        ),
        ("x", "y"),
    ),
    "sum and mean grouped by public keys, filtered": Scenario(
        "id",
        lambda sess: (
            sess.query()
            .filter(pl.col("y").is_null() | (pl.col("y") > -1e300))
            .bound(max_groups=2, max_rows_per_group=3)
            .group_by("g", keys=KEYS)
            .agg(pf.sum("x", bounds="auto"), pf.mean("x", bounds="auto", missing="drop"))
        ),
        ("x",),
    ),
    "groups chosen privately": Scenario(
        "id",
        lambda sess: (
            sess.query()
            .bound(max_groups=2, max_rows_per_group=2)
            .group_by("g")
            .agg(pf.sum("x", bounds="auto"))
        ),
        ("x",),
        delta=1e-6,
    ),
    "no privacy unit: each row a person": Scenario(
        None,
        lambda sess: sess.query().group_by("g", keys=KEYS).agg(pf.sum("x", bounds="auto")),
        ("x",),
    ),
    "per-unit sum, count and mean grouped": Scenario(
        "id",
        lambda sess: (
            sess.query()
            .bound(max_groups=2)
            .group_by("g", keys=KEYS)
            .agg(
                pf.sum("x", per_unit_bounds="auto"),
                pf.count(per_unit_bounds="auto"),
                pf.mean("y", per_unit_bounds="auto"),
            )
        ),
        ("x_sum_per_unit", "count_per_unit", "y_mean_per_unit"),
    ),
    "per-unit sum and count ungrouped": Scenario(
        "id",
        lambda sess: sess.query().agg(
            pf.sum("x", per_unit_bounds="auto"), pf.count(per_unit_bounds="auto")
        ),
        ("x_sum_per_unit", "count_per_unit"),
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_removing_a_person_moves_each_bounds_histogram_at_most_its_sensitivity(name: str) -> None:
    scenario = SCENARIOS[name]
    frame = _adversarial()
    full = _measured(frame, scenario)
    assert full.spec.value_columns == scenario.measured
    assert [p.l2_units for p in full.design.pieces] == [full.spec.scale] * len(scenario.measured)
    moves = _moves(frame, scenario)
    over = [
        f"person {person}: {histogram} moved {moved:g} × its sensitivity"
        for person, by_histogram in enumerate(moves)
        for histogram, moved in by_histogram.items()
        if moved > 1
    ]
    assert over == []
    # Not vacuous: some person moves a histogram by its whole sensitivity (all its weight
    # in one bucket), up to the floor of its weights.
    assert max(max(m.values()) for m in moves) > 1 - 1e-3


def test_the_adversarial_data_reach_the_outermost_and_the_central_buckets() -> None:
    scenario = SCENARIOS["sum and mean of two columns, ungrouped"]
    frame = _adversarial()
    x = _measured(frame, scenario).tables.values["x"]
    centre = x.size // 2  # |x| < 2^-20: zeros and 1e-9
    assert x[0] > 0  # -inf and -1e300
    assert x[-1] > 0  # inf and 1e300
    assert x[centre] > 0
    assert np.count_nonzero(x[:centre]) > 3  # negative values in several buckets
    assert np.count_nonzero(x[centre + 1 :]) > 3
    assert frame.group_by("id").len()["len"].max() == 40
    # Person 1, whose values are all missing, weighs nothing in either histogram.
    assert _moves(frame, scenario)[1] == {
        "values of x": 0.0,
        "values of y": 0.0,
    }


def test_the_audit_catches_histograms_that_weigh_each_row_rather_than_each_unit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The check's power: the same scenarios, with an engine whose values histogram gives
    # every row its own unit (weight W each) while the design still plans W per unit.
    weights = privframe.engines.contributions._value_weights
    unit = privframe.engines.contributions._UNIT

    def per_row(frame: pl.LazyFrame, column: str, spec: ContributionSpec) -> pl.LazyFrame:
        return weights(frame.with_columns(pl.int_range(pl.len()).alias(unit)), column, spec)

    monkeypatch.setattr(privframe.engines.contributions, "_value_weights", per_row)
    for name in ("sum and mean of two columns, ungrouped", "per-unit sum, count and mean grouped"):
        scenario = SCENARIOS[name]
        moves = _moves(_adversarial(), scenario)
        assert max(max(m.values()) for m in moves) > 2, name


# --------------------------------------------------------------------------- end to end

RHO = Fraction(1, 50)
BACKGROUND = 400
OUTLIER = 1000.0
N_AUDIT = 1000  # releases per dataset: half calibration, half evaluation
N_CONTROL = 300
UPPER_WITHOUT_OUTLIERS = 16.0  # the top edge of the background's bucket [11.3, 16)
UPPER_WITH_OUTLIERS = 1024.0  # the top edge of the outliers' bucket [724, 1024)


def _query(sess: pf.Session) -> Query:
    return sess.query().bound(max_rows_per_group=1).agg(pf.sum("x", bounds="auto"))


def _borderline() -> int:
    """The most people at one value whose histogram weight stays below the threshold τ."""
    plan = _query(pf.Session(pl.DataFrame({"u": [0], "x": [0.0]}), "u", pf.zCDP(1))).plan
    share = auto_bounds.split(plan, RHO)[0]
    (piece,) = auto_bounds.design(plan, True, share).pieces
    n = math.floor(piece.threshold / piece.l2_units)
    assert n * piece.l2_units < piece.threshold <= (n + 1) * piece.l2_units
    return n


@pytest.fixture(scope="module")
def neighbours() -> tuple[pl.DataFrame, pl.DataFrame]:
    gen = np.random.default_rng(2026)  # generates the data, not the noise
    x = gen.uniform(11.4, 15.9, BACKGROUND).tolist() + [OUTLIER] * _borderline()
    d = pl.DataFrame({"u": range(len(x)), "x": x})
    added = pl.DataFrame({"u": [len(x)], "x": [OUTLIER]})
    return d, pl.concat([d, added])


@dataclasses.dataclass(frozen=True)
class Releases:
    """The released sums and the chosen upper bounds of n releases on one dataset."""

    sums: FloatArray
    uppers: FloatArray


def _releases(frame: pl.DataFrame, n: int, seed: int) -> Releases:
    """N releases through Session.release, each charging its bounds' share and the rest."""
    sess = pf.Session(frame, "u", pf.zCDP(n * RHO), rng=SeededRandomness(seed))
    query = _query(sess)
    sums, uppers = np.empty(n), np.empty(n)
    for r in range(n):
        sums[r] = query.release(rho=RHO)["x_sum"].item()
        uppers[r] = sess.ledger[-1].description["auto_bounds"]["chosen"]["x_sum"][1]
    costs = [e.cost.exact_rho for e in sess.ledger]
    share = auto_bounds.DEFAULT_SHARE * RHO
    assert costs == [share, RHO - share] * n  # the bounds' entry, then the release's
    return Releases(sums, uppers)


def _claim() -> pf.Session:
    """A session after one release at RHO: its guarantee is the audit's claim."""
    d = pl.DataFrame({"u": range(BACKGROUND), "x": [12.0] * BACKGROUND})
    sess = pf.Session(d, "u", pf.zCDP(RHO), rng=SeededRandomness(0))
    _query(sess).release(rho=RHO)
    assert sess.spent.exact_rho == RHO  # the bounds' share and the rest: the total
    return sess


def _audited(name: str, d: Releases, d_prime: Releases) -> tuple[audit.AuditResult, float]:
    """ε_lb of the released sums (calibration half, evaluation half), and the claimed ε."""
    half = d.sums.size // 2
    claim = _claim().guarantee_statement()
    result = audit._audit(
        (d.sums[:half], d_prime.sums[:half]), (d.sums[half:], d_prime.sums[half:]), claim.delta
    )
    audit._report(name, claim.epsilon, result)
    return result, claim.epsilon


@pytest.fixture(scope="module")
def real(neighbours: tuple[pl.DataFrame, pl.DataFrame]) -> tuple[Releases, Releases]:
    return _releases(neighbours[0], N_AUDIT, 31), _releases(neighbours[1], N_AUDIT, 32)


def test_the_added_person_moves_the_chosen_upper_bound(real: tuple[Releases, Releases]) -> None:
    # Borderline: on both datasets the outliers' bucket sometimes passes τ and sometimes not,
    # so the upper bound sometimes clips them and sometimes keeps them. Ungrouped, the error
    # model moves ApproxBounds' upper bound over raw buckets next to it that show 2σ: from
    # the background's 16 by a bucket or two of noise, from the outliers' 1024 likewise.
    outliers_low = UPPER_WITH_OUTLIERS / 2**0.5  # the lower edge of the outliers' bucket
    for releases in real:
        assert UPPER_WITHOUT_OUTLIERS in set(releases.uppers)
        assert UPPER_WITH_OUTLIERS in set(releases.uppers)
        clipped = releases.uppers <= outliers_low
        assert 0.2 < clipped.mean() < 0.8
        assert (releases.uppers[clipped] < 4 * UPPER_WITHOUT_OUTLIERS).all()


def test_end_to_end_audit_of_bounds_and_release_stays_below_the_total_claim(
    real: tuple[Releases, Releases],
) -> None:
    result, claimed = _audited(f"auto bounds + sum (Session.release, {N_AUDIT} per dataset)", *real)
    assert result.epsilon_lb <= claimed


def test_end_to_end_audit_flags_bounds_chosen_without_noise(
    monkeypatch: pytest.MonkeyPatch, neighbours: tuple[pl.DataFrame, pl.DataFrame]
) -> None:
    # The histogram's noise removed; the release's own noise is drawn by
    # privframe.mechanisms.draws and is untouched, and the charges are the same.
    def none(sigma: float, size: Any = None, *, rng: Any = None) -> npt.NDArray[np.int64]:
        return np.zeros(size, dtype=np.int64)

    monkeypatch.setattr(privframe.plan.release, "discrete_gaussian", none)
    d, d_prime = (_releases(df, N_CONTROL, 40 + i) for i, df in enumerate(neighbours))
    assert set(d.uppers) == {UPPER_WITHOUT_OUTLIERS}
    assert set(d_prime.uppers) == {UPPER_WITH_OUTLIERS}
    assert np.unique(d.sums).size > N_CONTROL // 2  # the sum is still noised
    name = f"auto bounds without histogram noise ({N_CONTROL} per dataset)"
    result, claimed = _audited(name, d, d_prime)
    assert result.epsilon_lb > claimed + 0.5
