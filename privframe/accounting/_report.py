"""What people are told about a budget: the report of an accountant, and why a spend is refused.

:class:`BudgetReport` is the snapshot :meth:`privframe.accounting.Accountant.report`
returns (re-exported by :mod:`privframe.accounting.accountant`); figures are
shown to six significant digits (:func:`figure`), and :func:`refusal` is the
message of a spend that does not fit.

Example:
    >>> figure(0.1 + 0.2)
    '0.3'
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from privframe.accounting._kinds import Kind, Spendable, columns
from privframe.accounting.budgets import ApproxDP, zCDP
from privframe.errors import InvalidArgumentError
from privframe.numeric import round_up

__all__ = ["BudgetReport", "figure", "refusal"]


def figure(x: float | Fraction) -> str:
    """A budget figure for people: six significant digits (0.9, not 0.8999999999999999).

    Example:
        >>> figure(0.8999999999999999)
        '0.9'
    """
    return f"{float(x):.6g}"


@dataclass(frozen=True)
class BudgetReport:
    """A snapshot of an accountant's budget in every reporting unit.

    Its :attr:`kind` is the accountant's: zCDP, PureDP or ApproxDP.

    **PureDP.** ``budget``, ``spent`` and ``remaining`` are
    :class:`~privframe.accounting.PureDP` values that add up exactly (ε adds);
    every row is (ε, 0)-DP. **ApproxDP.** They are
    :class:`~privframe.accounting.ApproxDP` values: ``spent`` is the (ε, δ) the
    accountant charged, its tight composition of the releases (see
    :mod:`privframe.accounting.accountant`), and ``basic`` what basic
    composition (adding the ε's and δ's) would have charged; ``spent +
    remaining == budget``. The ρ and μ fields are None for both kinds, and
    :meth:`epsilon_rows` gives the table.

    **zCDP.** ρ is the accounting unit, and it adds up exactly: ``spent + remaining ==
    budget`` (the exact :class:`~privframe.accounting.zCDP` fields), in ρ and
    in the δ spent outright (approximate zCDP, e.g. private partition
    selection). The other units are each row's own conversion, and do not add
    up (ε and μ are not additive):

    * (ε, δ)-DP with the tightest conversion valid for *every* ρ-zCDP
      mechanism (:meth:`privframe.accounting.zCDP.epsilon`, Canonne, Kamath &
      Steinke 2020), at δ = the reporting δ (the conversion's slack) + the
      row's δ spent outright. With no δ spent outright (the usual case) every
      row is simply (ε, ``delta``)-DP.
    * μ = sqrt(2ρ) (:meth:`privframe.accounting.zCDP.to_gdp`), the
      Gaussian-equivalent summary: exact when every release was a continuous
      Gaussian, not a guarantee for sessions that used other mechanisms.

    The float fields are the nearest floats of exact values (ε and μ rounded
    up), for display; ``str()`` prints six significant digits.

    Attributes:
        delta: the reporting δ: the slack of the zCDP to (ε, δ) conversion.
            For a budget ``ApproxDP(ε, δ).to_zcdp(selection_delta=δ_s)`` it
            defaults to δ − δ_s, so the budget row, and the spent row once
            everything is spent, read (ε' <= ε, δ). For a PureDP report 0, for
            an ApproxDP one the budget's δ.
        budget: the budget, exactly.
        spent: what was spent, exactly (zCDP, PureDP: the exact sum of the
            ledger's entries; ApproxDP: the tight composition charged).
        remaining: ``budget - spent``, exactly (0 if more was spent, which a
            ledger reopened with a smaller budget can show).
        budget_rho: ρ of the budget.
        spent_rho: ρ spent.
        remaining_rho: ρ left.
        budget_delta: δ₀ of the (approximate zCDP) budget; usually 0.
        spent_delta: δ₀ spent outright.
        remaining_delta: δ₀ left.
        budget_epsilon: ε of the budget at δ = ``delta`` + ``budget_delta``.
        spent_epsilon: ε of what was spent at δ = ``delta`` + ``spent_delta``.
        remaining_epsilon: ε of what is left at δ = ``delta`` + ``remaining_delta``.
        budget_mu: μ of the budget (rounded up).
        spent_mu: μ of what was spent (rounded up).
        remaining_mu: μ of what is left (rounded up).
        spent_epsilon_gaussian: ε of the exact μ-GDP curve at ``delta`` for μ =
            ``spent_mu`` (Dong, Roth & Su 2022, Cor. 2.13): what the spend
            would give if every release had been a continuous Gaussian,
            reported beside the general bound; None when δ was spent outright.
            privframe's stated guarantee is ``spent_epsilon``: discrete
            Gaussian releases are ρ-zCDP but not exactly μ-GDP.
        n_entries: number of ledger entries.
        n_seeded: how many of them used seeded (non-private) randomness.
        basic: ApproxDP only: what basic composition would have charged,
            (Σε, Σδ) of the entries; else None.

    Example:
        >>> import privframe as pf
        >>> from privframe.accounting.accountant import Accountant
        >>> acct = Accountant(pf.zCDP(0.5))
        >>> _ = acct.spend(pf.zCDP(0.125), label="q1")
        >>> r = acct.report()
        >>> r.spent_rho, r.remaining_rho, r.delta, r.spent_mu
        (0.125, 0.375, 1e-06, 0.5)
        >>> r.spent + r.remaining == r.budget
        True
        >>> pure = Accountant(pf.PureDP(1.0))
        >>> _ = pure.spend(pf.PureDP(0.25), label="q1")
        >>> p = pure.report()
        >>> p.spent, p.remaining_epsilon, p.epsilon_rows()[0]
        (PureDP(epsilon=0.25), 0.75, ('budget', 1.0, 0.0))
    """

    delta: float
    budget: Spendable
    spent: Spendable
    remaining: Spendable
    budget_epsilon: float
    spent_epsilon: float
    remaining_epsilon: float
    budget_mu: float | None
    spent_mu: float | None
    remaining_mu: float | None
    spent_epsilon_gaussian: float | None
    n_entries: int
    n_seeded: int
    basic: ApproxDP | None = None

    @property
    def kind(self) -> Kind:
        """The kind of the budget: zCDP, PureDP or ApproxDP.

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
            >>> Accountant(pf.ApproxDP(1.0, 1e-6)).report().kind.__name__
            'ApproxDP'
        """
        return type(self.budget)

    def _zcdp(self, part: Spendable, name: str) -> zCDP:
        if not isinstance(part, zCDP):
            raise InvalidArgumentError(
                f"{name} is a zCDP figure, and this is a report of a {self.kind.__name__} "
                "budget, which has no rho: read the epsilon fields (epsilon_rows())"
            )
        return part

    @property
    def budget_rho(self) -> float:
        """ρ of the budget (nearest float); zCDP reports only."""
        return self._zcdp(self.budget, "budget_rho").rho

    @property
    def spent_rho(self) -> float:
        """ρ spent (nearest float); zCDP reports only."""
        return self._zcdp(self.spent, "spent_rho").rho

    @property
    def remaining_rho(self) -> float:
        """ρ left (nearest float); zCDP reports only."""
        return self._zcdp(self.remaining, "remaining_rho").rho

    @property
    def budget_delta(self) -> float:
        """δ₀ of the budget, spent outright (nearest float); a PureDP or ApproxDP budget's δ."""
        return _delta(self.budget)

    @property
    def spent_delta(self) -> float:
        """δ₀ spent outright (nearest float); the δ spent of a PureDP or ApproxDP budget."""
        return _delta(self.spent)

    @property
    def remaining_delta(self) -> float:
        """δ₀ left to spend outright (nearest float); the δ left of a PureDP or ApproxDP budget."""
        return _delta(self.remaining)

    @property
    def basic_epsilon(self) -> float | None:
        """ApproxDP: the ε basic composition would have charged (Σε); else None."""
        return None if self.basic is None else self.basic.epsilon

    def epsilon_rows(self) -> list[tuple[str, float, float]]:
        """(name, ε, δ) for budget, spent and remaining, and for ApproxDP basic composition.

        Each row is stated as (ε, δ)-DP; for a zCDP report, ε is converted at
        δ = the reporting δ plus the row's δ spent outright (as :meth:`rows`).

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
            >>> Accountant(pf.ApproxDP(1.0, 1e-6)).report().epsilon_rows()[0]
            ('budget', 1.0, 1e-06)
        """
        if isinstance(self.budget, zCDP):
            return [(name, eps, total) for name, _, eps, _, _, total in self.rows()]
        rows = [
            ("budget", self.budget_epsilon, self.budget_delta),
            ("spent", self.spent_epsilon, self.spent_delta),
            ("remaining", self.remaining_epsilon, self.remaining_delta),
        ]
        if self.basic is not None:
            rows.append(("basic", self.basic.epsilon, self.basic.delta))
        return rows

    def rows(self) -> list[tuple[str, float, float, float, float, float]]:
        """(name, ρ, ε, μ, δ spent outright, total δ) for budget, spent and remaining.

        Each row is (ε, total δ)-DP, with total δ = the reporting δ plus the
        row's δ spent outright, rounded up. zCDP reports only (a PureDP or
        ApproxDP report has no ρ or μ: :meth:`epsilon_rows`).

        Raises:
            InvalidArgumentError: a PureDP or ApproxDP report.

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
            >>> [row[:2] for row in Accountant(pf.zCDP(1.0)).report().rows()]
            [('budget', 1.0), ('spent', 0.0), ('remaining', 1.0)]
        """
        parts = [
            ("budget", self.budget, self.budget_epsilon, self.budget_mu),
            ("spent", self.spent, self.spent_epsilon, self.spent_mu),
            ("remaining", self.remaining, self.remaining_epsilon, self.remaining_mu),
        ]
        return [
            (
                name,
                z.rho,
                eps,
                float(mu or 0.0),
                z.delta,
                round_up(Fraction(self.delta) + z.exact_delta),
            )
            for name, b, eps, mu in parts
            for z in [self._zcdp(b, "rows()")]
        ]

    def _epsilon_str(self) -> str:
        """The table of a PureDP or ApproxDP report."""
        approx = isinstance(self.budget, ApproxDP)
        lines = [
            f"privacy budget: {self.n_entries} ledger entr{'y' if self.n_entries == 1 else 'ies'}",
            f"{'':<10} {'epsilon':>12}" + (f" {'delta':>12}" if approx else ""),
        ]
        for name, eps, delta in self.epsilon_rows():
            lines.append(
                f"{name:<10} {figure(eps):>12}" + (f" {figure(delta):>12}" if approx else "")
            )
        if approx:
            lines.append(
                "each row is (epsilon, delta)-DP; spent is the tight composition of the "
                "releases charged (a privacy filter valid for adaptively chosen releases), "
                "basic what adding their epsilons and deltas gives"
            )
        else:
            lines.append(
                "each row is pure epsilon-DP; epsilon adds up (spent + remaining = budget)"
            )
        if self.n_seeded:
            lines.append(
                f"warning: {self.n_seeded} entr{'y' if self.n_seeded == 1 else 'ies'} used "
                "seeded randomness; those releases are not private"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        budget, spent = self.budget, self.spent
        if not isinstance(budget, zCDP) or not isinstance(spent, zCDP):
            return self._epsilon_str()
        outright = budget.exact_delta > 0 or spent.exact_delta > 0
        left = f"{'':<10} {'rho (zCDP)':>12}"
        if outright:
            left += f" {'delta spent outright':>21}"
        eps_title = "epsilon" if outright else f"epsilon @ delta={self.delta:g}"
        right = f"{eps_title:>24}" + (f" {'delta':>10}" if outright else "") + f" {'mu (GDP)':>10}"
        lines = [
            f"privacy budget: {self.n_entries} ledger entr{'y' if self.n_entries == 1 else 'ies'}",
            f"{left} | {right}",
        ]
        for name, rho, eps, mu, d, total in self.rows():
            row = f"{name:<10} {figure(rho):>12}"
            if outright:
                row += f" {figure(d):>21}"
            converted = f"{figure(eps):>24}" + (f" {figure(total):>10}" if outright else "")
            lines.append(f"{row} | {converted} {figure(mu):>10}")
        added = "rho and the delta spent outright add" if outright else "rho adds"
        left_note = f"{added} up (spent + remaining = budget)"
        if spent.exact_rho > budget.exact_rho or spent.exact_delta > budget.exact_delta:
            # The remaining row is clipped at 0, so the left side cannot add up.
            left_note = (
                "more than this budget was spent (the ledger was charged under a larger "
                "budget, or by an older privframe's floats); nothing remains of it"
            )
        lines.append(
            f"left of |: {left_note}. Right of |: each row stated on its own as "
            "(epsilon, delta)-DP and mu = sqrt(2 rho), which do not add up"
        )
        if outright:
            lines.append(
                f"delta = the conversion's slack {self.delta:g} + the row's delta spent outright"
            )
        if self.spent_epsilon_gaussian is not None:
            lines.append(
                f"for comparison, the exact Gaussian (mu-GDP) curve gives epsilon="
                f"{figure(self.spent_epsilon_gaussian)} for what was spent; it holds for "
                "continuous Gaussian noise only, so the guarantee stated is the zCDP one above"
            )
        if self.n_seeded:
            lines.append(
                f"warning: {self.n_seeded} entr{'y' if self.n_seeded == 1 else 'ies'} used "
                "seeded randomness; those releases are not private"
            )
        return "\n".join(lines)


def _delta(budget: Spendable) -> float:
    return float(columns(budget)[1])


def refusal(
    cost: Spendable,
    what: str,
    requests: str,
    spent: tuple[Fraction, Fraction],
    cap: Spendable,
    left: Spendable,
    *,
    after: Fraction | None = None,
) -> str:
    """Why a spend of ``cost`` does not fit: what it asks, what is spent, and what remains.

    ``what`` names the refused spend(s), ``requests`` introduces the cost ("it
    requests"), ``spent`` is the exact (ρ, δ) already recorded, ``cap`` the
    budget and ``left`` what remains of it.

    Example:
        >>> from fractions import Fraction
        >>> from privframe.accounting.budgets import zCDP
        >>> print(refusal(zCDP(0.5), "release 'q'", "it requests",
        ...               (Fraction(3, 4), Fraction(0)), zCDP(1.0), zCDP(0.25)))
        ... # doctest: +NORMALIZE_WHITESPACE
        release 'q' refused, nothing was recorded: it requests rho=0.5, but rho=0.75 is spent
        and rho=0.25 remains of the budget rho=1. Request at most the remaining budget (its
        exact_rho is exactly what is left), or start a new privacy budget.

    For a PureDP or ApproxDP budget the figures are ε (and δ); ``spent`` is
    then (ε, δ) charged so far and ``after`` the ε the spend would bring the
    charge to (an ApproxDP accountant charges a composition, not a sum).
    """
    if not isinstance(cap, zCDP):
        return _epsilon_refusal(cost, what, requests, spent, cap, left, after)
    assert isinstance(cost, zCDP)  # a zCDP accountant's
    assert isinstance(left, zCDP)
    rho, delta = spent
    parts = [
        f"{what} refused, nothing was recorded: {requests} rho={figure(cost.exact_rho)}, "
        f"but rho={figure(rho)} is spent and rho={figure(left.exact_rho)} remains "
        f"of the budget rho={figure(cap.exact_rho)}"
    ]
    if cost.exact_delta > 0 or cap.exact_delta > 0:
        parts.append(
            f"(delta: requests {figure(cost.exact_delta)}, spent {figure(delta)}, "
            f"remaining {figure(left.exact_delta)} of {figure(cap.exact_delta)})"
        )
    if rho > cap.exact_rho or delta > cap.exact_delta:
        parts.append(
            "(this ledger already holds more than this budget: it was charged under a "
            "larger one, so no spend fits)"
        )
    if (
        left.exact_rho
        and cost.exact_rho > left.exact_rho
        and figure(cost.exact_rho) == figure(left.exact_rho)
    ):
        # Six digits cannot show the difference: say what it is, exactly.
        parts.append(f"(the request exceeds what remains by rho={cost.exact_rho - left.exact_rho})")
    parts.append(
        "Request at most the remaining budget (its exact_rho is exactly what is left), "
        "or start a new privacy budget."
    )
    return " ".join(parts[:-1]) + ". " + parts[-1]


def _epsilon_refusal(
    cost: Spendable,
    what: str,
    requests: str,
    spent: tuple[Fraction, Fraction],
    cap: Spendable,
    left: Spendable,
    after: Fraction | None,
) -> str:
    """:func:`refusal` for a PureDP or ApproxDP budget: the figures in ε (and δ)."""
    approx = isinstance(cap, ApproxDP)
    (eps, delta), (cap_eps, cap_delta) = spent, columns(cap)
    (ask_eps, ask_delta), (left_eps, left_delta) = columns(cost), columns(left)
    parts = [
        f"{what} refused, nothing was recorded: {requests} epsilon={figure(ask_eps)}"
        + (f" and delta={figure(ask_delta)}" if approx else "")
        + f", but epsilon={figure(eps)} is spent and epsilon={figure(left_eps)} remains "
        f"of the budget epsilon={figure(cap_eps)}"
    ]
    if approx:
        parts.append(
            f"(delta: requests {figure(ask_delta)}, spent {figure(delta)}, remaining "
            f"{figure(left_delta)} of {figure(cap_delta)})"
        )
        if after is not None and after > cap_eps:
            parts.append(
                f"(the releases composed with it would be charged epsilon={figure(after)})"
            )
    if eps > cap_eps or delta > cap_delta:
        parts.append(
            "(this ledger already holds more than this budget: it was charged under a "
            "larger one, so no spend fits)"
        )
    if left_eps and ask_eps > left_eps and figure(ask_eps) == figure(left_eps):
        parts.append(f"(the request exceeds what remains by epsilon={ask_eps - left_eps})")
    parts.append(
        "Request at most the remaining budget (its exact_epsilon"
        + (" and exact_delta are" if approx else " is")
        + " exactly what is left), or start a new privacy budget."
    )
    return " ".join(parts[:-1]) + ". " + parts[-1]
