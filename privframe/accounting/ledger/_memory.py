"""The ledger in memory, the base of every ledger, and its lazy view of entries.

:class:`Ledger` keeps its entries in a list; a persistent ledger
(:class:`~privframe.accounting.ledger.SQLiteLedger`) subclasses it and
overrides the hooks it calls with its lock held. Both hand out their entries
as a :class:`LedgerEntries`, read as they are used.

Example:
    >>> from privframe.accounting.ledger._memory import Ledger
    >>> ledger = Ledger()
    >>> _ = ledger.append(0.25, label="q1")
    >>> ledger.entries[0].label, len(ledger)
    ('q1', 1)
"""

from __future__ import annotations

import contextlib
import json
import operator
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol, overload

from privframe.accounting._kinds import KINDS, Kind, Spendable, check_kind, columns, with_article
from privframe.accounting.budgets import zCDP
from privframe.accounting.ledger._entry import (
    LedgerEntry,
    LedgerSummary,
    canonical_description,
    check_label_and_seeded,
    exact_cost,
)
from privframe.accounting.ledger._format import now
from privframe.errors import InvalidArgumentError, LedgerError
from privframe.numeric import Number

__all__ = ["Charge", "Check", "Ledger", "LedgerEntries"]

Check = Callable[[Fraction, Fraction], None]
"""A budget check: called with the exact column totals already recorded; raises to refuse.

The columns are (ρ, δ) for a zCDP ledger and (ε, δ) for a PureDP or ApproxDP one.
"""


class Charge(Protocol):
    """One spend for :meth:`Ledger.append_all`, as :class:`privframe.accounting.Spend` holds it."""

    @property
    def cost(self) -> Spendable:
        """The spend, a budget of the ledger's kind."""

    @property
    def label(self) -> str:
        """A short public name for the release."""

    @property
    def description(self) -> Mapping[str, Any] | str:
        """Public parameters of the release, a str or a JSON-serialisable mapping."""

    @property
    def seeded(self) -> bool:
        """Whether the release used a seeded (non-private) random stream."""


_Draft = tuple[Fraction, Fraction, str, str, bool]
"""A validated spend not yet recorded: exact ρ and δ, label, description JSON, seeded."""


def _draft(rho: object, delta: object, label: object, description: object,
           seeded: object, kind: Kind) -> _Draft:  # fmt: skip
    """Validate one spend's fields as :meth:`Ledger.append` takes them."""
    exact_rho, exact_delta = exact_cost(rho, delta, kind)
    text, flag = check_label_and_seeded(label, seeded)
    return exact_rho, exact_delta, text, canonical_description(description), flag


_PAGE = 512
"""Entries read per query when a ledger's entries are iterated."""


class LedgerEntries(Sequence[LedgerEntry]):
    """A ledger's entries as a read-only sequence, read (and verified) as they are used.

    It holds the entries the ledger had when it was taken (its ``len`` is
    fixed; take a new one to see later entries) and keeps none in memory: an
    index reads that entry, a slice reads its range and returns a tuple, and
    iterating reads pages of entries in order. A file ledger's entries are
    checked against the hash chain as they are read (iterating from the first
    verifies the whole chain). It compares equal to a tuple or list of the
    same entries, so ``entries == ()`` tests for an empty ledger; ``tuple(...)``
    copies it. It stays readable after its ledger is closed.

    Example:
        >>> from privframe.accounting.ledger import Ledger
        >>> ledger = Ledger()
        >>> for i in range(3):
        ...     _ = ledger.append(0.1, label=f"q{i}")
        >>> entries = ledger.entries
        >>> len(entries), entries[-1].label, [e.label for e in entries[:2]]
        (3, 'q2', ['q0', 'q1'])
        >>> entries == tuple(entries), Ledger().entries == ()
        (True, True)
    """

    __slots__ = ("_cache", "_count", "_head", "_ledger")

    def __init__(self, ledger: Ledger, count: int, head: str) -> None:
        self._ledger = ledger
        self._count = count
        self._head = head
        self._cache: tuple[int, list[LedgerEntry]] = (0, [])

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> LedgerEntry: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[LedgerEntry, ...]: ...

    def __getitem__(self, index: int | slice) -> LedgerEntry | tuple[LedgerEntry, ...]:
        if isinstance(index, slice):
            wanted = range(self._count)[index]
            if not wanted:
                return ()
            lo, hi = min(wanted), max(wanted) + 1
            page = self._read(lo, hi)
            return tuple(page[i - lo] for i in wanted)
        i = operator.index(index)
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError(f"ledger entry index {index} out of range ({self._count} entries)")
        return self._read(i, i + 1)[0]

    def __iter__(self) -> Iterator[LedgerEntry]:
        for lo in range(0, self._count, _PAGE):
            yield from self._read(lo, min(lo + _PAGE, self._count))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LedgerEntries | tuple | list):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # unhashable: it equals lists

    def __repr__(self) -> str:
        return f"<{self._count} ledger entr{'y' if self._count == 1 else 'ies'}>"

    def _read(self, start: int, stop: int) -> list[LedgerEntry]:
        first, cached = self._cache
        if first <= start and stop <= first + len(cached):
            return cached[start - first : stop - first]
        page = self._ledger._read(start, stop, self._count, self._head)
        self._cache = (start, page)
        return page


# --------------------------------------------------------------------------- in memory


class Ledger:
    """An in-memory, append-only, thread-safe ledger.

    The running totals are the exact sums of the recorded costs.
    :meth:`append` runs an optional ``check`` and the write under one lock, so
    a check cannot be overtaken by a concurrent append.

    Args:
        kind: keyword only; the kind of budget it records costs of:
            ``privframe.zCDP`` (the default; costs in (ρ, δ)), ``PureDP``
            (costs in ε) or ``ApproxDP`` (costs in (ε, δ)).

    Example:
        >>> from privframe.accounting.ledger import Ledger
        >>> ledger = Ledger()
        >>> _ = ledger.append(0.1, 0.0, label="a")
        >>> _ = ledger.append(0.2, 0.0, label="b")
        >>> [e.label for e in ledger.entries], len(ledger)
        (['a', 'b'], 2)
        >>> ledger.totals()[0] == Fraction(3, 10)  # 0.1 + 0.2 exactly, not 0.30000000000000004
        True
        >>> import privframe as pf
        >>> Ledger(kind=pf.PureDP).append(0.5, label="c").cost
        PureDP(epsilon=0.5)
    """

    def __init__(self, *, kind: Kind = zCDP) -> None:
        self._kind: Kind = check_kind(kind)
        self._lock = threading.Lock()
        self._entries: list[LedgerEntry] = []
        self._summary = LedgerSummary()
        self._head = ""
        self._closed = False

    # -- public API -------------------------------------------------------------

    @property
    def kind(self) -> Kind:
        """The kind of budget this ledger records costs of: zCDP, PureDP or ApproxDP.

        Example:
            >>> from privframe.accounting.ledger import Ledger
            >>> Ledger().kind.__name__
            'zCDP'
        """
        return self._kind

    @property
    def path(self) -> Path | None:
        """The file backing this ledger, or None when it lives in memory.

        Example:
            >>> from privframe.accounting.ledger import Ledger
            >>> Ledger().path is None
            True
        """
        return None

    @property
    def entries(self) -> LedgerEntries:
        """Every entry so far, in order, as a lazy read-only :class:`LedgerEntries`.

        Taking it costs the same however long the ledger is; its entries are
        read (and, from a file, verified) when they are used.

        Example:
            >>> from privframe.accounting.ledger import Ledger
            >>> Ledger().entries
            <0 ledger entries>
        """
        with self._lock:
            self._ensure_open()
            self._refresh()
            return LedgerEntries(self, self._summary.count, self._head)

    def summary(self) -> LedgerSummary:
        """The count, exact totals and seeded count of every recorded entry.

        Example:
            >>> from privframe.accounting.ledger import Ledger
            >>> Ledger().summary().count
            0
        """
        with self._lock:
            self._ensure_open()
            self._refresh()
            return self._summary

    def totals(self) -> tuple[Fraction, Fraction]:
        """The exact sums of every recorded entry's columns: (ρ, δ), or (ε, δ) by :attr:`kind`.

        Example:
            >>> from privframe.accounting.ledger import Ledger
            >>> Ledger().totals()
            (Fraction(0, 1), Fraction(0, 1))
        """
        summary = self.summary()
        return summary.rho, summary.delta

    def float_excess(self) -> tuple[Fraction, Fraction]:
        """The sums (ρ, δ) of the entries' :attr:`LedgerEntry.float_excess`.

        Nonzero only for a file written by an older privframe (schema 1).

        Example:
            >>> from privframe.accounting.ledger import Ledger
            >>> Ledger().float_excess()
            (Fraction(0, 1), Fraction(0, 1))
        """
        return self.summary().float_excess

    def append(
        self,
        rho: Number,
        delta: Number = 0.0,
        *,
        label: str = "",
        description: Mapping[str, Any] | str = "",
        seeded: bool = False,
        check: Check | None = None,
    ) -> LedgerEntry:
        """Record one spend, atomically with ``check``.

        ``check`` is called with the exact (ρ, δ) totals already recorded,
        inside the same critical section (for a file: the same ``BEGIN
        IMMEDIATE`` transaction) as the write; if it raises, nothing is
        recorded and the exception propagates.

        Args:
            rho: ρ spent, >= 0 (ε for a PureDP or ApproxDP ledger), read
                exactly (a float as its decimal, a ``Fraction`` as itself).
            delta: δ spent, 0 <= δ < 1 (0 for a PureDP ledger), read the same way.
            label: a short public name for the release.
            description: a str or JSON-serialisable mapping of public parameters.
            seeded: whether the release used a seeded (non-private) stream.
            check: optional budget check, see above.

        Returns:
            The entry as recorded.

        Example:
            >>> from privframe.accounting.ledger import Ledger
            >>> ledger = Ledger()
            >>> def at_most_half(rho, delta):
            ...     if rho + Fraction(0.5) > Fraction(0.5):
            ...         raise RuntimeError("full")
            >>> ledger.append(0.5, check=at_most_half).index
            0
            >>> ledger.append(0.5, check=at_most_half)
            Traceback (most recent call last):
            RuntimeError: full
            >>> len(ledger)
            1
        """
        return self._append([_draft(rho, delta, label, description, seeded, self._kind)], check)[0]

    def append_all(
        self, charges: Sequence[Charge], *, check: Check | None = None
    ) -> list[LedgerEntry]:
        """Record several spends in one step: every one of them, or none.

        Each charge is validated as :meth:`append` validates its arguments
        before anything is written. ``check`` is called once, with the exact
        (ρ, δ) totals already recorded, inside the same critical section (for
        a file: the same ``BEGIN IMMEDIATE`` transaction) that then writes all
        the entries; if it raises, or a write fails, nothing is recorded.

        Args:
            charges: the spends, in order (e.g. :class:`privframe.accounting.accountant.Spend`
                values); an empty sequence records nothing.
            check: optional budget check, see above.

        Returns:
            The entries as recorded, in order (consecutive indexes).

        Example:
            >>> from privframe import zCDP
            >>> from privframe.accounting.accountant import Spend
            >>> from privframe.accounting.ledger import Ledger
            >>> ledger = Ledger()
            >>> entries = ledger.append_all([Spend(zCDP(0.25), "a"), Spend(zCDP(0.5), "b")])
            >>> [(e.index, e.label) for e in entries], ledger.totals()[0]
            ([(0, 'a'), (1, 'b')], Fraction(3, 4))
        """
        if isinstance(charges, str | bytes) or not isinstance(charges, Sequence):
            raise InvalidArgumentError(
                f"charges must be a sequence of spends, got {type(charges).__name__}"
            )
        drafts = []
        name = self._kind.__name__
        for i, charge in enumerate(charges):
            cost = getattr(charge, "cost", None)
            if type(cost) not in KINDS:
                raise InvalidArgumentError(
                    f"charge {i} must have {with_article(name)} cost (a privframe.accounting."
                    f"accountant.Spend), got {type(charge).__name__}"
                )
            if type(cost) is not self._kind:
                given = with_article(type(cost).__name__)
                raise InvalidArgumentError(
                    f"charge {i} costs {given}, but this ledger records {name} costs"
                )
            first, second = columns(cost)
            drafts.append(
                _draft(first, second, charge.label, charge.description, charge.seeded,
                       self._kind)
            )  # fmt: skip
        if not drafts:
            return []
        return self._append(drafts, check)

    def _append(self, drafts: list[_Draft], check: Check | None) -> list[LedgerEntry]:
        """Check and write validated drafts in one critical section."""
        with self._lock:
            self._ensure_open()
            with self._write_transaction():
                if check is not None:
                    check(self._summary.rho, self._summary.delta)
                start = self._summary.count
                kind = self._kind
                entries = [
                    LedgerEntry(
                        start + i, now(), label, rho, delta, json.loads(text), seeded, kind=kind
                    )
                    for i, (rho, delta, label, text, seeded) in enumerate(drafts)
                ]
                self._write(entries)
            # Only committed entries enter the summary.
            self._remember(entries)
            return entries

    def verify(self) -> None:
        """Re-check the whole record; a file ledger re-verifies its file and its hash chain.

        Raises:
            LedgerError: the record is damaged or was modified outside privframe.

        Example:
            >>> from privframe.accounting.ledger import Ledger
            >>> Ledger().verify()
        """
        with self._lock:
            self._ensure_open()
            self._verify_all()

    def close(self) -> None:
        """Release the ledger's resources; later use raises LedgerError.

        :class:`LedgerEntries` taken before stay readable.

        Example:
            >>> from privframe.accounting.ledger import Ledger
            >>> ledger = Ledger()
            >>> ledger.close()
        """
        with self._lock:
            self._closed = True

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self.summary().count

    def __repr__(self) -> str:
        return f"{type(self).__name__}(entries={self._summary.count})"

    # -- hooks for persistent subclasses (called with the lock held) -------------

    def _ensure_open(self) -> None:
        if self._closed:
            raise LedgerError("this ledger is closed; open a new one to keep spending")

    def _refresh(self) -> None:
        """Bring the summary up to date with the backing store (entries others appended)."""

    def _verify_all(self) -> None:
        """Re-verify everything the backing store holds."""

    @contextlib.contextmanager
    def _write_transaction(self) -> Iterator[None]:
        """Critical section of one append; a store refreshes its view at the start."""
        yield

    def _write(self, entries: list[LedgerEntry]) -> None:
        """Persist ``entries`` inside the current write transaction."""

    def _remember(self, entries: list[LedgerEntry]) -> None:
        """Take committed ``entries`` into the summary."""
        self._entries.extend(entries)
        self._summary += LedgerSummary.of(entries)

    def _read(self, start: int, stop: int, count: int, head: str) -> list[LedgerEntry]:
        """Entries ``start`` to ``stop`` of the first ``count`` (whose last hash is ``head``)."""
        with self._lock:
            return self._entries[start:stop]
