"""The dashboard of a real ``privframe serve`` in headless Chromium, on a desktop and a phone.

Releases go through the real client; the page, opened with the token in its
address's fragment, must show the dataset's section (its chart's line, the
releases with their 95% widths, a hostile label as text and never as an
element), draw the chart in the pixels of a desktop and of a phone-sized
window without running past the phone's, refuse a wrong token, and run the
planner from a shared link (``#token=...&sql=...&rho=...``) without spending,
and show the other datasets when one cannot be shown (its section says why).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import pytest
from browser_setup import chromium, rendered, screenshot
from server_setup import DATASET, ServerProcess, add_analyst, quickstart, write_config

import privframe as pf
from privframe.api.client import RemoteSession
from privframe.api.server.config import load_config
from privframe.api.server.store import Store

HOSTILE = "<img src=x onerror=alert(1)>"
PLANNED_SQL = "SELECT region, COUNT(*) AS n FROM data GROUP BY region"

pytestmark = pytest.mark.slow


class _Elements(HTMLParser):
    """Every element of a serialised DOM: its tag and attributes, in document order."""

    def __init__(self, dom: str) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []
        self.feed(dom)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))

    def having(self, tag: str, cls: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.found if t == tag and cls in (a.get("class") or "").split()]


@pytest.fixture
def released(tmp_path: Path) -> Iterator[tuple[ServerProcess, str, RemoteSession]]:
    """A server, and an analyst's token and session after three releases, one hostile."""
    chromium()  # skip (locally) before starting a server
    with ServerProcess(write_config(tmp_path)) as server:
        token = add_analyst(load_config(server.config).database, "alice", 1.0)
        sess = pf.connect(server.url, DATASET, token, results="polars")
        quickstart(sess).release(rho=0.25, label="regions-by-count")
        quickstart(sess).release(rho=0.25, label=HOSTILE)
        quickstart(sess).release(rho=0.25)
        yield server, token, sess
        sess.close()


def _lined_rows(pixels: np.ndarray) -> np.ndarray:
    """The rows holding pixels of the spend line's blue (#4c78a8, the gauge's too).

    An anti-aliased edge blends it with white: lighter, but still far bluer
    than red, which no text, grid line or the budget's red line is.
    """
    red, blue = pixels[:, :, 0].astype(int), pixels[:, :, 2].astype(int)
    return np.flatnonzero((blue - red >= 40).any(axis=1))


def test_the_page_shows_the_dataset_its_chart_and_releases(
    released: tuple[ServerProcess, str, RemoteSession],
) -> None:
    server, token, _ = released
    dom = rendered(f"{server.url}/dashboard#token={token}")
    elements = _Elements(dom)
    (body,) = [a for t, a in elements.found if t == "body"]
    assert body["data-state"] == "shown"
    (section,) = elements.having("section", "pf-dataset")
    assert section["data-name"] == DATASET
    assert f"<h2>{DATASET}</h2>" in dom
    assert len(elements.having("svg", "pf-lines")) == 1
    assert len(elements.having("polyline", "pf-line")) == 1
    assert "0.25</strong> ρ remaining of 1" in dom
    assert "regions-by-count" in dom
    assert dom.count(">(no label)</td>") == 1
    assert dom.count("count ± ") == 3  # each release's outputs with their 95% widths
    assert dom.count("avg_amount ≤ ≈ ± ") == 3
    # The hostile label is text: no element came of it.
    assert "&lt;img src=x onerror=alert(1)&gt;" in dom
    assert [t for t, _ in elements.found if t == "img"] == []
    assert len(elements.having("form", "pf-planner")) == 1


def test_a_wrong_token_is_refused_and_shows_nothing(
    released: tuple[ServerProcess, str, RemoteSession],
) -> None:
    server, _, _ = released
    dom = rendered(f"{server.url}/dashboard#token=pf_wrong")
    assert 'data-state="refused"' in dom
    assert "regions-by-count" not in dom


def test_the_chart_renders_on_a_desktop_and_on_a_phone_without_running_past_it(
    released: tuple[ServerProcess, str, RemoteSession], tmp_path: Path
) -> None:
    server, token, _ = released
    url = f"{server.url}/dashboard#token={token}"
    desktop = screenshot(url, tmp_path / "desktop.png", 1200, 1400)
    phone = screenshot(url, tmp_path / "phone.png", 390, 1600)
    assert desktop.shape == (1400, 1200, 3)
    assert phone.shape == (1600, 390, 3)
    for pixels in (desktop, phone):
        rows = _lined_rows(pixels)
        # The gauge is 14 rows of that colour; the chart's steps climb over many more,
        # below the gauge and within the first screenful.
        assert len(rows) > 60
        assert rows.max() - rows.min() > 80
        assert rows.max() < pixels.shape[0] * 0.8
    # The phone's right margin is blank: no table, chart or text runs past the window.
    margin = phone[:, -6:, :]
    assert (margin >= 250).all()


def test_a_shared_plan_link_runs_the_planner_and_spends_nothing(
    released: tuple[ServerProcess, str, RemoteSession],
) -> None:
    server, token, sess = released
    before = sess.ledger
    fragment = urlencode({"token": token, "sql": PLANNED_SQL, "rho": "0.05"})
    dom = rendered(f"{server.url}/dashboard#{fragment}")
    elements = _Elements(dom)
    (planned,) = elements.having("div", "pf-planned")
    assert planned["data-state"] == "planned"
    assert len(elements.having("div", "pf-plan")) == 1
    assert "rho = 0.05 in all" in dom
    assert "<td>next query</td>" in dom
    assert "<td>n</td>" in dom
    assert len(elements.having("svg", "pf-lines")) == 2  # the spending, and the plan's widths
    assert sess.ledger == before


def test_a_link_to_a_dataset_not_granted_plans_nothing_and_says_so(
    released: tuple[ServerProcess, str, RemoteSession],
) -> None:
    server, token, _ = released
    fragment = urlencode({"token": token, "sql": PLANNED_SQL, "dataset": "elsewhere"})
    dom = rendered(f"{server.url}/dashboard#{fragment}")
    elements = _Elements(dom)
    assert elements.having("div", "pf-plan") == []
    (planned,) = elements.having("div", "pf-planned")
    assert "data-state" not in planned
    assert "plans on the dataset elsewhere, which is not granted to you" in dom


def test_a_dataset_that_cannot_be_shown_says_why_and_leaves_the_others(tmp_path: Path) -> None:
    chromium()
    config = write_config(tmp_path)
    shutil.copy(tmp_path / "transactions.parquet", tmp_path / "other.parquet")
    with config.open("a") as file:
        file.write('[datasets.other]\ndata = "other.parquet"\nprivacy_unit = "user_id"\n')
    store = Store(load_config(config).database)
    token = store.add_analyst("alice")
    for name in (DATASET, "other"):
        store.grant("alice", name, pf.zCDP(1.0))
    store.close()
    with ServerProcess(config) as server:
        (tmp_path / "other.parquet").write_bytes(b"no longer parquet")
        dom = rendered(f"{server.url}/dashboard#token={token}")
    elements = _Elements(dom)
    (body,) = [a for t, a in elements.found if t == "body"]
    assert body["data-state"] == "shown"
    sections = {a["data-name"]: a for a in elements.having("section", "pf-dataset")}
    assert set(sections) == {DATASET, "other"}
    assert "the data could not be read" in dom  # the broken one's section says so
    assert len(elements.having("form", "pf-planner")) == 1  # the readable one is whole
    assert len(elements.having("div", "pf-dashboard")) == 1
