"""privframe's per-user record of the ledgers it verified, and the warnings about it.

For each ledger path the record holds the entry count, last hash and exact
totals privframe last saw (:func:`state_file`). It lets a later open verify
only the entries added since, and detect a ledger rolled back or gone; it
only adds checks, and when it cannot be kept ledgers work as before.

Example:
    >>> from privframe.accounting.ledger._state import state_file
    >>> state_file().name
    'known-ledgers.sqlite'
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privframe.accounting.ledger._entry import LedgerSummary
from privframe.accounting.ledger._format import canonical_json, now, parse_ratio, ratio_text
from privframe.errors import PrivframeWarning

__all__ = [
    "KNOWN_LEDGERS",
    "STATE_DIR_ENV",
    "Known",
    "KnownLedgers",
    "LedgerMissingWarning",
    "LedgerStateWarning",
    "state_file",
    "state_key",
]


class LedgerMissingWarning(PrivframeWarning):
    """A ledger privframe recorded at a path is gone, and a new one there restores the full budget.

    Given when a ledger path privframe saw before no longer holds that ledger
    (it was deleted, renamed or replaced): the spends it recorded would be
    spent again on the same data. See ``docs/operations.md``.
    """


class LedgerStateWarning(PrivframeWarning):
    """privframe cannot read or write its per-user record of known ledgers (:func:`state_file`).

    Ledgers keep working and keep their hash chain, but a rollback or a missing
    ledger is not detected, and each open verifies the whole ledger. See
    ``docs/operations.md``.
    """


def state_key(path: Path) -> str:
    """The key of a ledger in the record of known ledgers: its absolute, resolved path.

    A name that is not valid Unicode (undecodable bytes) is keyed by its bytes,
    with each undecodable byte spelled as a backslash escape: SQLite text must be UTF-8.
    """
    try:
        key = str(path.resolve())
    except (OSError, RuntimeError):
        key = os.path.abspath(path)
    try:
        key.encode()
    except UnicodeEncodeError:
        key = os.fsencode(key).decode(errors="backslashreplace")
    return key


STATE_DIR_ENV = "PRIVFRAME_STATE_DIR"
"""The environment variable naming the directory of privframe's per-user state."""


def state_file() -> Path:
    """The file where privframe records, per user, the ledgers it verified.

    For each ledger path: its entry count, last hash and exact totals when
    privframe last opened or charged it, which lets a later open verify only
    the entries added since, and detect a ledger rolled back or gone (see
    :class:`SQLiteLedger` and ``docs/operations.md``). The directory is
    ``$PRIVFRAME_STATE_DIR`` when set, else the platform's per-user state
    directory: ``$XDG_STATE_HOME/privframe`` (default
    ``~/.local/state/privframe``) on Linux and other POSIX systems,
    ``~/Library/Application Support/privframe`` on macOS, and
    ``%LOCALAPPDATA%/privframe`` on Windows.

    Example:
        >>> from privframe.accounting.ledger import state_file
        >>> state_file().name
        'known-ledgers.sqlite'
    """
    configured = os.environ.get(STATE_DIR_ENV)
    if configured:
        directory = Path(configured)
    elif sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA")
        directory = (Path(local) if local else Path.home() / "AppData" / "Local") / "privframe"
    elif sys.platform == "darwin":
        directory = Path.home() / "Library" / "Application Support" / "privframe"
    else:
        xdg = os.environ.get("XDG_STATE_HOME", "")
        base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "state"
        directory = base / "privframe"
    return directory / "known-ledgers.sqlite"


@dataclass(frozen=True)
class Known:
    """What privframe verified of one ledger: its genesis, last hash and summary."""

    genesis: str
    head: str
    summary: LedgerSummary


_KNOWN_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledgers (
    path    TEXT PRIMARY KEY,
    genesis TEXT NOT NULL,
    count   INTEGER NOT NULL,
    head    TEXT NOT NULL,
    summary TEXT NOT NULL,
    seen    TEXT NOT NULL
)
"""


class KnownLedgers:
    """The per-user record of known ledgers (:func:`state_file`), shared by the process.

    It only adds checks: when it cannot be read or written, ledgers keep
    working as before and one :class:`LedgerStateWarning` says so. A record
    only moves forward (a larger count) unless the path now holds another
    ledger or an operator accepts a restored one, so concurrent writers
    cannot make it older.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: tuple[int, Path, sqlite3.Connection] | None = None
        self._warned: set[Path | None] = set()

    def get(self, key: str) -> Known | None:
        with self._lock:
            found = self._attempt(
                lambda conn: conn.execute(
                    "SELECT genesis, count, head, summary FROM ledgers WHERE path = ?", (key,)
                ).fetchone()
            )
            if found is None:
                return None
            genesis, count, head, text = found
            try:
                values = json.loads(text)
                summary = LedgerSummary(
                    count,
                    parse_ratio(values["rho"]),
                    parse_ratio(values["delta"]),
                    (parse_ratio(values["excess_rho"]), parse_ratio(values["excess_delta"])),
                    values["seeded"],
                )
                if not (isinstance(count, int) and isinstance(values["seeded"], int)):
                    raise TypeError("a count is not an integer")
            except (TypeError, ValueError, KeyError) as err:
                self._warn(f"its record of {key!r} is malformed ({err})")
                return None
            return Known(genesis, head, summary)

    def put(self, key: str, known: Known, *, force: bool) -> None:
        s = known.summary
        text = canonical_json(
            {
                "rho": ratio_text(s.rho),
                "delta": ratio_text(s.delta),
                "excess_rho": ratio_text(s.float_excess[0]),
                "excess_delta": ratio_text(s.float_excess[1]),
                "seeded": s.seeded,
            }
        )
        with self._lock:
            self._attempt(
                lambda conn: conn.execute(
                    "INSERT INTO ledgers(path, genesis, count, head, summary, seen) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(path) DO UPDATE SET "
                    "genesis = excluded.genesis, count = excluded.count, head = excluded.head, "
                    "summary = excluded.summary, seen = excluded.seen "
                    "WHERE ? OR excluded.genesis != ledgers.genesis "
                    "OR excluded.count >= ledgers.count",
                    (key, known.genesis, s.count, known.head, text, now(), force),
                )
            )

    def _attempt(self, action: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run ``action`` on the state file; on failure warn (once) and return None."""
        path: Path | None = None
        try:
            path = state_file()
            return action(self._connection(path))
        except (sqlite3.Error, OSError, RuntimeError, ValueError) as err:
            self._drop()
            self._warn(str(err), path)
            return None

    def _connection(self, path: Path) -> sqlite3.Connection:
        if self._open is not None:
            pid, opened, conn = self._open
            if pid == os.getpid() and opened == path:
                return conn
            self._drop()
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=5.0, isolation_level=None, check_same_thread=False)
        try:
            # Losing the latest record on a power cut only makes it older: harmless.
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(_KNOWN_SCHEMA)
        except BaseException:
            conn.close()
            raise
        self._open = (os.getpid(), path, conn)
        return conn

    def _drop(self) -> None:
        if self._open is not None:
            pid, _, conn = self._open
            if pid == os.getpid():  # a connection inherited across fork() is not touched
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._open = None

    def _warn(self, problem: str, path: Path | None = None) -> None:
        where = str(path) if path is not None else "its state directory"
        if path in self._warned:
            return
        self._warned.add(path)
        warnings.warn(
            f"privframe cannot keep its record of known ledgers in {where!r} ({problem}). "
            "Ledgers still work and keep their hash chain, but a ledger rolled back or "
            "gone is not detected, and each open verifies the whole ledger. Make that "
            f"directory writable, or set {STATE_DIR_ENV} to a writable directory "
            "(see docs/operations.md)",
            LedgerStateWarning,
            stacklevel=5,
        )


KNOWN_LEDGERS = KnownLedgers()
