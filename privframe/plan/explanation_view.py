"""The notebook view of an explanation: what a release would do, as HTML tables.

An :class:`~privframe.plan.explanation.Explanation` shows itself through
:func:`explanation_html` (its ``_repr_html_``). Every number comes from the
explanation, i.e. from public parameters: nothing here reads the data.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> from privframe.plan.explanation_view import explanation_html
    >>> sess = pf.Session(pl.DataFrame({"u": [1]}), "u", pf.zCDP(1.0))
    >>> page = explanation_html(sess.query().bound(max_rows=1).agg(pf.count()).explain(rho=0.5))
    >>> "release costs ρ = 0.5 (zCDP)" in page
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privframe._html import number, paragraph, table, text

if TYPE_CHECKING:
    from privframe.plan.explanation import Explanation
    from privframe.plan.planner import Selection

__all__ = ["ACCOUNTING_NOTE", "explanation_html"]

ACCOUNTING_NOTE = (
    "accounting: zCDP; a release's rho adds to the session's, and the session states "
    "(epsilon, delta) with the conversion valid for every rho-zCDP mechanism (Canonne, Kamath "
    "& Steinke 2020, Cor. 13); Session.guarantee(method='rdp' or 'pld') replays the "
    "ledger's mechanism events instead"
)
"""How a release is accounted; printed by :class:`Explanation` and its HTML view."""


def _selection_table(explanation: Explanation, selection: Selection) -> str:
    """The facts of a private choice of groups: its threshold, δ and noise."""
    m = selection.measurement
    kept = f"{selection.survival_count(0.5)} / {selection.survival_count(0.95)} units"
    facts = [
        ("threshold", f"a group is kept iff its noisy distinct-unit count ≥ {selection.threshold}"),
        ("δ", f"{selection.delta:.3g}"),
        ("kept with 50% / 95% probability at", kept),
        ("sensitivity", m.derivation),
        ("ρ, σ", f"{number(m.rho)}, {number(m.sigma)}"),
    ]
    if explanation.report_delta is not None:
        facts.append(("this release alone", explanation.single_release(selection)))
    return table((), facts, "groups chosen privately")


def explanation_html(explanation: Explanation) -> str:
    """What a release would do, as tables: cost, bound, measurements, selection, outputs.

    Every number comes from the explanation, i.e. from public parameters.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> from privframe.plan.explanation_view import explanation_html
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
        (m.key, m.derivation, number(m.rho), number(m.sigma), number(m.ci95))
        for m in plan.measurements
    ]
    measured += [
        (qm.key, qm.derivation, number(qm.rho), "n/a", f"{qm.rank_error():.4g} rows of rank")
        for qm in plan.quantiles
    ]
    parts = [
        paragraph(f"release costs ρ = {number(cost.rho)}{delta} (zCDP)"),
        paragraph(ACCOUNTING_NOTE, "pf-meta"),
        paragraph(f"contribution bound: {plan.limits.describe()}"),
        table(["measurement", "sensitivity", "ρ", "σ", "95% ±"], measured, "measurements"),
    ]
    if plan.selection is not None:
        parts.append(_selection_table(explanation, plan.selection))
    if plan.relative_errors:
        parts.append(
            table(
                ["output", "expected 95% relative error"],
                ((name, f"{err:.3g}") for name, err in plan.relative_errors),
                "balanced split (from the public guesses of pf.balance)",
            )
        )
    outputs = (
        (row["output"], row["measurements"], row["std"], row["ci95"]) for row in explanation.rows
    )
    parts.append(table(["output", "measurements", "std", "95% ±"], outputs, "outputs"))
    if explanation.notes:
        parts.append("<ul>" + "".join(f"<li>{text(n)}</li>" for n in explanation.notes) + "</ul>")
    return '<div class="privframe">' + "".join(parts) + "</div>"
