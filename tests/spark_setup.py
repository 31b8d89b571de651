"""Whether the Spark tests can start Spark here, and what to do when they cannot.

Spark 4 runs on Java 17 or later, found as pyspark finds it: ``$JAVA_HOME/bin/java``
when JAVA_HOME is set, else ``java`` on PATH. Without it the Spark tests skip on
a developer's machine, with a message saying how to install Java, and fail in CI
(the CI variable is set), where skipping would hide that they never ran.

Which legs a Spark test runs on (:data:`LEGS`): every Spark test runs on
``local[2]``; the engine, session and equivalence tests (:data:`CLUSTER_MODULES`)
also on a standalone cluster and through Spark Connect, whose services
``spark_services.py`` starts.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

import pytest

JAVA = 17
INSTALL = "install Java 17 (apt-get install openjdk-17-jre-headless) or set JAVA_HOME to a JDK 17+"
_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


def java_problem(environ: Mapping[str, str]) -> str | None:
    """Why Spark cannot find a usable Java with these environment variables; None if it can."""
    home = environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if not os.access(java, os.X_OK):
            return f"JAVA_HOME={home} has no bin/java; the Spark tests need Java {JAVA}: {INSTALL}"
    else:
        found = shutil.which("java", path=environ.get("PATH", ""))
        if found is None:
            return f"the Spark tests need Java {JAVA}, and java is not on PATH: {INSTALL}"
        java = Path(found)
    try:
        done = subprocess.run(
            [str(java), "-version"],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(environ),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return f"{java} -version did not run; the Spark tests need Java {JAVA}: {INSTALL}"
    match = _VERSION.search(done.stderr + done.stdout)
    if match is None:
        return f"{java} -version gave no version; the Spark tests need Java {JAVA}: {INSTALL}"
    major, minor = int(match[1]), int(match[2] or 0)
    version = minor if major == 1 else major  # Java 8 and older say "1.8.0"
    if version < JAVA:
        return f"{java} is Java {version}; the Spark tests need Java {JAVA}: {INSTALL}"
    return None


def unavailable(problem: str, environ: Mapping[str, str]) -> NoReturn:
    """Skip the calling test for ``problem``, or fail it when the CI variable is set."""
    if environ.get("CI"):
        pytest.fail(
            f"{problem}. CI runs every Spark test: .ci/run installs Java {JAVA}", pytrace=False
        )
    pytest.skip(problem)


def require_spark(environ: Mapping[str, str]) -> None:
    """Skip (or in CI fail) the calling test unless pyspark and Java 17 are installed."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        unavailable("the Spark tests need pyspark: pip install -e '.[test]'", environ)
    problem = java_problem(environ)
    if problem is not None:
        unavailable(problem, environ)


LEGS = ("local", "standalone", "connect")
"""Where a Spark test can run: ``local[2]`` in the test process, a standalone cluster of
two workers, or a Spark Connect server on that cluster (spark_services.py)."""
CLUSTER_MODULES = frozenset(
    {
        "test_spark_engine.py",
        "test_spark_session.py",
        "test_partial_keys_engines.py",
        "test_fuzz_spark.py",
        "test_spark_cluster.py",
    }
)
"""The test modules run on every leg: the engine and its equivalence with polars, releases
through a Session, the refusals of bad input. The other Spark tests (expression
translation, unit types, name collisions, ...) check Spark SQL semantics, which the
deployment does not change, and run on ``local[2]`` only."""


CONNECT_MODULES = frozenset({"test_spark_connect.py"})
"""The test modules of what only Spark Connect does (a DataFrame analysed when first asked)."""


def legs(module: str) -> tuple[str, ...]:
    """The legs the Spark tests of the test module named ``module`` run on."""
    if module in CONNECT_MODULES:
        return ("connect",)
    return LEGS if module in CLUSTER_MODULES else LEGS[:1]


def classic_session(master: str, conf: Mapping[str, str]) -> Any:
    """A classic Spark session (driver in this process) on ``master``, configured by ``conf``."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName("privframe-tests")
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


class LocalSpark:
    """The ``local[2]`` session, started when asked for, again after a cluster leg stopped it.

    A process holds one classic Spark at a time, so the standalone leg stops
    this one first; the tests that follow get a new one.
    """

    def __init__(self, conf: Mapping[str, str]) -> None:
        self.conf = dict(conf)
        self.session: Any = None

    def get(self) -> Any:
        """The running local session (started now if there is none)."""
        if self.session is None:
            self.session = classic_session("local[2]", self.conf)
        return self.session

    def stop(self) -> None:
        """Stop the local session, if one runs."""
        if self.session is not None:
            self.session.stop()
            self.session = None


def connect_session(url: str) -> Any:
    """A Spark Connect session: a client of the server at ``url`` (``sc://host:port``)."""
    from pyspark.sql import SparkSession

    return SparkSession.builder.remote(url).getOrCreate()


def close_session(session: Any) -> None:
    """Stop ``session``; after a Connect client, let pyspark build classic columns again.

    pyspark marks the whole process as Spark Connect when a Connect session
    starts (``pyspark.sql.functions`` then build Connect columns) and keeps the
    mark when it stops.
    """
    session.stop()
    os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
