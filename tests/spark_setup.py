"""Whether the Spark tests can start Spark here, and what to do when they cannot.

Spark 4 runs on Java 17 or later, found as pyspark finds it: ``$JAVA_HOME/bin/java``
when JAVA_HOME is set, else ``java`` on PATH. Without it the Spark tests skip on
a developer's machine, with a message saying how to install Java, and fail in CI
(the CI variable is set), where skipping would hide that they never ran.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

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
