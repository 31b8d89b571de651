"""The command line: ``privframe demo`` and ``python -m privframe demo`` run the README example."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from privframe.api.cli import main

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


def test_report_help_documents_the_exit_codes() -> None:
    done = _run([*MODULE, "report", "--help"])
    assert done.returncode == 0, done.stderr
    assert "--dry-run" in done.stdout
    assert "--out DIR" in done.stdout
    for code in range(5):
        assert re.search(rf"^  {code}  ", done.stdout, re.MULTILINE)
    assert "<title>/<entry name>" in done.stdout


def test_report_dry_run_in_a_subprocess(tmp_path: Path) -> None:
    spec = tmp_path / "report_spec.toml"
    shutil.copy(Path(__file__).resolve().parents[2] / "examples" / spec.name, spec)
    written = _run([*MODULE, "demo", "--write-data", str(tmp_path / "transactions.parquet")])
    assert written.returncode == 0, written.stderr
    assert "wrote 100,000 synthetic transactions" in written.stdout
    done = _run([*MODULE, "report", str(spec), "--dry-run"])
    assert done.returncode == 0, done.stderr
    assert "== by_region: rho = 0.12 ==" in done.stdout
    assert "dry run: nothing was spent" in done.stdout
    assert done.stderr == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == [spec.name, "transactions.parquet"]


def test_write_data_refuses_other_formats(tmp_path: Path) -> None:
    done = _run([*MODULE, "demo", "--write-data", str(tmp_path / "data.json")])
    assert done.returncode == 2
    assert "--write-data needs a .parquet or .csv path" in done.stderr
    assert "Traceback" not in done.stderr
