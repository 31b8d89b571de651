"""The report spec: a TOML file of queries, marginals and synthetic tables, read as a whole.

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

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, cast

from privframe.accounting.budgets import ApproxDP, Budget, PureDP
from privframe.accounting.replay import METHODS
from privframe.api import synthesis
from privframe.api.spec_values import (
    AGGREGATE_KINDS,
    BUDGET_KEYS,
    SpecError,
    check_keys,
    kind_of,
    read_toml,
    spec_bounds,
    spec_budget,
    spec_contributions,
    spec_domains,
    spec_flag,
    spec_guard,
    spec_integer,
    spec_metadata,
    spec_names,
    spec_positive,
    spec_string,
    spec_table,
    spec_values,
)
from privframe.engines.expressions import Bin
from privframe.numeric import exact
from privframe.plan.aggregates import Aggregate
from privframe.plan.aggregates.base import AUTO
from privframe.plan.keys import KeySet, product
from privframe.plan.postprocess import PostProcessing

__all__ = [
    "FORMATS",
    "MarginalsSpec",
    "QuerySpec",
    "ReportSpec",
    "SpecError",
    "Spending",
    "SyntheticSpec",
    "load_spec",
]


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_POST_KEYS = ("clamp", "intervals", "total")
_QUERY_KEYS = ("name", "sql", "group_by", "keys", "aggregates", "rho", "epsilon", "share", "delta")
_BUDGET_KEYS = ("rho", "epsilon", "share")
_MARGINALS_KEYS = ("name", "sets", "domains", "max_rows", *_BUDGET_KEYS)
_SYNTHETIC_KEYS = (
    "name",
    "method",
    "columns",
    "workload",
    "rows",
    "domains",
    "max_rows",
    "format",
    *_BUDGET_KEYS,
)
Method = Literal["aim", "mst"]
"""How a synthetic table is made (``Session.synthesize``'s ``method``)."""

FORMATS = ("csv", "parquet")
"""The file formats a ``[[synthetic]]`` table is written in."""


@dataclass(frozen=True)
class Spending:
    """How a report's queries spend, by the kind of its budget (as the Session spends it).

    Attributes:
        kind: ``"zcdp"`` (a zCDP or GDP budget, or a server's dataset spent
            in ρ), ``"pure"`` (``PureDP``), ``"approx"`` (``ApproxDP``) or
            ``"grant"`` (a server's dataset spent in ε: its grant says which).
        parameter: the budget parameter a query and ``[report]`` give: ``"rho"``
            (zCDP) or ``"epsilon"``.
        budget: the budget in words, for messages.

    Example:
        >>> import privframe as pf
        >>> from privframe.api.report_spec import Spending
        >>> Spending.of(pf.PureDP(1.0)).parameter, Spending.of(pf.GDP(1.0)).parameter
        ('epsilon', 'rho')
    """

    kind: str
    parameter: str
    budget: str

    @classmethod
    def of(cls, budget: Budget | None, *, epsilon: bool = False) -> Spending:
        """How a report with ``budget`` spends.

        None is a server's dataset, whose grant decides: ``epsilon`` when the
        spec spends ε (kind ``"grant"``: the grant's, pure DP or (ε, δ), checked
        on connecting), else ρ.
        """
        if isinstance(budget, PureDP):
            return cls("pure", "epsilon", "pure DP ([budget] epsilon = ...)")
        if isinstance(budget, ApproxDP):
            return cls("approx", "epsilon", "(epsilon, delta)-DP ([budget] epsilon and delta)")
        if budget is None and epsilon:
            return cls("grant", "epsilon", "the server grant's (pure DP or (epsilon, delta))")
        if budget is None:
            return cls("zcdp", "rho", "the server grant's, in rho (zCDP)")
        return cls("zcdp", "rho", "zCDP")

    @property
    def other(self) -> str:
        """The budget parameter of the other kinds, which this report's tables refuse."""
        return "epsilon" if self.parameter == "rho" else "rho"

    def refuse_other(self, table: Mapping[str, Any], where: str) -> None:
        """Refuse the other kinds' parameter in ``table``, naming what to write instead."""
        if self.other in table:
            raise SpecError(
                f"{where}.{self.other}: this report's budget is {self.budget}, whose queries "
                f"spend {self.parameter}: write {self.parameter} = ... instead of {self.other}"
            )


@dataclass(frozen=True)
class QuerySpec:
    """One query of a report, resolved from its spec: either SQL or a structured query.

    Attributes:
        name: the query's name (its CSV file is ``<name>.csv``).
        rho: in a zCDP report, the ρ its release spends, exactly as written (a
            ``share`` is resolved against ``[report] rho`` exactly: ten shares
            of 0.1 spend the total); None in a pure-DP or (ε, δ) report.
        delta: in a zCDP report, the δ a private key selection spends (None:
            the session's default); in an (ε, δ) report, the δ the release
            spends (None: 0). A pure-DP report's queries spend none (None).
        sql: the SQL text, for a SQL query.
        group_by: the grouping columns, for a structured query.
        keys: the public keys (None: chosen privately, or no grouping).
        aggregates: the aggregates, for a structured query.
        post: the release's post-processing (``clamp``, ``intervals`` and
            ``total`` in the spec, as in ``Query.release``).
        epsilon: in a pure-DP or (ε, δ) report, the ε its release spends, exactly
            as written or as its ``share`` of ``[report] epsilon``; None in a zCDP report.

    Raises:
        SpecError: both ``rho`` and ``epsilon``, or neither.
    """

    name: str
    rho: Fraction | None
    delta: float | None = None
    sql: str | None = None
    group_by: tuple[str, ...] = ()
    keys: KeySet | None = None
    aggregates: tuple[Aggregate, ...] = ()
    post: PostProcessing = field(default_factory=PostProcessing)
    epsilon: Fraction | None = None

    def __post_init__(self) -> None:
        if (self.rho is None) == (self.epsilon is None):
            raise SpecError(f"query {self.name!r}: give its budget as rho or as epsilon, once")

    @property
    def files(self) -> tuple[str, ...]:
        """The file it writes: ``<name>.csv``."""
        return (f"{self.name}.csv",)


Domains = Mapping[str, list[Any] | Bin]
"""Public values (or bins) per column: ``domains=`` of ``Session.marginals`` and ``synthesize``."""


@dataclass(frozen=True)
class MarginalsSpec:
    """A ``[[marginals]]`` entry: the arguments of one ``Session.marginals`` call.

    Attributes:
        name: the entry's name; table ``k`` (from 1) is written to ``<name>-<k>.csv``.
        sets: the column sets, one noisy count table each.
        rho: in a zCDP report, the ρ the call spends (split evenly over the tables).
        epsilon: in a pure-DP report, the ε it spends; None in a zCDP report.
        domains: public values (or bins) per column, beside the metadata's keys.
        max_rows: the most rows one person keeps (None: ``[contributions] max_rows``).

    Raises:
        SpecError: both ``rho`` and ``epsilon``, or neither.

    Example:
        >>> from fractions import Fraction
        >>> from privframe.api.report_spec import MarginalsSpec
        >>> MarginalsSpec("m", (("region",), ("region", "month")), Fraction(1, 10)).files
        ('m-1.csv', 'm-2.csv')
    """

    name: str
    sets: tuple[tuple[str, ...], ...]
    rho: Fraction | None
    epsilon: Fraction | None = None
    domains: Domains | None = None
    max_rows: int | None = None

    def __post_init__(self) -> None:
        if (self.rho is None) == (self.epsilon is None):
            raise SpecError(f"marginals {self.name!r}: give its budget as rho or as epsilon, once")

    @property
    def files(self) -> tuple[str, ...]:
        """The files it writes: one CSV per table, in the order of ``sets``."""
        return tuple(f"{self.name}-{k}.csv" for k in range(1, len(self.sets) + 1))


@dataclass(frozen=True)
class SyntheticSpec:
    """A ``[[synthetic]]`` entry: the arguments of one ``Session.synthesize`` call.

    Attributes:
        name: the entry's name; the table is written to ``<name>.<format>``.
        rho: in a zCDP report, the ρ the call spends.
        method: ``"aim"`` or ``"mst"``.
        columns: the columns synthesized (None: all but the privacy unit).
        workload: AIM's column sets to aim at (None: every pair of ``columns``).
        rows: how many rows to sample (None: the model's estimate of the data's size).
        domains: public values (or bins) per column, beside the metadata's keys.
        max_rows: the most rows one person keeps (None: ``[contributions] max_rows``).
        format: ``"csv"`` or ``"parquet"``.
        epsilon: in a pure-DP report, the ε it spends; None in a zCDP report.

    Raises:
        SpecError: both ``rho`` and ``epsilon``, or neither.

    Example:
        >>> from fractions import Fraction
        >>> from privframe.api.report_spec import SyntheticSpec
        >>> SyntheticSpec("people", Fraction(1, 2), format="parquet").files
        ('people.parquet',)
    """

    name: str
    rho: Fraction | None
    method: Method = "aim"
    columns: tuple[str, ...] | None = None
    workload: tuple[tuple[str, ...], ...] | None = None
    rows: int | None = None
    domains: Domains | None = None
    max_rows: int | None = None
    format: str = "csv"
    epsilon: Fraction | None = None

    def __post_init__(self) -> None:
        if (self.rho is None) == (self.epsilon is None):
            raise SpecError(f"synthetic {self.name!r}: give its budget as rho or as epsilon, once")

    @property
    def files(self) -> tuple[str, ...]:
        """The file it writes: ``<name>.<format>``."""
        return (f"{self.name}.{self.format}",)


Entry = QuerySpec | MarginalsSpec | SyntheticSpec
"""Any entry of a report: a query, a marginals call or a synthetic table."""


@dataclass(frozen=True)
class ReportSpec:
    """A validated report spec; paths are resolved against the spec's directory.

    Attributes:
        path: the spec file.
        title: the report's title; ledger labels are ``<title>/<query name>``.
        metadata: per column, its public ``type``, ``bounds``, ``keys``, ``candidates``
            and ``missing`` rule.
        contributions: ``max_groups``, ``max_rows_per_group`` and ``max_rows``.
        queries: the queries, in order (there may be none when other entries are given).
        data: the data file (``.parquet`` or ``.csv``); None for a server's dataset.
        privacy_unit: the column identifying a person; None for a server's dataset.
        budget: the ledger's total budget; None for a server's dataset.
        ledger: the SQLite ledger file; None for a server's dataset.
        dataset: ``[data] dataset``: the dataset of a privframe server the
            report runs on (``privframe report --server URL``), which keeps
            the budget and draws the noise; None for a local file.
        seed: a seed for the noise: the results are then NOT private (tests only).
        accounting: how the report states its guarantee: ``"zcdp"`` (default),
            ``"rdp"`` or ``"pld"`` (see :mod:`privframe.accounting.replay`); a
            pure-DP or (ε, δ) report states what its ledger charges (``"zcdp"``,
            the ledger's own accounting).
        allow_seeded_noise: the second key a ``seed`` needs; a seed without it
            is refused (:class:`SpecError`), so no spec line alone makes the
            noise non-private.
        same_data: ``[budget] same_data = true``: the ledger may record other
            columns (or another privacy unit) for what is the same data; see
            the Session's ``same_data``.
        spends_epsilon: a spec run on a server whose queries spend ``epsilon``:
            it needs a pure-DP or (ε, δ) grant (checked on connecting).
        marginals: the ``[[marginals]]`` entries, in order (local data only).
        synthetic: the ``[[synthetic]]`` entries, in order (local data; zCDP and pure-DP reports).

    Raises:
        SpecError: a ``seed`` without ``allow_seeded_noise=True``.
    """

    path: Path
    title: str
    metadata: Mapping[str, Mapping[str, Any]]
    contributions: Mapping[str, int]
    queries: tuple[QuerySpec, ...]
    data: Path | None = None
    privacy_unit: str | None = None
    budget: Budget | None = None
    ledger: Path | None = None
    dataset: str | None = None
    seed: int | None = None
    accounting: str = "zcdp"
    allow_seeded_noise: bool = False
    same_data: bool = False
    spends_epsilon: bool = False
    marginals: tuple[MarginalsSpec, ...] = ()
    synthetic: tuple[SyntheticSpec, ...] = ()

    def __post_init__(self) -> None:
        if self.seed is not None and not self.allow_seeded_noise:
            raise SpecError(
                f"{str(self.path)!r} sets [report] seed: the noise would be reproducible and "
                "the results NOT differentially private. Seeds are for tests only: remove the "
                "line, or, for a test, run with --allow-seeded-noise (privframe report) or "
                "allow_seeded_noise=True (load_spec). Nothing was spent."
            )

    @property
    def spends_from(self) -> str:
        """Where the report's budget is, in words: its ledger file or the server's dataset.

        Example:
            >>> from pathlib import Path
            >>> from privframe.api.report_spec import ReportSpec
            >>> ReportSpec(Path("s.toml"), "t", {}, {}, (), dataset="sales").spends_from
            "your budget on the server's dataset 'sales'"
        """
        if self.dataset is not None:
            return f"your budget on the server's dataset {self.dataset!r}"
        return f"the ledger {str(self.ledger)!r}"

    @property
    def spending(self) -> Spending:
        """How the report's queries spend: by its budget's kind (a server's: by its queries).

        Example:
            >>> from pathlib import Path
            >>> import privframe as pf
            >>> from privframe.api.report_spec import ReportSpec
            >>> ReportSpec(Path("s.toml"), "t", {}, {}, (), budget=pf.PureDP(1.0)).spending.kind
            'pure'
        """
        return Spending.of(self.budget, epsilon=self.spends_epsilon)

    def label(self, entry: Entry) -> str:
        """The ledger label of an entry's release: ``<title>/<name>``."""
        return f"{self.title}/{entry.name}"


def _post(table: Mapping[str, Any], where: str) -> PostProcessing:
    return PostProcessing(
        spec_flag(table, "clamp", where, True),
        spec_flag(table, "intervals", where, False),
        spec_flag(table, "total", where, False),
    )


def _aggregate(
    raw: object, where: str, metadata: Mapping[str, Mapping[str, Any]]
) -> tuple[Aggregate, ...]:
    table = spec_table(raw, where)
    check_keys(
        table, where, ("kind", "column", "bounds", "q", "candidates", "missing", "alias"), ("kind",)
    )
    kind = spec_string(table, "kind", where)
    if kind not in AGGREGATE_KINDS:
        raise SpecError(f"{where}.kind must be one of {', '.join(AGGREGATE_KINDS)}, got {kind!r}")
    build, allowed = AGGREGATE_KINDS[kind]
    where = f"{where} (kind = {kind!r})"
    check_keys(table, where, allowed, [k for k in ("column", "q") if k in allowed])
    args: list[Any] = []
    facts: Mapping[str, Any] = {}
    if "column" in allowed:
        column = spec_string(table, "column", where)
        facts = metadata.get(column, {})
        if table.get("bounds") == AUTO:
            raise SpecError(
                f'{where}: bounds = "auto" is for single releases: a report charges all its '
                "queries in one step, and automatic bounds spend their share before it. Give "
                "bounds = [lower, upper], e.g. as chosen by query.tune"
            )
        if "bounds" in table:
            bounds = spec_bounds(table["bounds"], f"{where}.bounds")
        elif "bounds" in facts:
            bounds = facts["bounds"]
        else:
            raise SpecError(f"{where}: give bounds = [lower, upper], or metadata.{column}.bounds")
        args = [column, table["q"], bounds] if "q" in allowed else [column, bounds]
    options: dict[str, Any] = {}
    if "candidates" in table:
        options["candidates"] = spec_integer(table, "candidates", where)
    elif "candidates" in allowed and "candidates" in facts:
        options["candidates"] = facts["candidates"]
    if "missing" in allowed and ("missing" in table or "missing" in facts):
        options["missing"] = table.get("missing", facts.get("missing"))
    built = spec_guard(where, lambda: build(*args, **options))
    aggregates = built if isinstance(built, tuple) else (built,)
    if "alias" in table:
        if len(aggregates) != 1:
            raise SpecError(f"{where}: alias needs a single output (q has several values)")
        alias = spec_string(table, "alias", where)
        aggregates = (spec_guard(where, lambda: aggregates[0].alias(alias)),)
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
    given = spec_table(given, f"{where}.keys")
    check_keys(given, f"{where}.keys", group_by)
    per_column = {
        column: spec_values(given[column], f"{where}.keys.{column}")
        if column in given
        else metadata.get(column, {}).get("keys")
        for column in group_by
    }
    present = {c: values for c, values in per_column.items() if values is not None}
    if not present:
        return None  # chosen privately: the release spends δ
    return spec_guard(f"{where}.keys", lambda: product(**present))


def _query(
    raw: object,
    where: str,
    total: Fraction | None,
    metadata: Mapping[str, Mapping[str, Any]],
    spending: Spending,
) -> tuple[QuerySpec, Fraction | None]:
    """One query, and its share of ``[report] rho`` (or ``epsilon``) if it gave one."""
    table = spec_table(raw, where)
    check_keys(table, where, (*_QUERY_KEYS, *_POST_KEYS), ("name",))
    name = _name(table, where)
    where = f"{where} ({name!r})"
    amount, share = _query_budget(table, where, total, spending)
    rho, epsilon = (None, amount) if spending.parameter == "epsilon" else (amount, None)
    if "delta" in table and spending.kind == "pure":
        raise SpecError(
            f"{where}.delta: this report's budget is {spending.budget}, which spends no delta: "
            "remove it, or give [budget] delta = ... for an (epsilon, delta) budget"
        )
    delta = spec_positive(table, "delta", where) if "delta" in table else None
    structured = [k for k in ("group_by", "keys", "aggregates") if k in table]
    if "sql" in table:
        if structured:
            raise SpecError(
                f"{where}: give sql or a structured query (group_by, keys, aggregates), "
                f"not both; found sql and {structured[0]}"
            )
        sql = spec_string(table, "sql", where)
        post = _post(table, where)
        return QuerySpec(name, rho, delta, sql=sql, post=post, epsilon=epsilon), share
    if "aggregates" not in table:
        raise SpecError(f'{where}: give sql = "SELECT ..." or aggregates = [...]')
    group_by = spec_names(table, "group_by", where) if "group_by" in table else ()
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
    unkeyed = [c for c in group_by if keys is None or c not in keys.columns]
    if unkeyed and spending.kind == "pure":
        raise SpecError(
            f"{where}: group_by columns {unkeyed} have no keys (in the query or the "
            "metadata): they would be chosen privately, which needs delta, and this report's "
            f"budget is {spending.budget}, which has none; give keys for every group column, "
            "or give [budget] delta = ... for an (epsilon, delta) budget"
        )
    # (A zCDP query without any keys defaults to all the delta left; _checked refuses that.)
    if unkeyed and delta is None and (keys is not None or spending.kind == "approx"):
        raise SpecError(
            f"{where}: group_by columns {unkeyed} have no keys (in the query or the "
            "metadata): they would be chosen privately, spending delta; give delta = ... "
            "to opt in, or keys for every group column"
        )
    post = _post(table, where)
    if post.total and not group_by:
        raise SpecError(f"{where}.total adds a row for all groups together: it needs group_by")
    built = QuerySpec(name, rho, delta, None, group_by, keys, aggregates, post, epsilon)
    return built, share


def _name(table: Mapping[str, Any], where: str) -> str:
    """An entry's name, which names its output files."""
    name = spec_string(table, "name", where)
    if not _NAME.fullmatch(name):
        raise SpecError(
            f"{where}.name {name!r} must be letters, digits, '_', '.' or '-' "
            "(it names the entry's output files)"
        )
    return name


def _column_sets(value: object, where: str) -> tuple[tuple[str, ...], ...]:
    """An array of column sets: each a column name or an array of names."""
    if not isinstance(value, list) or not value:
        raise SpecError(
            f'{where} must be a non-empty array of column sets, e.g. [["sex"], ["sex", "age"]]'
        )
    sets = []
    for i, item in enumerate(value):
        names = [item] if isinstance(item, str) else item
        if (
            not isinstance(names, list)
            or not names
            or not all(isinstance(c, str) and c for c in names)
        ):
            raise SpecError(
                f"{where}[{i}] must be a column name or an array of column names, got {item!r}"
            )
        sets.append(tuple(names))
    return tuple(sets)


def _count(
    table: Mapping[str, Any], key: str, where: str, least: int, most: int | None = None
) -> int | None:
    """``table[key]`` as a whole number >= ``least`` (and <= ``most``); None if absent."""
    if key not in table:
        return None
    value = spec_integer(table, key, where)
    if value < least or (most is not None and value > most):
        within = f"between {least} and {most}" if most is not None else f"at least {least}"
        raise SpecError(f"{where}.{key} must be {within}, got {value}")
    return value


def _table_arguments(table: Mapping[str, Any], where: str) -> tuple[Domains | None, int | None]:
    """The ``domains`` and ``max_rows`` of a marginals or synthetic entry."""
    domains = spec_domains(table["domains"], f"{where}.domains") if "domains" in table else None
    return domains, _count(table, "max_rows", where, 1)


def _marginals(
    raw: object, where: str, total: Fraction | None, spending: Spending
) -> tuple[MarginalsSpec, Fraction | None]:
    """One ``[[marginals]]`` entry, and its share of ``[report] rho`` (or ``epsilon``) if given."""
    table = spec_table(raw, where)
    check_keys(table, where, _MARGINALS_KEYS, ("name", "sets"))
    where = f"{where} ({_name(table, where)!r})"
    amount, share = _tables_budget(table, where, total, spending, "marginals are measured")
    rho, epsilon = (None, amount) if spending.parameter == "epsilon" else (amount, None)
    sets = _column_sets(table["sets"], f"{where}.sets")
    domains, max_rows = _table_arguments(table, where)
    return MarginalsSpec(table["name"], sets, rho, epsilon, domains, max_rows), share


def _synthetic(
    raw: object, where: str, total: Fraction | None, spending: Spending
) -> tuple[SyntheticSpec, Fraction | None]:
    """One ``[[synthetic]]`` entry, and its share of ``[report] rho`` (or ``epsilon``) if given."""
    table = spec_table(raw, where)
    check_keys(table, where, _SYNTHETIC_KEYS, ("name",))
    where = f"{where} ({_name(table, where)!r})"
    amount, share = _tables_budget(table, where, total, spending, "synthetic data is made")
    method = spec_string(table, "method", where) if "method" in table else "aim"
    if method not in synthesis.METHODS:
        raise SpecError(
            f"{where}.method must be one of {', '.join(synthesis.METHODS)}, got {method!r}"
        )
    file_format = spec_string(table, "format", where) if "format" in table else "csv"
    if file_format not in FORMATS:
        raise SpecError(f"{where}.format must be one of {', '.join(FORMATS)}, got {file_format!r}")
    columns = spec_names(table, "columns", where) if "columns" in table else None
    if columns == ():
        raise SpecError(f"{where}.columns must name at least one column")
    workload = _column_sets(table["workload"], f"{where}.workload") if "workload" in table else None
    rows = _count(table, "rows", where, 0, synthesis.MAX_ROWS)
    domains, max_rows = _table_arguments(table, where)
    rho, epsilon = (None, amount) if spending.parameter == "epsilon" else (amount, None)
    built = SyntheticSpec(
        table["name"],
        rho,
        cast(Method, method),
        columns,
        workload,
        rows,
        domains,
        max_rows,
        file_format,
        epsilon,
    )
    return built, share


def _tables_budget(
    table: Mapping[str, Any], where: str, total: Fraction | None, spending: Spending, what: str
) -> tuple[Fraction, Fraction | None]:
    """A marginals or synthetic entry's budget: zCDP and pure-DP reports only."""
    if spending.kind not in ("zcdp", "pure"):
        raise SpecError(
            f"{where}: {what} in zCDP and pure-DP reports; this report's budget is "
            f"{spending.budget}"
        )
    return _query_budget(table, where, total, spending)


def _query_budget(
    table: Mapping[str, Any], where: str, total: Fraction | None, spending: Spending
) -> tuple[Fraction, Fraction | None]:
    """A query's exact ρ (or ε), from its own ``rho`` (``epsilon``) or its ``share`` of the total.

    Shares are exact: ten shares of 0.1 of ``[report] epsilon = 1`` spend 1.
    """
    name = spending.parameter
    spending.refuse_other(table, where)
    if (name in table) == ("share" in table):
        raise SpecError(f"{where}: give exactly one of {name} and share")
    if name in table:
        return exact(name, spec_positive(table, name, where)), None
    share = exact("share", spec_positive(table, "share", where))
    if total is None:
        raise SpecError(f"{where}.share needs a total: [report] {name} = ...")
    return share * total, share


_ENTRY_KINDS = ("queries", "marginals", "synthetic")
_REPORT_KEYS = ("title", "rho", "epsilon", "seed", "accounting")


def _report(
    report: Mapping[str, Any], spending: Spending
) -> tuple[str, str, Fraction | None, int | None]:
    """The ``[report]`` table: its title, accounting method, total ρ (or ε) and seed."""
    check_keys(report, "report", _REPORT_KEYS, ("title",))
    title = spec_string(report, "title", "report")
    accounting = spec_string(report, "accounting", "report") if "accounting" in report else "zcdp"
    if accounting not in METHODS:
        raise SpecError(
            f"report: accounting must be one of {', '.join(METHODS)}, got {accounting!r}"
        )
    if accounting != "zcdp" and spending.kind != "zcdp":
        raise SpecError(
            f"report.accounting: this report's budget is {spending.budget}, and its page states "
            "what the ledger charges, in epsilon; rdp and pld restate a zCDP report's "
            f"releases: remove accounting = {accounting!r}"
        )
    spending.refuse_other(report, "report")
    name = spending.parameter
    total = exact(name, spec_positive(report, name, "report")) if name in report else None
    seed = spec_integer(report, "seed", "report") if "seed" in report else None
    return title, accounting, total, seed


def _entries(
    raw: Mapping[str, Any],
    total: Fraction | None,
    metadata: Mapping[str, Mapping[str, Any]],
    spending: Spending,
) -> tuple[tuple[QuerySpec, ...], tuple[MarginalsSpec, ...], tuple[SyntheticSpec, ...]]:
    """The ``[[queries]]``, ``[[marginals]]`` and ``[[synthetic]]`` entries, each valid.

    Their names and output files are unique, and their budget within the total.
    """
    given = [key for key in _ENTRY_KINDS if key in raw]
    if not given:
        raise SpecError(
            "the spec has nothing to release: give [[queries]], [[marginals]] or [[synthetic]]"
        )
    for key in given:
        if not isinstance(raw[key], list) or not raw[key]:
            raise SpecError(f"{key} must be a non-empty array of tables: [[{key}]]")
    queries = [
        _query(q, f"queries[{i}]", total, metadata, spending)
        for i, q in enumerate(raw.get("queries", []))
    ]
    marginals = [
        _marginals(m, f"marginals[{i}]", total, spending)
        for i, m in enumerate(raw.get("marginals", []))
    ]
    synthetic = [
        _synthetic(t, f"synthetic[{i}]", total, spending)
        for i, t in enumerate(raw.get("synthetic", []))
    ]
    parsed: list[tuple[Entry, Fraction | None]] = [*queries, *marginals, *synthetic]
    where = " and ".join(given)
    for what, values in (
        ("names", [e.name for e, _ in parsed]),
        ("output files", [f for e, _ in parsed for f in e.files]),
    ):
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise SpecError(f"{where}: the {what} {repeated} are used twice; {what} must be unique")
    if total is not None:
        shares = sum((share for _, share in parsed if share is not None), Fraction(0))
        if shares > 1:
            raise SpecError(f"{where}: the shares add up to {float(shares):g}, more than 1")
        name = spending.parameter
        asked = sum((e.rho or e.epsilon or Fraction(0) for e, _ in parsed), Fraction(0))
        if asked > total:
            raise SpecError(
                f"{where} ask for {name} = {float(asked):.6g} in total, more than [report] "
                f"{name} = {float(total):g}"
            )
    return (
        tuple(q for q, _ in queries),
        tuple(m for m, _ in marginals),
        tuple(t for t, _ in synthetic),
    )


def load_spec(path: str | Path, *, allow_seeded_noise: bool = False) -> ReportSpec:
    """Read and validate a report spec (TOML); every problem names its key.

    The ``[budget]`` decides how the queries spend, as a Session's budget
    does: ``rho`` in a zCDP report, ``epsilon`` (and ``delta`` for an (ε, δ)
    budget) in a pure-DP or (ε, δ) one (``docs/reports.md``).

    Args:
        path: the spec file.
        allow_seeded_noise: accept a ``[report] seed``, which makes the
            results NOT private (for tests). Without it such a spec is refused.

    Raises:
        SpecError: the file is missing or not TOML, a key is unknown or
            missing, or a value has the wrong type or range (the budget
            parameter of another kind of budget, say); or it sets a seed
            without ``allow_seeded_noise``.
    """
    path = Path(path)
    raw = read_toml(path)
    check_keys(
        raw,
        "the spec",
        ("report", "data", "budget", "metadata", "contributions", *_ENTRY_KINDS),
        ("report", "data", "contributions"),
    )
    report = spec_table(raw["report"], "report")
    check_keys(report, "report", _REPORT_KEYS, ("title",))
    data = spec_table(raw["data"], "data")
    if "dataset" in data:
        source = _remote_source(raw, data, "seed" in report)
    else:
        source = _local_source(raw, data, path.parent)
    spending = Spending.of(source.get("budget"), epsilon=bool(source.get("spends_epsilon")))
    title, accounting, total, seed = _report(report, spending)
    contributions = spec_contributions(spec_table(raw["contributions"], "contributions"))
    metadata = spec_metadata(spec_table(raw.get("metadata", {}), "metadata"))
    queries, marginals, synthetic = _entries(raw, total, metadata, spending)
    return ReportSpec(
        path=path,
        title=title,
        metadata=metadata,
        contributions=contributions,
        queries=queries,
        seed=seed,
        accounting=accounting,
        allow_seeded_noise=allow_seeded_noise,
        marginals=marginals,
        synthetic=synthetic,
        **source,
    )


def _local_source(raw: Mapping[str, Any], data: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    """The data file, its privacy unit and the ledger with its budget, of a spec run locally."""
    check_keys(data, "data", ("path", "privacy_unit"), ("path", "privacy_unit"))
    if "budget" not in raw:
        raise SpecError("the spec: missing the required key 'budget' (or give [data] dataset)")
    budget = spec_table(raw["budget"], "budget")
    check_keys(budget, "budget", (*BUDGET_KEYS, "ledger", "same_data"), ("ledger",))
    allowance = spec_budget(budget, also=("ledger", "same_data"))
    same_data = budget.get("same_data", False)
    if not isinstance(same_data, bool):
        raise SpecError(f"budget.same_data must be true or false, got {kind_of(same_data)}")
    return {
        "data": folder / spec_string(data, "path", "data"),
        "privacy_unit": spec_string(data, "privacy_unit", "data"),
        "budget": allowance,
        "ledger": folder / spec_string(budget, "ledger", "budget"),
        "same_data": same_data,
    }


def _remote_source(raw: Mapping[str, Any], data: Mapping[str, Any], seeded: bool) -> dict[str, Any]:
    """The dataset of a spec run on a privframe server, whose budget and noise are the server's."""
    check_keys(data, "data", ("dataset",))
    if "budget" in raw:
        raise SpecError(
            "budget: a spec run on a server ([data] dataset) spends the analyst's budget on "
            "the server, which keeps it; remove [budget]"
        )
    if seeded:
        raise SpecError("report.seed: a server draws its own noise; remove the seed")
    for key in ("marginals", "synthetic"):
        if key in raw:
            raise SpecError(
                f"{key}: a spec run on a server ([data] dataset) releases [[queries]] only; "
                f"[[{key}]] reads a local data file ([data] path)"
            )
    # The grant's kind is known on connecting: a spec that writes epsilon spends an epsilon grant.
    tables = [raw.get("report", {}), *(q for q in raw.get("queries", []) if isinstance(q, dict))]
    spends_epsilon = any(isinstance(t, dict) and "epsilon" in t for t in tables)
    return {"dataset": spec_string(data, "dataset", "data"), "spends_epsilon": spends_epsilon}
