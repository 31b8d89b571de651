"""The HTML views: escaped, showing the numbers of the objects they render, and nothing private."""

from __future__ import annotations

import html
import math
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from html.parser import HTMLParser

import pandas as pd
import polars as pl
import pytest

import privframe as pf
from privframe._html import interval
from privframe.accounting.budgets import zCDP
from privframe.api._chart import bar_chart
from privframe.api._frames import NoiseRule
from privframe.api.html import (
    ReportSection,
    Shown,
    explanation_html,
    query_html,
    report_html,
    result_html,
    session_html,
    show,
)
from privframe.api.query import Query
from privframe.mechanisms.noise import SeededRandomness

SVG = "{http://www.w3.org/2000/svg}"
XHTML = "{http://www.w3.org/1999/xhtml}"
# Values that exist only in the private data: no public view may show them.
SECRET_REGION = "zz-secret-region"
SECRET_AMOUNT = 987654.321
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


@pytest.fixture
def sess() -> pf.Session:
    df = pl.DataFrame(
        {
            "user": [1, 1, 2, 3, 4, 5],
            "region": ["a", "b", "a", SECRET_REGION, "b", "a"],
            "amount": [10.0, 20.0, SECRET_AMOUNT, 7.5, 3.0, 1.0],
        }
    )
    return pf.Session(df, "user", pf.zCDP(rho=1.0, delta=1e-6))


def _keyed(sess: pf.Session) -> Query:
    return (
        sess.query()
        .bound(max_groups=2, max_rows_per_group=3)
        .group_by("region", keys=["a", "b", "<c&d>"])
        .agg(pf.count(), pf.mean("amount", bounds=(0, 100)).alias("avg<1>"))
    )


class _Balanced(HTMLParser):
    """Fails on any tag closed out of order or left open (void elements aside)."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        pass

    def handle_endtag(self, tag: str) -> None:
        assert self.open, f"</{tag}> closes nothing"
        assert self.open[-1] == tag, f"</{tag}> closes <{self.open[-1]}>"
        self.open.pop()


def _well_formed(page: str) -> ET.Element:
    parser = _Balanced()
    parser.feed(page)
    parser.close()
    assert parser.open == [], f"left open: {parser.open}"
    return ET.fromstring(page.split("\n", 1)[1] if page.startswith("<!DOCTYPE") else page)


def _no_data_facts(page: str) -> None:
    assert SECRET_REGION not in page
    assert "987654" not in page


# --------------------------------------------------------------------------- session


def test_session_html_shows_the_budget_and_ledger(sess: pf.Session) -> None:
    _keyed(sess).release(rho=0.25, label="<script>alert(1)</script> & co")
    sess.query().bound(max_rows=2).agg(pf.count()).release(rho=0.125, label="total")
    page = session_html(sess)
    _well_formed(page)
    report = sess.report()
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in page
    assert "<td>total</td>" in page
    assert f"rho spent {report.spent_rho:.6g} of {report.budget_rho:.6g}" in page
    assert f"({report.remaining_rho:.6g} remaining) in 2 releases" in page
    for value in (report.spent_epsilon, report.spent_mu, report.remaining_epsilon):
        assert f"<td>{value:.6g}</td>" in page
    assert f"<td>{report.delta + report.spent_delta:.3g}</td>" in page
    for entry in sess.ledger:
        assert f"<td>{entry.time[:19].replace('T', ' ')}</td>" in page
        assert f"<td>{entry.rho:.6g}</td>" in page
    assert "Canonne, Kamath &amp; Steinke 2020" in page
    # The gauge: 0.375 of 1 spent.
    assert 'width="90.0"' in page
    _no_data_facts(page)


def test_session_html_before_any_release(sess: pf.Session) -> None:
    page = session_html(sess)
    assert "no releases yet" in page
    assert "rho spent 0 of 1" in page


def test_session_html_shows_the_newest_entries_of_a_long_ledger() -> None:
    long = pf.Session(pl.DataFrame({"u": [1, 2]}), "u", pf.zCDP(1.0))
    query = long.query().bound(max_rows=1).agg(pf.count())
    long.release_all([query.request(0.001, label=f"q{i}") for i in range(120)])
    page = session_html(long)
    _well_formed(page)
    assert "the last 50 of 120 releases" in page
    assert "<td>q119</td>" in page
    assert "<td>q70</td>" in page
    assert "<td>q69</td>" not in page


def test_session_html_flags_seeded_releases() -> None:
    seeded = pf.Session(
        pl.DataFrame({"u": [1, 2]}), "u", pf.zCDP(1.0), rng=pf.noise.SeededRandomness(1)
    )
    with pytest.warns(pf.SeededRandomnessWarning):
        seeded.query().bound(max_rows=1).agg(pf.count()).release(rho=0.5)
    page = session_html(seeded)
    assert "NOT private" in page
    assert "<td>yes</td>" in page


# --------------------------------------------------------------------------- explanation, query


def test_explanation_html_has_every_number(sess: pf.Session) -> None:
    explanation = _keyed(sess).explain(rho=0.5)
    page = explanation_html(explanation)
    _well_formed(page)
    assert "release costs ρ = 0.5 (zCDP)" in page
    assert explanation.plan.limits.describe() in page
    for m in explanation.measurements:
        assert m.derivation in page
        for value in (float(m.exact_share), m.sigma, m.ci95):
            assert f"<td>{value:.6g}</td>" in page
    for row in explanation.rows:
        assert f"<td>{row['std']}</td>" in page
    assert "<td>avg&lt;1&gt;</td>" in page
    assert "avg<1>" not in page
    assert "groups chosen privately" not in page
    _no_data_facts(page)


def test_explanation_html_selection_and_balance(sess: pf.Session) -> None:
    selecting = sess.query().bound(max_groups=2, max_rows_per_group=3).group_by("region")
    explanation = selecting.agg(pf.count()).explain(rho=0.5, delta=5e-7)
    page = explanation_html(explanation)
    selection = explanation.plan.selection
    assert selection is not None
    assert f"noisy distinct-unit count ≥ {selection.threshold}" in page
    assert f"<td>{selection.survival_count(0.5)} / {selection.survival_count(0.95)} units</td>" in (
        page
    )
    assert "release costs ρ = 0.5, δ = 5e-07 (zCDP)" in page
    assert "Wilkins et al. 2023" in page
    _no_data_facts(page)

    balanced = (
        sess.query()
        .bound(max_groups=2, max_rows_per_group=3)
        .group_by("region", keys=["a", "b"])
        .agg(pf.count(), pf.sum("amount", bounds=(0, 100)))
        .explain(rho=0.5, weights=pf.balance(rows=1000, amount_sum=20_000))
    )
    page = explanation_html(balanced)
    assert "balanced split" in page
    for name, error in balanced.plan.relative_errors:
        assert f"<td>{name}</td><td>{error:.3g}</td>" in page


def test_explanation_html_quantiles(sess: pf.Session) -> None:
    query = sess.query().bound(max_rows=3).agg(pf.median("amount", bounds=(0, 100)))
    explanation = query.explain(rho=0.5)
    page = explanation_html(explanation)
    (qm,) = explanation.plan.quantiles
    assert f"<td>{qm.rank_error():.4g} rows of rank</td>" in page
    assert f"<td>{float(qm.exact_share):.6g}</td>" in page


def test_query_html_describes_the_plan(sess: pf.Session) -> None:
    query = (
        sess.query()
        .filter(pl.col("amount") > 1)
        .with_columns(big=pl.col("amount") > 50)
        .bound(max_groups=2, max_rows_per_group=3, max_rows=4)
        .group_by("region", keys=["a", "b", "<c&d>"], other="rest")
        .agg(
            pf.count_distinct(),
            pf.std("amount", bounds=(-5, 100)),
            pf.quantile("amount", [0.1, 0.9], bounds=(0, 100), candidates=11),
        )
    )
    page = query_html(query)
    _well_formed(page)
    assert "<td>2 (filter, with_columns)</td>" in page
    assert "<td>max_groups=2, max_rows_per_group=3, max_rows=4</td>" in page
    assert "<td>3 public, plus the group &#x27;rest&#x27; for the rest</td>" in page
    assert "<td>count_distinct</td><td>count_distinct</td>" in page
    assert "<td>amount_std</td><td>std</td><td>amount</td><td>[-5, 100]</td>" in page
    assert "<td>quantile q = 0.9 (11 candidates)</td>" in page
    _no_data_facts(page)
    assert "chosen privately" in query_html(sess.query().group_by("region").agg(pf.count()))
    assert "one global row" in query_html(sess.query().agg(pf.count()))


# --------------------------------------------------------------------------- results


def test_result_html_folds_intervals_into_cells() -> None:
    frame = pl.DataFrame(
        {
            "region": ["<b>north</b>", "south"],
            "count": [1234, -5],
            "count_std": [27.4, 27.4],
            "count_ci95": [53.7, 53.7],
            "avg": [56.18722, 0.5],
            "avg_std": [0.0512, 2.0],
            "avg_ci95": [0.10036, 4.2],
            "age_p50": [41.0, 38.5],
            "age_p50_rank_ci95": [81.76, 81.76],
            "note": [1.5, 2.0],
        }
    )
    page = result_html(frame)
    _well_formed(page)
    assert '<th scope="col">count (± 95%)</th>' in page
    assert "<td>&lt;b&gt;north&lt;/b&gt;</td>" in page
    assert "<td>1234 ± 54</td>" in page
    assert ">-5 ± 54</td>" in page  # in a grey row (test_result_html_greys_...)
    assert "<td>56.19 ± 0.10</td>" in page
    assert ">0.5 ± 4.2</td>" in page
    assert "<td>41 (rank ± 81.8)</td>" in page
    assert "<td>38.5 (rank ± 81.8)</td>" in page
    assert "<td>1.5</td>" in page
    for hidden in ("count_std", "avg_ci95", "age_p50_rank_ci95"):
        assert hidden not in page
    assert result_html(frame.to_pandas()) == page


def test_result_html_of_a_release(sess: pf.Session) -> None:
    result = _keyed(sess).release(rho=0.5, with_error=True)
    page = result_html(result)
    for row in result.iter_rows(named=True):
        ci = row["count_ci95"]
        assert f"{row['count']} ± {ci:.{max(0, 1 - math.floor(math.log10(ci)))}f}" in page
    assert '<th scope="col">avg&lt;1&gt; (± 95%)</th>' in page
    # Without error columns, values are shown as they are.
    plain = _keyed(sess).release(rho=0.25)
    assert "±" not in result_html(plain.to_pandas())


def _grey(page: str) -> tuple[list[str], list[str]]:
    """The grey rows (by their first cell) and the grey cells' text of a result's table."""
    rows = [e for e in _well_formed(page).iter() if e.tag.split("}")[-1] == "tr"]
    grey_rows, grey_cells = [], []
    for row in rows:
        cells = [e for e in row if e.tag.split("}")[-1] == "td"]
        if row.get("class") == "pf-noise" and cells:
            grey_rows.append(cells[0].text or "")
        grey_cells += [c.text or "" for c in cells if c.get("class") == "pf-noise"]
    return grey_rows, grey_cells


def test_result_html_greys_a_row_whose_count_interval_includes_zero() -> None:
    frame = pl.DataFrame(
        {
            "region": ["full", "empty", "thin"],
            "n": [900, 3, 60],
            "n_ci95": [48.0, 48.0, 48.0],
            # The empty group's mean looks like data (30.2 ± 29 excludes 0): its row's
            # count marks it; the thin group's sum is within noise of 0 on its own.
            "avg": [41.5, 30.2, 40.0],
            "avg_ci95": [1.5, 29.0, 5.0],
            "total": [37_000.0, 90.0, 150.0],
            "total_ci95": [2_000.0, 1_900.0, 1_900.0],
        }
    )
    page = result_html(frame, counts=["n"])
    rows, cells = _grey(page)
    assert rows == ["empty"]
    assert cells == ["3 ± 48", "90 ± 1900", "150 ± 1900"]
    assert "dominated by noise" in page
    # Without the count's name only the values are judged; an unmarked table has no note.
    assert _grey(result_html(frame)) == ([], cells)
    assert "dominated by noise" not in result_html(frame.head(1))
    assert _grey(show(frame, counts=["n"])._repr_html_()) == (rows, cells)


@pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_release_greys_the_public_key_without_rows_and_not_a_full_one(seed: int) -> None:
    df = pl.DataFrame({"user": range(400), "region": ["north"] * 400, "age": [40.0] * 400})
    sess = pf.Session(df, "user", pf.zCDP(1.0), rng=SeededRandomness(seed))
    result = (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=1)
        .group_by("region", keys=["north", "nowhere"])
        .agg(pf.count(), pf.mean("age", bounds=(0, 100)))
        .release(rho=0.5, with_error=True)
    )
    rows, _ = _grey(show(result)._repr_html_())
    assert rows == ["nowhere"]


@pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")
def test_the_report_greys_the_rows_its_counts_mark() -> None:
    df = pl.DataFrame({"user": range(300), "region": ["a"] * 300, "amount": [5.0] * 300})
    sess = pf.Session(df, "user", pf.zCDP(1.0), rng=SeededRandomness(4))
    query = (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=1)
        .group_by("region", keys=["a", "nowhere"])
        .agg(pf.count().alias("people"), pf.sum("amount", bounds=(0, 100)))
    )
    result = query.release(rho=0.5, with_error=True)
    section = ReportSection("q", "q", query, query.explain(rho=0.5), result)
    page = report_html("r", datetime(2026, 1, 2, tzinfo=UTC), [section], sess.report(), [])
    # The report names the count by its alias: its interval marks the empty group's row.
    assert _grey(page)[0] == ["nowhere"]
    assert "dominated by noise" in page
    # The chart (of the first output, the count) greys the empty group's bar too.
    assert page.count('fill="#d1d5db"') == 1


def _mean_only(seed: int) -> tuple[pf.Session, Query]:
    """A mean with positive bounds over a full public group and one without rows."""
    df = pl.DataFrame({"user": range(400), "region": ["full"] * 400, "wage": [1500.0] * 400})
    sess = pf.Session(df, "user", pf.zCDP(2.0), rng=SeededRandomness(seed))
    query = (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=1)
        .group_by("region", keys=["full", "nowhere"])
        .agg(pf.mean("wage", bounds=(1000, 2000)))
    )
    return sess, query


@pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")
@pytest.mark.parametrize("seed", range(8))
def test_show_with_its_query_greys_the_mean_of_an_empty_group_and_not_a_full_ones(
    seed: int,
) -> None:
    _, query = _mean_only(seed)
    result = query.release(rho=1, with_error=True)
    rows, cells = _grey(pf.show(result, query=query)._repr_html_())
    nowhere = result.row(1, named=True)
    assert rows == []
    assert cells == [html.unescape(interval(nowhere["wage_mean"], nowhere["wage_mean_ci95"]))]


@pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")
def test_the_report_greys_the_mean_of_an_empty_group_by_its_bounds() -> None:
    sess, query = _mean_only(1)
    result = query.release(rho=1, with_error=True)
    # No count is released and the empty group's interval excludes 0 (the bounds are
    # positive): a bare frame, which does not know its bounds, greys nothing.
    assert _grey(pf.show(result)._repr_html_()) == ([], [])
    section = ReportSection("q", "q", query, query.explain(rho=1), result)
    page = report_html("r", datetime(2026, 1, 2, tzinfo=UTC), [section], sess.report(), [])
    rows, cells = _grey(page)
    assert rows == []
    assert len(cells) == 1
    assert "dominated by noise" in page
    # The chart's only output is the mean: the empty group's bar is grey, the full one's not.
    assert page.count('fill="#d1d5db"') == 1


def test_the_bounds_rule_greys_an_interval_spanning_half_the_bounds_or_more() -> None:
    rule = NoiseRule(ranges={"m": (1000.0, 2000.0)})
    assert rule.noise("m", 1500.0, 250.0)
    assert not rule.noise("m", 1500.0, 249.0)
    # Only outputs with a known range, and only numbers, are judged by it.
    assert not rule.noise("other", 1500.0, 900.0)
    assert not rule.noise("m", None, 900.0)
    assert not rule.noise("m", 1500.0, math.nan)


def test_show_wraps_a_result_for_notebooks() -> None:
    frame = pd.DataFrame({"x": [1.0], "x_std": [0.5], "x_ci95": [0.98]})
    shown = show(frame)
    assert isinstance(shown, Shown)
    assert shown.frame is frame
    assert shown._repr_html_() == result_html(frame)


def test_show_leaves_a_total_rows_quantile_and_distinct_count_empty(sess: pf.Session) -> None:
    query = (
        sess.query()
        .bound(max_groups=2, max_rows_per_group=3)
        .group_by("region", keys=["a", "b"])
        .agg(pf.count(), pf.median("amount", bounds=(0, 100)), pf.count_distinct())
    )
    result = query.release(rho=0.5, with_error=True, total=True)
    assert result["amount_median"][-1] is None
    assert result["count_distinct"][-1] is None
    page = show(result)._repr_html_()
    total = re.split(r"<tr[ >]", page)[-1]  # a row mostly noise is greyed: <tr style=...>
    cells = re.findall(r"<td[^>]*>(.*?)</td>", total)
    assert cells[0] == ""
    assert cells[1].startswith(f"{result['count'][-1]} ± ")
    assert cells[2:] == ["", ""]
    assert "(rank ± " in page
    assert show(result.to_pandas())._repr_html_().count("<tr") == page.count("<tr")
    _chart(result)


# --------------------------------------------------------------------------- chart and page


def _chart(frame: pl.DataFrame) -> ET.Element:
    return ET.fromstring(bar_chart(frame).split("</svg>")[0] + "</svg>")


def test_chart_has_one_bar_and_error_bar_per_group_and_handles_negatives() -> None:
    frame = pl.DataFrame(
        {
            "region": ["a", "b", "c"],
            "month": [1, 2, 3],
            "total": [100.0, -40.0, 5.0],
            "total_std": [5.0, 5.0, 5.0],
            "total_ci95": [10.0, 10.0, 10.0],
        }
    )
    svg = _chart(frame)
    bars = svg.findall(f"{SVG}rect")
    assert len(bars) == 3
    assert len(svg.findall(f"{SVG}path")) == 3
    labels = [t.text for t in svg.findall(f"{SVG}text")]
    assert "a / 1" in labels
    assert "b / 2" in labels
    (zero,) = svg.findall(f"{SVG}line")
    x0 = float(zero.get("x1", "nan"))
    negative = bars[1]
    assert float(negative.get("x", "nan")) + float(negative.get("width", "nan")) == pytest.approx(
        x0, abs=0.1
    )
    assert float(bars[0].get("x", "nan")) == pytest.approx(x0, abs=0.1)
    assert negative.get("fill") != bars[0].get("fill")
    assert negative.findtext(f"{SVG}title") == "b / 2: -40 ± 10"


def test_chart_of_many_groups_and_of_quantiles() -> None:
    n = 500
    frame = pl.DataFrame(
        {"k": [f"g{i}" for i in range(n)], "n": [float(i) for i in range(n)], "n_ci95": [3.0] * n}
    )
    page = bar_chart(frame)
    svg = _chart(frame)
    assert len(svg.findall(f"{SVG}rect")) == 60
    assert f"the first 60 of {n} groups" in page
    quantiles = pl.DataFrame({"q_p50": [4.0], "q_p50_rank_ci95": [12.0]})
    svg = _chart(quantiles)
    assert len(svg.findall(f"{SVG}rect")) == 1
    assert svg.findall(f"{SVG}path") == []
    assert [t.text for t in svg.findall(f"{SVG}text")][1] == "all"
    assert bar_chart(pl.DataFrame({"k": ["a"], "n": [1]})) == ""


def test_report_page_is_well_formed_and_complete(sess: pf.Session) -> None:
    query = _keyed(sess)
    explanation = query.explain(rho=0.25)
    result = query.release(rho=0.25, with_error=True, label="T&T/<one>")
    sql = "SELECT region, COUNT(*) FROM data WHERE amount < 5 GROUP BY region"
    entries = sess.ledger
    page = report_html(
        "T&T <report>",
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        [
            ReportSection("one", "T&T/<one>", query, explanation, result),
            ReportSection("two", "T&T/two", query, explanation, result, sql=sql),
        ],
        sess.report(),
        entries,
    )
    root = _well_formed(page)
    assert root.tag == f"{XHTML}html"
    assert root.findtext(f"{XHTML}head/{XHTML}title") == "T&T <report>"
    body = root.find(f"{XHTML}body")
    assert body is not None
    assert body.findtext(f"{XHTML}h1") == "T&T <report>"
    assert "2026-01-02T03:04:05+00:00" in page
    sections = body.findall(f"{XHTML}section")
    assert [s.get("id") for s in sections] == ["query-1", "query-2", "budget"]
    assert sections[1].findtext(f"{XHTML}pre") == sql
    assert "amount &lt; 5" in page
    for section in sections[:2]:
        svg = section.find(f"{SVG}svg")
        assert svg is not None
        assert len(svg.findall(f"{SVG}rect")) == result.height
        assert len(svg.findall(f"{SVG}path")) == result.height
        assert section.find(f"{XHTML}details") is not None
    used = zCDP(entries[0].rho)
    delta = sess.report().delta
    assert f"ρ = {used.rho:.6g}" in page
    assert f"ε = {used.epsilon(delta):.6g} at δ = {delta:.3g}" in page
    assert f"μ = √(2ρ) = {used.to_gdp().mu:.6g}" in page
    assert "Stated by zcdp accounting" in page
    assert "T&amp;T/&lt;one&gt;" in page
    assert "<script" not in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/1999/xhtml"', "").replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )


def test_explanation_html_shows_sql_notes() -> None:
    df = pl.DataFrame({"u": [1, 2], "r": ["a", "b"]})
    sess = pf.Session(
        df,
        "u",
        pf.zCDP(1.0),
        metadata={"r": pf.Column(keys=["a", "b"])},
        contributions=pf.Bound(max_groups=1, max_rows_per_group=1),
    )
    explanation = sess.sql("SELECT r, COUNT(*) AS n FROM data GROUP BY r ORDER BY n").explain(0.5)
    assert explanation.notes
    page = explanation_html(explanation)
    for note in explanation.notes:
        assert f"<li>{html.escape(note)}</li>" in page


def test_page_has_no_external_assets(sess: pf.Session) -> None:
    page = report_html("t", datetime.now(UTC), [], sess.report(), [])
    assert not re.search(r"""(src|href)=["'](?!#)""", page)
