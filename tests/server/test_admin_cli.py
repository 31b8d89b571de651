"""``privframe admin``: analysts, tokens, grants and budgets from the command line, end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from postgres_service import database_url, postgres_url  # noqa: F401  (fixtures)

import privframe as pf
from privframe.api.server.admin import main
from privframe.api.server.store import Store


def _config(folder: Path, database: str) -> str:
    path = folder / "serve.toml"
    path.write_text(
        f"[server]\ndatabase = {database!r}\n"
        '[datasets.sales]\ndata = "sales.parquet"\nprivacy_unit = "customer"\n'
        '[datasets.visits]\ndata = "visits.parquet"\nprivacy_unit = "customer"\n'
    )
    return str(path)


def _admin(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _token(out: str) -> str:
    return out.splitlines()[0].rsplit(" ", 1)[1]


def test_admin_manages_analysts_grants_and_budgets(
    tmp_path: Path,
    database_url: str,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = _config(tmp_path, database_url)
    code, out, _ = _admin(capsys, config, "add-analyst", "alice")
    assert code == 0
    assert "shown only now" in out
    first = _token(out)
    assert _admin(capsys, config, "grant", "alice", "sales", "--rho", "1/3")[0] == 0
    code, out, _ = _admin(capsys, config, "top-up", "alice", "sales", "--rho", "0.1")
    assert code == 0
    assert "rho=0.433333" in out
    assert (
        _admin(capsys, config, "set-budget", "alice", "sales", "--rho", "2", "--delta", "1e-6")[0]
        == 0
    )
    assert _admin(capsys, config, "add-analyst", "bob")[0] == 0
    code, out, _ = _admin(capsys, config, "list")
    assert code == 0
    assert [line.split() for line in out.splitlines()] == [
        ["analyst", "dataset", "budget", "rho", "spent", "rho", "remaining", "rho", "budget",
         "delta", "spent", "delta"],
        ["alice", "sales", "2", "0", "2", "1e-06", "0"],
        ["bob", "-", "-", "-", "-", "-", "-"],
    ]  # fmt: skip
    assert "pf_" not in out
    code, out, _ = _admin(capsys, config, "token", "alice")
    second = _token(out)
    assert _admin(capsys, config, "revoke", "bob")[0] == 0
    with Store(database_url) as store:
        assert store.authenticate(first) is None
        assert store.authenticate(second) == "alice"
        assert store.budget("alice", "sales") == pf.zCDP(2, 1e-6)
        actions = [(r.analyst, r.action, r.status) for r in store.audit_records()]
    assert actions == [
        ("alice", "admin:add-analyst", 200),
        ("alice", "admin:grant", 200),
        ("alice", "admin:top-up", 200),
        ("alice", "admin:set-budget", 200),
        ("bob", "admin:add-analyst", 200),
        ("alice", "admin:token", 200),
        ("bob", "admin:revoke", 200),
    ]
    code, out, _ = _admin(capsys, config, "audit", "--limit", "2")
    assert code == 0
    assert [line.split()[1:3] for line in out.splitlines()] == [
        ["alice", "admin:token"],
        ["bob", "admin:revoke"],
    ]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "the following arguments are required"),
        (["{config}"], "required: command"),
        (["{config}", "promote", "alice"], "invalid choice"),
        (["{config}", "grant", "alice", "sales", "--rho", "lots"], "expected a number"),
        (["{config}", "grant", "alice", "sales", "--rho", "-1"], "rho must be >= 0"),
        (
            ["{config}", "grant", "alice", "sales", "--rho", "1", "--delta", "1"],
            "delta must be < 1",
        ),
        (["{config}", "grant", "alice", "sales"], "--rho"),
        (["{config}", "grant", "alice", "payroll", "--rho", "1"], "'payroll' is not in"),
        (["{config}", "grant", "carol", "sales", "--rho", "1"], "no analyst 'carol'"),
        (["{config}", "grant", "alice", "sales", "--rho", "1"], "already"),
        (["{config}", "top-up", "alice", "visits", "--rho", "1"], "no grant"),
        (["{config}", "add-analyst", "alice"], "exists already"),
        (["{config}", "add-analyst", "bad name!"], "not a valid name"),
        (["{config}", "token", "carol"], "no analyst 'carol'"),
        (["{config}", "audit", "--limit", "0"], "whole number >= 1"),
        (["{folder}/missing.toml", "list"], "missing.toml"),
    ],
)
def test_admin_refuses_bad_input_in_one_line_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    config = _config(tmp_path, str(tmp_path / "server.db"))
    assert _admin(capsys, config, "add-analyst", "alice")[0] == 0
    assert _admin(capsys, config, "grant", "alice", "sales", "--rho", "1")[0] == 0
    argv = [a.format(config=config, folder=tmp_path) for a in argv]
    code, out, err = _admin(capsys, *argv)
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("privframe admin: error: ")
    assert says in err


def test_a_refused_admin_change_is_audited_as_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    database = str(tmp_path / "server.db")
    config = _config(tmp_path, database)
    assert _admin(capsys, config, "token", "carol")[0] == 2
    with Store(database) as store:
        [record] = store.audit_records()
    assert (record.analyst, record.action, record.status) == ("carol", "admin:token", 400)
    assert record.detail == "InvalidValueError"


def test_privframe_admin_runs_from_the_command_line(tmp_path: Path) -> None:
    config = _config(tmp_path, str(tmp_path / "server.db"))
    done = subprocess.run(
        [sys.executable, "-m", "privframe", "admin", config, "add-analyst", "alice"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Token for analyst 'alice': pf_" in done.stdout
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "privframe",
            "admin",
            config,
            "grant",
            "alice",
            "sales",
            "--rho",
            "x",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "expected a number" in done.stderr
