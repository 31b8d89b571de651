"""The command line: ``privframe demo`` and ``python -m privframe demo`` run the README example."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from privframe.cli import main

MODULE = [sys.executable, "-m", "privframe"]


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)


def _assert_demo_output(out: str) -> None:
    assert "== explain (spends nothing) ==" in out
    assert "sensitivity" in out
    for region in ("north", "south", "east", "west"):
        assert region in out
    for column in ("count_std", "amount_sum_ci95", "avg_amount"):
        assert column in out
    assert "released at rho = 0.1" in out
    assert "spent" in out
    assert re.search(r"^remaining\s+0\.9\b", out, re.MULTILINE)


def test_module_demo() -> None:
    done = _run([*MODULE, "demo", "--rows", "20000"])
    assert done.returncode == 0, done.stderr
    _assert_demo_output(done.stdout)
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(shutil.which("privframe") is None, reason="console script not installed")
def test_console_script_demo() -> None:
    done = _run(["privframe", "demo", "--rows", "20000", "--seed", "3"])
    assert done.returncode == 0, done.stderr
    _assert_demo_output(done.stdout)


def test_main_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--rows", "3000", "--rho", "0.25", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "released at rho = 0.25" in out
    assert re.search(r"^remaining\s+0\.75\b", out, re.MULTILINE)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["demo", "--rows", "lots"], "--rows"),
        (["demo", "--rows", "0"], "--rows"),
        (["demo", "--rho", "-1"], "--rho"),
        (["demo", "--rho", "nan"], "--rho"),
        (["demo", "--seed", "x"], "--seed"),
        (["frobnicate"], "invalid choice"),
        ([], "required"),
    ],
)
def test_bad_arguments_exit_nonzero_without_traceback(args: list[str], message: str) -> None:
    done = _run([*MODULE, *args])
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_refused_release_is_a_clean_error() -> None:
    # rho above the session's budget of 1: the accountant refuses, nothing is released.
    done = _run([*MODULE, "demo", "--rows", "2000", "--rho", "5"])
    assert done.returncode == 2
    assert done.stderr.startswith("privframe: error: spend refused")
    assert "Traceback" not in done.stderr
    assert "released at" not in done.stdout
