"""Reports of pure-DP and (ε, δ) budgets: their specs, exact charges, refusals, CLI and pages."""

from __future__ import annotations

import io
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from fractions import Fraction
from pathlib import Path

import polars as pl
import pytest
from report_setup import run_report, spec_file

import privframe as pf
from privframe.accounting.accountant import Accountant
from privframe.api.cli import main
from privframe.api.report import ExitCode, SpecError, load_spec, prepare

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reports.md"
REGIONS = ["north", "south", "east", "west"]
PURE = pf.PureDP(1.0)
APPROX = pf.ApproxDP(4.0, 1e-4)

PURE_SPEC = """
[report]
title = "Pure"
epsilon = 0.5

[data]
path = "data.parquet"
privacy_unit = "user_id"

[budget]
epsilon = 1.0
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
name = "spread"
aggregates = [{ kind = "median", column = "amount", candidates = 101 }]
epsilon = 0.125

[[queries]]
name = "adults"
sql = "SELECT region, SUM(amount) AS spend FROM data WHERE age >= 18 GROUP BY region"
share = 0.25
"""

APPROX_SPEC = """
[report]
title = "Approx"

[data]
path = "data.parquet"
privacy_unit = "user_id"

[budget]
epsilon = 4.0
delta = 1e-4
ledger = "ledger.sqlite"

[metadata]
amount = { bounds = [0, 1000] }
region = { keys = ["north", "south", "east", "west"] }

[contributions]
max_groups = 3
max_rows_per_group = 5
"""

APPROX_QUERIES = """
[[queries]]
name = "laplace"
group_by = ["region"]
aggregates = [{ kind = "count" }]
epsilon = 0.25

[[queries]]
name = "gaussian"
group_by = ["region"]
aggregates = [{ kind = "sum", column = "amount" }]
epsilon = 0.5
delta = 1e-6

[[queries]]
name = "months"
group_by = ["month"]
aggregates = [{ kind = "count_distinct" }]
epsilon = 0.25
delta = 2e-6
"""


def _many(n: int, epsilon: str, delta: str = "") -> str:
    """``n`` keyed counts, each spending ``epsilon`` (and ``delta``)."""
    spend = f"epsilon = {epsilon}\n" + (f"delta = {delta}\n" if delta else "")
    return "".join(
        f'\n[[queries]]\nname = "q{i}"\ngroup_by = ["region"]\n'
        f'aggregates = [{{ kind = "count" }}]\n{spend}'
        for i in range(n)
    )


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "data.parquet"
    pf.datasets.synthetic_transactions(n_rows=20_000, seed=2).write_parquet(path)
    return path


@pytest.fixture
def folder(tmp_path: Path, data_file: Path) -> Path:
    shutil.copy(data_file, tmp_path / "data.parquet")
    return tmp_path


def _entries(folder: Path, budget: pf.PureDP | pf.ApproxDP) -> list[pf.accounting.LedgerEntry]:
    with Accountant(budget, ledger=folder / "ledger.sqlite") as acct:
        return list(acct.entries)


def _page(folder: Path) -> str:
    page = (folder / "out" / "report.html").read_text()
    ET.fromstring(page.split("\n", 1)[1])  # well-formed
    return page


# --------------------------------------------------------------------------- pure DP


def test_a_pure_report_spends_epsilon_exactly_and_shows_it(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = load_spec(spec_file(folder, PURE_SPEC))
    assert spec.budget == PURE
    assert [(q.rho, q.epsilon) for q in spec.queries] == [
        (None, Fraction(1, 4)),
        (None, Fraction(1, 8)),
        (None, Fraction(1, 8)),
    ]
    assert run_report(folder, PURE_SPEC) == ExitCode.OK
    captured = capsys.readouterr()
    assert "charging epsilon = 0.5 to the ledger in one step" in captured.err
    assert "[1/3] by_region: epsilon = 0.25 ... done" in captured.err
    assert "3 queries released for epsilon = 0.5; the ledger" in captured.out
    assert "has epsilon = 0.5 left" in captured.out

    out = folder / "out"
    by_region = pl.read_csv(out / "by_region.csv")
    assert by_region["region"].to_list() == REGIONS
    assert {"count_ci95", "avg_amount_ci95"} <= set(by_region.columns)
    assert pl.read_csv(out / "spread.csv").columns == ["amount_median", "amount_median_rank_ci95"]
    assert set(pl.read_csv(out / "adults.csv")["region"].to_list()) == set(REGIONS)

    entries = _entries(folder, PURE)
    assert [e.label for e in entries] == ["Pure/by_region", "Pure/spread", "Pure/adults"]
    assert [e.cost for e in entries] == [pf.PureDP(0.25), pf.PureDP(0.125), pf.PureDP(0.125)]
    with Accountant(PURE, ledger=folder / "ledger.sqlite") as acct:
        assert acct.spent == pf.PureDP(0.5)

    page = _page(folder)
    assert "cost ε = 0.25; ledger label" in page
    assert "This report&#x27;s 3 release(s) charged ε = 0.5 (pure DP)" in page
    assert "epsilon spent 0.5 of 1 (0.5 remaining) in 3 releases" in page
    assert '<th scope="col">ε</th>' in page
    assert "ρ" not in page.split('<section id="budget">')[1]


def test_ten_shares_of_a_tenth_spend_the_whole_budget_then_a_run_is_refused(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = PURE_SPEC.split("[[queries]]")[0].replace("epsilon = 0.5", "epsilon = 1.0", 1)
    text += _many(10, "0").replace("epsilon = 0\n", "share = 0.1\n")
    assert run_report(folder, text) == ExitCode.OK
    with Accountant(PURE, ledger=folder / "ledger.sqlite") as acct:
        assert acct.spent == PURE
        assert acct.remaining == pf.PureDP(0)
        assert {e.cost for e in acct.entries} == {pf.PureDP(0.1)}
    capsys.readouterr()
    assert run_report(folder, text) == ExitCode.OVER_BUDGET
    assert "needs epsilon = 1 but the ledger" in capsys.readouterr().err
    assert len(_entries(folder, PURE)) == 10


def test_a_pure_report_over_budget_exits_3_and_charges_nothing(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Accountant(PURE, ledger=folder / "ledger.sqlite") as other:
        other.spend(pf.PureDP(0.75), label="another job")
    assert run_report(folder, PURE_SPEC) == ExitCode.OVER_BUDGET
    err = capsys.readouterr().err
    assert "report 'Pure' needs epsilon = 0.5 but the ledger" in err
    assert "has epsilon = 0.25 left; nothing was spent" in err
    assert "by_region (epsilon = 0.25)" in err
    assert [e.label for e in _entries(folder, PURE)] == ["another job"]
    assert not (folder / "out").exists()


class _AnotherJob(io.StringIO):
    """stderr, where another job spends the rest of the pure-DP ledger as the report charges."""

    def __init__(self, ledger: Path) -> None:
        super().__init__()
        self.ledger = ledger

    def write(self, text: str) -> int:
        if text.startswith("charging"):
            with Accountant(PURE, ledger=self.ledger) as other:
                other.spend(other.remaining, label="another job")
        return super().write(text)


def test_a_pure_report_refused_at_its_charge_charges_nothing(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stderr = _AnotherJob(folder / "ledger.sqlite")
    monkeypatch.setattr(sys, "stderr", stderr)
    assert run_report(folder, PURE_SPEC) == ExitCode.OVER_BUDGET
    assert "[1/3]" not in stderr.getvalue()
    assert [e.label for e in _entries(folder, PURE)] == ["another job"]
    assert not (folder / "out").exists()


def test_a_pure_dry_run_prints_epsilon_and_spends_nothing(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_report(folder, PURE_SPEC, "--dry-run") == ExitCode.OK
    out = capsys.readouterr().out
    assert "== by_region: epsilon = 0.25 ==" in out
    assert "L1 sensitivity" in out
    assert "3 queries, epsilon = 0.5 in total; the ledger has epsilon = 1 left" in out
    assert "dry run: nothing was spent" in out
    assert not (folder / "ledger.sqlite").exists()


# --------------------------------------------------------------------------- (ε, δ)


def test_an_approx_report_spends_epsilon_and_delta_natively(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = APPROX_SPEC + APPROX_QUERIES
    spec = load_spec(spec_file(folder, text))
    assert spec.budget == APPROX
    assert [(q.epsilon, q.delta) for q in spec.queries] == [
        (Fraction(1, 4), None),
        (Fraction(1, 2), 1e-6),
        (Fraction(1, 4), 2e-6),
    ]
    assert run_report(folder, text) == ExitCode.OK
    captured = capsys.readouterr()
    assert "charging at most epsilon = 1, delta = 3e-06" in captured.err
    assert "[2/3] gaussian: epsilon = 0.5, delta = 1e-06 ... done" in captured.err
    assert "3 queries released for epsilon = 1, delta = 3e-06 (added up;" in captured.out
    entries = _entries(folder, APPROX)
    assert [e.cost for e in entries] == [
        pf.ApproxDP(0.25),
        pf.ApproxDP(0.5, 1e-6),
        pf.ApproxDP(0.25, 2e-6),
    ]
    assert set(pl.read_csv(folder / "out" / "months.csv")["month"].to_list()) <= set(range(1, 13))
    page = _page(folder)
    assert "cost ε = 0.5, δ = 1e-06; ledger label" in page
    assert "asked for ε = 1, δ = 3e-06 ((ε, δ)-DP)" in page
    assert "epsilon spent 1 of 4 (3 remaining), delta spent 3e-06 of 0.0001" in page
    assert "<td>basic composition</td><td>1</td><td>3e-06</td>" in page


def test_an_approx_report_shows_its_tight_charge_beside_basic_composition(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Thirty Laplace releases with some delta each: the accountant's filter charges less
    # than their sum (docs/accounting.md).
    text = APPROX_SPEC + _many(30, "0.1", "1e-6")
    assert run_report(folder, text) == ExitCode.OK
    assert "30 queries released for epsilon = 3, delta = 3e-05" in capsys.readouterr().out
    with Accountant(APPROX, ledger=folder / "ledger.sqlite") as acct:
        spent, basic = acct.spent, acct.basic_spent
        report = acct.report()
    assert basic == pf.ApproxDP(3.0, 3e-5)
    assert spent.exact_epsilon < basic.exact_epsilon
    assert spent.exact_delta == basic.exact_delta
    page = _page(folder)
    tight = re.search(r"they are \(ε, δ\)-DP with ε = ([0-9.]+) at δ = 3e-05", page)
    assert tight is not None
    assert float(tight.group(1)) < 3
    assert "basic composition (adding their ε and δ) states ε = 3." in page
    assert (
        f"The ledger charged the tight composition of its releases, ε = "
        f"{report.spent_epsilon:.6g}; basic composition (adding their ε and δ) would have "
        "charged ε = 3, δ = 3e-05" in page
    )
    assert f"<td>spent</td><td>{report.spent_epsilon:.6g}</td><td>3e-05</td>" in page


def test_an_approx_report_over_budget_exits_3_and_charges_nothing(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Accountant(APPROX, ledger=folder / "ledger.sqlite") as other:
        other.spend(pf.ApproxDP(3.5, 1e-5), label="another job")
    assert run_report(folder, APPROX_SPEC + APPROX_QUERIES) == ExitCode.OVER_BUDGET
    err = capsys.readouterr().err
    assert "report 'Approx' needs epsilon = 1, delta = 3e-06 but the ledger" in err
    assert "has epsilon = 0.5, delta = 9e-05 left; nothing was spent" in err
    assert [e.label for e in _entries(folder, APPROX)] == ["another job"]
    assert not (folder / "out").exists()


def test_selection_delta_still_spends_an_epsilon_delta_budget_as_zcdp(folder: Path) -> None:
    text = (
        APPROX_SPEC.replace("delta = 1e-4\n", "delta = 1e-4\nselection_delta = 1e-5\n")
        + '\n[[queries]]\nname = "n"\ngroup_by = ["region"]\naggregates = [{ kind = "count" }]\n'
        "rho = 0.1\n"
    )
    spec = load_spec(spec_file(folder, text))
    assert spec.budget == pf.ApproxDP(4.0, 1e-4).to_zcdp(selection_delta=1e-5)
    assert spec.queries[0].rho == Fraction(1, 10)
    report = prepare(spec)
    assert report.cost == pf.zCDP(0.1)


# --------------------------------------------------------------------------- refusals


ZCDP_SPEC = (
    PURE_SPEC.replace("epsilon = 0.5\n", "rho = 0.5\n", 1)
    .replace("epsilon = 1.0\n", "rho = 1.0\n", 1)
    .replace("epsilon = 0.125\n", "rho = 0.125\n", 1)
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            PURE_SPEC.replace("epsilon = 0.5\n", "rho = 0.5\n", 1),
            "report.rho: this report's budget is pure DP ([budget] epsilon = ...), whose "
            "queries spend epsilon: write epsilon = ... instead of rho",
        ),
        (
            PURE_SPEC.replace("epsilon = 0.125\n", "rho = 0.125\n"),
            "queries[1] ('spread').rho: this report's budget is pure DP",
        ),
        (
            ZCDP_SPEC.replace("rho = 0.125\n", "epsilon = 0.125\n"),
            "queries[1] ('spread').epsilon: this report's budget is zCDP, whose queries spend "
            "rho: write rho = ... instead of epsilon",
        ),
        (
            ZCDP_SPEC.replace("rho = 0.5\n", "epsilon = 0.5\n", 1),
            "report.epsilon: this report's budget is zCDP",
        ),
        (
            APPROX_SPEC + APPROX_QUERIES.replace("epsilon = 0.25\n", "rho = 0.25\n", 1),
            "queries[0] ('laplace').rho: this report's budget is (epsilon, delta)-DP",
        ),
        (
            PURE_SPEC.replace("epsilon = 0.125\n", "epsilon = 0.125\ndelta = 1e-6\n"),
            "queries[1] ('spread').delta: this report's budget is pure DP ([budget] epsilon = "
            "...), which spends no delta",
        ),
        (
            PURE_SPEC.replace('group_by = ["region"]', 'group_by = ["month"]', 1),
            "group_by columns ['month'] have no keys (in the query or the metadata): they "
            "would be chosen privately, which needs delta",
        ),
        (
            PURE_SPEC.replace("epsilon = 0.125\n", "epsilon = 0.375\n"),
            "queries ask for epsilon = 0.75 in total, more than [report] epsilon = 0.5",
        ),
        (
            PURE_SPEC.replace("epsilon = 0.125\n", "epsilon = 0.125\nshare = 0.1\n"),
            "give exactly one of epsilon and share",
        ),
        (
            PURE_SPEC.replace("epsilon = 0.5\n", "", 1),
            "queries[0] ('by_region').share needs a total: [report] epsilon = ...",
        ),
        (
            PURE_SPEC.replace('title = "Pure"', 'title = "Pure"\naccounting = "pld"'),
            "report.accounting: this report's budget is pure DP",
        ),
        (
            APPROX_SPEC + APPROX_QUERIES.replace("delta = 2e-6\n", ""),
            "queries[2] ('months'): group_by columns ['month'] have no keys (in the query or "
            "the metadata): they would be chosen privately, spending delta; give delta = ...",
        ),
    ],
)
def test_the_budget_parameter_of_another_kind_is_refused_naming_what_to_write(
    folder: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    assert run_report(folder, text) == ExitCode.INVALID
    err = capsys.readouterr().err
    assert err.startswith("privframe: error: ")
    assert message in err
    assert not (folder / "ledger.sqlite").exists()
    assert not (folder / "out").exists()


def test_a_query_spec_has_its_budget_once() -> None:
    from privframe.api.report import QuerySpec

    with pytest.raises(SpecError, match="give its budget as rho or as epsilon, once"):
        QuerySpec("q", Fraction(1, 10), epsilon=Fraction(1, 10))
    with pytest.raises(SpecError, match="give its budget as rho or as epsilon, once"):
        QuerySpec("q", None)


def test_the_pure_spec_of_the_docs_runs_and_spends_its_epsilon(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"^```toml\n(.*?)^```", DOCS.read_text(), re.DOTALL | re.MULTILINE)
    pure = [b for b in blocks if "\nepsilon = " in b]
    assert len(pure) == 1
    assert (
        main(["demo", "--rows", "20000", "--write-data", str(tmp_path / "transactions.parquet")])
        == 0
    )
    spec = spec_file(tmp_path, pure[0])
    for _ in range(4):  # epsilon = 0.5 a run of a budget of 2
        assert main(["report", str(spec), "--out", str(tmp_path / "out")]) == ExitCode.OK
    assert main(["report", str(spec), "--out", str(tmp_path / "out")]) == ExitCode.OVER_BUDGET
    assert "needs epsilon = 0.5 but the ledger" in capsys.readouterr().err
    with Accountant(pf.PureDP(2.0), ledger=tmp_path / "transactions-pure.sqlite") as acct:
        assert acct.remaining == pf.PureDP(0)
