"""HTML views for notebooks and the self-contained report page.

Every function here is pure: it takes privframe objects and returns an HTML
string in which all text went through :func:`html.escape` (the helpers of
:mod:`privframe._html` escape what they are given). The markup is also
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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from privframe._html import (
    BAR_COLOUR,
    SVG_NAMESPACE,
    Greyed,
    interval,
    number,
    paragraph,
    plain,
    rank_interval,
    table,
    text,
)
from privframe.accounting.accountant import BudgetReport
from privframe.accounting.budgets import ApproxDP, PureDP, zCDP
from privframe.accounting.ledger import LedgerEntry
from privframe.accounting.replay import guarantee
from privframe.api._chart import Series, bar_chart, line_chart
from privframe.api._frames import (
    NOISE_NOTE,
    Frame,
    NoiseRule,
    as_polars,
    error_columns,
    interval_columns,
)
from privframe.numeric import round_up
from privframe.plan.aggregates import Aggregate, Bounded
from privframe.plan.aggregates.base import RANK_CI95_SUFFIX
from privframe.plan.explanation import Explanation, explanation_html
from privframe.plan.ir import Plan


class SessionView(Protocol):
    """What the session's view reads: its ledger and its budget report (no data)."""

    @property
    def ledger(self) -> Sequence[LedgerEntry]:
        """The ledger's entries."""
        ...

    def report(self) -> BudgetReport:
        """The budget report."""
        ...


@dataclass(frozen=True)
class SessionSnapshot:
    """A session's ledger and budget report, read once: the views built from it agree.

    A :class:`SessionView` itself, so a page made of several views (the
    dashboard's section and its planner's default) reads the ledger once.

    Example:
        >>> import privframe as pf
        >>> from privframe.api.html import SessionSnapshot
        >>> acct = pf.accounting.Accountant(pf.zCDP(1.0))
        >>> SessionSnapshot((), acct.report()).report().budget_rho
        1.0
    """

    ledger: Sequence[LedgerEntry]
    budget: BudgetReport

    @classmethod
    def of(cls, sess: SessionView) -> SessionSnapshot:
        """``sess``'s ledger and report, each read once."""
        return cls(sess.ledger, sess.report())

    def report(self) -> BudgetReport:
        """The budget report read with the ledger."""
        return self.budget


class QueryView(Protocol):
    """What a query's view reads: its plan (no data, no budget)."""

    @property
    def plan(self) -> Plan:
        """The query's plan."""
        ...


__all__ = [
    "PAGE_STYLE",
    "BudgetUnit",
    "QueryView",
    "ReportSection",
    "SessionSnapshot",
    "SessionView",
    "Shown",
    "dashboard_html",
    "explanation_html",
    "page_html",
    "query_html",
    "report_html",
    "result_html",
    "session_html",
    "show",
]

_CONVERSION = (
    "ρ (and any δ spent outright) add up: spent + remaining = budget. ε, δ and μ state each "
    "row on its own and do not add up: (ε, δ) is converted from ρ with the tightest bound "
    "valid for every ρ-zCDP mechanism (Canonne, Kamath & Steinke 2020, Cor. 13), at δ = the "
    "reporting δ (the conversion's slack) plus the row's δ spent outright; μ = √(2ρ) is the "
    "Gaussian-DP summary, exact only for continuous Gaussian noise."
)

_PURE_NOTE = (
    "ε adds up: spent + remaining = budget, exactly (basic composition, Dwork & Roth 2014, "
    "Thm. 3.16). Every row is pure ε-DP, at δ = 0."
)

_APPROX_NOTE = (
    "Every row is (ε, δ)-DP, and spent + remaining = budget. Spent is what the ledger charged: "
    "the tight composition of its releases, a privacy filter valid for releases chosen "
    "adaptively (Rényi bounds started from each release's δ, Feldman & Zrnic 2021; "
    "docs/accounting.md), never more than basic composition. Basic composition adds the "
    "releases' ε and δ (Dwork & Roth 2014, Thm. 3.16)."
)

PAGE_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: #1f2937;
  padding: 0 1em; }
h1 { margin-bottom: 0.2em; }
.pf-meta { color: #6b7280; }
.pf-warning { background: #fee2e2; border: 2px solid #b91c1c; padding: 0.6em; font-weight: bold; }
.pf-table { border-collapse: collapse; margin: 0.8em 0; }
.pf-table caption { text-align: left; font-weight: bold; padding: 0.3em 0; }
.pf-table th, .pf-table td { border-bottom: 1px solid #d1d5db; padding: 0.25em 0.7em;
  text-align: left; vertical-align: top; }
.pf-table th { background: #f3f4f6; }
.pf-table td { max-width: 22em; overflow-wrap: break-word; }
pre { background: #f3f4f6; padding: 0.6em; overflow-x: auto; }
/* On a phone a wide table scrolls in its own box, and a chart shrinks to the page. */
.pf-table { display: block; max-width: 100%; overflow-x: auto; }
svg { max-width: 100%; height: auto; }
/* A chart shrunk to a phone's width would shrink its text past reading: larger there. */
@media (max-width: 600px) { svg.pf-lines text { font-size: 17px; } }
section { border-top: 1px solid #d1d5db; margin-top: 1.5em; }
"""
"""The pages' style sheet (report pages, the plan page, the server's dashboard): no web fonts,
nothing loaded from outside."""


# --------------------------------------------------------------------------- budget


def _gauge(spent: float, budget: float) -> str:
    """An inline SVG bar: the share of the budget spent."""
    share = min(spent / budget, 1.0) if budget > 0 else 1.0
    width, height = 240, 14
    colour = "#b91c1c" if share >= 0.9 else BAR_COLOUR
    return (
        f'<svg xmlns="{SVG_NAMESPACE}" class="pf-gauge" width="{width}" height="{height}" '
        'role="img">'
        f"<title>{text(f'{share:.0%} of the budget spent')}</title>"
        f'<rect width="{width}" height="{height}" rx="3" fill="#e5e7eb"/>'
        f'<rect width="{share * width:.1f}" height="{height}" rx="3" fill="{colour}"/></svg>'
    )


@dataclass(frozen=True)
class BudgetUnit:
    """A budget report in its budget's own unit: ρ for zCDP, ε for pure DP and (ε, δ).

    Attributes:
        parameter: what a release spends: ``"rho"`` or ``"epsilon"``.
        symbol: ``"ρ"`` or ``"ε"``.
        spent: spent so far, in that unit.
        budget: the whole budget.
        remaining: what is left.

    Example:
        >>> import privframe as pf
        >>> from privframe.api.html import BudgetUnit
        >>> BudgetUnit.of(pf.accounting.Accountant(pf.PureDP(2.0)).report()).remaining
        2.0
    """

    parameter: str
    symbol: str
    spent: float
    budget: float
    remaining: float

    @classmethod
    def of(cls, report: BudgetReport) -> BudgetUnit:
        """``report`` in its budget's unit."""
        if isinstance(report.budget, zCDP):
            return cls("rho", "ρ", report.spent_rho, report.budget_rho, report.remaining_rho)
        return cls(
            "epsilon", "ε", report.spent_epsilon, report.budget_epsilon, report.remaining_epsilon
        )


def _budget_gauge(report: BudgetReport) -> str:
    """The gauge in the budget's own unit: ρ for zCDP, ε for pure DP and (ε, δ)."""
    unit = BudgetUnit.of(report)
    return _gauge(unit.spent, unit.budget)


def _guarantee_table(report: BudgetReport) -> str:
    """Budget, spent and remaining: the parts that add up first, then each row's conversion."""
    budget, spent = report.budget, report.spent
    assert isinstance(budget, zCDP)  # a zCDP report's
    assert isinstance(spent, zCDP)
    outright = budget.exact_delta > 0 or spent.exact_delta > 0
    header = ["", "ρ (zCDP)", *(["δ spent outright"] if outright else []), "ε", "δ", "μ (GDP)"]
    rows = [
        (
            name,
            number(rho),
            *([number(d)] if outright else []),
            number(eps),
            f"{total:.3g}",
            number(mu),
        )
        for name, rho, eps, mu, d, total in report.rows()
    ]
    return table(header, rows, "guarantee: spent + remaining = budget in ρ")


def _guarantee_html(report: BudgetReport) -> str:
    """The guarantee table and how to read it: in ρ, (ε, δ) and μ, or in ε (and δ)."""
    if isinstance(report.budget, zCDP):
        return _guarantee_table(report) + paragraph(_CONVERSION, "pf-meta")
    approx = isinstance(report.budget, ApproxDP)
    names = {"basic": "basic composition"}
    rows = [
        (names.get(name, name), number(eps), *([f"{delta:.3g}"] if approx else []))
        for name, eps, delta in report.epsilon_rows()
    ]
    header = ["", "ε", *(["δ"] if approx else [])]
    return table(header, rows, "guarantee: spent + remaining = budget in ε") + paragraph(
        _APPROX_NOTE if approx else _PURE_NOTE, "pf-meta"
    )


def _spent_html(report: BudgetReport) -> str:
    """What was spent, in how many releases; for (ε, δ), what basic composition would say."""
    n = report.n_entries
    releases = f"in {n} release{'' if n == 1 else 's'}"
    if isinstance(report.budget, zCDP):
        return paragraph(
            f"rho spent {number(report.spent_rho)} of {number(report.budget_rho)} "
            f"({number(report.remaining_rho)} remaining) {releases}"
        )
    spent = report.spent_epsilon
    line = f"epsilon spent {number(spent)} of {number(report.budget_epsilon)} "
    line += f"({number(report.remaining_epsilon)} remaining)"
    if isinstance(report.budget, ApproxDP):
        line += f", delta spent {report.spent_delta:.3g} of {report.budget_delta:.3g}"
    parts = [paragraph(f"{line} {releases}")]
    basic = report.basic
    if basic is not None:
        parts.append(
            paragraph(
                f"The ledger charged the tight composition of its releases, ε = {number(spent)}; "
                f"basic composition (adding their ε and δ) would have charged ε = "
                f"{number(basic.epsilon)}, δ = {basic.delta:.3g}."
            )
        )
    return "".join(parts)


def _budget_html(report: BudgetReport) -> str:
    """The gauge, what was spent, the guarantee (in ρ, (ε, δ) and μ, or in ε and δ), a warning."""
    return (
        _budget_gauge(report) + _spent_html(report) + _guarantee_html(report) + _seeded_html(report)
    )


def _seeded_html(report: BudgetReport) -> str:
    if not report.n_seeded:
        return ""
    return paragraph(
        f"{report.n_seeded} release(s) used seeded randomness: "
        "their output is NOT private (seeds are for tests and demos only).",
        "pf-warning",
    )


def _moment(time: str) -> datetime | None:
    """A ledger entry's time (UTC ISO-8601; one without a zone is UTC), or None if unreadable."""
    try:
        moment = datetime.fromisoformat(time)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _when(time: str) -> str:
    """A ledger entry's time to the second, as a reader scans a column of them."""
    moment = _moment(time)
    return time if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _names(value: object) -> str:
    """A description's list of names (outputs, columns) as text; anything else as it is."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        return ", ".join(map(str, value))
    return str(value)


def _bought(description: Mapping[str, Any] | str) -> str:
    """What a release bought, as its entry describes it: the outputs with their 95% ±.

    A query's entry lists its ``outputs`` and (since the entries gained it)
    each one's 95% interval half-width in ``ci95``; a marginals or synthetic
    data entry its column sets or columns. Entries are written by many
    versions and ledgers outlive them: any other shape shows what it holds,
    or nothing. A tuning entry names its histograms.
    """
    if isinstance(description, str):
        return description
    outputs = description.get("outputs")
    if isinstance(outputs, Sequence) and not isinstance(outputs, str):
        widths = description.get("ci95")
        widths = widths if isinstance(widths, Mapping) else {}
        return "; ".join(
            f"{output} {width}"
            if isinstance(width := widths.get(str(output)), str)
            else str(output)
            for output in outputs
        )
    marginals = description.get("marginals")
    if isinstance(marginals, Mapping) and "sets" in marginals:
        sets = marginals["sets"]
        if isinstance(sets, Sequence) and not isinstance(sets, str):
            return "marginals of " + "; ".join(f"({_names(s)})" for s in sets)
        return f"marginals of {sets}"
    synthetic = description.get("synthesize")
    if isinstance(synthetic, Mapping):
        method = synthetic.get("method", "")
        return f"synthetic data ({method}) of {_names(synthetic.get('columns', ''))}"
    tuned = description.get("tune")
    if isinstance(tuned, Mapping):
        histograms = tuned.get("histograms", ())
        if isinstance(histograms, Sequence) and not isinstance(histograms, str):
            return "tuning histograms: " + "; ".join(
                str(h.get("histogram", "")) if isinstance(h, Mapping) else str(h)
                for h in histograms
            )
        return f"tuning histograms: {histograms}"
    return ""


def _ledger_html(
    entries: Sequence[LedgerEntry], caption: str = "ledger", *, bought: bool = False
) -> str:
    """The entries' labels, costs (in ρ and δ, ε, or ε and δ) and times; what each bought.

    An entry without a label says so, greyed. ``bought`` adds what each
    release bought (:func:`_bought`): its outputs with their 95% ±.
    """
    if not entries:
        return paragraph("no releases yet")
    kind = entries[0].kind
    costs = {zCDP: ["ρ", "δ"], PureDP: ["ε"], ApproxDP: ["ε", "δ"]}[kind]
    header = [
        "#",
        "label",
        *costs,
        "time (UTC)",
        *(["outputs (95% ±)"] if bought else []),
        "seeded",
    ]
    rows = (
        (
            e.index,
            e.label or Greyed("(no label)", "this release was given no label"),
            *(number(float(e.exact_rho)), number(e.delta))[: len(costs)],
            _when(e.time),
            *([_bought(e.description)] if bought else []),
            "yes" if e.seeded else "no",
        )
        for e in entries
    )
    return table(header, rows, caption)


def _spending_chart(entries: Sequence[LedgerEntry], report: BudgetReport) -> str:
    """The budget spent over time: a step line of the running total, in the budget's unit.

    An (ε, δ) ledger charges the tight composition of its releases, which
    no sum of entries gives: its line adds each release's ε (basic
    composition), which the charged total never exceeds, and says so.
    """
    unit = BudgetUnit.of(report)
    points: list[tuple[float, float]] = []
    total = 0.0
    for entry in entries:
        # An entry whose time cannot be read still counts: at the next readable point.
        total += float(entry.exact_rho)  # ρ, or ε
        moment = _moment(entry.time)
        if moment is None:
            continue
        if not points:
            points.append((moment.timestamp(), 0.0))
        points.append((moment.timestamp(), total))
    if points and points[-1][1] != total:  # the last entries' times cannot be read
        points.append((points[-1][0], total))
    name = f"{unit.symbol} spent"
    if isinstance(report.budget, ApproxDP):
        name += ", adding each release's (basic composition: the ledger charged at most this)"
    return line_chart(
        [Series(name, tuple(points))],
        x_label="time (UTC)",
        y_label=f"{unit.symbol} spent",
        x_text=_clock(points),
        step=True,
        title=f"{unit.symbol} spent over time",
        level=unit.budget,
        level_label=f"budget: {unit.symbol} = {number(unit.budget)}",
    )


def _clock(points: Sequence[tuple[float, float]]) -> Callable[[float], str]:
    """How the chart writes a time: finer the shorter the span its ticks cover."""
    span = points[-1][0] - points[0][0] if points else 0.0
    if span < 10:  # releases in quick succession (a script's): fractions of a second
        cut = 3 if span < 1 else 5
        return lambda seconds: datetime.fromtimestamp(seconds, UTC).strftime("%H:%M:%S.%f")[:-cut]
    form = "%H:%M:%S" if span < 3600 else "%b %d %H:%M" if span < 2 * 86400 else "%Y-%m-%d"
    return lambda seconds: datetime.fromtimestamp(seconds, UTC).strftime(form)


def _remaining_html(report: BudgetReport) -> str:
    """What is left to spend, large, in the budget's unit, and what it is worth in the others."""
    unit = BudgetUnit.of(report)
    if isinstance(report.budget, zCDP):
        delta = report.delta + report.remaining_delta
        worth = f"zCDP: worth (ε, δ) = ({number(report.remaining_epsilon)}, {delta:.3g})"
        if report.remaining_mu is not None:  # None for a non-zCDP report only
            worth += f" or μ = {number(report.remaining_mu)} (Gaussian DP)"
    else:
        worth = "pure ε-DP, at δ = 0"
        if isinstance(report.budget, ApproxDP):
            worth = f"(ε, δ)-DP, with δ = {report.remaining_delta:.3g} remaining"
    return (
        f'<p class="pf-remaining"><strong class="pf-big">{text(number(unit.remaining))}</strong> '
        f"{unit.symbol} remaining of {text(number(unit.budget))}</p>" + paragraph(worth, "pf-meta")
    )


_LEDGER_ROWS = 50
"""A notebook shows the ledger's newest entries only: a long-lived ledger holds many."""


def _shown(
    ledger: Sequence[LedgerEntry], what: str, where: str
) -> tuple[Sequence[LedgerEntry], str]:
    """The newest entries a view lists, and a caption saying when they are not all, and where."""
    shown = ledger[-_LEDGER_ROWS:]
    if len(ledger) > len(shown):
        return shown, f"{what}: the last {len(shown)} of {len(ledger)} releases ({where} has all)"
    return shown, what


def session_html(sess: SessionView) -> str:
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

        A pure-DP or (ε, δ) session shows ε (and δ); an (ε, δ) one also what
        basic composition would have charged:

        >>> approx = pf.Session(pl.DataFrame({"u": [1, 2]}), "u", pf.ApproxDP(1.0, 1e-6))
        >>> _ = approx.query().bound(max_rows=1).agg(pf.count()).release(epsilon=0.25)
        >>> page = session_html(approx)
        >>> "epsilon spent 0.25 of 1" in page, "basic composition" in page
        (True, True)
    """
    shown, caption = _shown(sess.ledger, "ledger", "sess.ledger")
    return (
        '<div class="privframe">'
        + paragraph("privframe session")
        + _budget_html(sess.report())
        + _ledger_html(shown, caption)
        + "</div>"
    )


def dashboard_html(sess: SessionView) -> str:
    """A session's budget as the server's dashboard shows it for one dataset.

    First what remains, large, in the budget's unit (ρ with the (ε, δ) and
    μ it is worth, ε, or ε and δ), then the gauge, the budget spent over
    time (a chart), the releases newest first with what each cost and bought
    (its outputs and their 95% ±) and the guarantee. Only budget facts
    appear, every text escaped: labels and output names are the analyst's.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> from privframe.api.html import dashboard_html
        >>> sess = pf.Session(pl.DataFrame({"u": [1, 2]}), "u", pf.zCDP(0.5))
        >>> _ = sess.query().bound(max_rows=1).agg(pf.count()).release(rho=0.25, label="<b>")
        >>> page = dashboard_html(sess)
        >>> 'class="pf-big">0.25</strong> ρ remaining' in page, "<td>&lt;b&gt;</td>" in page
        (True, True)
        >>> page.count('class="pf-line"')
        1
    """
    view = SessionSnapshot.of(sess)  # read once: a release in between must not split the page
    ledger, report = view.ledger, view.report()
    shown, caption = _shown(ledger, "releases, newest first", "GET /v1/datasets/NAME/budget")
    return (
        '<div class="privframe pf-dashboard">'
        + _remaining_html(report)
        + _budget_gauge(report)
        + _spent_html(report)
        + _seeded_html(report)
        + _spending_chart(ledger, report)
        + _ledger_html(shown[::-1], caption, bought=True)
        + _guarantee_html(report)
        + "</div>"
    )


# --------------------------------------------------------------------------- plans


def _aggregate_row(agg: Aggregate) -> tuple[str, str, str, str, str]:
    if not isinstance(agg, Bounded):
        return (agg.output_name, agg.describe(), "", "", "")
    bounds = "chosen at release" if agg.auto else f"[{plain(agg.lower)}, {plain(agg.upper)}]"
    return (agg.output_name, agg.describe(), agg.column, bounds, agg.missing_rule() or "")


def query_html(query: QueryView) -> str:
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
        if plan.selected:
            chosen = f"{list(plan.selected)} chosen privately (spends δ)"
            keys += f" over {list(plan.keys.columns)}; {chosen}"
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
        + table((), facts, "query")
        + table(
            ["output", "aggregate", "column", "bounds", "a null or NaN value"],
            (_aggregate_row(agg) for agg in plan.aggregates),
            "aggregates",
        )
        + "</div>"
    )


# --------------------------------------------------------------------------- results


_ROW_TITLE = "this group's count has a 95% interval that includes 0: its outputs are mostly noise"
_CELL_TITLE = (
    "noise dominates this value: its 95% interval includes 0, or spans half its bounds or more"
)


def _rule(counts: Sequence[str] | None, query: QueryView | None) -> NoiseRule:
    """The query's rule (its counts and bounds), with ``counts`` named by the caller first."""
    rule = NoiseRule() if query is None else NoiseRule.of_plan(query.plan)
    return rule if counts is None else NoiseRule(tuple(counts), rule.ranges)


def result_html(
    frame: Frame, counts: Sequence[str] | None = None, *, query: QueryView | None = None
) -> str:
    """A released DataFrame (polars or pandas) with each value and its 95% interval in one cell.

    Where ``<name>_ci95`` exists the cell reads ``value ± ci95`` (to two
    significant digits of the interval); where ``<name>_rank_ci95`` exists
    (quantiles) it reads ``value (rank ± x)``; other columns show plain values.

    Outputs the noise dominates are grey, by a rule on the released numbers
    and public parameters only (:class:`~privframe.api._frames.NoiseRule`): a
    row whose count (one of ``counts``; default the query's counts, or the
    column ``count``) has a 95% interval that includes 0; a value whose own
    95% interval includes 0; and, given the ``query`` that was released, a
    mean, variance or standard deviation whose 95% interval spans at least
    half the range its bounds allow. A note under the table says how to read them.

    Example:
        >>> import polars as pl
        >>> from privframe.api.html import result_html
        >>> frame = pl.DataFrame({"region": ["n", "s"], "count": [1234, 2],
        ...                       "count_std": [27.4, 27.4], "count_ci95": [53.7, 53.7]})
        >>> page = result_html(frame)
        >>> "<td>1234 ± 54</td>" in page, page.count('<tr class="pf-noise"')
        (True, 1)
    """
    data = as_polars(frame)
    rule = _rule(counts, query)
    outputs = interval_columns(data.columns)
    hidden = error_columns(data.columns, outputs)
    shown = [c for c in data.columns if c not in hidden]
    marked = rule.rows(data)
    rows: list[list[object]] = []
    grey = any(marked)
    for record in data.iter_rows(named=True):
        cells: list[object] = []
        for name in shown:
            value, column = record[name], outputs.get(name)
            if column is None:
                cells.append(plain(value))
            elif column.endswith(RANK_CI95_SUFFIX):
                cells.append(rank_interval(value, record[column]))
            elif rule.noise(name, value, record[column]):
                grey = True
                cells.append(Greyed(interval(value, record[column]), _CELL_TITLE))
            else:
                cells.append(interval(value, record[column]))
        rows.append(cells)
    header = [f"{c} (± 95%)" if c in outputs else c for c in shown]
    notes = [_ROW_TITLE if row else None for row in marked]
    return (
        '<div class="privframe">'
        + table(header, rows, row_notes=notes)
        + (paragraph(NOISE_NOTE, "pf-meta") if grey else "")
        + "</div>"
    )


@dataclass(frozen=True)
class Shown:
    """A released DataFrame that a notebook displays with its intervals; see :func:`show`.

    Attributes:
        frame: the released polars or pandas DataFrame, unchanged.
        counts: the count outputs that mark noisy rows (None: the query's, or ``count``).
        query: the query released, whose bounds judge its means and variances (optional).
    """

    frame: Frame
    counts: tuple[str, ...] | None = None
    query: QueryView | None = None

    def _repr_html_(self) -> str:
        return result_html(self.frame, self.counts, query=self.query)


def show(
    result: Frame, counts: Sequence[str] | None = None, *, query: QueryView | None = None
) -> Shown:
    """Wrap a released result so that a notebook shows it as ``value ± 95%`` cells.

    Outputs the noise dominates are grey (:func:`result_html`); ``counts``
    names the count outputs whose interval marks a whole row (default: the
    query's counts, or else the column ``count``, the name of ``pf.count()``
    and SQL's ``COUNT(*)``). Pass the ``query`` that was released
    (``pf.show(result, query=query)``) to grey too a mean, variance or
    standard deviation whose interval spans half its bounds or more, such as
    the mean of an empty group; a bare frame does not know its bounds.

    Example:
        >>> import polars as pl
        >>> from privframe.api.html import show
        >>> shown = show(pl.DataFrame({"x_p50": [4.0], "x_p50_rank_ci95": [12.25]}))
        >>> "4 (rank ± 12.2)" in shown._repr_html_()
        True
    """
    return Shown(result, None if counts is None else tuple(counts), query)


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
    query: QueryView
    explanation: Explanation
    result: Frame
    sql: str | None = None


def _cost_html(cost: zCDP | PureDP | ApproxDP) -> str:
    """A release's cost: ``ρ = 0.1`` (and δ spent outright), or ``ε = 0.1`` (and its δ)."""
    if isinstance(cost, zCDP):
        delta = f", δ = {cost.delta:.3g}" if cost.delta else ""
        return f"ρ = {number(cost.rho)}{delta}"
    delta = f", δ = {cost.delta:.3g}" if isinstance(cost, ApproxDP) and cost.delta else ""
    return f"ε = {number(cost.epsilon)}{delta}"


def _section_html(index: int, section: ReportSection) -> str:
    cost = section.explanation.plan.cost
    sql = "" if section.sql is None else f"<pre>{text(section.sql)}</pre>"
    return (
        f'<section id="query-{index}"><h2>{text(section.name)}</h2>'
        + paragraph(f"cost {_cost_html(cost)}; ledger label {section.label!r}", "pf-meta")
        + sql
        + query_html(section.query)
        + result_html(section.result, query=section.query)
        + bar_chart(section.result, NoiseRule.of_plan(section.query.plan))
        + "<details><summary>sensitivity and noise of each measurement</summary>"
        + explanation_html(section.explanation)
        + "</details></section>"
    )


def _report_guarantee(entries: Sequence[LedgerEntry], budget: BudgetReport, accounting: str) -> str:
    """This report's own (ρ, δ), stated as (ε, δ) by the chosen accounting method, and μ.

    A pure-DP report states its ε, which adds up; an (ε, δ) report states its
    releases' tight composition beside what basic composition would.
    """
    if isinstance(budget.budget, PureDP):
        costs = (e.cost for e in entries)
        pure = sum((c for c in costs if isinstance(c, PureDP)), PureDP(0))
        return paragraph(
            f"This report's {len(entries)} release(s) charged ε = {number(pure.epsilon)} "
            "(pure DP). ε adds up (basic composition, Dwork & Roth 2014, Thm. 3.16): together "
            f"they are ε-DP with ε = {number(pure.epsilon)}, at δ = 0."
        )
    if isinstance(budget.budget, ApproxDP):
        return _approx_guarantee(entries)
    used = sum((c for c in (e.cost for e in entries) if isinstance(c, zCDP)), zCDP(0))
    total_delta = budget.delta + used.delta
    stated = guarantee(entries, total_delta, accounting)
    return paragraph(
        f"This report's {len(entries)} release(s) charged ρ = {number(used.rho)} (zCDP)"
        + (f" and spent δ = {used.delta:.3g} outright" if used.delta else "")
        + f". Stated by {accounting} accounting, they are (ε, δ)-DP with ε = "
        f"{number(stated.epsilon)} at δ = {total_delta:.3g} ({stated.basis}). "
        f"μ = √(2ρ) = {number(used.to_gdp().mu)} is the Gaussian-DP summary."
    )


def _approx_guarantee(entries: Sequence[LedgerEntry]) -> str:
    """An (ε, δ) report's releases: their tight composition, and basic composition's sum."""
    costs = (e.cost for e in entries)
    basic = sum((c for c in costs if isinstance(c, ApproxDP)), ApproxDP(0))
    tight = basic.epsilon
    if basic.exact_delta:
        # The accountant's filter over these entries alone (with no δ it is Σε).
        tight = guarantee(entries, round_up(basic.exact_delta)).epsilon
    return paragraph(
        f"This report's {len(entries)} release(s) asked for ε = {number(basic.epsilon)}, "
        f"δ = {basic.delta:.3g} ((ε, δ)-DP). Composed tightly (the accountant's privacy filter, "
        f"never more than basic composition), they are (ε, δ)-DP with ε = {number(tight)} at "
        f"δ = {basic.delta:.3g}; basic composition (adding their ε and δ) states ε = "
        f"{number(basic.epsilon)}. The ledger charges the tight composition of all its "
        "releases: see below."
    )


def _front_matter(
    created: datetime, sections: Sequence[ReportSection], charged: Sequence[LedgerEntry]
) -> str:
    """What the page is, a warning if any release was seeded, and the list of its queries."""
    contents = "".join(
        f'<li><a href="#query-{i}">{text(s.name)}</a></li>' for i, s in enumerate(sections, 1)
    )
    banner = (
        paragraph(
            "Some releases in this report used seeded randomness: they are NOT private.",
            "pf-warning",
        )
        if any(e.seeded for e in charged)
        else ""
    )
    return (
        paragraph(
            f"made {created.isoformat(timespec='seconds')} by privframe; "
            f"{len(sections)} quer{'y' if len(sections) == 1 else 'ies'}; every number below is "
            "differentially private, and each ± is the half-width of a 95% interval of the noise",
            "pf-meta",
        )
        + banner
        + (f"<ol>{contents}</ol>" if contents else "")
    )


def report_html(
    title: str,
    created: datetime,
    sections: Sequence[ReportSection],
    budget: BudgetReport,
    charged: Sequence[LedgerEntry],
    *,
    accounting: str = "zcdp",
    tables: Sequence[str] = (),
    plan: str = "",
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
            A pure-DP report states its ε (which adds up) and an (ε, δ) one
            the tight composition of its releases beside basic composition,
            whatever ``accounting`` says.
        tables: the page's sections of marginals and synthetic tables, as HTML
            made by :mod:`privframe.api.report_output`, after the queries.
        plan: the report's budget plan as HTML
            (:meth:`BudgetPlan.html <privframe.api.budget_plan.BudgetPlan.html>`):
            each output's interval at the report's split and against the
            total, in a section before the budget's.

    Example:
        >>> from datetime import UTC, datetime
        >>> import privframe as pf
        >>> from privframe.api.html import report_html
        >>> acct = pf.accounting.Accountant(pf.zCDP(1.0))
        >>> page = report_html("Q&A", datetime(2026, 1, 2, tzinfo=UTC), [], acct.report(), [])
        >>> page.startswith("<!DOCTYPE html>"), "<h1>Q&amp;A</h1>" in page
        (True, True)
    """
    planned = (
        '<section id="plan"><h2>How the budget was split</h2>' + plan + "</section>" if plan else ""
    )
    return page_html(
        title,
        _front_matter(created, sections, charged)
        + "".join(_section_html(i, s) for i, s in enumerate(sections, 1))
        + "".join(tables)
        + planned
        + '<section id="budget"><h2>Privacy budget</h2>'
        + _report_guarantee(charged, budget, accounting)
        + _ledger_html(charged, "this report's ledger entries")
        + "<h3>The ledger after this report</h3>"
        + _budget_html(budget)
        + "</section>",
    )


def page_html(title: str, body: str) -> str:
    """A complete, self-contained page: ``title`` as its heading, then ``body`` (HTML).

    The page loads nothing from outside and reads well on a phone (its
    viewport is the device's; wide tables scroll in their own box).

    Example:
        >>> from privframe.api.html import page_html
        >>> page = page_html("Plan <1>", "<p>hi</p>")
        >>> "<h1>Plan &lt;1&gt;</h1><p>hi</p>" in page, 'name="viewport"' in page
        (True, True)
    """
    return (
        '<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml" lang="en"><head>'
        '<meta charset="utf-8"/>'
        '<meta name="viewport" content="width=device-width, initial-scale=1"/>'
        f"<title>{text(title)}</title>"
        f"<style>{PAGE_STYLE}</style></head><body>"
        f"<h1>{text(title)}</h1>" + body + "</body></html>\n"
    )
