"""Empirical privacy audit of the δ part of GROUP BY with public keys for some columns.

The rare-group audit of ``tests/privacy/test_privacy_audit_selection.py`` (docs/privacy.md
§6), for a release whose group columns are ``region`` (public keys "x", "y")
and ``m`` (chosen privately). Each combination of ``m`` that is selected is
released with every public region, so a combination held by the added unit u
alone must appear with at most the δ charged for selection, as a new group of
a plain selection must.

D' holds 20,000 lonely units beside two big combinations; each lonely unit has
one row under region "x" in each of k = 2 combinations of its own, and a row
under the non-public region "zz" in a third (dropped before bounding, so
never a combination). D is D' without one of them, u: S = "a combination of u
is released", P[M(D) ∈ S] = 0, and each lonely unit is an independent trial
of P[M(D') ∈ S] <= δ, all in one real ``Session.release``. At ρ = 0.1 and
selection δ = 1e-2 the exact rate is 0.99·δ, so the claim is tight; the
one-sided Clopper–Pearson lower bound on the rate must not exceed the δ
charged. The audit bites: drawing the selection noise once per released row
(a public key × combination) instead of once per combination gives each
combination two chances, and a threshold one too low (the planner's seam
``discrete_threshold``) is flagged as well.

Significance: ALPHA = 1e-3 for every assertion (each fails for a correct
mechanism with probability at most 1e-3). Randomness comes from fixed
SeededRandomness streams, so every run is reproducible. ``pytest -s`` prints
the numbers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl
import pytest
import test_privacy_audit as audit
from scipy import stats
from test_privacy_audit_selection import RareAudit

import privframe as pf
import privframe.plan.planner
import privframe.plan.release
from privframe.engines.spec import DISTINCT
from privframe.mechanisms.noise import SeededRandomness, discrete_gaussian
from privframe.mechanisms.selection import discrete_selection_delta, discrete_threshold
from privframe.plan.planner import Selection

pytestmark = pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning")

ALPHA = audit.ALPHA
K = 2
UNITS = 20_000
RHO = 0.1
DELTA = 1e-2
REGIONS = ["x", "y"]


def _data() -> pl.DataFrame:
    """Two combinations of 200 units each, and UNITS lonely units in K combinations each."""
    units, regions, combos = list(range(400)), ["x"] * 200 + ["y"] * 200, ["a"] * 200 + ["b"] * 200
    for i in range(UNITS):
        units += [10_000 + i] * (K + 1)
        regions += ["x"] * K + ["zz"]
        combos += [f"lonely{i:05d}_{j}" for j in range(K + 1)]
    return pl.DataFrame({"u": units, "region": regions, "m": combos})


def _audit(seed: int) -> RareAudit:
    sess = pf.Session(_data(), "u", pf.zCDP(1.0, delta=DELTA), rng=SeededRandomness(seed))
    query = (
        sess.query()
        .bound(max_groups=K, max_rows_per_group=1)
        .group_by(["region", "m"], keys=pf.keys.product(region=REGIONS))
        .agg(pf.count())
    )
    selection = query.explain(rho=RHO).plan.selection  # public: spends nothing
    assert selection is not None
    result = query.release(rho=RHO, delta=DELTA)  # all the session's δ
    assert isinstance(result, pl.DataFrame)
    assert {"a", "b"} <= set(result["m"].to_list())  # 200 units: far above τ
    assert not result["m"].str.ends_with(f"_{K}").any()  # non-public rows: no combination
    owners = result["m"].str.extract(r"^lonely(\d+)_", 1).drop_nulls()
    (entry,) = sess.ledger
    report = sess.report()
    return RareAudit(
        hits=owners.n_unique(),
        threshold=selection.threshold,
        sigma=selection.measurement.sigma_units,
        delta_selection=entry.delta,
        delta_total=report.delta + report.spent_delta,
        units=UNITS,
        what="combination",
    )


@pytest.mark.statistical
def test_a_combination_only_the_added_unit_holds_appears_at_most_with_the_charged_delta() -> None:
    found = _audit(seed=51)
    found.report("partial keys")
    assert found.threshold == discrete_threshold(found.sigma, K, DELTA)
    assert found.delta_selection == DELTA
    exact = discrete_selection_delta(found.sigma, K, found.threshold)
    assert 0.9 * DELTA <= exact <= DELTA  # a tight claim, so the audit can bite
    assert found.lower <= found.delta_selection
    assert stats.binomtest(found.hits, UNITS, exact).pvalue > ALPHA


def _per_row(
    self: privframe.plan.release.Pipeline,
    exact: pl.DataFrame,
    selected: tuple[str, ...],
    selection: Selection,
) -> pl.DataFrame:
    """A broken selection: one draw per released row, not per combination."""
    distinct = exact[DISTINCT].to_numpy().astype(np.int64)
    sigma = selection.measurement.sigma_units
    noisy = distinct + discrete_gaussian(sigma, distinct.size, rng=self.rng)
    return exact.filter(noisy >= selection.threshold)


def _threshold_off_by_one(sigma: float, k: int, delta: float) -> int:
    return discrete_threshold(sigma, k, delta) - 1


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("name", "target", "broken", "seed"),
    [
        ("a draw per row", (privframe.plan.release.Pipeline, "_selected"), _per_row, 52),
        ("τ − 1", (privframe.plan.planner, "discrete_threshold"), _threshold_off_by_one, 53),
    ],
)
def test_the_audit_flags_a_broken_selection(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    target: tuple[object, str],
    broken: Callable[..., object],
    seed: int,
) -> None:
    monkeypatch.setattr(*target, broken)
    found = _audit(seed)
    found.report(f"broken partial keys ({name})")
    assert found.delta_selection == DELTA  # still charged as if correct
    assert found.lower > found.delta_total
