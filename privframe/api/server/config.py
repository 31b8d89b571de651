"""The server's configuration file: where it listens, its database, and the datasets it serves.

A TOML file, read as a whole and checked before anything starts; each problem
names its key (the readers of :mod:`privframe.api.spec_values`, shared with
report specs)::

    [server]
    host = "127.0.0.1"            # the default; another host needs TLS
    port = 8765
    database = "privframe.db"     # a SQLite file beside this one, or "postgresql://..."
    certificate = "server.pem"    # with key: serve HTTPS
    key = "server-key.pem"

    [datasets.transactions]
    data = "transactions.parquet"
    privacy_unit = "user_id"
    cap = { rho = 4.0 }           # optional: the total all analysts may spend (or epsilon)
    contributions = { max_groups = 3, max_rows_per_group = 5 }
    metadata.amount = { bounds = [0, 1000] }   # a CSV's: { type = "float64", bounds = ... }
    metadata.region = { keys = ["north", "south"] }

A CSV's columns are read as text unless their ``type`` is declared in the
metadata: types are published, so they never come from the values.

A ``cap`` is read as a report's ``[budget]`` is: ``rho`` (and ``delta``) or
``mu`` make a zCDP cap, ``epsilon`` a pure-DP one, ``epsilon`` and ``delta``
an (ε, δ) one, which bounds (ε, δ) grants, or zCDP grants by the ρ it allows
(as it did before grants could be of other kinds); ``docs/server.md`` says
which grants each cap admits.

Analysts, their tokens and their budgets are not in this file: they live in
the server's database and change with ``privframe admin`` (a top-up is then a
dated record, not an edit of a file).

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from privframe.api.server.config import load_config
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "serve.toml").write_text('''
    ... [datasets.sales]
    ... data = "sales.parquet"
    ... privacy_unit = "customer"
    ... contributions = { max_groups = 2, max_rows_per_group = 3 }
    ... ''')
    >>> config = load_config(folder / "serve.toml")
    >>> config.port, config.database == str(folder / "privframe.db"), list(config.datasets)
    (8765, True, ['sales'])
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privframe.accounting._kinds import Spendable
from privframe.accounting.budgets import ApproxDP, PureDP, to_zcdp
from privframe.api.spec_values import (
    SpecError,
    check_keys,
    read_toml,
    spec_budget,
    spec_contributions,
    spec_flag,
    spec_guard,
    spec_integer,
    spec_metadata,
    spec_string,
    spec_table,
)

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_PORT",
    "DatasetConfig",
    "ServerConfig",
    "is_loopback",
    "load_config",
]

DEFAULT_PORT = 8765
"""The port ``privframe serve`` listens on unless the configuration gives one."""

DEFAULT_MAX_BODY_BYTES = 1 << 20
"""The largest request body the server reads (1 MiB): a plan, its keys and public tables."""

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""A dataset's or an analyst's name: it appears in URLs and in the audit log."""


@dataclass(frozen=True)
class DatasetConfig:
    """One dataset the server serves: its file, privacy unit and public facts.

    Attributes:
        name: the name analysts connect to.
        data: the ``.parquet`` or ``.csv`` file.
        privacy_unit: the column identifying a person.
        metadata: per column its public ``type``, ``bounds``, ``keys``, ``candidates`` and
            ``missing``;
            analysts can read them, and SQL takes its bounds and keys from them.
        contributions: the default contribution limits for SQL.
        cap: the most all analysts together may spend on this dataset, or None: a
            zCDP, PureDP or ApproxDP budget.
    """

    name: str
    data: Path
    privacy_unit: str
    metadata: Mapping[str, Mapping[str, Any]]
    contributions: Mapping[str, int] | None
    cap: Spendable | None


@dataclass(frozen=True)
class ServerConfig:
    """The whole configuration; build it with :func:`load_config`.

    Attributes:
        path: the configuration file.
        host: the interface to listen on.
        port: the port to listen on.
        database: the SQLite file (an absolute path) or a ``postgresql://`` URL.
        certificate: the TLS certificate chain (PEM), or None for plain HTTP.
        key: the certificate's private key (PEM), or None.
        max_body_bytes: the largest request body read; larger ones get 413.
        datasets: the datasets, by name.
    """

    path: Path
    host: str
    port: int
    database: str
    certificate: Path | None
    key: Path | None
    max_body_bytes: int
    datasets: Mapping[str, DatasetConfig]

    @property
    def scheme(self) -> str:
        """``https`` with a certificate, else ``http``."""
        return "https" if self.certificate is not None else "http"


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (plain HTTP is allowed there alone).

    Example:
        >>> from privframe.api.server.config import is_loopback
        >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
        (True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _name(value: str, where: str) -> str:
    if not NAME.fullmatch(value):
        raise SpecError(
            f"{where}: {value[:40]!r} is not a valid name (letters, digits, '_', '.', '-'; "
            "at most 64 characters, starting with a letter or digit)"
        )
    return value


def _dataset(name: str, raw: object, folder: Path) -> DatasetConfig:
    where = f"datasets.{_name(name, 'datasets')}"
    table = spec_table(raw, where)
    check_keys(
        table,
        where,
        ("data", "privacy_unit", "metadata", "contributions", "cap"),
        ("data", "privacy_unit"),
    )
    cap = None
    if "cap" in table:
        stated = spec_budget(spec_table(table["cap"], f"{where}.cap"), f"{where}.cap")
        # Kept in its kind (the database decides which grants it bounds); μ is its ρ.
        cap = (
            stated
            if isinstance(stated, PureDP | ApproxDP)
            else spec_guard(f"{where}.cap", lambda: to_zcdp(stated))
        )
    contributions = None
    if "contributions" in table:
        limits = f"{where}.contributions"
        contributions = spec_contributions(spec_table(table["contributions"], limits), limits)
    return DatasetConfig(
        name=name,
        data=folder / spec_string(table, "data", where),
        privacy_unit=spec_string(table, "privacy_unit", where),
        metadata=spec_metadata(spec_table(table.get("metadata", {}), f"{where}.metadata")),
        contributions=contributions,
        cap=cap,
    )


def _server(raw: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    where = "server"
    keys = ("host", "port", "database", "certificate", "key", "max_body_bytes", "insecure_http")
    check_keys(raw, where, keys)
    host = spec_string(raw, "host", where) if "host" in raw else "127.0.0.1"
    port = spec_integer(raw, "port", where) if "port" in raw else DEFAULT_PORT
    if not 0 <= port <= 65535:
        raise SpecError(f"{where}.port must be in [0, 65535], got {port}")
    database = spec_string(raw, "database", where) if "database" in raw else "privframe.db"
    if not database.startswith(("postgresql://", "postgres://")):
        database = str(folder / database)
    if ("certificate" in raw) != ("key" in raw):
        raise SpecError(f"{where}: give both certificate and key (for HTTPS), or neither")
    certificate = folder / spec_string(raw, "certificate", where) if "certificate" in raw else None
    key = folder / spec_string(raw, "key", where) if "key" in raw else None
    insecure = spec_flag(raw, "insecure_http", where, False)
    if certificate is None and not is_loopback(host) and not insecure:
        raise SpecError(
            f"{where}.host = {host!r} is reachable from other machines, and without a "
            "certificate the tokens and results would cross the network in plain text: give "
            "certificate and key (HTTPS), or listen on 127.0.0.1 behind a TLS proxy; "
            "insecure_http = true overrides this (docs/server.md)"
        )
    limit = spec_integer(raw, "max_body_bytes", where) if "max_body_bytes" in raw else None
    if limit is not None and limit < 1024:
        raise SpecError(f"{where}.max_body_bytes must be at least 1024, got {limit}")
    return {
        "host": host,
        "port": port,
        "database": database,
        "certificate": certificate,
        "key": key,
        "max_body_bytes": limit or DEFAULT_MAX_BODY_BYTES,
    }


def load_config(path: str | Path) -> ServerConfig:
    """Read and check the server's configuration file (see the module doc).

    Raises:
        SpecError: the file cannot be read, is not TOML, or a key is unknown,
            missing or of the wrong type or range (the message names it).
    """
    path = Path(path)
    raw = read_toml(path, "the configuration")
    check_keys(raw, "the configuration", ("server", "datasets"), ("datasets",))
    folder = path.parent
    datasets = spec_table(raw["datasets"], "datasets")
    if not datasets:
        raise SpecError("datasets: give at least one [datasets.<name>] table")
    server = _server(spec_table(raw.get("server", {}), "server"), folder)
    return ServerConfig(
        path=path,
        datasets={name: _dataset(name, table, folder) for name, table in datasets.items()},
        **server,
    )
