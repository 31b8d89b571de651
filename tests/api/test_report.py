"""``privframe report``: a spec checked as a whole, released to CSV and HTML, with exit codes."""

from __future__ import annotations

import dataclasses
import io
import re
import shutil
import sys
import warnings
import xml.etree.ElementTree as ET
from fractions import Fraction
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from browser_setup import chromium, rendered, screenshot

import privframe as pf
from privframe.accounting.accountant import Accountant
from privframe.api.cli import main
from privframe.api.report import ExitCode, SpecError, load_spec
from privframe.api.spec_values import spec_budget

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "report_spec.toml"
SVG = "{http://www.w3.org/2000/svg}"
BUDGET = pf.zCDP(rho=1.0, delta=1e-6)
REGIONS = ["north", "south", "east", "west"]

SPEC = """
[report]
title = "Weekly"
rho = 0.4

[data]
path = "data.parquet"
privacy_unit = "user_id"

[budget]
rho = 1.0
delta = 1e-6
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
aggregates = [{ kind = "count" }, { kind = "mean", column = "amount", alias = "avg_amount" }]
share = 0.5

[[queries]]
name = "months"
group_by = ["month"]
aggregates = [{ kind = "count_distinct" }]
rho = 0.1
delta = 2e-7

[[queries]]
name = "spread"
group_by = ["region"]
keys = ["north", "south"]
aggregates = [
  { kind = "median", column = "amount", candidates = 101 },
  { kind = "sum", column = "amount", bounds = [-10, 500] },
]
share = 0.25
"""


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "data.parquet"
    pf.datasets.synthetic_transactions(n_rows=20_000, seed=1).write_parquet(path)
    return path


@pytest.fixture
def folder(tmp_path: Path, data_file: Path) -> Path:
    shutil.copy(data_file, tmp_path / "data.parquet")
    return tmp_path


def _spec(folder: Path, text: str = SPEC) -> Path:
    path = folder / "spec.toml"
    path.write_text(text)
    return path


def _labels(folder: Path) -> list[str]:
    with Accountant(BUDGET, ledger=folder / "ledger.sqlite") as acct:
        return [e.label for e in acct.entries]


def _run(folder: Path, *args: str, text: str = SPEC) -> int:
    return main(["report", str(_spec(folder, text)), "--out", str(folder / "out"), *args])


# --------------------------------------------------------------------------- success


def test_report_releases_writes_and_charges(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(folder) == ExitCode.OK
    captured = capsys.readouterr()
    assert "[1/3] by_region: rho = 0.2 ... done" in captured.err
    assert "[2/3] months: rho = 0.1, delta = 2e-07 ... done" in captured.err
    assert "[3/3] spread: rho = 0.1 ... done" in captured.err
    assert "3 queries released for rho = 0.4" in captured.out

    out = folder / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        ".privframe-report",
        "by_region.csv",
        "months.csv",
        "report.html",
        "spread.csv",
    ]
    by_region = pl.read_csv(out / "by_region.csv")
    assert by_region["region"].to_list() == REGIONS
    assert by_region.columns == [
        "region",
        "count",
        "count_std",
        "count_ci95",
        "avg_amount",
        "avg_amount_std",
        "avg_amount_ci95",
    ]
    spread = pl.read_csv(out / "spread.csv")
    assert spread.columns == [
        "region",
        "amount_median",
        "amount_median_rank_ci95",
        "amount_sum",
        "amount_sum_std",
        "amount_sum_ci95",
    ]
    assert spread["region"].to_list() == ["north", "south"]
    assert set(pl.read_csv(out / "months.csv")["month"].to_list()) <= set(range(1, 13))

    with Accountant(BUDGET, ledger=folder / "ledger.sqlite") as acct:
        entries = acct.entries
        assert [e.label for e in entries] == ["Weekly/by_region", "Weekly/months", "Weekly/spread"]
        assert [e.rho for e in entries] == pytest.approx([0.2, 0.1, 0.1])
        assert all(e.rho <= asked for e, asked in zip(entries, [0.2, 0.1, 0.1], strict=True))
        assert [e.delta for e in entries] == [0.0, 2e-7, 0.0]
        assert not any(e.seeded for e in entries)
        report = acct.report()
    assert report.spent_rho == pytest.approx(0.4)
    assert report.remaining_rho == pytest.approx(0.6)
    assert report.remaining_delta == pytest.approx(8e-7)

    page = (out / "report.html").read_text()
    root = ET.fromstring(page.split("\n", 1)[1])
    assert "<h1>Weekly</h1>" in page
    assert "Weekly/months" in page
    assert f"rho spent {report.spent_rho:.6g} of 1 ({report.remaining_rho:.6g} remaining)" in page
    assert "chosen privately (spends δ)" in page
    assert "<td>north</td><td>" in page
    charts = root.iter(f"{SVG}svg")
    bars = [len(svg.findall(f"{SVG}rect")) for svg in charts if svg.get("class") == "pf-chart"]
    assert bars[0] == 4
    assert bars[2] == 2


def test_example_spec_runs_until_its_budget_is_spent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As docs/reports.md says: copy the spec, write the demo data beside it, run it.
    spec = tmp_path / EXAMPLE.name
    shutil.copy(EXAMPLE, spec)
    assert main(["demo", "--write-data", str(tmp_path / "transactions.parquet")]) == 0
    assert main(["report", str(spec), "--dry-run"]) == ExitCode.OK
    assert not (tmp_path / "transactions.sqlite").exists()
    # rho = 0.3 a run of a budget of 1: three runs fit, the fourth does not.
    for _ in range(3):
        assert main(["report", str(spec)]) == ExitCode.OK
    capsys.readouterr()
    assert main(["report", str(spec)]) == ExitCode.OVER_BUDGET
    err = capsys.readouterr().err
    assert "needs rho = 0.3, delta = 2e-07 but the ledger" in err
    assert "nothing was spent" in err
    default_out = tmp_path / "report_spec-report"
    assert (default_out / "report.html").is_file()
    assert len(list(default_out.glob("*.csv"))) == 4


def test_example_spec_runs_on_the_demo_data_written_as_csv(tmp_path: Path) -> None:
    # Its metadata declares the types a CSV's text is read as (parquet has them already).
    spec = tmp_path / EXAMPLE.name
    spec.write_text(EXAMPLE.read_text().replace("transactions.parquet", "transactions.csv"))
    assert main(["demo", "--rows", "2000", "--write-data", str(tmp_path / "transactions.csv")]) == 0
    assert main(["report", str(spec), "--out", str(tmp_path / "out")]) == ExitCode.OK
    assert pl.read_csv(tmp_path / "out" / "by_region.csv")["region"].to_list() == REGIONS


def test_dry_run_spends_nothing(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(folder, "--dry-run") == ExitCode.OK
    out = capsys.readouterr().out
    assert "== by_region: rho = 0.2 ==" in out
    assert "sensitivity" in out
    assert "3 queries, rho = 0.4, delta = 2e-07 in total; the ledger has rho = 1" in out
    assert "dry run: nothing was spent" in out
    assert not (folder / "ledger.sqlite").exists()
    assert not (folder / "out").exists()
    # With a ledger that has entries: still nothing added.
    assert _run(folder) == ExitCode.OK
    assert _run(folder, "--dry-run") == ExitCode.OK
    assert "the ledger has rho = 0.6" in capsys.readouterr().out
    assert len(_labels(folder)) == 3


def test_a_total_row_leaves_quantiles_and_distinct_counts_empty(folder: Path) -> None:
    # No measurement gives a quantile or distinct count over all groups: the total row has
    # none, and the outputs are written with it missing (a TypeError once, after the charge).
    spread = 'name = "spread"\ngroup_by = ["region"]\n'
    text = SPEC.replace(spread, spread + "total = true\n").replace(
        'aggregates = [{ kind = "count_distinct" }]',
        'aggregates = [{ kind = "count_distinct" }]\ntotal = true',
    )
    assert text.count("total = true") == 2
    assert _run(folder, text=text) == ExitCode.OK
    out = folder / "out"
    spread_csv = pl.read_csv(out / "spread.csv")
    assert spread_csv["region"].to_list() == ["north", "south", None]
    total = spread_csv.row(2, named=True)
    assert total["amount_median"] is None
    assert total["amount_median_rank_ci95"] is None
    assert total["amount_sum"] is not None
    months = pl.read_csv(out / "months.csv")
    assert months["month"][-1] is None
    assert months["count_distinct"][-1] is None
    assert "<tr><td></td><td></td>" in (out / "report.html").read_text()


SEEDED = SPEC.replace("rho = 0.4\n", "rho = 0.4\nseed = 7\n", 1)


def test_a_seed_alone_is_refused_before_anything_is_spent(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(folder, text=SEEDED) == ExitCode.INVALID
    captured = capsys.readouterr()
    assert "[report] seed" in captured.err
    assert "--allow-seeded-noise" in captured.err
    assert "NOT PRIVATE" not in captured.out
    assert not (folder / "ledger.sqlite").exists()
    assert not (folder / "out").exists()
    # The same two-key rule in Python: load_spec, and a ReportSpec built directly.
    with pytest.raises(SpecError, match="allow_seeded_noise=True"):
        load_spec(folder / "spec.toml")
    spec = load_spec(folder / "spec.toml", allow_seeded_noise=True)
    with pytest.raises(SpecError, match="seed"):
        dataclasses.replace(spec, allow_seeded_noise=False)


def test_seeded_reports_say_not_private_first_are_flagged_and_reproducible(
    tmp_path: Path, data_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tables = []
    for run in ("a", "b"):
        folder = tmp_path / run
        folder.mkdir()
        shutil.copy(data_file, folder / "data.parquet")
        with pytest.warns(pf.SeededRandomnessWarning):
            assert _run(folder, "--allow-seeded-noise", text=SEEDED) == ExitCode.OK
        captured = capsys.readouterr()
        assert captured.out.startswith("NOT PRIVATE: ")
        assert captured.err.startswith("NOT PRIVATE: ")
        out = folder / "out"
        for csv in out.glob("*.csv"):
            assert csv.read_text().startswith("# NOT PRIVATE: "), csv.name
        assert pl.read_csv(out / "by_region.csv", comment_prefix="#")["region"].to_list() == REGIONS
        tables.append((out / "by_region.csv").read_text())
        page = (out / "report.html").read_text()
        assert page.startswith("<!-- NOT PRIVATE: ")
        assert page.split("\n", 1)[1].startswith("<!DOCTYPE html>")
        assert "Some releases in this report used seeded randomness" in page
        with Accountant(BUDGET, ledger=folder / "ledger.sqlite") as acct:
            assert all(e.seeded for e in acct.entries)
    assert tables[0] == tables[1]


def test_a_seeded_dry_run_says_not_private_first(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(folder, "--dry-run", "--allow-seeded-noise", text=SEEDED) == ExitCode.OK
    assert capsys.readouterr().out.startswith("NOT PRIVATE: ")
    assert not (folder / "ledger.sqlite").exists()


def test_unseeded_outputs_carry_no_not_private_line(folder: Path) -> None:
    assert _run(folder, "--allow-seeded-noise") == ExitCode.OK
    out = folder / "out"
    assert (out / "by_region.csv").read_text().startswith("region,")
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('title = "Weekly"', 'title = "Weekly"\ncolour = "red"', "report: unknown key 'colour'"),
        ('title = "Weekly"\n', "", "report: missing the required key 'title'"),
        ("[contributions]\n", "[contributions]\nmax_row = 2\n", "unknown key 'max_row'"),
        ("max_groups = 3", "max_groups = 3.5", "contributions.max_groups must be a whole number"),
        ("rho = 1.0\ndelta = 1e-6", "rho = 1.0\nmu = 1.0", "budget: give rho"),
        ("rho = 1.0\ndelta = 1e-6", "epsilon = 1.0\nmu = 1.0", "budget: give rho"),
        ("rho = 1.0\ndelta = 1e-6", "epsilon = 1.0\nselection_delta = 1e-7", "budget: give rho"),
        ("rho = 1.0\ndelta = 1e-6", "rho = -1.0", "budget.rho must be > 0"),
        ('ledger = "ledger.sqlite"\n', "", "budget: missing the required key 'ledger'"),
        ("bounds = [0, 1000]", "bounds = [0]", "metadata.amount.bounds must be [lower, upper]"),
        ("bounds = [0, 1000]", 'bounds = [0, "x"]', "metadata.amount.bounds[1] must be"),
        ('name = "months"', 'name = "by_region"', "the names ['by_region'] are used twice"),
        ('name = "months"', 'name = "../months"', "must be letters, digits"),
        ("share = 0.5", "share = 0.5\nrho = 0.1", "give exactly one of rho and share"),
        ("share = 0.5", "share = 0.9", "the shares add up to 1.15, more than 1"),
        ("rho = 0.1\ndelta", "rho = 0.3\ndelta", "ask for rho = 0.6 in total"),
        ('{ kind = "count_distinct" }', '{ kind = "mode" }', "kind must be one of count"),
        ('{ kind = "count" }', '{ kind = "count", column = "amount" }', "unknown key 'column'"),
        (
            'kind = "median", column = "amount",',
            'kind = "median", column = "age",',
            "give bounds = [lower, upper], or metadata.age.bounds",
        ),
        (
            'kind = "median", column = "amount",',
            'kind = "quantile", column = "amount",',
            "missing the required key 'q'",
        ),
        ("bounds = [-10, 500]", "bounds = [500, -10]", "lower < upper"),
        ('keys = ["north", "south"]', 'keys = ["north", "north"]', "duplicate"),
        ('keys = ["north", "south"]', "keys = { month = [1] }", "unknown key 'month'"),
        ('group_by = ["month"]', 'group_by = ["month"]\nsql = "SELECT 1"', "not both"),
        ("[[queries]]", "[[queries]]\n[[queries]]", "missing the required key 'name'"),
        ("[report]", "[report", "is not valid TOML"),
        ("share = 0.25", 'share = 0.25\nclamp = "yes"', "clamp must be true or false"),
        ('group_by = ["month"]\n', "total = true\n", "total adds a row for all groups together"),
    ],
)
def test_invalid_specs_exit_2_and_spend_nothing(
    folder: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, message: str
) -> None:
    assert old in SPEC
    assert _run(folder, text=SPEC.replace(old, new, 1)) == ExitCode.INVALID
    err = capsys.readouterr().err
    assert err.startswith("privframe: error: ")
    assert message in err
    assert not (folder / "ledger.sqlite").exists()
    assert not (folder / "out").exists()


def test_missing_spec_and_data_exit_2(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(folder / "nope.toml")]) == ExitCode.INVALID
    assert "cannot read the spec" in capsys.readouterr().err
    (folder / "data.parquet").unlink()
    assert _run(folder) == ExitCode.INVALID
    assert "no data file at" in capsys.readouterr().err


def test_queries_that_do_not_plan_exit_2_and_are_all_named(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = SPEC.replace('"sum", column = "amount"', '"sum", column = "amout"')
    text = text.replace("delta = 2e-7\n", "")
    assert _run(folder, text=text) == ExitCode.INVALID
    err = capsys.readouterr().err
    assert "query 'spread': sum column 'amout' is not in the data" in err
    assert "query 'months' chooses its groups privately, which spends delta" in err
    assert not (folder / "ledger.sqlite").exists()


def test_over_budget_exits_3_and_spends_nothing(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Accountant(BUDGET, ledger=folder / "ledger.sqlite") as other:
        other.spend(pf.zCDP(0.7), label="another job")
    assert _run(folder) == ExitCode.OVER_BUDGET
    err = capsys.readouterr().err
    assert "report 'Weekly' needs rho = 0.4, delta = 2e-07 but the ledger" in err
    assert "has rho = 0.3, delta = 1e-06 left; nothing was spent" in err
    assert "by_region (rho = 0.2)" in err
    assert _labels(folder) == ["another job"]
    assert not (folder / "out").exists()
    # delta alone can be what does not fit.
    text = SPEC.replace("delta = 2e-7", "delta = 2e-6")
    assert main(["report", str(_spec(folder, text)), "--dry-run"]) == ExitCode.OVER_BUDGET


class _AnotherJob(io.StringIO):
    """stderr, where another job spends the rest of the shared ledger once the first query is done.

    That is the realistic race of two scheduled reports on one ledger: both
    checks pass, then the other job's spend lands between two releases.
    """

    def __init__(self, ledger: Path) -> None:
        super().__init__()
        self.ledger = ledger
        self.spent = False

    def write(self, text: str) -> int:
        if text.startswith("charging") and not self.spent:
            self.spent = True
            with Accountant(BUDGET, ledger=self.ledger) as other:
                other.spend(other.remaining, label="another job")
        return super().write(text)


def test_a_job_spending_between_the_checks_and_the_charge_leaves_the_report_uncharged(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another job takes the whole budget once the queries are computed: the report's
    # single charge is refused, so it spends nothing and writes nothing.
    stderr = _AnotherJob(folder / "ledger.sqlite")
    monkeypatch.setattr(sys, "stderr", stderr)
    assert _run(folder) == ExitCode.OVER_BUDGET
    err = stderr.getvalue()
    assert "computing 3 queries (nothing is charged yet) ..." in err
    assert "charging rho = 0.4, delta = 2e-07 to the ledger in one step" in err
    assert "[1/3]" not in err
    assert _labels(folder) == ["another job"]
    assert not (folder / "out").exists()
    assert [p.name for p in folder.iterdir() if p.name.startswith(".out")] == []


def test_unreadable_data_is_invalid_and_withheld(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The Session refuses a file it cannot read with a privframe error whose
    # message withholds the reader's (which may quote the file's contents).
    (folder / "data.parquet").write_bytes(b"not parquet: alice@example.com")
    assert _run(folder) == ExitCode.INVALID
    err = capsys.readouterr().err
    assert "could not be read" in err
    assert "alice" not in err


def test_load_spec_resolves_paths_shares_and_keys(folder: Path) -> None:
    spec = load_spec(_spec(folder))
    assert spec.data == folder / "data.parquet"
    assert spec.ledger == folder / "ledger.sqlite"
    assert [q.rho for q in spec.queries] == [Fraction(1, 5), Fraction(1, 10), Fraction(1, 10)]
    by_region, months, spread = spec.queries
    assert by_region.keys is not None
    assert by_region.keys.to_polars()["region"].to_list() == REGIONS
    assert months.keys is None
    assert months.delta == 2e-7
    assert spread.keys is not None
    assert len(spread.keys) == 2
    assert [a.output_name for a in spread.aggregates] == ["amount_median", "amount_sum"]
    assert spec.label(months) == "Weekly/months"


def test_a_spec_gives_the_missing_rule_in_metadata_or_in_the_aggregate(folder: Path) -> None:
    text = SPEC.replace(
        "amount = { bounds = [0, 1000] }", 'amount = { bounds = [0, 1000], missing = "drop" }'
    ).replace(
        '{ kind = "sum", column = "amount", bounds = [-10, 500] }',
        '{ kind = "sum", column = "amount", bounds = [-10, 500], missing = 0 }',
    )
    by_region, _, spread = load_spec(_spec(folder, text)).queries
    assert by_region.aggregates[1].missing == "drop"  # from the column's metadata
    assert spread.aggregates[1].missing == 0.0  # the aggregate's own rule wins
    bad = SPEC.replace("amount = { bounds = [0, 1000] }", 'amount = { missing = "refuse" }')
    with pytest.raises(pf.InvalidValueError, match="missing must be 'drop', 'midpoint'"):
        load_spec(
            _spec(
                folder,
                bad.replace(
                    'column = "amount", alias', 'column = "amount", bounds = [0, 1], alias'
                ),
            )
        )


def test_budget_forms(folder: Path) -> None:
    def budget(lines: str) -> pf.Budget:
        text = SPEC.replace("rho = 1.0\ndelta = 1e-6", lines)
        return load_spec(_spec(folder, text)).budget

    assert budget("rho = 2") == pf.zCDP(2.0)
    assert budget("mu = 1.5") == pf.GDP(1.5)
    # epsilon alone is pure DP, epsilon and delta an (epsilon, delta) budget spent as such
    # (this spec's queries spend rho: tests/api/test_report_epsilon.py runs such reports).
    assert spec_budget({"epsilon": 1.0}) == pf.PureDP(1.0)
    assert spec_budget({"epsilon": 1.0, "delta": 1e-6}) == pf.ApproxDP(1.0, 1e-6)
    # selection_delta asks for the (epsilon, delta) budget spent as zCDP, part of delta kept.
    assert (
        budget("epsilon = 1.0\ndelta = 1e-6\nselection_delta = 0")
        == pf.ApproxDP(1.0, 1e-6).to_zcdp()
    )
    reserved = budget("epsilon = 1.0\ndelta = 1e-6\nselection_delta = 1e-7")
    assert reserved == pf.ApproxDP(1.0, 1e-6).to_zcdp(selection_delta=1e-7)
    with pytest.raises(pf.InvalidValueError, match="budget: selection_delta must be below"):
        budget("epsilon = 1.0\ndelta = 1e-6\nselection_delta = 1e-5")


# --------------------------------------------------------------------------- SQL queries

SQL_QUERY = """
[[queries]]
name = "adults"
sql = "SELECT region, COUNT(*) AS n FROM data WHERE age >= 18 GROUP BY region ORDER BY n DESC"
rho = 0.025
"""
# Shares of 0.5: 0.25 + 0.1 (months) + 0.125 + 0.025 (adults).
WITH_SQL = SPEC.replace("rho = 0.4\n", "rho = 0.5\n", 1) + SQL_QUERY


def test_sql_queries_run_and_show_their_text(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(folder, text=WITH_SQL) == ExitCode.OK
    assert "[4/4] adults: rho = 0.025 ... done" in capsys.readouterr().err
    adults = pl.read_csv(folder / "out" / "adults.csv")
    assert {"region", "n", "n_ci95"} <= set(adults.columns)
    page = (folder / "out" / "report.html").read_text()
    assert "WHERE age &gt;= 18 GROUP BY region ORDER BY n DESC</pre>" in page
    assert adults["n"].to_list() == sorted(adults["n"].to_list(), reverse=True)
    assert "Weekly/adults" in _labels(folder)


def test_sql_that_does_not_parse_exits_2(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = WITH_SQL.replace("SELECT region", "SELEKT region")
    assert _run(folder, text=text) == ExitCode.INVALID
    assert "query 'adults':" in capsys.readouterr().err
    assert not (folder / "ledger.sqlite").exists()


# --------------------------------------------------------------------------- in a browser


class _Dom(HTMLParser):
    """Tables, and per chart its bars and error bars, in a browser's serialised DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.tables = 0
        self.charts: list[dict[str, int]] = []
        self.in_chart = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        cls = dict(attrs).get("class")
        if tag == "table":
            self.tables += 1
        elif tag == "svg" and cls == "pf-chart":
            self.charts.append({"pf-bar": 0, "pf-err": 0})
            self.in_chart = True
        elif self.in_chart and cls in ("pf-bar", "pf-err"):
            self.charts[-1][cls] += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self.in_chart = False


@pytest.mark.slow
def test_report_renders_in_headless_chromium(folder: Path) -> None:
    chromium()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _run(folder) == ExitCode.OK
    page = (folder / "out" / "report.html").resolve()
    dom = _Dom()
    dom.feed(rendered(page.as_uri()))
    assert dom.tables >= 3 * 3  # per query: its plan, the result, the measurements
    months = pl.read_csv(folder / "out" / "months.csv").height
    # The third chart is of the sum: the median's error is in ranks, drawn without bars.
    assert dom.charts == [
        {"pf-bar": 4, "pf-err": 4},
        {"pf-bar": months, "pf-err": months},
        {"pf-bar": 2, "pf-err": 2},
    ]

    pixels = screenshot(page.as_uri(), folder / "shot.png", 1000, 1400)
    assert len(np.unique(pixels.reshape(pixels.shape[0], -1), axis=0)) > 100  # not a blank page


def test_docs_show_the_example_spec() -> None:
    page = (EXAMPLE.parent.parent / "docs" / "reports.md").read_text()
    blocks = re.findall(r"^```toml\n(.*?)^```", page, re.DOTALL | re.MULTILINE)
    # The example first; test_report_budget_kinds.py runs the pure-DP one and
    # test_report_synthetic.py the [[marginals]] and [[synthetic]] entries.
    assert blocks[0] == EXAMPLE.read_text()
    assert len(blocks) == 3


def test_automatic_bounds_in_a_report_are_refused_before_anything_is_spent(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = SPEC.replace(
        '{ kind = "sum", column = "amount", bounds = [-10, 500] }',
        '{ kind = "sum", column = "amount", bounds = "auto" }',
    )
    assert _run(folder, text=text) == 2
    assert 'bounds = "auto" is for single releases' in capsys.readouterr().err
    assert not (folder / "ledger.sqlite").exists()
