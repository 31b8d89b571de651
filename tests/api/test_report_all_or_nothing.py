"""A report spends its whole cost in one step or nothing, and writes its outputs whole.

The command line runs in a subprocess, as a scheduler runs it: interrupts,
concurrent runs on one ledger and a reused output folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import polars as pl
import pytest

import privframe as pf
from privframe.accounting.accountant import Accountant
from privframe.api import report_output
from privframe.api.report import ExitCode, ReportError, SpecError, load_spec, prepare

BUDGET = pf.zCDP(rho=1.0)


def _spec(rho: float, names: tuple[str, ...] = ("by_region", "spread")) -> str:
    queries = "".join(
        f"""
[[queries]]
name = "{name}"
group_by = ["region"]
aggregates = [{{ kind = "count" }}, {{ kind = "mean", column = "amount" }}]
rho = {rho / len(names)!r}
"""
        for name in names
    )
    return f"""
[report]
title = "Weekly"

[data]
path = "data.parquet"
privacy_unit = "user_id"

[budget]
rho = 1.0
ledger = "ledger.sqlite"

[metadata]
amount = {{ bounds = [0, 1000] }}
region = {{ keys = ["north", "south", "east", "west"] }}

[contributions]
max_groups = 3
max_rows_per_group = 5
{queries}"""


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "data.parquet"
    pf.datasets.synthetic_transactions(n_rows=200_000, seed=3).write_parquet(path)
    return path


@pytest.fixture
def folder(tmp_path: Path, data_file: Path) -> Path:
    os.link(data_file, tmp_path / "data.parquet")
    return tmp_path


def _write(folder: Path, text: str, name: str = "spec.toml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def _command(spec: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "privframe", "report", str(spec), "--out", str(out)]


def _spent(folder: Path) -> tuple[Fraction, list[str]]:
    with Accountant(BUDGET, ledger=folder / "ledger.sqlite") as acct:
        return acct.spent.exact_rho, [e.label for e in acct.entries]


def _outputs(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir()) if out.exists() else []


def _leftovers(folder: Path) -> list[str]:
    """Staging folders a run left beside its output."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".out."))


WHOLE = [".privframe-report", "by_region.csv", "report.html", "spread.csv"]


# --------------------------------------------------------------------------- interrupts


@pytest.mark.parametrize("after", ["computing", "[1/2]"])
def test_an_interrupted_report_spends_all_or_nothing_and_exits_cleanly(
    folder: Path, after: str
) -> None:
    # SIGINT once stderr shows a phase: while computing, the run stops and spends
    # nothing (exit 4); once it writes, the charge was made and the run completes.
    spec, out = _write(folder, _spec(0.4)), folder / "out"
    process = subprocess.Popen(
        _command(spec, out), stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if after in line:
            process.send_signal(signal.SIGINT)
            break
    _, rest = process.communicate(timeout=120)
    err = "".join(seen) + rest
    assert "Traceback" not in err
    spent, labels = _spent(folder) if (folder / "ledger.sqlite").exists() else (0, [])
    if process.returncode == ExitCode.OK:
        assert spent == Fraction(2, 5)
        assert labels == ["Weekly/by_region", "Weekly/spread"]
        assert _outputs(out) == WHOLE
        assert "the report was completed first" in err
    else:
        assert process.returncode == ExitCode.FAILED_MIDWAY, err
        assert after == "computing"
        assert "Charged to the ledger: nothing" in err
        assert spent == 0
        assert labels == []
        assert not out.exists()
    assert _leftovers(folder) == []
    if after == "[1/2]":  # the writes run with interrupts held: always completed
        assert process.returncode == ExitCode.OK


def test_an_interrupt_while_computing_charges_nothing(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepared = prepare(load_spec(_write(folder, _spec(0.4))))

    def interrupted(requests: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(prepared.session, "batch", interrupted)
    with pytest.raises(ReportError, match="Charged to the ledger: nothing") as caught:
        prepared.run(folder / "out")
    assert caught.value.charged == ()
    assert caught.value.__context__ is None
    assert _spent(folder) == (0, [])
    assert _leftovers(folder) == []
    assert not (folder / "out").exists()


# --------------------------------------------------------------------------- concurrency


def test_concurrent_reports_on_one_ledger_either_get_their_budget_or_spend_nothing(
    folder: Path,
) -> None:
    # Budget 1.0, two reports of 0.6: both may pass their checks, only one charge fits.
    runs = []
    for name in ("first", "second"):
        spec = _write(folder, _spec(0.6), f"{name}.toml")
        command = _command(spec, folder / f"out-{name}")
        runs.append(subprocess.Popen(command, stderr=subprocess.PIPE, text=True))
    codes = []
    for run in runs:
        _, err = run.communicate(timeout=180)
        assert "Traceback" not in err
        codes.append(run.returncode)
    assert sorted(codes) == [ExitCode.OK, ExitCode.OVER_BUDGET]
    winner, loser = ("first", "second") if codes[0] == ExitCode.OK else ("second", "first")
    assert _spent(folder)[0] == Fraction(3, 5)
    assert _outputs(folder / f"out-{winner}") == WHOLE
    assert not (folder / f"out-{loser}").exists()


def test_a_report_computed_before_another_spends_is_refused_whole(folder: Path) -> None:
    spec = load_spec(_write(folder, _spec(0.6)))
    first, second = prepare(spec), prepare(spec)
    first.run(folder / "out-first")
    with pytest.raises(pf.BudgetExceededError, match="another job spent") as caught:
        second.run(folder / "out-second")
    assert caught.value.__context__ is None
    assert _spent(folder) == (Fraction(3, 5), ["Weekly/by_region", "Weekly/spread"])
    assert not (folder / "out-second").exists()
    assert _leftovers(folder) == []


# --------------------------------------------------------------------------- outputs


def test_a_rerun_replaces_the_output_folder_whole(folder: Path) -> None:
    out = folder / "out"
    first = _write(folder, _spec(0.2, ("by_region", "spread")))
    assert subprocess.run(_command(first, out), capture_output=True).returncode == 0
    second = _write(folder, _spec(0.2, ("by_month",)))
    run = subprocess.run(_command(second, out), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert _outputs(out) == [".privframe-report", "by_month.csv", "report.html"]
    assert "by_month" in (out / "report.html").read_text()
    assert _leftovers(folder) == []


def test_an_output_folder_with_other_files_is_refused_before_anything_is_spent(
    folder: Path,
) -> None:
    out = folder / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    run = subprocess.run(_command(_write(folder, _spec(0.2)), out), capture_output=True, text=True)
    assert run.returncode == ExitCode.INVALID
    assert "holds files that no privframe report wrote" in run.stderr
    assert _outputs(out) == ["notes.txt"]
    assert _spent(folder) == (0, [])


def test_a_write_failing_after_the_charge_keeps_the_old_outputs_and_names_the_new(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = folder / "out"
    prepare(load_spec(_write(folder, _spec(0.2, ("by_month",))))).run(out)
    prepared = prepare(load_spec(_write(folder, _spec(0.2))))
    written = []

    def disk_full(result: pl.DataFrame, target: Path, *, seeded: bool) -> None:
        if written:
            raise OSError(28, "No space left on device")
        written.append(target)
        target.write_text("partial")

    monkeypatch.setattr(report_output, "write_csv", disk_full)
    with pytest.raises(ReportError, match="every entry was released and charged") as caught:
        prepared.run(out)
    assert caught.value.charged == ("Weekly/by_region", "Weekly/spread")
    assert _spent(folder)[1] == ["Weekly/by_month", "Weekly/by_region", "Weekly/spread"]
    # The earlier run's outputs are untouched; what this run wrote is kept, and named.
    assert _outputs(out) == [".privframe-report", "by_month.csv", "report.html"]
    (kept,) = _leftovers(folder)
    assert kept in str(caught.value)
    assert _outputs(folder / kept) == ["by_region.csv"]


def test_an_output_path_that_is_a_file_is_refused(folder: Path) -> None:
    (folder / "out").write_text("a file")
    with pytest.raises(SpecError, match="is a file"):
        prepare(load_spec(_write(folder, _spec(0.2)))).run(folder / "out")
    assert _spent(folder) == (0, [])


# --------------------------------------------------------------------------- spec text


def test_a_spec_with_a_byte_order_mark_reads(folder: Path) -> None:
    path = folder / "spec.toml"
    path.write_bytes(b"\xef\xbb\xbf" + _spec(0.2).encode())
    assert load_spec(path).title == "Weekly"


def test_spec_keys_mixing_strings_and_numbers_are_refused(folder: Path) -> None:
    text = _spec(0.2).replace('"east", "west"]', '"east", 1]')
    with pytest.raises(SpecError, match=r"metadata\.region\.keys mixes strings and numbers"):
        load_spec(_write(folder, text))
