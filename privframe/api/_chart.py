"""The report page's chart: one horizontal bar per group, with its 95% interval.

The chart is inline SVG (no JavaScript, nothing loaded from outside) whose
text all went through :func:`privframe._html.text`.

Example:
    >>> import polars as pl
    >>> from privframe.api._chart import bar_chart
    >>> svg = bar_chart(pl.DataFrame({"r": ["a"], "n": [3.0], "n_ci95": [1.0]}))
    >>> svg.startswith("<svg"), svg.count('class="pf-bar"')
    (True, 1)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from privframe._html import BAR_COLOUR, SVG_NAMESPACE, interval, paragraph, plain, text
from privframe.api._frames import (
    Frame,
    NoiseRule,
    as_polars,
    error_columns,
    interval_columns,
)
from privframe.plan.aggregates.base import RANK_CI95_SUFFIX

__all__ = ["MAX_BARS", "bar_chart"]

MAX_BARS = 60
"""The chart draws the first groups only; the table beside it lists them all."""

_NEGATIVE_BAR = "#e45756"
_NOISE_BAR = "#d1d5db"  # a bar whose 95% interval includes 0, grey as in the table
_ROW_HEIGHT = 22
_LABEL_WIDTH = 170
_PLOT_WIDTH = 460
_TOP = 24


def _ticks(lo: float, hi: float) -> list[float]:
    """About five round tick values covering [lo, hi]."""
    raw = (hi - lo) / 5
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


@dataclass(frozen=True)
class _Bars:
    """What the chart draws: one output's value and interval half-width per group."""

    name: str
    errors: bool  # False for a quantile: its error is in ranks, not values
    labels: list[str]
    values: list[float]
    halves: list[float]

    def span(self) -> tuple[float, float]:
        """The value range to draw: every finite interval, and zero."""
        drawn = [
            (v, e) for v, e in zip(self.values, self.halves, strict=True) if math.isfinite(v + e)
        ]
        lo = min([0.0, *(v - e for v, e in drawn)])
        hi = max([0.0, *(v + e for v, e in drawn)])
        return (lo, lo + 1.0) if hi == lo else (lo, hi)


def _bars(frame: Frame) -> _Bars | None:
    """The first output with an interval (in values if any has one), per group; None for none."""
    data = as_polars(frame)
    outputs = interval_columns(data.columns)
    if not outputs:
        return None
    in_values = {n: c for n, c in outputs.items() if not c.endswith(RANK_CI95_SUFFIX)}
    name = next(iter(in_values or outputs))
    errors = name in in_values
    hidden = error_columns(data.columns, outputs) | set(outputs)
    groups = [c for c in data.columns if c not in hidden]
    rows = data.head(MAX_BARS)
    labels = (
        [" / ".join(map(plain, key)) for key in rows.select(groups).iter_rows()]
        if groups
        else ["all"] * rows.height
    )
    # A missing output (a total row's quantile or distinct count) is drawn as its label alone.
    values = [math.nan if v is None else float(v) for v in rows[name]]
    halves = (
        [math.nan if e is None else float(e) for e in rows[outputs[name]]]
        if errors
        else [0.0] * rows.height
    )
    return _Bars(name, errors, labels, values, halves)


@dataclass(frozen=True)
class _Scale:
    """Maps a value to its x coordinate in the plot."""

    lo: float
    hi: float

    def x(self, value: float) -> float:
        return _LABEL_WIDTH + (value - self.lo) / (self.hi - self.lo) * _PLOT_WIDTH


def _row(
    i: int, label: str, value: float, half: float, errors: bool, noise: bool, scale: _Scale
) -> list[str]:
    """One group's label, bar (with the value as its tooltip; grey if ``noise``) and error bar."""
    y = _TOP + i * _ROW_HEIGHT
    middle = y + _ROW_HEIGHT / 2
    short = label if len(label) <= 24 else label[:23] + "…"
    shapes = [
        f'<text x="{_LABEL_WIDTH - 6}" y="{middle + 4:.1f}" font-size="12" '
        f'text-anchor="end">{text(short)}</text>'
    ]
    if not math.isfinite(value + half):
        return shapes
    a, b = sorted((scale.x(0.0), scale.x(value)))
    tip = interval(value, half) if errors else plain(value)
    colour = BAR_COLOUR if value >= 0 else _NEGATIVE_BAR
    if errors and noise:
        colour, tip = _NOISE_BAR, f"{tip} (mostly noise: see the table's note)"
    shapes.append(
        f'<rect class="pf-bar" x="{a:.1f}" y="{y + 4}" width="{b - a:.1f}" '
        f'height="{_ROW_HEIGHT - 8}" fill="{colour}">'
        f"<title>{text(f'{label}: {tip}')}</title></rect>"
    )
    if errors:
        low, high = scale.x(value - half), scale.x(value + half)
        shapes.append(
            f'<path class="pf-err" d="M{low:.1f},{middle:.1f}H{high:.1f}'
            f"M{low:.1f},{middle - 4:.1f}V{middle + 4:.1f}"
            f'M{high:.1f},{middle - 4:.1f}V{middle + 4:.1f}" stroke="#111827" fill="none"/>'
        )
    return shapes


def _axis(scale: _Scale, bottom: int) -> list[str]:
    """The zero line and the tick labels under the plot."""
    zero = scale.x(0.0)
    return [
        f'<line class="pf-zero" x1="{zero:.1f}" y1="{_TOP}" x2="{zero:.1f}" y2="{bottom}" '
        'stroke="#111827"/>',
        *(
            f'<text x="{scale.x(tick):.1f}" y="{bottom + 16}" font-size="11" '
            f'text-anchor="middle">{text(plain(tick))}</text>'
            for tick in _ticks(scale.lo, scale.hi)
        ),
    ]


def bar_chart(frame: Frame, rule: NoiseRule | None = None) -> str:
    """An inline SVG of the first output with an interval: one bar per group, 95% error bars.

    Bars are horizontal (one row per group, so long labels and many groups
    fit); values can be negative (bars then extend left of the zero line). A
    bar the noise dominates is grey, as its value in the table (by ``rule``,
    default :class:`~privframe.api._frames.NoiseRule` without bounds).
    Quantiles get no error bars: their error is in ranks, not values. Only
    the first :data:`MAX_BARS` groups are drawn; the table lists them all.
    A frame with no interval column gets no chart (an empty string).

    Example:
        >>> import polars as pl
        >>> from privframe.api._chart import bar_chart
        >>> bar_chart(pl.DataFrame({"k": ["a"], "n": [1]}))
        ''
    """
    bars = _bars(frame)
    if bars is None:
        return ""
    rule = NoiseRule() if rule is None else rule
    scale = _Scale(*bars.span())
    n = len(bars.values)
    height = _TOP + _ROW_HEIGHT * n + 24
    width = _LABEL_WIDTH + _PLOT_WIDTH + 30
    shapes = [
        f'<text x="{_LABEL_WIDTH}" y="14" font-size="12">{text(bars.name)}'
        f"{' (bars: 95% intervals)' if bars.errors else ' (error in ranks: see the table)'}</text>"
    ]
    for i, (label, value, half) in enumerate(
        zip(bars.labels, bars.values, bars.halves, strict=True)
    ):
        noise = rule.noise(bars.name, value, half)
        shapes += _row(i, label, value, half, bars.errors, noise, scale)
    shapes += _axis(scale, _TOP + _ROW_HEIGHT * n)
    total = len(frame)
    note = (
        paragraph(f"the chart shows the first {MAX_BARS} of {total} groups", "pf-meta")
        if total > MAX_BARS
        else ""
    )
    return (
        f'<svg xmlns="{SVG_NAMESPACE}" class="pf-chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">' + "".join(shapes) + "</svg>" + note
    )
