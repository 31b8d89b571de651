"""Without Java 17 the Spark tests skip on a developer's machine, saying how to install it,
and fail in CI: the decision (tests/spark_setup.py) on fake PATH and JAVA_HOME, and end to end.
The services the cluster tests start (tests/spark_services.py) are waited for with a
timeout and a clear error, and stopped with every process they started; here on stand-in
processes (the real cluster is checked by test_spark_cluster.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import spark_services
from spark_services import ServiceError, Services, alive_workers, free_port, wait_until
from spark_setup import java_problem, legs, unavailable

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
            "tests/engines/test_spark_session.py::test_from_spark_table[local]",
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


def test_the_cluster_legs_run_the_engine_tests_and_the_rest_runs_locally() -> None:
    assert legs("test_spark_engine.py") == ("local", "standalone", "connect")
    assert legs("test_partial_keys_engines.py") == ("local", "standalone", "connect")
    assert legs("test_spark_expressions.py") == ("local",)
    assert legs("test_spark_connect.py") == ("connect",)


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie awaiting its parent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_stopping_ends_each_service_with_the_processes_it_started(tmp_path: Path) -> None:
    services = Services(tmp_path, os.environ)
    child = tmp_path / "child.pid"
    # A stand-in for a worker and the executor it forks, then a second service.
    parent = services.start("worker", "sh", "-c", f"sleep 300 & echo $! > {child}; wait")
    other = services.start("master", "sleep", "300")
    wait_until(child.exists, "the child's pid", [parent])
    wait_until(lambda: child.read_text().strip() != "", "the child's pid", [parent])
    pid = int(child.read_text())
    assert _alive(pid)
    services.stop()
    assert parent.process.returncode is not None
    assert other.process.returncode is not None
    wait_until(lambda: not _alive(pid), "the child to end", [])
    assert services.started == []


def test_a_service_that_exits_while_awaited_is_named_with_its_log(tmp_path: Path) -> None:
    services = Services(tmp_path, os.environ)
    try:
        broken = services.start("worker 0", "sh", "-c", "echo 'no JAVA_HOME here'; exit 3")
        with pytest.raises(ServiceError, match="worker 0 exited with code 3") as info:
            wait_until(lambda: False, "2 workers registered", [broken])
        assert "no JAVA_HOME here" in str(info.value)
    finally:
        services.stop()


def test_waiting_gives_up_at_the_timeout_with_the_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spark_services, "START_TIMEOUT", 0.5)
    services = Services(tmp_path, os.environ)
    try:
        slow = services.start("master", "sh", "-c", "echo starting; sleep 300")
        with pytest.raises(ServiceError, match="no 2 workers registered after 0 s") as info:
            wait_until(lambda: False, "2 workers registered", [slow])
        assert "starting" in str(info.value)
    finally:
        services.stop()


def test_a_master_not_yet_listening_has_no_workers() -> None:
    assert alive_workers(f"http://127.0.0.1:{free_port()}") == -1
