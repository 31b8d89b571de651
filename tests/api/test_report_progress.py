"""A report shows "queries: i of n" while it computes, never a data value; --no-progress hides it.

The bar and the log records come from ``pf.progress`` (tests/test_progress.py);
here: what a report run emits, in what order, and that its exit codes and
outputs stay the same with progress shown or turned off.
"""

from __future__ import annotations

import io
import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import privframe as pf
from privframe.api.cli import main
from privframe.api.report import ExitCode, ReportError, load_spec, prepare
from privframe.engines.polars import PolarsEngine

# Seeded reports, so that runs with and without progress can be compared byte for byte.
pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

LOGGER = "privframe.progress"
QUERIES = ("by_region", "amounts", "adults")

SPEC = """
[report]
title = "Weekly"
seed = 7

[data]
path = "data.parquet"
privacy_unit = "user_id"

[budget]
rho = 1.0
ledger = "ledger.sqlite"

[metadata]
amount = { bounds = [0, 1000] }
region = { keys = ["north", "south", "east", "west"] }

[contributions]
max_groups = 3
max_rows_per_group = 5

[[queries]]
name = "by_region"
group_by = ["region"]
aggregates = [{ kind = "count" }, { kind = "mean", column = "amount" }]
rho = 0.1

[[queries]]
name = "amounts"
aggregates = [{ kind = "median", column = "amount", candidates = 101 }]
rho = 0.1

[[queries]]
name = "adults"
sql = "SELECT region, SUM(amount) AS spend FROM data WHERE age >= 18 GROUP BY region"
rho = 0.1
"""


class FakeTerminal(io.StringIO):
    """A stderr that says it is a terminal and keeps what was drawn."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "data.parquet"
    pf.datasets.synthetic_transactions(n_rows=5_000, seed=2).write_parquet(path)
    return path


@pytest.fixture(autouse=True)
def automatic(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("PRIVFRAME_PROGRESS", "TQDM_DISABLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # off a terminal, also under pytest -s
    pf.progress.set_enabled(None)
    yield
    pf.progress.set_enabled(None)


def _spec(folder: Path, data_file: Path) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "data.parquet").write_bytes(data_file.read_bytes())
    path = folder / "spec.toml"
    path.write_text(SPEC)
    return path


def _report(folder: Path, data_file: Path, *flags: str) -> int:
    spec = _spec(folder, data_file)
    return main(["report", str(spec), "--out", str(folder / "out"), "--allow-seeded-noise", *flags])


def _outputs(folder: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes() for p in sorted((folder / "out").iterdir()) if p.suffix == ".csv"
    }


def test_a_report_logs_query_i_of_n_while_it_computes(
    tmp_path: Path, data_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    report = prepare(load_spec(_spec(tmp_path, data_file), allow_seeded_noise=True))
    # The run's stderr lines and the log records in one stream, in the order they came.
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logging.getLogger(LOGGER).addHandler(handler)
    try:
        report.run(tmp_path / "out", progress=stream)
    finally:
        logging.getLogger(LOGGER).removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert lines[:5] == [
        "computing 3 queries (nothing is charged yet) ...",
        "queries: step 1 of 3",
        "queries: step 2 of 3",
        "queries: step 3 of 3",
        "charging rho = 0.3 to the ledger in one step",
    ]
    assert lines[5].startswith("[1/3] by_region")


def test_report_progress_holds_only_step_counts(
    tmp_path: Path, data_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, every level
    assert _report(tmp_path, data_file) == ExitCode.OK
    shown = [r.getMessage() for r in caplog.records if r.name.startswith("privframe")]
    assert shown == [f"queries: step {i} of 3" for i in (1, 2, 3)]


def test_a_terminal_shows_the_queries_bar_and_the_same_lines(
    tmp_path: Path, data_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert _report(tmp_path, data_file) == ExitCode.OK
    drawn = [
        part for part in re.split(r"[\r\n]", terminal.getvalue()) if part.startswith("queries")
    ]
    # Every drawing of the bar: its label, a percentage, the bar, i/3, times and a rate.
    bar = re.compile(r"queries:\s+\d+%\|[^|]*\| ([0-3])/3 \[[\d:?<]+, [^\]]*\]\s*")
    counts = [int(match[1]) if (match := bar.fullmatch(part)) else None for part in drawn]
    assert counts[:4] == [0, 1, 2, 3]
    assert set(counts) == {0, 1, 2, 3}, drawn  # every drawing fully matched
    assert "[3/3] adults: rho = 0.1 ... done" in terminal.getvalue()


def test_no_progress_shows_nothing_and_changes_no_output(
    tmp_path: Path,
    data_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    shown = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", shown)
    assert _report(tmp_path / "shown", data_file) == ExitCode.OK
    shown_out = capsys.readouterr().out

    hidden = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", hidden)
    caplog.clear()
    assert _report(tmp_path / "hidden", data_file, "--no-progress") == ExitCode.OK
    assert "queries:" not in hidden.getvalue()
    assert [r for r in caplog.records if r.name == LOGGER] == []
    # Seeded, so the released tables are the same; the stderr lines are the bar's only difference.
    assert capsys.readouterr().out.replace("hidden", "shown") == shown_out
    assert _outputs(tmp_path / "hidden") == _outputs(tmp_path / "shown")
    without_bar = [line for line in re.split(r"[\r\n]", shown.getvalue()) if "queries:" not in line]
    assert [line for line in without_bar if line] == hidden.getvalue().splitlines()

    # Only that run: progress is on again afterwards.
    with pf.progress.steps("queries", 2) as advance:
        advance()
    assert "| 1/2 " in hidden.getvalue()


def test_a_report_stopped_while_computing_closes_its_bar_and_charges_nothing(
    tmp_path: Path, data_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = prepare(load_spec(_spec(tmp_path, data_file), allow_seeded_noise=True))
    aggregate = PolarsEngine.aggregate
    calls = []

    def stopped_at_the_second(engine: PolarsEngine, spec: object) -> object:
        calls.append(spec)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return aggregate(engine, spec)

    monkeypatch.setattr(PolarsEngine, "aggregate", stopped_at_the_second)
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with pytest.raises(ReportError, match="Charged to the ledger: nothing"):
        report.run(tmp_path / "out")
    bar = terminal.getvalue().split("computing 3 queries (nothing is charged yet) ...\n")[1]
    assert bar.endswith("\n")  # closed, and left where it stopped
    assert "| 1/3 " in bar.rstrip("\n").rsplit("\r", 1)[-1]
    assert report.session.spent == pf.zCDP(0)
