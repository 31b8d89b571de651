"""Reports with ``[[marginals]]`` and ``[[synthetic]]`` entries: Session calls, budget, outputs."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import polars as pl
import pytest
from report_setup import run_report, spec_file

import privframe as pf
from privframe.accounting.accountant import Accountant
from privframe.api import synthesis
from privframe.api.report import ExitCode, ReportError, SpecError, load_spec, prepare

REGIONS = ["north", "south", "east", "west"]
AGES = ["[0, 30)", "[30, 60)", "[60, 120]"]
BUDGET = pf.zCDP(1.0)

HEAD = """
[report]
title = "T"

[data]
path = "data.parquet"
privacy_unit = "user_id"

[budget]
rho = 1.0
ledger = "ledger.sqlite"

[metadata]
region = { keys = ["north", "south", "east", "west"] }

[contributions]
max_groups = 3
max_rows_per_group = 5
max_rows = 5
"""

QUERY = """
[[queries]]
name = "by_region"
group_by = ["region"]
aggregates = [{ kind = "count" }]
rho = 0.1
"""

MARGINALS = """
[[marginals]]
name = "m"
sets = ["region", ["region", "month"]]
domains = { month = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] }
rho = 0.2
"""

SYNTHETIC = """
[[synthetic]]
name = "people"
method = "mst"
columns = ["region", "age"]
domains = { age = { bins = [0, 30, 60, 120] } }
rows = 500
rho = 0.1
"""

SPEC = HEAD + QUERY + MARGINALS + SYNTHETIC


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "data.parquet"
    pf.datasets.synthetic_transactions(n_rows=2_000, seed=1).write_parquet(path)
    return path


@pytest.fixture
def folder(tmp_path: Path, data_file: Path) -> Path:
    shutil.copy(data_file, tmp_path / "data.parquet")
    return tmp_path


def _ledger(folder: Path) -> list[tuple[str, float]]:
    with Accountant(BUDGET, ledger=folder / "ledger.sqlite") as acct:
        return [(e.label, e.rho) for e in acct.entries]


def test_a_report_writes_its_synthetic_table_and_marginals_and_charges_each(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_report(folder, SPEC) == ExitCode.OK
    out = capsys.readouterr().out
    assert "1 query, 1 marginals and 1 synthetic table released for rho = 0.4" in out
    assert "and 4 files beside it" in out
    # One ledger entry per Session call, the queries' batch last.
    assert _ledger(folder) == [("T/m", 0.2), ("T/people", 0.1), ("T/by_region", 0.1)]

    people = pl.read_csv(folder / "out" / "people.csv")
    assert people.columns == ["region", "age"]
    assert people.height == 500
    assert set(people["region"]) <= set(REGIONS)
    assert set(people["age"]) <= set(AGES)

    one = pl.read_csv(folder / "out" / "m-1.csv")
    two = pl.read_csv(folder / "out" / "m-2.csv")
    assert one.columns == ["region", *synthesis._OUTPUTS]
    assert two.height == len(REGIONS) * 12  # every public combination, observed or not
    # The tables are made consistent: summed over month, the pair gives the one-way table.
    summed = two.group_by("region").agg(pl.col("count").sum()).sort("region")
    assert summed["count"].to_list() == pytest.approx(one.sort("region")["count"].to_list())

    page = (folder / "out" / "report.html").read_text()
    assert '<a href="people.csv">people.csv</a>' in page
    assert "a synthetic table of 500 rows by MST, columns region, age; cost rho = 0.1" in page
    assert "every 1-way marginal" in page  # the explanation's lines
    assert '<a href="m-2.csv">m-2.csv</a>' in page
    assert "3 release(s) charged ρ = 0.4" in page  # the page's guarantee counts every entry
    root = ET.fromstring(page.split("\n", 1)[1])  # still well-formed XML, after the doctype
    sections = [s.get("id") for s in root.iter("{http://www.w3.org/1999/xhtml}section")]
    assert sections == ["query-1", "table-1", "table-2", "plan", "budget"]


def test_a_dry_run_explains_every_entry_and_spends_nothing(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_report(folder, SPEC, "--dry-run") == ExitCode.OK
    out = capsys.readouterr().out
    assert "== m: rho = 0.2 ==\nmarginals: 2 noisy count tables" in out
    assert "== people: rho = 0.1 ==\nsynthesize (MST): 2 columns" in out
    assert "rho = 0.4 in total; the ledger has rho = 1 left" in out
    assert not (folder / "ledger.sqlite").exists()


@pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")
def test_a_seeded_parquet_table_says_not_private_and_a_report_may_hold_only_tables(
    folder: Path,
) -> None:
    text = HEAD.replace('title = "T"', 'title = "T"\nseed = 3') + SYNTHETIC.replace(
        "rows = 500", 'format = "parquet"'
    )
    assert run_report(folder, text, "--allow-seeded-noise") == ExitCode.OK
    table = pl.read_parquet(folder / "out" / "people.parquet")
    assert table.columns == ["region", "age"]
    assert set(table["age"]) <= set(AGES)
    assert pl.read_parquet_metadata(folder / "out" / "people.parquet")["privframe"].startswith(
        "NOT PRIVATE"
    )
    with Accountant(BUDGET, ledger=folder / "ledger.sqlite") as acct:
        assert [(e.label, e.seeded) for e in acct.entries] == [("T/people", True)]
    assert "NOT private" in (folder / "out" / "report.html").read_text()


@pytest.mark.parametrize(
    ("entry", "old", "new", "message"),
    [
        (SYNTHETIC, 'method = "mst"', 'method = "gan"', "synthetic[0] ('people').method must be"),
        (SYNTHETIC, "rows = 500", 'format = "xlsx"', "synthetic[0] ('people').format must be"),
        (SYNTHETIC, "rows = 500", "rows = -1", "synthetic[0] ('people').rows must be between 0"),
        (SYNTHETIC, "rows = 500", "colums = []", "synthetic[0]: unknown key 'colums'"),
        (SYNTHETIC, "[0, 30, 60, 120]", '"x"', "synthetic[0] ('people').domains.age.bins"),
        (SYNTHETIC, "rho = 0.1", "epsilon = 0.1", "synthetic[0] ('people').epsilon: this report"),
        (MARGINALS, '["region",', "[3,", "marginals[0] ('m').sets[0] must be a column name"),
        (MARGINALS, 'name = "m"', 'name = "by_region"', "the names ['by_region'] are used twice"),
        (QUERY, 'name = "by_region"', 'name = "m-1"', "the output files ['m-1.csv'] are used"),
    ],
)
def test_spec_errors_name_their_key_and_spend_nothing(
    folder: Path, entry: str, old: str, new: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert old in entry
    assert run_report(folder, SPEC.replace(entry, entry.replace(old, new))) == ExitCode.INVALID
    assert message in capsys.readouterr().err
    assert not (folder / "ledger.sqlite").exists()


def test_an_entry_that_does_not_plan_is_named_and_nothing_is_spent(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = HEAD + QUERY + SYNTHETIC.replace('columns = ["region", "age"]', 'columns = ["nope"]')
    assert run_report(folder, text) == ExitCode.INVALID
    err = capsys.readouterr().err
    assert "synthetic 'people': " in err
    assert "['nope']" in err
    assert not (folder / "ledger.sqlite").exists()


def test_a_report_whose_tables_do_not_fit_is_refused_before_any_spend(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_report(folder, HEAD + MARGINALS) == ExitCode.OK  # rho = 0.2 of 1
    assert run_report(folder, HEAD + MARGINALS.replace("rho = 0.2", "rho = 0.5")) == ExitCode.OK
    before = _ledger(folder)
    # 0.3 is left; the query (0.1) fits on its own, with the synthetic table (0.1) and
    # marginals (0.2) the report does not.
    assert run_report(folder, SPEC) == ExitCode.OVER_BUDGET
    err = capsys.readouterr().err
    assert "needs rho = 0.4 but the ledger" in err
    assert "nothing was spent" in err
    assert "m (rho = 0.2); people (rho = 0.1)" in err
    assert _ledger(folder) == before


def test_the_report_total_counts_its_tables(folder: Path) -> None:
    text = SPEC.replace('title = "T"', 'title = "T"\nrho = 0.3')
    with pytest.raises(SpecError, match=r"ask for rho = 0.4 in total, more than \[report\] rho"):
        load_spec(spec_file(folder, text))
    shares = SPEC.replace('title = "T"', 'title = "T"\nrho = 0.5').replace(
        "rho = 0.2\n", "share = 0.4\n"
    )
    spec = load_spec(spec_file(folder, shares))
    assert spec.marginals[0].rho == pytest.approx(0.2)


def test_a_failure_after_a_charge_names_what_was_charged_and_keeps_its_files(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise pf.InvalidValueError("the estimator failed")

    monkeypatch.setattr(synthesis, "mst", broken)
    report = prepare(load_spec(spec_file(folder, SPEC)))
    with pytest.raises(ReportError, match="Charged to the ledger: T/m, T/people") as caught:
        report.run(folder / "out")
    # The synthetic table's call charged before it failed; the queries were never charged.
    assert caught.value.charged == ("T/m", "T/people")
    assert [label for label, _ in _ledger(folder)] == ["T/m", "T/people"]
    kept = Path(str(caught.value).split("What it released before is in ")[1].strip("'."))
    assert sorted(p.name for p in kept.iterdir()) == ["m-1.csv", "m-2.csv"]
    assert not (folder / "out").exists()


def test_a_server_spec_refuses_tables(folder: Path) -> None:
    text = (
        '[report]\ntitle = "T"\n[data]\ndataset = "shop"\n[contributions]\nmax_rows = 5\n'
        + MARGINALS
    )
    with pytest.raises(SpecError, match=r"marginals: a spec run on a server"):
        load_spec(spec_file(folder, text))


def test_marginals_spend_epsilon_in_a_pure_dp_report(folder: Path) -> None:
    text = (
        (HEAD + MARGINALS)
        .replace("rho = 1.0", "epsilon = 1.0")
        .replace("rho = 0.2", "epsilon = 0.2")
    )
    assert run_report(folder, text) == ExitCode.OK
    with Accountant(pf.PureDP(1.0), ledger=folder / "ledger.sqlite") as acct:
        assert [(e.label, e.cost) for e in acct.entries] == [("T/m", pf.PureDP(0.2))]
    table = pl.read_csv(folder / "out" / "m-2.csv")
    assert table.height == 48
    assert (table["count"] >= 0).all()


def test_synthetic_data_spends_epsilon_in_a_pure_dp_report(folder: Path) -> None:
    text = (
        (HEAD + SYNTHETIC)
        .replace("rho = 1.0", "epsilon = 1.0")
        .replace("rho = 0.1", "epsilon = 0.25")
    )
    assert run_report(folder, text) == ExitCode.OK
    with Accountant(pf.PureDP(1.0), ledger=folder / "ledger.sqlite") as acct:
        assert [(e.label, e.cost) for e in acct.entries] == [("T/people", pf.PureDP(0.25))]
    assert pl.read_csv(folder / "out" / "people.csv").height == 500


def test_the_entries_of_the_docs_run(folder: Path) -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "reports.md"
    blocks = re.findall(r"^```toml\n(.*?)^```", docs.read_text(), re.DOTALL | re.MULTILINE)
    (entries,) = [b for b in blocks if "[[synthetic]]" in b]
    text = HEAD.replace('title = "T"', 'title = "T"\nrho = 0.5') + entries.replace(
        "rows = 10000", "rows = 100"
    )
    assert run_report(folder, text) == ExitCode.OK
    assert _ledger(folder) == [("T/region_month", 0.1), ("T/customers", 0.15)]
    customers = pl.read_parquet(folder / "out" / "customers.parquet")
    assert customers.columns == ["region", "age"]
    assert customers.height == 100
    assert (folder / "out" / "region_month-2.csv").exists()
