"""Shared fixtures: the independently computed reference values, Spark, accountants."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_services import SESSION_CONF, Cluster, Services, start_cluster
from spark_setup import (
    LocalSpark,
    classic_session,
    close_session,
    connect_session,
    legs,
    require_spark,
)

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


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each Spark test runs on the legs spark_setup.legs gives its module (local[2] at least)."""
    if "spark" in metafunc.fixturenames:
        # Each leg needs a JVM (and the cluster legs three more): all are slow tests.
        on = [
            pytest.param(leg, marks=pytest.mark.slow, id=leg)
            for leg in legs(metafunc.definition.path.name)
        ]
        metafunc.parametrize("spark", on, indirect=True, scope="session")


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A standalone master, two workers and a Spark Connect server, all on 127.0.0.1.

    Started by the tests (spark_services.py) when the first cluster test needs
    them; every JVM is stopped at the end of the run, whether tests passed or not.
    """
    require_spark(os.environ)
    services = Services(tmp_path_factory.mktemp("spark-cluster"), os.environ)
    try:
        yield start_cluster(services)
    finally:
        services.stop()


@pytest.fixture(scope="session")
def local_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSpark]:
    """The local[2] session's holder: started when first needed, stopped at the end."""
    warehouse = str(tmp_path_factory.mktemp("spark-warehouse"))
    local = LocalSpark(
        {**SESSION_CONF, "spark.sql.warehouse.dir": warehouse, "spark.driver.memory": "2g"}
    )
    yield local
    local.stop()


@pytest.fixture(scope="session")
def spark(
    request: pytest.FixtureRequest,
    local_spark: LocalSpark,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Any]:
    """A Spark session on this test's leg: local[2], the standalone cluster, or Spark Connect.

    One per leg at a time (pytest groups the tests by leg); a test that asks for
    it by name (``request.getfixturevalue``) gets local[2]. pyspark (a test
    dependency) and Java 17 must be installed: without them the Spark tests
    skip on a developer's machine and fail in CI (spark_setup.py).
    """
    require_spark(os.environ)
    leg = getattr(request, "param", "local")
    if leg == "local":
        yield local_spark.get()
        return
    cluster = request.getfixturevalue("spark_cluster")
    # One classic Spark per process, and pyspark starts no Connect client beside one:
    # local[2] starts again when next asked (pytest may order a local test in between).
    local_spark.stop()
    if leg == "standalone":
        warehouse = str(tmp_path_factory.mktemp("spark-warehouse"))
        session = classic_session(
            cluster.master, {**cluster.conf, "spark.sql.warehouse.dir": warehouse}
        )
    else:
        session = connect_session(cluster.connect)
    yield session
    close_session(session)


@pytest.fixture(params=["memory", "file"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Build an accountant on an in-memory or a file ledger (the accounting tests' fixture)."""

    def build(budget: pf.Budget, **kw: object) -> Accountant:
        ledger = None if request.param == "memory" else tmp_path / "spend.ledger"
        return Accountant(budget, ledger, **kw)  # type: ignore[arg-type]

    return build
