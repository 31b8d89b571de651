"""The server's database: analysts and their tokens, their grants and budgets, and the audit log.

One :class:`Store` over one database (a SQLite file, or a ``postgresql://``
URL with the ``[postgres]`` extra) holds everything the server keeps:

* **analysts** and their **tokens**. A token (``pf_<id>_<secret>``) is shown
  once, when it is made; the database keeps its public id, to find its row,
  and an HMAC-SHA256 of its 256-bit random secret under a random per-token
  salt, compared in constant time. A rotated or revoked token stops working.
* **grants**: an analyst's budget on a dataset, with the ledger of what it
  spent there (a :class:`~privframe.accounting.ledger.DatabaseLedger`, id
  ``"<analyst>/<dataset>"``, in the dataset's pool). A budget is a zCDP, a
  pure-DP (:class:`~privframe.PureDP`) or an (ε, δ) one
  (:class:`~privframe.ApproxDP`), and a grant keeps the kind it was made
  with: its releases spend ρ, or ε (and δ). The dataset's optional cap
  bounds what all analysts together spend on it (a capped dataset's grants
  are of one kind, which its cap bounds). Budgets are exact and the database
  is authoritative: a top-up or a lowered budget applies to the next spend,
  even of a server already running.
* the **audit log**: one record per request or refusal (time, analyst,
  action, dataset, status, and a public detail the caller gives, never a
  data value).

Example:
    >>> import os, tempfile
    >>> import privframe as pf
    >>> from privframe import zCDP
    >>> from privframe.api.server.store import Store
    >>> with tempfile.TemporaryDirectory() as d:
    ...     store = Store(os.path.join(d, "server.db"))
    ...     token = store.add_analyst("alice")
    ...     store.grant("alice", "sales", zCDP(1.0))
    ...     print(store.authenticate(token), store.granted("alice"), store.budget("alice", "sales"))
    ...     store.grant("alice", "visits", pf.PureDP(2.0))
    ...     print(store.budget("alice", "visits"))
    ...     store.close()
    alice ['sales'] zCDP(rho=1.0, delta=0.0)
    PureDP(epsilon=2.0)
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from privframe.accounting._kinds import KINDS, Kind, Spendable
from privframe.accounting.accountant import Accountant
from privframe.accounting.budgets import ApproxDP
from privframe.accounting.ledger import DatabaseLedger, DatabaseLedgers, Transaction
from privframe.api.server.config import NAME
from privframe.errors import InvalidArgumentError, InvalidValueError

__all__ = ["STORE_SCHEMA_VERSION", "AuditRecord", "Store"]

STORE_SCHEMA_VERSION = 1
"""The version of the store's tables (``pf_schema`` row ``store``) this module writes."""

_TOKEN = re.compile(r"pf_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
"""A token: a public id (64 random bits) and a secret (256 random bits, URL-safe base64)."""

_DUMMY_SALT = bytes(32)
_DUMMY_DIGEST = "0" * 64
"""What an unknown token id is checked against, so that it takes the same work as a known one."""

_AUDIT_TEXT = {"analyst": 200, "action": 100, "dataset": 200, "detail": 2000}
"""The most characters of each audit field kept (longer text is cut)."""


def _tables(id_column: str) -> tuple[str, ...]:
    return (
        "CREATE TABLE pf_analysts (name TEXT PRIMARY KEY, created TEXT NOT NULL)",
        """CREATE TABLE pf_tokens (
            id      TEXT PRIMARY KEY,
            analyst TEXT NOT NULL REFERENCES pf_analysts(name),
            salt    TEXT NOT NULL,
            digest  TEXT NOT NULL,
            created TEXT NOT NULL,
            revoked TEXT
        )""",
        "CREATE INDEX pf_tokens_analyst ON pf_tokens(analyst)",
        f"""CREATE TABLE pf_audit (
            seq     {id_column},
            time    TEXT NOT NULL,
            analyst TEXT,
            action  TEXT NOT NULL,
            dataset TEXT,
            status  INTEGER NOT NULL,
            detail  TEXT NOT NULL
        )""",
    )


def _digest(salt: bytes, secret: str) -> str:
    return hmac.new(salt, secret.encode(), hashlib.sha256).hexdigest()


def _checked_name(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{what} must be a str, got {type(value).__name__}")
    if not NAME.fullmatch(value):
        raise InvalidValueError(
            f"{what} {value[:40]!r} is not a valid name (letters, digits, '_', '.', '-'; at "
            "most 64 characters, starting with a letter or digit)"
        )
    return value


def _budget(value: object, what: str) -> Spendable:
    if type(value) not in KINDS:
        raise InvalidArgumentError(
            f"{what} must be a zCDP, PureDP or ApproxDP budget (privframe.zCDP, privframe.PureDP, "
            f"privframe.ApproxDP), got {type(value).__name__}"
        )
    return value  # type: ignore[return-value]  # one of KINDS, checked above


def _text(value: str, limit: int) -> str:
    """``value`` as the audit log keeps it: valid UTF-8, no NUL, at most ``limit`` characters."""
    return value[:limit].encode("utf-8", "replace").decode().replace("\x00", "\ufffd")


@dataclass(frozen=True)
class AuditRecord:
    """One record of the audit log: who did what, on which dataset, and how it ended.

    Attributes:
        time: when it was recorded, UTC ISO 8601.
        analyst: the analyst (for an admin action, its target), or None when
            the request had no valid token.
        action: what was asked (the server's endpoint, or ``admin:<command>``).
        dataset: the dataset, or None.
        status: the outcome as an HTTP status (200 for success).
        detail: public text the caller gave: ρ, label, the refusal's error type.

    Example:
        >>> from privframe.api.server.store import AuditRecord
        >>> AuditRecord("2024-01-01T00:00:00+00:00", "alice", "release", "sales", 200, "").status
        200
    """

    time: str
    analyst: str | None
    action: str
    dataset: str | None
    status: int
    detail: str


class Store:
    """The server's analysts, tokens, grants, budgets and audit log, in one database.

    Its tables (and the ledgers') are created on first use, versioned, by
    whichever opener comes first (concurrent first opens are safe). Methods
    that name an analyst or a dataset check the name
    (:data:`privframe.api.server.config.NAME`); lookups (:meth:`budget`,
    :meth:`authenticate`) answer None for a name or token that cannot exist.
    It is safe to share between threads.

    Args:
        database: a SQLite file path (created if absent) or a
            ``postgresql://`` URL, as ``ServerConfig.database`` gives it.

    Raises:
        LedgerError: the database cannot be opened, or holds tables of an
            unknown schema version. Every later database failure is a
            LedgerError too.

    Example:
        >>> import os, tempfile
        >>> from privframe import zCDP
        >>> from privframe.api.server.store import Store
        >>> with tempfile.TemporaryDirectory() as d:
        ...     with Store(os.path.join(d, "server.db")) as store:
        ...         old = store.add_analyst("bob")
        ...         new = store.new_token("bob")
        ...         print(store.authenticate(old), store.authenticate(new))
        ...         store.revoke("bob")
        ...         print(store.authenticate(new), store.analysts())
        None bob
        None ['bob']
    """

    def __init__(self, database: str | os.PathLike[str]) -> None:
        self.ledgers = DatabaseLedgers(database)
        self._db = self.ledgers.database
        try:
            self._db.ensure_schema("store", STORE_SCHEMA_VERSION, _tables(self._db.id_column))
        except BaseException:
            self.ledgers.close()
            raise

    def __repr__(self) -> str:
        return f"Store({self._db!r})"

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the database (a no-op when closed)."""
        self.ledgers.close()

    # -- analysts and tokens --------------------------------------------------------------

    def add_analyst(self, name: str) -> str:
        """Add analyst ``name`` with a new token; the token, in clear this once only.

        Raises:
            InvalidValueError: ``name`` is not a valid name, or the analyst exists.
        """
        _checked_name(name, "analyst")
        with self._db.transaction(f"adding analyst {name!r}", write=True) as tx:
            if tx.one("SELECT 1 FROM pf_analysts WHERE name = ?", (name,)) is not None:
                raise InvalidValueError(
                    f"analyst {name!r} exists already; make a new token with new_token "
                    "(privframe admin CONFIG token NAME)"
                )
            tx.run("INSERT INTO pf_analysts(name, created) VALUES (?, ?)", (name, _now()))
            return self._insert_token(tx, name)

    def new_token(self, name: str) -> str:
        """A new token for analyst ``name``; its older tokens stop working.

        Raises:
            InvalidValueError: no analyst ``name``.
        """
        with self._db.transaction(f"making a token for {name!r}", write=True) as tx:
            self._revoke(tx, name)
            return self._insert_token(tx, name)

    def revoke(self, name: str) -> None:
        """Revoke every token of analyst ``name`` (:meth:`new_token` gives it a new one).

        Raises:
            InvalidValueError: no analyst ``name``.
        """
        with self._db.transaction(f"revoking the tokens of {name!r}", write=True) as tx:
            self._revoke(tx, name)

    def _revoke(self, tx: Transaction, name: str) -> None:
        """Mark every live token of the existing analyst ``name`` revoked, now."""
        self._existing(tx, name)
        tx.run(
            "UPDATE pf_tokens SET revoked = ? WHERE analyst = ? AND revoked IS NULL",
            (_now(), name),
        )

    def analysts(self) -> list[str]:
        """Every analyst's name, sorted."""
        with self._db.transaction("listing the analysts", write=False) as tx:
            return [row[0] for row in tx.run("SELECT name FROM pf_analysts ORDER BY name")]

    def authenticate(self, token: str) -> str | None:
        """The analyst whose valid token ``token`` is, else None (unknown, malformed or revoked).

        The secret is compared as an HMAC-SHA256 under the token's own random
        salt, with :func:`hmac.compare_digest`. A slow password hash (bcrypt,
        scrypt, Argon2) protects guessable passwords against offline
        guessing; a token's secret is 256 random bits, which no guessing can
        find, so one keyed hash suffices and keeps authentication fast. A
        token whose id is unknown is checked against a dummy digest, so the
        work done does not reveal which ids exist.

        Example:
            >>> import os, tempfile
            >>> from privframe.api.server.store import Store
            >>> with tempfile.TemporaryDirectory() as d:
            ...     with Store(os.path.join(d, "server.db")) as store:
            ...         token = store.add_analyst("alice")
            ...         print(store.authenticate(token), store.authenticate("pf_x_y"))
            alice None
        """
        match = _TOKEN.fullmatch(token) if isinstance(token, str) else None
        if match is None:
            return None
        token_id, secret = match.groups()
        with self._db.transaction("checking a token", write=False) as tx:
            row = tx.one(
                "SELECT analyst, salt, digest, revoked FROM pf_tokens WHERE id = ?", (token_id,)
            )
        analyst, salt, digest, revoked = row or (None, _DUMMY_SALT.hex(), _DUMMY_DIGEST, None)
        valid = hmac.compare_digest(_digest(bytes.fromhex(salt), secret), digest)
        return analyst if valid and row is not None and revoked is None else None

    def _existing(self, tx: Transaction, name: str) -> None:
        _checked_name(name, "analyst")
        if tx.one("SELECT 1 FROM pf_analysts WHERE name = ?", (name,)) is None:
            raise InvalidValueError(
                f"there is no analyst {name!r}; add it first (privframe admin CONFIG "
                "add-analyst NAME)"
            )

    @staticmethod
    def _insert_token(tx: Transaction, name: str) -> str:
        # The OS CSPRNG, privframe's one source of randomness (no other module may draw).
        token_id = os.urandom(8).hex()
        secret = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode("ascii")
        salt = os.urandom(32)
        tx.run(
            "INSERT INTO pf_tokens(id, analyst, salt, digest, created, revoked) "
            "VALUES (?, ?, ?, ?, ?, NULL)",
            (token_id, name, salt.hex(), _digest(salt, secret), _now()),
        )
        return f"pf_{token_id}_{secret}"

    # -- grants and budgets ---------------------------------------------------------------

    def grant(self, analyst: str, dataset: str, budget: Spendable) -> None:
        """Grant ``dataset`` to ``analyst`` with ``budget`` (its ledger starts empty).

        ``budget`` is a zCDP, PureDP or ApproxDP budget; the grant keeps its kind.

        Raises:
            InvalidValueError: an invalid name, no such analyst, the dataset
                is granted already (change its budget with :meth:`top_up` or
                :meth:`set_budget`), or the dataset's cap does not bound a
                grant of this kind.
        """
        _budget(budget, "budget")
        with self._db.transaction("checking the analyst", write=False) as tx:
            self._existing(tx, analyst)
        ledger = _ledger_id(analyst, _checked_name(dataset, "dataset"))
        if self.ledgers.budget(ledger) is not None:
            raise InvalidValueError(
                f"analyst {analyst!r} has a grant on {dataset!r} already; change its budget "
                "with top-up or set-budget"
            )
        self.ledgers.create(ledger, dataset, budget)

    def top_up(self, analyst: str, dataset: str, extra: Spendable) -> Spendable:
        """Add ``extra`` to ``analyst``'s budget on ``dataset``; the new budget.

        Raises:
            InvalidValueError: the dataset is not granted to the analyst.
            InvalidBudgetError: ``extra`` is of another kind than the grant
                (a grant keeps the kind it was made with).

        Example:
            >>> import os, tempfile
            >>> from privframe import zCDP
            >>> from privframe.api.server.store import Store
            >>> with tempfile.TemporaryDirectory() as d:
            ...     with Store(os.path.join(d, "server.db")) as store:
            ...         _ = store.add_analyst("alice")
            ...         store.grant("alice", "sales", zCDP(0.5))
            ...         print(store.top_up("alice", "sales", zCDP(0.25)))
            zCDP(rho=0.75, delta=0.0)
        """
        _budget(extra, "extra")
        return self.ledgers.top_up(self._granted_ledger(analyst, dataset), extra)

    def set_budget(self, analyst: str, dataset: str, budget: Spendable) -> None:
        """Set ``analyst``'s budget on ``dataset`` (below what it spent: nothing more fits).

        Raises:
            InvalidValueError: the dataset is not granted to the analyst.
            InvalidBudgetError: ``budget`` is of another kind than the grant.
        """
        _budget(budget, "budget")
        self.ledgers.set_budget(self._granted_ledger(analyst, dataset), budget)

    def budget(self, analyst: str, dataset: str) -> Spendable | None:
        """``analyst``'s budget on ``dataset`` (of the grant's kind), or None when not granted."""
        if not all(isinstance(n, str) and NAME.fullmatch(n) for n in (analyst, dataset)):
            return None
        return self.ledgers.budget(_ledger_id(analyst, dataset))

    def spent(self, analyst: str, dataset: str) -> Spendable:
        """What ``analyst``'s releases on ``dataset`` were charged, exactly: what its session shows.

        The sum of its releases' costs; for an (ε, δ) grant the tight
        composition its accountant charges (never more than their sum, which
        :meth:`pool_spent` adds up against the cap).

        Raises:
            InvalidValueError: the dataset is not granted to the analyst.
        """
        ledger_id = self._granted_ledger(analyst, dataset)
        total = self.ledgers.spent(ledger_id)
        if not isinstance(total, ApproxDP):
            return total
        ledger = self.ledgers.open(ledger_id)
        try:
            return Accountant(ledger.budget, ledger=ledger).spent
        finally:
            ledger.close()

    def granted(self, analyst: str) -> list[str]:
        """The datasets granted to ``analyst``, sorted (none for an unknown analyst)."""
        _checked_name(analyst, "analyst")
        return sorted(self.ledgers.ledgers(prefix=f"{analyst}/").values())

    def ledger(self, analyst: str, dataset: str) -> DatabaseLedger:
        """The ledger of ``analyst``'s grant on ``dataset``, for an accountant to charge.

        Raises:
            InvalidValueError: the dataset is not granted to the analyst.
        """
        return self.ledgers.open(self._granted_ledger(analyst, dataset))

    def _granted_ledger(self, analyst: str, dataset: str) -> str:
        ledger = _ledger_id(_checked_name(analyst, "analyst"), _checked_name(dataset, "dataset"))
        if self.ledgers.budget(ledger) is None:
            raise InvalidValueError(
                f"analyst {analyst!r} has no grant on {dataset!r}; grant it first "
                "(privframe admin CONFIG grant NAME DATASET --rho R, or --epsilon E)"
            )
        return ledger

    def verify(self) -> int:
        """Verify every ledger in full, and each dataset's total against its ledgers; their count.

        Each grant's entries against its hash chain and recorded totals
        (:meth:`~privframe.accounting.ledger.Ledger.verify`), then each
        dataset's running total, which the cap is checked against, against
        the sum of its grants' totals. ``privframe serve`` runs it before it
        serves, and ``privframe admin CONFIG verify`` on demand.

        Raises:
            LedgerError: an entry, a ledger's totals or a dataset's total were
                changed outside privframe.

        Example:
            >>> import os, tempfile
            >>> from privframe.api.server.store import Store
            >>> with Store(os.path.join(tempfile.mkdtemp(), "server.db")) as store:
            ...     store.verify()
            0
        """
        pools, count = set(), 0
        for analyst in self.analysts():
            for dataset in self.granted(analyst):
                ledger = self.ledger(analyst, dataset)
                try:
                    ledger.verify()
                finally:
                    ledger.close()
                pools.add(dataset)
                count += 1
        for dataset in sorted(pools):
            self.ledgers.verify_pool(dataset)
        return count

    def set_cap(self, dataset: str, cap: Spendable | None) -> None:
        """Set (None: remove) the cap on what all analysts together may spend on ``dataset``.

        Raises:
            InvalidValueError: the dataset's grants are of a kind the cap does
                not bound, or of several kinds.
        """
        _checked_name(dataset, "dataset")
        self.ledgers.set_cap(dataset, None if cap is None else _budget(cap, "cap"))

    def pool_spent(self, dataset: str, kind: Kind | None = None) -> Spendable:
        """What all analysts' releases on ``dataset`` add up to, exactly (what its cap bounds).

        Of the kind of its grants; a dataset without a cap may have grants of
        several kinds: ``kind`` then says which to total
        (:meth:`DatabaseLedgers.pool_spent
        <privframe.accounting.ledger.DatabaseLedgers.pool_spent>`).

        Example:
            >>> import os, tempfile
            >>> from privframe import zCDP
            >>> from privframe.accounting.accountant import Accountant
            >>> from privframe.api.server.store import Store
            >>> with tempfile.TemporaryDirectory() as d:
            ...     with Store(os.path.join(d, "server.db")) as store:
            ...         for name in ("alice", "bob"):
            ...             _ = store.add_analyst(name)
            ...             store.grant(name, "sales", zCDP(1.0))
            ...             acct = Accountant(zCDP(1.0), ledger=store.ledger(name, "sales"))
            ...             _ = acct.spend(zCDP(0.25), label="q")
            ...         print(store.pool_spent("sales"))
            zCDP(rho=0.5, delta=0.0)
        """
        return self.ledgers.pool_spent(_checked_name(dataset, "dataset"), kind)

    # -- the audit log --------------------------------------------------------------------

    def audit(
        self,
        *,
        analyst: str | None,
        action: str,
        dataset: str | None,
        status: int,
        detail: str = "",
    ) -> None:
        """Record one request or refusal in the audit log, durably.

        Text fields are kept as valid UTF-8 without NUL, cut at a few hundred
        characters (``detail`` at 2000). Never pass a data value: the log is
        meant to be read by people who may not see the data.
        """
        for what, value in (("analyst", analyst), ("dataset", dataset)):
            if value is not None and not isinstance(value, str):
                raise InvalidArgumentError(
                    f"{what} must be a str or None, got {type(value).__name__}"
                )
        if not isinstance(action, str) or not isinstance(detail, str):
            raise InvalidArgumentError("action and detail must be str")
        if isinstance(status, bool) or not isinstance(status, int):
            raise InvalidArgumentError(f"status must be an int, got {type(status).__name__}")
        limits = _AUDIT_TEXT
        row = (
            _now(),
            None if analyst is None else _text(analyst, limits["analyst"]),
            _text(action, limits["action"]),
            None if dataset is None else _text(dataset, limits["dataset"]),
            status,
            _text(detail, limits["detail"]),
        )
        with self._db.transaction("writing the audit log", write=True) as tx:
            tx.run(
                "INSERT INTO pf_audit(time, analyst, action, dataset, status, detail) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                row,
            )

    def audit_records(self, limit: int = 1000) -> list[AuditRecord]:
        """The latest ``limit`` records of the audit log, oldest first.

        Example:
            >>> import os, tempfile
            >>> from privframe.api.server.store import Store
            >>> with tempfile.TemporaryDirectory() as d:
            ...     with Store(os.path.join(d, "server.db")) as store:
            ...         store.audit(analyst=None, action="release", dataset="sales", status=401)
            ...         store.audit(analyst="alice", action="release", dataset="sales",
            ...                     status=200, detail="rho=0.1")
            ...         print([(r.analyst, r.status) for r in store.audit_records()])
            [(None, 401), ('alice', 200)]
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidValueError(f"limit must be a whole number >= 1, got {limit!r}")
        with self._db.transaction("reading the audit log", write=False) as tx:
            rows = tx.run(
                "SELECT time, analyst, action, dataset, status, detail FROM pf_audit "
                "ORDER BY seq DESC LIMIT ?",
                (limit,),
            )
        return [AuditRecord(*row) for row in reversed(rows)]


def _ledger_id(analyst: str, dataset: str) -> str:
    """The id of the ledger of ``analyst``'s grant on ``dataset`` (a name holds no ``/``)."""
    return f"{analyst}/{dataset}"


def _now() -> str:
    """The current UTC time as the store records it (ISO 8601, microseconds)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")
