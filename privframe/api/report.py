"""Scripted reports: a TOML spec of queries, checked as a whole, then released to CSV and HTML.

A report runs in two phases. :func:`prepare` reads the spec, opens the
session on the data and its ledger, builds every query and explains it at
its ρ: a spec that does not validate or a query that does not plan raises
:class:`SpecError`, and a report whose total cost does not fit what the
ledger has left raises :class:`~privframe.errors.BudgetExceededError`, both
before anything is spent. :meth:`Report.run` then releases the queries in
order, writing ``<out>/<name>.csv`` after each, and ``<out>/report.html`` at
the end; if a release fails midway it raises :class:`ReportError`, which
names exactly the queries charged to the ledger. ``docs/reports.md``
describes the spec format; ``privframe report`` is the command line.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from privframe.api.report import load_spec
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "spec.toml").write_text('''
    ... [report]
    ... title = "Regions"
    ... [data]
    ... path = "data.parquet"
    ... privacy_unit = "user_id"
    ... [budget]
    ... rho = 1.0
    ... ledger = "ledger.sqlite"
    ... [contributions]
    ... max_groups = 2
    ... max_rows_per_group = 5
    ... [[queries]]
    ... name = "by_region"
    ... group_by = ["region"]
    ... keys = ["north", "south"]
    ... aggregates = [{kind = "count"}]
    ... rho = 0.1
    ... ''')
    >>> spec = load_spec(folder / "spec.toml")
    >>> spec.title, spec.queries[0].name, spec.queries[0].rho, spec.ledger.name
    ('Regions', 'by_region', Fraction(1, 10), 'ledger.sqlite')
"""

from __future__ import annotations

import contextlib
import enum
import math
import re
import shutil
import signal
import sys
import tempfile
import threading
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any, TextIO

import pandas as pd
import polars as pl

from privframe.accounting._numbers import exact
from privframe.accounting.budgets import GDP, ApproxDP, Budget, zCDP
from privframe.accounting.replay import METHODS
from privframe.api.html import ReportSection, report_html
from privframe.api.query import Bound, Query
from privframe.api.session import Batch, Session
from privframe.api.sql import Column, SQLQuery
from privframe.errors import BudgetExceededError, InvalidValueError, PrivframeError
from privframe.mechanisms.noise import SeededRandomness
from privframe.plan import aggregates as agg
from privframe.plan.aggregates import Aggregate
from privframe.plan.keys import KeySet, product
from privframe.plan.planner import Explanation

__all__ = [
    "NOT_PRIVATE",
    "ExitCode",
    "Planned",
    "QuerySpec",
    "Report",
    "ReportError",
    "ReportSpec",
    "SpecError",
    "describe_error",
    "load_spec",
    "prepare",
]


class ExitCode(enum.IntEnum):
    """The exit status of ``privframe report``: what a scheduler can rely on.

    Example:
        >>> from privframe.api.report import ExitCode
        >>> int(ExitCode.OVER_BUDGET), ExitCode.OVER_BUDGET.meaning.split(": ")[1]
        (3, 'nothing was spent')
    """

    OK = 0
    UNEXPECTED = 1
    INVALID = 2
    OVER_BUDGET = 3
    FAILED_MIDWAY = 4

    @property
    def meaning(self) -> str:
        """What this status tells, for ``--help`` and the docs."""
        return _MEANINGS[self]


_MEANINGS = {
    ExitCode.OK: "the report ran: every query was released and written, with report.html",
    ExitCode.UNEXPECTED: "an unexpected error before any release: nothing was spent",
    ExitCode.INVALID: ("the spec is invalid, or a query does not parse or plan: nothing was spent"),
    ExitCode.OVER_BUDGET: (
        "the report does not fit the budget left in the ledger: nothing was spent"
    ),
    ExitCode.FAILED_MIDWAY: (
        "the run failed or was interrupted after the checks: while computing (nothing was "
        "charged) or while writing after the charge (every query was charged); the message "
        "says which (each ledger entry is labelled <title>/<query name>)"
    ),
}


NOT_PRIVATE = (
    "NOT PRIVATE: this report's noise is seeded ([report] seed with --allow-seeded-noise), so "
    "its results are reproducible and NOT differentially private; seeds are for tests only"
)
"""The first line of every output of a seeded report: stdout, each CSV and report.html."""


class SpecError(InvalidValueError):
    """A report spec is invalid, or one of its queries does not plan; nothing was spent."""


class ReportError(PrivframeError):
    """A report failed while releasing: ``charged`` lists the ledger labels it did charge."""

    def __init__(self, message: str, charged: Sequence[str]) -> None:
        super().__init__(message)
        self.charged = tuple(charged)


def describe_error(err: BaseException) -> str:
    """An error's type and message, unless the message might quote private data.

    privframe's own errors never carry data values and OS errors name paths;
    any other message (a polars parse error, say) may quote a value from the
    data, so only its type is shown.

    Example:
        >>> import privframe as pf
        >>> from privframe.api.report import describe_error
        >>> describe_error(pf.InvalidValueError("bad bound"))
        'InvalidValueError: bad bound'
        >>> describe_error(KeyError("alice@example.com"))
        'KeyError (message withheld: it may quote private values)'
    """
    if isinstance(err, PrivframeError | OSError):
        return f"{type(err).__name__}: {err}"
    return f"{type(err).__name__} (message withheld: it may quote private values)"


# --------------------------------------------------------------------------- the spec

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_BOUNDED_KEYS = ("kind", "column", "bounds", "alias")
# Per kind: the builder, and the keys its spec table may hold.
_AGGREGATES: dict[str, tuple[Callable[..., Aggregate | tuple[Aggregate, ...]], tuple[str, ...]]] = {
    "count": (agg.count, ("kind", "alias")),
    "count_distinct": (agg.count_distinct, ("kind", "alias")),
    "sum": (agg.sum, _BOUNDED_KEYS),
    "mean": (agg.mean, _BOUNDED_KEYS),
    "var": (agg.var, _BOUNDED_KEYS),
    "std": (agg.std, _BOUNDED_KEYS),
    "quantile": (agg.quantile, (*_BOUNDED_KEYS, "q", "candidates")),
    "median": (agg.median, (*_BOUNDED_KEYS, "candidates")),
}


@dataclass(frozen=True)
class QuerySpec:
    """One query of a report, resolved from its spec: either SQL or a structured query.

    Attributes:
        name: the query's name (its CSV file is ``<name>.csv``).
        rho: the ρ its release spends, exactly as written (a ``share`` is resolved
            against ``[report] rho`` exactly: ten shares of 0.1 spend the total).
        delta: the δ a private key selection spends, or None for the session's default.
        sql: the SQL text, for a SQL query.
        group_by: the grouping columns, for a structured query.
        keys: the public keys (None: chosen privately, or no grouping).
        aggregates: the aggregates, for a structured query.
    """

    name: str
    rho: Fraction
    delta: float | None = None
    sql: str | None = None
    group_by: tuple[str, ...] = ()
    keys: KeySet | None = None
    aggregates: tuple[Aggregate, ...] = ()


@dataclass(frozen=True)
class ReportSpec:
    """A validated report spec; paths are resolved against the spec's directory.

    Attributes:
        path: the spec file.
        title: the report's title; ledger labels are ``<title>/<query name>``.
        data: the data file (``.parquet`` or ``.csv``).
        privacy_unit: the column identifying a person.
        budget: the ledger's total budget.
        ledger: the SQLite ledger file.
        metadata: per column, its public ``bounds`` and ``keys``.
        contributions: ``max_groups``, ``max_rows_per_group`` and ``max_rows``.
        queries: the queries, in order.
        seed: a seed for the noise: the results are then NOT private (tests only).
        accounting: how the report states its guarantee: ``"zcdp"`` (default),
            ``"rdp"`` or ``"pld"`` (see :mod:`privframe.accounting.replay`).
        allow_seeded_noise: the second key a ``seed`` needs; a seed without it
            is refused (:class:`SpecError`), so no spec line alone makes the
            noise non-private.
        same_data: ``[budget] same_data = true``: the ledger may record other
            columns (or another privacy unit) for what is the same data; see
            the Session's ``same_data``.

    Raises:
        SpecError: a ``seed`` without ``allow_seeded_noise=True``.
    """

    path: Path
    title: str
    data: Path
    privacy_unit: str
    budget: Budget
    ledger: Path
    metadata: Mapping[str, Mapping[str, Any]]
    contributions: Mapping[str, int]
    queries: tuple[QuerySpec, ...]
    seed: int | None = None
    accounting: str = "zcdp"
    allow_seeded_noise: bool = False
    same_data: bool = False

    def __post_init__(self) -> None:
        if self.seed is not None and not self.allow_seeded_noise:
            raise SpecError(
                f"{str(self.path)!r} sets [report] seed: the noise would be reproducible and "
                "the results NOT differentially private. Seeds are for tests only: remove the "
                "line, or, for a test, run with --allow-seeded-noise (privframe report) or "
                "allow_seeded_noise=True (load_spec). Nothing was spent."
            )

    def label(self, query: QuerySpec) -> str:
        """The ledger label of a query's release."""
        return f"{self.title}/{query.name}"


def _table(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SpecError(f"{where} must be a table, got {_type(value)}")
    return value


def _type(value: object) -> str:
    return {bool: "a boolean", str: "a string", list: "an array", dict: "a table"}.get(
        type(value), f"a {type(value).__name__}"
    )


def _check_keys(
    table: Mapping[str, Any], where: str, allowed: Sequence[str], required: Sequence[str] = ()
) -> None:
    for key in table:
        if key not in allowed:
            raise SpecError(
                f"{where}: unknown key {key!r}; allowed keys: {', '.join(sorted(allowed))}"
            )
    for key in required:
        if key not in table:
            raise SpecError(f"{where}: missing the required key {key!r}")


def _string(table: Mapping[str, Any], key: str, where: str) -> str:
    value = table[key]
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{where}.{key} must be a non-empty string, got {_type(value)}")
    return value


def _finite(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpecError(f"{where} must be a finite number, got {value!r}")
    return float(value)


def _number(table: Mapping[str, Any], key: str, where: str) -> float:
    return _finite(table[key], f"{where}.{key}")


def _positive(table: Mapping[str, Any], key: str, where: str) -> float:
    value = _number(table, key, where)
    if value <= 0:
        raise SpecError(f"{where}.{key} must be > 0, got {value!r}")
    return value


def _integer(table: Mapping[str, Any], key: str, where: str) -> int:
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{where}.{key} must be a whole number, got {value!r}")
    return value


def _names(table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = table[key]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise SpecError(f"{where}.{key} must be an array of column names, got {value!r}")
    return tuple(value)


def _values(value: object, where: str) -> list[Any]:
    """A non-empty array of public key values: all strings, or all numbers."""
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in value)
    ):
        raise SpecError(f"{where} must be a non-empty array of strings or numbers")
    if len({isinstance(v, str) for v in value}) > 1:
        # The builder refuses mixed keys too: a cast would have to pick one reading.
        raise SpecError(f"{where} mixes strings and numbers; give all keys as one kind")
    return value


def _guard(where: str, build: Callable[[], Any]) -> Any:
    """Run a privframe constructor, naming the spec key when it refuses the value."""
    try:
        return build()
    except PrivframeError as err:
        raise SpecError(f"{where}: {err}") from None


def _budget(table: Mapping[str, Any]) -> Budget:
    where = "budget"
    _check_keys(
        table,
        where,
        ("rho", "delta", "epsilon", "selection_delta", "mu", "ledger", "same_data"),
        ("ledger",),
    )
    given = set(table) - {"ledger", "same_data"}
    if given in ({"rho"}, {"rho", "delta"}):
        rho = _positive(table, "rho", where)
        delta = _number(table, "delta", where) if "delta" in table else 0.0
        return _guard(where, lambda: zCDP(rho, delta))
    if given in ({"epsilon", "delta"}, {"epsilon", "delta", "selection_delta"}):
        epsilon, delta = _positive(table, "epsilon", where), _number(table, "delta", where)
        reserve = _number(table, "selection_delta", where) if "selection_delta" in table else 0.0
        return _guard(where, lambda: ApproxDP(epsilon, delta).to_zcdp(selection_delta=reserve))
    if given == {"mu"}:
        return GDP(_positive(table, "mu", where))
    raise SpecError(
        "budget: give rho (and optionally delta), or epsilon and delta (and optionally "
        f"selection_delta), or mu; got {', '.join(sorted(given)) or 'none of them'}"
    )


def _bounds(value: object, where: str) -> tuple[float, float]:
    if not isinstance(value, list) or len(value) != 2:
        raise SpecError(f"{where} must be [lower, upper], got {value!r}")
    return _finite(value[0], f"{where}[0]"), _finite(value[1], f"{where}[1]")


def _metadata(raw: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    columns: dict[str, dict[str, Any]] = {}
    for column, value in raw.items():
        where = f"metadata.{column}"
        table = _table(value, where)
        _check_keys(table, where, ("bounds", "keys", "candidates"))
        entry: dict[str, Any] = {}
        if "bounds" in table:
            entry["bounds"] = _bounds(table["bounds"], f"{where}.bounds")
        if "keys" in table:
            entry["keys"] = _values(table["keys"], f"{where}.keys")
        if "candidates" in table:
            entry["candidates"] = _integer(table, "candidates", where)
        columns[column] = entry
    return columns


def _contributions(table: Mapping[str, Any]) -> dict[str, int]:
    where = "contributions"
    _check_keys(table, where, ("max_groups", "max_rows_per_group", "max_rows"))
    limits = {key: _integer(table, key, where) for key in table}
    if "max_rows_per_group" not in limits and "max_rows" not in limits:
        raise SpecError(f"{where}: give max_rows_per_group or max_rows (a person's row limit)")
    _guard(where, lambda: Bound(**limits))
    return limits


def _aggregate(
    raw: object, where: str, metadata: Mapping[str, Mapping[str, Any]]
) -> tuple[Aggregate, ...]:
    table = _table(raw, where)
    _check_keys(table, where, ("kind", "column", "bounds", "q", "candidates", "alias"), ("kind",))
    kind = _string(table, "kind", where)
    if kind not in _AGGREGATES:
        raise SpecError(f"{where}.kind must be one of {', '.join(_AGGREGATES)}, got {kind!r}")
    build, allowed = _AGGREGATES[kind]
    where = f"{where} (kind = {kind!r})"
    _check_keys(table, where, allowed, [k for k in ("column", "q") if k in allowed])
    args: list[Any] = []
    facts: Mapping[str, Any] = {}
    if "column" in allowed:
        column = _string(table, "column", where)
        facts = metadata.get(column, {})
        if "bounds" in table:
            bounds = _bounds(table["bounds"], f"{where}.bounds")
        elif "bounds" in facts:
            bounds = facts["bounds"]
        else:
            raise SpecError(f"{where}: give bounds = [lower, upper], or metadata.{column}.bounds")
        args = [column, table["q"], bounds] if "q" in allowed else [column, bounds]
    options = {}
    if "candidates" in table:
        options["candidates"] = _integer(table, "candidates", where)
    elif "candidates" in allowed and "candidates" in facts:
        options["candidates"] = facts["candidates"]
    built = _guard(where, lambda: build(*args, **options))
    aggregates = built if isinstance(built, tuple) else (built,)
    if "alias" in table:
        if len(aggregates) != 1:
            raise SpecError(f"{where}: alias needs a single output (q has several values)")
        alias = _string(table, "alias", where)
        aggregates = (_guard(where, lambda: aggregates[0].alias(alias)),)
    return aggregates


def _keys(
    table: Mapping[str, Any],
    group_by: tuple[str, ...],
    where: str,
    metadata: Mapping[str, Mapping[str, Any]],
) -> KeySet | None:
    """The public keys: per column from the query's ``keys`` or the metadata; None for neither."""
    given = table.get("keys", {})
    if isinstance(given, list):
        if len(group_by) != 1:
            raise SpecError(f"{where}.keys: with several group_by columns, give a table of arrays")
        given = {group_by[0]: given}
    given = _table(given, f"{where}.keys")
    _check_keys(given, f"{where}.keys", group_by)
    per_column = {
        column: _values(given[column], f"{where}.keys.{column}")
        if column in given
        else metadata.get(column, {}).get("keys")
        for column in group_by
    }
    missing = [c for c, values in per_column.items() if values is None]
    if len(missing) == len(group_by):
        return None  # chosen privately: the release spends δ
    if missing:
        raise SpecError(
            f"{where}: no public keys for {missing} (give keys or metadata.<column>.keys); "
            "either every group_by column has public keys or none has"
        )
    return _guard(f"{where}.keys", lambda: product(**per_column))


def _query(
    raw: object,
    where: str,
    total: Fraction | None,
    metadata: Mapping[str, Mapping[str, Any]],
) -> tuple[QuerySpec, Fraction | None]:
    """One query, and its share of ``[report] rho`` if it gave one."""
    table = _table(raw, where)
    _check_keys(
        table,
        where,
        ("name", "sql", "group_by", "keys", "aggregates", "rho", "share", "delta"),
        ("name",),
    )
    name = _string(table, "name", where)
    if not _NAME.fullmatch(name):
        raise SpecError(
            f"{where}.name {name!r} must be letters, digits, '_', '.' or '-' "
            "(it names the query's CSV file)"
        )
    where = f"{where} ({name!r})"
    if ("rho" in table) == ("share" in table):
        raise SpecError(f"{where}: give exactly one of rho and share")
    share = None
    if "share" in table:
        share = exact("share", _positive(table, "share", where))
        if total is None:
            raise SpecError(f"{where}.share needs a total: [report] rho = ...")
        rho = share * total
    else:
        rho = exact("rho", _positive(table, "rho", where))
    delta = _positive(table, "delta", where) if "delta" in table else None
    structured = [k for k in ("group_by", "keys", "aggregates") if k in table]
    if "sql" in table:
        if structured:
            raise SpecError(
                f"{where}: give sql or a structured query (group_by, keys, aggregates), "
                f"not both; found sql and {structured[0]}"
            )
        return QuerySpec(name, rho, delta, sql=_string(table, "sql", where)), share
    if "aggregates" not in table:
        raise SpecError(f'{where}: give sql = "SELECT ..." or aggregates = [...]')
    group_by = _names(table, "group_by", where) if "group_by" in table else ()
    if "keys" in table and not group_by:
        raise SpecError(f"{where}.keys needs group_by")
    listed = table["aggregates"]
    if not isinstance(listed, list) or not listed:
        raise SpecError(f"{where}.aggregates must be a non-empty array of tables")
    aggregates = tuple(
        aggregate
        for i, item in enumerate(listed)
        for aggregate in _aggregate(item, f"{where}.aggregates[{i}]", metadata)
    )
    keys = _keys(table, group_by, where, metadata)
    return QuerySpec(name, rho, delta, None, group_by, keys, aggregates), share


def load_spec(path: str | Path, *, allow_seeded_noise: bool = False) -> ReportSpec:
    """Read and validate a report spec (TOML); every problem names its key.

    Args:
        path: the spec file.
        allow_seeded_noise: accept a ``[report] seed``, which makes the
            results NOT private (for tests). Without it such a spec is refused.

    Raises:
        SpecError: the file is missing or not TOML, a key is unknown or
            missing, or a value has the wrong type or range; or it sets a
            seed without ``allow_seeded_noise``.
    """
    path = Path(path)
    try:
        # utf-8-sig: a spec saved by an editor that writes a byte-order mark reads too.
        raw = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as err:
        raise SpecError(f"cannot read the spec {str(path)!r}: {err.strerror}") from None
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"the spec {str(path)!r} is not valid TOML: {err}") from None
    _check_keys(
        raw,
        "the spec",
        ("report", "data", "budget", "metadata", "contributions", "queries"),
        ("report", "data", "budget", "contributions", "queries"),
    )
    report = _table(raw["report"], "report")
    _check_keys(report, "report", ("title", "rho", "seed", "accounting"), ("title",))
    title = _string(report, "title", "report")
    accounting = _string(report, "accounting", "report") if "accounting" in report else "zcdp"
    if accounting not in METHODS:
        raise SpecError(
            f"report: accounting must be one of {', '.join(METHODS)}, got {accounting!r}"
        )
    total = exact("rho", _positive(report, "rho", "report")) if "rho" in report else None
    seed = _integer(report, "seed", "report") if "seed" in report else None
    data = _table(raw["data"], "data")
    _check_keys(data, "data", ("path", "privacy_unit"), ("path", "privacy_unit"))
    budget = _table(raw["budget"], "budget")
    allowance = _budget(budget)
    same_data = budget.get("same_data", False)
    if not isinstance(same_data, bool):
        raise SpecError(f"budget.same_data must be true or false, got {_type(same_data)}")
    contributions = _contributions(_table(raw["contributions"], "contributions"))
    metadata = _metadata(_table(raw.get("metadata", {}), "metadata"))
    queries = raw["queries"]
    if not isinstance(queries, list) or not queries:
        raise SpecError("queries must be a non-empty array of tables: [[queries]]")
    parsed = [_query(q, f"queries[{i}]", total, metadata) for i, q in enumerate(queries)]
    names = [q.name for q, _ in parsed]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise SpecError(f"queries: the names {repeated} are used twice; names must be unique")
    if total is not None:
        shares = sum((share for _, share in parsed if share is not None), Fraction(0))
        if shares > 1:
            raise SpecError(f"queries: the shares add up to {float(shares):g}, more than 1")
        asked = sum((q.rho for q, _ in parsed), Fraction(0))
        if asked > total:
            raise SpecError(
                f"queries ask for rho = {float(asked):.6g} in total, more than [report] "
                f"rho = {float(total):g}"
            )
    folder = path.parent
    return ReportSpec(
        path=path,
        title=title,
        data=folder / _string(data, "path", "data"),
        privacy_unit=_string(data, "privacy_unit", "data"),
        budget=allowance,
        ledger=folder / _string(budget, "ledger", "budget"),
        metadata=metadata,
        contributions=contributions,
        queries=tuple(q for q, _ in parsed),
        seed=seed,
        accounting=accounting,
        allow_seeded_noise=allow_seeded_noise,
        same_data=same_data,
    )


# --------------------------------------------------------------------------- running


Releasable = Query | SQLQuery
"""A report's query: built from the spec's structured form, or parsed from its SQL."""


@dataclass(frozen=True)
class Planned:
    """A query of a report, built and explained: what will be released and what it costs."""

    spec: QuerySpec
    query: Releasable
    explanation: Explanation

    @property
    def cost(self) -> zCDP:
        """What the release will charge."""
        return self.explanation.plan.cost


def _session(spec: ReportSpec, ledger: Path | None) -> Session:
    """The session over the spec's data; SQL queries take their bounds, keys and limits from it."""
    metadata = {column: Column(**facts) for column, facts in spec.metadata.items()}
    rng = None if spec.seed is None else SeededRandomness(spec.seed)
    return _guard(
        "cannot open the data and its ledger",
        lambda: Session(
            spec.data,
            spec.privacy_unit,
            spec.budget,
            ledger,
            rng=rng,
            metadata=metadata,
            contributions=Bound(**spec.contributions),
            same_data=spec.same_data,
        ),
    )


def _build(sess: Session, spec: ReportSpec, query: QuerySpec) -> Releasable:
    if query.sql is not None:
        return sess.sql(query.sql)
    built: Query = sess.query().bound(**spec.contributions)
    if query.group_by:
        built = built.group_by(list(query.group_by), keys=query.keys)
    return built.agg(*query.aggregates)


def prepare(spec: ReportSpec, *, dry_run: bool = False) -> Report:
    """Open the session, build and explain every query, and check the whole report fits.

    Nothing is spent. A ledger file that does not exist yet is created only
    once every check has passed, and never by a dry run: a new file fixes the
    budget of the data, so a spec that fails its checks must not create one.

    Raises:
        SpecError: the data or ledger cannot be opened, or a query does not
            build or plan (all such queries are named).
        BudgetExceededError: the report's total cost does not fit what the
            ledger has left.
    """
    fresh = not spec.ledger.exists()
    # With no ledger file nothing was spent yet: the budget in memory answers the checks.
    report = _checked(spec, None if fresh else spec.ledger)
    if fresh and not dry_run:
        report = _checked(spec, spec.ledger)
    return report


def _checked(spec: ReportSpec, ledger: Path | None) -> Report:
    """The report over a session with ``ledger``, once every query plans and the total fits."""
    sess = _session(spec, ledger)
    planned, problems = [], []
    for query in spec.queries:
        try:
            built = _build(sess, spec, query)
            built.check(with_error=True)  # what a release checks, as it runs with_error
            planned.append(Planned(query, built, built.explain(query.rho, delta=query.delta)))
        except PrivframeError as err:
            problems.append(f"query {query.name!r}: {err}")
    for p in planned:
        if p.explanation.plan.selection is not None and p.spec.delta is None:
            # By default a selection spends all the delta left: the next run would have none.
            problems.append(
                f"query {p.spec.name!r} chooses its groups privately, which spends delta: "
                "give it delta = ... (a share of the budget's delta), or public keys"
            )
    if problems:
        raise SpecError("\n".join(problems))
    report = Report(spec, sess, tuple(planned))
    try:
        sess.accountant.check(report.cost)
    except BudgetExceededError:
        left = sess.remaining
        raise BudgetExceededError(
            f"report {spec.title!r} needs {_cost(report.cost)} but the ledger "
            f"{str(spec.ledger)!r} has {_cost(left)} left; nothing was spent. "
            "Per query: " + "; ".join(f"{p.spec.name} ({_cost(p.cost)})" for p in planned)
        ) from None
    return report


def _cost(cost: zCDP) -> str:
    return f"rho = {cost.rho:.6g}" + (f", delta = {cost.delta:.3g}" if cost.delta else "")


@dataclass(frozen=True)
class Report:
    """A prepared report: its session and planned queries. Build it with :func:`prepare`."""

    spec: ReportSpec
    session: Session
    planned: tuple[Planned, ...]
    created: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def cost(self) -> zCDP:
        """The report's total cost: every query's, composed."""
        return sum((p.cost for p in self.planned), zCDP(0.0))

    def plan_text(self) -> str:
        """The plan a dry run prints: each query's explanation, the total and the budget left."""
        blocks = [f"== {p.spec.name}: {_cost(p.cost)} ==\n{p.explanation}" for p in self.planned]
        left = self.session.remaining
        blocks.append(
            f"== report {self.spec.title!r}: {len(self.planned)} queries, {_cost(self.cost)} "
            f"in total; the ledger has {_cost(left)} left; the report states its guarantee "
            f"by {self.spec.accounting} accounting =="
        )
        return "\n\n".join(blocks)

    def run(self, out: Path, progress: TextIO | None = None) -> Path:
        """Release every query all or nothing; write ``<name>.csv`` each and ``report.html``.

        Every query is first computed exactly (an error or Ctrl-C then spends
        nothing); then the report's whole cost is charged in one ledger step
        (so a concurrent job spends either before, and this run is refused,
        or after); then the noise is drawn and the outputs are written to a
        new folder beside ``out`` that replaces ``out`` once complete.
        Ctrl-C and SIGTERM wait while the charge and the writes run (they
        take moments): a charged report is always written whole. ``out``
        must be new, empty, or an earlier report's output (it is replaced
        whole, so no file of an older run is left among the new ones).

        One line per query goes to ``progress`` (stderr by default). A
        seeded report's CSV files and page start with a :data:`NOT_PRIVATE`
        line (a ``#`` comment in CSV: read them with ``comment_prefix="#"``).
        Returns the path of ``report.html``.

        Raises:
            SpecError: ``out`` cannot hold the outputs (checked before anything).
            BudgetExceededError: another job spent from the ledger since the
                checks and the report no longer fits; nothing was charged.
            ReportError: computing failed or was interrupted (nothing was
                charged), or writing failed after the charge; ``charged``
                names exactly the queries the ledger was charged for.
        """
        stream = sys.stderr if progress is None else progress
        staging = _staging(out)
        labels = [self.spec.label(p.spec) for p in self.planned]
        refused, failure = False, None
        try:
            batch = self._compute(stream)
            with _signals_deferred() as deferred:
                try:
                    results = batch.release()
                except BudgetExceededError:
                    refused = True
                if not refused:
                    try:
                        page = self._write(staging, out, results, batch, stream)
                    except (Exception, KeyboardInterrupt) as err:
                        failure = describe_error(err)
        except BudgetExceededError:
            # The checks passed, so another job spent in between; nothing was charged.
            refused = True
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        if refused:
            shutil.rmtree(staging, ignore_errors=True)
            raise BudgetExceededError(
                f"report {self.spec.title!r} needs {_cost(self.cost)}, but another job spent "
                f"from the ledger {str(self.spec.ledger)!r} since the checks and "
                f"{_cost(self.session.remaining)} is left; nothing was spent"
            )
        if failure is not None:
            raise ReportError(
                f"report {self.spec.title!r}: every query was released and charged "
                f"({', '.join(labels)}), but writing the outputs failed: {failure}. "
                f"What was written is in {str(staging)!r}.",
                labels,
            )
        if deferred:
            print(
                f"interrupted ({', '.join(deferred)}) while charging and writing: "
                "the report was completed first",
                file=stream,
                flush=True,
            )
        return page

    def _compute(self, stream: TextIO) -> Batch:
        """Every query computed exactly, nothing charged; failures become ReportErrors."""
        n = len(self.planned)
        print(f"computing {n} queries (nothing is charged yet) ...", file=stream, flush=True)
        failure = None
        try:
            batch = self.session.batch(
                [
                    p.query.request(
                        p.spec.rho,
                        with_error=True,
                        label=self.spec.label(p.spec),
                        delta=p.cost.delta or None,
                    )
                    for p in self.planned
                ]
            )
        except BudgetExceededError:
            raise
        except (Exception, KeyboardInterrupt) as err:
            failure = describe_error(err)
        if failure is not None:
            # Raised outside the handler: the original may quote private values.
            raise ReportError(
                f"report {self.spec.title!r} stopped while computing its queries: "
                f"{failure.rstrip('.')}. Charged to the ledger: nothing.",
                (),
            )
        print(f"charging {_cost(batch.cost)} to the ledger in one step", file=stream, flush=True)
        return batch

    def _write(
        self,
        staging: Path,
        out: Path,
        results: Sequence[pl.DataFrame | pd.DataFrame],
        batch: Batch,
        stream: TextIO,
    ) -> Path:
        """Write every output into ``staging``, then put it in place of ``out``."""
        seeded = self.spec.seed is not None
        sections = []
        for i, (p, result) in enumerate(zip(self.planned, results, strict=True), 1):
            _write_csv(result, staging / f"{p.spec.name}.csv", seeded=seeded)
            sections.append(_section(p, self.spec.label(p.spec), result))
            print(f"[{i}/{len(self.planned)}] {p.spec.name}: {_cost(p.cost)} ... done", file=stream)
        # An HTML comment may precede the doctype (the page stays in standards mode).
        first = f"<!-- {NOT_PRIVATE} -->\n" if seeded else ""
        html = report_html(
            self.spec.title,
            self.created,
            sections,
            self.session.report(),
            batch.entries,
            accounting=self.spec.accounting,
        )
        (staging / "report.html").write_text(first + html, encoding="utf-8")
        (staging / _MARKER).write_text(
            f"privframe report {self.spec.title!r}, charged {_cost(batch.cost)}\n",
            encoding="utf-8",
        )
        _replace(out, staging)
        return out / "report.html"


def _write_csv(result: pl.DataFrame | pd.DataFrame, target: Path, *, seeded: bool) -> None:
    """Write ``result``; a seeded report's CSV starts with a ``# NOT PRIVATE`` comment line."""
    with target.open("w", encoding="utf-8", newline="") as handle:
        if seeded:
            handle.write(f"# {NOT_PRIVATE}\n")
        if isinstance(result, pl.DataFrame):
            result.write_csv(handle)
        else:
            result.to_csv(handle, index=False)


_MARKER = ".privframe-report"
"""The file that marks a folder as a report's output, which a later run may replace whole."""


def _staging(out: Path) -> Path:
    """A new, empty folder beside ``out`` for this run's outputs; ``out`` must be replaceable."""
    if out.exists():
        if not out.is_dir():
            raise SpecError(f"the output {str(out)!r} is a file; give a folder with --out")
        try:
            names = [p.name for p in out.iterdir()]
        except OSError as err:
            raise SpecError(f"cannot read the output folder {str(out)!r}: {err}") from None
        if names and _MARKER not in names:
            raise SpecError(
                f"the output folder {str(out)!r} holds files that no privframe report "
                "wrote; a report replaces its output folder whole, so give a new or "
                "empty folder with --out"
            )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    except OSError as err:
        raise SpecError(f"cannot create the output folder beside {str(out)!r}: {err}") from None


def _replace(out: Path, staging: Path) -> None:
    """Put ``staging`` where ``out`` is: an earlier run's folder is moved aside, then removed."""
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
        out.rename(old / out.name)
    staging.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[list[str]]:
    """Hold Ctrl-C and SIGTERM until the block ends; yields the names of those received.

    Only the main thread can set signal handlers; elsewhere nothing is deferred.
    """
    received: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def record(signum: int, frame: object) -> None:
        received.append(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, record) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _section(planned: Planned, label: str, result: pl.DataFrame | pd.DataFrame) -> ReportSection:
    query = planned.query
    return ReportSection(
        name=planned.spec.name,
        label=label,
        query=query.query if isinstance(query, SQLQuery) else query,
        explanation=planned.explanation,
        result=result,
        sql=planned.spec.sql,
    )
