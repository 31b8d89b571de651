"""What a release would do, from public parameters only: the ``explain`` table.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> sess = pf.Session(pl.DataFrame({"u": [1], "r": ["a"]}), "u", pf.zCDP(1.0))
    >>> e = sess.query().bound(max_groups=1, max_rows_per_group=2).group_by(
    ...     "r", keys=["a"]).agg(pf.count()).explain(rho=0.5)
    >>> print(str(e).splitlines()[0])
    release costs rho = 0.5 (zCDP)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from privframe._html import number, paragraph, table, text
from privframe.accounting.budgets import ApproxDP, PureDP, zCDP
from privframe.mechanisms.selection import joint_selection_epsilon, standard_selection_epsilon
from privframe.numeric import Number, round_up
from privframe.plan.ir import Plan
from privframe.plan.measurements import Measurement
from privframe.plan.planner import ReleasePlan, Selection, plan_release
from privframe.plan.split import Balance

__all__ = [
    "ACCOUNTING_NOTE",
    "NOISE_ONLY_NOTE",
    "Explanation",
    "explain",
    "explained",
    "explanation_html",
    "groups_described",
    "with_charge",
]


ACCOUNTING_NOTE = (
    "accounting: zCDP; a release's rho adds to the session's, and the session states "
    "(epsilon, delta) with the conversion valid for every rho-zCDP mechanism (Canonne, Kamath "
    "& Steinke 2020, Cor. 13); Session.guarantee(method='rdp' or 'pld') replays the "
    "ledger's mechanism events instead"
)
"""How a zCDP session accounts a release; printed by :class:`Explanation` and its HTML view."""

PURE_ACCOUNTING_NOTE = (
    "accounting: pure DP; a release's epsilon adds to the session's (basic composition, "
    "Dwork & Roth 2014, Thm. 3.16), exactly"
)
"""How a release is accounted in a pure-DP session."""

APPROX_ACCOUNTING_NOTE = (
    "accounting: (epsilon, delta)-DP; a release is charged the (epsilon, delta) it asks for, "
    "and the session composes its releases with a privacy filter valid for adaptively "
    "chosen releases (Renyi bounds of their mechanisms, started by the delta they leave "
    "unused), never charging more than basic composition (epsilons and deltas added) "
    "would (docs/accounting.md)"
)
"""How a release is accounted in an (ε, δ) session."""


def _cost_text(cost: object, greek: bool = False) -> str:
    """The cost line of a release, by the kind of its budget (Greek letters for HTML)."""
    rho, epsilon, delta = ("ρ", "ε", "δ") if greek else ("rho", "epsilon", "delta")
    if isinstance(cost, zCDP):
        spent = f", {delta} = {cost.delta:.3g}" if cost.delta else ""
        value = number(cost.rho) if greek else f"{cost.rho:.6g}"
        return f"release costs {rho} = {value}{spent} (zCDP)"
    if isinstance(cost, PureDP):
        return f"release costs {epsilon} = {cost.epsilon:.6g} (pure DP)"
    assert isinstance(cost, ApproxDP)
    return f"release costs {epsilon} = {cost.epsilon:.6g}, {delta} = {cost.delta:.3g} ((ε, δ)-DP)"


def _accounting_note(cost: object) -> str:
    if isinstance(cost, PureDP):
        return PURE_ACCOUNTING_NOTE
    if isinstance(cost, ApproxDP):
        return APPROX_ACCOUNTING_NOTE
    return ACCOUNTING_NOTE


_GREEK = {"rho": "ρ", "sigma": "σ", "epsilon": "ε", "scale": "b"}


def _share(m: Measurement, plan: ReleasePlan) -> tuple[str, str]:
    """A measurement's share and noise, as (names, values): ρ and σ, or ε and b."""
    (share, _), (noise, _) = m.noise.items()
    return f"{_GREEK[share]}, {_GREEK[noise]}", ", ".join(_noise_cells(m, plan))


def _noise_cells(m: Measurement, plan: ReleasePlan) -> tuple[str, str]:
    """A measurement's share and noise as table cells, the noise with its floor note if raised."""
    share, noise = m.noise.values()
    return number(share), number(noise) + _floor_note(m, plan)


NOISE_ONLY_NOTE = (
    "std and 95% intervals cover the noise only: rows dropped by the contribution bound "
    "(max_groups, max_rows_per_group, max_rows) and values clipped to their bounds bias the "
    "outputs by amounts no measurement here estimates; query.tune(rho=0.05, plan_rho=0.45), "
    "for example, spends rho=0.05 to estimate privately what bounding drops, and chooses "
    "bounds that balance it against the noise of a release at plan_rho=0.45 (docs/tuning.md)"
)
"""What the error columns leave out; printed under the outputs of every zCDP explanation."""

_BOUNDING_NOTE = (
    "std and 95% intervals cover the noise only: rows dropped by the contribution bound "
    "(max_groups, max_rows_per_group, max_rows) and values clipped to their bounds bias the "
    "outputs by amounts no measurement here estimates; choose the bounds from public "
    "knowledge (query.tune, which estimates them privately, spends rho: zCDP sessions only)"
)


def _noise_note(cost: object) -> str:
    """What the error columns leave out, with the advice the session's kind can follow."""
    return NOISE_ONLY_NOTE if isinstance(cost, zCDP) else _BOUNDING_NOTE


def _selection_table(explanation: Explanation, selection: Selection) -> str:
    """The facts of a private choice of groups: its threshold, δ and noise."""
    m = selection.measurement
    kept = f"{selection.survival_count(0.5)} / {selection.survival_count(0.95)} units"
    facts = [
        ("threshold", f"a group is kept iff its noisy distinct-unit count ≥ {selection.threshold}"),
        ("δ", f"{selection.delta:.3g}"),
        ("kept with 50% / 95% probability at", kept),
        ("sensitivity", m.derivation),
        _share(m, explanation.plan),
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
        >>> from privframe.plan.explanation import explanation_html
        >>> sess = pf.Session(pl.DataFrame({"u": [1], "r": ["a"]}), "u", pf.zCDP(1.0))
        >>> q = sess.query().bound(max_groups=1, max_rows_per_group=2).group_by(
        ...     "r", keys=["a", "b"]).agg(pf.count())
        >>> "sqrt(S) = sqrt(4)" in explanation_html(q.explain(rho=0.5))
        True
    """
    plan = explanation.plan
    cost = plan.cost
    measured = [
        (m.key, m.derivation, *_noise_cells(m, plan), number(m.ci95)) for m in plan.measurements
    ]
    measured += [
        (
            qm.key,
            qm.derivation,
            number(float(qm.exact_share)),
            "n/a",
            f"{qm.rank_error():.4g} rows of rank",
        )
        for qm in plan.quantiles
    ]
    share, noise = ("ρ", "σ") if plan.family == "gaussian" else ("ε", "b")
    parts = [
        paragraph(explanation.cost_text(greek=True)),
        *([paragraph(f"noise: {plan.choice}")] if plan.choice else []),
        paragraph(_accounting_note(cost), "pf-meta"),
        paragraph(f"contribution bound: {explanation.bound}"),
        *([paragraph(f"groups: {explanation.groups}")] if explanation.groups else []),
        table(["measurement", "sensitivity", share, noise, "95% ±"], measured, "measurements"),
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
    outputs = ((row["output"], row["formula"], row["std"], row["ci95"]) for row in explanation.rows)
    parts.append(
        table(["output", "derived from the measurements as", "std", "95% ±"], outputs, "outputs")
    )
    parts.append(paragraph(_noise_note(cost), "pf-meta"))
    if explanation.missing_rules:
        rules = explanation.missing_rules
        parts.append(table(["output", "a null or NaN value"], rules, "missing values"))
    if explanation.notes:
        parts.append("<ul>" + "".join(f"<li>{text(n)}</li>" for n in explanation.notes) + "</ul>")
    return '<div class="privframe">' + "".join(parts) + "</div>"


@dataclass(frozen=True)
class Explanation:
    """What a release would do, from public parameters only; ``str()`` prints a table.

    Attributes:
        plan: the release plan (sensitivities, ρ split, σ).
        rows: per output: name, measurements, how it is derived from them
            (post-processing), std and 95% half-width (as text, and as numbers:
            ``width``, a :class:`~privframe.plan.aggregates.base.Width`), and
            what a null or NaN value of its column does (``missing``, None
            without a column).
    """

    plan: ReleasePlan
    rows: tuple[dict[str, object], ...]
    report_delta: float | None = None
    bounds_cost: zCDP | None = None  # automatic bounds: the share spent choosing them first
    notes: tuple[str, ...] = ()  # e.g. the SQL front end's post-processing
    groups: str | None = None  # with public keys for some group columns: which are which

    @property
    def measurements(self) -> tuple[Measurement, ...]:
        """The measurements of the plan."""
        return self.plan.measurements

    @property
    def bound(self) -> str:
        """The contribution bound and the sensitivity bound it implies (S, or W for Laplace)."""
        return self.plan.limits.describe(l1=self.plan.family == "laplace")

    @property
    def missing_rules(self) -> tuple[tuple[str, str], ...]:
        """Per output that reads a column: what a null or NaN value there does."""
        return tuple((str(r["output"]), str(r["missing"])) for r in self.rows if r.get("missing"))

    def __str__(self) -> str:
        cost = self.plan.cost
        lines = [
            self.cost_text(),
            *([f"noise: {self.plan.choice}"] if self.plan.choice else []),
            _accounting_note(cost),
            f"contribution bound: {self.bound}",
        ]
        if self.groups is not None:
            lines.append(f"groups: {self.groups}")
        lines += ["", "measurements:"]
        selection = self.plan.selection
        if selection is not None:
            m = selection.measurement
            lines.append(
                f"  {m.key}: {m.derivation}; {_share_text(m, self.plan)}; "
                f"a group is kept iff its noisy count >= {selection.threshold} "
                f"(delta = {selection.delta:.3g}); kept with 50% at "
                f"{selection.survival_count(0.5)} units, 95% at {selection.survival_count(0.95)}"
            )
            if self.report_delta is not None:
                lines.append("  " + self.single_release(selection))
        for m in self.plan.measurements:
            lines.append(
                f"  {m.key}: {m.derivation}; {_share_text(m, self.plan)}, 95% ± {m.ci95:.6g}"
            )
        for qm in self.plan.quantiles:
            lines.append(
                f"  {qm.key}: {qm.derivation}; {qm.share.parameter} = {float(qm.exact_share):.6g}"
            )
        if self.plan.relative_errors:
            lines += [
                "",
                "split: balanced relative error (from the public guesses of pf.balance); "
                "expected 95% relative error per output: "
                + ", ".join(f"{name} {err:.3g}" for name, err in self.plan.relative_errors),
            ]
        lines += ["", "outputs (post-processing of the measurements):"]
        for row in self.rows:
            lines.append(
                f"  {row['output']} = {row['formula']}: std {row['std']}, 95% ± {row['ci95']}"
            )
        lines.append(_noise_note(cost))
        if self.missing_rules:
            lines += ["", "missing values:", *(f"  {n}: {rule}" for n, rule in self.missing_rules)]
        if self.notes:
            lines += ["", "notes:", *(f"  {note}" for note in self.notes)]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """Notebook view: the explanation as tables."""
        return explanation_html(self)

    def cost_text(self, greek: bool = False) -> str:
        """The cost line: the release's, or with automatic bounds the whole and its two parts.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"u": [1], "x": [1.0]}), "u", pf.zCDP(1.0))
            >>> q = sess.query().bound(max_rows_per_group=1).agg(pf.sum("x", bounds="auto"))
            >>> q.explain(rho=0.5).cost_text()
            'release costs rho = 0.5 (zCDP): rho = 0.05 choosing the bounds, then rho = 0.45 \
releasing with them (below)'
        """
        if self.bounds_cost is None:
            return _cost_text(self.plan.cost, greek)
        rest = self.plan.cost
        assert isinstance(rest, zCDP)  # automatic bounds are for zCDP sessions only
        rho = "ρ" if greek else "rho"
        whole = zCDP(self.bounds_cost.exact_rho + rest.exact_rho, rest.delta)
        bounds, release = (
            (number(self.bounds_cost.rho), number(rest.rho))
            if greek
            else (f"{self.bounds_cost.rho:.6g}", f"{rest.rho:.6g}")
        )
        return (
            f"{_cost_text(whole, greek)}: {rho} = {bounds} choosing the bounds, then "
            f"{rho} = {release} releasing with them (below)"
        )

    def single_release(self, selection: Selection) -> str:
        """This release alone as (ε, δ), by the standard and the joint analysis.

        With automatic bounds by the standard analysis only: their histogram, drawn over
        every row, is outside the joint analysis.

        Needs ``report_delta`` (set by ``Query.explain``).

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> df = pl.DataFrame({"u": list(range(40)), "g": ["a", "b"] * 20})
            >>> sess = pf.Session(df, "u", pf.zCDP(1.0, delta=1e-6))
            >>> e = sess.query().bound(max_groups=1, max_rows_per_group=1).group_by("g").agg(
            ...     pf.count()).explain(rho=0.5)
            >>> e.single_release(e.plan.selection).startswith("this release alone")
            True
        """
        assert self.report_delta is not None
        cost = self.plan.cost
        assert isinstance(cost, zCDP)  # report_delta is set for zCDP releases only
        total = self.report_delta + selection.delta
        # With automatic bounds the release's rho comes after the bounds' share: both count.
        spent = cost.exact_rho + (0 if self.bounds_cost is None else self.bounds_cost.exact_rho)
        rho, k, p = (
            round_up(spent),
            self.plan.limits.max_groups,
            selection.single_unit_survival(),
        )
        standard = standard_selection_epsilon(total, rho, k, p)
        if self.bounds_cost is not None:
            # The joint analysis rests on a unit whose groups are all new changing nothing
            # released; the bounds' histogram is drawn over every row, so it does not apply.
            return (
                f"this release alone at delta = {total:.3g}: epsilon = {standard:.4g} by the "
                "standard analysis (docs/privacy.md §6; the joint analysis does not cover the "
                "bounds' histogram, §7)"
            )
        joint = joint_selection_epsilon(total, rho, k, p)
        return (
            f"this release alone at delta = {total:.3g}: epsilon = {standard:.4g} by the "
            f"standard analysis, {joint:.4g} by the joint analysis of selection and values "
            "(Wilkins et al. 2023; docs/privacy.md §6)"
        )


def with_charge(explanation: Explanation, spent: object, basic: object) -> Explanation:
    """``explanation`` of an (ε, δ) release, noting the session's charge after it.

    ``spent`` and ``basic`` are what the session would be charged in all after
    the release, tightly and by basic composition
    (:meth:`Accountant.spent_after <privframe.accounting.accountant.Accountant.spent_after>`).

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> sess = pf.Session(pl.DataFrame({"x": [1.0]}), None, pf.ApproxDP(1.0, 1e-6))
        >>> sess.query().agg(pf.count()).explain(epsilon=0.5).notes[0][:47]
        'after this release the session would be charged'
    """
    assert isinstance(spent, ApproxDP)
    assert isinstance(basic, ApproxDP)
    note = (
        f"after this release the session would be charged epsilon = {spent.epsilon:.6g}, "
        f"delta = {spent.delta:.3g} in all (basic composition, adding the releases up: "
        f"epsilon = {basic.epsilon:.6g}, delta = {basic.delta:.3g})"
    )
    return dataclasses.replace(explanation, notes=(*explanation.notes, note))


def explain(
    plan: Plan,
    has_unit: bool,
    rho: Number,
    weights: Mapping[str, float] | Balance | None,
    delta: Number | None = None,
    report_delta: float | None = None,
) -> Explanation:
    """The explanation of a zCDP release at ``rho``: every number comes from public parameters.

    With ``report_delta`` (the session's reporting δ), a release that chooses
    its keys also states its own (ε, δ) by both analyses.
    """
    return explained(plan, plan_release(plan, has_unit, rho, weights, delta), report_delta)


def explained(plan: Plan, release: ReleasePlan, report_delta: float | None = None) -> Explanation:
    """The explanation of ``plan`` released as ``release`` (a plan of any budget's kind).

    ``report_delta`` is used by zCDP releases that choose their keys, as in :func:`explain`.
    """
    if not isinstance(release.cost, zCDP):
        report_delta = None  # the (ε, δ) of one release is its cost already
    rows: list[dict[str, object]] = []
    for out in release.outputs:
        width = out.aggregate.width(release)
        std, ci = width.cells()
        rows.append(
            {
                "output": out.name,
                "width": width,
                "measurements": ", ".join(out.measurements),
                "formula": out.aggregate.formula(release),
                "std": std,
                "ci95": ci,
                "missing": out.aggregate.missing_rule(),
            }
        )
    return Explanation(release, tuple(rows), report_delta, groups=groups_described(plan))


def groups_described(plan: Plan) -> str | None:
    """Which group columns have public keys and which are chosen privately, when both occur.

    Only public facts: the column names and the number of public keys.

    Example:
        >>> import privframe as pf
        >>> keys = pf.keys.from_list("region", ["n", "s"])
        >>> groups_described(Plan(group_by=("region", "month"), keys=keys))[:68]
        "every public key of ['region'] (2 keys) for each combination of ['mo"
    """
    if plan.keys is None or not plan.selected:
        return None
    keyed = list(plan.keys.columns)
    return (
        f"every public key of {keyed} ({len(plan.keys)} keys) for each combination of "
        f"{list(plan.selected)} chosen privately (partition selection: rows with other keys "
        f"of {keyed} are dropped first)"
    )


def _share_text(m: Measurement, plan: ReleasePlan) -> str:
    """A measurement's share and noise for the text view: ``rho = .., sigma = ..`` or ε and b."""
    text = ", ".join(f"{name} = {value:.6g}" for name, value in m.noise.items())
    notes = [] if m.family == "gaussian" else [f"Laplace; std <= {m.sigma:.6g}"]
    notes += [_FLOOR_NOTES[m.family]] if m.key in plan.raised else []
    return f"{text} ({'; '.join(notes)})" if notes else text


_LESS_LOSS = "less privacy loss than charged"
_FLOOR_NOTES = {
    "gaussian": f"σ raised to the sampler's minimum 2^-20 grid units: {_LESS_LOSS}",
    "laplace": f"b raised to the sampler's minimum 2^-10 grid units: {_LESS_LOSS}",
}


def _floor_note(m: Measurement, plan: ReleasePlan) -> str:
    """``" (σ raised to ...)"`` if the planner raised ``m``'s noise to the sampler's floor."""
    return f" ({_FLOOR_NOTES[m.family]})" if m.key in plan.raised else ""
