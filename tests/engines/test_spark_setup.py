"""Without Java 17 the Spark tests skip on a developer's machine, saying how to install it,
and fail in CI: the decision (tests/spark_setup.py) on fake PATH and JAVA_HOME, and end to end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from spark_setup import java_problem, unavailable

ROOT = Path(__file__).resolve().parents[2]


def _java(folder: Path, version: str) -> Path:
    """A fake ``java`` in ``folder`` that reports ``version`` as a JDK does (on stderr)."""
    folder.mkdir(parents=True, exist_ok=True)
    java = folder / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2024-01-16' >&2\n")
    java.chmod(0o755)
    return java


def test_no_java_on_path_names_java_17_and_how_to_install_it(tmp_path: Path) -> None:
    problem = java_problem({"PATH": str(tmp_path)})
    assert problem is not None
    assert "Java 17" in problem
    assert "apt-get install openjdk-17-jre-headless" in problem


@pytest.mark.parametrize("version", ["17.0.9", "21", "25-ea"])
def test_java_17_or_later_on_path_is_enough(tmp_path: Path, version: str) -> None:
    _java(tmp_path / "bin", version)
    assert java_problem({"PATH": str(tmp_path / "bin")}) is None


@pytest.mark.parametrize(("version", "major"), [("1.8.0_392", 8), ("11.0.21", 11)])
def test_java_older_than_17_is_named_with_its_version(
    tmp_path: Path, version: str, major: int
) -> None:
    _java(tmp_path / "bin", version)
    problem = java_problem({"PATH": str(tmp_path / "bin")})
    assert problem is not None
    assert f"is Java {major}; the Spark tests need Java 17" in problem


def test_java_home_is_used_before_path(tmp_path: Path) -> None:
    _java(tmp_path / "path", "17.0.9")
    _java(tmp_path / "jdk11" / "bin", "11.0.21")
    _java(tmp_path / "jdk21" / "bin", "21.0.1")
    path = str(tmp_path / "path")
    assert java_problem({"PATH": path, "JAVA_HOME": str(tmp_path / "jdk21")}) is None
    old = java_problem({"PATH": path, "JAVA_HOME": str(tmp_path / "jdk11")})
    assert old is not None
    assert "Java 11" in old
    empty = java_problem({"PATH": path, "JAVA_HOME": str(tmp_path / "nothing")})
    assert empty is not None
    assert "JAVA_HOME" in empty


def test_a_missing_requirement_skips_outside_ci_and_fails_in_ci() -> None:
    with pytest.raises(pytest.skip.Exception, match="no java"):
        unavailable("no java", {})
    with pytest.raises(pytest.fail.Exception, match=r"no java\. CI runs every Spark test"):
        unavailable("no java", {"CI": "true"})


def _spark_test_without_java(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """One Spark test in a pytest run whose PATH has no java and no JAVA_HOME."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "JAVA_HOME", "PATH")}
    env.update(PATH=str(tmp_path), **extra)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-rs",
            "tests/engines/test_spark_session.py::test_from_spark_table",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_spark_tests_skip_without_java_on_a_developers_machine(tmp_path: Path) -> None:
    done = _spark_test_without_java(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout
    assert "Java 17" in done.stdout
    assert "apt-get install openjdk-17-jre-headless" in done.stdout


def test_spark_tests_fail_without_java_in_ci(tmp_path: Path) -> None:
    done = _spark_test_without_java(tmp_path, CI="true")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 error" in done.stdout
    assert "CI runs every Spark test" in done.stdout
