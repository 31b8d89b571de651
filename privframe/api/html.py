"""HTML views for notebooks and the self-contained report page.

Every function here is pure: it takes privframe objects and returns an HTML
string in which all text went through :func:`html.escape`. The markup is also
well-formed XML (every tag closed, every attribute quoted), needs no
JavaScript and loads nothing from outside, so a report page can be mailed or
archived as one file. The session, query and explanation views show public
facts only (budgets, limits, bounds, the ledger); only :func:`result_html`
shows released values, which are noisy and already paid for.

Example:
    >>> import privframe as pf
    >>> from privframe.api.html import session_html
    >>> sess = pf.Session(pf.datasets.synthetic_transactions(1_000), "user_id", pf.zCDP(1.0))
    >>> "spent 0 of 1" in session_html(sess)
    True
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import pandas as pd
import polars as pl

from privframe.accounting.budgets import zCDP
from privframe.accounting.replay import guarantee
from privframe.plan.aggregates import Aggregate, Quantile, _Bounded
from privframe.plan.planner import ACCOUNTING_NOTE

if TYPE_CHECKING:
    # Types only: session, query and planner will call these views from _repr_html_.
    from privframe.accounting.accountant import BudgetReport
    from privframe.accounting.ledger import LedgerEntry
    from privframe.api.query import Query
    from privframe.api.session import Session
    from privframe.plan.planner import Explanation

__all__ = [
    "ReportSection",
    "Shown",
    "explanation_html",
    "query_html",
    "report_html",
    "result_html",
    "session_html",
    "show",
]

Frame = pl.DataFrame | pd.DataFrame

_SVG = "http://www.w3.org/2000/svg"
_BAR = "#4c78a8"
_NEGATIVE_BAR = "#e45756"
_MAX_BARS = 60
_ROW_HEIGHT = 22
_LABEL_WIDTH = 170
_PLOT_WIDTH = 460

_CONVERSION = (
    "ρ (and any δ spent outright) add up: spent + remaining = budget. ε, δ and μ state each "
    "row on its own and do not add up: (ε, δ) is converted from ρ with the tightest bound "
    "valid for every ρ-zCDP mechanism (Canonne, Kamath & Steinke 2020, Cor. 13), at δ = the "
    "reporting δ (the conversion's slack) plus the row's δ spent outright; μ = √(2ρ) is the "
    "Gaussian-DP summary, exact only for continuous Gaussian noise."
)

_PAGE_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: #1f2937; }
h1 { margin-bottom: 0.2em; }
.pf-meta { color: #6b7280; }
.pf-warning { background: #fee2e2; border: 2px solid #b91c1c; padding: 0.6em; font-weight: bold; }
.pf-table { border-collapse: collapse; margin: 0.8em 0; }
.pf-table caption { text-align: left; font-weight: bold; padding: 0.3em 0; }
.pf-table th, .pf-table td { border-bottom: 1px solid #d1d5db; padding: 0.25em 0.7em;
  text-align: left; vertical-align: top; }
.pf-table th { background: #f3f4f6; }
pre { background: #f3f4f6; padding: 0.6em; overflow-x: auto; }
section { border-top: 1px solid #d1d5db; margin-top: 1.5em; }
"""


# --------------------------------------------------------------------------- formatting


def _text(value: object) -> str:
    return html.escape(str(value))


def _num(x: float) -> str:
    """A budget or noise parameter: six significant digits, as the text reports print them."""
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return f"{x:.6g}"


def _plain(value: object) -> str:
    """A released or key value without an interval."""
    if value is None:
        return ""
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        # Whole numbers print in full (1234567, not 1.23457e+06).
        return f"{value:.0f}" if value.is_integer() and abs(value) < 1e15 else f"{value:.6g}"
    return str(value)


def _interval(value: float, half: float) -> str:
    """``value ± half`` to the precision of the interval: two significant digits of ``half``."""
    if not (math.isfinite(half) and half > 0 and math.isfinite(value)):
        return f"{_plain(value)} ± {_plain(half)}"
    decimals = min(15, max(0, 1 - math.floor(math.log10(half))))
    return f"{value:.{decimals}f} ± {half:.{decimals}f}"


def _table(header: Sequence[str], rows: Iterable[Sequence[object]], caption: str = "") -> str:
    """A table of plain-text cells, each escaped here; no header row when ``header`` is empty."""
    head = "".join(f"<th>{_text(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{_text(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    title = f"<caption>{_text(caption)}</caption>" if caption else ""
    thead = f"<thead><tr>{head}</tr></thead>" if header else ""
    return f'<table class="pf-table">{title}{thead}<tbody>{body}</tbody></table>'


def _paragraph(text: str, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<p{attr}>{_text(text)}</p>"


# --------------------------------------------------------------------------- budget


def _gauge(spent: float, budget: float) -> str:
    """An inline SVG bar: the share of ρ spent."""
    share = min(spent / budget, 1.0) if budget > 0 else 1.0
    width, height = 240, 14
    colour = "#b91c1c" if share >= 0.9 else _BAR
    return (
        f'<svg xmlns="{_SVG}" class="pf-gauge" width="{width}" height="{height}" role="img">'
        f"<title>{_text(f'{share:.0%} of the budget spent')}</title>"
        f'<rect width="{width}" height="{height}" rx="3" fill="#e5e7eb"/>'
        f'<rect width="{share * width:.1f}" height="{height}" rx="3" fill="{colour}"/></svg>'
    )


def _guarantee_table(report: BudgetReport) -> str:
    """Budget, spent and remaining: the parts that add up first, then each row's conversion."""
    outright = report.budget.exact_delta > 0 or report.spent.exact_delta > 0
    header = ["", "ρ (zCDP)", *(["δ spent outright"] if outright else []), "ε", "δ", "μ (GDP)"]
    rows = [
        (name, _num(rho), *([_num(d)] if outright else []), _num(eps), f"{total:.3g}", _num(mu))
        for name, rho, eps, mu, d, total in report.rows()
    ]
    return _table(header, rows, "guarantee: spent + remaining = budget in ρ")


def _budget_html(report: BudgetReport) -> str:
    """The gauge, the budget in ρ, (ε, δ) and μ, the conversion, and a seeded warning."""
    parts = [
        _gauge(report.spent_rho, report.budget_rho),
        _paragraph(
            f"rho spent {_num(report.spent_rho)} of {_num(report.budget_rho)} "
            f"({_num(report.remaining_rho)} remaining) in {report.n_entries} "
            f"release{'' if report.n_entries == 1 else 's'}"
        ),
        _guarantee_table(report),
        _paragraph(_CONVERSION, "pf-meta"),
    ]
    if report.n_seeded:
        parts.append(
            _paragraph(
                f"{report.n_seeded} release(s) used seeded randomness: "
                "their output is NOT private (seeds are for tests and demos only).",
                "pf-warning",
            )
        )
    return "".join(parts)


def _ledger_html(entries: Sequence[LedgerEntry], caption: str = "ledger") -> str:
    if not entries:
        return _paragraph("no releases yet")
    rows = (
        (e.index, e.label, _num(e.rho), _num(e.delta), e.time, "yes" if e.seeded else "no")
        for e in entries
    )
    return _table(["#", "label", "ρ", "δ", "time (UTC)", "seeded"], rows, caption)


_LEDGER_ROWS = 50
"""A notebook shows the ledger's newest entries only: a long-lived ledger holds many."""


def session_html(sess: Session) -> str:
    """A session's budget for a notebook: a gauge, the guarantee so far, and the ledger.

    Only budget facts appear (the ledger's labels, costs and times): nothing
    about the data.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> from privframe.api.html import session_html
        >>> sess = pf.Session(pl.DataFrame({"u": [1, 2]}), "u", pf.zCDP(0.5))
        >>> _ = sess.query().bound(max_rows=1).agg(pf.count()).release(rho=0.25, label="n")
        >>> page = session_html(sess)
        >>> "<td>n</td>" in page, "spent 0.25 of 0.5" in page
        (True, True)
    """
    ledger = sess.ledger
    shown = ledger[-_LEDGER_ROWS:]
    caption = "ledger"
    if len(ledger) > len(shown):
        caption = f"ledger: the last {len(shown)} of {len(ledger)} releases (sess.ledger has all)"
    return (
        '<div class="privframe">'
        + _paragraph("privframe session")
        + _budget_html(sess.report())
        + _ledger_html(shown, caption)
        + "</div>"
    )


# --------------------------------------------------------------------------- plans


def explanation_html(explanation: Explanation) -> str:
    """What a release would do, as tables: cost, bound, measurements, selection, outputs.

    Every number comes from the explanation, i.e. from public parameters.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> from privframe.api.html import explanation_html
        >>> sess = pf.Session(pl.DataFrame({"u": [1], "r": ["a"]}), "u", pf.zCDP(1.0))
        >>> q = sess.query().bound(max_groups=1, max_rows_per_group=2).group_by(
        ...     "r", keys=["a", "b"]).agg(pf.count())
        >>> "sqrt(S) = sqrt(4)" in explanation_html(q.explain(rho=0.5))
        True
    """
    plan = explanation.plan
    cost = plan.cost
    delta = f", δ = {cost.delta:.3g}" if cost.delta else ""
    measured = [
        (m.key, m.derivation, _num(m.rho), _num(m.sigma), _num(m.ci95)) for m in plan.measurements
    ]
    measured += [
        (qm.key, qm.derivation, _num(qm.rho), "n/a", f"{qm.rank_error():.4g} rows of rank")
        for qm in plan.quantiles
    ]
    parts = [
        _paragraph(f"release costs ρ = {_num(cost.rho)}{delta} (zCDP)"),
        _paragraph(ACCOUNTING_NOTE, "pf-meta"),
        _paragraph(f"contribution bound: {plan.limits.describe()}"),
        _table(["measurement", "sensitivity", "ρ", "σ", "95% ±"], measured, "measurements"),
    ]
    selection = plan.selection
    if selection is not None:
        m = selection.measurement
        kept = f"{selection.survival_count(0.5)} / {selection.survival_count(0.95)} units"
        facts = [
            (
                "threshold",
                f"a group is kept iff its noisy distinct-unit count ≥ {selection.threshold}",
            ),
            ("δ", f"{selection.delta:.3g}"),
            ("kept with 50% / 95% probability at", kept),
            ("sensitivity", m.derivation),
            ("ρ, σ", f"{_num(m.rho)}, {_num(m.sigma)}"),
        ]
        if explanation.report_delta is not None:
            facts.append(("this release alone", explanation.single_release(selection)))
        parts.append(_table((), facts, "groups chosen privately"))
    if plan.relative_errors:
        parts.append(
            _table(
                ["output", "expected 95% relative error"],
                ((name, f"{err:.3g}") for name, err in plan.relative_errors),
                "balanced split (from the public guesses of pf.balance)",
            )
        )
    outputs = (
        (row["output"], row["measurements"], row["std"], row["ci95"]) for row in explanation.rows
    )
    parts.append(_table(["output", "measurements", "std", "95% ±"], outputs, "outputs"))
    if explanation.notes:
        parts.append("<ul>" + "".join(f"<li>{_text(n)}</li>" for n in explanation.notes) + "</ul>")
    return '<div class="privframe">' + "".join(parts) + "</div>"


def _kind(agg: Aggregate) -> str:
    """The builder's name for an aggregate: CountDistinct -> count_distinct."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(agg).__name__).lower()


def _aggregate_row(agg: Aggregate) -> tuple[str, str, str, str]:
    if not isinstance(agg, _Bounded):
        return (agg.output_name, _kind(agg), "", "")
    what = _kind(agg)
    if isinstance(agg, Quantile):
        what = f"quantile q = {agg.q:g} ({agg.candidates} candidates)"
    return (agg.output_name, what, agg.column, f"[{_plain(agg.lower)}, {_plain(agg.upper)}]")


def query_html(query: Query) -> str:
    """A query's plan: its row steps, contribution bound, grouping, keys and aggregates.

    Nothing here needs ρ; :func:`explanation_html` shows what a release at
    some ρ would cost and how noisy it would be.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> from privframe.api.html import query_html
        >>> sess = pf.Session(pl.DataFrame({"u": [1], "r": ["a"], "x": [1.0]}), "u", pf.zCDP(1.0))
        >>> q = sess.query().bound(max_rows=3).group_by("r").agg(pf.mean("x", (0, 10)))
        >>> page = query_html(q)
        >>> "chosen privately" in page, "<td>[0, 10]</td>" in page
        (True, True)
    """
    plan = query.plan
    kinds = ", ".join(step.kind for step in plan.steps)
    bound = plan.bound
    limits = (
        "none"
        if bound is None
        else ", ".join(
            f"{name}={value}"
            for name, value in (
                ("max_groups", bound.max_groups),
                ("max_rows_per_group", bound.max_rows_per_group),
                ("max_rows", bound.max_rows),
            )
            if value is not None
        )
    )
    if not plan.group_by:
        keys = "one global row"
    elif plan.keys is None:
        keys = "chosen privately (spends δ)"
    else:
        keys = f"{len(plan.keys)} public"
        if plan.other is not None:
            keys += f", plus the group {plan.other!r} for the rest"
    facts = [
        ("row steps", f"{len(plan.steps)}" + (f" ({kinds})" if kinds else "")),
        ("contribution bound", limits),
        ("group by", ", ".join(plan.group_by) or "—"),
        ("keys", keys),
    ]
    return (
        '<div class="privframe">'
        + _table((), facts, "query")
        + _table(
            ["output", "aggregate", "column", "bounds"],
            (_aggregate_row(agg) for agg in plan.aggregates),
            "aggregates",
        )
        + "</div>"
    )


# --------------------------------------------------------------------------- results


def _as_polars(frame: Frame) -> pl.DataFrame:
    return frame if isinstance(frame, pl.DataFrame) else pl.from_pandas(frame)


def _outputs(columns: Sequence[str]) -> dict[str, str]:
    """Each output column with an interval, and the column holding it (``_ci95`` first)."""
    found: dict[str, str] = {}
    for name in columns:
        for suffix in ("_ci95", "_rank_ci95"):
            if f"{name}{suffix}" in columns:
                found[name] = f"{name}{suffix}"
                break
    return found


def _error_columns(columns: Sequence[str], outputs: dict[str, str]) -> set[str]:
    """The error columns folded into their outputs' cells (``_std`` goes with ``_ci95``)."""
    return {c for name in outputs for c in (f"{name}_std", outputs[name]) if c in columns}


def result_html(frame: Frame) -> str:
    """A released DataFrame (polars or pandas) with each value and its 95% interval in one cell.

    Where ``<name>_ci95`` exists the cell reads ``value ± ci95`` (to two
    significant digits of the interval); where ``<name>_rank_ci95`` exists
    (quantiles) it reads ``value (rank ± x)``; other columns show plain values.

    Example:
        >>> import polars as pl
        >>> from privframe.api.html import result_html
        >>> frame = pl.DataFrame({"region": ["n"], "count": [1234], "count_std": [27.4],
        ...                       "count_ci95": [53.7]})
        >>> "<td>1234 ± 54</td>" in result_html(frame)
        True
    """
    data = _as_polars(frame)
    outputs = _outputs(data.columns)
    hidden = _error_columns(data.columns, outputs)
    shown = [c for c in data.columns if c not in hidden]
    rows = []
    for record in data.iter_rows(named=True):
        cells = []
        for name in shown:
            value, column = record[name], outputs.get(name)
            if column is None:
                cells.append(_plain(value))
            elif column.endswith("_rank_ci95"):
                cells.append(f"{_plain(value)} (rank ± {record[column]:.3g})")
            else:
                cells.append(_interval(value, record[column]))
        rows.append(cells)
    header = [f"{c} (± 95%)" if c in outputs else c for c in shown]
    return '<div class="privframe">' + _table(header, rows) + "</div>"


@dataclass(frozen=True)
class Shown:
    """A released DataFrame that a notebook displays with its intervals; see :func:`show`.

    Attributes:
        frame: the released polars or pandas DataFrame, unchanged.
    """

    frame: Frame

    def _repr_html_(self) -> str:
        return result_html(self.frame)


def show(result: Frame) -> Shown:
    """Wrap a released result so that a notebook shows it as ``value ± 95%`` cells.

    Example:
        >>> import polars as pl
        >>> from privframe.api.html import show
        >>> shown = show(pl.DataFrame({"x_p50": [4.0], "x_p50_rank_ci95": [12.25]}))
        >>> "4 (rank ± 12.2)" in shown._repr_html_()
        True
    """
    return Shown(result)


# --------------------------------------------------------------------------- chart


def _ticks(lo: float, hi: float) -> list[float]:
    """About five round tick values covering [lo, hi]."""
    raw = (hi - lo) / 5
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _bar_chart(frame: Frame) -> str:
    """An inline SVG of the first output with an interval: one bar per group, 95% error bars.

    Bars are horizontal (one row per group, so long labels and many groups
    fit); values can be negative (bars then extend left of the zero line).
    Quantiles get no error bars: their error is in ranks, not values. Only
    the first ``_MAX_BARS`` groups are drawn; the table lists them all.
    """
    data = _as_polars(frame)
    outputs = _outputs(data.columns)
    if not outputs:
        return ""
    in_values = {n: c for n, c in outputs.items() if not c.endswith("_rank_ci95")}
    name = next(iter(in_values or outputs))
    errors = name in in_values
    hidden = _error_columns(data.columns, outputs) | set(outputs)
    groups = [c for c in data.columns if c not in hidden]
    rows = data.head(_MAX_BARS)
    labels = (
        [" / ".join(map(_plain, key)) for key in rows.select(groups).iter_rows()]
        if groups
        else ["all"] * rows.height
    )
    values = [float(v) for v in rows[name]]
    halves = [float(e) for e in rows[outputs[name]]] if errors else [0.0] * rows.height
    drawn = [(v, e) for v, e in zip(values, halves, strict=True) if math.isfinite(v + e)]
    lo = min([0.0, *(v - e for v, e in drawn)])
    hi = max([0.0, *(v + e for v, e in drawn)])
    if hi == lo:
        hi = lo + 1.0
    top, left = 24, _LABEL_WIDTH

    def x(value: float) -> float:
        return left + (value - lo) / (hi - lo) * _PLOT_WIDTH

    height = top + _ROW_HEIGHT * len(values) + 24
    width = left + _PLOT_WIDTH + 30
    shapes = [
        f'<text x="{left}" y="14" font-size="12">{_text(name)}'
        f"{' (bars: 95% intervals)' if errors else ' (error in ranks: see the table)'}</text>"
    ]
    for i, (label, value, half) in enumerate(zip(labels, values, halves, strict=True)):
        y = top + i * _ROW_HEIGHT
        middle = y + _ROW_HEIGHT / 2
        short = label if len(label) <= 24 else label[:23] + "…"
        shapes.append(
            f'<text x="{left - 6}" y="{middle + 4:.1f}" font-size="12" '
            f'text-anchor="end">{_text(short)}</text>'
        )
        if not math.isfinite(value + half):
            continue
        a, b = sorted((x(0.0), x(value)))
        tip = _interval(value, half) if errors else _plain(value)
        shapes.append(
            f'<rect class="pf-bar" x="{a:.1f}" y="{y + 4}" width="{b - a:.1f}" '
            f'height="{_ROW_HEIGHT - 8}" fill="{_BAR if value >= 0 else _NEGATIVE_BAR}">'
            f"<title>{_text(f'{label}: {tip}')}</title></rect>"
        )
        if errors:
            low, high = x(value - half), x(value + half)
            shapes.append(
                f'<path class="pf-err" d="M{low:.1f},{middle:.1f}H{high:.1f}'
                f"M{low:.1f},{middle - 4:.1f}V{middle + 4:.1f}"
                f'M{high:.1f},{middle - 4:.1f}V{middle + 4:.1f}" stroke="#111827" fill="none"/>'
            )
    bottom = top + _ROW_HEIGHT * len(values)
    shapes.append(
        f'<line class="pf-zero" x1="{x(0.0):.1f}" y1="{top}" x2="{x(0.0):.1f}" y2="{bottom}" '
        'stroke="#111827"/>'
    )
    for tick in _ticks(lo, hi):
        shapes.append(
            f'<text x="{x(tick):.1f}" y="{bottom + 16}" font-size="11" '
            f'text-anchor="middle">{_text(_plain(tick))}</text>'
        )
    note = (
        _paragraph(f"the chart shows the first {_MAX_BARS} of {data.height} groups", "pf-meta")
        if data.height > _MAX_BARS
        else ""
    )
    return (
        f'<svg xmlns="{_SVG}" class="pf-chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">' + "".join(shapes) + "</svg>" + note
    )


# --------------------------------------------------------------------------- report page


@dataclass(frozen=True)
class ReportSection:
    """One released query of a report page.

    Attributes:
        name: the query's name in the report.
        label: its ledger label.
        query: the builder query (for SQL, the query it was translated into).
        explanation: its explanation at the ρ it was released with.
        result: the released DataFrame, with its error columns.
        sql: the SQL text, for a query written in SQL.
    """

    name: str
    label: str
    query: Query
    explanation: Explanation
    result: Frame
    sql: str | None = None


def _section_html(number: int, section: ReportSection) -> str:
    cost = section.explanation.plan.cost
    delta = f", δ = {cost.delta:.3g}" if cost.delta else ""
    sql = "" if section.sql is None else f"<pre>{_text(section.sql)}</pre>"
    return (
        f'<section id="query-{number}"><h2>{_text(section.name)}</h2>'
        + _paragraph(f"cost ρ = {_num(cost.rho)}{delta}; ledger label {section.label!r}", "pf-meta")
        + sql
        + query_html(section.query)
        + result_html(section.result)
        + _bar_chart(section.result)
        + "<details><summary>sensitivity and noise of each measurement</summary>"
        + explanation_html(section.explanation)
        + "</details></section>"
    )


def _report_guarantee(
    entries: Sequence[LedgerEntry], reporting_delta: float, accounting: str
) -> str:
    """This report's own (ρ, δ), stated as (ε, δ) by the chosen accounting method, and μ."""
    used = sum((e.cost for e in entries), zCDP(0))
    total_delta = reporting_delta + used.delta
    stated = guarantee(entries, total_delta, accounting)
    return _paragraph(
        f"This report's {len(entries)} release(s) charged ρ = {_num(used.rho)} (zCDP)"
        + (f" and spent δ = {used.delta:.3g} outright" if used.delta else "")
        + f". Stated by {accounting} accounting, they are (ε, δ)-DP with ε = "
        f"{_num(stated.epsilon)} at δ = {total_delta:.3g} ({stated.basis}). "
        f"μ = √(2ρ) = {_num(used.to_gdp().mu)} is the Gaussian-DP summary."
    )


def report_html(
    title: str,
    created: datetime,
    sections: Sequence[ReportSection],
    budget: BudgetReport,
    charged: Sequence[LedgerEntry],
    *,
    accounting: str = "zcdp",
) -> str:
    """A complete, self-contained HTML report page.

    Args:
        title: the report's title.
        created: when it was made (shown as given, to the second).
        sections: the released queries, in order.
        budget: the ledger's budget after the report (spent and remaining).
        charged: the ledger entries of this report's releases.
        accounting: how the report's own guarantee is stated: ``"zcdp"``,
            ``"rdp"`` or ``"pld"`` (:func:`privframe.accounting.replay.guarantee`).

    Example:
        >>> from datetime import UTC, datetime
        >>> import privframe as pf
        >>> from privframe.api.html import report_html
        >>> acct = pf.Accountant(pf.zCDP(1.0))
        >>> page = report_html("Q&A", datetime(2026, 1, 2, tzinfo=UTC), [], acct.report(), [])
        >>> page.startswith("<!DOCTYPE html>"), "<h1>Q&amp;A</h1>" in page
        (True, True)
    """
    contents = "".join(
        f'<li><a href="#query-{i}">{_text(s.name)}</a></li>' for i, s in enumerate(sections, 1)
    )
    banner = (
        _paragraph(
            "Some releases in this report used seeded randomness: they are NOT private.",
            "pf-warning",
        )
        if any(e.seeded for e in charged)
        else ""
    )
    return (
        '<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml" lang="en"><head>'
        f'<meta charset="utf-8"/><title>{_text(title)}</title>'
        f"<style>{_PAGE_STYLE}</style></head><body>"
        f"<h1>{_text(title)}</h1>"
        + _paragraph(
            f"made {created.isoformat(timespec='seconds')} by privframe; "
            f"{len(sections)} quer{'y' if len(sections) == 1 else 'ies'}; every number below is "
            "differentially private, and each ± is the half-width of a 95% interval of the noise",
            "pf-meta",
        )
        + banner
        + (f"<ol>{contents}</ol>" if contents else "")
        + "".join(_section_html(i, s) for i, s in enumerate(sections, 1))
        + '<section id="budget"><h2>Privacy budget</h2>'
        + _report_guarantee(charged, budget.delta, accounting)
        + _ledger_html(charged, "this report's ledger entries")
        + "<h3>The ledger after this report</h3>"
        + _budget_html(budget)
        + "</section></body></html>\n"
    )
