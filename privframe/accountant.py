"""The accountant: one privacy budget, one ledger, and atomic spends against it.

An :class:`Accountant` converts the budget it is given into a zCDP allowance
once (:func:`privframe.accounting.to_zcdp`) and charges every release against
it. :meth:`Accountant.spend` is check-and-record in one step: a spend that
would not fit raises :class:`~privframe.errors.BudgetExceededError` before
anything is recorded, and a spend that fits is on the ledger (committed to disk,
for a file ledger) before ``spend`` returns.

Spends are compared exactly: the ledger's running total is the exact rational
sum of the recorded float ρ values (every float is a rational), and a spend
fits when ``total + cost <= budget`` holds exactly, in ρ and in δ. So
``sum(entries) <= budget`` always holds exactly; ten spends of the float
``0.1`` do *not* fit in a budget of ``1.0`` (the float 0.1 is slightly more
than 1/10), and spending :attr:`Accountant.remaining` (rounded down) always
fits.

Example:
    >>> import privframe as pf
    >>> from privframe.accountant import Accountant
    >>> acct = Accountant(pf.zCDP(1.0))
    >>> _ = acct.spend(pf.zCDP(0.25), label="q1", description={"query": "count"})
    >>> acct.spent, acct.remaining
    (zCDP(rho=0.25, delta=0.0), zCDP(rho=0.75, delta=0.0))
    >>> try:
    ...     acct.spend(pf.zCDP(0.8), label="q2")
    ... except pf.BudgetExceededError:
    ...     print("refused; entries:", len(acct.entries))
    refused; entries: 1
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from privframe import accounting
from privframe.accounting import GDP, ApproxDP, Budget, zCDP
from privframe.accounting import _round_down as _round_down  # the one rounding rule
from privframe.accounting import _round_up as _round_up
from privframe.errors import (
    BudgetExceededError,
    InvalidArgumentError,
    InvalidBudgetError,
    SeededRandomnessWarning,
)
from privframe.ledger import Ledger, LedgerEntry, SQLiteLedger

__all__ = ["DEFAULT_REPORTING_DELTA", "Accountant", "BudgetReport"]

DEFAULT_REPORTING_DELTA = 1e-6
"""δ at which (ε, δ) is reported when the budget does not name one."""


def _fmt(x: float) -> str:
    return f"{x:.6g}"


@dataclass(frozen=True)
class BudgetReport:
    """A snapshot of an accountant's budget in every reporting unit.

    ρ is the accounting unit. Each row (budget, spent, remaining) is also
    stated as (ε, δ)-DP with the tightest conversion valid for *every* ρ-zCDP
    mechanism (:meth:`privframe.accounting.zCDP.epsilon`, Canonne, Kamath &
    Steinke 2020), at the reporting δ. μ = sqrt(2ρ)
    (:meth:`privframe.accounting.zCDP.to_gdp`) is the Gaussian-equivalent
    summary: exact when every release was a continuous Gaussian, not a
    guarantee for sessions that used other mechanisms.

    δ spent outright (approximate zCDP, e.g. private partition selection) is
    reported in the ``*_delta`` fields and adds to the statement: a row with
    ρ and δ₀ is (ε, ``delta`` + δ₀)-DP. With no such spends (the usual case)
    every row is simply (ε, ``delta``)-DP.

    Attributes:
        delta: the reporting δ: the slack of the zCDP to (ε, δ) conversion.
            For a budget ``ApproxDP(ε, δ).to_zcdp(selection_delta=δ_s)`` it
            defaults to δ − δ_s (rounded down), so the budget row, and the
            spent row once everything is spent, read (ε' <= ε, δ).
        budget_rho: ρ of the budget.
        spent_rho: ρ spent (exact sum, rounded up).
        remaining_rho: ρ left (rounded down, >= 0).
        budget_delta: δ₀ of the (approximate zCDP) budget; usually 0.
        spent_delta: δ₀ spent outright (rounded up).
        remaining_delta: δ₀ left (rounded down).
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

    Example:
        >>> import privframe as pf
        >>> from privframe.accountant import Accountant
        >>> acct = Accountant(pf.zCDP(0.5))
        >>> _ = acct.spend(pf.zCDP(0.125), label="q1")
        >>> r = acct.report()
        >>> r.spent_rho, r.remaining_rho, r.delta, r.spent_mu
        (0.125, 0.375, 1e-06, 0.5)
    """

    delta: float
    budget_rho: float
    spent_rho: float
    remaining_rho: float
    budget_delta: float
    spent_delta: float
    remaining_delta: float
    budget_epsilon: float
    spent_epsilon: float
    remaining_epsilon: float
    budget_mu: float
    spent_mu: float
    remaining_mu: float
    spent_epsilon_gaussian: float | None
    n_entries: int
    n_seeded: int

    def rows(self) -> list[tuple[str, float, float, float, float, float]]:
        """(name, ρ, ε, μ, δ spent outright, total δ) for budget, spent and remaining.

        Each row is (ε, total δ)-DP, with total δ = the reporting δ plus the δ
        spent outright, rounded up.

        Example:
            >>> import privframe as pf
            >>> from privframe.accountant import Accountant
            >>> [row[:2] for row in Accountant(pf.zCDP(1.0)).report().rows()]
            [('budget', 1.0), ('spent', 0.0), ('remaining', 1.0)]
        """
        parts = [
            ("budget", self.budget_rho, self.budget_epsilon, self.budget_mu, self.budget_delta),
            ("spent", self.spent_rho, self.spent_epsilon, self.spent_mu, self.spent_delta),
            (
                "remaining",
                self.remaining_rho,
                self.remaining_epsilon,
                self.remaining_mu,
                self.remaining_delta,
            ),
        ]
        return [
            (name, rho, eps, mu, d, _round_up(Fraction(self.delta) + Fraction(d)))
            for name, rho, eps, mu, d in parts
        ]

    def __str__(self) -> str:
        show_delta = self.budget_delta > 0 or self.spent_delta > 0
        eps_title = "epsilon" if show_delta else f"epsilon @ delta={self.delta:g}"
        header = f"{'':<10} {'rho (zCDP)':>12} {eps_title:>24} {'mu (GDP)':>10}"
        if show_delta:
            header += f" {'delta (total)':>14} {'delta spent outright':>21}"
        lines = [
            f"privacy budget: {self.n_entries} ledger entr{'y' if self.n_entries == 1 else 'ies'}",
            header,
        ]
        for name, rho, eps, mu, d, total in self.rows():
            line = f"{name:<10} {_fmt(rho):>12} {_fmt(eps):>24} {_fmt(mu):>10}"
            if show_delta:
                line += f" {_fmt(total):>14} {_fmt(d):>21}"
            lines.append(line)
        if show_delta:
            lines.append(
                f"each row is (epsilon, delta (total))-DP: the reporting delta={self.delta:g} "
                "plus the delta spent outright"
            )
        if self.spent_epsilon_gaussian is not None:
            lines.append(
                f"for comparison, the exact Gaussian (mu-GDP) curve gives epsilon="
                f"{_fmt(self.spent_epsilon_gaussian)} for what was spent; it holds for continuous "
                "Gaussian noise only, so the guarantee stated is the zCDP one above"
            )
        if self.n_seeded:
            lines.append(
                f"warning: {self.n_seeded} entr{'y' if self.n_seeded == 1 else 'ies'} used "
                "seeded randomness; those releases are not private"
            )
        return "\n".join(lines)


class Accountant:
    """Owns one privacy budget and the ledger of what was spent from it.

    Args:
        budget: any :data:`~privframe.accounting.Budget`; converted once into
            the zCDP allowance with :func:`privframe.accounting.to_zcdp`.
        ledger: None for an in-memory ledger, or the path of a SQLite ledger
            file (created if absent; its directory must exist). A file
            remembers its creation budget: reopening it with a larger budget
            raises :class:`~privframe.errors.LedgerError`; reopening it with a
            smaller one is allowed, and this accountant then enforces the
            smaller budget against everything the file has recorded.
        delta: the reporting δ: the slack of the ρ → (ε, δ) conversion, to
            which each row adds the δ spent outright (see
            :class:`BudgetReport`). Default: for a budget given as an
            :class:`~privframe.accounting.ApproxDP`, or converted from one
            (a zCDP whose ``converted_from`` is set, as
            :meth:`~privframe.accounting.ApproxDP.to_zcdp` returns), the part
            of that budget's δ not reserved for selection, so the budget row
            restates the user's (ε, δ) exactly; else
            :data:`DEFAULT_REPORTING_DELTA` (1e-6).

    Raises:
        InvalidBudgetError: ``budget`` is not a Budget, or ``delta`` is not in (0, 1).
        InvalidArgumentError: ``delta`` is not a real number.
        InvalidArgumentError: ``ledger`` is neither None nor a str or os.PathLike path.
        LedgerError: the ledger file cannot be used (see
            :class:`~privframe.ledger.SQLiteLedger`).

    Example:
        >>> import privframe as pf
        >>> from privframe.accountant import Accountant
        >>> acct = Accountant(pf.zCDP(1.0))
        >>> entry = acct.spend(pf.zCDP(0.25), label="q1", description={"query": "count"})
        >>> entry.index, entry.rho, acct.remaining.rho
        (0, 0.25, 0.75)

        An (ε, δ) budget with part of δ kept for private partition selection:

        >>> acct = Accountant(pf.ApproxDP(1.0, 1e-6).to_zcdp(selection_delta=1e-7))
        >>> acct.budget.delta, acct.delta  # δ_s spent outright; the rest is the slack
        (1e-07, 9e-07)
        >>> r = acct.report()
        >>> r.budget_epsilon <= 1.0, r.delta + r.budget_delta  # the user's (ε, δ)
        (True, 1e-06)
    """

    def __init__(
        self,
        budget: Budget,
        ledger: str | os.PathLike[str] | None = None,
        *,
        delta: float | None = None,
    ) -> None:
        if not isinstance(budget, zCDP | ApproxDP | GDP):
            raise InvalidBudgetError(
                f"budget must be a zCDP, ApproxDP or GDP, got {type(budget).__name__}"
            )
        self._budget = accounting.to_zcdp(budget)
        if delta is None:
            source = self._budget.converted_from
            if source is not None:
                # The budget row then reads (ε_ρ(δ − δ_s), δ): the user's own statement.
                delta = accounting._conversion_slack(source.delta, self._budget.delta)
            else:
                delta = DEFAULT_REPORTING_DELTA
        self._delta = accounting._check_conversion_delta(delta)
        self._ledger: Ledger
        if ledger is None:
            self._ledger = Ledger()
        elif isinstance(ledger, str | os.PathLike):
            self._ledger = SQLiteLedger(ledger, self._budget)
        else:
            raise InvalidArgumentError(
                f"ledger must be None or a file path (str or os.PathLike), "
                f"got {type(ledger).__name__}"
            )
        self._cap_rho = Fraction(self._budget.rho)
        self._cap_delta = Fraction(self._budget.delta)

    # -- budget -------------------------------------------------------------------

    @property
    def budget(self) -> zCDP:
        """The zCDP budget this accountant enforces.

        Example:
            >>> import privframe as pf
            >>> from privframe.accountant import Accountant
            >>> Accountant(pf.zCDP(1.0)).budget
            zCDP(rho=1.0, delta=0.0)
        """
        return self._budget

    @property
    def delta(self) -> float:
        """The δ at which (ε, δ) is reported.

        Example:
            >>> import privframe as pf
            >>> from privframe.accountant import Accountant
            >>> Accountant(pf.zCDP(1.0)).delta
            1e-06
        """
        return self._delta

    @property
    def path(self) -> Path | None:
        """The ledger file, or None for an in-memory ledger.

        Example:
            >>> import privframe as pf
            >>> from privframe.accountant import Accountant
            >>> Accountant(pf.zCDP(1.0)).path is None
            True
        """
        return self._ledger.path

    @property
    def spent(self) -> zCDP:
        """Everything recorded so far, as zCDP (exact sum, rounded up).

        For a file ledger this includes spends by other accountants and
        processes sharing the file.

        Example:
            >>> import privframe as pf
            >>> from privframe.accountant import Accountant
            >>> acct = Accountant(pf.zCDP(1.0))
            >>> _ = acct.spend(pf.zCDP(0.1))
            >>> _ = acct.spend(pf.zCDP(0.2))
            >>> acct.spent
            zCDP(rho=0.30000000000000004, delta=0.0)
        """
        rho, delta = self._ledger.totals()
        return zCDP(_round_up(rho), _round_up(delta))

    @property
    def remaining(self) -> zCDP:
        """What is left (budget minus the exact spent total, rounded down, at least 0).

        Spending exactly ``remaining`` always fits.

        Example:
            >>> import privframe as pf
            >>> from privframe.accountant import Accountant
            >>> acct = Accountant(pf.zCDP(1.0))
            >>> _ = acct.spend(pf.zCDP(0.1))
            >>> acct.remaining  # the float 0.1 is a bit more than 1/10: round down
            zCDP(rho=0.8999999999999999, delta=0.0)
        """
        rho, delta = self._ledger.totals()
        return self._remaining(rho, delta)

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        """Every ledger entry, in order (a file ledger is re-read and re-verified).

        Example:
            >>> import privframe as pf
            >>> from privframe.accountant import Accountant
            >>> acct = Accountant(pf.zCDP(1.0))
            >>> _ = acct.spend(pf.zCDP(0.1), label="q1")
            >>> [e.label for e in acct.entries]
            ['q1']
        """
        return self._ledger.entries

    # -- spending -----------------------------------------------------------------

    def check(self, cost: zCDP) -> None:
        """Raise if ``cost`` would not fit now; never spends (for plans and dry runs).

        A later :meth:`spend` checks again, atomically: another thread or
        process may spend in between.

        Raises:
            InvalidBudgetError: ``cost`` is not a zCDP.
            BudgetExceededError: ``cost`` would exceed what remains.

        Example:
            >>> import privframe as pf
            >>> from privframe.accountant import Accountant
            >>> acct = Accountant(pf.zCDP(1.0))
            >>> acct.check(pf.zCDP(1.0))
            >>> try:
            ...     acct.check(pf.zCDP(1.5))
            ... except pf.BudgetExceededError:
            ...     print("would not fit")
            would not fit
            >>> len(acct.entries)
            0
        """
        self._validate_cost(cost)
        rho, delta = self._ledger.totals()
        self._fits(cost, "", rho, delta)

    def spend(
        self,
        cost: zCDP,
        *,
        label: str = "",
        description: Mapping[str, Any] | str = "",
        seeded: bool = False,
    ) -> LedgerEntry:
        """Check that ``cost`` fits and record it, in one atomic step.

        A refused spend raises before anything is recorded. A recorded spend is
        committed (to disk, for a file ledger) before this returns. A zero
        cost always fits and is recorded, so the ledger lists every release.
        ``seeded=True`` flags the entry and emits
        :class:`~privframe.errors.SeededRandomnessWarning`.

        Args:
            cost: the release's cost as a zCDP budget.
            label: a short public name for the release.
            description: a str or JSON-serialisable mapping of public parameters
                (never private data).
            seeded: the release used a seeded, non-private random stream.

        Returns:
            The recorded ledger entry.

        Raises:
            InvalidBudgetError: ``cost`` is not a zCDP.
            InvalidValueError: ``description`` holds NaN or an infinity.
            InvalidArgumentError: ``label`` is not a str, ``seeded`` not a bool, or
                ``description`` not a str or a JSON-serialisable str-keyed mapping.
            BudgetExceededError: ``cost`` would exceed what remains; nothing recorded.
            LedgerError: the ledger file could not be written or is corrupted.

        Example:
            >>> import privframe as pf
            >>> from privframe.accountant import Accountant
            >>> acct = Accountant(pf.zCDP(1.0))
            >>> acct.spend(pf.zCDP(0.5), label="q1").rho
            0.5
            >>> try:
            ...     acct.spend(pf.zCDP(0.75), label="q2")
            ... except pf.BudgetExceededError as err:
            ...     print(str(err)[:60])
            spend 'q2' refused, nothing was recorded: it requests rho=0.
            >>> acct.spent.rho
            0.5
        """
        self._validate_cost(cost)

        def fits(rho: Fraction, delta: Fraction) -> None:
            self._fits(cost, label, rho, delta)

        entry = self._ledger.append(
            cost.rho,
            cost.delta,
            label=label,
            description=description,
            seeded=seeded,
            check=fits,
        )
        if seeded:
            warnings.warn(
                f"release {label!r} used a seeded random stream: its output is not "
                "differentially private (seeds are for tests and demos only); the "
                "ledger entry is flagged seeded=True",
                SeededRandomnessWarning,
                stacklevel=2,
            )
        return entry

    # -- reporting ----------------------------------------------------------------

    def report(self) -> BudgetReport:
        """The budget, what was spent and what remains, in ρ, (ε, δ) and μ.

        Example:
            >>> import privframe as pf
            >>> from privframe.accountant import Accountant
            >>> acct = Accountant(pf.zCDP(1.0), delta=1e-5)
            >>> _ = acct.spend(pf.zCDP(0.5), label="q1")
            >>> r = acct.report()
            >>> r.spent_rho, r.remaining_rho, r.delta, r.spent_mu
            (0.5, 0.5, 1e-05, 1.0)
            >>> r.spent_epsilon == pf.zCDP(0.5).epsilon(1e-5)
            True
        """
        entries = self._ledger.entries
        rho = sum((Fraction(e.rho) for e in entries), Fraction(0))
        delta = sum((Fraction(e.delta) for e in entries), Fraction(0))
        spent = zCDP(_round_up(rho), _round_up(delta))
        remaining = self._remaining(rho, delta)
        budget = self._budget
        return BudgetReport(
            delta=self._delta,
            budget_rho=budget.rho,
            spent_rho=spent.rho,
            remaining_rho=remaining.rho,
            budget_delta=budget.delta,
            spent_delta=spent.delta,
            remaining_delta=remaining.delta,
            budget_epsilon=self._epsilon(budget),
            spent_epsilon=self._epsilon(spent),
            remaining_epsilon=self._epsilon(remaining),
            budget_mu=budget.to_gdp().mu,
            spent_mu=spent.to_gdp().mu,
            remaining_mu=remaining.to_gdp().mu,
            spent_epsilon_gaussian=spent.to_gdp().epsilon(self._delta) if not delta else None,
            n_entries=len(entries),
            n_seeded=sum(e.seeded for e in entries),
        )

    # -- lifecycle ----------------------------------------------------------------

    def close(self) -> None:
        """Close the ledger (and its file); later use raises LedgerError.

        Example:
            >>> import privframe as pf
            >>> from privframe.accountant import Accountant
            >>> with Accountant(pf.zCDP(1.0)) as acct:
            ...     _ = acct.spend(pf.zCDP(0.1))
        """
        self._ledger.close()

    def __enter__(self) -> Accountant:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = "in memory" if self.path is None else repr(str(self.path))
        return f"Accountant(budget={self._budget!r}, ledger={where})"

    # -- internals ----------------------------------------------------------------

    def _epsilon(self, budget: zCDP) -> float:
        """ε of ``budget`` at δ = reporting δ + the budget's own δ₀ (see BudgetReport)."""
        total = _round_up(Fraction(self._delta) + Fraction(budget.delta))
        if total >= 1:
            return math.inf  # a statement with δ >= 1 says nothing
        return budget.epsilon(total)

    def _remaining(self, rho: Fraction, delta: Fraction) -> zCDP:
        return zCDP(
            _round_down(max(self._cap_rho - rho, Fraction(0))),
            _round_down(max(self._cap_delta - delta, Fraction(0))),
        )

    @staticmethod
    def _validate_cost(cost: object) -> None:
        if not isinstance(cost, zCDP):
            raise InvalidBudgetError(
                f"a spend's cost must be a zCDP, got {type(cost).__name__}; convert other "
                "budgets with privframe.accounting.to_zcdp"
            )

    def _fits(self, cost: zCDP, label: str, rho: Fraction, delta: Fraction) -> None:
        """Raise BudgetExceededError unless ``cost`` fits on top of the exact totals."""
        if cost.rho == 0 and cost.delta == 0:
            return
        new_rho = rho + Fraction(cost.rho)
        new_delta = delta + Fraction(cost.delta)
        if new_rho <= self._cap_rho and new_delta <= self._cap_delta:
            return
        spent = zCDP(_round_up(rho), _round_up(delta))
        left = self._remaining(rho, delta)
        what = f"spend {label!r}" if label else "spend"
        parts = [
            f"{what} refused, nothing was recorded: it requests rho={cost.rho!r}, "
            f"but rho={spent.rho!r} is spent and rho={left.rho!r} remains "
            f"of the budget rho={self._budget.rho!r}"
        ]
        if cost.delta > 0 or self._budget.delta > 0:
            parts.append(
                f"(delta: requests {cost.delta!r}, spent {spent.delta!r}, "
                f"remaining {left.delta!r} of {self._budget.delta!r})"
            )
        parts.append("Request at most the remaining budget, or start a new privacy budget.")
        raise BudgetExceededError(" ".join(parts[:-1]) + ". " + parts[-1])
