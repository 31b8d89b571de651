"""``privframe plan``: a report spec's intervals before anything is spent, as text and a page."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from browser_setup import rendered, screenshot

import privframe as pf
from privframe.accounting.accountant import Accountant
from privframe.api.cli import main
from privframe.api.report import ExitCode

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "report_spec.toml"
SVG = "{http://www.w3.org/2000/svg}"
XHTML = "{http://www.w3.org/1999/xhtml}"
NAMES = ("by_region", "age_quartiles", "months", "adult_spend")


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    pf.datasets.synthetic_transactions(n_rows=5_000, seed=4).write_parquet(
        tmp_path / "transactions.parquet"
    )
    return Path(shutil.copy(EXAMPLE, tmp_path / "report_spec.toml"))


def test_plan_prints_each_outputs_interval_at_the_specs_split_and_spends_nothing(
    spec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", str(spec)]) == ExitCode.OK
    printed = capsys.readouterr().out
    plan = pf.plan_budget(spec)
    assert printed.strip() == str(plan).strip()
    assert printed.startswith("budget plan: rho = 0.3 in all (zCDP) over 4 queries")
    for out in plan.outputs:
        assert out.output in printed
        assert out.interval in printed
    assert not (spec.parent / "transactions.sqlite").exists()  # a plan opens no ledger file


def test_plan_takes_another_total_and_split(spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shares = [f"--share={name}=0.25" for name in NAMES]
    assert main(["plan", str(spec), "--rho", "0.8", *shares]) == ExitCode.OK
    printed = capsys.readouterr().out
    assert printed.startswith("budget plan: rho = 0.8 in all (zCDP) over 4 queries")
    assert printed.count("  0.25   0.2  ") == 8  # every output's row: share 0.25, rho 0.2


def test_plan_writes_a_page_with_its_chart(spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = spec.parent / "plan.html"
    assert main(["plan", str(spec), "--rows", "500", "--html", str(page)]) == ExitCode.OK
    assert f"wrote {page}" in capsys.readouterr().out
    text = page.read_text()
    root = ET.fromstring(text.split("\n", 1)[1])
    svg = next(s for s in root.iter(f"{SVG}svg") if s.get("class") == "pf-lines")
    # Every output is drawn: with --rows the means too.
    assert len(svg.findall(f".//{SVG}polyline")) == 8
    assert 'name="viewport"' in text


def test_a_ledger_that_has_less_left_than_the_spec_needs_still_plans(
    spec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Accountant(pf.zCDP(1.0, delta=1e-6), ledger=spec.parent / "transactions.sqlite") as acct:
        acct.spend(pf.zCDP(0.9), label="earlier")
    assert main(["plan", str(spec)]) == ExitCode.OK
    assert (
        "the budget has rho = 0.1, delta = 1e-06 left: it does NOT fit" in capsys.readouterr().out
    )
    with Accountant(pf.zCDP(1.0, delta=1e-6), ledger=spec.parent / "transactions.sqlite") as acct:
        assert [e.label for e in acct.entries] == ["earlier"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--share", "by_region=1"], "missing: ['age_quartiles', 'months', 'adult_spend']"),
        (["--share", "by_region=0.5", "--share", "by_region=0.5"], "names an entry twice"),
        (["--epsilon", "1"], "give the total as rho=..., not epsilon"),
    ],
)
def test_plan_refuses_bad_arguments_by_name(
    spec: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(["plan", str(spec), *extra]) == ExitCode.INVALID
    err = capsys.readouterr().err
    assert message in err
    assert "nothing was spent" in err


def test_plan_refuses_a_missing_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(tmp_path / "none.toml")]) == ExitCode.INVALID
    assert "none.toml" in capsys.readouterr().err


def test_the_report_page_shows_the_plan_it_ran_with(
    spec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = pf.plan_budget(spec)
    out = spec.parent / "out"
    assert main(["report", str(spec), "--out", str(out), "--no-progress"]) == ExitCode.OK
    capsys.readouterr()
    page = (out / "report.html").read_text()
    root = ET.fromstring(page.split("\n", 1)[1])
    section = next(s for s in root.iter(f"{XHTML}section") if s.get("id") == "plan")
    text = "".join(section.itertext())
    assert "this run spends rho = 0.3, delta = 2e-07, split over its entries as below" in text
    assert "nothing is spent" not in text  # it was: the page says what the run spent
    for out_width in plan.outputs:
        assert out_width.interval in text
    assert len(list(section.iter(f"{SVG}polyline"))) == 6  # all but the two means


@pytest.mark.slow
def test_the_plan_page_draws_its_chart_in_headless_chromium(
    spec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = spec.parent / "plan.html"
    assert main(["plan", str(spec), "--rows", "500", "--html", str(page)]) == ExitCode.OK
    capsys.readouterr()
    dom = rendered(page.as_uri())
    assert dom.count('class="pf-line"') == 8
    assert dom.count('class="pf-mark"') == 1
    for width, height in ((1000, 1600), (390, 2400)):  # a desktop and a phone
        pixels = screenshot(page.as_uri(), spec.parent / f"plan-{width}.png", width, height)
        red, green, blue = (pixels[:, :, i].astype(int) for i in range(3))
        # The first two lines' colours, #4c78a8 (blue) and #f58518 (orange): no text has them.
        blue_rows = np.flatnonzero((blue - red >= 40).any(axis=1))
        orange_rows = np.flatnonzero(((red - blue >= 120) & (green > 90)).any(axis=1))
        assert len(blue_rows) > 40
        assert len(orange_rows) > 40
        # The phone's right margin is blank: the chart shrinks to the page.
        if width == 390:
            assert (pixels[:, -6:, :] >= 250).all()
