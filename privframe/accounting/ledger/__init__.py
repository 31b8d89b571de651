"""The append-only record of every privacy spend, in memory or in a SQLite file.

A ledger holds :class:`LedgerEntry` values: immutable, serialisable records of
one spend each (its ρ and δ, a label, a description, whether the release used
seeded randomness). Entries are only ever appended; their meaning never changes
once written. Costs are exact rationals (:mod:`privframe.accounting`), stored
exactly, and the running total is their exact sum.

A ledger keeps one kind of budget (:attr:`Ledger.kind`): zCDP, whose costs are
(ρ, δ), PureDP, whose costs are (ε, 0), or ApproxDP, whose costs are (ε, δ),
in the same two exact columns. A file records its kind (``model`` in its meta
table, covered by the hash chain's root; absent for zCDP, so older files are
unchanged) and refuses to be opened with a budget of another kind.

A ledger does not decide what may be spent: :meth:`Ledger.append` takes a
``check`` callback that sees the exact totals *inside* the same critical
section as the write, and may refuse by raising. The
:class:`~privframe.accounting.accountant.Accountant` uses it to make check-and-record one
atomic step.

:class:`SQLiteLedger` persists the record (stdlib :mod:`sqlite3`, rollback
journal, ``synchronous=FULL``):

* every append is one ``BEGIN IMMEDIATE`` transaction that reads the entries it
  has not seen yet, runs the check and inserts the new row, so appends from any
  number of threads, connections and processes are serialised and none can
  exceed a budget another one has already used;
* the transaction commits (with ``synchronous=FULL``) before ``append`` returns,
  so a crash right after a spend loses nothing; with a rollback journal
  (``journal_mode=DELETE``, not WAL) a committed spend is in the main file
  itself, so a copy of that one file holds every committed entry;
* a new file is built under a temporary name and published with
  :func:`os.link`, which fails if the path exists: a ledger path is never
  visible uninitialised, and an existing file (even an empty one) is never
  initialised, only opened as a ledger or refused;
* the file remembers the budget it was created with, and refuses to be reopened
  with a larger one;
* the file remembers the data it is spent on (:class:`DataIdentity`: the
  privacy unit and the column names and types, never values), and refuses to
  be reopened for other data unless the caller says it is the same data;
* costs and the budget are stored exactly, as ``"numerator/denominator"``
  text (schema 2). A file of schema 1 (REAL costs, the budget as a float's
  repr) is read as it is: its entries at their exact binary value, which is
  what that privframe charged, and its budget as the larger of the decimal it
  shows and that float (what the user typed, or what the old file enforced).
  Its first new entry marks it schema 2;
* the file is recognised by ``PRAGMA application_id`` and ``user_version``,
  and its entries form a SHA-256 hash chain whose head (the count and last
  hash) is recorded with every append. A ledger is verified in full (``PRAGMA
  quick_check`` and the chain from its first entry) the first time a user
  opens it; privframe then records, per user, its count, last hash and exact
  totals (:func:`state_file`), so that later opens check that the last entry
  verified is unchanged and verify only the entries added since: opening,
  counting, totalling and charging cost the same however long the ledger is.
  Entries are read lazily (:class:`LedgerEntries`) and verified as they are
  read; :meth:`Ledger.verify` re-checks everything. A foreign, damaged, edited
  or rolled-back file raises :class:`~privframe.errors.LedgerError`; it is
  never silently reset. A lock held by another process past the timeout is
  reported as busy, not as damage. What the chain can and cannot prove is in
  ``docs/operations.md``.

:class:`DatabaseLedgers` keeps the many ledgers of a server (one per analyst
and dataset) in one SQLite file or PostgreSQL database (:class:`Database`),
each with a budget stored in the database and grouped in pools (datasets)
that may have a cap across their ledgers; a :class:`DatabaseLedger` is one of
them. Each append is one transaction that locks its pool, checks the budget
and the cap in the database and commits before it returns (see
:mod:`privframe.accounting.ledger._database`).

Example:
    >>> from fractions import Fraction
    >>> from privframe.accounting.ledger import Ledger
    >>> ledger = Ledger()
    >>> entry = ledger.append(0.25, 0.0, label="q1", description={"query": "count"})
    >>> entry.index, entry.label, entry.rho
    (0, 'q1', 0.25)
    >>> _ = ledger.append(0.1, label="q2")
    >>> ledger.totals() == (Fraction(7, 20), Fraction(0))
    True
"""

from privframe.accounting.ledger._database import (
    LEDGERS_SCHEMA_VERSION,
    DatabaseLedger,
    DatabaseLedgers,
)
from privframe.accounting.ledger._entry import LedgerEntry, LedgerSummary
from privframe.accounting.ledger._format import APPLICATION_ID, SCHEMA_VERSION
from privframe.accounting.ledger._identity import DataIdentity
from privframe.accounting.ledger._memory import Charge, Check, Ledger, LedgerEntries
from privframe.accounting.ledger._sql import Database, Transaction, is_postgres_url
from privframe.accounting.ledger._sqlite import DEFAULT_TIMEOUT, SQLiteLedger, accept_restored
from privframe.accounting.ledger._state import (
    STATE_DIR_ENV,
    LedgerMissingWarning,
    LedgerStateWarning,
    state_file,
)

__all__ = [
    "APPLICATION_ID",
    "DEFAULT_TIMEOUT",
    "LEDGERS_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "STATE_DIR_ENV",
    "Charge",
    "Check",
    "DataIdentity",
    "Database",
    "DatabaseLedger",
    "DatabaseLedgers",
    "Ledger",
    "LedgerEntries",
    "LedgerEntry",
    "LedgerMissingWarning",
    "LedgerStateWarning",
    "LedgerSummary",
    "SQLiteLedger",
    "Transaction",
    "accept_restored",
    "is_postgres_url",
    "state_file",
]
