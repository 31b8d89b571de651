"""Notebook and report views of pure-DP and (ε, δ) sessions: ε (and δ), basic vs tight."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import polars as pl
import pytest

import privframe as pf
from privframe.api.html import ReportSection, report_html, session_html
from privframe.api.query import Query
from privframe.mechanisms.noise import SeededRandomness

XHTML = "{http://www.w3.org/1999/xhtml}"
SECRET_REGION = "zz-secret-region"


def _frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "user": [1, 1, 2, 3, 4, 5],
            "region": ["a", "b", "a", SECRET_REGION, "b", "a"],
            "amount": [10.0, 20.0, 987654.321, 7.5, 3.0, 1.0],
        }
    )


def _keyed(sess: pf.Session) -> Query:
    return (
        sess.query()
        .bound(max_groups=2, max_rows_per_group=3)
        .group_by("region", keys=["a", "b", "<c&d>"])
        .agg(pf.count(), pf.mean("amount", bounds=(0, 100)).alias("avg<1>"))
    )


def _well_formed(page: str) -> ET.Element:
    return ET.fromstring(page.split("\n", 1)[1] if page.startswith("<!DOCTYPE") else page)


def _no_data_facts(page: str) -> None:
    assert SECRET_REGION not in page
    assert "987654" not in page


def test_a_pure_session_shows_epsilon_spent_remaining_and_its_ledger_in_epsilon() -> None:
    sess = pf.Session(_frame(), "user", pf.PureDP(1.0))
    _keyed(sess).release(epsilon=0.25, label="<script>alert(1)</script> & co")
    sess.query().bound(max_rows=2).agg(pf.count()).release(epsilon=0.125, label="total")
    page = session_html(sess)
    _well_formed(page)
    assert page == sess._repr_html_()  # what a notebook displays
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in page
    assert "epsilon spent 0.375 of 1 (0.625 remaining) in 2 releases" in page
    assert "<tr><td>budget</td><td>1</td></tr>" in page
    assert "<tr><td>spent</td><td>0.375</td></tr>" in page
    assert "<tr><td>remaining</td><td>0.625</td></tr>" in page
    header = ("#", "label", "ε", "time (UTC)")
    assert "".join(f'<th scope="col">{h}</th>' for h in header) in page
    for entry in sess.ledger:
        assert f"<td>{entry.epsilon:.6g}</td><td>{entry.time[:19].replace('T', ' ')}</td>" in page
    assert "ρ" not in page
    assert "μ" not in page
    assert "Dwork &amp; Roth 2014" in page
    assert 'width="90.0"' in page  # the gauge: 0.375 of 1
    _no_data_facts(page)


def test_a_pure_session_before_any_release() -> None:
    page = session_html(pf.Session(_frame(), "user", pf.PureDP(2.0)))
    assert "no releases yet" in page
    assert "epsilon spent 0 of 2 (2 remaining) in 0 releases" in page


def test_an_approx_session_shows_its_tight_charge_beside_basic_composition() -> None:
    sess = pf.Session(_frame(), "user", pf.ApproxDP(10.0, 1e-3))
    query = sess.query().bound(max_rows=1).agg(pf.count())
    sess.release_all([query.request(epsilon=0.1, delta=1e-6, label=f"q{i}") for i in range(30)])
    spent, basic = sess.spent, sess.basic_spent
    assert basic == pf.ApproxDP(3.0, 3e-5)
    assert spent.exact_epsilon < basic.exact_epsilon
    report = sess.report()
    page = session_html(sess)
    _well_formed(page)
    assert (
        f"epsilon spent {report.spent_epsilon:.6g} of 10 ({report.remaining_epsilon:.6g} "
        "remaining), delta spent 3e-05 of 0.001 in 30 releases" in page
    )
    assert (
        f"The ledger charged the tight composition of its releases, ε = "
        f"{report.spent_epsilon:.6g}; basic composition (adding their ε and δ) would have "
        "charged ε = 3, δ = 3e-05." in page
    )
    assert "<tr><td>basic composition</td><td>3</td><td>3e-05</td></tr>" in page
    assert f"<tr><td>spent</td><td>{report.spent_epsilon:.6g}</td><td>3e-05</td></tr>" in page
    assert '<th scope="col">label</th><th scope="col">ε</th><th scope="col">δ</th>' in page
    assert "<td>q29</td><td>0.1</td><td>1e-06</td>" in page
    assert "Feldman &amp; Zrnic 2021" in page
    assert "ρ" not in page


def test_an_epsilon_session_flags_seeded_releases() -> None:
    seeded = pf.Session(_frame(), "user", pf.PureDP(1.0), rng=SeededRandomness(1))
    with pytest.warns(pf.SeededRandomnessWarning):
        seeded.query().bound(max_rows=1).agg(pf.count()).release(epsilon=0.5)
    page = session_html(seeded)
    assert "NOT private" in page
    assert "<td>yes</td>" in page


@pytest.mark.parametrize(
    ("budget", "spend", "cost", "charged"),
    [
        (
            pf.PureDP(1.0),
            {"epsilon": 0.25},
            "cost ε = 0.25; ledger label",
            "This report&#x27;s 1 release(s) charged ε = 0.25 (pure DP).",
        ),
        (
            pf.ApproxDP(1.0, 1e-5),
            {"epsilon": 0.25, "delta": 1e-6},
            "cost ε = 0.25, δ = 1e-06; ledger label",
            "This report&#x27;s 1 release(s) asked for ε = 0.25, δ = 1e-06 ((ε, δ)-DP).",
        ),
    ],
)
def test_a_report_page_of_an_epsilon_session_states_epsilon(
    budget: pf.PureDP | pf.ApproxDP, spend: dict[str, float], cost: str, charged: str
) -> None:
    sess = pf.Session(_frame(), "user", budget)
    query = _keyed(sess)
    explanation = query.explain(**spend)
    result = query.release(**spend, with_error=True, label="T&T/<one>")
    page = report_html(
        "T&T <report>",
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        [ReportSection("one", "T&T/<one>", query, explanation, result)],
        sess.report(),
        sess.ledger,
    )
    body = _well_formed(page).find(f"{XHTML}body")
    assert body is not None
    assert body.findtext(f"{XHTML}h1") == "T&T <report>"
    assert cost in page
    assert charged in page
    assert "T&amp;T/&lt;one&gt;" in page
    assert "ρ" not in page.split('<section id="budget">')[1]
    _no_data_facts(page)


def test_an_empty_report_page_of_an_epsilon_session() -> None:
    for budget in (pf.PureDP(1.0), pf.ApproxDP(1.0, 1e-6)):
        acct = pf.accounting.Accountant(budget)
        page = report_html("t", datetime(2026, 1, 2, tzinfo=UTC), [], acct.report(), [])
        _well_formed(page)
        assert "This report&#x27;s 0 release(s)" in page
        assert "epsilon spent 0 of 1" in page
