"""The documentation's pictures, made again by hand: ``python docs/pictures.py``.

It starts ``privframe serve`` on the synthetic transactions in a temporary
folder (as the server tests do, with their helpers), makes a few releases as
an analyst, and takes each picture with headless Chromium into
``docs/images/``. A picture is a function taking the running :class:`Demo`
and writing its file; add one to :data:`PICTURES`. Keep each file small
(well under 150 KB): crop to what the page's text shows.

Example:
    >>> from docs.pictures import PICTURES
    >>> [picture.__name__ for picture in PICTURES]
    ['dashboard', 'dashboard_planner', 'plan']
"""

from __future__ import annotations

import struct
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"
sys.path.insert(0, str(ROOT / "tests"))  # the server tests' helpers: one way to start a server

from browser_setup import screenshot  # noqa: E402
from server_setup import (  # noqa: E402
    DATASET,
    ServerProcess,
    add_analyst,
    quickstart,
    write_config,
)

import privframe as pf  # noqa: E402
from privframe.api.html import page_html  # noqa: E402
from privframe.api.server.config import load_config  # noqa: E402

PLANNED_SQL = (
    "SELECT region, COUNT(*) AS n, AVG(amount) AS avg_amount FROM data "
    "WHERE age >= 18 GROUP BY region"
)


@dataclass(frozen=True)
class Demo:
    """A running server with an analyst who has released a few times."""

    url: str
    token: str
    scratch: Path

    def page(self, **fragment: str) -> str:
        """The dashboard's address, the token and ``fragment`` in its fragment."""
        return f"{self.url}/dashboard#{urlencode({'token': self.token, **fragment})}"


@contextmanager
def demo() -> Iterator[Demo]:
    """A server on temporary data; an analyst with ρ = 2 has made four releases over seconds."""
    with tempfile.TemporaryDirectory() as folder, ServerProcess(write_config(Path(folder))) as srv:
        token = add_analyst(load_config(srv.config).database, "alice", 2.0)
        sess = pf.connect(srv.url, DATASET, token, results="polars")
        for rho, label in ((0.2, "regions, first look"), (0.1, ""), (0.4, "regions, final")):
            quickstart(sess).release(rho=rho, label=label)
            time.sleep(2)  # so the chart's steps stand apart
        sess.parse_sql(PLANNED_SQL).release(rho=0.3, label="adults by region (SQL)")
        sess.close()
        yield Demo(srv.url, token, Path(folder))


def dashboard(run: Demo) -> Path:
    """The dashboard's top: what remains, the gauge, the spending over time, the releases."""
    pixels = screenshot(run.page(), run.scratch / "shot.png", 900, 1200)
    return write_png(IMAGES / "dashboard.png", _trimmed(pixels[:1000]))


def dashboard_planner(run: Demo) -> Path:
    """The planner run from a shared link: the table of widths, and widths against the budget."""
    pixels = screenshot(run.page(sql=PLANNED_SQL, rho="0.2"), run.scratch / "plan.png", 900, 2600)
    # The planner and its answer end the page: its last 920 drawn rows.
    return write_png(IMAGES / "dashboard-planner.png", _trimmed(pixels)[-920:])


def plan(run: Demo) -> Path:
    """The budget planner of docs/getting-started.md: widths against the total ρ, in a page."""
    sess = pf.Session(pf.datasets.synthetic_transactions(), "user_id", pf.zCDP(1.0))
    limited = sess.query().bound(max_groups=3, max_rows_per_group=5)
    regions = limited.group_by("region", keys=["north", "south", "east", "west"]).agg(
        pf.count(),
        pf.sum("amount", bounds=(0, 1000)),
        pf.mean("amount", bounds=(0, 1000)).alias("avg_amount"),
    )
    months = limited.group_by("month", keys=list(range(1, 13))).agg(pf.count())
    planned = pf.plan_budget(
        {"regions": regions, "months": months},
        rho=0.4,
        shares={"regions": 0.75, "months": 0.25},
        rows=5_000,
    )
    page = run.scratch / "plan.html"
    page.write_text(page_html("Budget plan", planned.html()), encoding="utf-8")
    pixels = screenshot(page.as_uri(), run.scratch / "plan-page.png", 900, 1400)
    return write_png(IMAGES / "plan.png", _trimmed(pixels))


def _text_rows(pixels: np.ndarray) -> np.ndarray:
    """The rows holding anything but the white background."""
    return np.flatnonzero((pixels < 245).any(axis=(1, 2)))


def _trimmed(pixels: np.ndarray) -> np.ndarray:
    """``pixels`` without the blank rows below their last drawn row (and 16 rows of margin)."""
    return pixels[: _text_rows(pixels).max() + 16]


PICTURES: list[Callable[[Demo], Path]] = [dashboard, dashboard_planner, plan]
"""Every picture, in the order :func:`main` makes them."""


def write_png(path: Path, pixels: np.ndarray) -> Path:
    r"""``pixels`` (height, width, 3; uint8) written as an 8-bit RGB PNG; the path.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> import numpy as np
        >>> from docs.pictures import write_png
        >>> path = write_png(Path(tempfile.mkdtemp()) / "x.png", np.zeros((2, 3, 3), np.uint8))
        >>> path.read_bytes()[:8]
        b'\x89PNG\r\n\x1a\n'
    """
    height, width, _ = pixels.shape
    # Each row Up-filtered: a page's rows mostly repeat the row above, which compresses best.
    rows = pixels.reshape(height, -1)
    above = np.vstack([np.zeros((1, rows.shape[1]), np.uint8), rows[:-1]])
    filtered = np.hstack([np.full((height, 1), 2, np.uint8), rows - above])

    def chunk(kind: bytes, data: bytes) -> bytes:
        checked = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + checked

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(filtered.tobytes(), 9))
        + chunk(b"IEND", b"")
    )
    return path


def main() -> None:
    """Make every picture; print each file and its size."""
    with demo() as run:
        for picture in PICTURES:
            path = picture(run)
            print(f"{path.relative_to(ROOT)}: {path.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main()
