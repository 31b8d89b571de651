"""The budget planner: each output's 95% interval before anything is spent, and the split to use.

:func:`privframe.plan_budget` takes queries (or a report spec) and a total
budget, splits the total over them (evenly, or as the spec's shares say),
and asks each query's ``explain`` what every output's 95% interval would be.
Both come from the same public parameters, so a count's, a sum's or a
quantile's interval is the one its release then reports, and a mean's or a
variance's (over its released count) is the most it reports. Nothing is
charged and no data is read beyond what ``explain`` reads (public metadata).
:class:`BudgetPlan` prints as a table, shows in a notebook as a table and a
chart of each interval against the total budget (log scales, the chosen
total marked), and gives :attr:`BudgetPlan.split` (and
:attr:`BudgetPlan.deltas`), what each query should spend;
:meth:`BudgetPlan.with_total` and :meth:`BudgetPlan.with_shares` try another
total or split.

With Gaussian noise an interval shrinks as 1/sqrt(ρ) (Laplace: 1/ε), so
halving an interval costs four times the ρ. A tuned query
(:meth:`Query.tune <privframe.api.query.Query.tune>`) brings tune's
estimate of its bias of bounding, shown beside the noise.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> sess = pf.Session(pl.DataFrame({"u": [1], "r": ["a"]}), "u", pf.zCDP(1.0))
    >>> q = sess.query().bound(max_groups=1, max_rows_per_group=1).group_by(
    ...     "r", keys=["a", "b"]).agg(pf.count())
    >>> plan = pf.plan_budget({"by_r": q}, rho=0.5)
    >>> plan.split
    {'by_r': Fraction(1, 2)}
    >>> for part in str(plan).splitlines()[0].split("; "):
    ...     print(part)
    budget plan: rho = 0.5 in all (zCDP) over 1 query
    nothing is spent
    the budget has rho = 1 left: it fits
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from privframe._html import number, paragraph, table
from privframe.accounting._kinds import Spendable
from privframe.accounting.budgets import ApproxDP, PureDP, zCDP
from privframe.api._chart import Series, line_chart
from privframe.api.tune import estimated_bias
from privframe.errors import InvalidArgumentError, InvalidValueError, PrivframeError
from privframe.numeric import Number, check_positive, exact
from privframe.plan.aggregates.base import Width
from privframe.plan.explanation import Explanation
from privframe.plan.planner import selects
from privframe.plan.split import Balance

__all__ = [
    "POINTS",
    "BudgetPlan",
    "OutputWidth",
    "PlanItem",
    "plan_items",
    "plan_queries",
    "query_item",
    "total_of",
]

POINTS = 25
"""Totals the chart evaluates: from a hundredth of the chosen total to ten times it."""

_SPAN = (-2.0, 1.0)  # log10 of the chart's lowest and highest total over the chosen one

Widths = tuple[tuple[str, Width], ...]
"""Each output's name and noise, in order."""


@dataclass(frozen=True)
class PlanItem:
    """One thing the plan spends on: its name, its widths at a budget, what else is known.

    Attributes:
        name: the query's name (the spec's, the mapping's key, or ``query i``).
        widths: each output's :class:`~privframe.plan.aggregates.base.Width`
            when the item spends the given amount (ρ, or ε).
        kind: ``"query"``, ``"marginals"`` or ``"synthetic table"`` (whose
            rows carry no interval: it is planned for its cost alone).
        bias: per output, tune's estimate of its bias of bounding, in words.
        auto: the outputs whose bounds the release chooses (``bounds="auto"``):
            their noise scales with bounds no plan knows yet.
        delta: the δ its release spends (a private choice of groups', or an
            (ε, δ) release's); None for none.

    Example:
        >>> from fractions import Fraction
        >>> from privframe.plan.aggregates.base import Width
        >>> item = PlanItem("n", lambda amount: (("count", Width(1 / float(amount), None)),))
        >>> item.widths(Fraction(1, 2))[0][1].ci95
        2.0
    """

    name: str
    widths: Callable[[Fraction], Widths]
    kind: str = "query"
    bias: Mapping[str, str] = field(default_factory=dict)
    auto: frozenset[str] = frozenset()
    delta: Fraction | None = None


@dataclass(frozen=True)
class OutputWidth:
    """One output's noise at the plan's split, with tune's bias where it was estimated.

    Attributes:
        item: the name of its query.
        output: the output column.
        amount: the budget its query spends (ρ, or ε).
        width: its std and 95% half-width (a mean's over its count: ``width.per``).
        bias: tune's estimated bias of bounding, in words; None without tune.
        auto: its bounds are chosen at release (``bounds="auto"``): ``width``
            is at stand-in bounds, and the interval is unknown until then.

    Example:
        >>> from fractions import Fraction
        >>> from privframe.plan.aggregates.base import Width
        >>> OutputWidth("q", "count", Fraction(1), Width(3.0, 1.5)).interval
        '± 3'
        >>> OutputWidth("q", "m", Fraction(1), Width(4.1, 2.0, approx=True, per="count")).interval
        '≤ ≈ ± 4.1 / count'
    """

    item: str
    output: str
    amount: Fraction
    width: Width
    bias: str | None = None
    auto: bool = False

    @property
    def interval(self) -> str:
        """The 95% half-width as the table shows it: ``± 3``, ``≤ ≈ ± 4.1 / count``.

        An interval over the released count is stated at its worst (a mean
        at a bound): ``≤``.
        """
        if self.auto:
            return "scales with the bounds chosen at release"
        return self.width.interval()


def _widths(explanation: Explanation) -> Widths:
    return tuple((str(row["output"]), row["width"]) for row in explanation.rows)  # type: ignore[misc]


def _plan_of(query: Any) -> Any:
    """A builder query's plan; an SQL query's is its builder query's (None if neither)."""
    return getattr(query, "plan", None) or getattr(getattr(query, "query", None), "plan", None)


def query_item(
    name: str,
    query: Any,
    parameter: str,
    delta: Number | None = None,
    weights: Mapping[str, float] | Balance | None = None,
) -> PlanItem:
    """A query (or a tuned one) as a plan item that spends ``parameter`` (ρ or ε).

    ``delta`` and ``weights`` are passed to its ``explain`` (a selection's, or
    an (ε, δ) release's δ; the split of its budget over its measurements).

    Raises:
        InvalidArgumentError: an SQL query whose ``OPTIONS`` fix its budget.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> sess = pf.Session(pl.DataFrame({"u": [1]}), "u", pf.zCDP(1.0))
        >>> item = query_item("n", sess.query().bound(max_rows=1).agg(pf.count()), "rho")
        >>> [name for name, _ in item.widths(Fraction(1, 2))]
        ['count']
    """
    bias: dict[str, str] = {}
    if hasattr(query, "choice") and hasattr(query, "query"):  # a Tuned query
        bias = {
            output: f"{value:+.3g} ± {uncertainty} of its size"
            for output, (value, uncertainty) in estimated_bias(query.choice.table).items()
        }
        query = query.query
    if getattr(query, "carries_budget", False):
        raise InvalidArgumentError(
            f"query {name!r} states its own budget in OPTIONS, which a plan cannot split: "
            "remove epsilon (and delta) from its OPTIONS to plan it"
        )
    plan = _plan_of(query)
    aggregates = () if plan is None else plan.aggregates
    auto = frozenset(a.output_name for a in aggregates if getattr(a, "auto", False))
    spent = None if delta is None else exact("delta", delta)

    def widths(amount: Fraction) -> Widths:
        return _widths(query.explain(weights=weights, delta=delta, **{parameter: amount}))

    return PlanItem(name, widths, "query", bias, auto, spent)


def _session(query: Any) -> Any:
    """The session a query spends from; a tuned or SQL query's is its inner query's."""
    inner = query
    while not hasattr(inner, "session") and hasattr(inner, "query"):
        inner = inner.query
    if not hasattr(inner, "session"):
        raise InvalidArgumentError(
            f"plan_budget plans queries (a Session's query() or parse_sql(...), or a tuned "
            f"query), or a report spec's path; got a {type(query).__name__}"
        )
    return inner.session


def _amounts(budget: Spendable) -> tuple[Fraction, Fraction]:
    """A budget's (ρ or ε, δ), exactly."""
    if isinstance(budget, zCDP):
        return budget.exact_rho, budget.exact_delta
    if isinstance(budget, ApproxDP):
        return exact("epsilon", budget.epsilon), budget.exact_delta
    return exact("epsilon", budget.epsilon), Fraction(0)


_KINDS = {zCDP: "zCDP", PureDP: "pure DP", ApproxDP: "(ε, δ)-DP"}


@dataclass(frozen=True)
class BudgetPlan:
    """A total budget split over queries, with each output's 95% interval; nothing is spent.

    Make it with :func:`privframe.plan_budget`. ``str()`` prints the table; a
    notebook shows the table and a chart of each interval against the total.

    Attributes:
        parameter: what the queries spend: ``"rho"`` (zCDP) or ``"epsilon"``.
        total: the total budget, exactly.
        shares: each query's share of the total, exactly; they add up to at most 1.
        items: the queries, in order.
        rows: per query, a public guess of the rows in a group, which turns
            a mean's or variance's interval (a numerator over the released
            count) into a number; absent: shown over the count, not drawn.
        outputs: every output's noise at :attr:`split`, in order.
        left: what the session (or the spec's ledger) has left; None when unknown.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> sess = pf.Session(pl.DataFrame({"u": [1]}), "u", pf.zCDP(1.0))
        >>> q = sess.query().bound(max_rows=1).agg(pf.count())
        >>> plan = pf.plan_budget([q, q], rho=0.5)
        >>> plan.split
        {'query 1': Fraction(1, 4), 'query 2': Fraction(1, 4)}
        >>> plan.with_shares({"query 1": 0.8, "query 2": 0.2}).split["query 1"]
        Fraction(2, 5)
    """

    parameter: str
    total: Fraction
    shares: Mapping[str, Fraction]
    items: tuple[PlanItem, ...]
    rows: Mapping[str, float]
    outputs: tuple[OutputWidth, ...]
    left: Spendable | None = None

    @property
    def split(self) -> dict[str, Fraction]:
        """What each query spends (ρ, or ε), exactly: pass it to its release."""
        return {item.name: self.shares[item.name] * self.total for item in self.items}

    @property
    def deltas(self) -> dict[str, Fraction]:
        """The δ each query that spends one spends: pass it to its release as ``delta=``."""
        return {item.name: item.delta for item in self.items if item.delta is not None}

    @property
    def kind(self) -> str:
        """The budget's kind in words: ``zCDP``, ``pure DP`` or ``(ε, δ)-DP``."""
        if self.left is not None:
            return _KINDS[type(self.left)]
        return "zCDP" if self.parameter == "rho" else "pure DP or (ε, δ)-DP"

    def with_total(self, rho: Number | None = None, *, epsilon: Number | None = None) -> BudgetPlan:
        """The same split of another total (each query's δ stays).

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"u": [1]}), "u", pf.zCDP(1.0))
            >>> plan = pf.plan_budget([sess.query().bound(max_rows=1).agg(pf.count())], rho=0.1)
            >>> wider, narrower = plan.outputs[0], plan.with_total(0.4).outputs[0]
            >>> round(wider.width.std / narrower.width.std, 6)  # four times rho: half the noise
            2.0
        """
        total = total_of(self.parameter, rho, epsilon)
        return _planned(self.parameter, total, self.shares, self.items, self.rows, self.left)

    def with_shares(self, shares: Mapping[str, Number]) -> BudgetPlan:
        """The same total split by ``shares`` (query name to share; they add up to at most 1)."""
        shared = _shares(self.items, shares)
        return _planned(self.parameter, self.total, shared, self.items, self.rows, self.left)

    def drawn(self, output: OutputWidth) -> float | None:
        """The half-width the chart draws, or None for an output it leaves out.

        Left out: an output whose bounds are chosen at release, one whose
        numbers are another quantity's (a standard deviation's are its
        variance's), one over its count without a ``rows`` guess, and a
        half-width of 0 (no point on a log scale).
        """
        width = output.width
        if output.auto or not width.own_units or width.ci95 <= 0:
            return None
        if width.per is None:
            return width.ci95
        guess = self.rows.get(output.item)
        return None if guess is None else width.ci95 / guess

    def curves(self, points: int = POINTS) -> list[Series]:
        """Each drawn output's 95% half-width against the total, on a log grid around it.

        The chosen total is one of the points. A total at which a query
        cannot be planned (say, noise beyond the sampler's range) is left out.
        """
        low, high = _SPAN
        steps = [10.0 ** (low + (high - low) * i / (points - 1)) for i in range(points)]
        scaled = (float(self.total) * step for step in steps)
        totals = sorted({self.total, *(exact("total", t) for t in scaled if math.isfinite(t))})
        lines: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for total in totals:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # a far total's warnings are not the plan's
                    outputs = _outputs(self.items, self.shares, total)
            except PrivframeError:
                continue
            for out in outputs:
                value = self.drawn(out)
                if value is not None:
                    lines.setdefault((out.item, out.output), []).append((float(total), value))
        return [Series(self._series_name(*key), tuple(points)) for key, points in lines.items()]

    def _series_name(self, item: str, output: str) -> str:
        found = next(o for o in self.outputs if (o.item, o.output) == (item, output))
        unit = " (rows of rank)" if found.width.ranks else ""
        per = f" (at {found.width.per} = {self.rows[item]:g})" if found.width.per else ""
        return f"{item}: {output}{unit}{per}" if len(self.items) > 1 else f"{output}{unit}{per}"

    def _rows(self) -> list[tuple[str, ...]]:
        """The table: query, share, its budget, (its δ,) output, 95% interval, tune's bias."""
        deltas = self.deltas
        rows: list[tuple[str, ...]] = []
        for item in self.items:
            start: tuple[str, ...] = (item.name, f"{float(self.shares[item.name]):.4g}")
            start += (number(float(self.split[item.name])),)
            if deltas:
                delta = deltas.get(item.name)
                start += ("" if delta is None else f"{float(delta):.3g}",)
            mine = [o for o in self.outputs if o.item == item.name]
            if not mine:  # a synthetic table
                rows.append(
                    (*start, f"({item.kind})", "no interval: rows sampled from a model", "")
                )
            for out in mine:
                rows.append((*start, out.output, out.interval, out.bias or ""))
        return rows

    def _header_cells(self, greek: bool) -> list[str]:
        rho, epsilon, delta = ("ρ", "ε", "δ") if greek else ("rho", "epsilon", "delta")
        spent = rho if self.parameter == "rho" else epsilon
        cells = ["query", "share", spent, *([delta] if self.deltas else [])]
        return [*cells, "output", "95% interval", "bias (tune)"]

    def _counted(self) -> str:
        kinds: dict[str, int] = {}
        for item in self.items:
            kinds[item.kind] = kinds.get(item.kind, 0) + 1
        plural = {
            "query": "queries",
            "marginals": "marginals",
            "synthetic table": "synthetic tables",
        }
        parts = [f"{n} {kind if n == 1 else plural[kind]}" for kind, n in kinds.items()]
        return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]

    def summary(self) -> str:
        """The plan's first line: the total, what it is split over, and whether it fits."""
        unspent = 1 - sum(self.shares.values())
        rest = f", {float(unspent):.4g} of it left unspent" if unspent else ""
        line = (
            f"budget plan: {self.parameter} = {number(float(self.total))} in all "
            f"({self.kind}) over {self._counted()}{rest}; nothing is spent"
        )
        if self.left is None:
            return line
        left, left_delta = _amounts(self.left)
        deltas = sum(self.deltas.values(), Fraction(0))
        fits = self.total <= left and deltas <= left_delta
        has = f"{self.parameter} = {number(float(left))}"
        has += f", delta = {float(left_delta):.3g}" if deltas else ""
        return f"{line}; the budget has {has} left: {'it fits' if fits else 'it does NOT fit'}"

    def _notes(self) -> list[str]:
        notes = [_SCALING[self.parameter]]
        if any(o.width.per for o in self.outputs):
            notes.append(_PER_COUNT)
        return [*notes, _NOISE_ONLY]

    def __str__(self) -> str:
        rows = [tuple(self._header_cells(greek=False)), *self._rows()]
        keep = len(rows[0]) - (0 if any(o.bias for o in self.outputs) else 1)
        widths = [max(len(r[i]) for r in rows) for i in range(keep)]
        lines = [
            "  ".join(cell.ljust(w) for cell, w in zip(r[:keep], widths, strict=True)).rstrip()
            for r in rows
        ]
        return "\n".join([self.summary(), *lines, "", *self._notes()])

    def html(self, heading: str | None = None) -> str:
        """The plan as HTML: the table, then each interval against the total budget (SVG).

        ``heading`` replaces the first line (:meth:`summary`): a report's page
        says what its run spent.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"u": [1]}), "u", pf.zCDP(1.0))
            >>> plan = pf.plan_budget([sess.query().bound(max_rows=1).agg(pf.count())], rho=0.1)
            >>> page = plan.html()
            >>> 'pf-plan' in page, page.count('class="pf-line"')
            (True, 1)
        """
        greek = "ρ" if self.parameter == "rho" else "ε"
        header, rows = self._header_cells(greek=True), self._rows()
        if not any(out.bias for out in self.outputs):
            header, rows = header[:-1], [r[:-1] for r in rows]
        chart = line_chart(
            self.curves(),
            x_label=f"total {greek} (log scale)",
            y_label="95% interval half-width (log scale)",
            log_x=True,
            log_y=True,
            mark=float(self.total),
            mark_label=f"chosen {greek} = {number(float(self.total))}",
        )
        undrawn = [o.output for o in self.outputs if self.drawn(o) is None]
        parts = [
            paragraph(self.summary() if heading is None else heading),
            table(header, rows, "each output's 95% interval at this split"),
            chart,
            *([paragraph(_undrawn(undrawn), "pf-meta")] if undrawn else []),
            *(paragraph(note, "pf-meta") for note in self._notes()),
        ]
        return '<div class="privframe pf-plan">' + "".join(parts) + "</div>"

    def _repr_html_(self) -> str:
        """Notebook view: :meth:`html`."""
        return self.html()


def _undrawn(outputs: Sequence[str]) -> str:
    return (
        f"not drawn: {', '.join(outputs)} (bounds chosen at release, an interval over the "
        "released count without plan_budget(rows=...), a public guess of a group's rows, a "
        "standard deviation's interval, which is its variance's, or no noise at all)"
    )


_SCALING = {
    "rho": "Gaussian noise: an interval shrinks as 1/sqrt(rho), so halving it costs four "
    "times the rho",
    "epsilon": "Laplace noise: an interval shrinks as 1/epsilon, so halving it costs twice "
    "the epsilon",
}
_PER_COUNT = (
    "≤: a mean's or variance's interval is over its released count, stated at its worst "
    "(a mean at a bound); its release states it at the value it got"
)
_NOISE_ONLY = (
    "intervals cover the noise only; rows dropped by the contribution bound and values "
    "clipped to their bounds add a bias (query.tune estimates it)"
)


def total_of(parameter: str, rho: Number | None, epsilon: Number | None) -> Fraction:
    """The total budget given as ``rho`` or ``epsilon``, whichever ``parameter`` names; exact.

    Example:
        >>> total_of("rho", 0.5, None)
        Fraction(1, 2)
    """
    given = rho if parameter == "rho" else epsilon
    other = epsilon if parameter == "rho" else rho
    if other is not None:
        wrong = "epsilon" if parameter == "rho" else "rho"
        raise InvalidArgumentError(
            f"these queries spend {parameter}: give the total as {parameter}=..., not {wrong}"
        )
    if given is None:
        raise InvalidArgumentError(f"give the total budget as {parameter}=...")
    return exact(parameter, given, positive=True)


def _shares(items: Sequence[PlanItem], shares: object) -> dict[str, Fraction]:
    """Each item's share, checked: every item named once, positive, adding up to at most 1."""
    names = [item.name for item in items]
    if not isinstance(shares, Mapping):
        raise InvalidArgumentError(
            f"shares is a mapping from each query's name to its share, e.g. {{{names[0]!r}: 0.5}}"
        )
    unknown = sorted(set(shares) - set(names), key=str)
    missing = [name for name in names if name not in shares]
    if unknown or missing:
        raise InvalidArgumentError(
            f"shares must give a share to each query, {names}"
            + (f"; unknown: {unknown}" if unknown else "")
            + (f"; missing: {missing}" if missing else "")
        )
    exact_shares = {
        name: exact(f"share of {name!r}", shares[name], positive=True) for name in names
    }
    if sum(exact_shares.values()) > 1:
        raise InvalidValueError(
            f"the shares add up to {float(sum(exact_shares.values())):.6g}, more than the total"
        )
    return exact_shares


def _outputs(
    items: Sequence[PlanItem], shares: Mapping[str, Fraction], total: Fraction
) -> list[OutputWidth]:
    found = []
    for item in items:
        amount = shares[item.name] * total
        for output, width in item.widths(amount):
            bias, auto = item.bias.get(output), output in item.auto
            found.append(OutputWidth(item.name, output, amount, width, bias, auto))
    return found


def _planned(
    parameter: str,
    total: Fraction,
    shares: Mapping[str, Fraction],
    items: tuple[PlanItem, ...],
    rows: Mapping[str, float],
    left: Spendable | None,
) -> BudgetPlan:
    outputs = tuple(_outputs(items, shares, total))
    return BudgetPlan(parameter, total, dict(shares), items, dict(rows), outputs, left)


def plan_items(
    items: Sequence[PlanItem],
    parameter: str,
    total: Fraction,
    shares: Mapping[str, Number] | None = None,
    rows: float | Mapping[str, float] | None = None,
    *,
    left: Spendable | None = None,
) -> BudgetPlan:
    """The plan of ``items`` at ``total``: ``shares`` checked (default: equal), ``rows`` too.

    ``left`` is what the budget has left, for the plan to say whether it fits.

    Example:
        >>> from privframe.plan.aggregates.base import Width
        >>> item = PlanItem("n", lambda amount: (("count", Width(1 / float(amount), None)),))
        >>> plan_items([item], "rho", Fraction(1, 4)).outputs[0].width.ci95
        4.0
    """
    if not items:
        raise InvalidArgumentError("a budget plan needs at least one query")
    even = {item.name: Fraction(1, len(items)) for item in items}
    chosen = even if shares is None else _shares(items, shares)
    guesses = _per_query("rows", [item.name for item in items], rows)
    checked = {name: check_positive(f"rows of {name!r}", v) for name, v in guesses.items()}
    return _planned(parameter, total, chosen, tuple(items), checked, left)


def _per_query(what: str, names: Sequence[str], given: object) -> dict[str, Any]:
    """``given`` per query name: a mapping's (every name a query's), or one value for all."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        return dict.fromkeys(names, given)
    unknown = sorted(set(given) - set(names), key=str)
    if unknown:
        raise InvalidArgumentError(f"{what} names no query of the plan: {unknown}")
    return dict(given)


def _deltas(
    named: Mapping[str, Any], left: Spendable, delta: Number | Mapping[str, Number] | None
) -> dict[str, Number | None]:
    """The δ each query's release spends: given, or what is left split over those that need one.

    A query needs δ when it chooses its groups privately; in an (ε, δ)
    session any query may spend one (a Gaussian release), and one that is
    not given any spends none (Laplace noise). The queries that need δ and
    are not given one share what the given ones leave, evenly.
    """
    if isinstance(left, PureDP):
        if delta is not None:
            raise InvalidValueError(
                "a pure-DP session (a PureDP budget) spends no delta: plan with epsilon=... alone"
            )
        return {}
    selecting = [name for name, q in named.items() if (p := _plan_of(q)) is not None and selects(p)]
    given: dict[str, Number | None] = dict(_per_query("delta", list(named), delta))
    if delta is not None and not isinstance(delta, Mapping) and isinstance(left, zCDP):
        given = {name: given[name] for name in selecting}  # the rest spend rho alone
    rest = [name for name in selecting if name not in given]
    if rest:
        spent = sum((exact("delta", d) for d in given.values() if d is not None), Fraction(0))
        share = max(_amounts(left)[1] - spent, Fraction(0)) / len(rest)
        given.update(dict.fromkeys(rest, share))
    return given


def plan_queries(
    items: Sequence[Any] | Mapping[str, Any],
    *,
    rho: Number | None = None,
    epsilon: Number | None = None,
    shares: Mapping[str, Number] | None = None,
    rows: float | Mapping[str, float] | None = None,
    weights: Mapping[str, Mapping[str, float] | Balance] | None = None,
    delta: Number | Mapping[str, Number] | None = None,
) -> BudgetPlan:
    """:func:`privframe.plan_budget` of queries (a list or a name-to-query mapping) of one session.

    The arguments are :func:`~privframe.plan_budget`'s; the default total is
    what the session has left, the default shares equal.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> sess = pf.Session(pl.DataFrame({"u": [1], "x": [1.0]}), "u", pf.zCDP(1.0))
        >>> q = sess.query().bound(max_rows=1).agg(pf.count(), pf.sum("x", bounds=(0, 10)))
        >>> plan = plan_queries({"totals": q}, rho=0.5)
        >>> [o.output for o in plan.outputs], sess.spent.rho
        (['count', 'x_sum'], 0.0)
    """
    named = (
        dict(items)
        if isinstance(items, Mapping)
        else {f"query {i}": q for i, q in enumerate(items, 1)}
    )
    if not named:
        raise InvalidArgumentError("plan_budget needs at least one query")
    sessions = [_session(q) for q in named.values()]
    if any(other is not sessions[0] for other in sessions):
        raise InvalidArgumentError(
            "plan_budget plans the queries of one session (one budget); plan each session's apart"
        )
    left = sessions[0].remaining
    parameter = "rho" if isinstance(left, zCDP) else "epsilon"
    if weights is not None and not isinstance(weights, Mapping):
        raise InvalidArgumentError("weights is a mapping from a query's name to its weights")
    weighed = _per_query("weights", list(named), weights)
    spends = _deltas(named, left, delta)
    found = [
        query_item(name, q, parameter, spends.get(name), weighed.get(name))
        for name, q in named.items()
    ]
    if rho is None and epsilon is None:
        total = _amounts(left)[0]
        if not total:
            raise InvalidArgumentError(
                f"the session has no {parameter} left: give the total to plan, {parameter}=..."
            )
    else:
        total = total_of(parameter, rho, epsilon)
    return plan_items(found, parameter, total, shares, rows, left=left)
