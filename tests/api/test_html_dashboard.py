"""The dashboard's view of one dataset (``dashboard_html``): escaped, in the grant's unit, robust.

Labels and output names are the analyst's, so hostile ones must come out as
text; each kind of grant states what remains in its own unit; and every
ledger entry renders, whatever its description holds (entries written before
``ci95`` existed, marginals and synthetic data, shapes no privframe wrote).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

import polars as pl
import pytest

import privframe as pf
from privframe.accounting.ledger import LedgerEntry
from privframe.api.html import SessionSnapshot, dashboard_html
from privframe.api.query import Query

HOSTILE_LABEL = "<img src=x onerror=alert(1)>"
HOSTILE_OUTPUT = '"><svg onload=alert(2)>'
TIME = "2026-01-02T03:04:05.000000+00:00"


def _query(sess: pf.Session) -> Query:
    frame = sess.query().bound(max_groups=1, max_rows_per_group=1)
    return frame.agg(pf.count(), pf.sum("x", bounds=(0, 10)).alias(HOSTILE_OUTPUT))


def _session(budget: pf.Budget) -> pf.Session:
    return pf.Session(pl.DataFrame({"u": [1, 2, 3], "x": [1.0, 2.0, 3.0]}), "u", budget)


def _release(sess: pf.Session, amount: float, label: str = "") -> None:
    if sess.budget_kind is pf.zCDP:
        _query(sess).release(rho=amount, label=label)
    else:
        _query(sess).release(epsilon=amount, label=label)


def _cells(page: str) -> list[str]:
    return re.findall(r"<td[^>]*>(.*?)</td>", page)


def test_hostile_labels_and_output_names_come_out_as_text() -> None:
    sess = _session(pf.zCDP(1.0))
    _release(sess, 0.25, HOSTILE_LABEL)
    page = dashboard_html(sess)
    ET.fromstring(page)  # well-formed: nothing opened an element of its own
    assert "<img" not in page
    assert "<svg onload" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&quot;&gt;&lt;svg onload=alert(2)&gt; ≈ ± " in page  # the output, with its 95% ±


def test_an_empty_label_says_so_greyed() -> None:
    sess = _session(pf.zCDP(1.0))
    _release(sess, 0.25)
    page = dashboard_html(sess)
    assert 'title="this release was given no label">(no label)</td>' in page
    assert 'class="pf-noise"' in page


@pytest.mark.parametrize(
    ("budget", "remaining", "worth"),
    [
        (pf.zCDP(1.0), "0.75</strong> ρ remaining of 1", "zCDP: worth (ε, δ) = ("),
        (pf.PureDP(2.0), "1.75</strong> ε remaining of 2", "pure ε-DP, at δ = 0"),
        (pf.ApproxDP(2.0, 1e-6), "1.75</strong> ε remaining of 2", "δ = 1e-06 remaining"),
    ],
    ids=["zcdp", "pure", "approx"],
)
def test_each_kind_of_grant_states_what_remains_in_its_own_unit(
    budget: pf.Budget, remaining: str, worth: str
) -> None:
    sess = _session(budget)
    _release(sess, 0.25, "first")
    page = dashboard_html(sess)
    ET.fromstring(page)
    assert page.startswith('<div class="privframe pf-dashboard"><p class="pf-remaining">')
    assert f'<strong class="pf-big">{remaining}' in page  # first, large
    assert worth in page
    unit = "ρ" if isinstance(budget, pf.zCDP) else "ε"
    assert f'<th scope="col">{unit}</th>' in page  # the releases' cost column
    assert f"{unit} spent over time" in page  # the chart's title
    assert f"budget: {unit} = " in page  # its budget line
    if isinstance(budget, pf.zCDP):
        assert " or μ = " in page
    else:
        assert "ρ" not in page


def test_releases_are_listed_newest_first_and_the_chart_steps_up_with_each() -> None:
    sess = _session(pf.zCDP(1.0))
    for i, amount in enumerate((0.1, 0.2, 0.3)):
        _release(sess, amount, f"release {i}")
    page = dashboard_html(sess)
    assert page.index("release 2") < page.index("release 1") < page.index("release 0")
    (points,) = re.findall(r'<polyline class="pf-line" points="([^"]*)"', page)
    heights = [float(p.split(",")[1]) for p in points.split()]
    assert len(set(heights)) == 4  # 0, then each release's running total (SVG y grows down)
    assert heights == sorted(heights, reverse=True)
    assert 'class="pf-level"' in page


DESCRIPTIONS: list[Any] = [
    {"outputs": ["count", "total"]},  # a query's entry from before ci95
    {"outputs": ["count"], "ci95": {"count": "± 19.6"}},
    {"marginals": {"sets": [["a", "b"], ["c"]], "max_rows": 1, "share": "1/2"}, "events": []},
    {"synthesize": {"method": "aim", "columns": ["a", "b"], "domain": {}}, "events": []},
    {"tune": {"histograms": [{"histogram": "rows per (unit, group)"}, {"histogram": "x"}]}},
    "a description written as text",
    {},
    {"outputs": 3, "ci95": "wide"},
    {"outputs": [{"nested": [1]}, None], "ci95": {"None": 7}},
    {"marginals": {"sets": 5}},
    {"marginals": ["not", "a", "mapping"]},
    {"synthesize": {"columns": 7}},
    {"ci95": {"x": "1"}},
    {"tune": {"histograms": "text", "scale": 2}},
    {"tune": {"histograms": [3, {"bins": 1}]}},
]


def test_every_entry_renders_whatever_its_description_holds() -> None:
    entries = [
        LedgerEntry(i, TIME if i % 2 else "not a time", f"entry {i}", 0.01, 0.0, d, False)
        for i, d in enumerate(DESCRIPTIONS)
    ]
    page = dashboard_html(SessionSnapshot(entries, _session(pf.zCDP(1.0)).report()))
    ET.fromstring(page)
    cells = _cells(page)
    assert "count; total" in cells  # no ci95: the outputs alone
    assert "count ± 19.6" in cells
    assert "marginals of (a, b); (c)" in cells
    assert "synthetic data (aim) of a, b" in cells
    assert "tuning histograms: rows per (unit, group); x" in cells
    assert "a description written as text" in cells
    assert "marginals of 5" in cells
    assert "2026-01-02 03:04:05" in cells
    assert "not a time" in cells
    assert page.count("<tr>") == len(DESCRIPTIONS) + 3 + 2  # releases, guarantee, two headers
    # The chart places each entry at the next time it can read, and ends at the total spent.
    (points,) = re.findall(r'<polyline class="pf-line" points="([^"]*)"', page)
    assert points
    (last,) = re.findall(r"<title>(ρ spent[^<]*)</title>", page)
    assert last.startswith(f"ρ spent: {0.01 * len(DESCRIPTIONS):g} at ")


def test_a_grant_with_no_releases_shows_what_remains_and_no_chart() -> None:
    page = dashboard_html(_session(pf.PureDP(1.0)))
    ET.fromstring(page)
    assert '<strong class="pf-big">1</strong> ε remaining of 1' in page
    assert "no releases yet" in page
    assert "pf-lines" not in page
