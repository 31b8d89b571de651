"""Marginals and synthetic data on Spark: the same tables as on polars, with the same seeded noise.

The exact bounded table is the engine's (one grouped count over the domain
columns after the domain filter and binning steps); with no row bound binding
the two engines' tables are equal, so the noisy marginals, MST's and AIM's
choices and the samples are too. Spark runs in local mode (``spark`` fixture).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest
from pandas.testing import assert_frame_equal

import privframe as pf
from privframe.engines.spark.rows import spark_table
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

DOMAINS: dict[str, Any] = {"g": ["a", "b", "c"], "x": pf.bin("x", [0, 20, 40, 60])}


@pytest.fixture(scope="module")
def people() -> pl.DataFrame:
    rng = np.random.default_rng(5)
    n = 300
    return pl.DataFrame(
        {
            "u": np.arange(n) // 2,  # two rows per person: max_rows=2 never binds
            "g": rng.choice(["a", "b", "c", "z"], n),  # "z" is outside the domain
            "x": rng.integers(0, 70, n),  # some outside the bins
            "flag": rng.random(n) < 0.4,
        }
    )


def _sessions(spark: Any, people: pl.DataFrame) -> tuple[pf.Session, pf.Session]:
    local = pf.Session(people.to_pandas(), "u", pf.zCDP(10.0), rng=SeededRandomness(3))
    remote = pf.Session(spark_table(spark, people), "u", pf.zCDP(10.0), rng=SeededRandomness(3))
    return local, remote


def test_spark_marginals_are_polars_marginals(spark: Any, people: pl.DataFrame) -> None:
    local, remote = _sessions(spark, people)
    sets = [("g", "x"), ("flag",)]
    want = local.marginals(sets, rho=1.0, domains=DOMAINS, max_rows=2)
    got = remote.marginals(sets, rho=1.0, domains=DOMAINS, max_rows=2)
    for s in sets:
        assert isinstance(got[s], pd.DataFrame)
        assert_frame_equal(got[s], want[s])


@pytest.mark.parametrize("method", ["mst", "aim"])
def test_spark_synthesis_is_polars_synthesis(spark: Any, people: pl.DataFrame, method: str) -> None:
    local, remote = _sessions(spark, people)
    want = local.synthesize(rho=1.0, method=method, domains=DOMAINS, max_rows=2, rows=50)
    got = remote.synthesize(rho=1.0, method=method, domains=DOMAINS, max_rows=2, rows=50)
    assert_frame_equal(got, want)
    assert remote.spent == local.spent
