"""Shared fixtures: the independently computed reference values."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from spark_setup import java_problem, unavailable

import privframe as pf
from privframe.accounting.accountant import Accountant

_ROOT = Path(__file__).resolve().parent.parent
# The shared copy beside the checkout is authoritative; the vendored copy keeps
# the suite runnable from a bare clone.
_CANDIDATES = (
    _ROOT.parent / "shared" / "reference" / "reference_values.json",
    _ROOT / "tests" / "data" / "reference_values.json",
)


@pytest.fixture(scope="session")
def reference_values() -> dict[str, Any]:
    for path in _CANDIDATES:
        if path.is_file():
            return json.loads(path.read_text())
    searched = ", ".join(map(str, _CANDIDATES))
    raise FileNotFoundError(f"reference_values.json not found in {searched}")


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One local Spark (local[2]) for the whole run, started by the tests themselves.

    pyspark (a test dependency) and Java 17 must be installed: without them the
    Spark tests skip on a developer's machine and fail in CI (spark_setup.py).
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        unavailable("the Spark tests need pyspark: pip install -e '.[test]'", os.environ)
    problem = java_problem(os.environ)
    if problem is not None:
        unavailable(problem, os.environ)

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("privframe-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(params=["memory", "file"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Build an accountant on an in-memory or a file ledger (the accounting tests' fixture)."""

    def build(budget: pf.Budget, **kw: object) -> Accountant:
        ledger = None if request.param == "memory" else tmp_path / "spend.ledger"
        return Accountant(budget, ledger, **kw)  # type: ignore[arg-type]

    return build
