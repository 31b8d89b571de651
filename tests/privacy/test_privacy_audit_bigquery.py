"""Empirical privacy audit of a query written in BigQuery's differential privacy SQL.

The method, data and statistics are those of ``tests/privacy/test_privacy_audit.py``
(black-box ε lower bound from neighbouring datasets, exact Clopper–Pearson
bounds, the Neyman–Pearson projection T, a set S chosen on a calibration
sample and evaluated on an independent one), reused from that module. What
is audited here is the claim a BigQuery user reads in the SQL itself:

    SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6,
        max_groups_contributed=3, privacy_unit_column=user)
      region,
      COUNT(*, contribution_bounds_per_group => (0, 5)) AS n,
      SUM(amount, contribution_bounds_per_row => (0, 100)) AS total,
      AVG(amount, contribution_bounds_per_row => (0, 100)) AS mean
    FROM data GROUP BY region

over the public regions (each row's amount clamped: BigQuery's per-unit clamping,
``contribution_bounds_per_group`` on SUM and AVG, is audited in
test_privacy_audit_per_unit_clamping.py). The query is (ε = 1, δ = 1e-6)-DP by its OPTIONS:
the released measurements must give no ε lower bound above 1 at δ = 1e-6.
The SQL front end turns the OPTIONS into ρ = the largest ρ whose conversion
gives (1, 1e-6) (≈ 0.0244), max_groups_contributed into k = 3 and the COUNT's
bound into m = 5 rows per group; the heavy unit of D' (500 rows at amount 250:
96 in each of 5 public regions, 20 in a non-public one) must be cut to 3
regions × 5 rows clipped to 100.

Audits: (1) the engine outputs of the SQL query's own plan, noised at its
planner's σ, 200,000 releases per dataset; (2) 300 releases per dataset through
``sess.sql(text)`` (spending the OPTIONS budget each time), whose T
must follow the same distribution (two-sample KS) and pass the same audit; (3)
the audit bites: noise calibrated to ρ = ε (an OPTIONS epsilon read as a zCDP
ρ, skipping the (ε, δ) → ρ conversion) is flagged.

Significance: ALPHA = 1e-3 for each assertion, as in the reused module; each
fails for a correct mechanism with probability at most 1e-3. Randomness comes
from fixed SeededRandomness streams, so runs are reproducible; ``pytest -s``
prints the numbers.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import polars as pl
import pytest
import test_privacy_audit as audit
from internals import column_of, spec_of
from scipy import stats

import privframe as pf
from privframe.accounting.budgets import zCDP
from privframe.api.sql import SQLQuery
from privframe.engines.spec import COUNT
from privframe.mechanisms.noise import SeededRandomness
from privframe.plan.planner import ReleasePlan, plan_release

pytestmark = [
    pytest.mark.statistical,
    pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning"),
]

ALPHA = audit.ALPHA
EPSILON, DELTA = 1, Fraction(1, 10**6)
N_E2E = 300
TEXT = """SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6,
    max_groups_contributed=3, privacy_unit_column=user)
  region,
  COUNT(*, contribution_bounds_per_group => (0, 5)) AS n,
  SUM(amount, contribution_bounds_per_row => (0, 100)) AS total,
  AVG(amount, contribution_bounds_per_row => (0, 100)) AS mean
FROM data GROUP BY region"""


def _session(df: pl.DataFrame, seed: int, rho: float = 1.0) -> pf.Session:
    return pf.Session(
        df,
        "user",
        pf.zCDP(rho),
        rng=SeededRandomness(seed),
        metadata={"region": pf.Column(keys=tuple(audit.KEYS))},
    )


def _query(sess: pf.Session) -> SQLQuery:
    return sess.parse_sql(TEXT)


@pytest.fixture(scope="module")
def datasets() -> tuple[pl.DataFrame, pl.DataFrame]:
    d = audit._background()
    return d, pl.concat([d, audit._heavy_unit()])


@pytest.fixture(scope="module")
def outputs(datasets: tuple[pl.DataFrame, pl.DataFrame]) -> audit.EngineOutputs:
    """The engine's exact outputs of the SQL query's plan, per engine seed, for D and D'."""
    exact = []
    for df, stream in zip(datasets, (1, 2), strict=True):
        sess = _session(df, 0)
        query = _query(sess)
        spend = query.spend()
        assert spend is not None
        release = plan_release(query.query.plan, True, spend.rho)
        spec = spec_of(sess, query.query.plan, release)
        rows = []
        for seed in audit._engine_seeds(stream):
            table = sess._engine.aggregate(dataclasses.replace(spec, seed=seed))
            assert table["region"].to_list() == audit.KEYS
            rows.append(
                [
                    table[COUNT if m.kind == "count" else column_of(release, m)].to_numpy()
                    for m in release.measurements
                ]
            )
        exact.append(np.asarray(rows, dtype=np.int64))
    return audit.EngineOutputs(release, exact[0], exact[1])


def _report(name: str, result: audit.AuditResult) -> None:
    print(
        f"\n{name}: claimed (epsilon, delta) = ({EPSILON}, {float(DELTA):g}) by OPTIONS; "
        f"epsilon_lb = {result.epsilon_lb:.4f} (S = T {'>' if result.side == 'high' else '<='} "
        f"{result.threshold:.4g}; calibration epsilon_lb = {result.calibration_epsilon:.4f})"
    )


def test_the_sql_plan_is_the_audited_builder_plan_at_the_options_rho(
    datasets: tuple[pl.DataFrame, pl.DataFrame], outputs: audit.EngineOutputs
) -> None:
    query = _query(_session(datasets[0], 0))
    spend = query.spend()
    assert spend is not None
    assert spend.rho == pf.ApproxDP(EPSILON, DELTA).to_zcdp().exact_rho
    assert zCDP(spend.rho).epsilon(float(DELTA)) <= EPSILON  # the claim the audit tests
    assert float(DELTA) == audit._session_delta()  # the δ the reused audit states ε at
    assert query.query.plan.bound == pf.Bound(max_groups=audit.K, max_rows_per_group=audit.M)
    builder = plan_release(audit._query(_session(datasets[0], 0)).plan, True, spend.rho)
    assert [(m.kind, m.sigma_units) for m in outputs.release.measurements] == [
        (m.kind, m.sigma_units) for m in builder.measurements
    ]
    diffs = outputs.d_prime - outputs.d[0]
    count = next(i for i, m in enumerate(outputs.release.measurements) if m.kind == "count")
    assert ((diffs[:, count] > 0).sum(axis=1) == audit.K).all()  # k = 3 regions
    assert (diffs[:, count].max(axis=1) == audit.M).all()  # m = 5 rows each


@pytest.fixture(scope="module")
def engine_audit(outputs: audit.EngineOutputs) -> audit.RealAudit:
    return audit._engine_audit(outputs, outputs.release, seed=611)


def test_audit_of_the_bigquery_query_stays_below_its_options_epsilon(
    engine_audit: audit.RealAudit,
) -> None:
    result = engine_audit[0]
    _report("BigQuery OPTIONS query (engine + noise)", result)
    assert result.epsilon_lb <= EPSILON


def test_audit_flags_options_epsilon_read_as_rho(
    datasets: tuple[pl.DataFrame, pl.DataFrame], outputs: audit.EngineOutputs
) -> None:
    plan = _query(_session(datasets[0], 0)).query.plan
    wrong = plan_release(plan, True, Fraction(EPSILON))  # ρ = ε: no (ε, δ) conversion
    result, _, _ = audit._engine_audit(outputs, wrong, seed=612)
    _report("OPTIONS epsilon read as rho", result)
    assert result.epsilon_lb > EPSILON + 0.5


def _released(df: pl.DataFrame, seed: int, release: ReleasePlan) -> audit.IntArray:
    """N_E2E releases of the SQL text, each spending its OPTIONS; measurements read back."""
    sess = _session(df, seed, rho=2 * N_E2E * float(release.cost.rho))
    centred = next(m for m in release.measurements if m.kind == "centred_sum")
    out = np.empty((N_E2E, len(release.measurements), len(audit.KEYS)), dtype=np.int64)
    for r in range(N_E2E):
        result = sess.sql(TEXT, clamp=False)  # as BigQuery runs it: OPTIONS carry the budget
        assert isinstance(result, pl.DataFrame)
        assert result["region"].to_list() == audit.KEYS
        count = result["n"].to_numpy()
        units = np.ldexp(result["total"].to_numpy(), centred.grid_exponent)
        units -= centred.centre_units * count.astype(np.float64)
        assert (units == np.rint(units)).all()  # released sums are grid points
        for i, m in enumerate(release.measurements):
            out[r, i] = count if m.kind == "count" else np.rint(units).astype(np.int64)
    assert len(sess.ledger) == N_E2E
    assert all(entry.rho == release.cost.rho for entry in sess.ledger)
    return out


@pytest.fixture(scope="module")
def end_to_end(
    datasets: tuple[pl.DataFrame, pl.DataFrame], outputs: audit.EngineOutputs
) -> tuple[audit.IntArray, audit.IntArray]:
    return _released(datasets[0], 31, outputs.release), _released(datasets[1], 32, outputs.release)


def test_sql_releases_follow_the_audited_mechanism_and_stay_below_the_claim(
    engine_audit: audit.RealAudit, end_to_end: tuple[audit.IntArray, audit.IntArray]
) -> None:
    engine_result, evaluation, proj = engine_audit
    t_d, t_d1 = (proj.of(y) for y in end_to_end)
    for e2e, model in zip((t_d, t_d1), evaluation, strict=True):
        assert stats.ks_2samp(e2e, model).pvalue > ALPHA
    # S was chosen on the engine-level calibration sample, independent of these releases.
    eps = audit._epsilon_bounds(
        t_d, t_d1, np.array([engine_result.threshold]), float(DELTA), ALPHA / 2
    )
    result = audit.AuditResult(
        max(float(eps[engine_result.side][0]), 0.0),
        engine_result.side,
        engine_result.threshold,
        engine_result.calibration_epsilon,
    )
    _report(f"BigQuery OPTIONS query (sess.sql(...), {N_E2E} per dataset)", result)
    assert result.epsilon_lb <= EPSILON
