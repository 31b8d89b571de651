"""Building blocks of privframe's HTML views: escaping, number formats, tables and paragraphs.

Every helper escapes the text it is given, so a view built from them only
ever puts escaped text into its markup; the markup is well-formed XML (every
tag closed, every attribute quoted). This module imports nothing from
privframe, so every layer's views (the plan's explanation, the api's
session, query and report page) can use it.

Example:
    >>> from privframe._html import paragraph, table
    >>> paragraph("a < b", "pf-meta")
    '<p class="pf-meta">a &lt; b</p>'
    >>> table(["x"], [[1]]).endswith("<tbody><tr><td>1</td></tr></tbody></table>")
    True
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "BAR_COLOUR",
    "SVG_NAMESPACE",
    "Greyed",
    "interval",
    "number",
    "paragraph",
    "plain",
    "table",
    "text",
]

SVG_NAMESPACE = "http://www.w3.org/2000/svg"
"""The namespace every inline ``<svg>`` declares, so the page stays well-formed XML."""

BAR_COLOUR = "#4c78a8"
"""The fill of a bar (a budget gauge's spent share, a chart's positive value)."""

_GREY = 'class="pf-noise" style="color:#6b7280"'  # 4.8:1 on white: readable, yet set apart
"""A greyed row or cell: grey inline, so a notebook shows it without the page's CSS."""


@dataclass(frozen=True)
class Greyed:
    """A :func:`table` cell shown grey, with ``why`` as its tooltip.

    Example:
        >>> from privframe._html import Greyed, table
        >>> '<td class="pf-noise" style="color:#6b7280" title="noise">3</td>' in table(
        ...     ["n"], [[Greyed(3, "noise")]])
        True
    """

    content: object
    why: str


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
"""Code points XML 1.0 forbids (and lone surrogates, which no UTF-8 file can hold)."""


def text(value: object) -> str:
    """``str(value)``, escaped for HTML text and quoted attributes.

    A code point a page cannot hold (a control character, a lone surrogate)
    becomes U+FFFD, so a hostile name never breaks the page or its file.

    Example:
        >>> from privframe._html import text
        >>> text('<b a="1">')
        '&lt;b a=&quot;1&quot;&gt;'
        >>> text("a" + chr(0) + "b") == "a" + chr(0xFFFD) + "b"
        True
    """
    return html.escape(_NOT_XML.sub("\ufffd", str(value)))


def number(x: float) -> str:
    """A budget or noise parameter: six significant digits, as the text reports print them.

    Example:
        >>> from privframe._html import number
        >>> number(0.123456789), number(float("inf"))
        ('0.123457', '∞')
    """
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return f"{x:.6g}"


def plain(value: object) -> str:
    """A released or key value without an interval; ``None`` is empty.

    Example:
        >>> from privframe._html import plain
        >>> plain(1234567.0), plain(0.1234567), plain(None), plain("north")
        ('1234567', '0.123457', '', 'north')
    """
    if value is None:
        return ""
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        # Whole numbers print in full (1234567, not 1.23457e+06).
        return f"{value:.0f}" if value.is_integer() and abs(value) < 1e15 else f"{value:.6g}"
    return str(value)


def interval(value: float | None, half: float | None) -> str:
    """``value ± half`` to the precision of the interval: two significant digits of ``half``.

    A missing value (a total row's quantile or distinct count, which no
    measurement gives) is empty, like :func:`plain`'s.

    Example:
        >>> from privframe._html import interval
        >>> interval(1234.0, 53.7), interval(0.5, float("nan")), interval(None, None)
        ('1234 ± 54', '0.5 ± nan', '')
    """
    if value is None or half is None:
        return plain(value)
    if not (math.isfinite(half) and half > 0 and math.isfinite(value)):
        return f"{plain(value)} ± {plain(half)}"
    decimals = min(15, max(0, 1 - math.floor(math.log10(half))))
    return f"{value:.{decimals}f} ± {half:.{decimals}f}"


def rank_interval(value: float | None, half: float | None) -> str:
    """A quantile with its 95% rank error: ``value (rank ± half)``; a missing one is empty.

    Example:
        >>> from privframe._html import rank_interval
        >>> rank_interval(4.0, 12.25), rank_interval(None, None)
        ('4 (rank ± 12.2)', '')
    """
    if value is None or half is None:
        return plain(value)
    return f"{plain(value)} (rank ± {half:.3g})"


def table(
    header: Sequence[str],
    rows: Iterable[Sequence[object]],
    caption: str = "",
    row_notes: Sequence[str | None] = (),
) -> str:
    """A table of plain-text cells, each escaped here; no header row when ``header`` is empty.

    A :class:`Greyed` cell is grey; a row whose note in ``row_notes`` (by
    position) is given is grey as a whole, its note the row's tooltip. Header
    cells say they head a column (``scope="col"``), for screen readers.

    Example:
        >>> from privframe._html import table
        >>> table(["n"], [[1]]).split("<tbody>")[0]
        '<table class="pf-table"><thead><tr><th scope="col">n</th></tr></thead>'
        >>> page = table((), [("a&b", 2)], "facts")
        >>> "<caption>facts</caption><tbody>" in page, "<td>a&amp;b</td><td>2</td>" in page
        (True, True)
        >>> table((), [[1], [2]], row_notes=[None, "noise"]).count('<tr class="pf-noise"')
        1
    """
    head = "".join(f'<th scope="col">{text(h)}</th>' for h in header)
    notes = list(row_notes)
    body = "".join(
        _row_start(notes[i] if i < len(notes) else None) + "".join(map(_cell, row)) + "</tr>"
        for i, row in enumerate(rows)
    )
    title = f"<caption>{text(caption)}</caption>" if caption else ""
    thead = f"<thead><tr>{head}</tr></thead>" if header else ""
    return f'<table class="pf-table">{title}{thead}<tbody>{body}</tbody></table>'


def _row_start(note: str | None) -> str:
    return f'<tr {_GREY} title="{text(note)}">' if note else "<tr>"


def _cell(cell: object) -> str:
    if isinstance(cell, Greyed):
        return f'<td {_GREY} title="{text(cell.why)}">{text(cell.content)}</td>'
    return f"<td>{text(cell)}</td>"


def paragraph(content: str, cls: str = "") -> str:
    """A paragraph of escaped text, with an optional CSS class.

    Example:
        >>> from privframe._html import paragraph
        >>> paragraph("spent 0 of 1")
        '<p>spent 0 of 1</p>'
    """
    attr = f' class="{cls}"' if cls else ""
    return f"<p{attr}>{text(content)}</p>"
