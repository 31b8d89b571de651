"""A Session over a Spark DataFrame: same API, same results as polars, same audit.

Spark runs in local mode (``local[2]``), started by the ``spark`` fixture in
conftest.py. The statistical test (the audit) uses ALPHA = 1e-3 from
test_privacy_audit.py, with seeded randomness.
"""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest
from internals import column_of, spec_of

import privframe as pf
from privframe.mechanisms.noise import SeededRandomness

KEYS = ["a", "b", "c", "d"]


def _frame(seed: int = 0, n: int = 600) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "u": rng.integers(0, n // 3, n),
            "g": rng.choice(["a", "b", "c", "zz"], n),
            "x": rng.uniform(-5, 60, n).round(3),
            "age": rng.integers(10, 90, n),
        }
    )


def _spark_frame(spark, df: pl.DataFrame):  # type: ignore[no-untyped-def]
    return spark.createDataFrame(df.to_pandas())


def _release(sess: pf.Session, m: int = 1000) -> pl.DataFrame | object:
    return (
        sess.query()
        .filter(pl.col("age") >= 18)
        .bound(max_groups=3, max_rows_per_group=m)
        .group_by("g", keys=KEYS)
        .agg(pf.count(), pf.sum("x", (0, 50)), pf.mean("x", (0, 50)), pf.count_distinct())
        .release(rho=0.5, with_error=True)
    )


@pytest.fixture(scope="module")
def data() -> pl.DataFrame:
    return _frame()


def test_spark_release_equals_the_polars_release_with_the_same_seed(spark, data) -> None:
    # With no binding bound the exact aggregates are equal, so the same seeded noise
    # stream gives the same released table.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pf.SeededRandomnessWarning)
        local = _release(pf.Session(data, "u", pf.zCDP(1.0), rng=SeededRandomness(5)))
        remote = _release(
            pf.Session(_spark_frame(spark, data), "u", pf.zCDP(1.0), rng=SeededRandomness(5))
        )
    assert isinstance(remote, type(data.to_pandas()))  # pandas by default
    assert pl.from_pandas(remote).equals(local)


def test_results_can_be_spark_dataframes_and_sql_works(spark, data) -> None:
    sess = pf.Session(
        _spark_frame(spark, data),
        "u",
        pf.zCDP(1.0),
        metadata={"x": pf.Column(bounds=(0, 50)), "g": pf.Column(keys=KEYS)},
        contributions=pf.Bound(max_groups=2, max_rows_per_group=3),
        results="spark",
    )
    out = sess.sql("SELECT g, COUNT(*) AS n, AVG(x) AS avg_x FROM data GROUP BY g", rho=0.3)
    assert type(out).__module__.startswith("pyspark.sql")
    assert sorted(out.columns) == ["avg_x", "g", "n"]
    assert out.count() == len(KEYS)
    assert sess.remaining.rho == pytest.approx(0.7)


def test_from_spark_table(spark, data) -> None:
    _spark_frame(spark, data).createOrReplaceTempView("private_orders")
    sess = pf.Session.from_spark_table(spark, "private_orders", "u", pf.zCDP(1.0))
    result = _release(sess)
    assert len(result) == len(KEYS)
    assert sess.columns == ["u", "g", "x", "age"]


def test_null_units_are_refused_and_private_selection_works(spark) -> None:
    df = pl.DataFrame({"u": [1, None, 3], "g": ["a", "b", "c"], "x": [1.0, 2.0, 3.0]})
    with pytest.raises(pf.InvalidValueError, match="nulls or NaN"):
        pf.Session(_spark_frame(spark, df), "u", pf.zCDP(1.0))
    many = pl.DataFrame({"u": list(range(300)), "g": ["a"] * 150 + ["b"] * 150})
    sess = pf.Session(_spark_frame(spark, many), "u", pf.zCDP(1.0, delta=1e-6))
    out = sess.query().bound(max_groups=1, max_rows_per_group=1).group_by("g").agg(pf.count())
    released = out.release(rho=0.5)
    assert sorted(released["g"]) == ["a", "b"]


def test_results_spark_needs_spark_input(data) -> None:
    with pytest.raises(pf.InvalidValueError, match="Spark"):
        pf.Session(data, "u", pf.zCDP(1.0), results="spark")


# --------------------------------------------------------------------------- the audit on Spark


N_SPARK_SEEDS = 6  # Spark jobs are slow; 6 engine seeds per dataset suffice (see below)


# The audit draws its noise from a seeded stream on purpose (a reproducible test).
@pytest.mark.statistical
@pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning")
def test_the_privacy_audit_passes_on_spark(spark) -> None:
    """The engine-level audit of test_privacy_audit.py, with Spark's exact aggregates.

    Same neighbours, query, ρ, statistic and ALPHA; only the engine differs.
    Premise first: f(D) is the same for every seed, and every f(D') − f(D) is 3
    of the heavy unit's 5 regions with count +m and centred sum +m·50, the tight
    worst case. Then the audit over a uniform mixture of the seeds' outputs (each
    seed's pair is (ε, δ)-close, so the mixture is too) must stay below the
    claim, and flag the release noised for 25ρ.
    """
    from privacy import test_privacy_audit as audit

    from privframe.plan.planner import plan_release

    d = audit._background()
    d_prime = pl.concat([d, audit._heavy_unit()])
    seeds = [int(w) for w in SeededRandomness(7).words(N_SPARK_SEEDS)]

    def outputs(df: pl.DataFrame) -> np.ndarray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pf.SeededRandomnessWarning)
            sess = pf.Session(
                _spark_frame(spark, df), "user", pf.zCDP(1.0), rng=SeededRandomness(0)
            )
        query = audit._query(sess)
        release = plan_release(query.plan, True, audit.RHO)
        spec = spec_of(sess, query.plan, release)
        rows = []
        for seed in seeds:
            exact = sess._engine.aggregate(audit.dataclasses.replace(spec, seed=seed))
            assert exact["region"].to_list() == audit.KEYS
            column = {"count": audit.COUNT, "distinct": audit.DISTINCT}
            rows.append(
                [
                    exact[column.get(m.kind) or column_of(release, m)].to_numpy()
                    for m in release.measurements
                ]
            )
        return np.asarray(rows, dtype=np.int64)

    release = plan_release(audit._query(audit._session(d, 0)).plan, True, audit.RHO)
    bounded = audit.EngineOutputs(release, outputs(d), outputs(d_prime))
    assert (bounded.d == bounded.d[0]).all()
    count_i = next(i for i, m in enumerate(release.measurements) if m.kind == "count")
    sum_m = next(m for m in release.measurements if m.kind == "centred_sum")
    sum_i = release.measurements.index(sum_m)
    for diff in bounded.d_prime - bounded.d[0]:
        touched = np.flatnonzero(diff[count_i])
        assert len(touched) == audit.K
        assert set(touched) <= set(range(len(audit.HEAVY_KEYS)))
        assert (diff[count_i][touched] == audit.M).all()
        assert (diff[sum_i][touched] == audit.M * (sum_m.upper_units - sum_m.centre_units)).all()
    # The polars engine's f(D) is the same: Spark computes the same exact aggregates.
    assert (bounded.d[0] == audit._engine_outputs(d, seeds[:1], None)[0]).all()

    claimed = audit._claimed(release)
    result = audit._engine_audit(bounded, release, seed=303)[0]
    audit._report("Spark engine + noise", claimed, result)
    assert result.epsilon_lb <= claimed
    broken = audit._engine_audit(bounded, audit._plan_rho25((d, d_prime), bounded), seed=304)[0]
    audit._report("Spark engine, noise for 25 rho", claimed, broken)
    assert broken.epsilon_lb > claimed + 0.5
