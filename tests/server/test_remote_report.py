"""``privframe report spec.toml --server URL``: a scripted report run on a server's dataset.

The spec names the dataset (``[data] dataset = ...``) instead of a file and a
ledger; the analyst's token comes from PRIVFRAME_TOKEN; the report is charged
to the analyst's budget on the server in one step, as a local report is to
its ledger.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_setup import DATASET, ServerProcess, add_analyst, write_config

import privframe as pf
from privframe.api.report import ExitCode, load_spec
from privframe.api.report_spec import SpecError
from privframe.api.server.config import load_config
from privframe.api.server.store import Store


def _spec(folder: Path, rho: float, data: str = f'dataset = "{DATASET}"') -> Path:
    path = folder / "weekly.toml"
    path.write_text(
        f"""
[report]
title = "Weekly"
[data]
{data}
[contributions]
max_groups = 3
max_rows_per_group = 5
[[queries]]
name = "by_region"
group_by = ["region"]
keys = ["north", "south", "east", "west"]
aggregates = [{{ kind = "count" }}, {{ kind = "mean", column = "amount", bounds = [0, 1000] }}]
rho = {rho / 2!r}
[[queries]]
name = "sql_count"
sql = "SELECT region, COUNT(*) AS n FROM data GROUP BY region ORDER BY n DESC"
rho = {rho / 2!r}
"""
    )
    return path


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[ServerProcess, str]]:
    config = write_config(tmp_path)
    token = add_analyst(load_config(config).database, "alice", 1.0)
    with ServerProcess(config) as server:
        yield server, token


def _report(
    spec: Path, server: str | None, token: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "privframe", "report", str(spec), "--no-progress", *extra]
    if server is not None:
        command += ["--server", server]
    env = {**os.environ, "PRIVFRAME_TOKEN": token}
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow
def test_a_report_runs_on_the_server_and_is_charged_to_the_analyst(
    running: tuple[ServerProcess, str], tmp_path: Path
) -> None:
    server, token = running
    spec = _spec(tmp_path, 0.75)
    dry = _report(spec, server.url, token, "--dry-run")
    assert dry.returncode == ExitCode.OK, dry.stderr
    assert "nothing was spent" in dry.stdout
    sess = pf.connect(server.url, DATASET, token, results="polars")
    assert sess.spent == pf.zCDP(0)
    run = _report(spec, server.url, token, "--out", str(tmp_path / "out"))
    assert run.returncode == ExitCode.OK, run.stderr
    assert sorted(p.name for p in (tmp_path / "out").glob("*.csv")) == [
        "by_region.csv",
        "sql_count.csv",
    ]
    assert "Weekly" in (tmp_path / "out" / "report.html").read_text()
    assert [e.label for e in sess.ledger] == ["Weekly/by_region", "Weekly/sql_count"]
    assert sess.spent == pf.zCDP(0.75)
    over = _report(spec, server.url, token, "--out", str(tmp_path / "again"))
    assert over.returncode == ExitCode.OVER_BUDGET, over.stderr
    assert "your budget on the server's dataset 'transactions'" in over.stderr
    assert sess.spent == pf.zCDP(0.75)
    sess.close()


def test_a_spec_and_the_server_flag_must_agree(
    running: tuple[ServerProcess, str], tmp_path: Path
) -> None:
    server, token = running
    remote = _report(_spec(tmp_path, 0.5), None, token)
    assert remote.returncode == ExitCode.INVALID
    assert "give --server URL" in remote.stderr
    local = _spec(tmp_path, 0.5, 'path = "data.parquet"\nprivacy_unit = "user_id"')
    local.write_text(local.read_text() + '[budget]\nrho = 1.0\nledger = "l.sqlite"\n')
    refused = _report(local, server.url, token)
    assert refused.returncode == ExitCode.INVALID
    assert "this spec reads a file" in refused.stderr
    wrong_token = _report(_spec(tmp_path, 0.5), server.url, "pf_wrong")
    assert wrong_token.returncode == ExitCode.INVALID
    assert "bearer token" in wrong_token.stderr


def test_a_spec_for_a_server_keeps_no_budget_or_seed(tmp_path: Path) -> None:
    spec = _spec(tmp_path, 0.5)
    assert load_spec(spec).dataset == DATASET
    spec.write_text(spec.read_text() + "[budget]\nrho = 1.0\n")
    with pytest.raises(SpecError, match="remove \\[budget\\]"):
        load_spec(spec)
    seeded = _spec(tmp_path, 0.5)
    seeded.write_text(seeded.read_text().replace('title = "Weekly"', 'title = "W"\nseed = 3'))
    with pytest.raises(SpecError, match="draws its own noise"):
        load_spec(seeded, allow_seeded_noise=True)


@pytest.mark.slow
def test_a_report_in_epsilon_runs_on_a_pure_dp_grant_and_not_on_a_zcdp_one(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    database = load_config(config).database
    with Store(database) as store:
        pure = store.add_analyst("bob")
        store.grant("bob", DATASET, pf.PureDP(1.0))
    zcdp = add_analyst(database, "alice", 1.0)
    spec = _spec(tmp_path, 0.75)
    spec.write_text(spec.read_text().replace("rho = ", "epsilon = "))
    assert load_spec(spec).spending.parameter == "epsilon"
    with ServerProcess(config) as server:
        run = _report(spec, server.url, pure, "--out", str(tmp_path / "out"))
        assert run.returncode == ExitCode.OK, run.stderr
        sess = pf.connect(server.url, DATASET, pure, results="polars")
        assert [e.label for e in sess.ledger] == ["Weekly/by_region", "Weekly/sql_count"]
        assert sess.spent == pf.PureDP(0.75)
        sess.close()
        refused = _report(spec, server.url, zcdp)
        assert refused.returncode == ExitCode.INVALID
        assert "is a zCDP budget, whose releases spend rho" in refused.stderr
        (tmp_path / "rho").mkdir()
        wrong = _report(_spec(tmp_path / "rho", 0.5), server.url, pure)
        assert wrong.returncode == ExitCode.INVALID
        assert "is a PureDP budget, whose releases spend epsilon" in wrong.stderr
