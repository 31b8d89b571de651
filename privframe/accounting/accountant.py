"""The accountant: one privacy budget, one ledger, and atomic spends against it.

An :class:`Accountant` converts the budget it is given into a zCDP allowance
once (:func:`privframe.accounting.to_zcdp`) and charges every release against
it. :meth:`Accountant.spend` is check-and-record in one step: a spend that
would not fit raises :class:`~privframe.errors.BudgetExceededError` before
anything is recorded, and a spend that fits is on the ledger (committed to disk,
for a file ledger) before ``spend`` returns.

Spends are compared exactly: budgets and costs are exact rationals (a float
the user gives is read as the decimal it shows, :func:`privframe.accounting.exact`),
the ledger's running total is their exact sum, and a spend fits when
``total + cost <= budget`` holds exactly, in ρ and in δ (in each of them the
spend adds to). So ``sum(entries) <= budget`` holds for everything this
accountant recorded; ten spends of 0.1 fit a budget of 1.0 exactly, with
nothing left, and spending :attr:`Accountant.remaining` always fits.

An :class:`Accountant` *charges*: it holds a budget and a ledger, and every
spend is recorded or refused. It is not an accountant in the sense of
``dp_accounting``'s: :class:`~privframe.accounting.rdp.RDPAccountant` and
:class:`~privframe.accounting.pld.PLDAccountant` *compose* mechanism events
into an (ε, δ) statement, charging nothing (see :mod:`privframe.accounting.replay`
for the ledger's guarantee stated through them).

Example:
    >>> import privframe as pf
    >>> from privframe.accounting.accountant import Accountant
    >>> acct = Accountant(pf.zCDP(1.0))
    >>> _ = acct.spend(pf.zCDP(0.25), label="q1", description={"query": "count"})
    >>> acct.spent, acct.remaining
    (zCDP(rho=0.25, delta=0.0), zCDP(rho=0.75, delta=0.0))
    >>> try:
    ...     acct.spend(pf.zCDP(0.8), label="q2")
    ... except pf.BudgetExceededError:
    ...     print("refused; entries:", len(acct.entries))
    refused; entries: 1
    >>> even = Accountant(pf.zCDP(0.3))
    >>> for i in range(3):
    ...     _ = even.spend(pf.zCDP(0.1), label=f"third {i}")
    >>> even.remaining
    zCDP(rho=0.0, delta=0.0)
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from privframe import numeric
from privframe.accounting._report import BudgetReport, figure, refusal
from privframe.accounting.budgets import GDP, ApproxDP, Budget, to_zcdp, zCDP
from privframe.accounting.ledger import (
    DataIdentity,
    Ledger,
    LedgerEntries,
    LedgerEntry,
    SQLiteLedger,
)
from privframe.errors import (
    BudgetExceededError,
    InvalidArgumentError,
    InvalidBudgetError,
    SeededRandomnessWarning,
)
from privframe.numeric import Number

__all__ = ["DEFAULT_REPORTING_DELTA", "Accountant", "BudgetReport", "Spend"]

DEFAULT_REPORTING_DELTA = 1e-6
"""δ at which (ε, δ) is reported when the budget does not name one."""


_ROUNDING = Fraction(1, 2**40)
"""The float error :meth:`Accountant.affordable` forgives, relative to the budget."""


@dataclass(frozen=True)
class Spend:
    """One spend for :meth:`Accountant.spend_all`: a cost and what the ledger records with it.

    Args:
        cost: the release's cost as a zCDP budget.
        label: a short public name for the release.
        description: a str or JSON-serialisable str-keyed mapping of public
            parameters (never private data); checked when it is spent.
        seeded: the release used a seeded, non-private random stream.

    Raises:
        InvalidBudgetError: ``cost`` is not a zCDP.
        InvalidArgumentError: ``label`` is not a str or ``seeded`` not a bool.

    Example:
        >>> import privframe as pf
        >>> from privframe.accounting.accountant import Spend
        >>> Spend(pf.zCDP(0.25), "q1", {"query": "count"}).cost.rho
        0.25
    """

    cost: zCDP
    label: str = ""
    description: Mapping[str, Any] | str = ""
    seeded: bool = False

    def __post_init__(self) -> None:
        _validate_cost(self.cost)
        if not isinstance(self.label, str):
            raise InvalidArgumentError(f"label must be a str, got {type(self.label).__name__}")
        if not isinstance(self.seeded, bool):
            raise InvalidArgumentError(f"seeded must be a bool, got {type(self.seeded).__name__}")


def _validate_cost(cost: object) -> None:
    if not isinstance(cost, zCDP):
        raise InvalidBudgetError(
            f"a spend's cost must be a zCDP, got {type(cost).__name__}; convert other "
            "budgets with privframe.accounting.to_zcdp"
        )


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
            smaller budget against everything the file has recorded. Or a
            :class:`~privframe.accounting.ledger.Ledger` instance (say, a
            server's :class:`~privframe.accounting.ledger.DatabaseLedger`),
            used as it is: this budget is checked against its totals, and
            the ledger may refuse more (a database ledger checks its own
            budget too); ``data`` then is not checked.
        delta: the reporting δ: the slack of the ρ → (ε, δ) conversion, to
            which each row adds the δ spent outright (see
            :class:`BudgetReport`), read exactly. Default: for a budget given as an
            :class:`~privframe.accounting.ApproxDP`, or converted from one
            (a zCDP whose ``converted_from`` is set, as
            :meth:`~privframe.accounting.ApproxDP.to_zcdp` returns), the part
            of that budget's δ not reserved for selection, so the budget row
            restates the user's (ε, δ) exactly; else
            :data:`DEFAULT_REPORTING_DELTA` (1e-6).
        data: with a ledger file, the :class:`~privframe.accounting.ledger.DataIdentity`
            of the data spent on: the file records it and refuses other data
            (:class:`~privframe.accounting.ledger.SQLiteLedger`). A
            :class:`~privframe.api.session.Session` passes its data's.
        same_data: accept ``data`` that differs from the file's record as the
            same data (say, with a column added); the file then records it.

    Raises:
        InvalidBudgetError: ``budget`` is not a Budget, or ``delta`` is not in (0, 1).
        InvalidArgumentError: ``delta`` is not a real number.
        InvalidArgumentError: ``ledger`` is not None, a str or os.PathLike path, or a Ledger.
        LedgerError: the ledger file cannot be used (see
            :class:`~privframe.accounting.ledger.SQLiteLedger`).

    Example:
        >>> import privframe as pf
        >>> from privframe.accounting.accountant import Accountant
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
        ledger: str | os.PathLike[str] | Ledger | None = None,
        *,
        delta: Number | None = None,
        data: DataIdentity | None = None,
        same_data: bool = False,
    ) -> None:
        if not isinstance(budget, zCDP | ApproxDP | GDP):
            raise InvalidBudgetError(
                f"budget must be a zCDP, ApproxDP or GDP, got {type(budget).__name__}"
            )
        self._budget = to_zcdp(budget)
        source = self._budget.converted_from
        if delta is not None:
            self._delta = numeric.exact("delta", delta, positive=True)
        elif source is not None:
            # The budget row then reads (ε_ρ(δ − δ_s), δ): the user's own statement.
            self._delta = source.exact_delta - self._budget.exact_delta
        else:
            self._delta = numeric.exact("delta", DEFAULT_REPORTING_DELTA)
        if self._delta >= 1:
            raise InvalidBudgetError(f"delta must be in (0, 1), got {delta!r}")
        self._ledger: Ledger
        if ledger is None:
            self._ledger = Ledger()
        elif isinstance(ledger, str | os.PathLike):
            self._ledger = SQLiteLedger(ledger, self._budget, data=data, same_data=same_data)
        elif isinstance(ledger, Ledger):
            self._ledger = ledger
        else:
            raise InvalidArgumentError(
                f"ledger must be None, a file path (str or os.PathLike) or a Ledger, "
                f"got {type(ledger).__name__}"
            )
        # Known at open: newer privframe never writes float entries.
        self._slack = self._ledger.float_excess()

    # -- budget -------------------------------------------------------------------

    @property
    def budget(self) -> zCDP:
        """The zCDP budget this accountant enforces.

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
            >>> Accountant(pf.zCDP(1.0)).budget
            zCDP(rho=1.0, delta=0.0)
        """
        return self._budget

    @property
    def delta(self) -> float:
        """The δ at which (ε, δ) is reported (nearest float of the exact value).

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
            >>> Accountant(pf.zCDP(1.0)).delta
            1e-06
        """
        return float(self._delta)

    @property
    def path(self) -> Path | None:
        """The ledger file, or None for an in-memory ledger.

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
            >>> Accountant(pf.zCDP(1.0)).path is None
            True
        """
        return self._ledger.path

    @property
    def spent(self) -> zCDP:
        """Everything recorded so far, as zCDP: the exact sum of the entries.

        For a file ledger this includes spends by other accountants and
        processes sharing the file.

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
            >>> acct = Accountant(pf.zCDP(1.0))
            >>> _ = acct.spend(pf.zCDP(0.1))
            >>> _ = acct.spend(pf.zCDP(0.2))
            >>> acct.spent
            zCDP(rho=0.3, delta=0.0)
        """
        return zCDP(*self._ledger.totals())

    @property
    def remaining(self) -> zCDP:
        """What is left: the budget minus the exact spent total (at least 0).

        Spending exactly ``remaining`` always fits.

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
            >>> acct = Accountant(pf.zCDP(1.0))
            >>> _ = acct.spend(pf.zCDP(0.1))
            >>> acct.remaining
            zCDP(rho=0.9, delta=0.0)
        """
        rho, delta = self._ledger.totals()
        return self._remaining(rho, delta)

    @property
    def entries(self) -> LedgerEntries:
        """Every ledger entry so far, in order, as a lazy read-only sequence.

        Taking it costs the same however long the ledger is: entries are read
        (and verified) from the file when they are used
        (:class:`~privframe.accounting.ledger.LedgerEntries`). It compares equal to a
        tuple of the same entries.

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
            >>> acct = Accountant(pf.zCDP(1.0))
            >>> _ = acct.spend(pf.zCDP(0.1), label="q1")
            >>> [e.label for e in acct.entries]
            ['q1']
        """
        return self._ledger.entries

    # -- spending -----------------------------------------------------------------

    def affordable(self, rho: Number) -> Fraction:
        """The ρ a request of ``rho`` spends: ``rho`` exactly, or what remains when it is over.

        A request above what remains by no more than float rounding error
        (2^-40 of the budget: ``release(rho=sess.remaining.rho)``, or spends of
        ``budget / 3`` computed in floats) spends exactly what remains instead,
        and its noise is calibrated to that: a little more noise, never more
        privacy loss. A larger excess is returned as is, for the spend to
        refuse.

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
            >>> acct = Accountant(pf.zCDP(0.2))
            >>> _ = acct.spend(pf.zCDP(0.2 / 3))
            >>> _ = acct.spend(pf.zCDP(0.2 / 3))
            >>> acct.affordable(0.2 / 3) == acct.remaining.exact_rho
            True
            >>> float(acct.affordable(0.1))
            0.1
        """
        asked = numeric.exact("rho", rho, positive=True)
        left = self.remaining.exact_rho
        if left < asked <= left + self._budget.exact_rho * _ROUNDING:
            return left
        return asked

    def check(self, cost: zCDP) -> None:
        """Raise if ``cost`` would not fit now; never spends (for plans and dry runs).

        A later :meth:`spend` checks again, atomically: another thread or
        process may spend in between.

        Raises:
            InvalidBudgetError: ``cost`` is not a zCDP.
            BudgetExceededError: ``cost`` would exceed what remains.

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
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
        _validate_cost(cost)
        rho, delta = self._ledger.totals()
        self._fits(cost, "spend", "it requests", rho, delta)

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
            >>> from privframe.accounting.accountant import Accountant
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
        _validate_cost(cost)

        def fits(rho: Fraction, delta: Fraction) -> None:
            what = f"spend {label!r}" if label else "spend"
            self._fits(cost, what, "it requests", rho, delta)

        entry = self._ledger.append(
            cost.exact_rho,
            cost.exact_delta,
            label=label,
            description=description,
            seeded=seeded,
            check=fits,
        )
        if seeded:
            _warn_seeded(label)
        return entry

    def spend_all(self, spends: Sequence[Spend]) -> list[LedgerEntry]:
        """Check that all ``spends`` fit together and record them, in one atomic step.

        Either every spend is recorded or none is: their total must fit what
        remains (exactly, as for :meth:`spend`), and they are written in one
        ledger transaction, so no other thread or process can spend in
        between, and a refusal or failure records nothing. Use it to reserve a
        whole batch's budget (a scripted report's queries) at once. Each
        spend is validated as :meth:`spend` validates its arguments, and a
        seeded one emits :class:`~privframe.errors.SeededRandomnessWarning`
        once recorded.

        Args:
            spends: the :class:`Spend` values, in order; an empty sequence
                records nothing.

        Returns:
            The recorded ledger entries, in order.

        Raises:
            InvalidArgumentError: ``spends`` is not a sequence of :class:`Spend`,
                or a description is not a str or JSON-serialisable mapping.
            InvalidValueError: a description holds NaN or an infinity.
            BudgetExceededError: the total would exceed what remains; nothing
                recorded. The message names the total and each spend.
            LedgerError: the ledger file could not be written or is corrupted.

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant, Spend
            >>> acct = Accountant(pf.zCDP(1.0))
            >>> [e.label for e in acct.spend_all([Spend(pf.zCDP(0.5), "a"),
            ...                                   Spend(pf.zCDP(0.25), "b")])]
            ['a', 'b']
            >>> try:
            ...     acct.spend_all([Spend(pf.zCDP(0.2), "c"), Spend(pf.zCDP(0.2), "d")])
            ... except pf.BudgetExceededError as err:
            ...     print(str(err)[:62])
            2 spends ('c' rho=0.2, 'd' rho=0.2) refused, nothing was recor
            >>> len(acct.entries), acct.remaining.rho
            (2, 0.25)
        """
        if isinstance(spends, str | bytes) or not isinstance(spends, Sequence):
            raise InvalidArgumentError(
                f"spends must be a sequence of Spend, got {type(spends).__name__}"
            )
        spends = list(spends)
        for i, item in enumerate(spends):
            if not isinstance(item, Spend):
                raise InvalidArgumentError(
                    f"spends[{i}] must be a privframe.accounting.Spend, got {type(item).__name__}"
                )
        total = sum((s.cost for s in spends), zCDP(0))
        listed = ", ".join(f"{s.label!r} rho={figure(s.cost.exact_rho)}" for s in spends)
        what = f"{len(spends)} spend{'s' if len(spends) != 1 else ''} ({listed})"

        def fits(rho: Fraction, delta: Fraction) -> None:
            self._fits(total, what, "together they request", rho, delta)

        entries = self._ledger.append_all(spends, check=fits)
        for item in spends:
            if item.seeded:
                _warn_seeded(item.label)
        return entries

    # -- reporting ----------------------------------------------------------------

    def report(self) -> BudgetReport:
        """The budget, what was spent and what remains, in ρ, (ε, δ) and μ.

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
            >>> acct = Accountant(pf.zCDP(1.0), delta=1e-5)
            >>> _ = acct.spend(pf.zCDP(0.5), label="q1")
            >>> r = acct.report()
            >>> r.spent_rho, r.remaining_rho, r.delta, r.spent_mu
            (0.5, 0.5, 1e-05, 1.0)
            >>> r.spent_epsilon == pf.zCDP(0.5).epsilon(1e-5)
            True
        """
        summary = self._ledger.summary()
        rho, delta = summary.rho, summary.delta
        spent = zCDP(rho, delta)
        remaining = self._remaining(rho, delta)
        budget = self._budget
        return BudgetReport(
            delta=float(self._delta),
            budget=budget,
            spent=spent,
            remaining=remaining,
            budget_epsilon=self._epsilon(budget),
            spent_epsilon=self._epsilon(spent),
            remaining_epsilon=self._epsilon(remaining),
            budget_mu=budget.to_gdp().mu,
            spent_mu=spent.to_gdp().mu,
            remaining_mu=remaining.to_gdp().mu,
            spent_epsilon_gaussian=spent.to_gdp().epsilon(self._delta) if not delta else None,
            n_entries=summary.count,
            n_seeded=summary.seeded,
        )

    # -- lifecycle ----------------------------------------------------------------

    def close(self) -> None:
        """Close the ledger (and its file); later use raises LedgerError.

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
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
        total = self._delta + budget.exact_delta
        if total >= 1:
            return math.inf  # a statement with δ >= 1 says nothing
        return budget.epsilon(total)

    def _remaining(self, rho: Fraction, delta: Fraction) -> zCDP:
        cap = self._budget
        return zCDP(
            max(cap.exact_rho - rho, Fraction(0)), max(cap.exact_delta - delta, Fraction(0))
        )

    def _fits(self, cost: zCDP, what: str, requests: str, rho: Fraction, delta: Fraction) -> None:
        """Raise BudgetExceededError unless ``cost`` fits on top of the exact totals.

        ``what`` names the refused spend(s) and ``requests`` introduces the cost
        in the message ("it requests").
        """
        if not cost.exact_rho and not cost.exact_delta:
            return  # a zero cost always fits, so the ledger lists every release
        cap = self._budget
        slack_rho, slack_delta = self._slack
        # Every part must stay within the budget after the spend. A part the spend does
        # not add to may be over by the float error of a schema-1 file's entries only
        # (their binary floats exceed the decimals typed by a few ulps), so that such a
        # file's delta, spent in floats, does not block releases that spend rho alone.
        if (rho + cost.exact_rho <= cap.exact_rho + (0 if cost.exact_rho else slack_rho)) and (
            delta + cost.exact_delta <= cap.exact_delta + (0 if cost.exact_delta else slack_delta)
        ):
            return
        left = self._remaining(rho, delta)
        raise BudgetExceededError(refusal(cost, what, requests, (rho, delta), cap, left))


def _warn_seeded(label: str) -> None:
    """Warn that a recorded release used a seeded stream (stack level: the spend's caller)."""
    warnings.warn(
        f"release {label!r} used a seeded random stream: its output is not "
        "differentially private (seeds are for tests and demos only); the "
        "ledger entry is flagged seeded=True",
        SeededRandomnessWarning,
        stacklevel=3,
    )
