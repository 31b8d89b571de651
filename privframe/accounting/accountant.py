"""The accountant: one privacy budget, one ledger, and atomic spends against it.

An :class:`Accountant` accounts in the kind of budget it is given:

* a :class:`~privframe.accounting.zCDP` (or :class:`~privframe.accounting.GDP`,
  converted once by :func:`privframe.accounting.to_zcdp`) budget: releases
  cost zCDP (ρ, δ), and they add up (Bun & Steinke 2016, Lemma 2.3);
* a :class:`~privframe.accounting.PureDP` budget: releases cost ε, and they
  add up (basic composition, Dwork & Roth 2014, Thm. 3.16);
* an :class:`~privframe.accounting.ApproxDP` budget (E, D): releases cost
  (ε_i, δ_i), and the accountant charges their *tight* composition: a total
  T_n <= Σε_i folded from the entries by
  :class:`~privframe.accounting._composition.Composition`, a privacy filter
  that stays sound when each release is chosen after seeing the earlier ones
  (the privacy loss distribution of the releases is not: see that module).
  A spend fits when T_{n+1} <= E and Σδ_i <= D. :attr:`Accountant.basic_spent`
  is what adding the ε's and δ's would have charged.

:meth:`Accountant.spend` is check-and-record in one step: a spend that
would not fit raises :class:`~privframe.errors.BudgetExceededError` before
anything is recorded, and a spend that fits is on the ledger (committed to disk,
for a file ledger) before ``spend`` returns.

Spends are compared exactly: budgets and costs are exact rationals (a float
the user gives is read as the decimal it shows, :func:`privframe.accounting.exact`),
the ledger's running total is their exact sum, and a spend fits when
``total + cost <= budget`` holds exactly, in each parameter the spend adds
to (for ApproxDP, ``T_{n+1} <= E`` with T exact). So ten spends of 0.1 fit a
budget of 1.0 exactly, with nothing left, and spending
:attr:`Accountant.remaining` always fits.

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
    >>> pure = Accountant(pf.PureDP(1.0))
    >>> for i in range(10):
    ...     _ = pure.spend(pf.PureDP(0.1), label=f"tenth {i}")
    >>> pure.spent, pure.remaining
    (PureDP(epsilon=1.0), PureDP(epsilon=0.0))
"""

from __future__ import annotations

import dataclasses
import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from privframe import numeric
from privframe.accounting._composition import Composition, description_events, recorded_events
from privframe.accounting._kinds import KINDS, Kind, Spendable, columns, from_columns, with_article
from privframe.accounting._report import BudgetReport, figure, refusal
from privframe.accounting.budgets import GDP, ApproxDP, Budget, PureDP, to_zcdp, zCDP
from privframe.accounting.events import Event
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
    LedgerError,
    SeededRandomnessWarning,
)
from privframe.numeric import Number

__all__ = ["DEFAULT_REPORTING_DELTA", "Accountant", "BudgetReport", "Spend"]

DEFAULT_REPORTING_DELTA = 1e-6
"""δ at which (ε, δ) is reported when the budget does not name one."""


_ROUNDING = Fraction(1, 2**40)
"""The float error :meth:`Accountant.affordable` forgives, relative to the budget."""

_RETRIES = 1000
"""How often an ApproxDP spend retries after other spends changed the ledger under it."""


class _Stale(Exception):  # noqa: N818  # a signal inside this module, not an error
    """Raised inside a ledger's critical section: entries were added since the state was read."""


@dataclass(frozen=True)
class Spend:
    """One spend for :meth:`Accountant.spend_all`: a cost and what the ledger records with it.

    Args:
        cost: the release's cost, a budget of the accountant's kind:
            :class:`~privframe.accounting.zCDP`, :class:`~privframe.accounting.PureDP`
            or :class:`~privframe.accounting.ApproxDP` (the accountant checks the
            kind when it spends).
        label: a short public name for the release.
        description: a str or JSON-serialisable str-keyed mapping of public
            parameters (never private data); checked when it is spent.
        seeded: the release used a seeded, non-private random stream.

    Raises:
        InvalidBudgetError: ``cost`` is not a zCDP, PureDP or ApproxDP.
        InvalidArgumentError: ``label`` is not a str or ``seeded`` not a bool.

    Example:
        >>> import privframe as pf
        >>> from privframe.accounting.accountant import Spend
        >>> Spend(pf.zCDP(0.25), "q1", {"query": "count"}).cost.rho
        0.25
        >>> Spend(pf.ApproxDP(0.5, 1e-7), "q2").cost
        ApproxDP(epsilon=0.5, delta=1e-07)
    """

    cost: Spendable
    label: str = ""
    description: Mapping[str, Any] | str = ""
    seeded: bool = False

    def __post_init__(self) -> None:
        if type(self.cost) not in KINDS:
            raise InvalidBudgetError(
                f"a spend's cost must be a zCDP, PureDP or ApproxDP, got "
                f"{type(self.cost).__name__}; convert a GDP cost with privframe.accounting.to_zcdp"
            )
        if not isinstance(self.label, str):
            raise InvalidArgumentError(f"label must be a str, got {type(self.label).__name__}")
        if not isinstance(self.seeded, bool):
            raise InvalidArgumentError(f"seeded must be a bool, got {type(self.seeded).__name__}")


def _validate_cost(cost: object, kind: Kind) -> None:
    """Refuse a cost of another kind than the accountant's, saying what to pass."""
    if type(cost) is kind:
        return
    name = kind.__name__
    hint = {
        zCDP: "pass rho (a zCDP cost); convert other budgets with privframe.accounting.to_zcdp",
        PureDP: "pass epsilon (a PureDP cost, e.g. pf.PureDP(epsilon=...))",
        ApproxDP: "pass epsilon and delta (an ApproxDP cost, e.g. pf.ApproxDP(epsilon=..., "
        "delta=...))",
    }[kind]
    raise InvalidBudgetError(
        f"a spend's cost must be {with_article(name)}, got {type(cost).__name__}: this "
        f"accountant's budget is {name}: {hint}"
    )


class Accountant:
    """Owns one privacy budget and the ledger of what was spent from it.

    The budget's kind decides how it is spent (see the module docstring):
    zCDP (and GDP, converted once with :func:`privframe.accounting.to_zcdp`),
    PureDP or ApproxDP. :attr:`kind` tells which; every cost this accountant
    checks or spends must be a budget of that kind.

    Args:
        budget: any :data:`~privframe.accounting.Budget`. A
            :class:`~privframe.accounting.GDP` budget is converted to its zCDP
            allowance; an :class:`~privframe.accounting.ApproxDP` one is spent
            as (ε, δ) (to spend one as zCDP, give ``budget.to_zcdp()``).
        ledger: None for an in-memory ledger, or the path of a SQLite ledger
            file (created if absent; its directory must exist). A file
            remembers its creation budget and its kind: reopening it with a
            larger budget, or one of another kind, raises
            :class:`~privframe.errors.LedgerError`; reopening it with a
            smaller one is allowed, and this accountant then enforces the
            smaller budget against everything the file has recorded. Or a
            :class:`~privframe.accounting.ledger.Ledger` instance (say, a
            server's :class:`~privframe.accounting.ledger.DatabaseLedger`),
            used as it is: it must record costs of this budget's kind, this
            budget is checked against its totals, and the ledger may refuse
            more (a database ledger checks its own budget too); ``data`` then
            is not checked.
        delta: zCDP budgets only: the reporting δ, the slack of the ρ → (ε, δ)
            conversion, to which each row adds the δ spent outright (see
            :class:`BudgetReport`), read exactly. Default: for a budget
            converted from an (ε, δ) one (a zCDP whose ``converted_from`` is
            set, as :meth:`~privframe.accounting.ApproxDP.to_zcdp` returns), the
            part of that budget's δ not reserved for selection, so the budget
            row restates the user's (ε, δ) exactly; else
            :data:`DEFAULT_REPORTING_DELTA` (1e-6). A PureDP or ApproxDP
            budget states its own δ and takes none.
        data: with a ledger file, the :class:`~privframe.accounting.ledger.DataIdentity`
            of the data spent on: the file records it and refuses other data
            (:class:`~privframe.accounting.ledger.SQLiteLedger`). A
            :class:`~privframe.api.session.Session` passes its data's.
        same_data: accept ``data`` that differs from the file's record as the
            same data (say, with a column added); the file then records it.

    Raises:
        InvalidBudgetError: ``budget`` is not a Budget, or ``delta`` is not in (0, 1).
        InvalidArgumentError: ``delta`` is not a real number, or is given with a
            PureDP or ApproxDP budget.
        InvalidArgumentError: ``ledger`` is not None, a str or os.PathLike path, or a Ledger.
        LedgerError: the ledger file cannot be used (see
            :class:`~privframe.accounting.ledger.SQLiteLedger`), or a Ledger
            instance records another kind of cost.

    Example:
        >>> import privframe as pf
        >>> from privframe.accounting.accountant import Accountant
        >>> acct = Accountant(pf.zCDP(1.0))
        >>> entry = acct.spend(pf.zCDP(0.25), label="q1", description={"query": "count"})
        >>> entry.index, entry.rho, acct.remaining.rho
        (0, 0.25, 0.75)

        An (ε, δ) budget spent as zCDP, with part of δ kept for private
        partition selection:

        >>> acct = Accountant(pf.ApproxDP(1.0, 1e-6).to_zcdp(selection_delta=1e-7))
        >>> acct.budget.delta, acct.delta  # δ_s spent outright; the rest is the slack
        (1e-07, 9e-07)
        >>> r = acct.report()
        >>> r.budget_epsilon <= 1.0, r.delta + r.budget_delta  # the user's (ε, δ)
        (True, 1e-06)

        The same budget spent as (ε, δ), composed tightly:

        >>> from privframe.accounting.events import LaplaceEvent
        >>> acct = Accountant(pf.ApproxDP(10.0, 1e-5))
        >>> laplace = {"events": [LaplaceEvent(10.0).to_dict()]}  # ε = 0.1
        >>> for i in range(50):
        ...     _ = acct.spend(pf.ApproxDP(0.1, 1e-7), label=f"q{i}", description=laplace)
        >>> acct.basic_spent.epsilon, acct.spent.epsilon < 4.3
        (5.0, True)
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
        if not isinstance(budget, zCDP | PureDP | ApproxDP | GDP):
            raise InvalidBudgetError(
                f"budget must be a zCDP, PureDP, ApproxDP or GDP, got {type(budget).__name__}"
            )
        self._budget: Spendable
        if isinstance(budget, PureDP | ApproxDP):
            if delta is not None:
                kind = with_article(type(budget).__name__)
                raise InvalidArgumentError(
                    f"delta= is the reporting delta of a zCDP budget; {kind} budget states its "
                    "own guarantee: leave delta out"
                )
            self._budget = budget
            self._delta = columns(budget)[1]
        else:
            zcdp = to_zcdp(budget)
            self._budget = zcdp
            source = zcdp.converted_from
            if delta is not None:
                self._delta = numeric.exact("delta", delta, positive=True)
            elif source is not None:
                # The budget row then reads (ε_ρ(δ − δ_s), δ): the user's own statement.
                self._delta = source.exact_delta - zcdp.exact_delta
            else:
                self._delta = numeric.exact("delta", DEFAULT_REPORTING_DELTA)
            if self._delta >= 1:
                raise InvalidBudgetError(f"delta must be in (0, 1), got {delta!r}")
        self._kind: Kind = type(self._budget)
        self._cap = columns(self._budget)
        self._ledger: Ledger
        if ledger is None:
            self._ledger = Ledger(kind=self._kind)
        elif isinstance(ledger, str | os.PathLike):
            self._ledger = SQLiteLedger(ledger, self._budget, data=data, same_data=same_data)
        elif isinstance(ledger, Ledger):
            if ledger.kind is not self._kind:
                mine, theirs = self._kind.__name__, ledger.kind.__name__
                raise LedgerError(
                    f"the ledger records {theirs} costs and this budget is "
                    f"{with_article(mine)}: a ledger keeps one kind of budget. Pass "
                    f"{with_article(theirs)} budget for this ledger, or another ledger for "
                    f"{with_article(mine)} budget"
                )
            self._ledger = ledger
        else:
            raise InvalidArgumentError(
                f"ledger must be None, a file path (str or os.PathLike) or a Ledger, "
                f"got {type(ledger).__name__}"
            )
        # Known at open: newer privframe never writes float entries.
        self._slack = self._ledger.float_excess()
        # ApproxDP: the tight composition of the entries read so far (see _composition).
        self._composition = Composition()
        if self._kind is ApproxDP:
            self._refresh()

    # -- budget -------------------------------------------------------------------

    @property
    def kind(self) -> Kind:
        """The kind of budget this accountant spends: ``zCDP``, ``PureDP`` or ``ApproxDP``.

        A GDP budget is spent as zCDP. Every cost given to :meth:`check` and
        :meth:`spend` must be a budget of this type.

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
            >>> Accountant(pf.GDP(1.0)).kind is pf.zCDP, Accountant(pf.PureDP(1.0)).kind
            (True, <class 'privframe.accounting.budgets.PureDP'>)
        """
        return self._kind

    @property
    def budget(self) -> Spendable:
        """The budget this accountant enforces, of its :attr:`kind` (GDP: its zCDP allowance).

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
            >>> Accountant(pf.zCDP(1.0)).budget
            zCDP(rho=1.0, delta=0.0)
            >>> Accountant(pf.ApproxDP(1.0, 1e-6)).budget
            ApproxDP(epsilon=1.0, delta=1e-06)
        """
        return self._budget

    @property
    def delta(self) -> float:
        """The δ of the guarantees reported (nearest float of the exact value).

        zCDP: the reporting δ at which (ε, δ) is stated. PureDP: 0. ApproxDP:
        the budget's δ.

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
    def spent(self) -> Spendable:
        """Everything charged so far, a budget of :attr:`kind`.

        zCDP and PureDP: the exact sum of the entries. ApproxDP: the (ε, δ)
        charged, ε the tight composition T of the entries and δ the exact sum
        (:attr:`basic_spent` is the plain sum). For a file ledger this
        includes spends by other accountants and processes sharing the file.

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
            >>> acct = Accountant(pf.zCDP(1.0))
            >>> _ = acct.spend(pf.zCDP(0.1))
            >>> _ = acct.spend(pf.zCDP(0.2))
            >>> acct.spent
            zCDP(rho=0.3, delta=0.0)
        """
        first, second = self._charged()
        return from_columns(self._kind, first, second)

    @property
    def basic_spent(self) -> Spendable:
        """What basic composition charges: the exact sum of the entries, a budget of :attr:`kind`.

        For an ApproxDP accountant, ApproxDP(Σε_i, Σδ_i), which :attr:`spent`
        never exceeds; for the other kinds the same as :attr:`spent`.

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
            >>> acct = Accountant(pf.ApproxDP(2.0, 1e-6))
            >>> _ = acct.spend(pf.ApproxDP(0.5, 1e-7))
            >>> acct.basic_spent
            ApproxDP(epsilon=0.5, delta=1e-07)
        """
        first, second = self._ledger.totals()
        return from_columns(self._kind, first, second)

    @property
    def remaining(self) -> Spendable:
        """What is left: the budget minus :attr:`spent`, exactly (at least 0).

        Spending exactly ``remaining`` always fits. (For ApproxDP a larger
        spend may fit too: the charge grows by at most the ε spent.)

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
            >>> acct = Accountant(pf.zCDP(1.0))
            >>> _ = acct.spend(pf.zCDP(0.1))
            >>> acct.remaining
            zCDP(rho=0.9, delta=0.0)
        """
        return self._remaining(*self._charged())

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

    def affordable(self, amount: Number) -> Fraction:
        """The first parameter (ρ, or ε) a request of ``amount`` spends: it, or what remains.

        A request above what remains by no more than float rounding error
        (2^-40 of the budget: ``release(rho=sess.remaining.rho)``, or spends of
        ``budget / 3`` computed in floats) spends exactly what remains instead,
        and its noise is calibrated to that: a little more noise, never more
        privacy loss. A larger excess is returned as is, for the spend to
        refuse. The parameter is ρ for a zCDP accountant and ε for the others.

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
        name = "rho" if self._kind is zCDP else "epsilon"
        asked = numeric.exact(name, amount, positive=True)
        left = columns(self.remaining)[0]
        if left < asked <= left + self._cap[0] * _ROUNDING:
            return left
        return asked

    def check(self, cost: Spendable, *, description: Mapping[str, Any] | str = "") -> None:
        """Raise if ``cost`` would not fit now; never spends (for plans and dry runs).

        A later :meth:`spend` checks again, atomically: another thread or
        process may spend in between. For an ApproxDP accountant the check
        composes the cost with what was spent as :meth:`spend` would, with the
        mechanism events of ``description`` (``description["events"]``).

        Raises:
            InvalidBudgetError: ``cost`` is not a budget of :attr:`kind`.
            InvalidValueError: ``description`` holds malformed events.
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
        _validate_cost(cost, self._kind)
        if self._kind is ApproxDP:
            events = description_events(description)
            self._compose_fits(self._refresh(), [(cost, events)], "spend", "it requests", [cost])
            return
        first, second = self._ledger.totals()
        self._fits(cost, "spend", "it requests", first, second)

    def spent_after(
        self, cost: Spendable, *, description: Mapping[str, Any] | str = ""
    ) -> tuple[Spendable, Spendable]:
        """What :attr:`spent` and :attr:`basic_spent` would be after spending ``cost`` now.

        Spends and checks nothing (for ``explain``). An ApproxDP accountant
        composes ``cost`` with the mechanism events of ``description`` as
        :meth:`spend` would; for the other kinds both are the sum.

        Raises:
            InvalidBudgetError: ``cost`` is not a budget of :attr:`kind`.

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.accountant import Accountant
            >>> acct = Accountant(pf.ApproxDP(1.0, 1e-6))
            >>> acct.spent_after(pf.ApproxDP(0.5, 1e-7))
            (ApproxDP(epsilon=0.5, delta=1e-07), ApproxDP(epsilon=0.5, delta=1e-07))
        """
        _validate_cost(cost, self._kind)
        first, second = self._ledger.totals()
        added, more = columns(cost)
        basic = from_columns(self._kind, first + added, second + more)
        if self._kind is not ApproxDP:
            return basic, basic
        after = self._refresh().add(added, more, description_events(description))
        return from_columns(self._kind, after.epsilon, after.delta), basic

    def spend(
        self,
        cost: Spendable,
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

        For an ApproxDP accountant, ``description["events"]`` (a list of
        :mod:`privframe.accounting.events` dicts) says what mechanism the
        release ran; the charge composes it with the earlier entries (see the
        module docstring), and without events the release counts as a generic
        (ε, δ)-DP one.

        Args:
            cost: the release's cost, a budget of :attr:`kind`.
            label: a short public name for the release.
            description: a str or JSON-serialisable mapping of public parameters
                (never private data).
            seeded: the release used a seeded, non-private random stream.

        Returns:
            The recorded ledger entry.

        Raises:
            InvalidBudgetError: ``cost`` is not a budget of :attr:`kind`.
            InvalidValueError: ``description`` holds NaN or an infinity, or
                malformed events.
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
        _validate_cost(cost, self._kind)
        what = f"spend {label!r}" if label else "spend"
        first, second = columns(cost)

        def append(check: Callable[[Fraction, Fraction], None]) -> list[LedgerEntry]:
            entry = self._ledger.append(
                first, second, label=label, description=description, seeded=seeded, check=check
            )
            return [entry]

        if self._kind is ApproxDP:
            events = description_events(description)
            entry = self._spend_composed([(cost, events)], what, "it requests", [cost], append)[0]
        else:

            def fits(total: Fraction, delta: Fraction) -> None:
                self._fits(cost, what, "it requests", total, delta)

            entry = append(fits)[0]
        if seeded:
            _warn_seeded(label)
        return entry

    def spend_all(self, spends: Sequence[Spend]) -> list[LedgerEntry]:
        """Check that all ``spends`` fit together and record them, in one atomic step.

        Either every spend is recorded or none is: their total must fit what
        remains (exactly, as for :meth:`spend`; for ApproxDP, their composition
        in order), and they are written in one
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
            InvalidBudgetError: a cost is not a budget of :attr:`kind`.
            InvalidValueError: a description holds NaN or an infinity, or
                malformed events.
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
            _validate_cost(item.cost, self._kind)
        listed = ", ".join(f"{s.label!r} {_shown(s.cost)}" for s in spends)
        what = f"{len(spends)} spend{'s' if len(spends) != 1 else ''} ({listed})"

        def append(check: Callable[[Fraction, Fraction], None]) -> list[LedgerEntry]:
            return self._ledger.append_all(spends, check=check)

        if self._kind is ApproxDP:
            steps = [(s.cost, description_events(s.description)) for s in spends]
            costs = [s.cost for s in spends]
            entries = self._spend_composed(steps, what, "together they request", costs, append)
        else:
            first, second = Fraction(0), Fraction(0)
            for item in spends:
                a, b = columns(item.cost)
                first, second = first + a, second + b
            total = from_columns(self._kind, first, second)

            def fits(charged: Fraction, delta: Fraction) -> None:
                self._fits(total, what, "together they request", charged, delta)

            entries = append(fits)
        for item in spends:
            if item.seeded:
                _warn_seeded(item.label)
        return entries

    # -- reporting ----------------------------------------------------------------

    def report(self) -> BudgetReport:
        """The budget, what was spent and what remains: in ρ, (ε, δ) and μ, or in ε (and δ).

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
            >>> approx = Accountant(pf.ApproxDP(1.0, 1e-6))
            >>> _ = approx.spend(pf.ApproxDP(0.25, 1e-7))
            >>> a = approx.report()
            >>> a.spent, a.basic_epsilon, a.remaining
            (ApproxDP(epsilon=0.25, delta=1e-07), 0.25, ApproxDP(epsilon=0.75, delta=9e-07))
        """
        summary = self._ledger.summary()
        if self._kind is not zCDP:
            return self._epsilon_report(summary.count, summary.seeded)
        rho, delta = summary.rho, summary.delta
        spent = zCDP(rho, delta)
        remaining = self._remaining(rho, delta)
        budget = self._budget
        assert isinstance(budget, zCDP)  # a zCDP accountant's
        assert isinstance(remaining, zCDP)
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

    def _epsilon_report(self, count: int, seeded: int) -> BudgetReport:
        """The report of a PureDP or ApproxDP accountant: ε (and δ) of each row, exactly."""
        charged = self._charged()
        spent = from_columns(self._kind, *charged)
        remaining = self._remaining(*charged)
        basic = None
        if self._kind is ApproxDP:
            basic_spent = self.basic_spent
            assert isinstance(basic_spent, ApproxDP)  # an ApproxDP accountant's
            basic = basic_spent
        return BudgetReport(
            delta=float(self._delta),
            budget=self._budget,
            spent=spent,
            remaining=remaining,
            budget_epsilon=float(self._cap[0]),
            spent_epsilon=numeric.round_up(charged[0]),
            remaining_epsilon=float(columns(remaining)[0]),
            budget_mu=None,
            spent_mu=None,
            remaining_mu=None,
            spent_epsilon_gaussian=None,
            n_entries=count,
            n_seeded=seeded,
            basic=basic,
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

    def _charged(self) -> tuple[Fraction, Fraction]:
        """The two exact columns charged so far (ApproxDP: T and Σδ of the composition)."""
        if self._kind is ApproxDP:
            state = self._refresh()
            return state.epsilon, state.delta
        return self._ledger.totals()

    def _refresh(self) -> Composition:
        """The composition of every entry of the ledger (ApproxDP), reading only new ones.

        Entries are read outside the ledger's critical section; a spend then
        checks, inside it, that the totals are still those of this state.
        """
        state = self._composition
        entries = self._ledger.entries
        if len(entries) > state.count:
            for entry in entries[state.count :]:
                state = state.add(
                    entry.exact_rho, entry.exact_delta, recorded_events(entry.description)
                )
            self._remember(state)
        return state

    def _remember(self, state: Composition) -> None:
        # Plain assignment of an immutable state: threads read whole states, and the
        # one covering more entries wins (every state is exact for its own count).
        if state.count >= self._composition.count:
            self._composition = state

    def _compose_fits(
        self,
        state: Composition,
        steps: list[tuple[Spendable, list[Event] | None]],
        what: str,
        requests: str,
        costs: list[Spendable],
    ) -> Composition:
        """``state`` after ``steps``, or BudgetExceededError if it would not fit the budget."""
        after = state
        for cost, events in steps:
            first, second = columns(cost)
            after = after.add(first, second, events)
        if all(not any(columns(cost)) for cost in costs):
            return after  # a zero cost always fits, so the ledger lists every release
        cap_eps, cap_delta = self._cap
        if after.epsilon <= cap_eps and after.delta <= cap_delta:
            return after
        asked = [sum(column) for column in zip(*(columns(c) for c in costs), strict=True)]
        total = from_columns(self._kind, Fraction(asked[0]), Fraction(asked[1]))
        left = self._remaining(state.epsilon, state.delta)
        raise BudgetExceededError(
            refusal(
                total,
                what,
                requests,
                (state.epsilon, state.delta),
                self._budget,
                left,
                after=after.epsilon,
            )
        )

    def _spend_composed(
        self,
        steps: list[tuple[Spendable, list[Event] | None]],
        what: str,
        requests: str,
        costs: list[Spendable],
        append: Callable[[Callable[[Fraction, Fraction], None]], list[LedgerEntry]],
    ) -> list[LedgerEntry]:
        """Check-and-record for ApproxDP: the composition read outside, verified inside the lock.

        The state read before the ledger's critical section is used inside it
        only if the ledger's exact totals are still the state's: costs are
        >= 0, so equal totals mean that any entry added since cost nothing
        (and so changed no composition). Otherwise the state is read again
        and the spend retried.
        """
        for _ in range(_RETRIES):
            state = self._refresh()
            result: list[Composition] = []

            def fits(
                total: Fraction,
                delta: Fraction,
                state: Composition = state,
                result: list[Composition] = result,
            ) -> None:
                if (total, delta) != (state.basic_epsilon, state.delta):
                    raise _Stale
                result.append(self._compose_fits(state, steps, what, requests, costs))

            try:
                entries = append(fits)
            except _Stale:
                continue
            if entries:
                self._remember(dataclasses.replace(result[0], count=entries[-1].index + 1))
            return entries
        raise LedgerError(
            f"{what} was not recorded: other spends kept changing the ledger while it was "
            f"checked ({_RETRIES} times); nothing was recorded, try again"
        )

    def _epsilon(self, budget: zCDP) -> float:
        """ε of ``budget`` at δ = reporting δ + the budget's own δ₀ (see BudgetReport)."""
        total = self._delta + budget.exact_delta
        if total >= 1:
            return math.inf  # a statement with δ >= 1 says nothing
        return budget.epsilon(total)

    def _remaining(self, first: Fraction, second: Fraction) -> Spendable:
        cap_first, cap_second = self._cap
        return from_columns(
            self._kind, max(cap_first - first, Fraction(0)), max(cap_second - second, Fraction(0))
        )

    def _fits(
        self, cost: Spendable, what: str, requests: str, first: Fraction, second: Fraction
    ) -> None:
        """Raise BudgetExceededError unless ``cost`` fits on top of the exact totals (zCDP, PureDP).

        ``what`` names the refused spend(s) and ``requests`` introduces the cost
        in the message ("it requests").
        """
        ask_first, ask_second = columns(cost)
        if not ask_first and not ask_second:
            return  # a zero cost always fits, so the ledger lists every release
        cap_first, cap_second = self._cap
        slack_first, slack_second = self._slack
        # Every part must stay within the budget after the spend. A part the spend does
        # not add to may be over by the float error of a schema-1 file's entries only
        # (their binary floats exceed the decimals typed by a few ulps), so that such a
        # file's delta, spent in floats, does not block releases that spend rho alone.
        if (first + ask_first <= cap_first + (0 if ask_first else slack_first)) and (
            second + ask_second <= cap_second + (0 if ask_second else slack_second)
        ):
            return
        left = self._remaining(first, second)
        raise BudgetExceededError(
            refusal(cost, what, requests, (first, second), self._budget, left)
        )


def _shown(cost: Spendable) -> str:
    """A cost as a refusal lists it: ``rho=0.2``, ``epsilon=0.2`` or ``epsilon=0.2 delta=1e-07``."""
    if isinstance(cost, zCDP):
        return f"rho={figure(cost.exact_rho)}"
    if isinstance(cost, PureDP):
        return f"epsilon={figure(cost.exact_epsilon)}"
    return f"epsilon={figure(cost.exact_epsilon)} delta={figure(cost.exact_delta)}"


def _warn_seeded(label: str) -> None:
    """Warn that a recorded release used a seeded stream (stack level: the spend's caller)."""
    warnings.warn(
        f"release {label!r} used a seeded random stream: its output is not "
        "differentially private (seeds are for tests and demos only); the "
        "ledger entry is flagged seeded=True",
        SeededRandomnessWarning,
        stacklevel=3,
    )
