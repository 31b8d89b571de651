"""``privframe synthesize``: a synthetic table from a data file, checked before its one charge."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import privframe as pf
from privframe.accounting.accountant import Accountant
from privframe.api import synthesis
from privframe.api.cli import main
from privframe.api.report import ExitCode

REGIONS = ["north", "south", "east", "west"]
AGES = ["[0, 30)", "[30, 60)", "[60, 120]"]
DOMAINS = 'region = ["north", "south", "east", "west"]\nage = { bins = [0, 30, 60, 120] }\n'


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    pf.datasets.synthetic_transactions(n_rows=2_000, seed=2).write_csv(tmp_path / "data.csv")
    (tmp_path / "domains.toml").write_text(DOMAINS)
    return tmp_path


def _args(folder: Path, *extra: str) -> list[str]:
    return [
        "synthesize",
        str(folder / "data.csv"),
        "--unit",
        "user_id",
        "--max-rows",
        "5",
        "--columns",
        "region,age",
        "--domains",
        str(folder / "domains.toml"),
        *extra,
    ]


def _ledger(folder: Path) -> list[tuple[str, float]]:
    with Accountant(pf.zCDP(1.0), ledger=folder / "ledger.sqlite") as acct:
        return [(e.label, e.rho) for e in acct.entries]


def test_csv_in_csv_out_with_a_ledger(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = folder / "people.csv"
    ledger = ["--budget", "1", "--ledger", str(folder / "ledger.sqlite")]
    args = _args(folder, "--rho", "0.25", "--method", "mst", "--rows", "300", *ledger)
    assert main([*args, "--out", str(out)]) == ExitCode.OK
    assert "wrote 300 synthetic rows (region, age) by MST" in capsys.readouterr().out
    table = pl.read_csv(out)
    assert table.columns == ["region", "age"]
    assert table.height == 300
    assert set(table["region"]) <= set(REGIONS)
    assert set(table["age"]) <= set(AGES)
    assert _ledger(folder) == [("synthesize people.csv", 0.25)]


def test_parquet_out_with_json_domains_and_a_workload(folder: Path) -> None:
    (folder / "domains.json").write_text(
        json.dumps({"region": REGIONS, "month": list(range(1, 13))})
    )
    out = folder / "people.parquet"
    args = _args(folder, "--rho", "1", "--rows", "200", "--out", str(out))
    args[args.index("region,age")] = "region,month"
    args[args.index(str(folder / "domains.toml"))] = str(folder / "domains.json")
    assert main([*args, "--workload", "region,month"]) == ExitCode.OK
    table = pl.read_parquet(out)
    assert table.columns == ["region", "month"]
    assert table.height == 200
    # The CSV's months were read as int64, typed by their domain of whole numbers.
    assert table.schema["month"] == pl.Int64
    assert set(table["month"]) <= set(range(1, 13))


def test_explain_prints_the_plan_and_spends_nothing(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = ["--budget", "1", "--ledger", str(folder / "ledger.sqlite")]
    assert main([*_args(folder, "--rho", "0.5", "--method", "mst", "--explain", *ledger)]) == 0
    out = capsys.readouterr().out
    assert "synthesize (MST): 2 columns, cost zCDP(rho=0.5, delta=0.0)" in out
    assert "explain: nothing was spent; the budget has rho = 1 left" in out
    assert not (folder / "ledger.sqlite").exists()  # a new ledger is made by a spend only


@pytest.mark.parametrize(
    ("domains", "message"),
    [
        ('age = { bins = "x" }', "domains.age.bins must be a non-empty array"),
        ("region = [", "domains.toml' is not valid TOML"),
        ('region = ["north"]\nage = { edges = [0, 1] }', "domains.age: unknown key 'edges'"),
    ],
)
def test_a_bad_domains_file_exits_2_cleanly(
    folder: Path, domains: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "domains.toml").write_text(domains)
    out = folder / "people.csv"
    assert main([*_args(folder, "--rho", "0.5", "--out", str(out))]) == ExitCode.INVALID
    err = capsys.readouterr().err
    assert err.startswith("privframe: error: ")
    assert message in err
    assert "nothing was spent" in err
    assert "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--out", "people.txt"], "write the table as .csv or .parquet"),
        (["--out", "data.csv"], "exists: a paid-for table is never overwritten"),
        (["--out", "nowhere/people.csv"], "does not exist"),
        ([], "give --out PATH"),
        (["--out", "p.csv", "--ledger", "l.sqlite"], "give it with --budget RHO"),
        (["--out", "p.csv", "--columns", "region,nope"], "columns ['nope'] are not in the data"),
    ],
)
def test_refusals_before_the_charge_exit_2(
    folder: Path,
    extra: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(folder)
    assert main([*_args(folder, "--rho", "0.5"), *extra]) == ExitCode.INVALID
    assert message in capsys.readouterr().err
    assert not (folder / "l.sqlite").exists()
    assert not (folder / "p.csv").exists()


def test_over_budget_exits_3_and_spends_nothing(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = ["--budget", "1", "--ledger", str(folder / "ledger.sqlite"), "--method", "mst"]
    first = _args(folder, "--rho", "0.75", "--out", str(folder / "a.csv"), *ledger)
    assert main(first) == ExitCode.OK
    second = _args(folder, "--rho", "0.5", "--out", str(folder / "b.csv"), *ledger)
    assert main(second) == ExitCode.OVER_BUDGET
    assert "nothing was spent" in capsys.readouterr().err
    assert _ledger(folder) == [("synthesize a.csv", 0.75)]
    assert not (folder / "b.csv").exists()


def test_a_failure_after_the_charge_exits_4_and_says_so(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: object) -> None:
        raise pf.InvalidValueError("the estimator failed")

    monkeypatch.setattr(synthesis, "mst", broken)
    args = _args(folder, "--rho", "0.5", "--method", "mst", "--out", str(folder / "p.csv"))
    assert main(args) == ExitCode.FAILED_MIDWAY
    err = capsys.readouterr().err
    assert "rho = 0.5 was charged, but making or writing the table failed" in err
    assert "the estimator failed" in err


def test_rows_are_people_needs_no_row_limit(folder: Path) -> None:
    out = folder / "p.csv"
    args = [
        "synthesize",
        str(folder / "data.csv"),
        "--rows-are-people",
        "--columns",
        "region",
        "--domains",
        str(folder / "domains.toml"),
        "--rho",
        "0.5",
        "--method",
        "mst",
        "--rows",
        "50",
        "--out",
        str(out),
    ]
    (folder / "domains.toml").write_text('region = ["north", "south", "east", "west"]\n')
    assert main(args) == ExitCode.OK
    assert pl.read_csv(out).height == 50


def test_the_domains_file_may_list_columns_not_synthesized(folder: Path) -> None:
    (folder / "domains.toml").write_text(DOMAINS + "month = [1, 2, 3]\n")
    out = folder / "p.csv"
    assert main(_args(folder, "--rho", "0.5", "--method", "mst", "--out", str(out))) == 0
    assert pl.read_csv(out).columns == ["region", "age"]


def test_a_unit_or_rows_are_people_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["synthesize", "data.csv", "--rho", "1"])
    assert exited.value.code == 2
    assert "one of the arguments --unit --rows-are-people is required" in capsys.readouterr().err
