"""The charts of privframe's pages: a result's bars, and lines (the planner's, the dashboard's).

:func:`bar_chart` draws one horizontal bar per group with its 95% interval;
:func:`line_chart` draws lines over a linear or logarithmic axis (the budget
planner's interval widths against the total budget, the dashboard's budget
spent over time). Both are inline SVG (no JavaScript, nothing loaded from
outside) whose text all went through :func:`privframe._html.text`.

Example:
    >>> import polars as pl
    >>> from privframe.api._chart import bar_chart
    >>> svg = bar_chart(pl.DataFrame({"r": ["a"], "n": [3.0], "n_ci95": [1.0]}))
    >>> svg.startswith("<svg"), svg.count('class="pf-bar"')
    (True, 1)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
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

__all__ = ["MAX_BARS", "Series", "bar_chart", "line_chart"]

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


# --------------------------------------------------------------------------- lines

_PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#9d755d")
"""Line colours, in order (Tableau 10's, told apart by most colour-blind readers)."""

_LINE_WIDTH, _LINE_HEIGHT = 600, 260
_LEFT, _RIGHT, _BOTTOM = 76, 16, 40
_LEGEND_ROW = 18


@dataclass(frozen=True)
class Series:
    """One line of :func:`line_chart`: its name (in the legend and tooltip) and its points.

    Example:
        >>> Series("count", ((0.1, 30.0), (1.0, 9.5))).name
        'count'
    """

    name: str
    points: tuple[tuple[float, float], ...]


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten in [lo, hi]; with 1, 2 and 5 times them when fewer than three."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for steps in ((1.0,), (1.0, 2.0, 5.0)):
        ticks = [m * 10.0**e for e in range(first, last + 1) for m in steps]
        inside = [t for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]
        if len(inside) >= 3:
            return inside
    return inside


@dataclass(frozen=True)
class _Axis:
    """A value range mapped onto a pixel range, linearly or on a log scale."""

    lo: float
    hi: float
    log: bool
    start: float
    end: float

    @classmethod
    def over(cls, values: Sequence[float], log: bool, start: float, end: float) -> _Axis:
        lo, hi = min(values), max(values)
        if hi <= lo:
            lo, hi = (lo / 2, lo * 2) if log else (lo - 1, hi + 1)
        return cls(lo, hi, log, start, end)

    def at(self, value: float) -> float:
        f = math.log10 if self.log else float
        return self.start + (f(value) - f(self.lo)) / (f(self.hi) - f(self.lo)) * (
            self.end - self.start
        )

    def ticks(self) -> list[float]:
        ticks = _log_ticks(self.lo, self.hi) if self.log else _ticks(self.lo, self.hi)
        # A wide log range has a power of ten per decade: every k-th keeps about eight.
        return ticks[:: -(-len(ticks) // 8)]


def line_chart(
    series: Sequence[Series],
    *,
    x_label: str,
    y_label: str,
    log_x: bool = False,
    log_y: bool = False,
    mark: float | None = None,
    mark_label: str = "",
    x_text: Callable[[float], str] = plain,
    step: bool = False,
    title: str = "",
    level: float | None = None,
    level_label: str = "",
) -> str:
    """An inline SVG of lines over a shared x axis, with a legend; '' with nothing to draw.

    A log axis drops the points that are not positive. ``mark`` draws a
    dashed vertical line at that x, labelled ``mark_label`` (the planner's
    chosen budget). ``step`` draws each line as steps (a running total that
    changes at its points). ``x_text`` writes an x tick (a time, say).
    ``level`` draws a dashed horizontal line at that y, labelled
    ``level_label`` (the dashboard's budget, which the spending reaches).

    Example:
        >>> from privframe.api._chart import Series, line_chart
        >>> svg = line_chart([Series("count", ((0.1, 30.0), (1.0, 9.5)))], x_label="ρ",
        ...                  y_label="95% ±", log_x=True, log_y=True, mark=0.5)
        >>> svg.count('class="pf-line"'), 'class="pf-mark"' in svg
        (1, True)
        >>> spent = line_chart([Series("ρ spent", ((0.0, 0.0), (60.0, 0.2)))], x_label="time",
        ...                    y_label="ρ", step=True, level=1.0, level_label="budget")
        >>> 'class="pf-level"' in spent
        True
    """
    drawn = [
        (
            s,
            [
                (x, y)
                for x, y in s.points
                if math.isfinite(x)
                and math.isfinite(y)
                and (x > 0 or not log_x)
                and (y > 0 or not log_y)
            ],
        )
        for s in series
    ]
    drawn = [(s, points) for s, points in drawn if points]
    if not drawn:
        return ""
    if mark is not None and not (math.isfinite(mark) and (mark > 0 or not log_x)):
        mark = None  # nowhere on the axis
    xs = [x for _, points in drawn for x, _ in points] + ([mark] if mark is not None else [])
    ys = [y for _, points in drawn for _, y in points] + ([] if log_y else [0.0])
    ys += [] if level is None else [level]
    top = 28
    bottom = top + _LINE_HEIGHT
    x_axis = _Axis.over(xs, log_x, _LEFT, _LEFT + _LINE_WIDTH)
    y_axis = _Axis.over(ys, log_y, bottom, top)
    shapes = [f'<text x="{_LEFT}" y="16" font-size="12">{text(title or y_label)}</text>']
    for tick in y_axis.ticks():
        y = y_axis.at(tick)
        shapes.append(
            f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + _LINE_WIDTH}" y2="{y:.1f}" '
            'stroke="#e5e7eb"/>'
            f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">'
            f"{text(plain(tick))}</text>"
        )
    for tick in x_axis.ticks():
        x = x_axis.at(tick)
        shapes.append(
            f'<text x="{x:.1f}" y="{bottom + 16}" font-size="11" text-anchor="middle">'
            f"{text(x_text(tick))}</text>"
        )
    shapes.append(
        f'<path d="M{_LEFT},{top}V{bottom}H{_LEFT + _LINE_WIDTH}" stroke="#111827" fill="none"/>'
        f'<text x="{_LEFT + _LINE_WIDTH / 2:.1f}" y="{bottom + 34}" font-size="12" '
        f'text-anchor="middle">{text(x_label)}</text>'
    )
    if mark is not None:
        x = x_axis.at(mark)
        shapes.append(
            f'<line class="pf-mark" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" '
            'stroke="#111827" stroke-dasharray="4 3"/>'
            f'<text x="{x + 4:.1f}" y="{top + 12}" font-size="11">{text(mark_label)}</text>'
        )
    if level is not None:
        y = y_axis.at(level)
        shapes.append(
            f'<line class="pf-level" x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + _LINE_WIDTH}" '
            f'y2="{y:.1f}" stroke="#b91c1c" stroke-dasharray="6 3"/>'
            f'<text x="{_LEFT + _LINE_WIDTH - 4}" y="{y - 5:.1f}" font-size="11" '
            f'text-anchor="end" fill="#b91c1c">{text(level_label)}</text>'
        )
    legend_top = bottom + _BOTTOM + 12
    for i, (s, points) in enumerate(drawn):
        colour = _PALETTE[i % len(_PALETTE)]
        # Past the palette, lines repeat its colours dashed: the first 14 all look different.
        dashes = ' stroke-dasharray="6 3"' if i // len(_PALETTE) % 2 else ""
        coordinates = [(x_axis.at(x), y_axis.at(y)) for x, y in points]
        if step:
            stepped = coordinates[:1]
            for x, y in coordinates[1:]:
                stepped += [(x, stepped[-1][1]), (x, y)]
            coordinates = stepped
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coordinates)
        last = points[-1]
        tip = f"{s.name}: {plain(last[1])} at {x_text(last[0])}"
        shapes.append(
            f'<polyline class="pf-line" points="{path}" fill="none" stroke="{colour}" '
            f'stroke-width="2"{dashes}><title>{text(tip)}</title></polyline>'
        )
        # A lone point, and where the mark meets the line, get a dot.
        dots = coordinates if len(coordinates) == 1 else []
        dots += [(x_axis.at(x), y_axis.at(y)) for x, y in points if x == mark]
        for x, y in dots:
            shapes.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>')
        y = legend_top + i * _LEGEND_ROW
        shapes.append(
            f'<line x1="{_LEFT}" y1="{y - 7}" x2="{_LEFT + 14}" y2="{y - 7}" stroke="{colour}" '
            f'stroke-width="3"{dashes}/>'
            f'<text x="{_LEFT + 20}" y="{y - 4}" font-size="12">{text(s.name)}</text>'
        )
    width = _LEFT + _LINE_WIDTH + _RIGHT
    height = legend_top + _LEGEND_ROW * len(drawn)
    label = f"{title or y_label} against {x_label}"
    return (
        f'<svg xmlns="{SVG_NAMESPACE}" class="pf-lines" width="{width}" height="{height}" '
        'style="max-width:100%;height:auto" font-family="system-ui, sans-serif" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{text(label)}">'
        + "".join(shapes)
        + "</svg>"
    )
