"""The report spec: a TOML file of queries, read and validated as a whole.

:func:`load_spec` reads a spec into a :class:`ReportSpec`; every problem
raises :class:`SpecError` naming its key, before any data is read or any
budget spent. ``docs/reports.md`` describes the format.

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

import math
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from privframe.accounting._numbers import exact
from privframe.accounting.budgets import GDP, ApproxDP, Budget, zCDP
from privframe.accounting.replay import METHODS
from privframe.api.query import Bound
from privframe.errors import InvalidValueError, PrivframeError
from privframe.plan import aggregates as agg
from privframe.plan.aggregates import Aggregate
from privframe.plan.keys import KeySet, product
from privframe.plan.postprocess import PostProcessing

__all__ = ["QuerySpec", "ReportSpec", "SpecError", "load_spec"]


class SpecError(InvalidValueError):
    """A report spec is invalid, or one of its queries does not plan; nothing was spent."""


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_BOUNDED_KEYS = ("kind", "column", "bounds", "alias")
_POST_KEYS = ("clamp", "intervals", "total")
_QUERY_KEYS = ("name", "sql", "group_by", "keys", "aggregates", "rho", "share", "delta")
_Builder = Callable[..., Aggregate | tuple[Aggregate, ...]]
AGGREGATE_KINDS: dict[str, tuple[_Builder, tuple[str, ...]]] = {
    "count": (agg.count, ("kind", "alias")),
    "count_distinct": (agg.count_distinct, ("kind", "alias")),
    "sum": (agg.sum, _BOUNDED_KEYS),
    "mean": (agg.mean, _BOUNDED_KEYS),
    "var": (agg.var, _BOUNDED_KEYS),
    "std": (agg.std, _BOUNDED_KEYS),
    "quantile": (agg.quantile, (*_BOUNDED_KEYS, "q", "candidates")),
    "median": (agg.median, (*_BOUNDED_KEYS, "candidates")),
}
"""Per aggregate kind of a report spec (each family's ``spec_name``, and ``median``): its
builder and the keys its spec table may hold."""


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
        post: the release's post-processing (``clamp``, ``intervals`` and
            ``total`` in the spec, as in ``Query.release``).
    """

    name: str
    rho: Fraction
    delta: float | None = None
    sql: str | None = None
    group_by: tuple[str, ...] = ()
    keys: KeySet | None = None
    aggregates: tuple[Aggregate, ...] = ()
    post: PostProcessing = field(default_factory=PostProcessing)


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


def _flag(table: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise SpecError(f"{where}.{key} must be true or false, got {value!r}")
    return value


def _post(table: Mapping[str, Any], where: str) -> PostProcessing:
    return PostProcessing(
        _flag(table, "clamp", where, True),
        _flag(table, "intervals", where, False),
        _flag(table, "total", where, False),
    )


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
    if kind not in AGGREGATE_KINDS:
        raise SpecError(f"{where}.kind must be one of {', '.join(AGGREGATE_KINDS)}, got {kind!r}")
    build, allowed = AGGREGATE_KINDS[kind]
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
    """The public keys: per column from the query's ``keys`` or the metadata; None for neither.

    Group columns without keys are chosen privately (spending δ), those with
    keys are public: every public key is reported for each chosen combination.
    """
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
    present = {c: values for c, values in per_column.items() if values is not None}
    if not present:
        return None  # chosen privately: the release spends δ
    return _guard(f"{where}.keys", lambda: product(**present))


def _query(
    raw: object,
    where: str,
    total: Fraction | None,
    metadata: Mapping[str, Mapping[str, Any]],
) -> tuple[QuerySpec, Fraction | None]:
    """One query, and its share of ``[report] rho`` if it gave one."""
    table = _table(raw, where)
    _check_keys(table, where, (*_QUERY_KEYS, *_POST_KEYS), ("name",))
    name = _string(table, "name", where)
    if not _NAME.fullmatch(name):
        raise SpecError(
            f"{where}.name {name!r} must be letters, digits, '_', '.' or '-' "
            "(it names the query's CSV file)"
        )
    where = f"{where} ({name!r})"
    rho, share = _query_rho(table, where, total)
    delta = _positive(table, "delta", where) if "delta" in table else None
    structured = [k for k in ("group_by", "keys", "aggregates") if k in table]
    if "sql" in table:
        if structured:
            raise SpecError(
                f"{where}: give sql or a structured query (group_by, keys, aggregates), "
                f"not both; found sql and {structured[0]}"
            )
        sql = _string(table, "sql", where)
        return QuerySpec(name, rho, delta, sql=sql, post=_post(table, where)), share
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
    unkeyed = [c for c in group_by if keys is not None and c not in keys.columns]
    if unkeyed and delta is None:
        raise SpecError(
            f"{where}: group_by columns {unkeyed} have no keys (in the query or the "
            "metadata): they would be chosen privately, spending delta; give delta = ... "
            "to opt in, or keys for every group column"
        )
    post = _post(table, where)
    if post.total and not group_by:
        raise SpecError(f"{where}.total adds a row for all groups together: it needs group_by")
    return QuerySpec(name, rho, delta, None, group_by, keys, aggregates, post), share


def _query_rho(
    table: Mapping[str, Any], where: str, total: Fraction | None
) -> tuple[Fraction, Fraction | None]:
    """A query's exact ρ, from its own ``rho`` or its ``share`` of the report's total."""
    if ("rho" in table) == ("share" in table):
        raise SpecError(f"{where}: give exactly one of rho and share")
    if "rho" in table:
        return exact("rho", _positive(table, "rho", where)), None
    share = exact("share", _positive(table, "share", where))
    if total is None:
        raise SpecError(f"{where}.share needs a total: [report] rho = ...")
    return share * total, share


def _read(path: Path) -> dict[str, Any]:
    try:
        # utf-8-sig: a spec saved by an editor that writes a byte-order mark reads too.
        return tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as err:
        raise SpecError(f"cannot read the spec {str(path)!r}: {err.strerror}") from None
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"the spec {str(path)!r} is not valid TOML: {err}") from None


def _report(report: Mapping[str, Any]) -> tuple[str, str, Fraction | None, int | None]:
    """The ``[report]`` table: its title, accounting method, total ρ and seed."""
    _check_keys(report, "report", ("title", "rho", "seed", "accounting"), ("title",))
    title = _string(report, "title", "report")
    accounting = _string(report, "accounting", "report") if "accounting" in report else "zcdp"
    if accounting not in METHODS:
        raise SpecError(
            f"report: accounting must be one of {', '.join(METHODS)}, got {accounting!r}"
        )
    total = exact("rho", _positive(report, "rho", "report")) if "rho" in report else None
    seed = _integer(report, "seed", "report") if "seed" in report else None
    return title, accounting, total, seed


def _queries(
    queries: object, total: Fraction | None, metadata: Mapping[str, Mapping[str, Any]]
) -> tuple[QuerySpec, ...]:
    """The ``[[queries]]``: each valid, their names unique, their ρ within ``[report] rho``."""
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
    return tuple(q for q, _ in parsed)


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
    raw = _read(path)
    _check_keys(
        raw,
        "the spec",
        ("report", "data", "budget", "metadata", "contributions", "queries"),
        ("report", "data", "budget", "contributions", "queries"),
    )
    title, accounting, total, seed = _report(_table(raw["report"], "report"))
    data = _table(raw["data"], "data")
    _check_keys(data, "data", ("path", "privacy_unit"), ("path", "privacy_unit"))
    budget = _table(raw["budget"], "budget")
    allowance = _budget(budget)
    same_data = budget.get("same_data", False)
    if not isinstance(same_data, bool):
        raise SpecError(f"budget.same_data must be true or false, got {_type(same_data)}")
    contributions = _contributions(_table(raw["contributions"], "contributions"))
    metadata = _metadata(_table(raw.get("metadata", {}), "metadata"))
    queries = _queries(raw["queries"], total, metadata)
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
        queries=queries,
        seed=seed,
        accounting=accounting,
        allow_seeded_noise=allow_seeded_noise,
        same_data=same_data,
    )
